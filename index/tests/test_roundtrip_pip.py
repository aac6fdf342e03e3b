"""Packs small trees with the ffpa-index CLI and checks the wheels with Python's
own tools: zipfile reads them (including a ZIP64 one), RECORD is recomputed with
hashlib, packaging parses the names, and pip installs the wheel into a clean venv
where it is imported. The tree is the fixture project ctest/packages/selftest.
"""
import base64
import csv
import email.parser
import hashlib
import io
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

EPOCH = 1700000000


def check(cond, msg):
    assert cond, msg


def pack(ffpa_index, tree, out, *extra, version="0.3.0", tag="py3-none-any", meta=None, readme=None):
    cmd = [ffpa_index, "pack", "--tree", str(tree), "--name", "ffpa-index-selftest", "--version", version,
           "--tag", tag, "--metadata", str(meta), "--out-dir", str(out), "--source-date-epoch", str(EPOCH), *extra]
    if readme:
        cmd += ["--readme", str(readme)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"pack failed: {res.stderr}"
    return Path(res.stdout.strip())


def record_digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def check_wheel(whl: Path, expect_files: dict):
    name, ver, build, tags = parse_wheel_filename(whl.name)
    check(name == canonicalize_name("ffpa-index-selftest"), f"{whl.name}: name {name}")
    di = f"ffpa_index_selftest-{ver}.dist-info"
    with zipfile.ZipFile(whl) as z:
        check(z.testzip() is None, f"{whl.name}: CRC check failed")
        names = z.namelist()
        dist = [n for n in names if n.startswith(di + "/")]
        check(names[-len(dist):] == dist and len(dist) == 3, f"{whl.name}: .dist-info not last: {names[-4:]}")
        body = [n for n in names if not n.startswith(di + "/")]
        check(body == sorted(body), f"{whl.name}: entries not sorted")
        rows = list(csv.reader(io.StringIO(z.read(di + "/RECORD").decode())))
        listed = {r[0]: r for r in rows}
        check(set(listed) == set(names), f"{whl.name}: RECORD and members differ")
        check(listed[di + "/RECORD"][1:] == ["", ""], f"{whl.name}: RECORD's own line is not ',,'")
        for n in names:
            if n == di + "/RECORD":
                continue
            data = z.read(n)
            check(listed[n][1] == record_digest(data), f"{whl.name}: hash of {n}")
            check(listed[n][2] == str(len(data)), f"{whl.name}: size of {n}")
        for info in z.infolist():
            check(info.date_time == (2023, 11, 14, 22, 13, 20), f"{n}: timestamp {info.date_time}")
            check(info.extra in (b"",) or info.file_size >= 0xFFFFFFFF or z.start_dir >= 0xFFFFFFFF
                  or info.extra[:2] == b"\x01\x00", f"{info.filename}: unexpected extra field")
            mode = info.external_attr >> 16
            check(mode in (0o100644, 0o100755), f"{info.filename}: mode {oct(mode)}")
        for rel, content in expect_files.items():
            check(z.read(rel) == content, f"{whl.name}: content of {rel}")
        wheel_meta = email.parser.Parser().parsestr(z.read(di + "/WHEEL").decode())
        check(sorted(wheel_meta.get_all("Tag")) == sorted(str(t) for t in tags), f"{whl.name}: Tag lines")
        meta = email.parser.Parser().parsestr(z.read(di + "/METADATA").decode())
        check(meta["Name"] == "ffpa-index-selftest" and meta["Version"] == ver.__str__(), f"{whl.name}: METADATA name/version")
        check(meta["Requires-Python"] == ">=3.10", f"{whl.name}: Requires-Python")
        return z.infolist(), meta


def test_roundtrip_pip(ffpa_env, work, package, venv_for):
    class a:  # noqa: N801  (the engine, as the checks below call it)
        ffpa_index = ffpa_env("INDEX")

    project = package("selftest", work / "project")
    tree, meta, readme = project / "tree", project / "meta.txt", project / "README.md"
    pkg = tree / "ffpa_index_selftest"

    expect = {"ffpa_index_selftest/__init__.py": (pkg / "__init__.py").read_bytes(),
              "ffpa_index_selftest/data.txt": (pkg / "data.txt").read_bytes()}
    whl = pack(a.ffpa_index, tree, work / "dist", meta=meta, readme=readme)
    check(whl.name == "ffpa_index_selftest-0.3.0-py3-none-any.whl", f"file name {whl.name}")
    _, m = check_wheel(whl, expect)
    check(m["Description-Content-Type"] == "text/markdown", "Description-Content-Type")
    check("A *markdown* description." in m.get_payload(), "README is the METADATA body")

    local = pack(a.ffpa_index, tree, work / "dist_local", version="0.3.0+CU13", meta=meta)
    check(local.name == "ffpa_index_selftest-0.3.0+cu13-py3-none-any.whl", f"local file name {local.name}")
    check_wheel(local, expect)

    # Same inputs, other --jobs: the same bytes.
    again = pack(a.ffpa_index, tree, work / "dist_again", "--jobs", "1", meta=meta, readme=readme)
    check(again.read_bytes() == whl.read_bytes(), "repacking with --jobs 1 changed the bytes")

    # ZIP64 by entry count (real trigger) and by the size test hook, read by zipfile.
    many = work / "many"
    mpkg = many / "ffpa_index_selftest"
    mpkg.mkdir(parents=True)
    (mpkg / "__init__.py").write_text("")
    for i in range(65540):
        (mpkg / f"f{i:05d}.txt").write_text(str(i))
    big = pack(a.ffpa_index, many, work / "dist_many", meta=meta)
    with zipfile.ZipFile(big) as z:
        check(len(z.namelist()) == 65541 + 3, "ZIP64 count: zipfile sees every entry")
        check(z.read("ffpa_index_selftest/f65539.txt") == b"65539", "ZIP64 count: last member")
    forced = pack(a.ffpa_index, tree, work / "dist_forced", "--test-zip64-threshold", "64", meta=meta)
    check_wheel(forced, expect)
    with open(forced, "rb") as f:
        raw = f.read()
    check(b"PK\x06\x06" in raw and b"PK\x06\x07" in raw, "forced ZIP64: end record and locator present")

    # pip installs it into a clean venv, and the package imports from there.
    py = venv_for(ffpa_env("TOOLS_PYTHON"), "roundtrip")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    res = subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-deps", str(whl)],
                         capture_output=True, text=True, env=env)
    check(res.returncode == 0, f"pip install failed: {res.stdout}{res.stderr}")
    res = subprocess.run([py, "-c", "import ffpa_index_selftest as m, importlib.metadata as md; "
                          "print(m.GREETING); print(md.version('ffpa-index-selftest'))"],
                         capture_output=True, text=True, cwd=work, env=env)
    check(res.returncode == 0 and res.stdout.split() == ["hello", "from", "the", "wheel", "0.3.0"],
          f"import after install: {res.stdout}{res.stderr}")
    res = subprocess.run([py, "-m", "pip", "show", "-f", "ffpa-index-selftest"], capture_output=True, text=True, env=env)
    check("ffpa_index_selftest/data.txt" in res.stdout, "pip lists the installed files from RECORD")

    res = subprocess.run([a.ffpa_index, "verify-wheel", str(whl), str(local), str(big), str(forced)],
                         capture_output=True, text=True)
    check(res.returncode == 0, f"verify-wheel: {res.stdout}")
