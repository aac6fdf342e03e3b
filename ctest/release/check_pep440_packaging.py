"""The shared PEP 440 table (ctest/data/pep440-cases.json) is what pip reads.

packaging.version is pip's own parser: each input parses exactly when the table gives a
canonical form, and str(Version(input)) is that form. The CMake check and the engine
are tested against the same table, so all three agree.
"""

import json
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

table = json.loads(Path(sys.argv[1]).read_text())
bad = []
for case in table["cases"]:
    try:
        got = str(Version(case["input"]))
    except InvalidVersion:
        got = None
    if got != case["canonical"]:
        bad.append(f"{case['input']!r}: packaging says {got!r}, the table says {case['canonical']!r}")
if bad:
    sys.exit("pep440 table disagrees with packaging:\n  " + "\n  ".join(bad))
print(f"pep440 table: {len(table['cases'])} cases agree with packaging")
