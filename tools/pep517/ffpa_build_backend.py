"""ffpa-attn's PEP 517 build backend: `pip install .`, `pip wheel .`, `pip install git+URL`, sdists.

A build from source is a local build for the GPU of the machine it runs on. It drives the
project's own CMake: the `local` configure preset (CMakePresets.json: profile dev, the
release head dims and dtypes, FFPA_LOCAL_BUILD so the CUDA wheel's version ends in
.local), the targets of the `local` build preset (`package`: CPack's External generator
runs the release engine `ffpa-index`, the one wheel writer, exactly as a release does),
then hands pip the one CUDA wheel the engine's manifest names. Nothing here writes a
wheel.

What the build takes (docs/install.md "Building from source"):
  -C cmake.define.NAME=VALUE   a cache variable of the project, as -DNAME=VALUE
                               (scikit-build-core's spelling), e.g. FFPA_CUDA_ARCHS=90,
                               FFPA_HEAD_DIMS=128, FFPA_DTYPES=fp16; an FFPA_* name the
                               project does not define is an error
  -C cmake.build-type=TYPE     CMAKE_BUILD_TYPE (default Release)
  -C build-dir=DIR             the build tree (default <source>/build/local, the local
                               preset's binaryDir; a rebuild there is incremental). A
                               directory that exists must be empty or one this backend
                               made (it holds ffpa-pep517-build-dir.json, written when the
                               backend created it): a foreign one is refused untouched
  FFPA_<NAME>=VALUE            environment variables naming a cache variable of the
                               project count as -DFFPA_<NAME>=VALUE; a config setting wins,
                               also an empty one (-C cmake.define.FFPA_RELEASE_VERSION=
                               takes the version from git whatever the environment says)
The arch: FFPA_CUDA_ARCHS when given, else every GPU the NVIDIA driver reports (asked
through libcuda, so neither nvidia-smi nor torch is needed), else the configure
preset's fallback (cmake/release-matrix.json "dev": 89).

The build requirements are read from the pins' one home (get_requires_for_build_wheel):
tools/requirements-build.txt (CMake, Ninja), tools/requirements.txt (pybind11),
tools/requirements-cutlass.txt (CUTLASS headers).

Editable installs (PEP 660, pip install -e .): the same build as a wheel; the editable
wheel holds what the build made (the extension, the kernel library, _build_info.py) and
a .pth that imports a finder making the package ffpa_attn the checkout's python/ffpa_attn
with those built files beside it (docs/install.md "Editable installs").

The sdist is HEAD's committed tree, read from git's blobs (never the worktree's files or
links), with PKG-INFO stating the wheels' metadata (PEP 643); a tree with uncommitted
changes is refused.

Only the standard library: a PEP 517 backend is imported before anything is installed.
"""

from __future__ import annotations

import base64
import ctypes
import gzip
import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

_PRESET = "local"
_DEFAULT_BUILD_DIR = Path("build") / _PRESET   # the local preset's binaryDir
_SOURCE_RECORD = "ffpa-source.json"          # read by cmake/FfpaVersion.cmake in an sdist
# Written into a build directory when this backend creates it; a non-empty directory
# without it is someone else's and is never written to.
_BUILD_DIR_MARKER = "ffpa-pep517-build-dir.json"
_BUILD_DIR_CLAIM = {"made_by": "ffpa-attn PEP 517 backend (tools/pep517/ffpa_build_backend.py)"}
_BUILD_TYPES = ("Release", "RelWithDebInfo", "MinSizeRel", "Debug")
_SETTING_KEYS = ("cmake.define.<NAME>", "cmake.build-type", "build-dir")

# Cache variables the backend decides: what a local build from source is. Each names
# why and what to do instead.
_CONTROLLED = {
    "FFPA_PROFILE": "pip builds a local wheel for this machine (profile dev); release wheels come from "
                    "cmake --preset release-full (docs/release.md)",
    "FFPA_LOCAL_BUILD": "a wheel built from source is always marked +cuNN.local",
    "FFPA_COMPONENTS": "the wheel needs every component (the engine packs it); a kernels-only tree is the "
                       "gpu-check preset",
    "FFPA_BUILD_TESTING": "a wheel build registers no tests; run them in a cmake --preset dev tree",
    "FFPA_PYTHON_INTERPRETERS": "the wheel is for the interpreter running the build ({python}); run pip with "
                                "the interpreter you want the wheel for",
    "FFPA_RELEASE_DIST": "the wheel goes to pip's wheel directory; -C build-dir=DIR says where the build "
                         "tree lives",
    "CMAKE_BUILD_TYPE": "use -C cmake.build-type=TYPE",
}


