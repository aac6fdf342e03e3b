"""First-use builds of the FFPA kernels for a GPU the installed wheel has no code for.

The pure wheel has no ``ffpa_attn._C``; the CUDA wheel has machine code for the release's
archs only (``cuda.COMPILED_ARCHS``). On any other GPU the kernels support (from
cmake/kernel-facts.json's ``arch_rules.min_sm``, ``MIN_SM``), the first CUDA call
builds this project's kernels-only CMake tree (``FFPA_COMPONENTS=kernels``, the tree the
device check uses) from the sources every wheel carries under ``ffpa_attn/_src``: for
exactly that GPU's arch, the call's head dim and dtype, the plain kernel set
(``FFPA_KERNEL_SET=plain``: mma, tma, simt and the backward; no CuTe, no low precision)
and the running interpreter's binding, then loads it in place of ``ffpa_attn._C``.

The toolchain: a CUDA 13 toolkit on the machine (``CUDA_HOME``, else ``nvcc`` on PATH),
else the ``ffpa-attn[jit]`` extra's PyPI packages (nvcc, the CUDA runtime and CCCL
headers, CUTLASS's headers, CMake, Ninja, pybind11). A host C++ compiler and the
interpreter's headers come from the system. Whatever is missing is named, with the command
that installs it, in one :class:`~ffpa_attn.errors.SDPAFallbackWarning` (reason ``"jit"``;
``strict=True`` raises it) and by ``python -m ffpa_attn.info``, which calls the toolchain
complete only once a probe compiled and linked with it (:func:`probe_toolchain`). The
build hands the linker the directory that holds the runtime's static libraries (PyPI's
wheels: ``nvidia/cu13/lib``, while their ``nvcc.profile`` names ``lib64``) and takes
nothing from the environment that changes code (:func:`_build_env`: dropped, and said).

The cache (:func:`cache_root`): ``$FFPA_CACHE_DIR``, else ``$XDG_CACHE_HOME/ffpa_attn`` (an
absolute one), else ``~/.cache/ffpa_attn``; a root no build can use is
:class:`JitCacheError`. An entry is keyed by the sources' hash, the package version, the
arch, the interpreter's ABI, the nvcc, host compiler and CUTLASS versions, the head dims,
dtypes and kernel set; it is built in a private directory and renamed into place under an
exclusive file lock (one build for every process of a node; a waiter says so, with the
builder's progress), and holds ``manifest.json`` (written last, with the hash of every
file), so a half-written, altered or malformed entry is rebuilt. Nothing is written
through a symlink. ``FFPA_JIT=0`` turns all of this off. Command line: ``python -m
ffpa_attn.jit build|list|clean``; ``clean`` takes entry names only.

One build loaded per process, holding every head dim and dtype the process asked for: a
call needing another loads the build of their union in its place (:func:`prepare`; cached,
else built). The transformers backend asks for every head dim of the model's layers on
its first call (:func:`prepare_for_model`, :func:`model_head_dims`), as ``python -m
ffpa_attn.jit build --for-model CONFIG`` does ahead of time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from . import build_facts
from .errors import ExtensionNotAvailableError
from .validation import MIN_SM

__all__ = [
    "CACHE_ENV",
    "JIT_ENV",
    "JitCacheError",
    "JitError",
    "JitUnavailableError",
    "Toolchain",
    "build",
    "cache_root",
    "checked_toolchain",
    "clean",
    "enabled",
    "ensure",
    "find_toolchain",
    "list_entries",
    "loaded_entry",
    "main",
    "model_head_dims",
    "prepare",
    "prepare_for_model",
    "probe_toolchain",
    "source_dir",
    "status",
    "wanted",
    "widen_hint",
]

JIT_ENV = "FFPA_JIT"
CACHE_ENV = "FFPA_CACHE_DIR"
MANIFEST = "manifest.json"
# The manifest's own format; a reader refuses other formats (and rebuilds the entry).
_MANIFEST_FORMAT = 2
# MIN_SM (imported above): the lowest arch the kernels support, cmake/kernel-facts.json's
# arch_rules.min_sm through the build-info module both wheels carry (the pure one too);
# the sources in _src refuse older archs with the same fact (cmake/FfpaCudaArchs.cmake).
# None in a source tree, which has no _src to build either (find_toolchain says so).
_JIT_INSTALL = 'pip install "ffpa-attn[jit]"'


class JitError(ExtensionNotAvailableError):
    """A JIT build was needed and could not happen (or failed); the message says why and the fix."""


class JitUnavailableError(JitError):
    """The toolchain for a JIT build is incomplete; :attr:`missing` lists ``(what, how to install it)``."""

    def __init__(self, message: str, missing: Sequence[tuple[str, str]]) -> None:
        super().__init__(message)
        self.missing = list(missing)


def enabled() -> bool:
    """False when ``FFPA_JIT`` is 0/false/no/off."""
    return os.environ.get(JIT_ENV, "").strip().lower() not in ("0", "false", "no", "off")


class JitCacheError(JitError):
    """The cache root is unusable (relative, a file, under /proc, a name CMake cannot take)."""


# Kernel filesystems and device trees: never a cache, whatever the environment says.
_NOT_A_CACHE = ("/proc", "/sys", "/dev")


def _check_root(root: Path, source: str) -> Path:
    text = str(root)
    if any(c in text for c in ";\n\r\0") or any(ord(c) < 32 for c in text):
        raise JitCacheError(f"the first-use build cache {text!r} (from {source}) holds ';' or a control character, "
                            f"which CMake's lists and the build's logs cannot carry: set {CACHE_ENV} to a plain "
                            "absolute path, e.g. ~/.cache/ffpa_attn")
    if not root.is_absolute():
        raise JitCacheError(f"the first-use build cache {text!r} (from {source}) is a relative path, which would "
                            f"change with the working directory: set {CACHE_ENV} to an absolute path")
    for system in _NOT_A_CACHE:
        if any(p == system or p.startswith(system + "/") for p in (os.path.normpath(text), os.path.realpath(text))):
            raise JitCacheError(f"the first-use build cache {text!r} (from {source}) lies in {system}, a kernel "
                                f"filesystem: set {CACHE_ENV} to a directory you own, e.g. ~/.cache/ffpa_attn")
    if os.path.lexists(text) and not os.path.isdir(text):
        raise JitCacheError(f"the first-use build cache {text!r} (from {source}) exists and is not a directory: "
                            f"remove it or set {CACHE_ENV} to another path")
    return root


def cache_root() -> Path:
    """``$FFPA_CACHE_DIR``, else ``$XDG_CACHE_HOME/ffpa_attn``, else ``~/.cache/ffpa_attn``.

    A relative ``XDG_CACHE_HOME`` is ignored, as the XDG base directory spec says. Raises
    :class:`JitCacheError` for a root no build can use (module docstring)."""
    explicit = os.environ.get(CACHE_ENV, "")
    if explicit.strip():
        return _check_root(Path(os.path.expanduser(explicit)), CACHE_ENV)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return _check_root(Path(xdg) / "ffpa_attn", "XDG_CACHE_HOME")
    return _check_root(Path.home() / ".cache" / "ffpa_attn", "HOME")


def source_dir() -> Path | None:
    """The CMake sources the wheels carry (``ffpa_attn/_src``), or None when absent."""
    src = Path(__file__).resolve().parent / "_src"
    return src if (src / "CMakeLists.txt").is_file() else None


@functools.cache
def _sources_hash(src: str) -> str:
    h = hashlib.sha256()
    root = Path(src)
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


# --- the toolchain ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Toolchain:
    """What a JIT build would use; ``missing`` is ``[(what, install command), ...]``."""

    nvcc: str | None = None
    nvcc_version: str | None = None
    cuda_root: str | None = None
    cmake: str | None = None
    ninja: str | None = None
    cxx: str | None = None
    python_include: str | None = None
    pybind11_include: str | None = None
    cutlass_include: str | None = None
    cutlass_version: str | None = None
    sources: str | None = None
    # The directory holding the CUDA runtime's static libraries (libcudart_static.a,
    # libcudadevrt.a): lib64 in a toolkit from NVIDIA's installers, lib in PyPI's wheels,
    # whose nvcc.profile still names lib64 (the build hands it to the linker: _build_env).
    cuda_lib: str | None = None
    cxx_version: str | None = None
    missing: tuple[tuple[str, str], ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing


def _site_dirs() -> list[Path]:
    dirs = [Path(p) for p in sysconfig.get_paths().values() if p]
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def _pypi_nvcc() -> Path | None:
    # nvidia-cuda-nvcc's wheels put the toolkit under nvidia/cu13/ (CUDA 13) next to the
    # runtime's and CCCL's headers, so the toolkit root is one directory for CMake.
    for base in _site_dirs():
        for cand in sorted(base.glob("nvidia/cu1*/bin/nvcc")) + sorted(base.glob("nvidia/cuda_nvcc/bin/nvcc")):
            if os.access(cand, os.X_OK):
                return cand
    return None


def _find_nvcc() -> Path | None:
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        cand = Path(cuda_home) / "bin" / "nvcc"
        if os.access(cand, os.X_OK):
            return cand
    found = shutil.which("nvcc")
    if found:
        return Path(found)
    return _pypi_nvcc()


@functools.cache
def _nvcc_version(nvcc: str) -> str | None:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release \d+\.\d+, V(\d+\.\d+\.\d+)", out)
    return m[1] if m else None


def _tool_from_module(module: str, attr: str, exe: str) -> str | None:
    # The cmake and ninja PyPI packages expose their binaries' directory.
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    try:
        mod = importlib.import_module(module)
        cand = Path(getattr(mod, attr)) / exe
    except (ImportError, AttributeError, TypeError):
        return None
    return str(cand) if os.access(cand, os.X_OK) else None


def _cmake_version_ok(cmake: str) -> bool:
    try:
        out = subprocess.run([cmake, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    m = re.search(r"cmake version (\d+)\.(\d+)", out)
    return bool(m) and (int(m[1]), int(m[2])) >= (3, 25)


def _cutlass_pin(src: Path | None) -> str | None:
    # The one home of the pin: tools/requirements-cutlass.txt, shipped in _src.
    if src is None:
        return None
    req = src / "tools" / "requirements-cutlass.txt"
    if not req.is_file():
        return None
    m = re.search(r"^nvidia-cutlass==([0-9.]+)", req.read_text(encoding="utf-8"), re.M)
    return m[1] if m else None


def _cutlass_headers() -> tuple[str | None, str | None]:
    cands: list[Path] = []
    explicit = os.environ.get("FFPA_CUTLASS_DIR")
    if explicit:
        cands += [Path(explicit), Path(explicit) / "include"]
    spec = importlib.util.find_spec("cutlass_library")
    if spec is not None and spec.submodule_search_locations:
        cands += [Path(p) / "source" / "include" for p in spec.submodule_search_locations]
    for inc in cands:
        version_h = inc / "cutlass" / "version.h"
        if (inc / "cute" / "tensor.hpp").is_file() and version_h.is_file():
            text = version_h.read_text(encoding="utf-8", errors="replace")
            parts = [re.search(rf"#define CUTLASS_{p} +(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
            version = ".".join(m[1] for m in parts if m) if all(parts) else None
            return str(inc), version
    return None, None


def _cuda_lib_dir(cuda_root: Path) -> Path | None:
    cands = [cuda_root / "lib64", cuda_root / "lib", *sorted(cuda_root.glob("targets/*/lib"))]
    for cand in cands:
        if all((cand / f).is_file() for f in ("libcudart_static.a", "libcudadevrt.a")):
            return cand
    return None


@functools.cache
def _cxx_version(cxx: str) -> str | None:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.strip().splitlines()[:1]
    return first[0].strip() if first else None


def _python_headers_fix() -> str:
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    return (f"apt-get install python{ver}-dev (Debian/Ubuntu), dnf install python3-devel (Fedora/RHEL), "
            "or a Python from python.org / uv / conda, which carry their headers")


def find_toolchain(for_build: bool = True) -> Toolchain:
    """Everything a JIT build needs, looked up now; nothing is cached between calls.
    ``for_build=False`` skips asking CMake its version (a subprocess): enough to find a
    cached entry, whose key holds no CMake."""
    missing: list[tuple[str, str]] = []
    src = source_dir()
    if src is None:
        missing.append(("the CMake sources (ffpa_attn/_src: this installation is not a wheel of ffpa-attn)",
                        "pip install --force-reinstall ffpa-attn"))
    nvcc = _find_nvcc()
    nvcc_version = _nvcc_version(str(nvcc)) if nvcc else None
    cuda_root = str(nvcc.parent.parent) if nvcc else None
    if nvcc is None:
        missing.append(("nvcc (a CUDA 13 toolkit: CUDA_HOME, nvcc on PATH, or PyPI's nvidia-cuda-nvcc)", _JIT_INSTALL))
    elif nvcc_version is None or not nvcc_version.startswith("13."):
        missing.append((f"a CUDA 13 nvcc ({nvcc} is {nvcc_version or 'unreadable'})",
                        f"{_JIT_INSTALL}, or point CUDA_HOME at a CUDA 13 toolkit"))
    elif not (Path(cuda_root) / "include" / "cuda_runtime.h").is_file():
        missing.append((f"the CUDA runtime headers next to {nvcc} (cuda_runtime.h)", _JIT_INSTALL))
    elif not (Path(cuda_root) / "nvvm" / "bin" / "cicc").is_file():
        missing.append((f"NVVM next to {nvcc} (nvvm/bin/cicc; PyPI's nvidia-nvvm)", _JIT_INSTALL))
    elif not (Path(cuda_root) / "include" / "crt" / "host_config.h").is_file():
        missing.append((f"the CUDA C runtime headers next to {nvcc} (include/crt; PyPI's nvidia-cuda-crt)", _JIT_INSTALL))
    cuda_lib = _cuda_lib_dir(Path(cuda_root)) if cuda_root else None
    if nvcc is not None and cuda_lib is None:
        missing.append((f"the CUDA runtime's static libraries next to {nvcc} (libcudart_static.a and libcudadevrt.a "
                        "in lib64 or lib; PyPI's nvidia-cuda-runtime)", _JIT_INSTALL))
    cmake = shutil.which("cmake") or _tool_from_module("cmake", "CMAKE_BIN_DIR", "cmake")
    if cmake and for_build and not _cmake_version_ok(cmake):
        cmake = _tool_from_module("cmake", "CMAKE_BIN_DIR", "cmake")
    if not cmake:
        missing.append(("CMake 3.25 or newer", _JIT_INSTALL))
    ninja = shutil.which("ninja") or _tool_from_module("ninja", "BIN_DIR", "ninja")
    if not ninja:
        missing.append(("Ninja", _JIT_INSTALL))
    cxx_env = os.environ.get("CXX")
    cxx = shutil.which(cxx_env) if cxx_env else (shutil.which("g++") or shutil.which("c++"))
    if not cxx:
        missing.append(("a host C++ compiler (g++ 11 or newer; CXX names another)",
                        "apt-get install g++ (Debian/Ubuntu) or dnf install gcc-c++ (Fedora/RHEL)"))
    py_inc = sysconfig.get_paths().get("include")
    if not py_inc or not (Path(py_inc) / "Python.h").is_file():
        missing.append((f"the headers of this Python ({sys.executable}: no {py_inc}/Python.h)", _python_headers_fix()))
        py_inc = None
    try:
        import pybind11  # type: ignore[import-not-found]
        pb_inc: str | None = pybind11.get_include()
    except ImportError:
        pb_inc = None
    if not pb_inc or not (Path(pb_inc) / "pybind11" / "pybind11.h").is_file():
        missing.append(("pybind11", _JIT_INSTALL))
        pb_inc = None
    cutlass_inc, cutlass_version = _cutlass_headers()
    pin = _cutlass_pin(src)
    if cutlass_inc is None:
        missing.append((f"CUTLASS's headers (nvidia-cutlass{'==' + pin if pin else ''})", _JIT_INSTALL))
    elif pin and cutlass_version and not pin.startswith(cutlass_version):
        missing.append((f"CUTLASS {pin} headers ({cutlass_inc} holds {cutlass_version})", _JIT_INSTALL))
    return Toolchain(nvcc=str(nvcc) if nvcc else None, nvcc_version=nvcc_version, cuda_root=cuda_root,
                     cmake=cmake, ninja=ninja, cxx=cxx, python_include=py_inc, pybind11_include=pb_inc,
                     cutlass_include=cutlass_inc, cutlass_version=cutlass_version,
                     sources=str(src) if src else None, cuda_lib=str(cuda_lib) if cuda_lib else None,
                     cxx_version=_cxx_version(cxx) if cxx else None, missing=tuple(missing))


# --- the build's environment ---------------------------------------------------------------------

# What a first-use build takes from the caller's environment: nothing else. Compilers,
# linkers and CMake read many variables as code (NVCC_APPEND_FLAGS, NVCC_PREPEND_FLAGS,
# CXXFLAGS, CUDAFLAGS, LDFLAGS, CPATH, LIBRARY_PATH, CUDAARCHS, CMAKE_TOOLCHAIN_FILE,
# CCACHE_* ...), which the entry's key does not hold and the compiler cache does not
# hash: so they are dropped, and the build says which (a cached entry is then a function
# of its key alone, and ccache is only ever asked for objects under the release's flags,
# which it does hash: they are on the command line). Kept: where things live and how to
# talk, plus ccache's store and CMake's parallelism.
_KEEP_ENV = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TERM", "CCACHE_DIR",
             "CCACHE_DISABLE", "CMAKE_BUILD_PARALLEL_LEVEL")
# The dropped variables worth naming (the rest, e.g. a shell's own, change no code).
_CODE_ENV = re.compile(r"NVCC_\w+|CUDA\w*FLAGS|CUDAARCHS|CUDAHOSTCXX|CUDACXX|C|CC|CXX|CPP|FC|\w*FLAGS|CPATH|"
                       r"C_INCLUDE_PATH|CPLUS_INCLUDE_PATH|LIBRARY_PATH|LD_LIBRARY_PATH|LD_PRELOAD|COMPILER_PATH|"
                       r"GCC_EXEC_PREFIX|CMAKE_\w+|CCACHE_\w+|SCCACHE_\w+|MAKEFLAGS|NINJA_\w+|PYTHONPATH")


def _build_env(tc: Toolchain, environ: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The environment of a first-use build, and the caller's variables it dropped that
    would have changed the code (sorted names; see _KEEP_ENV)."""
    environ = dict(os.environ if environ is None else environ)
    env = {k: environ[k] for k in _KEEP_ENV if k in environ and k != "CMAKE_BUILD_PARALLEL_LEVEL"}
    if re.fullmatch(r"[1-9][0-9]{0,3}", environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "")):
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = environ["CMAKE_BUILD_PARALLEL_LEVEL"]
    if "CCACHE_DIR" in env and not os.path.isabs(env["CCACHE_DIR"]):
        del env["CCACHE_DIR"]
    xdg = environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        env["XDG_CACHE_HOME"] = xdg  # ccache's default store
    dropped = sorted(k for k in environ if k not in env and k not in ("CUDA_HOME", "CUDA_PATH")
                     and _CODE_ENV.fullmatch(k) and k not in _KEEP_ENV)
    tools = [str(Path(p).parent) for p in (tc.ninja, tc.nvcc, tc.cmake) if p]
    env["PATH"] = os.pathsep.join(dict.fromkeys(tools + [p for p in environ.get("PATH", "").split(os.pathsep)
                                                         if os.path.isabs(p)]))
    # nvcc.profile of PyPI's nvidia-cuda-nvcc names <root>/lib64 for -lcudadevrt and
    # -lcudart_static while those wheels install <root>/lib: the linker is told where
    # they are, and no include or library path of the machine's own is added.
    if tc.cuda_lib:
        env["LIBRARY_PATH"] = tc.cuda_lib
    if tc.cxx:
        env["CXX"] = tc.cxx
        env["CUDAHOSTCXX"] = tc.cxx
    return env, dropped


