#!/usr/bin/env python3
# Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
"""The engine's PEP 440 and PEP 508 checks against packaging's: verify-wheel refuses METADATA whose Requires-Python or Requires-Dist
packaging would not parse, and compares versions as packaging's Version does. Each
string below is judged by both; any disagreement fails. (One deliberate difference
is built into the oracle: an empty specifier set is refused, since an empty
Requires-Python says nothing.)"""

from __future__ import annotations

import subprocess
import sys

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

SPECS = [">=3.10", ">=3.10,<4", "==3.10.*", "!=3.11.*, >=3.9", "~=3.10", "===foo", ">= 3.10", "==1.0+local",
         ">=3.10.*", "~=3", "3.10", ">=", ">=3.10,", ",>=1", "<1.0+local", "=>3.10", ">=3.10 foo", "==1.0.*.*",
         "==1.*", "~=1.0.*", ">=1.0a1", ">=1.0.post1", "== 1.0", ">=v1.0", "==1.0+abc.*", "~=1.0+1", ">=1!2.0",
         "==1.0.dev1.*", "<=1.0 ,>0", " >=1", ">=1 ", "!=1.0a1.*", "===1.0 2", "~= 1.0", ">1.0.0-rc1", "==1.0-1",
         ">=1.0_post1", ">=3.10\udcff", ">=3.1O", "<4;", "(>=1)", ">=1.0.0.0.0.0", "!=1.0.*.0"]
REQS = ["numpy", "numpy>=1.21", "numpy (>=1.21,<3)", "torch[cuda,extra]>=2.1", "numpy; python_version >= '3.10'",
        "pkg @ https://example.invalid/p.whl ; sys_platform == 'linux'",
        "a; (os_name == 'posix' or extra == 'x') and platform_machine != 'aarch64'", "a; 'linux' in sys_platform",
        "a; python_version not in '3.8, 3.9'", "-numpy", "numpy>=", "numpy[", "numpy; python_versio < '3'",
        "numpy; python_version", "numpy; (python_version < '3'", "pkg @ https://x.invalid/p.whl; extra == 'a'",
        "numpy >=1 junk", "numpy; python_version < '3", "numpy[]", "numpy[ a , b ]", "numpy ; python_version<'3'",
        "numpy;python_version<'3'", "a;os.name=='posix'", "a; extra=='x' or extra=='y'", "a; python_version < \"3\"",
        "a[b]@ http://x/y", "a>=1,<2;python_version>'3'", "a ==1.0", "a (==1.0); python_version>'3'",
        "a; platform.machine == 'x'", "a;python_version<'3' and", "a @ file:///x", "a @ x", "a; dependency_groups == 'x'",
        "a.b-c_d", "a; implementation_version >= '3'", "a==1.0+local", "a; python_version <= '3' or(os_name == 'x')",
        "a; python_version < '3' andos_name=='x'", "nvidia-cuda-runtime-cu13>=13.0; sys_platform == 'linux'", "a b", ""]
SAME = ["1.0|1.0.0", "v1.0.0|1.0.0", "1.0+cu13|1.0.0+cu13", "1.0.1|1.0", "1!1.0|1.0", "1.0a1|1.0.0a1",
        "1.0.post1|1.0.0.post1", "1.0.dev1|1.0.0.dev1", "1.0.0.0.0|1", "10|1.0", "1.0+1.0|1.0+1", "0|0.0",
        "01.0.0+cu13|1.0.0+CU13", "1.0rc1|1.0c1", "1.0-1|1.0.post1", "2.0.0+cu13|2.0.0+cu12", "1.0+cu13|1.0"]
CANONICAL = ["01.0.0", "v1.0.0", "1.0.0+CU13", "1.0-rc.1", "1!0.1", "0!1.0", "1.0.0.post0.dev0", "1.0-1", "1.0.0a",
             "1.0+ubuntu-1", "1.0+01.a", "1.0_post_1", " 1.0 ", "1.0.", "1..0", "1.0+", "a1.0", "1.0alpha2", "1.0c3",
             "1.0preview", "1.0r", "1.0DEV"]


def probe(exe: str, kind: str, items: list[str]) -> list[str]:
    data = "".join(i + "\n" for i in items).encode("utf-8", "surrogateescape")
    out = subprocess.run([exe, kind], input=data, capture_output=True, check=True).stdout.decode()
    return out.splitlines()


def packaging_spec(s: str) -> bool:
    try:
        SpecifierSet(s)
    except InvalidSpecifier:
        return False
    return s.strip(" ,") != ""  # the engine refuses an empty Requires-Python


def packaging_req(s: str) -> bool:
    try:
        Requirement(s)
    except InvalidRequirement:
        return False
    return True


def packaging_canonical(s: str) -> str:
    try:
        return str(Version(s))
    except InvalidVersion:
        return "!"


def test_pep_vs_packaging(ffpa_env):
    diffs = []
    for kind, items, oracle in [("spec", SPECS, lambda s: "1" if packaging_spec(s) else "0"),
                                ("req", REQS, lambda s: "1" if packaging_req(s) else "0"),
                                ("same", SAME, lambda s: "1" if Version(s.split("|")[0]) == Version(s.split("|")[1]) else "0"),
                                ("canonical", CANONICAL, packaging_canonical)]:
        for s, ours in zip(items, probe(ffpa_env("PEP_PROBE"), kind, items), strict=True):
            theirs = oracle(s)
            if ours != theirs:
                diffs.append(f"{kind} {s!r}: engine {ours}, packaging {theirs}")
    total = len(SPECS) + len(REQS) + len(SAME) + len(CANONICAL)
    print(f"{total} strings judged by the engine and by packaging; {len(diffs)} disagreement(s)")
    assert not diffs, "\n".join(" - " + d for d in diffs)