class FfpaBuildError(Exception):
    """A build from source that cannot go on; the message names the fix."""


def _log(message: str) -> None:
    print(f"ffpa build backend: {message}", file=sys.stderr, flush=True)


def _fail(message: str) -> FfpaBuildError:
    _log(f"error: {message}")
    return FfpaBuildError(message)


# --- config settings -------------------------------------------------------------------

class _Settings:
    def __init__(self, defines: dict[str, str], build_type: str, build_dir: Path | None):
        self.defines = defines
        self.build_type = build_type
        self.build_dir = build_dir


def _parse_settings(config_settings: dict | None) -> _Settings:
    defines: dict[str, str] = {}
    build_type = "Release"
    build_dir = None
    valid = ", ".join(_SETTING_KEYS)
    for key, value in (config_settings or {}).items():
        if isinstance(value, list):
            raise _fail(f"config setting '{key}' is given {len(value)} times ({value}); give it once")
        if not isinstance(value, str):
            raise _fail(f"config setting '{key}' has no value; write -C {key}=VALUE")
        if "\n" in value or "\r" in value or "\0" in value:
            raise _fail(f"config setting '{key}' holds a line break or NUL; give a one-line value")
        if key.startswith("cmake.define."):
            name = key[len("cmake.define."):]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise _fail(f"'{key}': '{name}' is not a CMake variable name; write -C cmake.define.FFPA_CUDA_ARCHS=90")
            if name in _CONTROLLED:
                why = _CONTROLLED[name].format(python=sys.executable)
                raise _fail(f"-C cmake.define.{name} is not a setting of a build from source: {why}")
            defines[name] = value
        elif key == "cmake.build-type":
            if value not in _BUILD_TYPES:
                raise _fail(f"-C cmake.build-type={value}: use one of {', '.join(_BUILD_TYPES)}")
            build_type = value
        elif key == "build-dir":
            if not value:
                raise _fail("-C build-dir= is empty; give a directory, e.g. -C build-dir=build/local-90")
            build_dir = Path(value)
        else:
            raise _fail(f"unknown config setting '{key}'; this backend takes {valid} "
                        "(e.g. -C cmake.define.FFPA_CUDA_ARCHS=90)")
    return _Settings(defines, build_type, build_dir)


# --- the pins -----------------------------------------------------------------------

def _pins(path: Path) -> dict[str, str]:
    """name -> 'name==version' of a requirements file (continuation lines and hashes skipped)."""
    text = path.read_text(encoding="utf-8").replace("\\\n", " ")
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if m:
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = f"{m.group(1)}=={m.group(2)}"
    return pins


def _requirement(source: Path, file: str, name: str) -> str:
    pins = _pins(source / "tools" / file)
    if name not in pins:
        raise _fail(f"tools/{file} pins no {name} (a 'name==version' line); the build needs it")
    return pins[name]


def _build_requirements(source: Path) -> list[str]:
    return [_requirement(source, "requirements-build.txt", "cmake"),
            _requirement(source, "requirements-build.txt", "ninja"),
            _requirement(source, "requirements.txt", "pybind11"),
            _requirement(source, "requirements-cutlass.txt", "nvidia-cutlass")]


# --- the GPU present ----------------------------------------------------------------

_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


