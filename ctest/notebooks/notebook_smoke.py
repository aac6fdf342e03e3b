#!/usr/bin/env python3
"""Run the three notebooks against an installed ffpa-attn wheel (or a built package dir).

spec/notebooks.md sections 2-4. Profiles:

  wheel (default)          a clean venv of Python 3.12 (PYTHON or --python picks another
                           3.12) with the pins of tools/notebook-versions.txt; torch from
                           FFPA_TORCH_INDEX (unset: the file's default CPU index; empty:
                           PyPI); colab_quickstart.ipynb installs the wheel with --no-deps
  wheel --without-torch    the same without torch: training must be "skipped"
  module-dir               an existing interpreter (--python, default this one) with numpy
                           and ipykernel (+ torch unless --without-torch); the package comes
                           from --module-dir (default FFPA_PYTHON_MODULE_DIR); installs nothing

Every notebook is validated with nbformat, scanned for deprecated API names with
ffpa_attn.deprecations.find_deprecated_uses imported from the package under test (in the
kernel's interpreter), executed with nbclient in its own kernel under a kernelspec name
unique to this run (in a private JUPYTER_PATH, so no user kernelspec can be picked), and
checked for where ffpa_attn and its extension were imported from. `pip freeze --all`
before and after may differ only by ffpa-attn (module-dir: not at all).

Results (executed notebooks, acceptance.json, pip freezes, the manifest and build log)
go to --output-dir, else to a temporary directory that is kept and printed. Exit 0 and
`notebook-smoke: OK - 3/3 notebooks` only when everything passed.

Examples:
  notebook_smoke.py --dist dist --output-dir build/nb/wheel
  FFPA_TORCH_INDEX= notebook_smoke.py --wheel dist/ffpa_attn-1.0.0-py3-none-any.whl
  notebook_smoke.py --profile module-dir --module-dir build/dev/python --without-torch
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# Execution order matters for the wheel profile: colab_quickstart installs the wheel
# that the other two then import.
NOTEBOOKS = ("colab_quickstart.ipynb", "quickstart.ipynb", "head_dim_sweep.ipynb")
ACCEPTANCE_NOTEBOOK = "colab_quickstart.ipynb"
PROBE_TAG = "ffpa-smoke-probe"
PROBE_PREFIX = "FFPA-SMOKE-PROBE "
RESULTS_MARKER = ".ffpa-notebook-smoke"
PACKAGE_NAME = "ffpa-attn"

# Fields of spec/notebooks.md section 4 that acceptance.json must carry (dotted paths).
ACCEPTANCE_FIELDS = (
    "python.version", "numpy.before_install", "numpy.after_install", "torch.before_install",
    "torch.after_install", "wheel.file", "wheel.sha256", "source_commit", "times.download_s",
    "times.install_s", "times.import_s", "cells", "numpy_checks.before_torch",
    "numpy_checks.after_training", "training.status", "extension_path", "restart_performed",
    "restart_required",
)
TRAINING_FIELDS = (
    "device", "device_name", "dtype", "grad_scaler", "epochs", "cpu_reference", "comparison",
)
EPOCH_FIELDS = ("epoch", "loss", "samples_per_s", "mean_step_s")

# Runs in the kernel's interpreter with the package under test first on sys.path: the
# registry of deprecated names is the package's, never a copy kept here.
DEPRECATION_SCRIPT = r"""
import json, sys
from ffpa_attn import deprecations
sources = json.load(sys.stdin)
hits = {name: [[cell, qualified, line, fix] for cell, src in cells
               for qualified, line, fix in deprecations.find_deprecated_uses(src)]
        for name, cells in sources.items()}
