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
from test_install import capability_problems, expected_capabilities, install_problems  # noqa: E402

RELEASE = (["89", "120f"], ["fp16", "bf16"])


def test_release_set_expects_true_true_true() -> None:
    release = expected_capabilities(*RELEASE)
    assert release["tma"] is True and release["cute_tma"] is True and release["cute"] is True, release
    assert release["impls"] == ["cute", "cute_fp8", "cute_tma", "cute_tma_fp4", "cute_tma_fp8", "fp4", "fp8", "mma",
                                "simt", "tma"], release["impls"]
    # FP8 on sm_89 (cp.async) and the sm_120 family (TMA), NVFP4 on 120f.
    assert release["fp8"] is True and release["fp4"] is True
    assert release["tma_archs"] == ["120f"]
    assert release["f16_acc"] is True  # fp16 in the dtypes


def test_sm89_only_has_cute_without_cute_tma() -> None:
    ada = expected_capabilities(["89"], ["bf16"])
    assert ada["tma"] is False and ada["cute_tma"] is False and ada["cute"] is True, ada
    assert ada["impls"] == ["cute", "cute_fp8", "fp8", "mma", "simt"] and ada["f16_acc"] is False, ada["impls"]
    assert ada["fp8"] is True and ada["fp4"] is False  # no NVFP4 below the sm_120 family


def test_hopper_build_has_cute_tma() -> None:
    hopper = expected_capabilities(["90a"], ["fp16"])
    assert hopper["cute_tma"] is True and hopper["tma_archs"] == ["90a"], hopper
    assert "cute_fp8" in hopper["impls"] and "cute_tma_fp8" in hopper["impls"] and hopper["fp4"] is False


def test_plain_120_has_no_nvfp4() -> None:
    # ptxas refuses the block-scaled mma for plain sm_120: only 120f / 120a hold it.
    plain = expected_capabilities(["120"], ["fp16"])
    assert plain["fp4"] is False and "fp4" not in plain["impls"] and plain["fp8"] is True
    assert "cute_fp8" not in plain["impls"]  # the sm_120 family's FP8 kernel is TMA-fed


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
    # A release wheel without its NVFP4 kernels is reported.
    assert any(p.startswith("fp4 = False") for p in capability_problems({**good, "fp4": False}, *RELEASE))


def test_pure_wheel_with_any_cuda_flag_is_reported() -> None:
    # A pure wheel has no extension: every CUDA flag False and no impls, FP8 / NVFP4
    # included.
    venv = Path("/venv")
    w = {"version": "1.0"}
    manifest = {"source_commit": "c" * 40}
    clean = {"version": "1.0", "file": "/venv/lib/ffpa_attn/__init__.py", "build_info": {"source_commit": "c" * 40},
             "reference_max_err": 0.0, "fwd": False, "tma": False, "cute_tma": False, "cute": False, "f16_acc": False,
             "fp8": False, "fp4": False, "tma_archs": [], "impls": [], "ext": None}
    assert install_problems(clean, "pure", w, manifest, venv) == []
    for flag in ("fwd", "tma", "cute_tma", "cute", "f16_acc", "fp8", "fp4", "bwd"):
        probs = install_problems({**clean, flag: True}, "pure", w, manifest, venv)
        assert any(p.startswith("pure wheel reports CUDA flags") and f"{flag}=True" in p for p in probs), (flag, probs)
