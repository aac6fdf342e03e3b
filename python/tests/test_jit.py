"""First-use builds (ffpa_attn.jit), without a GPU.

Unmarked tests (python.unit) check the toolchain lookup, the warning and strict error of an
incomplete toolchain, the cache's manifest checks and the capture refusal, with no build.
``jit``-marked tests (CTest python.jit, the tools venv: pybind11 and CUTLASS's headers)
build the kernels-only tree for real, each for one head dim and dtype: sm_80 by two racing
processes (one build, both load), sm_90, a corrupted entry rebuilt; the libraries are held
to their arch with csrc/tests/check_elf_archs.cmake (cuobjdump) and the bindings imported.
The time a first build takes is a benchmark, not a test: python/bench/jit_first_use.py.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

import ffpa_attn
from ffpa_attn import jit

REPO = Path(__file__).resolve().parents[2]
CHECK_ELF = REPO / "csrc" / "tests" / "check_elf_archs.cmake"


# --- no build ----------------------------------------------------------------------------------


def test_cache_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("FFPA_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jit.cache_root() == tmp_path / "explicit"
    monkeypatch.delenv("FFPA_CACHE_DIR")
    assert jit.cache_root() == tmp_path / "xdg" / "ffpa_attn"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert jit.cache_root() == tmp_path / "home" / ".cache" / "ffpa_attn"


def test_ffpa_jit_0_disables(monkeypatch):
    monkeypatch.setenv("FFPA_JIT", "0")
    assert not jit.enabled() and not jit.wanted(arch_runs=False)
    # Nothing is looked up: a toolchain lookup here would fail the test.
    monkeypatch.setattr(jit, "find_toolchain", lambda *a, **k: pytest.fail("FFPA_JIT=0 looked for a toolchain"))
    assert jit.ensure((9, 0), 128, "fp16", arch_runs=False) is None
    monkeypatch.setenv("FFPA_JIT", "1")
    assert jit.enabled()


def _sources_present():
    if jit.source_dir() is None:
        pytest.fail("ffpa_attn/_src is missing from the staged package (python/CMakeLists.txt stages it)")


def test_sources_ship_with_the_package():
    _sources_present()
    src = jit.source_dir()
    for rel in ("CMakeLists.txt", "cmake/FfpaOptions.cmake", "csrc/CMakeLists.txt", "csrc/python/binding.cpp",
                "python/CMakeLists.txt", "tools/requirements-cutlass.txt"):
        assert (src / rel).is_file(), rel
    assert not (src / "csrc" / "tests").exists() and not (src / "index").exists()
    # Text only: the pure wheel holds no binary.
    for path in src.rglob("*"):
        if path.is_file():
            assert b"\0" not in path.read_bytes(), path


def _empty_bin(tmp_path, monkeypatch):
    """A PATH with only the given tools; nvcc also hidden from CUDA_HOME and site-packages."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(jit, "_pypi_nvcc", lambda: None)
    monkeypatch.setattr(jit, "_tool_from_module", lambda *a: None)
    return bin_dir


def _link(bin_dir, name, target):
    if target:
        (bin_dir / name).symlink_to(target)


@pytest.mark.parametrize("absent", ["nvcc", "g++", "Python.h"])
def test_missing_piece_is_named_with_its_install_command(absent, tmp_path, monkeypatch):
    _sources_present()
    real = {t: shutil.which(t) for t in ("nvcc", "g++", "cmake", "ninja")}
    real["nvcc"] = real["nvcc"] or "/usr/local/cuda/bin/nvcc"
    bin_dir = _empty_bin(tmp_path, monkeypatch)
    for tool, target in real.items():
        if tool != absent:
            _link(bin_dir, tool, target)
    if absent == "Python.h":
        paths = dict(sysconfig.get_paths(), include=str(tmp_path / "no-include"))
        monkeypatch.setattr(jit.sysconfig, "get_paths", lambda: paths)
    tc = jit.find_toolchain()
    missing = dict(tc.missing)
    if absent == "nvcc":
        assert any(m.startswith("nvcc") for m in missing), missing
        assert missing[next(m for m in missing if m.startswith("nvcc"))] == 'pip install "ffpa-attn[jit]"'
    elif absent == "g++":
        what = next(m for m in missing if "host C++ compiler" in m)
        assert "apt-get install g++" in missing[what]
    else:
        what = next(m for m in missing if "headers of this Python" in m)
        assert f"python{sys.version_info.major}.{sys.version_info.minor}-dev" in missing[what]
    # The warning of the launch path: one reason, every missing piece, the commands.
    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setattr(jit, "_FAILED", {})
    monkeypatch.setattr(jit, "_LOADED", {})
    monkeypatch.setattr(ffpa_attn.cuda, "_C", None)
    monkeypatch.setattr(ffpa_attn.cuda, "EXTENSION_IMPORT_ERROR", None)
    problem = jit.ensure((9, 0), 128, "fp16", arch_runs=False, gpu="NVIDIA H200")
    assert problem is not None and problem[0] == "jit"
    assert "sm_90 (NVIDIA H200)" in problem[1] and all(m in problem[1] for m in missing)
    assert all(f in problem[2] for f in missing.values())
    # strict: build() raises, naming the same.
    with pytest.raises(jit.JitUnavailableError) as info:
        jit.build("90", [128], ["fp16"], toolchain=tc, root=tmp_path / "cache")
    assert isinstance(info.value, ffpa_attn.ExtensionNotAvailableError)
    assert all(m in str(info.value) for m in missing) and info.value.missing == list(tc.missing)
    assert not (tmp_path / "cache").exists()  # nothing was started