# --- the toolchain probe: one compile and link, remembered per toolchain ----------------------------

_PROBE_SOURCE = """#include <cuda_runtime.h>
__global__ void ffpa_probe_kernel(int* out) { out[threadIdx.x] = 1; }
int main() {
  int n = 0;
  (void)cudaGetDeviceCount(&n);  // no device needed: it links the static runtime
  return 0;
}
"""


def _toolchain_digest(tc: Toolchain) -> str:
    parts = [tc.nvcc, tc.nvcc_version, tc.cuda_lib, tc.cxx, tc.cxx_version]
    with contextlib.suppress(OSError, TypeError):
        st = os.stat(str(tc.nvcc))
        parts += [str(st.st_size), str(st.st_mtime_ns)]
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()[:16]


def probe_toolchain(tc: Toolchain, root: Path | None = None) -> str | None:
    """Compile and link a CUDA program (static runtime, device runtime, separate
    compilation: what the kernels' build links) with this toolchain, in the build's own
    environment. None when it worked, else what failed. A success is remembered in the
    cache (``toolchains/<digest>.json``), keyed by nvcc, its version and file, the runtime
    library directory and the host compiler; a failure is asked again next time."""
    if not tc.complete:
        return "the toolchain is incomplete"
    digest = _toolchain_digest(tc)
    record = None
    with contextlib.suppress(JitError, OSError):
        record = (root or cache_root()) / "toolchains" / f"{digest}.json"
        data = json.loads(_read_nofollow(record))
        if isinstance(data, dict) and data.get("ok") is True and data.get("nvcc") == tc.nvcc:
            return None
    env, _ = _build_env(tc)
    with tempfile.TemporaryDirectory(prefix="ffpa-probe.") as tmp:
        (Path(tmp) / "probe.cu").write_text(_PROBE_SOURCE, encoding="utf-8")
        cmd = [str(tc.nvcc), "-ccbin", str(tc.cxx), f"-arch=sm_{MIN_SM or 80}", "-rdc=true", "--cudart", "static",
               "probe.cu", "-o", "probe"]
        try:
            r = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{' '.join(cmd)}: {exc}"
        if r.returncode != 0 or not (Path(tmp) / "probe").is_file():
            tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-6:])
            return f"{' '.join(cmd)} failed (exit {r.returncode}): {tail}"
    if record is not None:
        with contextlib.suppress(JitError, OSError):
            _write_nofollow(record, json.dumps({"ok": True, "nvcc": tc.nvcc, "nvcc_version": tc.nvcc_version,
                                                "cuda_lib": tc.cuda_lib, "cxx": tc.cxx}).encode())
    return None