print(json.dumps({"module": deprecations.__file__, "count": len(deprecations.DEPRECATED_NAMES), "hits": hits}))
"""

PROBE_SOURCE = f"""\
# Added by ctest/notebooks/notebook_smoke.py (not part of the committed notebook): reports
# what this kernel actually imported, for the runner to check.
import importlib.util as _ilu, json as _json, sys as _sys
_ffpa = _sys.modules.get("ffpa_attn")
print({PROBE_PREFIX!r} + _json.dumps({{
    "prefix": _sys.prefix,
    "executable": _sys.executable,
    "package_file": getattr(_ffpa, "__file__", None),
    "extension_file": getattr(_sys.modules.get("ffpa_attn._C"), "__file__", None),
    "extension_path_flag": getattr(getattr(_ffpa, "cuda", None), "EXTENSION_PATH", None),
    "extension_import_error": getattr(getattr(_ffpa, "cuda", None), "EXTENSION_IMPORT_ERROR", None),
    "torch_available": _ilu.find_spec("torch") is not None,
}}))
"""


class SmokeError(Exception):
    """A setup problem that stops the run; the message names the fix."""


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)

    def check(self, name: str, passed: bool, detail: str = "") -> bool:
        self.checks.append({"name": name, "passed": bool(passed), "detail": detail})
        if not passed:
            self.problems.append(f"{name}: {detail}" if detail else name)
        print(f"  [{'ok' if passed else 'FAIL'}] {name}{' - ' + detail if detail and not passed else ''}", flush=True)
        return bool(passed)


# --- small helpers (unit-tested in test_notebook_smoke.py) -----------------------------


def normalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_freeze(text: str) -> dict[str, str]:
    """`pip freeze --all` lines by normalized project name (name==v, name @ url, -e ...)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-e "):
            match = re.search(r"#egg=([A-Za-z0-9_.-]+)", line)
            name = match.group(1) if match else line
        else:
            name = re.split(r"\s*(?:==|===| @ )", line, maxsplit=1)[0]
        out[normalize_name(name)] = line
    return out


def freeze_difference(before: str, after: str) -> dict[str, list[str]]:
    b, a = parse_freeze(before), parse_freeze(after)
    return {
        "added": sorted(a[n] for n in a.keys() - b.keys()),
        "removed": sorted(b[n] for n in b.keys() - a.keys()),
        "changed": sorted(f"{b[n]} -> {a[n]}" for n in a.keys() & b.keys() if a[n] != b[n]),
    }


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


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def get_field(data: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def is_within(path: str | None, root: Path) -> bool:
    if not path:
        return False
    return Path(os.path.realpath(path)).is_relative_to(Path(os.path.realpath(root)))


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
    for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "MPLBACKEND",
                 "FFPA_PYTHON_MODULE_DIR", "FFPA_NOTEBOOK_PACKAGE", "FFPA_WHEEL", "FFPA_SOURCE_COMMIT",
                 "FFPA_REPO_DIR"):
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


# --- the run ---------------------------------------------------------------------------


@dataclass
class Setup:
    profile: str
    python: str                       # the kernels' interpreter
    package_parent: Path              # what the deprecation check imports ffpa_attn from
    expected_roots: list[Path]        # where ffpa_attn must be imported from in the notebooks
    expect_extension: bool | None     # True: _C must load; False: must be absent; None: either
    env: dict[str, str]
    notebook_env: dict[str, dict[str, str]]
    wheel: dict[str, Any] | None = None
    source_commit: str | None = None
    prefix: str | None = None         # sys.prefix of the kernels' interpreter


def prepare_results_dir(requested: Path | None) -> Path:
    if requested is None:
        return Path(tempfile.mkdtemp(prefix="ffpa-notebook-smoke-"))
    out = requested.resolve()
    if out.exists() and any(out.iterdir()):
        if not (out / RESULTS_MARKER).exists():
            raise SmokeError(f"--output-dir {out} is not empty and was not written by this runner; "
                             "choose an empty or new directory")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULTS_MARKER).write_text("results of ctest/notebooks/notebook_smoke.py; replaced on the next run\n")
    return out


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
        manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else None
        wheel_path, url = select_wheel(dist, host_tags(python, env), args.kind, manifest), None
        manifest_dir = dist
    if manifest is None and manifest_dir is not None and (manifest_dir / "ffpa-release-manifest.json").is_file():
        manifest = json.loads((manifest_dir / "ffpa-release-manifest.json").read_text())
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
    notebook_env = {
        ACCEPTANCE_NOTEBOOK: {"FFPA_WHEEL": url or str(wheel_path), "FFPA_SOURCE_COMMIT": source_commit},
        "quickstart.ipynb": {"FFPA_NOTEBOOK_PACKAGE": "installed"},
        "head_dim_sweep.ipynb": {"FFPA_NOTEBOOK_PACKAGE": "installed"},
    }
    return Setup("wheel-without-torch" if args.without_torch else "wheel", python, unpacked, site_dirs,
                 kind == "cuda", env, notebook_env, wheel, source_commit, facts["prefix"])


