#!/usr/bin/env python3
"""The committed notebooks are clean: valid nbformat, no outputs, no execution counts,
no execution metadata, no deprecated API names (spec/notebooks.md section 1).

  check_committed.py [--notebooks-dir notebooks] [--package-dir python]

The deprecated names come from ffpa_attn.deprecations in --package-dir (the source
tree's package by default), never from a list kept here. Exit 1 naming every problem.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
EXPECTED = ("colab_quickstart.ipynb", "head_dim_sweep.ipynb", "quickstart.ipynb")
# What Jupyter/nbclient write into cell metadata when a cell runs.
RUN_METADATA = ("execution", "ExecuteTime", "collapsed", "scrolled")


def problems_in(path: Path, find_deprecated_uses) -> list[str]:
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # bad JSON and schema errors come as several types
        return [f"{path.name}: not valid nbformat: {type(exc).__name__}: {exc}"]
    found = []
    for index, cell in enumerate(nb.cells):
        where = f"{path.name} cell {index}"
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks-dir", type=Path, default=REPO / "notebooks")
    parser.add_argument("--package-dir", type=Path, default=REPO / "python",
                        help="directory holding the ffpa_attn package whose deprecation registry is used")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(args.package_dir.resolve()))
    from ffpa_attn.deprecations import find_deprecated_uses

    problems = []
    present = sorted(p.name for p in args.notebooks_dir.glob("*.ipynb"))
    if tuple(present) != EXPECTED:
        problems.append(f"{args.notebooks_dir} holds {present}, expected exactly {list(EXPECTED)}")
    for name in present:
        problems += problems_in(args.notebooks_dir / name, find_deprecated_uses)
    for problem in problems:
        print(f"FAIL: {problem}")
    if problems:
        print("clear outputs before committing: run `python notebooks/_generate.py` "
              "(or Jupyter's Clear All Outputs and carry the edit into _generate.py)")
        return 1
    print(f"notebooks clean: {len(present)} notebooks, no outputs, no execution counts, no deprecated names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