def driver_archs() -> tuple[list[str], str]:
    """The compute capabilities ("90", "120") of every GPU the driver reports, and a sentence
    saying where they came from (or why there are none). libcuda is the driver itself: no
    nvidia-smi, no CUDA toolkit, no torch."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return [], "no NVIDIA driver (libcuda.so.1 not found)"
    c_int = ctypes.c_int
    rc = cuda.cuInit(0)
    if rc != 0:
        return [], f"the NVIDIA driver did not start (cuInit error {rc})"
    count = c_int(0)
    rc = cuda.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value == 0:
        return [], "the NVIDIA driver reports no GPU"
    archs = set()
    for ordinal in range(count.value):
        device, major, minor = c_int(0), c_int(0), c_int(0)
        if (cuda.cuDeviceGet(ctypes.byref(device), ordinal) != 0
                or cuda.cuDeviceGetAttribute(ctypes.byref(major), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) != 0
                or cuda.cuDeviceGetAttribute(ctypes.byref(minor), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) != 0):
            return [], f"the NVIDIA driver did not report GPU {ordinal}'s compute capability"
        archs.add(major.value * 10 + minor.value)
    return [str(a) for a in sorted(archs)], f"the GPUs the NVIDIA driver reports ({count.value})"


def min_sm(source: Path) -> int:
    """The lowest arch the kernels support: cmake/kernel-facts.json's arch_rules.min_sm (the
    configure refuses older FFPA_CUDA_ARCHS with the same fact)."""
    path = source / "cmake" / "kernel-facts.json"
    try:
        value = json.loads(path.read_text(encoding="utf-8"))["arch_rules"]["min_sm"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise _fail(f"{path}: no arch_rules.min_sm ({e}); build from a complete ffpa-attn source tree") from e
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _fail(f"{path}: arch_rules.min_sm must be an sm number such as 90, got {value!r}")
    return value


def _cuda_archs_define(source: Path) -> dict[str, str]:
    archs, origin = driver_archs()
    if not archs:
        _log(f"{origin}: building for the local preset's fallback arch "
             "(pass -C cmake.define.FFPA_CUDA_ARCHS=<arch> for another GPU)")
        return {}
    floor = min_sm(source)
    usable = [a for a in archs if int(a) >= floor]
    if not usable:
        raise _fail(f"this machine's GPUs are sm_{', sm_'.join(archs)}; the kernels need sm_{floor} or newer. "
                    "Install the pure wheel (pip install ffpa-attn: it runs torch SDPA), or build for another "
                    "GPU with -C cmake.define.FFPA_CUDA_ARCHS=89")
    if usable != archs:
        _log(f"leaving out sm_{', sm_'.join(a for a in archs if a not in usable)} (the kernels need sm_{floor}+)")
    _log(f"building for sm_{', sm_'.join(usable)}: {origin}")
    return {"FFPA_CUDA_ARCHS": ";".join(usable)}


# --- CMake ----------------------------------------------------------------------------

def _run(cmd: list[str], what: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    _log(" ".join(str(c) for c in cmd))
    try:
        rc = subprocess.call([str(c) for c in cmd], cwd=cwd, stdout=sys.stderr, env=env)
    except FileNotFoundError:
        raise _fail(f"{cmd[0]} is not installed; a build with isolation (the default of pip and build) installs "
                    f"it from the pins, else pip install {cmd[0]}") from None
    if rc != 0:
        raise _fail(f"{what} failed (exit {rc}); the messages above (CMake's, the compiler's) name the problem")


def _module_dir(module: str, relative: str, fix: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise _fail(f"the Python package '{module}' is not installed in the build environment; {fix}")
    return Path(next(iter(spec.submodule_search_locations))) / relative


def _tool_defines(source: Path, user: dict[str, str]) -> dict[str, str]:
    """Where the build environment's pybind11 and CUTLASS headers are (the presets' default
    is the tools venv, .venv, which a clone or an sdist does not have)."""
    defines = {}
    if "pybind11_INCLUDE_DIR" not in user:
        pin = _requirement(source, "requirements.txt", "pybind11")
        defines["pybind11_INCLUDE_DIR"] = str(_module_dir("pybind11", "include", f"pip install {pin}"))
    if "FFPA_CUTLASS_DIR" not in user:
        if importlib.util.find_spec("cutlass_library") is not None:
            defines["FFPA_CUTLASS_DIR"] = str(_module_dir("cutlass_library", "source/include", ""))
        else:
            # Without build isolation on a machine that reaches no registry: CMake's own
            # search (cmake/FfpaCutlass.cmake: the tools venv, the in-tree subset .cutlass/)
            # decides, and names the fix when it finds nothing.
            _log("no nvidia-cutlass in the build environment: the CUTLASS headers are left to CMake's search")
    return defines


def _file_api_query(build_dir: Path) -> None:
    query = build_dir / ".cmake" / "api" / "v1" / "query" / "client-ffpa-pep517"
    query.mkdir(parents=True, exist_ok=True)
    (query / "cache-v2").touch()


def _cache_entries(build_dir: Path) -> dict[str, dict]:
    """The cache as CMake's file API reports it (cache-v2): name -> entry."""
    reply = build_dir / ".cmake" / "api" / "v1" / "reply"
    indexes = sorted(reply.glob("index-*.json"))
    if not indexes:
        raise _fail(f"CMake wrote no file-API reply in {reply}; is this CMake 3.25 or newer?")
    index = json.loads(indexes[-1].read_text(encoding="utf-8"))
    response = index["reply"]["client-ffpa-pep517"]["cache-v2"]
    cache = json.loads((reply / response["jsonFile"]).read_text(encoding="utf-8"))
    return {e["name"]: e for e in cache["entries"]}