def setup_module_dir(args: argparse.Namespace) -> Setup:
    module_dir = args.module_dir or os.environ.get("FFPA_PYTHON_MODULE_DIR")
    if not module_dir:
        raise SmokeError("module-dir profile: pass --module-dir build/<preset>/python (or set FFPA_PYTHON_MODULE_DIR)")
    module_dir_path = Path(module_dir).resolve()
    if not (module_dir_path / "ffpa_attn" / "__init__.py").is_file():
        raise SmokeError(f"{module_dir_path} holds no ffpa_attn package; build the tree (cmake --build --preset dev)")
    python = args.python or sys.executable
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
    notebook_env = {name: {"FFPA_PYTHON_MODULE_DIR": str(module_dir_path)} for name in NOTEBOOKS}
    if args.source_commit:
        notebook_env[ACCEPTANCE_NOTEBOOK]["FFPA_SOURCE_COMMIT"] = args.source_commit
    profile = "module-dir-without-torch" if args.without_torch else "module-dir"
    return Setup(profile, python, module_dir_path, [module_dir_path], bool(loadable), env, notebook_env,
                 None, args.source_commit, facts["prefix"])


def check_deprecations(setup: Setup, notebooks: dict[str, Any], report: Report) -> None:
    sources = {name: [[i, c.source] for i, c in enumerate(nb.cells) if c.cell_type == "code"]
               for name, nb in notebooks.items()}
    env = dict(setup.env)
    env["PYTHONPATH"] = str(setup.package_parent)
    result = run([setup.python, "-c", DEPRECATION_SCRIPT], env=env, input_text=json.dumps(sources))
    found = json.loads(result.stdout.strip().splitlines()[-1])
    report.check("deprecated-name registry read from the package under test",
                 is_within(found["module"], setup.package_parent) and found["count"] > 0,
                 f"ffpa_attn.deprecations came from {found['module']} with {found['count']} names, "
                 f"expected under {setup.package_parent}")
    for name, hits in found["hits"].items():
        detail = "; ".join(f"cell {cell} line {line}: {qualified} ({fix})" for cell, qualified, line, fix in hits)
        report.check(f"{name}: no deprecated API names", not hits, detail)


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


def cell_seconds(cell: Any) -> float | None:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return None
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


def probe_output(cell: Any) -> dict[str, Any] | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            for line in output.get("text", "").splitlines():
                if line.startswith(PROBE_PREFIX):
                    return json.loads(line[len(PROBE_PREFIX):])
    return None


