"""Compares `ffpa-index platform-tag` with `auditwheel show` on real ELF files.

Each shared library built by the test project (one C++ linked with libstdc++,
one C with newer glibc needs) is placed in a tree as an extension module; ffpa-index computes the
tag of the tree, packs the wheel with `auto`, and auditwheel (the reference
implementation of the manylinux policy, from the pinned tool venv) must report
the same manylinux_2_Y as the constraint. Registered in CTest with label `wheel`.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("which", ["TESTLIB", "TESTLIB_C"])
def test_platform_tag_as_auditwheel(ffpa_env, work, which):
    """Each test library: platform-tag, pack --tag ...-auto and auditwheel agree."""
    assert compare(ffpa_env("INDEX"), Path(ffpa_env(which)), work) is not None


def compare(ffpa_index, so, work):
    """Returns the agreed tag, or None after printing the disagreement."""
    tree = work / "tree" / "ffpa_index_selftest"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    shutil.copyfile(so, tree / "_native.cpython-312-x86_64-linux-gnu.so")
    meta = work / "meta.txt"
    meta.write_text("Summary: s\nRequires-Python: >=3.10\n")

    res = subprocess.run([ffpa_index, "platform-tag", "--tree", str(work / "tree")], capture_output=True, text=True)
    if res.returncode != 0:
        print(res.stdout, res.stderr)
        return None
    ours = res.stdout.split()[0]
    print("ffpa-index platform-tag:", res.stdout.strip())

    res = subprocess.run([ffpa_index, "pack", "--tree", str(work / "tree"), "--name", "ffpa-index-selftest",
                          "--version", "1.0", "--tag", "cp312-cp312-auto", "--metadata", str(meta),
                          "--out-dir", str(work / "dist"), "--source-date-epoch", "1700000000"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        print(res.stderr)
        return None
    whl = Path(res.stdout.strip())
    if not whl.name.endswith(f"-cp312-cp312-{ours}.whl"):
        print(f"pack --tag ...-auto gave {whl.name}, platform-tag said {ours}")
        return None

    res = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(whl)], capture_output=True, text=True)
    text = " ".join((res.stdout + res.stderr).split())
    print("auditwheel show:", text)
    if res.returncode != 0:
        return None
    m = re.search(r'constrains the platform tag to "(manylinux_2_\d+_x86_64)"', text)
    if not m:
        m = re.search(r'consistent with the following platform tag: "(manylinux_2_\d+_x86_64)"', text)
    if not m:
        print("could not find auditwheel's platform tag in its output")
        return None
    theirs = m.group(1)
    if theirs != ours:
        print(f"MISMATCH on {so.name}: ffpa-index says {ours}, auditwheel says {theirs}")
        return None
    print(f"agree on {so.name}: {ours}")
    return ours



