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
``strict=True`` raises it) and by ``python -m ffpa_attn.info``.

The cache (:func:`cache_root`): ``$FFPA_CACHE_DIR``, else ``$XDG_CACHE_HOME/ffpa_attn``,
else ``~/.cache/ffpa_attn``. An entry is keyed by the sources' hash, the package version,
the arch, the interpreter's ABI, the nvcc and CUTLASS versions, the head dims, dtypes and
kernel set; it is built in a private directory and renamed into place under an exclusive
file lock (one build for every process of a node), and holds ``manifest.json`` (written
last, with the hash of every file), so a half-written or altered entry is rebuilt.
``FFPA_JIT=0`` turns all of this off. Command line: ``python -m ffpa_attn.jit build|list|clean``.

One library per process: after a JIT build is loaded, a call with another head dim or
dtype runs SDPA (reason ``"head_dim"`` / ``"dtype"``) until the process restarts; prebuild
several head dims into one entry with ``python -m ffpa_attn.jit build --head-dims 128,512``
(a cached entry covering the call is preferred to a new build).
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
import shutil
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

from .errors import ExtensionNotAvailableError
from .validation import MIN_SM

__all__ = [
    "CACHE_ENV",
    "JIT_ENV",
    "JitError",
    "JitUnavailableError",
    "Toolchain",
    "build",
    "cache_root",
    "enabled",
    "ensure",
    "find_toolchain",
    "list_entries",
    "loaded_entry",
    "main",
    "source_dir",
    "status",
    "wanted",
    "widen_hint",
]

JIT_ENV = "FFPA_JIT"
CACHE_ENV = "FFPA_CACHE_DIR"
MANIFEST = "manifest.json"
# The manifest's own format; a reader refuses other formats (and rebuilds the entry).
_MANIFEST_FORMAT = 1
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


def cache_root() -> Path:
    """``$FFPA_CACHE_DIR``, else ``$XDG_CACHE_HOME/ffpa_attn``, else ``~/.cache/ffpa_attn``."""
    explicit = os.environ.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ffpa_attn"


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


def _version() -> str:
    from . import __version__
    return __version__


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
                     sources=str(src) if src else None, missing=tuple(missing))


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
        "version": _version(),
        "arch": arch,
        "abi": _abi_tag(),
        "nvcc": tc.nvcc_version,
        "cutlass": tc.cutlass_version,
        "head_dims": sorted(int(d) for d in head_dims),
        "dtypes": sorted(dtypes),
        "kernels": kernels,
    }


_KEY_FIELDS = frozenset({"sources", "version", "arch", "abi", "nvcc", "cutlass", "head_dims", "dtypes", "kernels"})