def _settable(entry: dict) -> bool:
    return entry["type"] not in ("INTERNAL", "STATIC", "UNINITIALIZED")


def _child_env(given: dict[str, str]) -> dict[str, str]:
    """The environment of CMake: without the FFPA_* variables a config setting gives, so the
    setting wins also where CMake itself reads the environment (cmake/FfpaVersion.cmake reads
    FFPA_RELEASE_VERSION when the cache value is empty), and also when the setting is empty."""
    return {k: v for k, v in os.environ.items() if not (k.startswith("FFPA_") and k in given)}


def _claim_build_dir(build_dir: Path) -> None:
    """A build writes only into a directory it made: a new or empty one is created and
    marked; a non-empty one must carry the mark. Checked before anything is written."""
    marker = build_dir / _BUILD_DIR_MARKER
    if build_dir.is_symlink() or (build_dir.exists() and not build_dir.is_dir()):
        raise _fail(f"the build directory {build_dir} is not a directory; give a new or empty directory with "
                    "-C build-dir=DIR")
    if build_dir.is_dir():
        ours = False
        if marker.is_file() and not marker.is_symlink():
            try:
                ours = json.loads(marker.read_text(encoding="utf-8")) == _BUILD_DIR_CLAIM
            except (OSError, ValueError):
                ours = False
        if ours:
            return
        if any(build_dir.iterdir()):
            raise _fail(f"the build directory {build_dir} is not empty and was not made by this backend (it has no "
                        f"valid {_BUILD_DIR_MARKER}); nothing in it was touched. Give a new or empty directory with "
                        "-C build-dir=DIR, or remove that one yourself if it is an old build tree of ffpa-attn")
    build_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(marker, (json.dumps(_BUILD_DIR_CLAIM, indent=1) + "\n").encode())


def _configure(source: Path, build_dir: Path, settings: _Settings, defines: dict[str, str], fresh: bool) -> None:
    _file_api_query(build_dir)
    cmd = ["cmake", "--preset", _PRESET, "-B", build_dir]
    if fresh:
        cmd.append("--fresh")   # no value from an earlier build with other settings survives
    cmd += [f"-DCMAKE_BUILD_TYPE={settings.build_type}",
            f"-DFFPA_PYTHON_INTERPRETERS={sys.executable}",
            f"-DFFPA_RELEASE_DIST={build_dir / 'dist'}"]
    cmd += [f"-D{k}={v}" for k, v in defines.items()]
    _run(cmd, "configuring (cmake --preset local)", source, _child_env(settings.defines))


def _build_targets(source: Path) -> list[str]:
    presets = json.loads((source / "CMakePresets.json").read_text(encoding="utf-8"))
    for preset in presets.get("buildPresets", []):
        if preset.get("name") == _PRESET:
            return list(preset["targets"])
    raise _fail(f"CMakePresets.json has no '{_PRESET}' build preset")


def _env_defines(entries: dict[str, dict], given: dict[str, str]) -> dict[str, str]:
    """FFPA_* environment variables that name a setting of the project (and no config setting)."""
    found, decided, ignored = {}, [], []
    for name, value in sorted(os.environ.items()):
        if not name.startswith("FFPA_") or name in given:
            continue
        if name in _CONTROLLED:
            decided.append(name)
        elif name in entries and _settable(entries[name]):
            found[name] = value
        else:
            ignored.append(name)
    if decided:
        _log(f"ignored from the environment, a build from source decides them: {', '.join(decided)}")
    if ignored:
        _log(f"not build settings, left to the package at run time: {', '.join(ignored)}")
    return found


