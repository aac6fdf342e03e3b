"""The one rule that turns an all-skipped pytest run into CTest's skip.

A run whose every test was skipped (a GPU suite on a machine without a GPU) exits with
$FFPA_SKIP_RETURN_CODE, the code the CTest test names as its SKIP_RETURN_CODE, so CTest
reports it as not run: a skipped test never counts as passed. Both pytest entry points
call it from their pytest_sessionfinish: ctest/pytest_ffpa.py (the ctest/ modules) and
python/tests/conftest.py (the package's suite, also run by ctest/gpu/device_check.sh).
"""

from __future__ import annotations

import os

import pytest


def all_skipped_exit(session: pytest.Session, exitstatus: int) -> None:
    code = os.environ.get("FFPA_SKIP_RETURN_CODE")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter is not None else {}
    if code and exitstatus == pytest.ExitCode.OK and stats.get("skipped") and not stats.get("passed"):
        session.exitstatus = int(code)
