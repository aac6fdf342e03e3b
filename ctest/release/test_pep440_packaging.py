"""The shared PEP 440 table (ctest/data/pep440-cases.json) is what pip reads.

packaging.version is pip's own parser: each input parses exactly when the table gives a
canonical form, and str(Version(input)) is that form. The CMake check and the engine
are tested against the same table, so all three agree.
"""

import json
from pathlib import Path

import pytest
from packaging.version import InvalidVersion, Version

TABLE = json.loads((Path(__file__).resolve().parents[1] / "data" / "pep440-cases.json").read_text())


@pytest.mark.parametrize("case", TABLE["cases"], ids=lambda c: repr(c["input"]))
def test_table_is_what_packaging_reads(case):
    try:
        got = str(Version(case["input"]))
    except InvalidVersion:
        got = None
    assert got == case["canonical"], f"packaging says {got!r}, the table says {case['canonical']!r}"


def test_table_has_cases():
    assert len(TABLE["cases"]) > 40