def checked_toolchain(for_build: bool = True) -> Toolchain:
    """:func:`find_toolchain`, complete only when :func:`probe_toolchain` compiled and
    linked with it (what ``python -m ffpa_attn.info`` reports)."""
    tc = find_toolchain(for_build)
    if not tc.complete:
        return tc
    failed = probe_toolchain(tc)
    if failed is None:
        return tc
    return dataclasses.replace(tc, missing=((f"a toolchain that compiles and links CUDA code (the probe: {failed})",
                                             f"{_JIT_INSTALL}, or fix what the probe's error names"),))


def missing_message(tc: Toolchain, what: str) -> tuple[str, str]:
    """``(detail, fix)`` for an incomplete toolchain: every missing piece, and the commands."""
    detail = f"{what} needs a first-use build, and this machine lacks " + "; ".join(m for m, _ in tc.missing)
    fixes = list(dict.fromkeys(f for _, f in tc.missing))
    return detail, "install them: " + "; ".join(fixes) + f" (or set {JIT_ENV}=0 to run SDPA without this warning)"


# --- cache entries -----------------------------------------------------------------------------


def _abi_tag() -> str:
    return f"{sys.implementation.cache_tag}{sysconfig.get_config_var('EXT_SUFFIX') or ''}"


def _entry_key(tc: Toolchain, arch: str, head_dims: Sequence[int], dtypes: Sequence[str], kernels: str) -> dict[str, Any]:
    assert tc.sources is not None
    return {
        "sources": _sources_hash(tc.sources),
        "version": build_facts.version(),
        "arch": arch,
        "abi": _abi_tag(),
        "nvcc": tc.nvcc_version,
        "cutlass": tc.cutlass_version,
        "cxx": tc.cxx_version,
        "head_dims": sorted({int(d) for d in head_dims}),
        "dtypes": sorted(set(dtypes)),
        "kernels": kernels,
    }


