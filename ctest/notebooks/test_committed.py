"""The committed notebooks (check_committed.py beside this file, also the tool that
strips outputs: `python ctest/notebooks/check_committed.py --clear`): hygiene (valid
nbformat, no outputs or execution counts, no deprecated names) and the contract of
what the smoke passes them (docs/colab.md)."""

import check_committed
import pytest


@pytest.mark.parametrize("check", ["hygiene", "contract"])
def test_committed_notebooks(check):
    assert check_committed.main(["--check", check]) == 0, f"the notebooks fail the {check} check (printed above)"
