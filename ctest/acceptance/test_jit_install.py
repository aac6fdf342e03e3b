"""The pure wheel with its `jit` extra, from the build's local index, in a clean venv:
first-use builds (python/ffpa_attn/jit.py) with the toolchain from PyPI alone.
CTest: acceptance.pure.jit (slow: the extra downloads nvcc, NVVM and CUTLASS, a few hundred
MB the first time, pip's cache keeps later runs short; then two sm_90 builds, D = 64 and
the union D = 64, 128: 598 s on this 2-core machine under a load average of 19,
docs/perf.md "First-use builds").

`pip install "ffpa-attn[jit]==V" --index-url <site>/pypi/simple/ --extra-index-url PyPI` into
a venv of the first CPython with its headers. Every ffpa command then runs in a private
mount namespace (`unshare --mount`, root) where the machine's CUDA toolkit is really gone:
its directories (/usr/local/cuda*, CUDA_HOME, the toolkit of any nvcc on PATH) are covered
by empty tmpfs mounts, so every link to them (/usr/local/lib/libcudart_static.a,
/usr/local/include/cuda_runtime.h ...) dangles; LIBRARY_PATH, CPATH and the other compiler
variables are cleared and PATH is the venv's bin, /usr/bin and /bin. The namespace is
checked before it is used: no nvcc, a link with -lcudadevrt, -lcudart_static or -lcudart
fails (ld's own search path included) and the host compiler finds no cuda_runtime.h. Where
such a namespace cannot be made (no unshare, not root, mounts refused) or the toolkit stays
visible, the test is SKIPPED with that reason (CTest's SKIP_RETURN_CODE): never a weaker
pass.

In it: `python -m ffpa_attn.info --json` reports a complete toolchain from the venv (its
probe compiled and linked); one process asks for sm_90 kernels for head dim 64, then 128
(ffpa_attn.jit.ensure, what every CUDA call asks): the first builds {64}, the second their
union {64, 128}, which the process then runs on; `build --for-model` on a config whose
layers use D = 64 and D = 128 finds that entry (no build); a second process loads it for
both head dims silently.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path

import ffpa_manifest  # the shared manifest reader
import pytest

REPO = Path(__file__).resolve().parents[2]
# Variables through which a compiler or linker would see the machine's toolkit anyway.
_CLEARED = ("LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LD_LIBRARY_PATH", "CUDA_HOME",
            "CUDA_PATH", "CUDACXX", "CUDAHOSTCXX", "CXX", "CC", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS",
            "PYTHONPATH", "PIP_FIND_LINKS")
# Mounts each directory given before "--" under an empty tmpfs, then runs the rest.
_HIDE = ('set -e; while [ "$1" != "--" ]; do mount -t tmpfs -o size=64k,mode=755 ffpa-hidden "$1"; shift; done; '
         'shift; exec "$@"')
# Run inside the namespace: what must no longer be found.
_CHECK = """
if command -v nvcc; then echo "nvcc still on PATH"; exit 1; fi
t=$(mktemp -d)
echo 'int main(void) { return 0; }' > "$t/t.c"
for lib in cudadevrt cudart_static cudart; do
  if gcc "$t/t.c" -o "$t/t" -l$lib >/dev/null 2>&1; then echo "the linker still finds -l$lib"; exit 1; fi
done
if echo '#include <cuda_runtime.h>' | g++ -E -x c++ - >/dev/null 2>&1; then
  echo "the host compiler still finds cuda_runtime.h"; exit 1
