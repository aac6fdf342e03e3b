"""Regenerate core/src/spdx_ids.inc from packaging's SPDX license and exception lists.

PEP 639's License-Expression is read by packaging (twine, PyPI, packaging.metadata)
against the SPDX lists packaging carries; the engine carries the same lists as data,
lower-cased, so its reading of an expression is packaging's (index/tests/test_pep_vs_packaging.py
holds the two to the same answers).

    .venv/bin/python index/tools/spdx_table.py > index/core/src/spdx_ids.inc
"""
import importlib.metadata

from packaging.licenses import _spdx

print(f"// Auto-generated from packaging {importlib.metadata.version('packaging')} (SPDX list "
      f"{_spdx.VERSION}) by index/tools/spdx_table.py, do not edit.")
print("// Lower-case SPDX license identifiers, then exception identifiers, each sorted.")
print("constexpr const char* kSpdxLicenses[] = {")
for key in sorted(_spdx.LICENSES):
    print(f'    "{key}",')
print("};")
print("constexpr const char* kSpdxExceptions[] = {")
for key in sorted(_spdx.EXCEPTIONS):
    print(f'    "{key}",')
print("};")
