"""The environment the notebook smoke's kernels run in: the interpreter, the wheel and
what each notebook's kernel gets in its environment (docs/colab.md section 1).

notebook_smoke.py runs and checks the notebooks; this module decides what they run
against, which is what the notebooks no longer decide themselves:

  wheel profile       a clean venv with the pins of tools/notebook-versions.txt and no
                      PYTHONPATH; colab_quickstart.ipynb gets FFPA_WHEEL and
                      FFPA_SOURCE_COMMIT and installs the wheel, the other two import it
  module-dir profile  an existing interpreter; every kernel gets PYTHONPATH=<module dir>

Both profiles start from clean_env(), which drops whatever in the caller's environment
could change what a kernel imports, and write_kernelspec() registers the interpreter
under a name unique to the run in a private Jupyter home.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import ffpa_manifest  # noqa: E402  (the shared manifest reader)

# Execution order matters for the wheel profile: colab_quickstart installs the wheel
# that the other two then import.
NOTEBOOKS = ("colab_quickstart.ipynb", "quickstart.ipynb", "head_dim_sweep.ipynb")
ACCEPTANCE_NOTEBOOK = "colab_quickstart.ipynb"


class SmokeError(Exception):
    """A setup problem that stops the run; the message names the fix."""


def normalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_versions_file(path: Path) -> tuple[list[str], str | None]:
    """(requirements, default torch index) from tools/notebook-versions.txt."""
    requirements: list[str] = []
    default_index = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        match = re.match(r"#\s*default-torch-index:\s*(\S+)", line)
        if match:
            default_index = match.group(1)
            continue
        if line and not line.startswith("#"):
            if not re.match(r"^[A-Za-z0-9_.-]+==\S+$", line):
                raise SmokeError(f"{path}: {line!r} is not pinned as name==version; pin it")
            requirements.append(line)
    return requirements, default_index


def torch_index(default: str | None, environ: dict[str, str]) -> str | None:
    """FFPA_TORCH_INDEX unset: the default; set but empty: None, meaning PyPI."""
    if "FFPA_TORCH_INDEX" not in environ:
        return default
    return environ["FFPA_TORCH_INDEX"].strip() or None


def wheel_file_name(spec: str) -> str:
    """The wheel's file name from a path or an https URL (a query string is allowed)."""
    parsed = urllib.parse.urlparse(spec)
    if parsed.scheme in ("http", "https"):
        name = PurePosixPath(urllib.parse.unquote(parsed.path)).name
    else:
        name = Path(spec).name
    if not name.endswith(".whl"):
        raise SmokeError(f"{spec!r} does not end in a wheel file name (...whl); give the wheel file or its direct URL")
    return name


def wheel_tags(file_name: str) -> set[str]:
    """Expanded py-abi-platform tags of a wheel file name (PEP 427, compressed tag sets)."""
    parts = file_name[: -len(".whl")].split("-")
    if len(parts) not in (5, 6):
        raise SmokeError(f"{file_name} is not a wheel file name (name-version[-build]-py-abi-platform.whl)")
    py, abi, plat = parts[-3:]
    return {f"{p}-{a}-{q}" for p in py.split(".") for a in abi.split(".") for q in plat.split(".")}


def select_wheel(dist: Path, host_tags: list[str], kind: str, manifest: dict[str, Any] | None) -> Path:
    """The one wheel in dist that installs on the host (of the requested kind).

    With a release manifest in dist, only the wheels it lists are candidates: a build
    directory keeps wheels of earlier versions, and the manifest names this build's.
    """
    kinds = {w["file"]: w.get("kind") for w in (manifest or {}).get("wheels", [])}
    candidates = []
    for path in sorted(dist.glob("*.whl")):
        if kinds and path.name not in kinds:
            continue
        wheel_kind = kinds.get(path.name) or ("pure" if path.name.endswith("-none-any.whl") else "cuda")
        if kind != "any" and wheel_kind != kind:
            continue
        if wheel_tags(path.name) & set(host_tags):
            candidates.append(path)
    if len(candidates) != 1:
        found = [p.name for p in candidates] or "none"
        raise SmokeError(
            f"expected exactly one {'' if kind == 'any' else kind + ' '}wheel for this host in {dist}, found {found}; "
            "build the wheels (cmake --build --preset <preset>), pass --kind pure|cuda, or name one with --wheel FILE|URL")
    return candidates[0]


sha256_of = ffpa_manifest.file_sha256


# --- processes -----------------------------------------------------------------------


