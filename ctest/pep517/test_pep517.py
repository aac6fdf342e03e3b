"""The PEP 517 backend (tools/pep517/ffpa_build_backend.py): pip wheel . from a clean checkout,
the sdist (HEAD's committed files, the wheels' metadata) and the wheel it builds, editable
installs, the build directories it may write to, the pins it asks for, the GPU it asks the
driver about, and the errors that name the fix.

Inputs from CTest (ctest/pep517/CMakeLists.txt):
  FFPA_INDEX       the release engine, for verify-wheel
  FFPA_CUOBJDUMP   cuobjdump, for the arch check of the kernel library
  FFPA_SOURCE      the source tree under test
The builds use the tools venv's pip without build isolation (CI reaches no registry): the
backend then takes pybind11 and the CUTLASS headers from that venv, as it takes them from
the isolated build environment pip makes from get_requires_for_build_wheel.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
# pip's own PEP 517 caller and requirement parser: the frontend under test (the tools venv's pip).
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.pyproject_hooks import BuildBackendHookCaller

REPO = Path(__file__).resolve().parents[2]
# One head dim, one dtype, the plain kernel set (csrc/CMakeLists.txt: the dev profile's
# local builds may take it), an arch outside the release's 89;120f: a minute or two, not
# the full kernel build, and proof that a local build may target any GPU.
SMALL = {"cmake.define.FFPA_HEAD_DIMS": "64", "cmake.define.FFPA_DTYPES": "fp16",
         "cmake.define.FFPA_KERNEL_SET": "plain", "cmake.define.FFPA_CUDA_ARCHS": "90"}


def _run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def _snapshot(source: Path, dest: Path) -> Path:
    """A clean checkout of the working tree: ctest/release/snapshot_repo.cmake's snapshot
    (tracked and untracked-but-not-ignored files, committed once), so no build/, .venv or
    other ignored file of the developer's tree comes along."""
    script = dest.parent / "snapshot.cmake"
    script.write_text(f'include("{REPO}/ctest/release/snapshot_repo.cmake")\n'
                      f'ffpa_test_snapshot(SOURCE "{source}" DEST "{dest}")\n')
    r = _run(["cmake", "-P", script])
    assert r.returncode == 0, r.stdout + r.stderr
    return dest


def _hooks(tree: Path, pyproject: Path | None = None) -> BuildBackendHookCaller:
    """pip's own PEP 517 caller, reading the backend from the tree's pyproject.toml as pip does
    (or from another tree's, for a tree whose own was deleted)."""
    system = tomllib.loads((pyproject or tree / "pyproject.toml").read_text())["build-system"]
    return BuildBackendHookCaller(str(tree), system["build-backend"], backend_path=system["backend-path"],
                                  runner=_quiet_runner)


def _quiet_runner(cmd, cwd=None, extra_environ=None):
    env = dict(os.environ, **(extra_environ or {}))
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise subprocess.CalledProcessError(r.returncode, cmd, r.stdout, r.stderr)


def _pip_wheel(tree: Path, out: Path, settings: dict, env=None):
    cmd = [sys.executable, "-m", "pip", "wheel", tree, "--no-build-isolation", "--no-deps", "-w", out]
    cmd += [f"--config-settings={k}={v}" for k, v in settings.items()]
    return _run(cmd, env=dict(os.environ, **(env or {})))


def _one_wheel(out: Path) -> Path:
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def clone_wheel(tmp_path_factory):
    """pip wheel . from a clean checkout, for arch 90, head dim 64, fp16."""
    base = Path(os.environ.get("FFPA_TEST_WORK") or tmp_path_factory.getbasetemp())
    base.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(base / "clone-out", ignore_errors=True)
    src = _snapshot(Path(os.environ["FFPA_SOURCE"]), base / "clone")
    r = _pip_wheel(src, base / "clone-out", SMALL)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    return src, _one_wheel(base / "clone-out")