fi
rm -rf "$t"
"""


def _python_with_headers(pythons: list[str]) -> str:
    probe = "import sysconfig, os; print(os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"
    for py in pythons:
        r = subprocess.run([py, "-c", probe], capture_output=True, text=True)
        if r.stdout.strip() == "True":
            return py
    pytest.fail(f"none of {pythons} has its headers (Python.h): the first-use build needs them "
                "(tools/bootstrap installs python3-dev)")


def _toolkit_dirs() -> list[str]:
    """The machine's CUDA toolkit directories (resolved), to be hidden."""
    cands = glob.glob("/usr/local/cuda*") + glob.glob("/opt/cuda*")
    cands += [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
    real = sorted({os.path.realpath(c) for c in cands if os.path.isdir(c)})
    return [d for d in real if d not in ("/usr", "/", "/usr/local")]


@pytest.fixture(scope="module")
def hidden():
    """The command prefix of the namespace without the toolkit (module docstring), or a skip."""
    dirs = _toolkit_dirs()
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1): cannot make a mount namespace that hides the machine's CUDA toolkit")
    prefix = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _HIDE, "ffpa-hide", *dirs, "--"]
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    r = subprocess.run([*prefix, "sh", "-c", _CHECK], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        pytest.skip(f"cannot hide the machine's CUDA toolkit ({dirs}) in a private mount namespace: "
                    f"{(r.stdout + r.stderr).strip()[-400:]}")
    print(f"toolkit hidden in a private mount namespace: {dirs}", flush=True)
    return prefix


def test_pure_wheel_with_jit_extra_builds_two_head_dims_toolkit_hidden(ffpa_env, work, venv_for, runner,
                                                                      http_server, hidden):
    dist = Path(ffpa_env("DIST"))
    manifest = ffpa_manifest.load(dist / "ffpa-release-manifest.json")
    (pure,) = [w for w in manifest["wheels"] if w["kind"] == "pure"]
    site = http_server(Path(ffpa_env("SITE")))
    py = _python_with_headers([p for p in ffpa_env("PYTHONS").split(os.pathsep) if p])
    vpy = venv_for(py, "jit")
    venv = vpy.parent.parent
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PATH"] = os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"])
    cache = work / "cache"
    env["FFPA_CACHE_DIR"] = str(cache)
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", "2")

    def must(cmd, in_ns=True, **kw):
        print("+ " + " ".join(map(str, cmd)), flush=True)
        r = runner([*(hidden if in_ns else []), *map(str, cmd)], env=env, cwd=str(work), **kw)
        assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
        return r

    must([vpy, "-m", "pip", "install", "-q", f"ffpa-attn[jit]=={pure['version']}", "--index-url",
          f"{site}pypi/simple/", "--extra-index-url", "https://pypi.org/simple"], in_ns=False)
    pkg = Path(must([vpy, "-c", "import ffpa_attn, os; print(os.path.dirname(ffpa_attn.__file__))"]).stdout.strip())
    assert pkg.is_relative_to(venv), pkg
    binaries = [p for p in pkg.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
    assert not binaries, f"the pure wheel installed binaries: {binaries}"

    status = json.loads(must([vpy, "-m", "ffpa_attn.info", "--json"]).stdout)["jit"]
    assert status["toolchain_complete"], status["missing"]
    for tool in ("nvcc", "cmake", "ninja", "cuda_lib"):
        assert Path(status[tool]).resolve().is_relative_to(venv.resolve()), (tool, status[tool])
    assert list((cache / "toolchains").glob("*.json")), "the probe's success was not remembered"

    # One process, two head dims: the second call's build holds both (the union).
    use = ("import sys; from ffpa_attn import cuda, jit\n"
           "for d in map(int, sys.argv[1:]):\n"
           "    assert jit.ensure((9, 0), d, 'fp16', arch_runs=False) is None, d\n"
           "    print(d, cuda.COMPILED_ARCHS, cuda.COMPILED_HEAD_DIMS, jit.loaded_entry()['name'], flush=True)\n")
    first = must([vpy, "-c", use, 64, 128, 64])
    lines = first.stdout.strip().splitlines()
    assert [ln.split(" ", 1)[1].rsplit(" ", 1)[0] for ln in lines] == [
        "('90',) (64,)", "('90',) (64, 128)", "('90',) (64, 128)"], first.stdout
    union = lines[1].rsplit(" ", 1)[1]
    assert lines[2].endswith(union)
    assert "ffpa_attn.jit: building the FFPA kernels for sm_90, head dim 64, fp16 (first use" in first.stderr
    assert ("ffpa_attn.jit: building the FFPA kernels for sm_90, head dim 64, 128, fp16 (with the loaded head dims "
            "[64], fp16) (first use") in first.stderr, first.stderr
    assert first.stderr.count("ffpa_attn.jit: building") == 2, first.stderr

    # A model whose layers use D = 64 (sliding) and D = 128 (global): the cached union serves it.
    model = work / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({
        "model_type": "gemma-like", "torch_dtype": "float16",
        "text_config": {"hidden_size": 512, "num_attention_heads": 4, "head_dim": 64, "global_head_dim": 128}}))
    prebuilt = must([vpy, "-m", "ffpa_attn.jit", "build", "--arch", "90", "--for-model", model])
    assert prebuilt.stdout.strip() == str(cache / "entries" / union) and prebuilt.stderr == "", prebuilt.stderr

    second = must([vpy, "-c", use, 128, 64])
    assert second.stderr == "", second.stderr
    assert all(ln.endswith(union) for ln in second.stdout.strip().splitlines()), second.stdout
    manifest = json.loads((cache / "entries" / union / "manifest.json").read_text())
    print(f"first-use builds, toolkit hidden: D=64 and the union D=64,128 "
          f"({manifest['build_seconds']} s for the union)", flush=True)