def _unknown_defines(entries: dict[str, dict], given: dict[str, str]) -> None:
    """Every setting of the project is a typed FFPA_* cache entry; an FFPA_* name CMake left
    untyped was used nowhere (a typo). Other names are CMake's or a find module's (for
    example CUDAToolkit_ROOT, read without being typed) and go through as given."""
    unknown = [n for n in given if n.startswith("FFPA_") and (n not in entries or not _settable(entries[n]))]
    if unknown:
        known = sorted(n for n, e in entries.items()
                       if n.startswith("FFPA_") and _settable(e) and n not in _CONTROLLED)
        raise _fail(f"-C cmake.define.{unknown[0]} is not a setting of this project (CMake did not use it); "
                    f"its FFPA settings are: {', '.join(known)}")


# --- the hooks ----------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    _parse_settings(config_settings)   # a bad setting fails before anything is installed
    return _build_requirements(Path.cwd())


def get_requires_for_build_sdist(config_settings=None):
    _parse_settings(config_settings)
    return [_requirement(Path.cwd(), "requirements-build.txt", "cmake")]


def _build_dir(source: Path, settings: _Settings) -> Path:
    # Not resolve(): a build directory that is a link is refused, not followed.
    return Path(os.path.abspath(source / (settings.build_dir or _DEFAULT_BUILD_DIR)))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    source = Path.cwd()
    settings = _parse_settings(config_settings)
    build_dir = _build_dir(source, settings)
    dist = _build(source, settings, build_dir)
    return _deliver_wheel(dist, Path(wheel_directory))


def _build(source: Path, settings: _Settings, build_dir: Path) -> Path:
    """Configures and builds the local preset in build_dir; returns the directory of the
    engine's wheels and manifest."""
    _claim_build_dir(build_dir)
    defines = dict(settings.defines)
    if "FFPA_CUDA_ARCHS" not in defines and "FFPA_CUDA_ARCHS" not in os.environ:
        defines.update(_cuda_archs_define(source))
    defines.update(_tool_defines(source, defines))
    _configure(source, build_dir, settings, defines, fresh=True)
    entries = _cache_entries(build_dir)
    _unknown_defines(entries, settings.defines)
    from_env = _env_defines(entries, settings.defines)
    if from_env:
        _log("from the environment: " + ", ".join(f"{k}={v}" for k, v in from_env.items()))
        _configure(source, build_dir, settings, {**defines, **from_env}, fresh=False)
    _check_sdist_version(source, build_dir)
    _run(["cmake", "--build", build_dir, "--target", *_build_targets(source)],
         "building (the local build preset's targets)", source, _child_env(settings.defines))
    return build_dir / "dist"


def _check_sdist_version(source: Path, build_dir: Path) -> None:
    """An sdist declares the version of the wheel it builds (its source record's
    cuda_version); the configured build must make exactly that wheel (the release plan,
    written at configure, says what it will make), or installers refuse it after the build."""
    record_file = source / _SOURCE_RECORD
    if not record_file.is_file():
        return   # a checkout: the version is the one git gives
    record = json.loads(record_file.read_text(encoding="utf-8"))
    plan = json.loads((build_dir / "packaging" / "ffpa-release-plan.json").read_text(encoding="utf-8"))
    if plan.get("cuda_version") != record.get("cuda_version"):
        raise _fail(f"this sdist is ffpa-attn {record.get('cuda_version')}, for channel {record.get('channel')} "
                    f"(a CUDA {str(record.get('channel')).removeprefix('cu')} toolkit), but the build would make "
                    f"{plan.get('cuda_version')}; build with that toolkit (CMAKE_CUDA_COMPILER, CUDACXX) and "
                    "without -C cmake.define.FFPA_CHANNEL / FFPA_RELEASE_VERSION, or make an sdist on a "
                    "machine with your toolkit")


def _built_wheel(dist: Path) -> tuple[str, bytes]:
    """The CUDA wheel the engine's manifest names (file name, bytes), its recorded sha256 checked."""
    manifest = json.loads((dist / "ffpa-release-manifest.json").read_text(encoding="utf-8"))
    cuda = [w for w in manifest["wheels"] if w["kind"] == "cuda"]
    if len(cuda) != 1:
        raise _fail(f"{dist}/ffpa-release-manifest.json lists {len(cuda)} CUDA wheels, not one; "
                    "remove the build tree and build again")
    wheel = cuda[0]
    data = (dist / wheel["file"]).read_bytes()
    if hashlib.sha256(data).hexdigest() != wheel["sha256"]:
        raise _fail(f"{dist / wheel['file']} is not the wheel the manifest records; build again")
    return wheel["file"], data