def run(cmd: list[str], env: dict[str, str] | None = None, input_text: str | None = None,
        log: Path | None = None) -> subprocess.CompletedProcess[str]:
    # Inline scripts would flood the log; their first line identifies them.
    shown = " ".join(arg if "\n" not in arg else repr(arg.strip().splitlines()[0] + " ...") for arg in cmd)
    print(f"+ {shown}", flush=True)
    result = subprocess.run(cmd, env=env, input=input_text, text=True, capture_output=True)
    if log is not None:
        with open(log, "a") as handle:
            handle.write(f"+ {shown}\n{result.stdout}{result.stderr}\n")
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-4000:]
        raise SmokeError(f"command failed ({result.returncode}): {shown}\n{tail}")
    return result


def interpreter_facts(python: str, env: dict[str, str]) -> dict[str, Any]:
    script = (
        "import importlib.machinery, importlib.util, json, sys, sysconfig\n"
        "mods = ('numpy', 'ipykernel', 'torch', 'matplotlib', 'pip')\n"
        "print(json.dumps({'executable': sys.executable, 'prefix': sys.prefix,"
        " 'version': list(sys.version_info[:3]), 'paths': sysconfig.get_paths(),"
        " 'ext_suffixes': importlib.machinery.EXTENSION_SUFFIXES,"
        " 'modules': {m: importlib.util.find_spec(m) is not None for m in mods}}))\n"
    )
    return json.loads(run([python, "-c", script], env=env).stdout)


def host_tags(python: str, env: dict[str, str]) -> list[str]:
    # A fresh venv has pip but not yet packaging; pip's vendored copy computes exactly the
    # tags pip will accept when the notebook installs the wheel.
    script = (
        "import json\n"
        "try:\n    from packaging.tags import sys_tags\n"
        "except ImportError:\n    from pip._vendor.packaging.tags import sys_tags\n"
        "print(json.dumps([str(t) for t in sys_tags()]))\n"
    )
    return json.loads(run([python, "-c", script], env=env).stdout)


def pip_freeze(python: str, env: dict[str, str]) -> str:
    return run([python, "-m", "pip", "freeze", "--all", "--disable-pip-version-check"], env=env).stdout


def clean_env(extra_path: Path | None = None) -> dict[str, str]:
    """This process's environment minus what could change what the kernel imports."""
    env = dict(os.environ)
    # PYTHONPATH above all: the kernels import what kernel_environments() says, never a
    # build tree the caller happened to have on its path.
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "MPLBACKEND",
                 "FFPA_WHEEL", "FFPA_SOURCE_COMMIT",
                 # a machine-wide find-links directory would feed the "clean" venv
                 "PIP_FIND_LINKS"):
        env.pop(name, None)
    env["PYTHONNOUSERSITE"] = "1"  # a user site-packages would leak packages into the "clean" venv
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    # The notebooks use tiny tensors; on shared CI cores, thread oversubscription makes
    # them many times slower. A value set by the caller wins.
    env.setdefault("OMP_NUM_THREADS", "1")
    if extra_path is not None:
        env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    return env


def kernel_environments(*, module_dir: Path | None = None, wheel: str | None = None,
                        source_commit: str | None = None) -> dict[str, dict[str, str]]:
    """What each notebook's kernel gets on top of clean_env().

    This is the only way the smoke tells a notebook which ffpa_attn to use. module_dir
    goes on every kernel's PYTHONPATH, as a person working from a build tree would set
    it; wheel and source_commit go to colab_quickstart's first cell (FFPA_WHEEL,
    FFPA_SOURCE_COMMIT), which installs the wheel into the kernel's interpreter, where
    the two later notebooks import it.
    """
    if module_dir is not None and wheel is not None:
        raise ValueError("a module dir and a wheel exclude each other: the wheel would be shadowed")
    envs: dict[str, dict[str, str]] = {name: {} for name in NOTEBOOKS}
    if module_dir is not None:
        for env in envs.values():
            env["PYTHONPATH"] = str(module_dir)
    if wheel is not None:
        envs[ACCEPTANCE_NOTEBOOK]["FFPA_WHEEL"] = wheel
    if source_commit:
        envs[ACCEPTANCE_NOTEBOOK]["FFPA_SOURCE_COMMIT"] = source_commit
    return envs


# --- the two profiles ------------------------------------------------------------------


@dataclass
class Setup:
    profile: str
    python: str                       # the kernels' interpreter
    package_parent: Path              # what the deprecation check imports ffpa_attn from
    expected_roots: list[Path]        # where ffpa_attn must be imported from in the notebooks
    expect_extension: bool | None     # True: _C must load; False: must be absent; None: either
    env: dict[str, str]
    notebook_env: dict[str, dict[str, str]]  # per notebook, from kernel_environments()
    wheel: dict[str, Any] | None = None
    source_commit: str | None = None
    prefix: str | None = None         # sys.prefix of the kernels' interpreter


