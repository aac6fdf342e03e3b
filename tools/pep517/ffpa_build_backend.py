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
                               preset's binaryDir; a rebuild there is incremental)
  FFPA_<NAME>=VALUE            environment variables naming a cache variable of the
                               project count as -DFFPA_<NAME>=VALUE; a config setting wins
The arch: FFPA_CUDA_ARCHS when given, else every GPU the NVIDIA driver reports (asked
through libcuda, so neither nvidia-smi nor torch is needed), else the configure
preset's fallback (cmake/release-matrix.json "dev": 89).

The build requirements are read from the pins' one home (get_requires_for_build_wheel):
tools/requirements-build.txt (CMake, Ninja), tools/requirements.txt (pybind11),
tools/requirements-cutlass.txt (CUTLASS headers).

Only the standard library: a PEP 517 backend is imported before anything is installed.
"""

from __future__ import annotations

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
from pathlib import Path

_PRESET = "local"
_DEFAULT_BUILD_DIR = Path("build") / _PRESET   # the local preset's binaryDir
_SOURCE_RECORD = "ffpa-source.json"          # read by cmake/FfpaVersion.cmake in an sdist
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

def _run(cmd: list[str], what: str, cwd: Path) -> None:
    _log(" ".join(str(c) for c in cmd))
    try:
        rc = subprocess.call([str(c) for c in cmd], cwd=cwd, stdout=sys.stderr)
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


def _configure(source: Path, build_dir: Path, settings: _Settings, defines: dict[str, str], fresh: bool) -> None:
    _file_api_query(build_dir)
    cmd = ["cmake", "--preset", _PRESET, "-B", build_dir]
    if fresh:
        cmd.append("--fresh")   # no value from an earlier build with other settings survives
    cmd += [f"-DCMAKE_BUILD_TYPE={settings.build_type}",
            f"-DFFPA_PYTHON_INTERPRETERS={sys.executable}",
            f"-DFFPA_RELEASE_DIST={build_dir / 'dist'}"]
    cmd += [f"-D{k}={v}" for k, v in defines.items()]
    _run(cmd, "configuring (cmake --preset local)", source)


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


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    source = Path.cwd()
    settings = _parse_settings(config_settings)
    build_dir = (source / (settings.build_dir or _DEFAULT_BUILD_DIR)).resolve()
    defines = dict(settings.defines)
    if "FFPA_CUDA_ARCHS" not in defines and "FFPA_CUDA_ARCHS" not in os.environ:
        defines.update(_cuda_archs_define(source))
    defines.update(_tool_defines(source, defines))
    build_dir.mkdir(parents=True, exist_ok=True)
    _configure(source, build_dir, settings, defines, fresh=True)
    entries = _cache_entries(build_dir)
    _unknown_defines(entries, settings.defines)
    from_env = _env_defines(entries, settings.defines)
    if from_env:
        _log("from the environment: " + ", ".join(f"{k}={v}" for k, v in from_env.items()))
        _configure(source, build_dir, settings, {**defines, **from_env}, fresh=False)
    _check_sdist_version(source, build_dir)
    _run(["cmake", "--build", build_dir, "--target", *_build_targets(source)],
         "building (the local build preset's targets)", source)
    return _deliver_wheel(build_dir / "dist", Path(wheel_directory))


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


def _deliver_wheel(dist: Path, wheel_directory: Path) -> str:
    """Copies the CUDA wheel the engine's manifest names, checking its recorded sha256."""
    manifest = json.loads((dist / "ffpa-release-manifest.json").read_text(encoding="utf-8"))
    cuda = [w for w in manifest["wheels"] if w["kind"] == "cuda"]
    if len(cuda) != 1:
        raise _fail(f"{dist}/ffpa-release-manifest.json lists {len(cuda)} CUDA wheels, not one; "
                    "remove the build tree and build again")
    wheel = cuda[0]
    data = (dist / wheel["file"]).read_bytes()
    if hashlib.sha256(data).hexdigest() != wheel["sha256"]:
        raise _fail(f"{dist / wheel['file']} is not the wheel the manifest records; build again")
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

def _tracked_files(source: Path) -> list[tuple[str, int]]:
    """(path, git mode) of every tracked file present in the working tree."""
    try:
        out = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=source, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        raise _fail("an sdist is made from a git checkout (its tracked files); this source tree is not one. "
                    "Build a wheel from it instead: pip wheel .") from None
    files = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        mode = int(meta.split(b" ")[0], 8)
        name = path.decode("utf-8")
        if mode not in (0o100644, 0o100755):
            raise _fail(f"{name} is tracked as git mode {mode:o} (a symlink or submodule); an sdist holds plain files")
        if (source / name).is_file():
            files.append((name, mode))
    return sorted(files)


def build_sdist(sdist_directory, config_settings=None):
    source = Path.cwd()
    _parse_settings(config_settings)
    files = _tracked_files(source)
    with tempfile.TemporaryDirectory() as tmp:
        record_file = Path(tmp) / _SOURCE_RECORD
        _run(["cmake", f"-DOUT={record_file}", "-P", source / "cmake" / "FfpaSourceRecord.cmake"],
             "the source record (cmake/FfpaSourceRecord.cmake)", source)
        record_bytes = record_file.read_bytes()
    record = json.loads(record_bytes)
    # The sdist's version is the version of the one wheel it builds (the local CUDA wheel):
    # pip and uv refuse a wheel whose version differs from its sdist's.
    name, version, epoch = record["name"], record["cuda_version"], int(record["source_date_epoch"])
    base = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}"
    # PKG-INFO: core metadata of the sdist (PEP 643), the fields every frontend reads.
    pkg_info = f"Metadata-Version: 2.2\nName: {name}\nVersion: {version}\n".encode()
    members = [(f"{base}/PKG-INFO", pkg_info, 0o644), (f"{base}/{_SOURCE_RECORD}", record_bytes, 0o644)]
    members += [(f"{base}/{n}", (source / n).read_bytes(), 0o755 if m == 0o100755 else 0o644) for n, m in files]
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
    _log(f"built {base}.tar.gz ({len(files)} tracked files, version {version})")
    return f"{base}.tar.gz"