def _deliver_wheel(dist: Path, wheel_directory: Path) -> str:
    """Copies the CUDA wheel the engine's manifest names into pip's wheel directory."""
    name, data = _built_wheel(dist)
    wheel = {"file": name}
    wheel_directory.mkdir(parents=True, exist_ok=True)
    _atomic_write(wheel_directory / wheel["file"], data)
    _log(f"built {wheel['file']}")
    return wheel["file"]


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    umask = os.umask(0)
    os.umask(umask)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp's 0600 is no mode for a wheel others install
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# --- the sdist ----------------------------------------------------------------------

def _git(source: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        return subprocess.run(["git", *args], cwd=source, input=stdin, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise _fail("an sdist is made from a git checkout (its committed files); this source tree is not one, "
                    f"or git failed (git {' '.join(args[:2])}). Build a wheel from it instead: pip wheel .") from None


# A name an sdist member may have: no control character (C0, DEL, C1: a newline would
# split a listing, an escape would reach a terminal), and what tar and every installer
# read alike.
_BAD_NAME_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")


def _committed_files(source: Path) -> list[tuple[str, int, str]]:
    """(path, git mode, blob id) of every file of HEAD's tree: the commit, not the worktree,
    so no link in the worktree is followed and no edit after the commit ships."""
    top = Path(_git(source, "rev-parse", "--show-toplevel").decode("utf-8", "surrogateescape").strip())
    if top.resolve() != source.resolve():
        raise _fail(f"{source} is not the top of a git checkout (it lies inside the repository at {top}); an sdist "
                    "is made from a checkout of ffpa-attn itself: git clone it, or build a wheel: pip wheel .")
    out = _git(source, "ls-tree", "-r", "-z", "--full-tree", "HEAD")
    files = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, raw = entry.split(b"\t", 1)
        mode, kind, blob = meta.decode("ascii").split(" ")
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _fail(f"the committed file {raw!r} has a name that is not UTF-8; an sdist's names are UTF-8 "
                        "(PEP 625): rename it (git mv) and commit") from None
        if _BAD_NAME_CHARS.search(name):
            raise _fail(f"the committed file {name!r} has a control character or backslash in its name; "
                        "rename it (git mv) and commit")
        if kind != "blob" or mode not in ("100644", "100755"):
            raise _fail(f"{name} is committed as git mode {mode} (a symlink or submodule); an sdist holds plain files: "
                        "commit the file itself")
        files.append((name, int(mode, 8), blob))
    names = {n for n, _, _ in files}
    for needed in ("pyproject.toml", "CMakeLists.txt", "tools/pep517/ffpa_build_backend.py"):
        if needed not in names:
            raise _fail(f"HEAD has no {needed}; an sdist without it cannot be built: commit it")
    return sorted(files)


def _blobs(source: Path, ids: list[str]) -> list[bytes]:
    """The contents of git blobs, in one git cat-file --batch."""
    out = _git(source, "cat-file", "--batch", stdin="".join(f"{i}\n" for i in ids).encode())
    blobs, pos = [], 0
    for i in ids:
        end = out.index(b"\n", pos)
        header = out[pos:end].decode("ascii").split(" ")
        if header[0] != i or header[1] != "blob":
            raise _fail(f"git cat-file answered {header} for blob {i}; repair the checkout (git fsck)")
        size = int(header[2])
        blobs.append(out[end + 1:end + 1 + size])
        pos = end + 1 + size + 1
    return blobs


def _uncommitted(source: Path, untracked: str) -> list[str]:
    """What makes the tree differ from HEAD: changed tracked files, and the untracked files
    among the shipped inputs (cmake/FfpaVersion.cmake's list, through the source record)."""
    out = _git(source, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    changed = [e[3:].decode("utf-8", "backslashreplace") for e in out.split(b"\0") if len(e) > 3 and e[2:3] == b" "]
    return changed + [f"{line} (untracked)" for line in untracked.splitlines() if line]


def _source_record(source: Path, settings: _Settings | None = None) -> tuple[bytes, str, str]:
    """The source record (cmake/FfpaSourceRecord.cmake) and the core metadata fields the
    wheel carries after Name and Version, from the wheels' one source of them, and the
    untracked files that make the tree dirty (one per line). A version
    setting counts as in a build (it wins over the environment)."""
    given = settings.defines if settings else {}
    version = [f"-DFFPA_RELEASE_VERSION={given['FFPA_RELEASE_VERSION']}"] if "FFPA_RELEASE_VERSION" in given else []
    with tempfile.TemporaryDirectory() as tmp:
        record_file, metadata_file, untracked = (Path(tmp) / n for n in (_SOURCE_RECORD, "metadata.txt", "untracked.txt"))
        _run(["cmake", *version, f"-DOUT={record_file}", f"-DMETADATA={metadata_file}", f"-DUNTRACKED={untracked}",
              "-P", source / "cmake" / "FfpaSourceRecord.cmake"],
             "the source record (cmake/FfpaSourceRecord.cmake)", source, _child_env(given))
        return (record_file.read_bytes(), metadata_file.read_text(encoding="utf-8"),
                untracked.read_text(encoding="utf-8", errors="backslashreplace"))


def core_metadata(name: str, version: str, fields: str, readme: str, metadata_version: str) -> str:
    """METADATA / PKG-INFO as the engine frames the fields of ffpa_core_metadata (index/:
    Metadata-Version, Name, Version, the fields, the README as the markdown description)."""
    return (f"Metadata-Version: {metadata_version}\nName: {name}\nVersion: {version}\n{fields}"
            f"Description-Content-Type: text/markdown\n\n{readme}")


def build_sdist(sdist_directory, config_settings=None):
    source = Path.cwd()
    _parse_settings(config_settings)
    files = _committed_files(source)
    record_bytes, fields, untracked = _source_record(source)
    record = json.loads(record_bytes)
    head = _git(source, "rev-parse", "HEAD").decode("ascii").strip()
    if record.get("source_dirty") or record.get("source_commit") != head:
        changed = _uncommitted(source, untracked)
        listing = "\n  ".join(changed[:20] + ([f"... and {len(changed) - 20} more"] if len(changed) > 20 else []))
        raise _fail("an sdist holds HEAD's committed files and names HEAD's version; this tree differs from HEAD "
                    f"(commit, stash or remove these first, or add untracked ones to .gitignore):\n  {listing}")
    contents = dict(zip((n for n, _, _ in files), _blobs(source, [b for _, _, b in files])))
    # The sdist's version is the version of the one wheel it builds (the local CUDA wheel):
    # pip and uv refuse a wheel whose version differs from its sdist's.
    name, version, epoch = record["name"], record["cuda_version"], int(record["source_date_epoch"])
    base = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}"
    # PKG-INFO (PEP 643): the wheel's fields, every one static (the sdist builds exactly the
    # wheel its version names, _check_sdist_version), the README committed at HEAD.
    readme = contents["README.md"].decode("utf-8") if "README.md" in contents else ""
    pkg_info = core_metadata(name, version, fields, readme, "2.2").encode()
    members = [(f"{base}/PKG-INFO", pkg_info, 0o644), (f"{base}/{_SOURCE_RECORD}", record_bytes, 0o644)]
    members += [(f"{base}/{n}", contents[n], 0o755 if m == 0o100755 else 0o644) for n, m, _ in files]
    members.sort(key=lambda m: m[0])
    # Same commit, same bytes: sorted members, the commit time, no owner names, gzip's
    # own time zeroed.
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for member_name, data, mode in members:
                info = tarfile.TarInfo(member_name)
                info.size, info.mode, info.mtime = len(data), mode, epoch
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
    out = Path(sdist_directory)
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(out / f"{base}.tar.gz", buf.getvalue())
    _log(f"built {base}.tar.gz ({len(files)} committed files of {head}, version {version})")
    return f"{base}.tar.gz"


# --- editable installs (PEP 660) ----------------------------------------------------

_EDITABLE_MODULE = "_ffpa_attn_editable"
_EDITABLE_FINDER = '''"""ffpa-attn installed in editable mode (pip install -e, PEP 660) from {checkout}.

Auto-generated by tools/pep517/ffpa_build_backend.py, do not edit. The package ffpa_attn is
the checkout's python/ffpa_attn, with the files the build made (the extension, the kernel
library, _build_info.py) found beside it in this installation's ffpa_attn/. Python edits
take effect at the next import; C++ or CMake edits need pip install -e . again.
"""
import importlib.util
import os
import sys

_SOURCE = {source!r}
_BUILT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ffpa_attn")


class FfpaEditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "ffpa_attn":
            return None
        init = os.path.join(_SOURCE, "__init__.py")
        if not os.path.isfile(init):
            return None   # the checkout moved or is gone: pip uninstall ffpa-attn, then install again
        return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[_SOURCE, _BUILT])


if not any(getattr(f, "__name__", "") == "FfpaEditableFinder" for f in sys.meta_path):
    sys.meta_path.insert(0, FfpaEditableFinder)
'''


def get_requires_for_build_editable(config_settings=None):
    return get_requires_for_build_wheel(config_settings)


def _metadata_fields(text: str) -> dict[str, str]:
    head = text.split("\n\n", 1)[0]
    return {k: v for k, _, v in (line.partition(": ") for line in head.splitlines()) if k in ("Name", "Version")}


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    """The METADATA the editable wheel will carry, without building: the version of the wheel
    this checkout builds (the source record's, cmake/FfpaSourceRecord.cmake), the fields
    the wheels carry. build_editable checks that the build made that version."""
    source = Path.cwd()
    settings = _parse_settings(config_settings)
    record_bytes, fields, _ = _source_record(source, settings)
    record = json.loads(record_bytes)
    readme = (source / "README.md").read_text(encoding="utf-8") if (source / "README.md").is_file() else ""
    name, version = record["name"], record["cuda_version"]
    dist_info = Path(metadata_directory) / f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    _atomic_write(dist_info / "METADATA", core_metadata(name, version, fields, readme, "2.1").encode())
    return dist_info.name


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"{path},sha256={digest},{len(data)}"


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """The local build, as build_wheel; then a wheel holding the built files of the CUDA
    wheel (what python/ffpa_attn does not hold: the extension, the kernel library,
    _build_info.py; not the first-use build's sources, _src, which a checkout has no use
    for) and a .pth importing a finder that makes ffpa_attn the checkout's package."""
    source = Path.cwd()
    settings = _parse_settings(config_settings)
    dist = _build(source, settings, _build_dir(source, settings))
    file_name, data = _built_wheel(dist)
    package_source = source / "python" / "ffpa_attn"
    with zipfile.ZipFile(io.BytesIO(data)) as built:
        names = built.namelist()
        dist_info = next(n.split("/", 1)[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = built.read(f"{dist_info}/METADATA")
        wheel_tags = [line for line in built.read(f"{dist_info}/WHEEL").decode("utf-8").splitlines()
                      if line.startswith("Tag: ")]
        overlay = [(n, built.read(n)) for n in names
                   if n.startswith("ffpa_attn/") and not n.endswith("/") and not n.startswith("ffpa_attn/_src/")
                   and not (package_source / n[len("ffpa_attn/"):]).exists()]
    if metadata_directory is not None:
        prepared = (Path(metadata_directory) / "METADATA").read_text(encoding="utf-8")
        made, said = _metadata_fields(metadata.decode("utf-8")), _metadata_fields(prepared)
        if made != said:
            raise _fail(f"the build made {made.get('Name')} {made.get('Version')}, but its metadata said "
                        f"{said.get('Name')} {said.get('Version')} (the channel of the nvcc in use decides the "
                        "version); point CMAKE_CUDA_COMPILER / CUDACXX at the toolkit of the newest channel, or "
                        "build a wheel: pip wheel .")
    finder = _EDITABLE_FINDER.format(checkout=source, source=str(package_source)).encode()
    members = [(f"{_EDITABLE_MODULE}.py", finder), (f"{_EDITABLE_MODULE}.pth", f"import {_EDITABLE_MODULE}\n".encode())]
    members += sorted(overlay)
    wheel_meta = ("Wheel-Version: 1.0\nGenerator: ffpa-attn PEP 517 backend (editable)\nRoot-Is-Purelib: false\n"
                  + "".join(f"{t}\n" for t in wheel_tags)).encode()
    members += [(f"{dist_info}/METADATA", metadata), (f"{dist_info}/WHEEL", wheel_meta)]
    record = "".join(_record_line(n, d) + "\n" for n, d in members) + f"{dist_info}/RECORD,,\n"
    members.append((f"{dist_info}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for n, d in members:
            info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if n.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    out = Path(wheel_directory)
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(out / file_name, buf.getvalue())
    _log(f"built {file_name} (editable: the package from {package_source}, {len(overlay)} built files)")
    return file_name