def execute_notebook(name: str, nb: Any, setup: Setup, kernel: str, out: Path, timeout: int,
                     report: Report) -> dict[str, Any]:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    probe = nbformat.v4.new_code_cell(PROBE_SOURCE, metadata={"tags": [PROBE_TAG]})
    probe.id = PROBE_TAG
    nb.cells.append(probe)
    env = dict(setup.env)
    env.update(setup.notebook_env.get(name, {}))
    env["FFPA_REPO_DIR"] = str(REPO)
    client = NotebookClient(nb, kernel_name=kernel, timeout=timeout, startup_timeout=180,
                            allow_errors=False, record_timing=True,
                            resources={"metadata": {"path": str(out)}})
    print(f"executing {name} ({setup.profile})", flush=True)
    start = time.perf_counter()
    error = None
    try:
        client.execute(env=env)
    except CellExecutionError as exc:
        error = exc
    finally:
        nbformat.write(client.nb, out / name)
    seconds = time.perf_counter() - start
    result: dict[str, Any] = {
        "notebook": name, "seconds": seconds, "executed": str(out / name),
        "cells": [{"index": i, "cell_type": c.cell_type, "seconds": cell_seconds(c)}
                  for i, c in enumerate(client.nb.cells) if c.cell_type == "code"],
    }
    if error is not None:
        failing = next((i for i, c in enumerate(client.nb.cells) if c.cell_type == "code" and any(
            o.get("output_type") == "error" for o in c.get("outputs", []))), None)
        first_line = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        result["error"] = {"cell": failing, "ename": getattr(error, "ename", None),
                           "evalue": getattr(error, "evalue", None)}
        report.check(f"{name}: every cell ran without error", False,
                     f"cell {failing}: {result['error']['ename']}: {result['error']['evalue'] or first_line}")
        return result
    report.check(f"{name}: every cell ran without error", True)
    probe_data = probe_output(client.nb.cells[-1])
    result["probe"] = probe_data
    if probe_data is None or not probe_data.get("package_file"):
        report.check(f"{name}: imports ffpa_attn", False, "the notebook never imported ffpa_attn")
        return result
    report.check(f"{name}: kernel ran the chosen interpreter",
                 os.path.realpath(probe_data["prefix"]) == os.path.realpath(setup.prefix or ""),
                 f"kernel ran {probe_data['executable']} (prefix {probe_data['prefix']}), "
                 f"expected {setup.python} (prefix {setup.prefix})")
    roots = " or ".join(map(str, setup.expected_roots))
    report.check(f"{name}: ffpa_attn imported from the expected location",
                 any(is_within(probe_data["package_file"], r) for r in setup.expected_roots),
                 f"imported from {probe_data['package_file']}, expected under {roots}")
    ext = probe_data["extension_file"]
    if setup.expect_extension:
        report.check(f"{name}: extension ffpa_attn._C imported from the expected location",
                     any(is_within(ext, r) for r in setup.expected_roots) and not probe_data["extension_import_error"],
                     f"_C from {ext} (import error: {probe_data['extension_import_error']}), expected under {roots}")
    elif setup.expect_extension is False:
        report.check(f"{name}: no extension (pure package)", ext is None and probe_data["extension_path_flag"] is None,
                     f"a pure package imported an extension from {ext}")
    if "without-torch" in setup.profile:
        report.check(f"{name}: torch absent", not probe_data["torch_available"], "torch is importable in the kernel")
    return result


def check_acceptance(data: dict[str, Any], setup: Setup, executed: dict[str, Any], report: Report) -> None:
    missing = [f for f in ACCEPTANCE_FIELDS if not get_field(data, f)[0]]
    report.check("acceptance: every field of spec section 4 present", not missing, f"missing {missing}")
    report.check("acceptance: restart_required is null and restart_performed false",
                 data.get("restart_required") is None and data.get("restart_performed") is False,
                 f"restart_required={data.get('restart_required')!r}, restart_performed={data.get('restart_performed')!r}")
    report.check("acceptance: the notebook's own checks passed", data.get("passed") is True,
                 str([c for c in data.get("checks", []) if not c.get("passed")]))
    checks = data.get("numpy_checks", {})
    for phase in ("before_torch", "after_training"):
        results = checks.get(phase) or []
        report.check(f"acceptance: NumPy check {phase.replace('_', ' ')}",
                     bool(results) and all(r.get("passed") for r in results), json.dumps(results))
    report.check("acceptance: torch not imported before the first NumPy check",
                 checks.get("torch_imported_before_check") is False)
    for lib in ("numpy", "torch"):
        versions = data.get(lib, {})
        report.check(f"acceptance: {lib} version unchanged by the install",
                     versions.get("before_install") == versions.get("after_install"), json.dumps(versions))
    probe = executed.get(ACCEPTANCE_NOTEBOOK, {}).get("probe") or {}
    report.check("acceptance: extension_path is the extension the kernel imported",
                 data.get("extension_path") == probe.get("extension_path_flag"),
                 f"{data.get('extension_path')} vs {probe.get('extension_path_flag')}")
    times = data.get("times", {})
    if setup.wheel is not None:
        wheel = data.get("wheel", {})
        report.check("acceptance: the wheel was installed", data.get("install", {}).get("status") == "installed"
                     and times.get("install_s") is not None and times.get("import_s") is not None,
                     json.dumps(data.get("install")))
        report.check("acceptance: wheel file name", wheel.get("file") == setup.wheel["file"],
                     f"{wheel.get('file')} vs {setup.wheel['file']}")
        report.check("acceptance: wheel sha256 matches the artefact", wheel.get("sha256") == setup.wheel["sha256"],
                     f"{wheel.get('sha256')} vs {setup.wheel['sha256']}")
        entry = setup.wheel.get("manifest_entry")
        if entry is not None:
            report.check("wheel sha256 matches ffpa-release-manifest.json", entry["sha256"] == setup.wheel["sha256"],
                         f"manifest {entry['sha256']}, file {setup.wheel['sha256']}")
        report.check("acceptance: download timed for a URL (only)",
                     (times.get("download_s") is not None) == bool(setup.wheel["url"]), json.dumps(times))
        report.check("acceptance: source_commit as given", data.get("source_commit") == setup.source_commit,
                     f"{data.get('source_commit')} vs {setup.source_commit}")
        built_from = data.get("package", {}).get("build_info", {}).get("source_commit")
        report.check("the wheel was built from the given commit", built_from == setup.source_commit,
                     f"wheel build info says {built_from}, given {setup.source_commit}")
    else:
        report.check("acceptance: nothing installed, no install measured",
                     data.get("install", {}).get("status") == "skipped" and times.get("install_s") is None
                     and times.get("download_s") is None, json.dumps(times))
    training = data.get("training", {})
    if "without-torch" in setup.profile:
        report.check('acceptance: training.status == "skipped" without torch', training.get("status") == "skipped",
                     f"status {training.get('status')!r}")
        return
    absent = [f for f in TRAINING_FIELDS if f not in training]
    report.check("acceptance: training passed", training.get("status") == "passed",
                 training.get("error") or f"status {training.get('status')!r}, comparison {training.get('comparison')}")
    report.check("acceptance: training fields present", not absent, f"missing {absent}")
    epochs = training.get("epochs") or []
    bad = [e for e in epochs if any(f not in e for f in EPOCH_FIELDS)]
    report.check("acceptance: every epoch recorded with loss, samples/s and mean step time",
                 bool(epochs) and not bad and len(epochs) == training.get("model", {}).get("epochs"),
                 f"{len(epochs)} epochs, incomplete: {bad}")
    ref = training.get("cpu_reference", {}).get("epochs") or []
    report.check("acceptance: CPU reference losses recorded for every epoch", len(ref) == len(epochs),
                 f"{len(ref)} reference epochs for {len(epochs)}")


