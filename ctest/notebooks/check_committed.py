#!/usr/bin/env python3
"""The committed notebooks: clean, and written the way a user would write them.

  check_committed.py [--check hygiene|contract]... [--notebooks-dir notebooks] [--package-dir python]
  check_committed.py --clear [--notebooks-dir notebooks]

hygiene (docs/colab.md): valid nbformat, no outputs, no execution counts,
no execution metadata, no deprecated API names. The deprecated names come from
ffpa_attn.deprecations in --package-dir (the source tree's package by default), never
from a list kept here.

contract: the notebooks are edited as notebooks, and which ffpa_attn
they import is decided by the kernel's environment, not by the notebook:
  - quickstart and head_dim_sweep open with the install cell (``%pip install ffpa-attn``
    guarded by ``importlib.util.find_spec("ffpa_attn") is None``), then ``import ffpa_attn``;
  - colab_quickstart's first code cell takes WHEEL and SOURCE_COMMIT (from FFPA_WHEEL and
    FFPA_SOURCE_COMMIT, which the smoke runner sets), and its last writes
    ffpa-acceptance.json;
  - no code cell touches the import path or searches for build trees.

--clear strips outputs, execution counts and run metadata in place: run it after
editing a notebook in Jupyter. Exit 1 naming every problem.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from smoke_env import ACCEPTANCE_NOTEBOOK, NOTEBOOKS

REPO = Path(__file__).resolve().parents[2]
EXPECTED = tuple(sorted(NOTEBOOKS))
WITH_INSTALL_CELL = tuple(name for name in NOTEBOOKS if name != ACCEPTANCE_NOTEBOOK)
# What Jupyter/nbclient write into cell metadata when a cell runs.
RUN_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")

INSTALL_GUARD = re.compile(r'^if importlib\.util\.find_spec\("ffpa_attn"\) is None:$')
INSTALL_LINE = re.compile(r"^\s+%pip install (-U )?ffpa-attn$")
IMPORT_LINE = re.compile(r"^import ffpa_attn$", re.M)
COLAB_INPUTS = (
    re.compile(r'^WHEEL = os\.environ\.get\("FFPA_WHEEL", "[^"]+"\)$', re.M),
    re.compile(r'^SOURCE_COMMIT = os\.environ\.get\("FFPA_SOURCE_COMMIT", ""\)$', re.M),
)
# Code that would let a notebook pick its own package: each is how the old generated
# cell (or a plausible successor) hunted through build trees.
PATH_HUNTS = (
    (re.compile(r"\bsys\.path\b"), "changes or reads the import path"),
    (re.compile(r"\bsite\.addsitedir\b|\bspec_from_file_location\b"), "loads a package from a chosen directory"),
    (re.compile(r"environ\s*\[\s*[\"']PYTHONPATH|putenv"), "sets PYTHONPATH from inside the kernel"),
    (re.compile(r"[\"'/]build[\"'/]"), "names a build tree"),
    (re.compile(r"EXTENSION_SUFFIXES"), "looks for loadable extensions itself"),
    (re.compile(r"FFPA_PYTHON_MODULE_DIR|FFPA_REPO_DIR|FFPA_NOTEBOOK_PACKAGE"),
     "reads a package-selection variable (set PYTHONPATH outside the notebook instead)"),
)


def is_install_cell(source: str) -> bool:
    """The guarded ``%pip install ffpa-attn``: a no-op when ffpa_attn is importable."""
    lines = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    guard = next((i for i, line in enumerate(lines) if INSTALL_GUARD.match(line)), None)
    return (guard is not None and len(lines) == guard + 2 and INSTALL_LINE.match(lines[guard + 1]) is not None
            and all(line.startswith("import ") for line in lines[:guard]))


def read(path: Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return nb


def hygiene_problems(name: str, nb, find_deprecated_uses) -> list[str]:
    found = []
    for index, cell in enumerate(nb.cells):
        where = f"{name} cell {index}"
        if cell.cell_type != "code":
            continue
        if cell.get("outputs"):
            found.append(f"{where}: has {len(cell.outputs)} output(s)")
        if cell.get("execution_count") is not None:
            found.append(f"{where}: has execution_count {cell.execution_count}")
        stale = [key for key in RUN_METADATA if key in cell.get("metadata", {})]
        if stale:
            found.append(f"{where}: has run metadata {stale}")
        for qualified, line, fix in find_deprecated_uses(cell.source):
            found.append(f"{where} line {line}: deprecated {qualified}: {fix}")
    return found


def contract_problems(name: str, nb) -> list[str]:
    code = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    if not code:
        return [f"{name}: has no code cells"]
    found = []
    for index, source in code:
        for number, line in enumerate(source.splitlines(), start=1):
            if line.lstrip().startswith("#"):
                continue
            for pattern, why in PATH_HUNTS:
                if pattern.search(line):
                    found.append(f"{name} cell {index} line {number}: {why}: {line.strip()!r}; which ffpa_attn a "
                                 "notebook imports is the kernel's environment's business (PYTHONPATH, the venv)")
    if name in WITH_INSTALL_CELL:
        first, second = code[0], code[1] if len(code) > 1 else (None, "")
        if not is_install_cell(first[1]):
            found.append(f"{name} cell {first[0]}: the first code cell must be the install cell, exactly "
                         "`import importlib.util` + `if importlib.util.find_spec(\"ffpa_attn\") is None:` + "
                         "`    %pip install ffpa-attn`")
        if not IMPORT_LINE.search(second[1]):
            found.append(f"{name}: the code cell after the install cell must `import ffpa_attn`")
    elif name == ACCEPTANCE_NOTEBOOK:
        first = code[0]
        for pattern in COLAB_INPUTS:
            if not pattern.search(first[1]):
                found.append(f"{name} cell {first[0]}: the first code cell must define {pattern.pattern!r} "
                             "(docs/colab.md section 1: the smoke runner passes both through the environment)")
        if not any(IMPORT_LINE.search(source) for _, source in code):
            found.append(f"{name}: no cell does `import ffpa_attn`")
        if "ffpa-acceptance.json" not in code[-1][1]:
            found.append(f"{name} cell {code[-1][0]}: the last code cell must write ffpa-acceptance.json")
    return found


def clear(path: Path) -> bool:
    nb = read(path)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        for key in RUN_METADATA:
            cell.get("metadata", {}).pop(key, None)
    text = nbformat.writes(nb) + "\n"
    if path.read_text() == text:
        return False
    path.write_text(text)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="append", choices=("hygiene", "contract"),
                        help="which checks to run (repeatable; default both)")
    parser.add_argument("--clear", action="store_true", help="strip outputs and run metadata in place, then stop")
    parser.add_argument("--notebooks-dir", type=Path, default=REPO / "notebooks")
    parser.add_argument("--package-dir", type=Path, default=REPO / "python",
                        help="directory holding the ffpa_attn package whose deprecation registry is used")
    args = parser.parse_args(argv)
    present = sorted(p.name for p in args.notebooks_dir.glob("*.ipynb"))
    if args.clear:
        for name in present:
            print(f"{'cleared' if clear(args.notebooks_dir / name) else 'already clean'}: {name}")
        return 0
    checks = args.check or ["hygiene", "contract"]

    find_deprecated_uses = None
    if "hygiene" in checks:
        sys.path.insert(0, str(args.package_dir.resolve()))
        from deprecated_uses import find_deprecated_uses  # beside this file

    problems = []
    if tuple(present) != EXPECTED:
        problems.append(f"{args.notebooks_dir} holds {present}, expected exactly {list(EXPECTED)}")
    for name in present:
        try:
            nb = read(args.notebooks_dir / name)
        except Exception as exc:  # bad JSON and schema errors come as several types
            problems.append(f"{name}: not valid nbformat: {type(exc).__name__}: {exc}")
            continue
        if "hygiene" in checks:
            problems += hygiene_problems(name, nb, find_deprecated_uses)
        if "contract" in checks:
            problems += contract_problems(name, nb)
    for problem in problems:
        print(f"FAIL: {problem}")
    if problems:
        if "hygiene" in checks:
            print("to strip outputs and execution counts: python ctest/notebooks/check_committed.py --clear")
        return 1
    print(f"notebooks pass {' and '.join(checks)}: {', '.join(present)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
