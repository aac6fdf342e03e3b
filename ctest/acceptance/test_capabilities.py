"""The acceptance capability check's expectation (test_install.expected_capabilities)
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
from test_install import capability_problems, expected_capabilities  # noqa: E402

RELEASE = (["89", "120f"], ["fp16", "bf16"])


def test_release_set_expects_true_true_true() -> None:
    release = expected_capabilities(*RELEASE)
    assert release["tma"] is True and release["cute_tma"] is True and release["cute"] is True, release
    assert release["impls"] == ["cute", "cute_tma", "mma", "simt", "tma"], release["impls"]
    assert release["tma_archs"] == ["120f"]
    assert release["f16_acc"] is True  # fp16 in the dtypes


def test_sm89_only_has_cute_without_cute_tma() -> None:
    ada = expected_capabilities(["89"], ["bf16"])
    assert ada["tma"] is False and ada["cute_tma"] is False and ada["cute"] is True, ada
    assert ada["impls"] == ["cute", "mma", "simt"] and ada["f16_acc"] is False, ada["impls"]


def test_hopper_build_has_cute_tma() -> None:
    hopper = expected_capabilities(["90a"], ["fp16"])
    assert hopper["cute_tma"] is True and hopper["tma_archs"] == ["90a"], hopper


def test_wrong_flags_are_reported() -> None:
    good = {**expected_capabilities(*RELEASE), "fwd": True}
    assert capability_problems(good, *RELEASE) == []
    # The failure this check exists for: the CUDA wheel printing True True False.
    no_cute_tma = {**good, "cute_tma": False, "impls": ["cute", "mma", "simt", "tma"]}
    probs = capability_problems(no_cute_tma, *RELEASE)
    assert any(p.startswith("cute_tma = False") for p in probs), probs
    assert any(p.startswith("impls = ") for p in probs), probs
    assert capability_problems({**good, "cute": False}, *RELEASE) != []
    ada = expected_capabilities(["89"], ["bf16"])
    assert capability_problems({**ada, "cute_tma": True}, ["89"], ["bf16"]) != []