def test_a_failed_lookup_is_not_repeated_per_call(monkeypatch):
    calls = []

    def lookup(for_build=True):
        calls.append(for_build)
        return jit.Toolchain(missing=(("nvcc", "pip install x"),))

    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setattr(jit, "_FAILED", {})
    monkeypatch.setattr(jit, "_LOADED", {})
    monkeypatch.setattr(jit, "find_toolchain", lookup)
    monkeypatch.setattr(ffpa_attn.cuda, "_C", None)
    monkeypatch.setattr(ffpa_attn.cuda, "EXTENSION_IMPORT_ERROR", None)
    first = jit.ensure((8, 0), 64, "bf16", arch_runs=False)
    looked = len(calls)
    assert first is not None and jit.ensure((8, 0), 64, "bf16", arch_runs=False) == first
    assert looked and len(calls) == looked


def test_no_build_for_a_broken_install_or_old_gpu(monkeypatch):
    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setattr(jit, "_LOADED", {})
    monkeypatch.setattr(jit, "find_toolchain", lambda *a, **k: pytest.fail("looked for a toolchain"))
    monkeypatch.setattr(ffpa_attn.cuda, "_C", None)
    monkeypatch.setattr(ffpa_attn.cuda, "EXTENSION_IMPORT_ERROR", "ImportError: undefined symbol")
    assert not jit.wanted(arch_runs=False)  # reported as "extension", never papered over
    monkeypatch.setattr(ffpa_attn.cuda, "EXTENSION_IMPORT_ERROR", None)
    assert jit.ensure((7, 5), 64, "fp16", arch_runs=False) is None  # sm_75: the "arch" reason