_KEY_FIELDS = frozenset({"sources", "version", "arch", "abi", "nvcc", "cutlass", "cxx", "head_dims", "dtypes",
                         "kernels"})
# The only names `clean` removes and `list` shows: what _entry_name writes.
_ENTRY_NAME = re.compile(r"sm[1-9][0-9]{1,2}[af]?-d[1-9][0-9]*(?:-[1-9][0-9]*)*-(?:fp16|bf16)(?:-(?:fp16|bf16))?"
                         r"-(?:plain|all)-[0-9a-f]{16}")


def _entry_name(key: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    dims = "-".join(str(d) for d in key["head_dims"])
    return f"sm{key['arch']}-d{dims}-{'-'.join(key['dtypes'])}-{key['kernels']}-{digest}"


def _file_hash(path: Path) -> str:
    return hashlib.sha256(_read_nofollow(path)).hexdigest()


def _read_nofollow(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def _real_dir(path: Path) -> Path:
    """``path`` as a directory of the cache that is not a symlink (made when absent)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass
    except OSError as exc:
        raise JitCacheError(f"the first-use build cache cannot create {path} ({exc.strerror or exc}): set "
                            f"{CACHE_ENV} to a directory you can write") from exc
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise JitCacheError(f"{path} is {'a symlink' if stat.S_ISLNK(st.st_mode) else 'not a directory'}: the "
                            f"first-use build cache never writes through one; remove it, or set {CACHE_ENV} to "
                            "another directory")
    return path


def _write_nofollow(path: Path, data: bytes) -> None:
    """Write ``path`` atomically and never through a symlink: a fresh file beside it
    (O_CREAT|O_EXCL|O_NOFOLLOW), renamed over it (a rename replaces a link, never follows it)."""
    _real_dir(path.parent)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _valid_key(key: Any) -> bool:
    if not isinstance(key, dict) or not _KEY_FIELDS <= set(key):
        return False
    if not all(isinstance(key[f], str) for f in ("sources", "version", "arch", "abi", "kernels")):
        return False
    if not all(key[f] is None or isinstance(key[f], str) for f in ("nvcc", "cutlass", "cxx")):
        return False
    dims, dtypes = key["head_dims"], key["dtypes"]
    return (isinstance(dims, list) and bool(dims) and all(type(d) is int for d in dims)
            and isinstance(dtypes, list) and bool(dtypes) and all(d in ("fp16", "bf16") for d in dtypes))


def _read_manifest(entry: Path) -> dict[str, Any] | None:
    """The manifest of an intact entry (every file a plain file with its recorded hash, a
    well-formed key), else None: a half-written, altered or malformed entry is rebuilt."""
    try:
        if not stat.S_ISDIR(os.lstat(entry).st_mode):
            return None
        manifest = json.loads(_read_nofollow(entry / MANIFEST).decode("utf-8"))
        if not isinstance(manifest, dict) or manifest.get("format") != _MANIFEST_FORMAT:
            return None
        files, module = manifest.get("files"), manifest.get("module")
        if not isinstance(files, dict) or not isinstance(module, str) or module not in files:
            return None
        for name, digest in files.items():
            if not isinstance(name, str) or not isinstance(digest, str) or "/" in name or name.startswith(".") \
                    or name == MANIFEST or _file_hash(entry / name) != digest:
                return None
        if not _valid_key(manifest.get("key")):
            return None
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return manifest


def list_entries(root: Path | None = None) -> list[tuple[Path, dict[str, Any] | None]]:
    """Every entry of the cache with its manifest (None: half-written or corrupt): the
    entry-shaped directories of ``entries/`` (never a symlink, nor ``entries/`` one)."""
    root = root or cache_root()
    entries = root / "entries"
    try:
        if not stat.S_ISDIR(os.lstat(entries).st_mode):
            return []
        names = sorted(os.listdir(entries))
    except OSError:
        return []
    out = []
    for name in names:
        path = entries / name
        with contextlib.suppress(OSError):
            if _ENTRY_NAME.fullmatch(name) and stat.S_ISDIR(os.lstat(path).st_mode):
                out.append((path, _read_manifest(path)))
    return out


def _build_step(log_text: str) -> str:
    """How far a build is, from its log: "configuring" until the build command starts, then
    Ninja's last "[k/n]" (configure's own test builds print such lines too: not counted)."""
    start = log_text.rfind(" --build ")
    if start < 0:
        return "configuring"
    steps = re.findall(r"^\[(\d+/\d+)\]", log_text[start:], re.M)
    return f"[{steps[-1]}] steps" if steps else "compiling"


def _progress_line(root: Path, name: str) -> str:
    # The builder's log lives in its private work directory (tmp/<name>.*/build.log).
    for log in sorted((root / "tmp").glob(f"{name}.*/build.log")):
        with contextlib.suppress(OSError):
            return _build_step(_read_nofollow(log).decode("utf-8", "replace"))
    return "starting"


# Seconds between "still building" / "still waiting" lines.
_PROGRESS_EVERY = 15.0


@contextlib.contextmanager
def _locked(path: Path, *, what: str | None = None, stream: TextIO | None = None, root: Path | None = None,
            every: float | None = None) -> Iterator[None]:
    """An exclusive lock on ``path`` (never opened through a symlink). A caller that has to
    wait for another process says so on ``stream``, with that build's progress."""
    _real_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if what is None or stream is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                _wait(fd, path, what, stream, root, _PROGRESS_EVERY if every is None else every)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)  # who holds it, for a waiter's message
        yield
    finally:
        os.close(fd)  # releases the lock


def _wait(fd: int, path: Path, what: str, stream: TextIO, root: Path | None, every: float) -> None:
    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
    start = time.monotonic()
    name = path.name.removesuffix(".lock")
    log = f"{root / 'tmp'}/{name}.*/build.log" if root else "its log"
    print(f"ffpa_attn.jit: waiting for process {holder}, which is building {what} (its log: {log})",
          file=stream, flush=True)
    last = start
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(0.2)
        now = time.monotonic()
        if now - last >= every:
            last = now
            progress = _progress_line(root, name) if root else ""
            print(f"ffpa_attn.jit: still waiting for process {holder}'s build of {what} "
                  f"({now - start:.0f} s{', ' + progress if progress else ''})", file=stream, flush=True)
    print(f"ffpa_attn.jit: process {holder}'s build finished after {time.monotonic() - start:.0f} s",
          file=stream, flush=True)


