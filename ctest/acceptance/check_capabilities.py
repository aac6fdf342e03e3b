"""The acceptance capability check's expectation (check_install.expected_capabilities)
against the compiled sets it must tell apart, and its problem list against wheels
that report the wrong flags. CTest: acceptance.capabilities.

The release's compiled set (archs 89;120f, fp16 and bf16) must expect the runbook's
`CUDA_FWD_AVAILABLE, CUDA_TMA_AVAILABLE, CUDA_CUTE_TMA_AVAILABLE` = True True True
and COMPILED_IMPLS with cute and cute_tma; an sm_89-only build must expect cute_tma
False; a wheel that says otherwise must be reported.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_install import capability_problems, expected_capabilities  # noqa: E402

failures: list[str] = []


def expect(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


release = expected_capabilities(["89", "120f"], ["fp16", "bf16"])
expect(release["tma"] is True and release["cute_tma"] is True and release["cute"] is True,
       f"release set 89;120f: tma, cute and cute_tma true ({release})")
expect(release["impls"] == ["cute", "cute_tma", "mma", "simt", "tma"], f"release impls {release['impls']}")
expect(release["tma_archs"] == ["120f"], f"release tma_archs {release['tma_archs']}")
expect(release["f16_acc"] is True, "fp16 in the dtypes: f16_acc true")

ada = expected_capabilities(["89"], ["bf16"])
expect(ada["tma"] is False and ada["cute_tma"] is False and ada["cute"] is True,
       f"sm_89 only: cute without cute_tma ({ada})")
expect(ada["impls"] == ["cute", "mma", "simt"] and ada["f16_acc"] is False, f"sm_89 bf16 impls {ada['impls']}")
hopper = expected_capabilities(["90a"], ["fp16"])
expect(hopper["cute_tma"] is True and hopper["tma_archs"] == ["90a"], f"90a: cute_tma true ({hopper})")

good = {**release, "fwd": True}
expect(capability_problems(good, ["89", "120f"], ["fp16", "bf16"]) == [], "a wheel reporting the release set passes")
# The failure this check exists for: the CUDA wheel printing True True False.
no_cute_tma = {**good, "cute_tma": False, "impls": ["cute", "mma", "simt", "tma"]}
probs = capability_problems(no_cute_tma, ["89", "120f"], ["fp16", "bf16"])
expect(any(p.startswith("cute_tma = False") for p in probs) and any(p.startswith("impls = ") for p in probs),
       f"True True False is reported: {probs}")
expect(capability_problems({**good, "cute": False}, ["89", "120f"], ["fp16", "bf16"]) != [],
       "a wheel without the CuTe kernels is reported")
expect(capability_problems({**ada, "cute_tma": True}, ["89"], ["bf16"]) != [],
       "cute_tma claimed without TMA code is reported")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