def test_capture_never_builds(monkeypatch, tmp_path):
    _sources_present()
    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setenv("FFPA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(jit, "_FAILED", {})
    monkeypatch.setattr(jit, "_LOADED", {})
    monkeypatch.setattr(ffpa_attn.cuda, "_C", None)
    monkeypatch.setattr(ffpa_attn.cuda, "EXTENSION_IMPORT_ERROR", None)
    tc = jit.Toolchain(sources=str(jit.source_dir()), nvcc="/x/nvcc", nvcc_version="13.0.88", cmake="cmake",
                       ninja="ninja", cxx="g++", cutlass_version="4.2.0")
    monkeypatch.setattr(jit, "find_toolchain", lambda *a, **k: tc)
    monkeypatch.setattr(jit, "build", lambda *a, **k: pytest.fail("built during capture"))
    with pytest.raises(jit.JitError, match=r"never built during CUDA graph capture: call ffpa_attn_func once "
                                           r"eagerly.*--arch 90 --head-dims 512 --dtypes fp16"):
        jit.ensure((9, 0), 512, "fp16", arch_runs=False, capturing=True)
    assert not (tmp_path / "entries").exists()


def _fake_entry(root: Path, name: str = "sm80-d64-fp16-plain-0123456789abcdef") -> Path:
    entry = root / "entries" / name
    entry.mkdir(parents=True)
    (entry / "_C.so").write_bytes(b"module")
    (entry / "libffpa_kernels_0123456789abcdef.so").write_bytes(b"library")
    files = {n: jit._file_hash(entry / n) for n in ("_C.so", "libffpa_kernels_0123456789abcdef.so")}
    key = {"sources": "0" * 64, "version": "0.1.0", "arch": "80", "abi": "cpython-312", "nvcc": "13.0.88",
           "cutlass": "4.2.0", "cxx": "g++ 12", "head_dims": [64], "dtypes": ["fp16"], "kernels": "plain"}
    (entry / jit.MANIFEST).write_text(json.dumps({"format": jit._MANIFEST_FORMAT, "files": files, "module": "_C.so",
                                                  "key": key}))
    return entry


def test_manifest_detects_half_written_and_altered_entries(tmp_path):
    entry = _fake_entry(tmp_path)
    assert jit._read_manifest(entry) is not None
    (entry / "libffpa_kernels_0123456789abcdef.so").write_bytes(b"librarz")  # one byte altered
    assert jit._read_manifest(entry) is None
    (entry / "libffpa_kernels_0123456789abcdef.so").write_bytes(b"library")
    (entry / "_C.so").unlink()  # a file missing
    assert jit._read_manifest(entry) is None
    (entry / "_C.so").write_bytes(b"module")
    assert jit._read_manifest(entry) is not None
    manifest = json.loads((entry / jit.MANIFEST).read_text())
    (entry / jit.MANIFEST).write_text(json.dumps(manifest)[:-10])  # manifest cut short
    assert jit._read_manifest(entry) is None
    (entry / jit.MANIFEST).unlink()  # the state a build leaves before its last write
    assert jit._read_manifest(entry) is None
    assert [m for _, m in jit.list_entries(tmp_path)] == [None]


@pytest.mark.parametrize("arch,dims,dtypes,what", [
    ("../../x", [64], ["fp16"], "arch"), ("75", [64], ["fp16"], "arch"), ("90", [96], ["fp16"], "head dims"),
    ("90", [], ["fp16"], "head dims"), ("90", [64], ["fp32"], "dtypes"), ("90", [64], [], "dtypes")])
def test_build_refuses_bad_requests_before_anything(arch, dims, dtypes, what, tmp_path):
    with pytest.raises(ValueError, match=what):
        jit.build(arch, dims, dtypes, toolchain=jit.Toolchain(), root=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_cli_clean_refuses_unknown_names(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FFPA_CACHE_DIR", str(tmp_path))
    entry = _fake_entry(tmp_path)
    assert jit.main(["clean", "../../etc"]) == 1 and entry.is_dir()
    assert jit.main(["list"]) == 0 and entry.name in capsys.readouterr().out
    assert jit.main(["clean", entry.name]) == 0 and not entry.exists()


# --- a cache that cannot hurt (no build) ------------------------------------------------------------


@pytest.mark.parametrize("value,why", [
    ("relative/cache", "is a relative path"), ("/proc/self/cwd/x", "lies in /proc"), ("/tmp/a;b", "holds ';'"),
    ("/tmp/a\nb", "holds ';' or a control character"), ("FILE", "exists and is not a directory")])
def test_an_unusable_cache_root_is_one_clear_error_and_sdpa(value, why, tmp_path, monkeypatch, capsys):
    if value == "FILE":
        value = str(tmp_path / "a-file")
        Path(value).write_text("not a directory")
    monkeypatch.setenv("FFPA_CACHE_DIR", value)
    with pytest.raises(jit.JitCacheError, match=why):
        jit.cache_root()
    # What ffpa_attn_func's launch path asks: the "jit" fallback, never a traceback.
    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setattr(jit, "_FAILED", {})
    monkeypatch.setattr(jit, "_LOADED", {})
    monkeypatch.setattr(ffpa_attn.cuda, "_C", None)
    monkeypatch.setattr(ffpa_attn.cuda, "EXTENSION_IMPORT_ERROR", None)
    problem = jit.ensure((9, 0), 128, "fp16", arch_runs=False)
    assert problem is not None and problem[0] == "jit" and why in problem[1] and "FFPA_CACHE_DIR" in problem[1]
    # The command line and info: the same sentence, no traceback.
    assert jit.main(["list"]) == 2 and why in capsys.readouterr().err
    st = jit.status(probe=False)
    assert st["cache_dir"] is None and why in st["cache_error"] and not st["toolchain_complete"]


def test_relative_xdg_cache_home_is_ignored(tmp_path, monkeypatch):
    monkeypatch.delenv("FFPA_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # the XDG spec: relative paths are invalid, ignore
    assert jit.cache_root() == tmp_path / "home" / ".cache" / "ffpa_attn"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    return victim


@pytest.mark.parametrize("name", ["..", ".", "entries", "../..", "/etc", "sm80-d64-fp16-plain-0123456789abcdef/..",
                                  "not-an-entry", "sm80-d64-fp16-plain-0123456789abcdeg"])
def test_clean_takes_only_entry_names(name, tmp_path, monkeypatch, capsys):
    root = tmp_path / "cache"
    monkeypatch.setenv("FFPA_CACHE_DIR", str(root))
    entry = _fake_entry(root)
    (root / "entries" / "not-an-entry").mkdir()
    (root / "sibling.txt").write_text("another tool's file in a shared cache root")
    assert jit.main(["clean", name]) == 1
    assert "not cache entry names" in capsys.readouterr().err
    assert entry.is_dir() and (root / "entries" / "not-an-entry").is_dir() and (root / "sibling.txt").is_file()


def test_clean_never_goes_through_a_symlink(tmp_path, monkeypatch, capsys):
    root = tmp_path / "cache"
    monkeypatch.setenv("FFPA_CACHE_DIR", str(root))
    victim = _victim(tmp_path)
    name = "sm80-d64-fp16-plain-0123456789abcdef"
    # An entry-shaped link to someone else's directory: refused by name and skipped by `clean` (all).
    (root / "entries").mkdir(parents=True)
    (root / "entries" / name).symlink_to(victim)
    assert jit.main(["clean", name]) == 1 and "symlink" in capsys.readouterr().err
    assert jit.main(["clean"]) == 0
    assert (victim / "precious.txt").read_text() == "keep me" and (root / "entries" / name).is_symlink()
    # A symlinked entries/: nothing under it is touched.
    shutil.rmtree(root)
    other = tmp_path / "other-cache"
    _fake_entry(other)
    root.mkdir()
    (root / "entries").symlink_to(other / "entries")
    assert jit.main(["clean", name]) == 1 and "symlink" in capsys.readouterr().err
    assert jit.main(["clean"]) == 1 and "never removes through one" in capsys.readouterr().err
    assert (other / "entries" / name / jit.MANIFEST).is_file()


def test_clean_removes_only_entries_with_their_locks_and_logs(tmp_path, monkeypatch, capsys):
    root = tmp_path / "cache"
    monkeypatch.setenv("FFPA_CACHE_DIR", str(root))
    a = _fake_entry(root)
    b = _fake_entry(root, "sm90-d64-128-bf16-fp16-plain-fedcba9876543210")
    (root / "entries" / "notes").mkdir()
    victim = _victim(tmp_path)
    (root / "locks").mkdir()
    (root / "logs").mkdir()
    for e in (a, b):
        (root / "locks" / f"{e.name}.lock").write_text("")
    (root / "logs" / f"{a.name}.log").write_text("the log")
    (root / "logs" / f"{b.name}.log").symlink_to(victim / "precious.txt")  # planted: the link goes, not its target
    assert jit.main(["clean", a.name]) == 0
    assert not a.exists() and not (root / "locks" / f"{a.name}.lock").exists()
    assert not (root / "logs" / f"{a.name}.log").exists() and b.is_dir()
    assert jit.main(["clean"]) == 0
    assert not b.exists() and not os.path.lexists(root / "logs" / f"{b.name}.log")
    assert (victim / "precious.txt").read_text() == "keep me" and (root / "entries" / "notes").is_dir()
    assert sorted(capsys.readouterr().out.split()) == sorted(["removed", str(a), "removed", str(b)])


@pytest.mark.parametrize("break_it", [
    lambda m: m.update(files=["_C.so"]), lambda m: m.update(module=7), lambda m: m["key"].update(head_dims=64),
    lambda m: m["key"].update(head_dims=[True]), lambda m: m["key"].update(dtypes=["fp32"]),
    lambda m: m["key"].pop("cxx"), lambda m: m.update(key=[1]), lambda m: m["files"].update({"../x": "0"}),
    lambda m: m.clear()])
def test_a_malformed_manifest_means_a_rebuild_never_an_error(break_it, tmp_path):
    entry = _fake_entry(tmp_path)
    manifest = json.loads((entry / jit.MANIFEST).read_text())
    break_it(manifest)
    (entry / jit.MANIFEST).write_text(json.dumps(manifest))
    assert jit._read_manifest(entry) is None
    assert jit.list_entries(tmp_path) == [(entry, None)]
    tc = jit.Toolchain(sources=str(REPO), nvcc_version="13.0.88", cutlass_version="4.2.0")
    assert jit.find_entry("80", 64, "fp16", tc, tmp_path) is None
    (entry / jit.MANIFEST).write_bytes(b"\xff\xfe not json")
    assert jit._read_manifest(entry) is None


def _recording_cmake(tmp_path: Path) -> Path:
    """A stand-in for CMake that records its arguments and environment, then fails (a
    configure error): what a first-use build hands the real one, with no compile."""
    script = tmp_path / "cmake-recorder"
    script.write_text("#!/bin/sh\necho \"ARGS $*\"\nenv | sed 's/^/ENV /'\nexit 1\n")
    script.chmod(0o755)
    return script


def _failing_toolchain(tmp_path: Path) -> jit.Toolchain:
    _sources_present()
    return jit.Toolchain(sources=str(jit.source_dir()), nvcc="/x/bin/nvcc", nvcc_version="13.0.88", cuda_root="/x",
                         cuda_lib="/x/lib", cmake=str(_recording_cmake(tmp_path)), ninja="/x/bin/ninja",
                         cxx="/usr/bin/g++", pybind11_include="/x", cutlass_include="/x", cutlass_version="4.2.0")


def test_the_build_clears_code_changing_environment_and_says_so(tmp_path, monkeypatch):
    tc = _failing_toolchain(tmp_path)
    for var, value in [("NVCC_APPEND_FLAGS", "--use_fast_math"), ("NVCC_PREPEND_FLAGS", "-G"),
                       ("CXXFLAGS", "-O0"), ("CUDAFLAGS", "-lineinfo"), ("LDFLAGS", "-Wl,-rpath,/evil"),
                       ("CPATH", "/usr/local/cuda/include"), ("LIBRARY_PATH", "/usr/local/cuda/lib64"),
                       ("CMAKE_TOOLCHAIN_FILE", "/evil.cmake"), ("CCACHE_SLOPPINESS", "include_file_mtime"),
                       ("CUDAARCHS", "52")]:
        monkeypatch.setenv(var, value)
    stream = io.StringIO()
    with pytest.raises(jit.JitError, match="configuring"):
        jit.build("90", [64], ["fp16"], toolchain=tc, root=tmp_path / "cache", stream=stream)
    said = stream.getvalue()
    named = said.split("ffpa_attn.jit: ignoring ", 1)[1].split(" from the environment", 1)[0].split(", ")
    assert {"CCACHE_SLOPPINESS", "CMAKE_TOOLCHAIN_FILE", "CPATH", "CUDAARCHS", "CUDAFLAGS", "CXXFLAGS", "LDFLAGS",
            "LIBRARY_PATH", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS"} <= set(named), said
    (log,) = (tmp_path / "cache" / "logs").iterdir()
    seen = dict(ln[4:].split("=", 1) for ln in log.read_text().splitlines() if ln.startswith("ENV ") and "=" in ln)
    for var in ("NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "CXXFLAGS", "CUDAFLAGS", "LDFLAGS", "CPATH",
                "CMAKE_TOOLCHAIN_FILE", "CCACHE_SLOPPINESS", "CUDAARCHS"):
        assert var not in seen, var
    # The PyPI layout: the runtime's libraries are where the toolchain found them, and only there.
    assert seen["LIBRARY_PATH"] == "/x/lib"
    assert seen["PATH"].split(":")[:2] == ["/x/bin", str(Path(tc.cmake).parent)]


def test_duplicates_are_folded_before_cmake(tmp_path):
    tc = _failing_toolchain(tmp_path)
    with pytest.raises(jit.JitError):
        jit.build("90", [128, 64, 128, 64], ["fp16", "bf16", "fp16"], toolchain=tc, root=tmp_path / "cache",
                  stream=io.StringIO())
    (log,) = (tmp_path / "cache" / "logs").iterdir()
    assert "sm90-d64-128-bf16-fp16-plain-" in log.name
    text = log.read_text()
    assert "-DFFPA_HEAD_DIMS=64,128 " in text and "-DFFPA_DTYPES=bf16,fp16 " in text


def test_logs_and_entries_are_never_written_through_a_symlink(tmp_path):
    tc = _failing_toolchain(tmp_path)
    root = tmp_path / "cache"
    victim = _victim(tmp_path)
    key = jit._entry_key(tc, "90", [64], ["fp16"], "plain")
    name = jit._entry_name(key)
    (root / "logs").mkdir(parents=True)
    (root / "logs" / f"{name}.log").symlink_to(victim / "precious.txt")
    with pytest.raises(jit.JitError, match="configuring"):
        jit.build("90", [64], ["fp16"], toolchain=tc, root=root, stream=io.StringIO())
    assert (victim / "precious.txt").read_text() == "keep me"
    log = root / "logs" / f"{name}.log"
    assert not log.is_symlink() and "-DFFPA_CUDA_ARCHS=90" in log.read_text()
    # Planted directories: the build refuses before it starts, naming the link.
    for sub in ("entries", "locks", "tmp"):
        shutil.rmtree(root)
        root.mkdir()
        (root / sub).symlink_to(victim)
        with pytest.raises(jit.JitCacheError, match=f"{sub} is a symlink"):
            jit.build("90", [64], ["fp16"], toolchain=tc, root=root, stream=io.StringIO())
        assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]
    # A planted lock file link is never opened.
    shutil.rmtree(root)
    (root / "locks").mkdir(parents=True)
    (root / "locks" / f"{name}.lock").symlink_to(victim / "precious.txt")
    with pytest.raises(OSError):
        jit.build("90", [64], ["fp16"], toolchain=tc, root=root, stream=io.StringIO())
    assert (victim / "precious.txt").read_text() == "keep me"


def test_a_waiting_process_says_so_with_progress(tmp_path, monkeypatch):
    import threading

    tc = _failing_toolchain(tmp_path)
    root = tmp_path / "cache"
    name = jit._entry_name(jit._entry_key(tc, "90", [64], ["fp16"], "plain"))
    monkeypatch.setattr(jit, "_PROGRESS_EVERY", 0.3)
    stream = io.StringIO()
    errors: list[BaseException] = []

    def waiter():
        try:
            jit.build("90", [64], ["fp16"], toolchain=tc, root=root, stream=stream)
        except BaseException as exc:  # noqa: BLE001  (the configure failure, after the wait)
            errors.append(exc)

    with jit._locked(root / "locks" / f"{name}.lock"):  # another builder holds it ...
        work = root / "tmp" / f"{name}.other"
        work.mkdir(parents=True)
        (work / "build.log").write_text("$ cmake -S ...\n[1/2] try_compile of the configure step\n"
                                        "$ cmake --build ...\n[3/12] Building CUDA object fwd_d64_fp16.cu.o\n")
        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(1.2)
        held = stream.getvalue()
    t.join(30)
    assert f"ffpa_attn.jit: waiting for process {os.getpid()}, which is building the FFPA kernels for sm_90, head dim " \
           "64, fp16" in held
    assert f"still waiting for process {os.getpid()}'s build of the FFPA kernels for sm_90, head dim 64, fp16" in held
    assert "[3/12] steps" in held
    assert "build finished after" in stream.getvalue() and isinstance(errors[0], jit.JitError)


# --- the head dims a model needs --------------------------------------------------------------------


def test_model_head_dims_reads_every_layers_head_dim(tmp_path):
    gemma_like = {"model_type": "gemma4", "torch_dtype": "bfloat16",
                  "text_config": {"hidden_size": 2560, "num_attention_heads": 8, "head_dim": 256,
                                  "global_head_dim": 512, "sliding_window": 1024},
                  "vision_config": {"hidden_size": 1152, "num_attention_heads": 16}}
    found = jit.model_head_dims(gemma_like)
    assert found["head_dims"] == [256, 512] and found["dtype"] == "bf16" and list(found["other"]) == [72]
    # hidden_size / num_attention_heads where no head dim is named (Llama-style); head_dim wins where named.
    assert jit.model_head_dims({"hidden_size": 4096, "num_attention_heads": 32})["head_dims"] == [128]
    assert jit.model_head_dims({"hidden_size": 2048, "num_attention_heads": 8, "head_dim": 128})["head_dims"] == [128]
    assert jit.model_head_dims({"layer_head_dims": [128, 256, 128], "dtype": "float16"}) == {
        "head_dims": [128, 256], "other": {}, "dtype": "fp16"}
    # A model directory or its config.json.
    (tmp_path / "config.json").write_text(json.dumps(gemma_like))
    assert jit.model_head_dims(tmp_path)["head_dims"] == jit.model_head_dims(tmp_path / "config.json")["head_dims"]
    with pytest.raises(ValueError, match="cannot read a transformers config"):
        jit.model_head_dims(tmp_path / "nope")


def test_build_for_model_builds_what_its_layers_need(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FFPA_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "config.json").write_text(json.dumps({
        "torch_dtype": "bfloat16", "text_config": {"head_dim": 256, "global_head_dim": 512},
        "vision_config": {"hidden_size": 1152, "num_attention_heads": 16}}))
    asked = []
    monkeypatch.setattr(jit, "build", lambda arch, dims, dtypes, **kw: asked.append((arch, dims, dtypes)) or
                        tmp_path / "entry")
    assert jit.main(["build", "--arch", "90", "--for-model", str(tmp_path)]) == 0
    assert asked == [("90", [256, 512], ["bf16"])]
    assert "head dim 72 of" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        jit.main(["build", "--arch", "90"])  # neither --head-dims nor --for-model


def test_a_loaded_build_lacking_a_head_dim_asks_for_the_union(monkeypatch):
    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setattr(jit, "_FAILED", {})
    monkeypatch.setattr(jit, "_LOADED", {"entry": "x", "manifest": {"key": {
        "arch": "90", "head_dims": [256], "dtypes": ["bf16"]}}})
    assert not jit.wanted(True, 256, "bf16") and not jit.wanted(True, 96, "bf16")
    assert jit.wanted(True, 512, "bf16") and jit.wanted(True, 256, "fp16")
    # The build asked for is the union, so every earlier call keeps its kernels.
    monkeypatch.setattr(jit, "find_toolchain", lambda *a, **k: jit.Toolchain(missing=(("nvcc", "pip install x"),)))
    problem = jit.ensure((9, 0), 512, "bf16", arch_runs=True)
    assert problem is not None and "head dim 256, 512, bf16 (with the loaded head dims [256], bf16)" in problem[1]
    assert list(jit._FAILED) == [("90", (256, 512), ("bf16",))]


@pytest.mark.torch
@pytest.mark.parametrize("root", ["relative/cache", "/proc/self/ffpa", "/tmp/x;y"])
def test_ffpa_attn_func_on_an_unusable_cache_runs_sdpa_with_reason_jit(root, install_extension, monkeypatch):
    """The pure wheel on a GPU it could build for, the cache root unusable: the call's
    answer is SDPA's, with one 'jit' warning naming the root, and no traceback."""
    import warnings

    torch = pytest.importorskip("torch")
    from ffpa_attn import SDPAFallbackWarning, ffpa_attn_func, routing, torch_ops

    install_extension.absent()
    monkeypatch.setattr(routing, "_WARNED", set())  # said once per reason and process: this case's own
    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setenv("FFPA_CACHE_DIR", root)
    monkeypatch.setattr(jit, "_FAILED", {})
    monkeypatch.setattr(jit, "_LOADED", {})
    monkeypatch.setattr(torch_ops, "tensor_device_type", lambda t: "cuda")
    monkeypatch.setattr(torch_ops, "_capability", lambda index: (9, 0))
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 8, 64).to(torch.float16) for _ in range(3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ffpa_attn_func(q, k, v, is_causal=True)
    want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    torch.testing.assert_close(out.float(), want, rtol=2e-3, atol=2e-3)
    said = [str(w.message) for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert len(said) == 1 and "(reason 'jit')" in said[0] and repr(root) in said[0], said


@pytest.mark.torch
@pytest.mark.transformers
def test_model_head_dims_of_transformers_configs():
    transformers = pytest.importorskip("transformers")
    llama = transformers.LlamaConfig(hidden_size=512, num_attention_heads=4, num_key_value_heads=2,
                                     torch_dtype="bfloat16")
    assert jit.model_head_dims(llama)["head_dims"] == [128]
    gemma3 = transformers.Gemma3TextConfig(head_dim=256)
    assert jit.model_head_dims(gemma3)["head_dims"] == [256]


@pytest.mark.torch
@pytest.mark.transformers
def test_the_transformers_backend_asks_for_every_head_dim_of_the_model_once(install_extension, monkeypatch):
    """A model's first call on a GPU the installed kernels lack: one first-use build request
    holding every head dim of its layers (here the toolchain is missing, so the request's
    answer names them all), asked once per model."""
    import types

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from ffpa_attn.integrations import transformers as backend

    install_extension.absent()
    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setattr(jit, "_FAILED", {})
    monkeypatch.setattr(jit, "_LOADED", {})
    monkeypatch.setattr(backend, "_FIRST_USE_ASKED", set())
    # The machine's facts: an sm_90 GPU, no toolchain.
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    asked = []
    monkeypatch.setattr(jit, "find_toolchain", lambda *a, **k: asked.append(1) or jit.Toolchain(
        missing=(("nvcc (a CUDA 13 toolkit)", 'pip install "ffpa-attn[jit]"'),)))
    config = transformers.Gemma3TextConfig(head_dim=256)
    config.global_head_dim = 512  # a Gemma-4-style model: global layers at D = 512
    query = types.SimpleNamespace(dtype=torch.bfloat16, is_cuda=True, device=torch.device("cuda", 0))
    module = types.SimpleNamespace(config=config)
    backend._first_use_build(module, query)
    assert list(jit._FAILED) == [("90", (256, 512), ("bf16",))]
    problem = jit._FAILED[("90", (256, 512), ("bf16",))]
    assert "sm_90 (NVIDIA H200), head dim 256, 512, bf16" in problem[1]
    looked = len(asked)
    backend._first_use_build(module, query)  # once per model
    assert looked and len(asked) == looked


# --- the toolchain probe -------------------------------------------------------------------------------


def test_the_probe_compiles_and_links_and_is_remembered(tmp_path, monkeypatch):
    _sources_present()
    tc = jit.find_toolchain()
    if not tc.complete:
        pytest.skip(f"no complete toolchain here: {tc.missing}")
    root = tmp_path / "cache"
    assert jit.probe_toolchain(tc, root) is None
    (record,) = (root / "toolchains").iterdir()
    assert json.loads(record.read_text())["ok"] is True
    # Remembered: a second probe runs no compiler (any subprocess would fail the test).
    with monkeypatch.context() as m:
        m.setattr(jit.subprocess, "run", lambda *a, **k: pytest.fail(f"the remembered probe ran {a[0]}"))
        assert jit.probe_toolchain(tc, root) is None
    # Another host compiler is another toolchain: probed, and a failure is reported, not remembered.
    broken = dataclasses.replace(tc, cxx="/bin/false", cxx_version="false")
    failed = jit.probe_toolchain(broken, root)
    assert failed is not None and "probe.cu" in failed and len(list((root / "toolchains").iterdir())) == 1


# --- real builds (python.jit) ----------------------------------------------------------------------


def _cuobjdump() -> str:
    cands = [Path(p) for p in (os.environ.get("FFPA_CUOBJDUMP", ""),) if p]
    cands += sorted(Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/*/bin/cuobjdump"))
    cands += [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "cuobjdump"]
    for c in cands:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    pytest.fail("no cuobjdump (the tools venv's nvidia-cuda-cuobjdump, or CUDA_HOME): the archs cannot be checked")


def _check_elf(library: Path, archs: str) -> subprocess.CompletedProcess:
    return subprocess.run(["cmake", f"-DCUOBJDUMP={_cuobjdump()}", f"-DLIBRARY={library}", f"-DARCHS={archs}",
                           "-P", str(CHECK_ELF)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


_BUILD_AND_LOAD = textwrap.dedent("""
    import json, sys
    from ffpa_attn import cuda, jit
    entry = jit.build(sys.argv[1], [int(sys.argv[2])], [sys.argv[3]])
    jit.load(entry)
    print(json.dumps({"entry": str(entry), "info": cuda.extension_info(), "path": cuda.EXTENSION_PATH}))
""")


def _build_proc(arch, head_dim, dtype, cache, extra_env=None):
    env = dict(os.environ, FFPA_CACHE_DIR=str(cache), **(extra_env or {}))
    return subprocess.Popen([sys.executable, "-c", _BUILD_AND_LOAD, arch, str(head_dim), dtype], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc):
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def _library(entry: Path) -> Path:
    (lib,) = entry.glob("libffpa_kernels_*.so")
    return lib


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("jit-cache")


@pytest.mark.jit
def test_racing_processes_build_sm80_once_and_both_load(cache):
    _sources_present()
    procs = [_build_proc("80", 64, "fp16", cache) for _ in range(2)]
    results = [_finish(p) for p in procs]
    (a, err_a), (b, err_b) = results
    assert a["entry"] == b["entry"]
    assert (err_a + err_b).count("ffpa_attn.jit: building ") == 1, err_a + err_b
    assert len(list((cache / "entries").iterdir())) == 1
    for r in (a, b):
        info = r["info"]
        assert info["archs"] == ["80"] and info["head_dims"] == [64] and info["dtypes"] == ["fp16"]
        assert info["fwd"] and info["bwd"] and "mma" in info["impls"]
        assert not info["cute"] and not info["fp8"] and not info["tma"]  # the plain set; no TMA below sm_90
        assert r["path"].startswith(r["entry"])
    lib = _library(Path(a["entry"]))
    ok = _check_elf(lib, "80")
    assert ok.returncode == 0 and "archs OK: 80" in ok.stdout, ok.stdout
    wrong = _check_elf(lib, "90")  # the check must be able to fail
    assert wrong.returncode != 0 and "requested '90'" in wrong.stdout


@pytest.mark.jit
def test_cached_call_is_silent(cache):
    a, err = _finish(_build_proc("80", 64, "fp16", cache))
    assert err == "" and len(list((cache / "entries").iterdir())) == 1


@pytest.mark.jit
def test_corrupted_entry_is_rebuilt(cache):
    (entry,) = (cache / "entries").iterdir()
    lib = _library(entry)
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0xFF
    lib.write_bytes(bytes(data))
    a, err = _finish(_build_proc("80", 64, "fp16", cache))
    assert "ffpa_attn.jit: building " in err  # detected and rebuilt, not loaded
    assert a["entry"] == str(entry) and jit._read_manifest(entry) is not None
    assert a["info"]["archs"] == ["80"]
    assert not list((cache / "tmp").iterdir())  # the private build directories are gone


@pytest.mark.jit
def test_forced_build_sm90(cache):
    a, err = _finish(_build_proc("90", 64, "bf16", cache))
    info = a["info"]
    assert info["archs"] == ["90"] and info["dtypes"] == ["bf16"] and info["tma"] and "tma" in info["impls"]
    assert not info["cute"] and not info["fp8"]
    ok = _check_elf(_library(Path(a["entry"])), "90")
    assert ok.returncode == 0 and "archs OK: 90" in ok.stdout, ok.stdout


def test_info_reports_the_first_use_build_status(monkeypatch, tmp_path):
    from ffpa_attn import info

    monkeypatch.setenv("FFPA_CACHE_DIR", str(tmp_path))
    text = info._text(info.report())
    assert f"first-use builds (ffpa_attn.jit): off (FFPA_JIT=0), cache {tmp_path}, 0 cached" in text
    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setattr(jit, "find_toolchain", lambda *a, **k: jit.Toolchain(
        missing=(("nvcc (a CUDA 13 toolkit)", 'pip install "ffpa-attn[jit]"'),)))
    rep = info.report()
    assert rep["jit"]["enabled"] and not rep["jit"]["toolchain_complete"]
    assert '  missing: nvcc (a CUDA 13 toolkit): pip install "ffpa-attn[jit]"' in info._text(rep)


def test_a_failed_build_names_its_log_and_leaves_nothing(tmp_path):
    _sources_present()
    # A toolchain whose CMake fails at once: the configure step's failure, not a hang.
    tc = jit.Toolchain(sources=str(jit.source_dir()), nvcc="/x/nvcc", nvcc_version="13.0.88", cuda_root="/x",
                       cmake=shutil.which("false") or "/bin/false", ninja="ninja", cxx="g++",
                       pybind11_include="/x", cutlass_include="/x", cutlass_version="4.2.0")
    with pytest.raises(jit.JitError, match=r"configuring the JIT build of the FFPA kernels for sm_90 \(GPU X\), "
                                           r"head dim 64, fp16 failed \(log: .*\.log\)"):
        jit.build("90", [64], ["fp16"], gpu="GPU X", toolchain=tc, root=tmp_path, stream=io.StringIO())
    assert not (tmp_path / "entries").exists() or not any((tmp_path / "entries").iterdir())
    assert not any((tmp_path / "tmp").iterdir())
    (log,) = (tmp_path / "logs").iterdir()
    assert "-DFFPA_CUDA_ARCHS=90" in log.read_text() and "-DFFPA_KERNEL_SET=plain" in log.read_text()


def test_widen_hint_names_the_prebuild_that_covers_both(monkeypatch):
    monkeypatch.setattr(jit, "_LOADED", {})
    assert jit.widen_hint(512, "fp16") is None  # nothing loaded: the reason's own fix
    monkeypatch.setattr(jit, "_LOADED", {"entry": "x", "manifest": {"key": {
        "arch": "90", "head_dims": [128], "dtypes": ["fp16"]}}})
    hint = jit.widen_hint(512, "bf16")
    assert "python -m ffpa_attn.jit build --arch 90 --head-dims 128,512 --dtypes bf16,fp16" in hint
    assert "the next call loads it" in hint and jit.widen_hint(96, "fp16") is None