def run_smoke(args: argparse.Namespace) -> int:
    import nbformat

    notebooks_dir = args.notebooks_dir.resolve()
    out = prepare_results_dir(args.output_dir)
    work = Path(tempfile.mkdtemp(prefix="ffpa-notebook-smoke-work-"))
    log = out / "smoke-setup.log"
    report = Report()
    executed: dict[str, Any] = {}
    setup: Setup | None = None
    started = time.perf_counter()
    try:
        notebooks: dict[str, Any] = {}
        for name in NOTEBOOKS:
            path = notebooks_dir / name
            if not path.is_file():
                report.check(f"{name}: present", False, f"{path} is missing")
                continue
            try:
                nb = nbformat.read(path, as_version=4)
                nbformat.validate(nb)
            except Exception as exc:  # nbformat raises several types for bad JSON/schema
                report.check(f"{name}: valid nbformat", False, f"{type(exc).__name__}: {exc}")
                continue
            report.check(f"{name}: valid nbformat", True)
            notebooks[name] = nb

        if args.profile == "wheel":
            setup = setup_wheel(args, work, out, log)
        else:
            setup = setup_module_dir(args)
        if args.build_log:
            if not args.build_log.is_file():
                raise SmokeError(f"build log {args.build_log} does not exist; pass the log the wheel was built with")
            shutil.copy2(args.build_log, out / "build.log")
        if notebooks:
            check_deprecations(setup, notebooks, report)
        if report.problems:
            print("not executing: fix the problems above first", flush=True)
        else:
            kernel = write_kernelspec(setup, work)
            print(f"kernelspec {kernel} -> {setup.python}", flush=True)
            freeze_before = pip_freeze(setup.python, setup.env)
            (out / "pip-freeze-before.txt").write_text(freeze_before)
            for name in NOTEBOOKS:
                executed[name] = execute_notebook(name, notebooks[name], setup, kernel, out, args.cell_timeout, report)
            freeze_after = pip_freeze(setup.python, setup.env)
            (out / "pip-freeze-after.txt").write_text(freeze_after)
            diff = freeze_difference(freeze_before, freeze_after)
            expected_added = [PACKAGE_NAME] if setup.wheel is not None else []
            added = [normalize_name(re.split(r"\s*(?:==| @ )", line)[0]) for line in diff["added"]]
            report.check("pip freeze --all differs only by the added ffpa-attn" if expected_added
                         else "pip freeze --all unchanged (module-dir installs nothing)",
                         added == expected_added and not diff["removed"] and not diff["changed"], json.dumps(diff))
            executed["_pip_freeze"] = diff
            acceptance_file = out / "ffpa-acceptance.json"
            if acceptance_file.is_file():
                data = json.loads(acceptance_file.read_text())
                check_acceptance(data, setup, executed, report)
            else:
                data = {}
                report.check("ffpa-acceptance.json written by the last cell", False,
                             f"{acceptance_file} is missing (the notebook stopped early)")
    except SmokeError as exc:
        report.problems.append(str(exc))
        print(f"error: {exc}", file=sys.stderr, flush=True)
        data = {}
    finally:
        if args.keep_work:
            print(f"work directory (venv) kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    passed_notebooks = sum(1 for name in NOTEBOOKS if name in executed and "error" not in executed[name]
                           and not any(p.startswith(name) for p in report.problems))
    acceptance = dict(data)
    acceptance["smoke"] = {
        "profile": setup.profile if setup else f"{args.profile}{'-without-torch' if args.without_torch else ''}",
        "python": setup.python if setup else None,
        "wheel": setup.wheel if setup else None,
        "source_commit": setup.source_commit if setup else None,
        "notebooks": {k: v for k, v in executed.items() if not k.startswith("_")},
        "pip_freeze": executed.get("_pip_freeze"),
        "checks": report.checks,
        "problems": report.problems,
        "seconds": time.perf_counter() - started,
        "passed": not report.problems,
    }
    (out / "acceptance.json").write_text(json.dumps(acceptance, indent=2, sort_keys=True, default=str) + "\n")
    print(f"results: {out}" + ("" if args.output_dir else " (temporary directory, kept)"))
    if report.problems:
        print("\n".join(f"FAIL: {p}" for p in report.problems))
        print(f"notebook-smoke: FAILED - {passed_notebooks}/{len(NOTEBOOKS)} notebooks passed")
        return 1
    print(f"notebook-smoke: OK - {len(NOTEBOOKS)}/{len(NOTEBOOKS)} notebooks")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", choices=("wheel", "module-dir"), default="wheel")
    parser.add_argument("--without-torch", action="store_true", help="no torch: training must be recorded as skipped")
    parser.add_argument("--wheel", help="wheel file or direct https URL (default: the one host wheel in --dist)")
    parser.add_argument("--dist", type=Path, default=REPO / "dist", help="where the wheels and manifest are (default: dist/)")
    parser.add_argument("--kind", choices=("any", "pure", "cuda"), default="any",
                        help="which wheel of --dist to take when several fit the host")
    parser.add_argument("--source-commit", help="the SHA the wheel was built from (default: from the manifest)")
    parser.add_argument("--build-log", type=Path,
                        help="the wheel's build log, kept with the results (default $FFPA_BUILD_LOG)")
    parser.add_argument("--python", help="wheel: the 3.12 interpreter for the venv (default $PYTHON, python3.12); "
                                         "module-dir: the kernel interpreter (default: this one)")
    parser.add_argument("--module-dir", help="module-dir: the package directory (default $FFPA_PYTHON_MODULE_DIR)")
    parser.add_argument("--versions", type=Path, default=REPO / "tools" / "notebook-versions.txt")
    parser.add_argument("--notebooks-dir", type=Path, default=REPO / "notebooks")
    parser.add_argument("--output-dir", type=Path, help="results directory (default: a kept temporary directory)")
    parser.add_argument("--cell-timeout", type=int, default=900, help="seconds per cell")
    parser.add_argument("--keep-work", action="store_true", help="keep the venv and kernelspec directory")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.profile == "module-dir" and (args.wheel or args.kind != "any"):
        build_parser().error("--wheel/--kind belong to the wheel profile")
    if args.build_log is None and os.environ.get("FFPA_BUILD_LOG"):
        args.build_log = Path(os.environ["FFPA_BUILD_LOG"])
    try:
        return run_smoke(args)
    except SmokeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print("notebook-smoke: FAILED - 0/3 notebooks passed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