class _Progress:
    """Build progress on stderr: what, for which GPU, elapsed (every ``every`` seconds)."""

    def __init__(self, what: str, stream: TextIO, every: float | None = None, log: Path | None = None) -> None:
        self.what, self.stream, self.log = what, stream, log
        self.every = _PROGRESS_EVERY if every is None else every
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _say(self, text: str) -> None:
        print(f"ffpa_attn.jit: {text}", file=self.stream, flush=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            step = ""
            if self.log is not None:
                with contextlib.suppress(OSError):
                    step = ", " + _build_step(self.log.read_text(encoding="utf-8", errors="replace"))
            self._say(f"still building {self.what} ({time.monotonic() - self.start:.0f} s{step})")

    def __enter__(self) -> _Progress:
        self._say(f"building {self.what} (first use; cached for later calls)")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start


def _run_logged(cmd: list[str], log: TextIO, env: dict[str, str], cwd: Path) -> int:
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd).returncode


def _log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(_read_nofollow(path).decode("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return ""


def _release_version() -> str | None:
    # The package's version without a local label (+cu13), as the tree's FFPA_RELEASE_VERSION.
    v = build_facts.version().split("+", 1)[0]
    return v if re.fullmatch(r"\d+\.\d+\.\d+", v) else None


def _build_into(tc: Toolchain, key: dict[str, Any], name: str, work: Path, what: str, stream: TextIO,
                log_path: Path) -> Path:
    """Configure and build the kernels-only tree in ``work``; the finished entry directory.
    The log is written in ``work`` (private) as it goes, at ``log_path`` when done."""
    src = Path(tc.sources or "")
    build_dir = work / "build"
    entry_dir = work / "entry"
    entry_dir.mkdir(parents=True)
    env, dropped = _build_env(tc)
    if dropped:
        print(f"ffpa_attn.jit: ignoring {', '.join(dropped)} from the environment: a first-use build uses the "
              "release's flags only, so a cached entry never depends on them", file=stream, flush=True)
    # The shipped sources sit inside site-packages, maybe inside some git checkout: the
    # version comes from the package, never from an enclosing repository.
    env["GIT_CEILING_DIRECTORIES"] = str(src.parent)
    configure = [
        str(tc.cmake), "-S", str(src), "-B", str(build_dir), "-G", "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={tc.ninja}",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DFFPA_COMPONENTS=kernels", "-DFFPA_PROFILE=dev", "-DFFPA_BUILD_TESTING=OFF",
        f"-DFFPA_CUDA_ARCHS={key['arch']}",
        f"-DFFPA_HEAD_DIMS={','.join(str(d) for d in key['head_dims'])}",
        f"-DFFPA_DTYPES={','.join(key['dtypes'])}",
        f"-DFFPA_KERNEL_SET={key['kernels']}",
        f"-DFFPA_KERNELS_OUTPUT_NAME=ffpa_kernels_{name.rsplit('-', 1)[-1]}",
        f"-DCMAKE_CUDA_COMPILER={tc.nvcc}",
        f"-DCMAKE_CXX_COMPILER={tc.cxx}",
        f"-DCMAKE_CUDA_HOST_COMPILER={tc.cxx}",
        f"-DCUDAToolkit_ROOT={tc.cuda_root}",
        f"-DFFPA_PYTHON_INTERPRETERS={sys.executable}",
        f"-Dpybind11_INCLUDE_DIR={tc.pybind11_include}",
        f"-DFFPA_CUTLASS_DIR={tc.cutlass_include}",
        f"-DFFPA_RELEASE_DIST={work / 'dist'}",
        # The private build directory as ccache's base dir: the generated instance files
        # (csrc/gen/...) then have one spelling in every first-use build, so a union
        # rebuild's head dims already compiled are compiler-cache hits where ccache is
        # found (the release's flags, on the command line, are part of every hash).
        f"-DFFPA_CCACHE_BASEDIR={work}",
    ]
    release = _release_version()
    if release:
        configure.append(f"-DFFPA_RELEASE_VERSION={release}")
    work_log = work / "build.log"
    try:
        with open(work_log, "x", encoding="utf-8") as log, _Progress(what, stream, log=work_log) as progress:
            if _run_logged(configure, log, env, work) != 0:
                raise JitError(f"configuring the JIT build of {what} failed (log: {log_path}):\n{_log_tail(work_log)}")
            check = dict(line.split("=", 1) for line in (build_dir / "gpu-check.txt").read_text().splitlines()
                         if "=" in line)
            tag = check.get("binding", "")
            if not re.fullmatch(r"cp\d+t?", tag):
                raise JitError(f"the JIT build of {what} cannot build the binding for {sys.executable}: {tag} "
                               f"(log: {log_path})")
            if _run_logged([str(tc.cmake), "--build", str(build_dir), "--target", "ffpa_kernels", f"ffpa_C_{tag}"],
                           log, env, work) != 0:
                raise JitError(f"building {what} failed (log: {log_path}):\n{_log_tail(work_log)}")
            progress._say(f"built {what} in {progress.elapsed:.0f} s")
    finally:
        with contextlib.suppress(OSError):
            _real_dir(log_path.parent)
            os.replace(work_log, log_path)  # a rename: replaces a planted link, never follows it
    out = build_dir / "python" / "ffpa_attn"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    files: dict[str, str] = {}
    for built in sorted(out.iterdir()):
        if built.name == f"_C{suffix}" or re.fullmatch(r"libffpa_kernels_[0-9a-f]+\.so", built.name):
            shutil.copy2(built, entry_dir / built.name)
            files[built.name] = _file_hash(entry_dir / built.name)
    module = f"_C{suffix}"
    if module not in files or len(files) != 2:
        raise JitError(f"the JIT build of {what} did not produce {module} and its kernel library in {out} "
                       f"(found {sorted(files)}; log: {log_path})")
    manifest = {"format": _MANIFEST_FORMAT, "name": name, "key": key, "module": module, "files": files,
                "build_seconds": round(progress.elapsed, 1), "python": sys.executable,
                "nvcc": tc.nvcc, "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    # Written last: an entry without a readable manifest is half-written.
    _write_nofollow(entry_dir / MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    return entry_dir


def _normalize(arch: str, head_dims: Sequence[int], dtypes: Sequence[str], kernels: str) -> tuple[list[int], list[str]]:
    # Checked before they name a directory or reach CMake (which checks them again);
    # duplicates folded.
    if not re.fullmatch(r"[1-9][0-9]{1,2}[af]?", str(arch)) or \
            (MIN_SM is not None and int(re.sub(r"[af]$", "", str(arch))) < MIN_SM):
        raise ValueError(f"arch {arch!r}: give a CUDA arch{f' from {MIN_SM}' if MIN_SM else ''}, e.g. 86, 90, 100, "
                         "120")
    bad_dims = [d for d in head_dims if type(d) is not int or d % 64 or not 64 <= d <= 1024]
    if not head_dims or bad_dims:
        raise ValueError(f"head dims {list(head_dims)}: give multiples of 64 from 64 to 1024")
    if not dtypes or not set(dtypes) <= {"fp16", "bf16"}:
        raise ValueError(f"dtypes {list(dtypes)}: give fp16 and/or bf16")
    if kernels not in ("plain", "all"):
        raise ValueError(f"kernels={kernels!r}: use 'plain' (mma, tma, simt, backward) or 'all' (with CuTe and "
                         "low precision)")
    return sorted(set(head_dims)), sorted(set(dtypes))


def _describe(arch: str, head_dims: Sequence[int], dtypes: Sequence[str], gpu: str | None) -> str:
    return (f"the FFPA kernels for sm_{arch}{' (' + gpu + ')' if gpu else ''}, head dim "
            f"{', '.join(str(d) for d in sorted(head_dims))}, {'/'.join(sorted(dtypes))}")


def build(arch: str, head_dims: Sequence[int], dtypes: Sequence[str], *, kernels: str = "plain",
          gpu: str | None = None, toolchain: Toolchain | None = None, stream: TextIO | None = None,
          root: Path | None = None, note: str = "") -> Path:
    """The cache entry for (arch, head dims, dtypes, kernel set), building it when absent.

    Raises :class:`JitUnavailableError` when the toolchain is incomplete, :class:`JitCacheError`
    when the cache root is unusable and :class:`JitError` when the build fails. Concurrent
    callers (threads or processes) build once; a waiting one says so on ``stream``.
    """
    dims, dts = _normalize(arch, head_dims, dtypes, kernels)
    tc = toolchain or find_toolchain()
    what = _describe(arch, dims, dts, gpu) + note
    if not tc.complete:
        detail, fix = missing_message(tc, what)
        raise JitUnavailableError(f"{detail}; {fix}", tc.missing)
    root = root or cache_root()
    key = _entry_key(tc, arch, dims, dts, kernels)
    name = _entry_name(key)
    final = root / "entries" / name
    if _read_manifest(final) is not None:
        return final
    stream = stream or sys.stderr
    _check_root(root, "the caller")
    entries, tmp_dir = _real_dir(root / "entries"), _real_dir(root / "tmp")
    with _locked(root / "locks" / f"{name}.lock", what=what, stream=stream, root=root):
        if _read_manifest(final) is not None:  # another process built it while we waited
            return final
        # Left by a builder of this entry that was killed: nobody else holds the lock.
        for left in tmp_dir.glob(f"{name}.*"):
            shutil.rmtree(left, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=tmp_dir))
        try:
            entry_dir = _build_into(tc, key, name, work, what, stream, root / "logs" / f"{name}.log")
            if os.path.lexists(final):
                # Half-written, corrupt or malformed (no intact manifest), or a planted
                # link: moved aside (a rename never follows it), then replaced.
                stale = Path(tempfile.mkdtemp(prefix=f"{name}.stale.", dir=tmp_dir))
                os.replace(final, stale / "entry")
            os.replace(entry_dir, entries / name)
        finally:
            for left in tmp_dir.glob(f"{name}.*"):  # the build tree, a replaced entry
                shutil.rmtree(left, ignore_errors=True)
    return final


def find_entry(arch: str, head_dims: int | Sequence[int], dtypes: str | Sequence[str], toolchain: Toolchain,
               root: Path | None = None) -> Path | None:
    """The smallest intact cached entry for this toolchain, arch and interpreter covering
    every (head dim, dtype) given."""
    if toolchain.sources is None:
        return None
    dims = {head_dims} if isinstance(head_dims, int) else set(head_dims)
    dts = {dtypes} if isinstance(dtypes, str) else set(dtypes)
    want = _entry_key(toolchain, arch, sorted(dims), sorted(dts), "plain")
    fixed = {k: v for k, v in want.items() if k not in ("head_dims", "dtypes", "kernels")}
    best: tuple[int, Path] | None = None
    for path, manifest in list_entries(root):
        if manifest is None:
            continue
        key = manifest["key"]
        if any(key.get(k) != v for k, v in fixed.items()):
            continue
        if dims <= set(key["head_dims"]) and dts <= set(key["dtypes"]):
            size = len(key["head_dims"]) * len(key["dtypes"])
            if best is None or size < best[0]:
                best = (size, path)
    return best[1] if best else None


def clean(names: Sequence[str], root: Path | None = None) -> list[Path]:
    """Remove the named entries (all entries when none is named) with their locks and logs.

    Only entry-shaped names (what a build writes: ``sm90-d128-fp16-plain-<16 hex>``) are
    taken, and only real directories directly in ``entries/`` are removed: never through a
    symlink (``entries/`` itself included), never a path. Raises ValueError naming what it
    refuses, before removing anything."""
    root = root or cache_root()
    entries = root / "entries"
    bad = [n for n in names if not _ENTRY_NAME.fullmatch(n)]
    if bad:
        raise ValueError(f"not cache entry names: {', '.join(repr(n) for n in bad)} (clean takes the names "
                         "python -m ffpa_attn.jit list shows, e.g. sm90-d128-fp16-plain-0123456789abcdef)")
    if not os.path.lexists(entries):
        if names:
            raise ValueError(f"no cache entry {', '.join(names)} in {entries}")
        return []
    if not stat.S_ISDIR(os.lstat(entries).st_mode):
        raise ValueError(f"{entries} is not a directory (a symlink?): clean never removes through one; remove it "
                         "by hand if it is yours")
    targets = [entries / n for n in names] if names else [p for p, _ in list_entries(root)]
    for t in targets:
        if not os.path.lexists(t) or not stat.S_ISDIR(os.lstat(t).st_mode):
            raise ValueError(f"no cache entry {t.name} in {entries}" + (" (it is a symlink: clean never follows one)"
                                                                         if os.path.islink(t) else ""))
    removed = []
    for t in targets:
        with _locked(root / "locks" / f"{t.name}.lock"):
            shutil.rmtree(t)  # on Linux it never follows a link inside (shutil.rmtree.avoids_symlink_attacks)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(root / "logs" / f"{t.name}.log")  # unlink removes a link, never its target
        with contextlib.suppress(FileNotFoundError):
            os.unlink(root / "locks" / f"{t.name}.lock")
        removed.append(t)
    return removed


# --- the head dims of a model ------------------------------------------------------------------

# Keys that hold a part of an attention head, not a head dim the kernels see (MLA's split
# query / key heads).
_PART_HEAD_DIMS = frozenset({"qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank"})
_CONFIG_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "torch.bfloat16": "bf16",
                  "torch.float16": "fp16"}


def _config_dict(config: Any) -> dict[str, Any]:
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read a transformers config from {path}: {exc}; give a model directory or "
                             "its config.json") from exc
    elif hasattr(config, "to_dict"):
        data = config.to_dict()
    else:
        data = config
    if not isinstance(data, dict):
        raise ValueError(f"a transformers config is a JSON object, not {type(data).__name__}")
    return data


def model_head_dims(config: Any) -> dict[str, Any]:
    """The attention head dims a transformers config's layers use: ``{"head_dims": [...]
    the kernels take, "other": {dim: why not}, "dtype": "bf16"|"fp16"|None}``.

    Read from every (sub-)config (``text_config``, ``vision_config``, ...): ``head_dim``
    and every ``*_head_dim`` (Gemma's ``global_head_dim`` beside the sliding layers'
    ``head_dim``), ``head_dims`` / ``layer_head_dims`` lists (per-layer), and
    ``hidden_size / num_attention_heads`` where a config names no head dim."""
    data = _config_dict(config)
    dims: set[int] = set()
    dtype: str | None = None

    def walk(d: dict[str, Any]) -> None:
        nonlocal dtype
        named = False
        for k, v in d.items():
            if type(v) is int and (k == "head_dim" or k.endswith("_head_dim")) and k not in _PART_HEAD_DIMS:
                dims.add(v)
                named = True
            elif k in ("head_dims", "layer_head_dims") and isinstance(v, list):
                dims.update(x for x in v if type(x) is int)
                named = True
        h, n = d.get("hidden_size"), d.get("num_attention_heads")
        if not named and type(h) is int and type(n) is int and n > 0 and not any(k in d for k in _PART_HEAD_DIMS):
            dims.add(h // n)
        for k in ("torch_dtype", "dtype"):
            if dtype is None and isinstance(d.get(k), str):
                dtype = _CONFIG_DTYPES.get(d[k])
        for v in d.values():
            if isinstance(v, dict):
                walk(v)

    walk(data)
    ok = sorted(d for d in dims if d % 64 == 0 and 64 <= d <= 1024)
    other = {d: "the kernels take multiples of 64 from 64 to 1024: SDPA runs it" for d in sorted(dims) if d not in ok}
    return {"head_dims": ok, "other": other, "dtype": dtype}


# --- loading -----------------------------------------------------------------------------------

_LOAD_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}
# (arch, head dims, dtypes) -> the fallback a failed attempt returned: asked once per process
# (installing the toolchain takes a restart), so a machine without one pays no lookup per call.
_FAILED: dict[tuple[str, tuple[int, ...], tuple[str, ...]], tuple[str, str, str | None]] = {}


def load(entry: Path) -> ModuleType:
    """Import an entry's binding as ``ffpa_attn._C`` and make the package use it.

    A process holds one first-use build at a time: loading another (one holding more head
    dims or dtypes: :func:`prepare`) makes every later call use it; the one before stays
    mapped, unused (its kernel library has its own name, so the two never clash)."""
    manifest = _read_manifest(entry)
    if manifest is None:
        raise JitError(f"the JIT cache entry {entry} is incomplete or corrupt; remove it "
                       "(python -m ffpa_attn.jit clean) and call again")
    from . import cuda
    spec = importlib.util.spec_from_file_location("ffpa_attn._C", entry / manifest["module"])
    if spec is None or spec.loader is None:
        raise JitError(f"cannot import {entry / manifest['module']}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise JitError(f"the JIT-built extension {entry / manifest['module']} failed to load ({exc}); "
                       "remove the entry (python -m ffpa_attn.jit clean) and call again") from exc
    sys.modules["ffpa_attn._C"] = module
    # `from ffpa_attn import _C` reads the package attribute, which a wheel's own _C set.
    setattr(sys.modules[__package__], "_C", module)
    cuda.adopt_extension(module)
    _LOADED.update(entry=str(entry), manifest=manifest)
    return module


def loaded_entry() -> dict[str, Any] | None:
    """The manifest of the JIT entry this process loaded, or None."""
    return dict(_LOADED["manifest"]) if _LOADED else None


def _servable(head_dim: int | None, dtype: str | None) -> bool:
    return type(head_dim) is int and dtype in ("fp16", "bf16") and head_dim % 64 == 0 and 64 <= head_dim <= 1024


def widen_hint(head_dim: int, dtype: str) -> str | None:
    """The fix for a call the loaded first-use build lacks (another head dim or dtype, when
    building their union failed), or None when no first-use build is loaded."""
    if not _LOADED or not _servable(head_dim, dtype):
        return None
    key = _LOADED["manifest"]["key"]
    dims = ",".join(str(d) for d in sorted({*key["head_dims"], head_dim}))
    dtypes = ",".join(sorted({*key["dtypes"], dtype}))
    return (f"this process loaded a first-use build for head dims {key['head_dims']} and {'/'.join(key['dtypes'])} "
            f"only: prebuild one entry covering every call with python -m ffpa_attn.jit build --arch {key['arch']} "
            f"--head-dims {dims} --dtypes {dtypes} (or --for-model <config>); the next call loads it")


def wanted(arch_runs: bool, head_dim: int | None = None, dtype: str | None = None) -> bool:
    """Whether a call on a GPU for which the installed kernels' ``arch_runs`` needs a
    first-use build or load: enabled, and either nothing loaded yet while the installed
    extension is absent (not broken: that is reported as such, never papered over) or lacks
    the arch, or a first-use build is loaded that lacks this call's (head dim, dtype).
    Cheap: the launch path asks it on every call."""
    if not enabled():
        return False
    if _LOADED:
        if not _servable(head_dim, dtype):
            return False
        key = _LOADED["manifest"]["key"]
        return head_dim not in key["head_dims"] or dtype not in key["dtypes"]
    from . import cuda
    if cuda.EXTENSION_IMPORT_ERROR is not None:
        return False
    return cuda.extension() is None or not arch_runs


_JIT_FIX = "see the message above, or set FFPA_JIT=0 to run SDPA without this warning"


def prepare(capability: tuple[int, int], head_dims: Sequence[int], dtypes: Sequence[str], *,
            gpu: str | None = None, capturing: bool = False, stream: TextIO | None = None
            ) -> tuple[str, str, str | None] | None:
    """Make first-use kernels for every (head dim, dtype) given available in this process:
    the loaded build when it holds them, else a cached entry holding them and what is
    loaded (their union), else that union built now. None when done, else the fallback
    ``(reason "jit", detail, fix)``; never raises for the cache or the toolchain."""
    major, minor = int(capability[0]), int(capability[1])
    if MIN_SM is not None and major * 10 + minor < MIN_SM:
        return None  # older than the kernels support: the caller reports "arch"
    arch = f"{major}{minor}"
    dims = sorted({int(d) for d in head_dims if _servable(int(d), "fp16")})
    dts = sorted({d for d in dtypes if d in ("fp16", "bf16")})
    if not dims or not dts:
        return None
    with _LOAD_LOCK:
        replacing = ""
        if _LOADED:
            key = _LOADED["manifest"]["key"]
            if key["arch"] != arch:
                return None  # another GPU's build is loaded: the caller reports "arch"
            if set(dims) <= set(key["head_dims"]) and set(dts) <= set(key["dtypes"]):
                return None
            replacing = f" (with the loaded head dims {key['head_dims']}, {'/'.join(key['dtypes'])})"
            dims, dts = sorted({*dims, *key["head_dims"]}), sorted({*dts, *key["dtypes"]})
        failed = _FAILED.get((arch, tuple(dims), tuple(dts)))
        if failed is not None:
            return failed
        what = _describe(arch, dims, dts, gpu) + replacing
        try:
            root = cache_root()
            # A cached entry first: the quick lookup (no CMake subprocess) is what every
            # later process pays once.
            quick = find_toolchain(for_build=False)
            entry = find_entry(arch, dims, dts, quick, root) if quick.complete else None
            if entry is not None and not capturing:
                try:
                    load(entry)
                    return None
                except JitError:
                    entry = None  # rebuilt below
            tc = find_toolchain()
            if not tc.complete:
                detail, fix = missing_message(tc, what)
                _FAILED[(arch, tuple(dims), tuple(dts))] = ("jit", detail, fix)
                return _FAILED[(arch, tuple(dims), tuple(dts))]
            if entry is None:
                entry = find_entry(arch, dims, dts, tc, root)
            if capturing:
                raise JitError(f"{what} are not loaded yet, and they are never {'loaded' if entry else 'built'} "
                               "during CUDA graph capture: call ffpa_attn_func once eagerly (outside the capture) "
                               f"first, or prebuild with python -m ffpa_attn.jit build --arch {arch} --head-dims "
                               f"{','.join(map(str, dims))} --dtypes {','.join(dts)}")
            if entry is None:
                entry = build(arch, dims, dts, gpu=gpu, toolchain=tc, root=root, stream=stream, note=replacing)
            load(entry)
        except JitError as exc:
            if capturing and not isinstance(exc, JitCacheError):
                raise
            _FAILED[(arch, tuple(dims), tuple(dts))] = ("jit", str(exc), _JIT_FIX)
            return _FAILED[(arch, tuple(dims), tuple(dts))]
        except OSError as exc:
            # The cache's filesystem said no (full, read-only, vanished): SDPA, said once.
            _FAILED[(arch, tuple(dims), tuple(dts))] = (
                "jit", f"the first-use build of {what} could not use its cache ({exc})",
                f"set {CACHE_ENV} to a writable directory, or FFPA_JIT=0 to run SDPA without this warning")
            return _FAILED[(arch, tuple(dims), tuple(dts))]
    return None


def ensure(capability: tuple[int, int], head_dim: int, dtype: str, *, arch_runs: bool, gpu: str | None = None,
           capturing: bool = False) -> tuple[str, str, str | None] | None:
    """Make kernels for this GPU and call available if the installed ones cannot serve it
    (:func:`prepare` for one head dim and dtype).

    Returns None when nothing is needed or the JIT build was loaded, else the fallback
    ``(reason, detail, fix)`` (reason ``"jit"``). ``capturing``: the call is inside CUDA
    graph capture, where no build or load may happen (raises :class:`JitError`).
    """
    if not wanted(arch_runs, head_dim, dtype):
        return None
    return prepare(capability, [head_dim], [dtype], gpu=gpu, capturing=capturing)


def prepare_for_model(config: Any, query: Any) -> tuple[str, str, str | None] | None:
    """What the transformers backend runs on a model's first call: the head dims of every
    layer (:func:`model_head_dims`) in one first-use build for ``query``'s GPU and dtype,
    so no layer runs SDPA for want of its head dim. None when nothing was needed or done."""
    import torch  # only the torch integration calls this

    dtype = {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(query.dtype)
    if dtype is None or not query.is_cuda or torch.compiler.is_compiling():
        return None
    try:
        if torch.cuda.is_current_stream_capturing():
            return None  # the call's own path says why nothing is built there
        index = query.device.index if query.device.index is not None else torch.cuda.current_device()
        capability = tuple(int(x) for x in torch.cuda.get_device_capability(index))
        gpu: str | None = torch.cuda.get_device_name(index)
    except (RuntimeError, AssertionError):
        return None
    try:
        dims = model_head_dims(config)["head_dims"]
    except ValueError:
        return None
    from . import cuda, launch
    arch_runs = cuda.extension() is not None and launch.arch_runs(capability)
    if not dims or not any(wanted(arch_runs, d, dtype) for d in dims):
        return None
    return prepare(capability, dims, [dtype], gpu=gpu)


def status(probe: bool = True) -> dict[str, Any]:
    """What ``python -m ffpa_attn.info`` reports: enabled, cache, toolchain (complete only
    when :func:`probe_toolchain` compiled and linked with it), loaded entry."""
    tc = checked_toolchain() if probe and enabled() else find_toolchain()
    try:
        root: Path | None = cache_root()
        cache_error = None
    except JitCacheError as exc:
        root, cache_error = None, str(exc)
    missing = [{"what": m, "install": f} for m, f in tc.missing]
    if cache_error:
        missing.append({"what": cache_error, "install": f"set {CACHE_ENV} to an absolute directory you own"})
    return {
        "enabled": enabled(),
        "cache_dir": str(root) if root else None,
        "cache_error": cache_error,
        "sources": tc.sources,
        "toolchain_complete": tc.complete and cache_error is None,
        "missing": missing,
        "nvcc": tc.nvcc, "nvcc_version": tc.nvcc_version, "cmake": tc.cmake, "ninja": tc.ninja, "cxx": tc.cxx,
        "cuda_lib": tc.cuda_lib, "cutlass_version": tc.cutlass_version,
        "entries": [p.name + ("" if m else " (incomplete: rebuilt on use)") for p, m in list_entries(root)]
        if root else [],
        "loaded": _LOADED.get("entry"),
    }


# --- command line ------------------------------------------------------------------------------


def _csv(text: str) -> list[str]:
    return [t for t in re.split(r"[,;\s]+", text) if t]


def _gpu_arch() -> str | None:
    # Asked from torch when it is installed (the command line also runs on machines
    # without a GPU: images built ahead of time name --arch).
    try:
        import torch  # type: ignore[import-not-found]
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{major}{minor}"
    except ImportError:
        pass
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ffpa_attn.jit",
                                     description="Prebuild, list and clean ffpa-attn's first-use kernel builds.")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (or find cached) kernels for an arch, head dims and dtypes")
    b.add_argument("--arch", help="CUDA arch, e.g. 80, 90, 100 (default: the GPU present)")
    b.add_argument("--head-dims", help="comma-separated head dims, e.g. 128,512")
    b.add_argument("--for-model", metavar="CONFIG",
                   help="a transformers config.json or model directory: every head dim its layers use")
    b.add_argument("--dtypes", help="fp16 and/or bf16 (default: the model's dtype with --for-model, else both)")
    b.add_argument("--kernels", default="plain", choices=("plain", "all"),
                   help="plain: mma/tma/simt and backward (default); all: with CuTe and low precision")
    sub.add_parser("list", help="the cache's entries")
    c = sub.add_parser("clean", help="remove cache entries (all, or the named ones) with their locks and logs")
    c.add_argument("names", nargs="*", help="entry names, as list shows them")
    args = parser.parse_args(argv)
    try:
        root = cache_root()
    except JitCacheError as exc:
        print(f"ffpa_attn.jit: {exc}", file=sys.stderr)
        return 2
    if args.command == "build":
        arch = args.arch or _gpu_arch()
        if not arch:
            parser.error("no GPU visible: pass --arch (e.g. --arch 90)")
        if bool(args.head_dims) == bool(args.for_model):
            parser.error("give --head-dims (e.g. 128,512) or --for-model <config.json or model directory>")
        dims: list[int] = []
        dtypes = _csv(args.dtypes) if args.dtypes else []
        if args.for_model:
            try:
                found = model_head_dims(args.for_model)
            except ValueError as exc:
                parser.error(str(exc))
            for d, why in found["other"].items():
                print(f"ffpa_attn.jit: head dim {d} of {args.for_model}: {why}", file=sys.stderr)
            if not found["head_dims"]:
                parser.error(f"{args.for_model} names no head dim the kernels take")
            dims = found["head_dims"]
            dtypes = dtypes or ([found["dtype"]] if found["dtype"] else ["fp16", "bf16"])
        else:
            try:
                dims = [int(d) for d in _csv(args.head_dims)]
            except ValueError:
                parser.error(f"--head-dims {args.head_dims!r}: give numbers, e.g. 128,512")
        try:
            entry = build(arch, dims, dtypes or ["fp16", "bf16"], kernels=args.kernels, root=root)
        except ValueError as exc:
            parser.error(str(exc))
        except JitError as exc:
            print(f"ffpa_attn.jit: {exc}", file=sys.stderr)
            return 1
        except OSError as exc:
            print(f"ffpa_attn.jit: the cache {root}: {exc}", file=sys.stderr)
            return 1
        print(entry)
        return 0
    if args.command == "list":
        print(f"cache: {root}")
        for path, manifest in list_entries(root):
            if manifest is None:
                print(f"{path.name}  (incomplete or corrupt: rebuilt on next use)")
            else:
                k = manifest["key"]
                print(f"{path.name}  sm_{k['arch']} head dims {k['head_dims']} {'/'.join(k['dtypes'])} "
                      f"{k['kernels']} ffpa {k['version']} nvcc {k['nvcc']} {k['abi']}")
        return 0
    try:
        removed = clean(args.names, root)
    except ValueError as exc:
        print(f"ffpa_attn.jit: {exc}", file=sys.stderr)
        return 1
    for t in removed:
        print(f"removed {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