def _entry_name(key: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    dims = "-".join(str(d) for d in key["head_dims"])
    return f"sm{key['arch']}-d{dims}-{'-'.join(key['dtypes'])}-{key['kernels']}-{digest}"


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_manifest(entry: Path) -> dict[str, Any] | None:
    """The manifest of an intact entry (every file present with its recorded hash), else None."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        if not isinstance(manifest, dict) or manifest.get("format") != _MANIFEST_FORMAT:
            return None
        files = manifest["files"]
        for name, digest in files.items():
            if "/" in name or name.startswith(".") or _file_hash(entry / name) != digest:
                return None
        if manifest["module"] not in files:
            return None
        key = manifest["key"]
        if not isinstance(key, dict) or not _KEY_FIELDS <= set(key):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return manifest


def list_entries(root: Path | None = None) -> list[tuple[Path, dict[str, Any] | None]]:
    """Every entry of the cache with its manifest (None: half-written or corrupt)."""
    root = root or cache_root()
    entries = root / "entries"
    if not entries.is_dir():
        return []
    return [(p, _read_manifest(p)) for p in sorted(entries.iterdir()) if p.is_dir()]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class _Progress:
    """Build progress on stderr: what, for which GPU, elapsed (every ``every`` seconds)."""

    def __init__(self, what: str, stream: TextIO, every: float = 15.0) -> None:
        self.what, self.stream, self.every = what, stream, every
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _say(self, text: str) -> None:
        print(f"ffpa_attn.jit: {text}", file=self.stream, flush=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._say(f"still building {self.what} ({time.monotonic() - self.start:.0f} s)")

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
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _release_version() -> str | None:
    # The package's version without a local label (+cu13), as the tree's FFPA_RELEASE_VERSION.
    v = _version().split("+", 1)[0]
    return v if re.fullmatch(r"\d+\.\d+\.\d+", v) else None


def _build_into(tc: Toolchain, key: dict[str, Any], name: str, work: Path, what: str, stream: TextIO,
                log_path: Path) -> Path:
    """Configure and build the kernels-only tree in ``work``; the finished entry directory."""
    src = Path(tc.sources or "")
    build_dir = work / "build"
    entry_dir = work / "entry"
    entry_dir.mkdir(parents=True)
    env = dict(os.environ)
    # The shipped sources sit inside site-packages, maybe inside some git checkout: the
    # version comes from the package, never from an enclosing repository.
    env["GIT_CEILING_DIRECTORIES"] = str(src.parent)
    env["PATH"] = os.pathsep.join(str(Path(p).parent) for p in (tc.ninja, tc.nvcc) if p) + os.pathsep + env.get("PATH", "")
    if tc.cxx:
        env["CXX"] = tc.cxx
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
        f"-DCUDAToolkit_ROOT={tc.cuda_root}",
        f"-DFFPA_PYTHON_INTERPRETERS={sys.executable}",
        f"-Dpybind11_INCLUDE_DIR={tc.pybind11_include}",
        f"-DFFPA_CUTLASS_DIR={tc.cutlass_include}",
        f"-DFFPA_RELEASE_DIST={work / 'dist'}",
    ]
    release = _release_version()
    if release:
        configure.append(f"-DFFPA_RELEASE_VERSION={release}")
    with open(log_path, "w", encoding="utf-8") as log, _Progress(what, stream) as progress:
        if _run_logged(configure, log, env, work) != 0:
            raise JitError(f"configuring the JIT build of {what} failed (log: {log_path}):\n{_log_tail(log_path)}")
        check = dict(line.split("=", 1) for line in (build_dir / "gpu-check.txt").read_text().splitlines() if "=" in line)
        tag = check.get("binding", "")
        if not re.fullmatch(r"cp\d+t?", tag):
            raise JitError(f"the JIT build of {what} cannot build the binding for {sys.executable}: {tag} "
                           f"(log: {log_path})")
        if _run_logged([str(tc.cmake), "--build", str(build_dir), "--target", "ffpa_kernels", f"ffpa_C_{tag}"],
                       log, env, work) != 0:
            raise JitError(f"building {what} failed (log: {log_path}):\n{_log_tail(log_path)}")
        progress._say(f"built {what} in {progress.elapsed:.0f} s")
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
    tmp = entry_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, entry_dir / MANIFEST)
    return entry_dir


def build(arch: str, head_dims: Sequence[int], dtypes: Sequence[str], *, kernels: str = "plain",
          gpu: str | None = None, toolchain: Toolchain | None = None, stream: TextIO | None = None,
          root: Path | None = None) -> Path:
    """The cache entry for (arch, head dims, dtypes, kernel set), building it when absent.

    Raises :class:`JitUnavailableError` when the toolchain is incomplete and :class:`JitError`
    when the build fails. Concurrent callers (threads or processes) build once.
    """
    # Checked before they name a directory or reach CMake (which checks them again).
    if not re.fullmatch(r"[1-9][0-9]{1,2}[af]?", str(arch)) or \
            (MIN_SM is not None and int(re.sub(r"[af]$", "", str(arch))) < MIN_SM):
        raise ValueError(f"arch {arch!r}: give a CUDA arch{f' from {MIN_SM}' if MIN_SM else ''}, e.g. 86, 90, 100, "
                         "120")
    bad_dims = [d for d in head_dims if not isinstance(d, int) or d % 64 or not 64 <= d <= 1024]
    if not head_dims or bad_dims:
        raise ValueError(f"head dims {list(head_dims)}: give multiples of 64 from 64 to 1024")
    if not dtypes or not set(dtypes) <= {"fp16", "bf16"}:
        raise ValueError(f"dtypes {list(dtypes)}: give fp16 and/or bf16")
    tc = toolchain or find_toolchain()
    what = f"the FFPA kernels for sm_{arch}{' (' + gpu + ')' if gpu else ''}, head dim " \
           f"{', '.join(str(d) for d in sorted(head_dims))}, {'/'.join(sorted(dtypes))}"
    if not tc.complete:
        detail, fix = missing_message(tc, what)
        raise JitUnavailableError(f"{detail}; {fix}", tc.missing)
    if kernels not in ("plain", "all"):
        raise ValueError(f"kernels={kernels!r}: use 'plain' (mma, tma, simt, backward) or 'all' (with CuTe and "
                         "low precision)")
    root = root or cache_root()
    key = _entry_key(tc, arch, head_dims, dtypes, kernels)
    name = _entry_name(key)
    final = root / "entries" / name
    if _read_manifest(final) is not None:
        return final
    stream = stream or sys.stderr
    with _locked(root / "locks" / f"{name}.lock"):
        if _read_manifest(final) is not None:  # another process built it while we waited
            return final
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        (root / "logs").mkdir(parents=True, exist_ok=True)
        # Left by a builder of this entry that was killed: nobody else holds the lock.
        for left in (root / "tmp").glob(f"{name}.*"):
            shutil.rmtree(left, ignore_errors=True)
        work = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=root / "tmp"))
        try:
            entry_dir = _build_into(tc, key, name, work, what, stream, root / "logs" / f"{name}.log")
            if final.exists():
                # Half-written or corrupt (no intact manifest): moved aside, then replaced.
                stale = Path(tempfile.mkdtemp(prefix=f"{name}.stale.", dir=root / "tmp"))
                os.replace(final, stale / "entry")
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(entry_dir, final)
        finally:
            for left in (root / "tmp").glob(f"{name}.*"):  # the build tree, a replaced entry
                shutil.rmtree(left, ignore_errors=True)
    return final


def find_entry(arch: str, head_dim: int, dtype: str, toolchain: Toolchain, root: Path | None = None) -> Path | None:
    """An intact cached entry for this toolchain, arch and interpreter covering (head dim, dtype)."""
    if toolchain.sources is None:
        return None
    want = _entry_key(toolchain, arch, [head_dim], [dtype], "plain")
    fixed = {k: v for k, v in want.items() if k not in ("head_dims", "dtypes", "kernels")}
    best: tuple[int, Path] | None = None
    for path, manifest in list_entries(root):
        key = manifest.get("key", {}) if manifest else {}
        if any(key.get(k) != v for k, v in fixed.items()):
            continue
        if head_dim in key.get("head_dims", ()) and dtype in key.get("dtypes", ()):
            size = len(key["head_dims"]) * len(key["dtypes"])
            if best is None or size > best[0]:
                best = (size, path)
    return best[1] if best else None


# --- loading -----------------------------------------------------------------------------------

_LOAD_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}
# (arch, head dim, dtype) -> the fallback a failed attempt returned: asked once per process
# (installing the toolchain takes a restart), so a machine without one pays no lookup per call.
_FAILED: dict[tuple[str, int, str], tuple[str, str, str | None]] = {}


def load(entry: Path) -> ModuleType:
    """Import an entry's binding as ``ffpa_attn._C`` and make the package use it."""
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
    cuda._adopt_extension(module)
    _LOADED.update(entry=str(entry), manifest=manifest)
    return module


def loaded_entry() -> dict[str, Any] | None:
    """The manifest of the JIT entry this process loaded, or None."""
    return dict(_LOADED["manifest"]) if _LOADED else None


def widen_hint(head_dim: int, dtype: str) -> str | None:
    """The fix for a call the loaded first-use build lacks (another head dim or dtype), or
    None when no first-use build is loaded (the reason's own fix applies)."""
    if not _LOADED or dtype not in ("fp16", "bf16") or head_dim % 64 or not 64 <= head_dim <= 1024:
        return None
    key = _LOADED["manifest"]["key"]
    dims = ",".join(str(d) for d in sorted({*key["head_dims"], head_dim}))
    dtypes = ",".join(sorted({*key["dtypes"], dtype}))
    return (f"this process loaded a first-use build for head dims {key['head_dims']} and {'/'.join(key['dtypes'])} "
            f"only (one per process): prebuild one entry covering every call with python -m ffpa_attn.jit build "
            f"--arch {key['arch']} --head-dims {dims} --dtypes {dtypes}, then restart the process")


def wanted(arch_runs: bool) -> bool:
    """Whether a call on a GPU for which the installed kernels' ``arch_runs`` needs a
    first-use build or load: enabled, none loaded yet, and the installed extension is
    absent (not broken: that is reported as such, never papered over) or lacks the arch.
    Cheap: the launch path asks it on every call."""
    if _LOADED or not enabled():
        return False
    from . import cuda
    if cuda.EXTENSION_IMPORT_ERROR is not None:
        return False
    return cuda.extension() is None or not arch_runs


def ensure(capability: tuple[int, int], head_dim: int, dtype: str, *, arch_runs: bool, gpu: str | None = None,
           capturing: bool = False) -> tuple[str, str, str | None] | None:
    """Make kernels for this GPU available if the installed ones cannot serve it.

    Returns None when nothing is needed or the JIT build was loaded, else the fallback
    ``(reason, detail, fix)`` (reason ``"jit"``). ``capturing``: the call is inside CUDA
    graph capture, where no build or load may happen (raises :class:`JitError`).
    """
    if not wanted(arch_runs):
        return None
    major, minor = int(capability[0]), int(capability[1])
    if MIN_SM is not None and major * 10 + minor < MIN_SM:
        return None  # older than the kernels support: the caller reports "arch"
    arch = f"{major}{minor}"
    with _LOAD_LOCK:
        if _LOADED:
            return None
        failed = _FAILED.get((arch, head_dim, dtype))
        if failed is not None:
            return failed
        what = f"the FFPA kernels for sm_{arch}{' (' + gpu + ')' if gpu else ''}"
        # A cached entry first: the quick lookup (no CMake subprocess) is what every later
        # process pays once.
        quick = find_toolchain(for_build=False)
        entry = find_entry(arch, head_dim, dtype, quick) if quick.complete else None
        if entry is not None and not capturing:
            try:
                load(entry)
                return None
            except JitError:
                entry = None  # rebuilt below
        tc = find_toolchain()
        if not tc.complete:
            detail, fix = missing_message(tc, what)
            _FAILED[(arch, head_dim, dtype)] = ("jit", detail, fix)
            return _FAILED[(arch, head_dim, dtype)]
        if entry is None:
            entry = find_entry(arch, head_dim, dtype, tc)
        if capturing:
            raise JitError(f"{what}, head dim {head_dim}, {dtype} are not loaded yet, and they are never "
                           f"{'loaded' if entry else 'built'} during CUDA graph capture: call ffpa_attn_func once "
                           "eagerly (outside the capture) first, or prebuild with python -m ffpa_attn.jit build "
                           f"--arch {arch} --head-dims {head_dim} --dtypes {dtype}")
        try:
            if entry is None:
                entry = build(arch, [head_dim], [dtype], gpu=gpu, toolchain=tc)
            load(entry)
        except JitError as exc:
            _FAILED[(arch, head_dim, dtype)] = (
                "jit", str(exc), "see the build log named above, or set FFPA_JIT=0 to run SDPA without this warning")
            return _FAILED[(arch, head_dim, dtype)]
    return None


def status() -> dict[str, Any]:
    """What ``python -m ffpa_attn.info`` reports: enabled, cache, toolchain, loaded entry."""
    tc = find_toolchain()
    return {
        "enabled": enabled(),
        "cache_dir": str(cache_root()),
        "sources": tc.sources,
        "toolchain_complete": tc.complete,
        "missing": [{"what": m, "install": f} for m, f in tc.missing],
        "nvcc": tc.nvcc, "nvcc_version": tc.nvcc_version, "cmake": tc.cmake, "ninja": tc.ninja, "cxx": tc.cxx,
        "cutlass_version": tc.cutlass_version,
        "entries": [p.name + ("" if m else " (incomplete: rebuilt on use)") for p, m in list_entries()],
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
    b.add_argument("--head-dims", required=True, help="comma-separated head dims, e.g. 128,512")
    b.add_argument("--dtypes", default="fp16,bf16", help="fp16 and/or bf16 (default both)")
    b.add_argument("--kernels", default="plain", choices=("plain", "all"),
                   help="plain: mma/tma/simt and backward (default); all: with CuTe and low precision")
    sub.add_parser("list", help="the cache's entries")
    c = sub.add_parser("clean", help="remove cache entries (all, or the named ones)")
    c.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    root = cache_root()
    if args.command == "build":
        arch = args.arch or _gpu_arch()
        if not arch:
            parser.error("no GPU visible: pass --arch (e.g. --arch 90)")
        try:
            dims = [int(d) for d in _csv(args.head_dims)]
        except ValueError:
            parser.error(f"--head-dims {args.head_dims!r}: give numbers, e.g. 128,512")
        try:
            entry = build(arch, dims, _csv(args.dtypes), kernels=args.kernels)
        except ValueError as exc:
            parser.error(str(exc))
        except JitError as exc:
            print(f"ffpa_attn.jit: {exc}", file=sys.stderr)
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
    entries = root / "entries"
    targets = [entries / n for n in args.names] if args.names else [p for p, _ in list_entries(root)]
    for t in targets:
        if t.parent != entries or not t.is_dir():
            print(f"ffpa_attn.jit: no cache entry {t.name} in {entries}", file=sys.stderr)
            return 1
    for t in targets:
        with _locked(root / "locks" / f"{t.name}.lock"):
            shutil.rmtree(t)
        print(f"removed {t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