def python312_candidates() -> list[str]:
    """python3.12 executables: PATH (pyenv shims skipped), pyenv's versions, this one."""
    found = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        # A pyenv shim only runs when the pyenv version selection allows it, which a
        # clean environment does not promise; the real binaries are looked up below.
        if entry and "shims" not in Path(entry).parts and (Path(entry) / "python3.12").is_file():
            found.append(str(Path(entry) / "python3.12"))
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found += [str(p) for p in sorted(pyenv_root.glob("versions/3.12*/bin/python3.12"), reverse=True)]
    if sys.version_info[:2] == (3, 12):
        found.append(sys.executable)
    return found


def resolve_base_python(args: argparse.Namespace) -> str:
    candidates = python312_candidates()
    candidate = args.python or os.environ.get("PYTHON") or (candidates[0] if candidates else None)
    if not candidate:
        raise SmokeError("no python3.12 found (PATH, pyenv); set PYTHON (or --python) to a Python 3.12 interpreter")
    facts = interpreter_facts(candidate, clean_env())
    if facts["version"][:2] != [3, 12]:
        raise SmokeError(f"{candidate} is Python {'.'.join(map(str, facts['version']))}; the wheel profile "
                         "runs Python 3.12: set PYTHON (or --python) to a 3.12 interpreter")
    return candidate


def fetch_wheel(spec: str, work: Path) -> tuple[Path, str | None]:
    """A local copy of the wheel and, for a URL, the URL to hand to the notebook."""
    name = wheel_file_name(spec)
    if urllib.parse.urlparse(spec).scheme in ("http", "https"):
        target = work / "download" / name
        target.parent.mkdir(parents=True)
        print(f"downloading {spec}", flush=True)
        with urllib.request.urlopen(spec) as response, open(target, "wb") as out:
            shutil.copyfileobj(response, out)
        return target, spec
    path = Path(spec).resolve()
    if not path.is_file():
        raise SmokeError(f"--wheel {spec}: no such file; build it or pass the right path")
    return path, None


def setup_wheel(args: argparse.Namespace, work: Path, out: Path, log: Path) -> Setup:
    requirements, default_index = read_versions_file(args.versions)
    index = torch_index(default_index, dict(os.environ))
    base = resolve_base_python(args)
    venv = work / "venv"
    run([base, "-m", "venv", str(venv)], env=clean_env(), log=log)
    python = str(venv / "bin" / "python")
    env = clean_env(venv / "bin")
    env["VIRTUAL_ENV"] = str(venv)

    manifest = None
    if args.wheel:
        wheel_path, url = fetch_wheel(args.wheel, work)
        manifest_dir = wheel_path.parent if url is None else None
    else:
        dist = args.dist.resolve()
        manifest_path = dist / "ffpa-release-manifest.json"
        manifest = ffpa_manifest.load(manifest_path) if manifest_path.is_file() else None
        wheel_path, url = select_wheel(dist, host_tags(python, env), args.kind, manifest), None
        manifest_dir = dist
    if manifest is None and manifest_dir is not None and (manifest_dir / "ffpa-release-manifest.json").is_file():
        manifest = ffpa_manifest.load(manifest_dir / "ffpa-release-manifest.json")
    if not wheel_tags(wheel_path.name) & set(host_tags(python, env)):
        raise SmokeError(f"{wheel_path.name} does not install on this host's Python 3.12; pick a matching wheel")
    entry = next((w for w in (manifest or {}).get("wheels", []) if w["file"] == wheel_path.name), None)

    for name in ("ffpa-release-manifest.json", "SHA256SUMS"):
        if manifest_dir is not None and (manifest_dir / name).is_file():
            shutil.copy2(manifest_dir / name, out / name)
    source_commit = args.source_commit or (manifest or {}).get("source_commit")
    if not source_commit:
        raise SmokeError("no source commit: the wheel has no ffpa-release-manifest.json beside it; "
                         "pass --source-commit with the SHA from its build log")
    if args.source_commit and manifest and manifest.get("source_commit") not in (None, args.source_commit):
        raise SmokeError(f"--source-commit {args.source_commit} differs from the manifest's "
                         f"{manifest['source_commit']}; the wheel must come from the given commit")

    # Step 1: everything but torch, so numpy is there for the deprecation check.
    pins = [r for r in requirements if normalize_name(r.split("==")[0]) != "torch"]
    torch_pin = next((r for r in requirements if normalize_name(r.split("==")[0]) == "torch"), None)
    constraints = work / "constraints.txt"
    constraints.write_text("\n".join(requirements) + "\n")
    run([python, "-m", "pip", "install", "-q", "-c", str(constraints), *pins], env=env, log=log)
    if not args.without_torch:
        if torch_pin is None:
            raise SmokeError(f"{args.versions} pins no torch; add torch==<version> or run --without-torch")
        cmd = [python, "-m", "pip", "install", "-q", "-c", str(constraints), torch_pin]
        if index:
            cmd += ["--index-url", index]
        print(f"torch from {index or 'PyPI'}", flush=True)
        run(cmd, env=env, log=log)

    unpacked = work / "wheel-unpacked"
    with zipfile.ZipFile(wheel_path) as archive:
        archive.extractall(unpacked)

    facts = interpreter_facts(python, env)
    site_dirs = sorted({Path(facts["paths"]["purelib"]), Path(facts["paths"]["platlib"])})
    kind = (entry or {}).get("kind") or ("pure" if wheel_path.name.endswith("-none-any.whl") else "cuda")
    sha = sha256_of(wheel_path)
    wheel = {"file": wheel_path.name, "path": str(wheel_path), "url": url, "sha256": sha,
             "size": wheel_path.stat().st_size, "kind": kind, "manifest_entry": entry,
             "torch_index": None if args.without_torch else (index or "PyPI")}
    notebook_env = kernel_environments(wheel=url or str(wheel_path), source_commit=source_commit)
    return Setup("wheel-without-torch" if args.without_torch else "wheel", python, unpacked, site_dirs,
                 kind == "cuda", env, notebook_env, wheel, source_commit, facts["prefix"])


