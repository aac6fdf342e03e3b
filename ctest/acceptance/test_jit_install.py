"""The pure wheel with its `jit` extra, from the build's local index, in a clean venv:
the first-use build (python/ffpa_attn/jit.py) with the toolchain from PyPI alone.
CTest: acceptance.pure.jit (slow: the extra downloads nvcc, NVVM and CUTLASS, a few hundred MB
the first time; pip's cache keeps later runs short).

`pip install "ffpa-attn[jit]==V" --index-url <site>/pypi/simple/ --extra-index-url PyPI` into
a venv of the first CPython with its headers; the machine's CUDA toolkit is hidden (no
CUDA_HOME, /usr/local/cuda/bin off PATH), so nvcc, CMake and Ninja come from the venv. Then:
the installed package holds no binary; `python -m ffpa_attn.info --json` reports a complete
toolchain from the venv; `python -m ffpa_attn.jit build --arch 90 --head-dims 64 --dtypes
fp16` builds (progress on stderr) and a second run reuses the entry silently; the entry
loads as ffpa_attn._C with the sm_90 code it was built for.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import ffpa_manifest  # the shared manifest reader
import pytest

REPO = Path(__file__).resolve().parents[2]


def _python_with_headers(pythons: list[str]) -> str:
    probe = "import sysconfig, os; print(os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"
    for py in pythons:
        r = subprocess.run([py, "-c", probe], capture_output=True, text=True)
        if r.stdout.strip() == "True":
            return py
    pytest.fail(f"none of {pythons} has its headers (Python.h): the first-use build needs them "
                "(tools/bootstrap installs python3-dev)")


def test_pure_wheel_with_jit_extra_builds_and_reuses(ffpa_env, work, venv_for, runner, http_server):
    dist = Path(ffpa_env("DIST"))
    manifest = ffpa_manifest.load(dist / "ffpa-release-manifest.json")
    (pure,) = [w for w in manifest["wheels"] if w["kind"] == "pure"]
    site = http_server(Path(ffpa_env("SITE")))
    py = _python_with_headers([p for p in ffpa_env("PYTHONS").split(os.pathsep) if p])
    vpy = venv_for(py, "jit")
    venv = vpy.parent.parent
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PIP_FIND_LINKS", "CUDA_HOME", "CUDA_PATH", "CXX")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # The machine's toolkit hidden: nvcc, cmake and ninja must come from the extra.
    env["PATH"] = os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"])
    env["FFPA_CACHE_DIR"] = str(work / "cache")
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")

    def must(cmd, **kw):
        print("+ " + " ".join(map(str, cmd)), flush=True)
        r = runner(cmd, env=env, cwd=str(work), **kw)
        assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
        return r

    must([vpy, "-m", "pip", "install", "-q", f"ffpa-attn[jit]=={pure['version']}", "--index-url",
          f"{site}pypi/simple/", "--extra-index-url", "https://pypi.org/simple"])
    pkg = Path(must([vpy, "-c", "import ffpa_attn, os; print(os.path.dirname(ffpa_attn.__file__))"]).stdout.strip())
    assert pkg.is_relative_to(venv), pkg
    binaries = [p for p in pkg.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
    assert not binaries, f"the pure wheel installed binaries: {binaries}"

    status = json.loads(must([vpy, "-m", "ffpa_attn.info", "--json"]).stdout)["jit"]
    assert status["toolchain_complete"], status["missing"]
    for tool in ("nvcc", "cmake", "ninja"):
        assert Path(status[tool]).resolve().is_relative_to(venv.resolve()), (tool, status[tool])

    cmd = [vpy, "-m", "ffpa_attn.jit", "build", "--arch", "90", "--head-dims", "64", "--dtypes", "fp16"]
    first = must(cmd)
    assert "ffpa_attn.jit: building the FFPA kernels for sm_90, head dim 64, fp16" in first.stderr, first.stderr
    entry = Path(first.stdout.strip().splitlines()[-1])
    assert entry.is_relative_to(work / "cache" / "entries")
    second = must(cmd)
    assert second.stderr == "" and second.stdout.strip() == str(entry)

    loaded = must([vpy, "-c", "import sys; from pathlib import Path; from ffpa_attn import cuda, jit; "
                   "jit.load(Path(sys.argv[1])); print(cuda.COMPILED_ARCHS, cuda.COMPILED_HEAD_DIMS, cuda.EXTENSION_PATH)",
                   entry])
    assert re.match(r"\('90',\) \(64,\) " + re.escape(str(entry)), loaded.stdout), loaded.stdout