def test_clone_wheel_is_a_local_cuda_wheel_for_the_requested_arch(clone_wheel, tmp_path):
    src, wheel = clone_wheel
    # The engine's own check, the one a release runs on every wheel.
    r = _run([os.environ["FFPA_INDEX"], "verify-wheel", wheel])
    assert r.returncode == 0, r.stdout + r.stderr
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    name, version, pytag, abi, plat = wheel.name[:-len(".whl")].split("-")
    assert (name, pytag, abi) == ("ffpa_attn", py, py), wheel.name
    assert version.endswith(".cu13.local") and "+" in version, version
    assert plat.startswith("manylinux_"), plat
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(wheel.stat().st_mode) == 0o666 & ~umask   # not mkstemp's 0600
    with zipfile.ZipFile(wheel) as z:
        z.extract("ffpa_attn/libffpa_kernels.so", tmp_path)
        build_info = z.read("ffpa_attn/_build_info.py").decode()
    # The kernel library holds SASS for sm_90 and nothing else (csrc/tests/check_elf_archs.cmake).
    r = _run(["cmake", f"-DCUOBJDUMP={os.environ['FFPA_CUOBJDUMP']}",
              f"-DLIBRARY={tmp_path / 'ffpa_attn/libffpa_kernels.so'}", "-DARCHS=90",
              "-P", REPO / "csrc/tests/check_elf_archs.cmake"])
    assert r.returncode == 0, r.stdout + r.stderr
    info: dict = {}
    exec(build_info, info)
    assert info["CUDA_WHEEL_ARCHS"] == ["90"], info["CUDA_WHEEL_ARCHS"]
    # The binding loads from the installed wheel (no GPU needed to import it).
    target = tmp_path / "site"
    r = _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", target, wheel])
    assert r.returncode == 0, r.stdout + r.stderr
    r = _run([sys.executable, "-c", "import ffpa_attn._C, ffpa_attn._build_info as b; print(b.__file__)"],
             env=dict(os.environ, PYTHONPATH=str(target)), cwd=tmp_path)
    assert r.returncode == 0 and str(target) in r.stdout, r.stdout + r.stderr


def test_sdist_holds_the_tracked_files_and_builds_the_same_wheel(clone_wheel, tmp_path):
    src, wheel = clone_wheel
    hooks = _hooks(src)
    name = hooks.build_sdist(str(tmp_path / "sdist"))
    sdist = tmp_path / "sdist" / name
    # Same commit, same sdist bytes.
    again = hooks.build_sdist(str(tmp_path / "sdist-again"))
    assert (tmp_path / "sdist-again" / again).read_bytes() == sdist.read_bytes()

    tracked = set(_run(["git", "ls-files"], cwd=src).stdout.split())
    base = name[:-len(".tar.gz")]
    with tarfile.open(sdist) as t:
        members = {m.name: m for m in t.getmembers()}
        record = json.loads(t.extractfile(f"{base}/ffpa-source.json").read())
        pkg_info = t.extractfile(f"{base}/PKG-INFO").read().decode()
        t.extractall(tmp_path / "unpacked", filter="data")
    files = {n.split("/", 1)[1] for n in members}
    assert files == tracked | {"PKG-INFO", "ffpa-source.json"}, files ^ (tracked | {"PKG-INFO", "ffpa-source.json"})
    assert not any(f.startswith(("build/", ".venv", ".git/", "dist/")) for f in files)
    assert all(m.isfile() and m.uid == 0 and m.uname == "" for m in members.values())
    head = _run(["git", "rev-parse", "HEAD"], cwd=src).stdout.strip()
    assert record["source_commit"] == head and record["source_dirty"] is False
    # The sdist's version is the one wheel's it builds (uv refuses a wheel whose version
    # differs from its sdist's, pip one found on an index).
    assert record["cuda_version"] == f"{record['version']}.cu13.local" and record["channel"] == "cu13"
    assert f"Version: {record['cuda_version']}\n" in pkg_info and base == f"ffpa_attn-{record['cuda_version']}"
    assert wheel.name.startswith(f"{base}-")

    # pip unpacks the sdist (no git history there): its record gives the version, commit and
    # time, so the wheel is byte for byte the clone's (another build tree, same bytes).
    r = _pip_wheel(sdist, tmp_path / "out", SMALL)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    built = _one_wheel(tmp_path / "out")
    assert built.name == wheel.name
    assert hashlib.sha256(built.read_bytes()).hexdigest() == hashlib.sha256(wheel.read_bytes()).hexdigest()
    # PEP 643: the sdist's PKG-INFO (2.2, nothing Dynamic) states every field the wheel built
    # from it carries, byte for byte after the Metadata-Version line.
    with zipfile.ZipFile(built) as z:
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert pkg_info.startswith("Metadata-Version: 2.2\n") and "\nDynamic:" not in pkg_info
    assert pkg_info.split("\n", 1)[1] == metadata.split("\n", 1)[1]


def test_sdist_for_another_channel_is_refused_before_the_build(clone_wheel, tmp_path):
    """An sdist whose declared wheel version this toolkit cannot make (a cu14 record under a
    CUDA 13 nvcc) stops after configure, naming the toolkit it needs."""
    src, _ = clone_wheel
    name = _hooks(src).build_sdist(str(tmp_path / "sdist"))
    with tarfile.open(tmp_path / "sdist" / name) as t:
        t.extractall(tmp_path / "unpacked", filter="data")
    tree = tmp_path / "unpacked" / name[:-len(".tar.gz")]
    record = json.loads((tree / "ffpa-source.json").read_text())
    record["channel"], record["cuda_version"] = "cu14", record["cuda_version"].replace(".cu13.", ".cu14.")
    (tree / "ffpa-source.json").write_text(json.dumps(record))
    r = _pip_wheel(tree, tmp_path / "out", SMALL)
    assert r.returncode != 0
    err = r.stdout + r.stderr
    assert f"this sdist is ffpa-attn {record['cuda_version']}, for channel cu14 (a CUDA 14 toolkit)" in err, err[-4000:]
    assert (tree / "build/local/packaging/ffpa-release-plan.json").is_file()   # configured,
    assert not (tree / "build/local/bin/ffpa-index").exists()                   # nothing built
    assert not list((tmp_path / "out").glob("*.whl"))