def setup_module_dir(args: argparse.Namespace) -> Setup:
    module_dir = args.module_dir or os.environ.get("FFPA_PYTHON_MODULE_DIR")
    if not module_dir:
        raise SmokeError("module-dir profile: pass --module-dir build/<preset>/python (or set FFPA_PYTHON_MODULE_DIR)")
    module_dir_path = Path(module_dir).resolve()
    if not (module_dir_path / "ffpa_attn" / "__init__.py").is_file():
        raise SmokeError(f"{module_dir_path} holds no ffpa_attn package; build the tree (cmake --build --preset dev)")
    # Absolute, not resolved: the kernel starts in the results directory, and a venv's
    # python is a symlink whose target would lose the venv.
    python = os.path.abspath(shutil.which(args.python) or args.python) if args.python else sys.executable
    env = clean_env()
    facts = interpreter_facts(python, env)
    needed = ["numpy", "ipykernel", "pip"] + ([] if args.without_torch else ["torch"])
    missing = [m for m in needed if not facts["modules"][m]]
    if missing:
        raise SmokeError(f"{python} lacks {missing}; install them there (pip install {' '.join(missing)}) "
                         "or pass --python with an interpreter that has them"
                         + ("" if args.without_torch else ", or run --without-torch"))
    if args.without_torch and facts["modules"]["torch"]:
        raise SmokeError(f"--without-torch, but {python} has torch; use an interpreter without torch")
    built = sorted((module_dir_path / "ffpa_attn").glob("_C.*"))
    loadable = [p for p in built if any(p.name == f"_C{s}" for s in facts["ext_suffixes"])]
    if built and not loadable:
        raise SmokeError(f"{module_dir_path}/ffpa_attn has {[p.name for p in built]}, which Python "
                         f"{'.'.join(map(str, facts['version']))} ({python}) cannot load; pass --python with the "
                         "interpreter the tree was built for")
    notebook_env = kernel_environments(module_dir=module_dir_path, source_commit=args.source_commit)
    profile = "module-dir-without-torch" if args.without_torch else "module-dir"
    return Setup(profile, python, module_dir_path, [module_dir_path], bool(loadable), env, notebook_env,
                 None, args.source_commit, facts["prefix"])


def write_kernelspec(setup: Setup, work: Path) -> str:
    name = f"ffpa-smoke-{setup.profile}-{os.getpid()}-{secrets.token_hex(3)}"
    jupyter = work / "jupyter"
    spec_dir = jupyter / "kernels" / name
    spec_dir.mkdir(parents=True)
    # argv[0] must be an absolute path: jupyter_client swaps a bare "python" for its own
    # interpreter.
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [setup.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"ffpa notebook smoke ({setup.profile})",
        "language": "python",
    }, indent=1))
    # A private Jupyter home: only this kernelspec is visible under its name, user config
    # and IPython startup files cannot change the run.
    isolation = {
        "JUPYTER_PATH": str(jupyter),
        "JUPYTER_DATA_DIR": str(work / "jupyter-data"),
        "JUPYTER_CONFIG_DIR": str(work / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(work / "jupyter-runtime"),
        "IPYTHONDIR": str(work / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    os.environ.update(isolation)
    setup.env.update(isolation)
    from jupyter_client.kernelspec import KernelSpecManager

    resolved = KernelSpecManager().get_kernel_spec(name)
    if resolved.argv[0] != setup.python:
        raise SmokeError(f"kernelspec {name} resolved to {resolved.argv[0]}, not {setup.python}")
    return name
