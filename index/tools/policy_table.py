"""Regenerate core/src/manylinux_policy.inc from auditwheel's manylinux policy.

The engine does not run auditwheel; it carries the policy facts as data. Each
symbol version and each whitelisted library is recorded with the lowest
manylinux_2_Y that allows it (the policies are cumulative, which auditwheel
itself validates), so a lookup answers "which Y does this requirement force".

    .venv/bin/python index/tools/policy_table.py > index/core/src/manylinux_policy.inc
"""
import json
import pathlib
import sys

import importlib.metadata

import auditwheel

src = pathlib.Path(auditwheel.__file__).parent / "policy" / "manylinux-policy.json"
policies = [p for p in json.loads(src.read_text()) if p["name"] != "linux"]
policies.sort(key=lambda p: -p["priority"])  # oldest glibc first


def glibc_minor(p):
    return int(p["name"].split("_")[2])


versions, libs, blacklist = {}, {}, {}
for p in policies:
    y = glibc_minor(p)
    for prefix, vs in p["symbol_versions"]["x86_64"].items():
        versions.setdefault(prefix, {})
        for v in vs:
            versions[prefix].setdefault(v, y)
    for lib in p["lib_whitelist"]:
        libs.setdefault(lib, y)
    for lib, syms in p.get("blacklist", {}).items():
        for s in syms:
            blacklist.setdefault((lib, s), set()).add(y)

ys = [glibc_minor(p) for p in policies]
out = sys.stdout
out.write(f"// auto-generated from auditwheel {importlib.metadata.version("auditwheel")} policy/manylinux-policy.json\n")
out.write("// by index/tools/policy_table.py, do not edit.\n")
out.write("// clang-format off\n")
out.write("static constexpr int kPolicyGlibcMinors[] = {" + ", ".join(map(str, ys)) + "};\n")
out.write("static constexpr PolicyVersion kPolicyVersions[] = {\n")
for prefix in sorted(versions):
    for v, y in sorted(versions[prefix].items(), key=lambda kv: (kv[1], kv[0])):
        out.write(f'  {{"{prefix}", "{v}", {y}}},\n')
out.write("};\n")
out.write("static constexpr PolicyLib kPolicyLibs[] = {\n")
for lib, y in sorted(libs.items()):
    out.write(f'  {{"{lib}", {y}}},\n')
out.write("};\n")
out.write("// (library, symbol, Y): referencing it is refused by manylinux_2_Y and older.\n")
out.write("static constexpr PolicyBlacklist kPolicyBlacklist[] = {\n")
for (lib, s), yset in sorted(blacklist.items()):
    last = max(yset)
    if yset != {y for y in ys if y <= last}:
        sys.exit(f"blacklist entry {lib}:{s} is not refused by a prefix of the policies; extend the table format")
    out.write(f'  {{"{lib}", "{s}", {last}}},\n')
out.write("};\n")