def test_git_url_builds_the_same_wheel(clone_wheel, tmp_path):
    """pip install git+URL: pip clones the repository itself and builds in its own temporary
    tree; the wheel is the checkout's, byte for byte."""
    src, wheel = clone_wheel
    r = _pip_wheel(f"git+file://{src}", tmp_path / "out", SMALL)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    built = _one_wheel(tmp_path / "out")
    assert built.name == wheel.name and built.read_bytes() == wheel.read_bytes()


def test_uv_reads_the_backend_as_pip_does(clone_wheel, tmp_path):
    """uv (the tools venv's, tools/requirements.txt) as the frontend: its sdist of the checkout
    is the bytes pip's hook caller gets, and its wheel from that sdist is the checkout's wheel."""
    src, wheel = clone_wheel
    uv = Path(sys.executable).with_name("uv")
    env = dict(os.environ, UV_OFFLINE="1", UV_NO_CONFIG="1")
    common = ["--no-build-isolation", "--python", sys.executable]
    r = _run([uv, "build", "--sdist", *common, "-o", tmp_path / "uv-sdist", src], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    (sdist,) = (tmp_path / "uv-sdist").glob("*.tar.gz")
    name = _hooks(src).build_sdist(str(tmp_path / "pip-sdist"))
    assert sdist.name == name and sdist.read_bytes() == (tmp_path / "pip-sdist" / name).read_bytes()
    r = _run([uv, "build", "--wheel", *common, "-o", tmp_path / "uv-wheel",
              *[f"--config-setting={k}={v}" for k, v in SMALL.items()], sdist], env=env)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    built = _one_wheel(tmp_path / "uv-wheel")
    assert built.name == wheel.name and built.read_bytes() == wheel.read_bytes()


def test_unknown_define_names_the_settings(clone_wheel, tmp_path):
    """A misspelt FFPA setting is refused after configure (the project defines no such cache
    variable), with the project's FFPA settings listed; the clone's build tree is reused, so
    this is cheap."""
    src, _ = clone_wheel
    # CUDAToolkit_ROOT (a find module's, never typed in the cache) goes through: listed first,
    # it would be the one the error names if it were refused.
    r = _pip_wheel(src, tmp_path / "out", {"cmake.define.CUDAToolkit_ROOT": "/usr/local/cuda", **SMALL,
                                           "cmake.define.FFPA_CUDA_ARCH": "90"})
    assert r.returncode != 0
    err = r.stdout + r.stderr
    assert "-C cmake.define.FFPA_CUDA_ARCH is not a setting of this project" in err, err[-4000:]
    assert "FFPA_CUDA_ARCHS" in err and "FFPA_HEAD_DIMS" in err
    assert not list((tmp_path / "out").glob("*.whl"))


def test_environment_settings_and_bad_values(clone_wheel, tmp_path):
    """FFPA_* environment variables count as settings (a config setting wins); a bad value
    stops at configure with CMake's message naming the valid archs."""
    src, _ = clone_wheel
    settings = {k: v for k, v in SMALL.items() if k != "cmake.define.FFPA_CUDA_ARCHS"}
    r = _pip_wheel(src, tmp_path / "out", settings,
                   env={"FFPA_CUDA_ARCHS": "75", "FFPA_JIT": "0", "FFPA_PROFILE": "full"})
    assert r.returncode != 0
    err = r.stdout + r.stderr
    assert "from the environment: FFPA_CUDA_ARCHS=75" in err
    ignored = [line for line in err.splitlines() if "not build settings, left to the package at run time:" in line]
    assert ignored and "FFPA_JIT" in ignored[0].split(":", 1)[1].replace(",", " ").split(), ignored
    assert "ignored from the environment, a build from source decides them: FFPA_PROFILE" in err
    assert "CUDA arch '75' in FFPA_CUDA_ARCHS is not compiled by" in err, err[-4000:]
    assert "configuring (cmake --preset local) failed" in err


@pytest.mark.parametrize("settings, message", [
    ({"cmake.define.FFPA_PROFILE": "full"}, "release wheels come from cmake --preset release-full"),
    ({"cmake.define.FFPA_PYTHON_INTERPRETERS": "/usr/bin/python3"}, "run pip with the interpreter you want"),
    ({"cmake.define.CMAKE_BUILD_TYPE": "Debug"}, "use -C cmake.build-type=TYPE"),
    ({"cmake.define.FFPA_RELEASE_DIST": "/tmp"}, "-C build-dir=DIR says where the build tree lives"),
    ({"cmake.build-type": "Fast"}, "use one of Release, RelWithDebInfo, MinSizeRel, Debug"),
    ({"cmake.defines.FFPA_CUDA_ARCHS": "90"}, "unknown config setting 'cmake.defines.FFPA_CUDA_ARCHS'"),
    ({"cmake.define.FFPA-ARCHS": "90"}, "is not a CMake variable name"),
    ({"cmake.define.FFPA_CUDA_ARCHS": ["89", "90"]}, "is given 2 times"),
    ({"build-dir": ""}, "-C build-dir= is empty"),
])
def test_bad_config_settings_fail_before_anything_is_installed(settings, message):
    hooks = _hooks(REPO)
    with pytest.raises(Exception) as e:
        hooks.get_requires_for_build_wheel(settings)
    assert message in str(e.value.stderr if hasattr(e.value, "stderr") else e.value)


def test_build_requirements_are_the_pins_of_tools():
    """get_requires_for_build_wheel asks for exactly the pins of their one home."""
    reqs = [Requirement(r) for r in _hooks(REPO).get_requires_for_build_wheel({})]
    homes = {"cmake": "requirements-build.txt", "ninja": "requirements-build.txt",
             "pybind11": "requirements.txt", "nvidia-cutlass": "requirements-cutlass.txt"}
    assert sorted(r.name for r in reqs) == sorted(homes)
    assert _hooks(REPO).get_requires_for_build_sdist({}) == [str(r) for r in reqs if r.name == "cmake"]
    for r in reqs:
        (spec,) = r.specifier
        assert spec.operator == "==", r
        lines = (REPO / "tools" / homes[r.name]).read_text().splitlines()
        assert any(line.split()[0] == f"{r.name}=={spec.version}" for line in lines if line.strip()), r


FAKE_DRIVER = r"""
/* A stand-in for libcuda.so.1: the four entry points the backend calls. */
static const int caps[][2] = {%s};
int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDeviceGetCount(int *n) { *n = (int)(sizeof caps / sizeof caps[0]); return 0; }
int cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return 0; }
int cuDeviceGetAttribute(int *v, int attr, int dev) {
  if (attr == 75) { *v = caps[dev][0]; return 0; }
  if (attr == 76) { *v = caps[dev][1]; return 0; }
  return 1;
}
"""


@pytest.mark.parametrize("caps, archs, outcome", [
    ("{9, 0}, {7, 5}, {9, 0}", ["75", "90"], "FFPA_CUDA_ARCHS=90"),
    ("{12, 0}", ["120"], "FFPA_CUDA_ARCHS=120"),
    ("{7, 5}", ["75"], "error: this machine's GPUs are sm_75; the kernels need sm_{min_sm} or newer"),
])
def test_the_gpu_present_comes_from_the_driver(tmp_path, caps, archs, outcome):
    lib = tmp_path / "libcuda.so.1"
    (tmp_path / "fake.c").write_text(FAKE_DRIVER % caps)
    r = _run(["cc", "-shared", "-fPIC", "-o", lib, tmp_path / "fake.c"])
    assert r.returncode == 0, r.stderr
    r = _run([sys.executable, "-c", _ARCHS_PROBE, REPO / "tools/pep517", REPO],
             env=dict(os.environ, LD_LIBRARY_PATH=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(archs)
    # The floor is the source tree's (cmake/kernel-facts.json's arch_rules.min_sm).
    facts = json.loads((REPO / "cmake" / "kernel-facts.json").read_text(encoding="utf-8"))
    assert outcome.format(min_sm=facts["arch_rules"]["min_sm"]) in r.stdout + r.stderr


# The driver query and the arch choice of the backend, for the source tree in argv[2].
_ARCHS_PROBE = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import ffpa_build_backend as b\n"
                "print(b.driver_archs()[0])\n"
                "try:\n    print('FFPA_CUDA_ARCHS=' + b._cuda_archs_define(Path(sys.argv[2]))['FFPA_CUDA_ARCHS'])\n"
                "except b.FfpaBuildError:\n    pass\n")


@pytest.mark.parametrize("rules, outcome", [
    # A source tree whose floor is 86 leaves an sm_80 GPU out: the number is read, not assumed.
    ({"min_sm": 86}, "leaving out sm_80 (the kernels need sm_86+)"),
    ({"min_sm": 91}, "error: this machine's GPUs are sm_80, sm_90; the kernels need sm_91 or newer"),
    ({"min_sm": "86"}, "arch_rules.min_sm must be an sm number such as 90, got '86'"),
    ({"tma_min_sm": 90}, "no arch_rules.min_sm ("),
])
def test_the_gpu_present_is_judged_by_the_sources_min_sm(tmp_path, rules, outcome):
    lib = tmp_path / "libcuda.so.1"
    (tmp_path / "fake.c").write_text(FAKE_DRIVER % "{8, 0}, {9, 0}")
    r = _run(["cc", "-shared", "-fPIC", "-o", lib, tmp_path / "fake.c"])
    assert r.returncode == 0, r.stderr
    source = tmp_path / "src"
    (source / "cmake").mkdir(parents=True)
    (source / "cmake" / "kernel-facts.json").write_text(json.dumps({"arch_rules": rules}))
    r = _run([sys.executable, "-c", _ARCHS_PROBE, REPO / "tools/pep517", source],
             env=dict(os.environ, LD_LIBRARY_PATH=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert outcome in r.stdout + r.stderr
    if rules.get("min_sm") == 86:
        assert "FFPA_CUDA_ARCHS=90" in r.stdout


def test_no_driver_leaves_the_preset_fallback(tmp_path):
    """Without libcuda (this machine) the backend passes no arch: the local preset's fallback."""
    probe = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); import ffpa_build_backend as b\n"
             "print(b.driver_archs()[0], b._cuda_archs_define(Path(sys.argv[2])))\n")
    r = _run([sys.executable, "-c", probe, REPO / "tools/pep517", REPO], env=dict(os.environ, LD_LIBRARY_PATH=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    if "no NVIDIA driver" not in r.stderr:
        pytest.skip("this machine has an NVIDIA driver")
    assert r.stdout.strip() == "[] {}"


# --- the build directory, the environment, the sdist's sources and metadata (no compiler) ---

FAKE_CMAKE = """#!/bin/sh
# A stand-in for cmake: records its arguments and FFPA_RELEASE_VERSION's presence, then fails.
{{ printf '%s\\n' "$@"; if [ "${{FFPA_RELEASE_VERSION+set}}" = set ]; then echo "ENV=$FFPA_RELEASE_VERSION"; else echo "ENV unset"; fi; }} > "{log}"
exit 3
"""


@pytest.fixture
def fake_cmake(tmp_path, monkeypatch):
    """A `cmake` on PATH that records how the backend called it and fails: the hooks run up
    to their first CMake call and no further."""
    bin_dir, log = tmp_path / "fake-bin", tmp_path / "cmake-call.txt"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text(FAKE_CMAKE.format(log=log))
    (bin_dir / "cmake").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


def _tree_state(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.is_symlink(), p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def _backend_error(e: BaseException) -> str:
    return str(getattr(e, "stderr", "") or e)


def test_a_foreign_build_dir_is_refused_untouched(tmp_path, fake_cmake):
    """-C build-dir=DIR on a folder this backend did not make: refused before CMake runs, and
    nothing in it changes (issue 42: its site/, CMakeFiles/ and CMakeCache.txt were wiped)."""
    foreign = tmp_path / "mine"
    (foreign / "site" / "blog").mkdir(parents=True)
    (foreign / "site" / "blog" / "post1.md").write_text("a post\n")
    (foreign / "CMakeFiles" / "other").mkdir(parents=True)
    (foreign / "CMakeCache.txt").write_text("CMAKE_HOME_DIRECTORY:INTERNAL=/elsewhere\n")
    (foreign / "ffpa-pep517-build-dir.json").write_text('{"made_by": "someone else"}\n')   # not our claim
    before = _tree_state(foreign)
    hooks = _hooks(REPO)
    with pytest.raises(Exception) as e:
        hooks.build_wheel(str(tmp_path / "out"), {"build-dir": str(foreign)})
    err = _backend_error(e.value)
    assert f"the build directory {foreign} is not empty and was not made by this backend" in err, err[-3000:]
    assert "-C build-dir=DIR" in err
    assert _tree_state(foreign) == before
    assert not fake_cmake.exists()   # CMake never ran
    # A link or a file where the directory should be: refused likewise.
    (tmp_path / "link").symlink_to(foreign)
    (tmp_path / "file").write_text("x")
    for bad in ("link", "file"):
        with pytest.raises(Exception) as e:
            hooks.build_wheel(str(tmp_path / "out"), {"build-dir": str(tmp_path / bad)})
        assert "is not a directory" in _backend_error(e.value)
    assert _tree_state(foreign) == before and not fake_cmake.exists()


def test_a_new_or_empty_build_dir_is_claimed_and_reused(tmp_path, fake_cmake):
    """An empty directory (and a new one) is marked as the backend's before CMake runs; a
    marked one is the backend's own on the next build."""
    hooks = _hooks(REPO)
    for d in (tmp_path / "empty", tmp_path / "new" / "deep"):
        if d.name == "empty":
            d.mkdir()
        for _ in range(2):   # the second time the directory is non-empty but marked
            with pytest.raises(Exception) as e:
                hooks.build_wheel(str(tmp_path / "out"), {"build-dir": str(d)})
            assert "configuring (cmake --preset local) failed (exit 3)" in _backend_error(e.value)
            assert json.loads((d / "ffpa-pep517-build-dir.json").read_text())["made_by"].startswith("ffpa-attn PEP 517")
            assert fake_cmake.read_text().splitlines()[:4] == ["--preset", "local", "-B", str(d)]
            fake_cmake.unlink()


@pytest.mark.parametrize("settings, seen", [
    ({"cmake.define.FFPA_RELEASE_VERSION": ""}, ["-DFFPA_RELEASE_VERSION=", "ENV unset"]),
    ({"cmake.define.FFPA_RELEASE_VERSION": "3.0.0"}, ["-DFFPA_RELEASE_VERSION=3.0.0", "ENV unset"]),
    ({}, ["ENV=7.7.7"]),   # no setting: the environment's value reaches CMake (FfpaVersion.cmake reads it)
])
def test_a_setting_beats_the_environment_also_when_empty(tmp_path, fake_cmake, monkeypatch, settings, seen):
    """An explicitly empty -C cmake.define.FFPA_RELEASE_VERSION= wins over FFPA_RELEASE_VERSION in
    the environment: CMake runs without it (cmake/FfpaVersion.cmake falls back to the
    environment only when the cache value is empty; ctest/release/check_version.cmake)."""
    monkeypatch.setenv("FFPA_RELEASE_VERSION", "7.7.7")
    with pytest.raises(Exception):
        _hooks(REPO).build_wheel(str(tmp_path / "out"), {"build-dir": str(tmp_path / "b"), **settings})
    lines = fake_cmake.read_text().splitlines()
    for s in seen:
        assert s in lines, lines


@pytest.fixture(scope="module")
def committed_tree(tmp_path_factory):
    """A clean checkout of the working tree, committed (no compiler involved)."""
    base = tmp_path_factory.mktemp("sdist-src")
    return _snapshot(Path(os.environ.get("FFPA_SOURCE") or REPO), base / "src")


def _clone(src: Path, dest: Path) -> Path:
    r = _run(["git", "clone", "-q", "--no-hardlinks", src, dest])
    assert r.returncode == 0, r.stderr
    return dest


def _commit(tree: Path, message: str) -> None:
    for cmd in (["git", "add", "-A"], ["git", "-c", "user.name=t", "-c", "user.email=t@l", "commit", "-qm", message]):
        r = _run(cmd, cwd=tree)
        assert r.returncode == 0, r.stdout + r.stderr


def test_sdist_is_heads_blobs_with_the_wheels_metadata(committed_tree, tmp_path):
    """The sdist holds HEAD's committed files (untracked ones elsewhere stay out), and its
    PKG-INFO states the wheels' fields (PEP 643: Metadata-Version 2.2, nothing dynamic),
    as pip's own metadata parser reads them."""
    from pip._vendor.packaging.metadata import Metadata
    tree = _clone(committed_tree, tmp_path / "tree")
    (tmp_path / "tree" / "notes.txt").write_text("an untracked note at the root\n")   # not a shipped input
    name = _hooks(tree).build_sdist(str(tmp_path / "sdist"))
    base = name[:-len(".tar.gz")]
    with tarfile.open(tmp_path / "sdist" / name) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers()}
        pkg_info = t.extractfile(f"{base}/PKG-INFO").read().decode()
        record = json.loads(t.extractfile(f"{base}/ffpa-source.json").read())
    committed = set(_run(["git", "ls-tree", "-r", "--name-only", "HEAD"], cwd=tree).stdout.split("\n")) - {""}
    assert members == committed | {"PKG-INFO", "ffpa-source.json"}
    meta = Metadata.from_email(pkg_info, validate=True)
    assert meta.metadata_version == "2.2" and not meta.dynamic
    assert str(meta.version) == record["cuda_version"] and meta.name == "ffpa-attn"
    assert str(meta.requires_python) == f">={json.loads((REPO / 'cmake/release-matrix.json').read_text())['pythons'][0]}"
    assert [str(r) for r in meta.requires_dist][0] == "numpy"
    assert "jit" in meta.provides_extra and meta.description_content_type == "text/markdown"
    assert meta.description == (tree / "README.md").read_text()
    # The fields are the wheels' (one source, cmake/templates/wheel-metadata.txt.in): the
    # committed listing of the release's wheels holds the same lines.
    listing = (REPO / "ctest/data/wheel-contents.txt").read_text()
    wheel_meta = listing.split("-- ffpa_attn-{V}.dist-info/METADATA\n", 1)[1].split("\n\n", 1)[0]
    assert pkg_info.split("\n\n", 1)[0].split("\n", 3)[3] == wheel_meta.split("\n", 3)[3]


@pytest.mark.parametrize("case", ["license-link", "deleted-pyproject", "untracked-source",
                                  "committed-link", "non-utf8-name", "newline-name", "c1-name"])
def test_sdist_refuses_trees_that_are_not_their_commit(committed_tree, tmp_path, case):
    """issue 42 item 4: a worktree link out of the tree, a deleted pyproject.toml, an untracked
    source, a committed link, and names an installer would read otherwise: each refused with
    the fix, no traceback, no sdist written."""
    tree = _clone(committed_tree, tmp_path / "tree")
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("SECRET outside the tree\n")
    (tree / "notes.txt").write_text("an untracked note at the root\n")
    expect = {
        "license-link": "this tree differs from HEAD",
        "deleted-pyproject": "this tree differs from HEAD",
        "untracked-source": "this tree differs from HEAD",
        "committed-link": "is committed as git mode 120000 (a symlink or submodule)",
        "non-utf8-name": "has a name that is not UTF-8",
        "newline-name": "has a control character or backslash in its name",
        "c1-name": "has a control character or backslash in its name",
    }[case]
    if case == "license-link":
        (tree / "LICENSE").unlink()
        (tree / "LICENSE").symlink_to(secret)
    elif case == "deleted-pyproject":
        (tree / "pyproject.toml").unlink()
    elif case == "untracked-source":
        (tree / "csrc" / "zz_notes.h").write_text("// untracked\n")
    elif case == "committed-link":
        (tree / "docs" / "secret.md").symlink_to(secret)
        _commit(tree, "a link")
    elif case == "non-utf8-name":
        (tree / os.fsdecode(b"docs/caf\xe9.md")).write_text("latin-1 name\n")
        _commit(tree, "a latin-1 name")
    elif case == "newline-name":
        (tree / "docs" / "evil\nname.md").write_text("x\n")
        _commit(tree, "a newline")
    elif case == "c1-name":
        (tree / "docs" / "evil\x9bname.md").write_text("x\n")
        _commit(tree, "a C1 character")
    with pytest.raises(Exception) as e:
        _hooks(tree, committed_tree / "pyproject.toml").build_sdist(str(tmp_path / "sdist"))
    err = _backend_error(e.value)
    assert "ffpa build backend: error: " in err and expect in err, err[-3000:]
    assert "UnicodeDecodeError" not in err and "FfpaBuildError" in err
    if expect == "this tree differs from HEAD":
        assert {"license-link": "LICENSE", "deleted-pyproject": "pyproject.toml",
                "untracked-source": "csrc/zz_notes.h (untracked)"}[case] in err
        assert "notes.txt" not in err   # an untracked file outside the shipped inputs is not the tree's problem
    assert not (tmp_path / "sdist").exists() or not list((tmp_path / "sdist").iterdir())


def test_editable_metadata_is_the_wheels_before_the_build(committed_tree, tmp_path, monkeypatch):
    """PEP 660's hooks: the requirements are the wheel build's, and the prepared METADATA names
    the version of the wheel the checkout builds with the wheels' fields (no compiler yet); a
    version setting wins over the environment there too."""
    hooks = _hooks(committed_tree)
    assert hooks.get_requires_for_build_editable({}) == hooks.get_requires_for_build_wheel({})
    from pip._vendor.packaging.metadata import Metadata
    monkeypatch.setenv("FFPA_RELEASE_VERSION", "7.7.7")
    for settings, version in (({}, "7.7.7+cu13.local"),
                              ({"cmake.define.FFPA_RELEASE_VERSION": "2.0.0"}, "2.0.0+cu13.local")):
        out = tmp_path / version
        name = hooks.prepare_metadata_for_build_editable(str(out), settings)
        assert name == f"ffpa_attn-{version}.dist-info"
        meta = Metadata.from_email((out / name / "METADATA").read_text(), validate=True)
        assert str(meta.version) == version and meta.name == "ffpa-attn"
        assert str(meta.requires_python).startswith(">=3.") and "jit" in meta.provides_extra
    # An empty setting: the version from git, whatever the environment says.
    name = hooks.prepare_metadata_for_build_editable(str(tmp_path / "git"), {"cmake.define.FFPA_RELEASE_VERSION": ""})
    assert "7.7.7" not in name and name.endswith(".cu13.local.dist-info") and ".dev" in name, name


def test_editable_install_runs_the_checkouts_python_with_the_built_extension(clone_wheel, tmp_path):
    """pip install -e . (PEP 660, real pip): the package is the checkout's python/ffpa_attn (an
    edit shows at the next import, no reinstall), the extension and the kernel library come
    from the build (the clone's build tree again: no recompile), and uninstall removes it."""
    src, wheel = clone_wheel
    prefix = tmp_path / "prefix"
    cmd = [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--prefix", prefix,
           *[f"--config-settings={k}={v}" for k, v in SMALL.items()], "-e", src]
    r = _run(cmd)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    (site_dir,) = prefix.glob("lib/python3*/site-packages")
    assert (site_dir / "_ffpa_attn_editable.pth").is_file()
    (src / "python" / "ffpa_attn" / "zz_edit.py").write_text("EDITED = 42\n")
    probe = ("import site, sys; site.addsitedir(sys.argv[1]); import ffpa_attn, ffpa_attn._C, ffpa_attn.zz_edit, "
             "ffpa_attn._build_info as b; print(ffpa_attn.__file__); print(ffpa_attn._C.__file__); "
             "print(ffpa_attn.zz_edit.EDITED); print(b.VERSION)")
    r = _run([sys.executable, "-c", probe, site_dir], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    init, ext, edited, version = r.stdout.splitlines()[-4:]
    assert Path(init) == src / "python" / "ffpa_attn" / "__init__.py"
    assert Path(ext).parent == site_dir / "ffpa_attn" and (site_dir / "ffpa_attn" / "libffpa_kernels.so").is_file()
    assert edited == "42" and wheel.name.startswith(f"ffpa_attn-{version}-")
    assert not (site_dir / "ffpa_attn" / "_src").exists() and not (site_dir / "ffpa_attn" / "__init__.py").exists()


def test_editable_wheel_layout_installs_with_pip(committed_tree, tmp_path, monkeypatch):
    """build_editable's wheel from a stand-in build (no compiler: the backend's _build returns a
    dist holding a made-up CUDA wheel), installed by real pip: the .pth's finder makes
    ffpa_attn the checkout's package with the built files (and only those) beside it."""
    import importlib
    import sysconfig
    monkeypatch.syspath_prepend(str(committed_tree / "tools" / "pep517"))
    backend = importlib.import_module("ffpa_build_backend")
    monkeypatch.chdir(committed_tree)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    version = "1.0+cu13.local"
    dist = tmp_path / "dist"
    dist.mkdir()
    wheel_name = f"ffpa_attn-{version}-{tag}-{tag}-{plat}.whl"
    with zipfile.ZipFile(dist / wheel_name, "w") as z:
        z.writestr("ffpa_attn/__init__.py", "raise RuntimeError('the wheel copy, not the checkout')\n")
        z.writestr("ffpa_attn/_C.py", "BUILT = 'extension'\n")
        z.writestr("ffpa_attn/libffpa_kernels.so", b"\x7fELF stand-in")
        z.writestr("ffpa_attn/_build_info.py", f"VERSION = {version!r}\n")
        z.writestr("ffpa_attn/_src/CMakeLists.txt", "project(x)\n")
        z.writestr(f"ffpa_attn-{version}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: ffpa-attn\nVersion: {version}\n\n")
        z.writestr(f"ffpa_attn-{version}.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}-{tag}-{plat}\n")
        z.writestr(f"ffpa_attn-{version}.dist-info/RECORD", "")
    data = (dist / wheel_name).read_bytes()
    (dist / "ffpa-release-manifest.json").write_text(json.dumps(
        {"wheels": [{"kind": "cuda", "file": wheel_name, "sha256": hashlib.sha256(data).hexdigest()}]}))
    monkeypatch.setattr(backend, "_build", lambda source, settings, build_dir: dist)
    meta = tmp_path / "meta"
    (meta).mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ffpa-attn\nVersion: 9.9.9\n\n")
    with pytest.raises(backend.FfpaBuildError, match="the build made ffpa-attn 1.0\\+cu13.local, but its metadata said"):
        backend.build_editable(str(tmp_path / "out"), {}, str(meta))
    name = backend.build_editable(str(tmp_path / "out"), {}, None)
    assert name == wheel_name
    with zipfile.ZipFile(tmp_path / "out" / name) as z:
        members = set(z.namelist())
    assert {"ffpa_attn/_C.py", "ffpa_attn/libffpa_kernels.so", "ffpa_attn/_build_info.py",
            "_ffpa_attn_editable.py", "_ffpa_attn_editable.pth"} <= members
    assert not any(m.startswith("ffpa_attn/_src/") or m == "ffpa_attn/__init__.py" for m in members)
    prefix = tmp_path / "prefix"
    r = _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--prefix", prefix, tmp_path / "out" / name])
    assert r.returncode == 0, r.stdout + r.stderr
    (site_dir,) = prefix.glob("lib/python3*/site-packages")
    probe = ("import importlib.machinery, site, sys; site.addsitedir(sys.argv[1]); "
             "spec = sys.meta_path[0].find_spec('ffpa_attn'); print(spec.origin); "
             "print(importlib.machinery.PathFinder.find_spec('ffpa_attn._C', spec.submodule_search_locations).origin); "
             "print(importlib.machinery.PathFinder.find_spec('ffpa_attn.errors', spec.submodule_search_locations).origin)")
    r = _run([sys.executable, "-c", probe, site_dir], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    init, ext, errors = map(Path, r.stdout.splitlines()[-3:])
    package = committed_tree / "python" / "ffpa_attn"
    assert init == package / "__init__.py" and errors == package / "errors.py"
    assert ext == site_dir / "ffpa_attn" / "_C.py"
