#!/usr/bin/env python3
"""Run the three notebooks against an installed ffpa-attn wheel (or a built package dir).

docs/colab.md section 1. This file runs and checks; smoke_env.py beside it
prepares the interpreter and the wheel and decides each kernel's environment, which is
how a notebook is told what to import (the notebooks themselves just `import
ffpa_attn`). Profiles:

  wheel (default)          a clean venv of Python 3.12 (PYTHON or --python picks another
                           3.12) with the pins of tools/notebook-versions.txt; torch from
                           FFPA_TORCH_INDEX (unset: the file's default CPU index; empty:
                           PyPI); colab_quickstart.ipynb installs the wheel with --no-deps
  wheel --without-torch    the same without torch: training must be "skipped"
  module-dir               an existing interpreter (--python, default this one) with numpy
                           and ipykernel (+ torch unless --without-torch); the package comes
                           from --module-dir (default FFPA_PYTHON_MODULE_DIR), which every
                           kernel gets as PYTHONPATH; installs nothing

Every notebook is validated with nbformat, scanned for deprecated API names with
ffpa_attn.deprecations.find_deprecated_uses imported from the package under test (in the
kernel's interpreter), executed with nbclient in its own kernel under a kernelspec name
unique to this run (in a private JUPYTER_PATH, so no user kernelspec can be picked), and
checked for where ffpa_attn and its extension were imported from and for the
PYTHONPATH its kernel saw. The install cell of quickstart and head_dim_sweep must do
nothing (the environment already provides ffpa_attn). `pip freeze --all` before and
after may differ only by ffpa-attn (module-dir: not at all).

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
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from check_committed import WITH_INSTALL_CELL
from smoke_env import (ACCEPTANCE_NOTEBOOK, NOTEBOOKS, Setup, SmokeError, normalize_name, pip_freeze, run,
                       setup_module_dir, setup_wheel, write_kernelspec)

REPO = Path(__file__).resolve().parents[2]

PROBE_TAG = "ffpa-smoke-probe"
PROBE_PREFIX = "FFPA-SMOKE-PROBE "
RESULTS_MARKER = ".ffpa-notebook-smoke"
PACKAGE_NAME = "ffpa-attn"

# Fields that acceptance.json must carry (dotted paths; docs/colab.md lists them).
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

# Runs in the kernel's interpreter with the package under test first on sys.path and this
# directory after it (deprecated_uses.py, the scanner): the registry of deprecated names is
# the package's, never a copy kept here.
DEPRECATION_SCRIPT = r"""
import json, sys
from ffpa_attn import deprecations
from deprecated_uses import find_deprecated_uses
sources = json.load(sys.stdin)
hits = {name: [[cell, qualified, line, fix] for cell, src in cells
               for qualified, line, fix in find_deprecated_uses(src)]
        for name, cells in sources.items()}
print(json.dumps({"module": deprecations.__file__, "count": len(deprecations.DEPRECATED_NAMES), "hits": hits}))
"""

PROBE_SOURCE = f"""\
# Added by ctest/notebooks/notebook_smoke.py (not part of the committed notebook): reports
# what this kernel actually imported, for the runner to check.
import importlib.util as _ilu, json as _json, os as _os, sys as _sys
_ffpa = _sys.modules.get("ffpa_attn")
print({PROBE_PREFIX!r} + _json.dumps({{
    "prefix": _sys.prefix,
    "executable": _sys.executable,
    "package_file": getattr(_ffpa, "__file__", None),
    "extension_file": getattr(_sys.modules.get("ffpa_attn._C"), "__file__", None),
    "extension_path_flag": getattr(getattr(_ffpa, "cuda", None), "EXTENSION_PATH", None),
    "extension_import_error": getattr(getattr(_ffpa, "cuda", None), "EXTENSION_IMPORT_ERROR", None),
    "torch_available": _ilu.find_spec("torch") is not None,
    "pythonpath": _os.environ.get("PYTHONPATH"),
}}))
"""


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


def stream_text(cell: Any) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


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


# --- running and checking ----------------------------------------------------------


def check_deprecations(setup: Setup, notebooks: dict[str, Any], report: Report) -> None:
    sources = {name: [[i, c.source] for i, c in enumerate(nb.cells) if c.cell_type == "code"]
               for name, nb in notebooks.items()}
    env = dict(setup.env)
    env["PYTHONPATH"] = os.pathsep.join((str(setup.package_parent), str(Path(__file__).resolve().parent)))
    result = run([setup.python, "-c", DEPRECATION_SCRIPT], env=env, input_text=json.dumps(sources))
    found = json.loads(result.stdout.strip().splitlines()[-1])
    report.check("deprecated-name registry read from the package under test",
                 is_within(found["module"], setup.package_parent) and found["count"] > 0,
                 f"ffpa_attn.deprecations came from {found['module']} with {found['count']} names, "
                 f"expected under {setup.package_parent}")
    for name, hits in found["hits"].items():
        detail = "; ".join(f"cell {cell} line {line}: {qualified} ({fix})" for cell, qualified, line, fix in hits)
        report.check(f"{name}: no deprecated API names", not hits, detail)


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
    env.update(setup.notebook_env[name])
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
    if name in WITH_INSTALL_CELL:
        first = next(c for c in client.nb.cells if c.cell_type == "code")
        # The environment already holds ffpa_attn, so "%pip install" must not have run: a
        # run that installed from PyPI would be checking some other package.
        outputs = first.get("outputs", [])
        report.check(f"{name}: the install cell installed nothing", not outputs,
                     f"it printed {stream_text(first)[-500:]!r} ({len(outputs)} outputs)")
    probe_data = probe_output(client.nb.cells[-1])
    result["probe"] = probe_data
    if probe_data is None or not probe_data.get("package_file"):
        report.check(f"{name}: imports ffpa_attn", False, "the notebook never imported ffpa_attn")
        return result
    pythonpath = setup.notebook_env[name].get("PYTHONPATH")
    report.check(f"{name}: kernel's PYTHONPATH is the runner's ({pythonpath or 'unset'})",
                 probe_data.get("pythonpath") == pythonpath,
                 f"the kernel saw PYTHONPATH={probe_data.get('pythonpath')!r}")
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
    report.check("acceptance: every field of the report present", not missing, f"missing {missing}")
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
