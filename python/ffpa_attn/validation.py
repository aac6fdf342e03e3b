"""Argument checks of the host paths (NumPy, torch math) and the kernels' facts.

A call that reaches the CUDA kernels is judged by the extension's own validation
(``_C.validate_forward``, asked by ``launch.check``): its messages are not restated here.

No imports from the rest of the package besides the errors and the build's facts
(``build_facts``): ``interface`` and ``torch_math`` both stand on this module, so the
dependency runs one way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from . import build_facts
from .build_facts import SOURCE_TREE_PROBLEM
from .errors import FFPAError, ShapeError, UnsupportedFeatureError, UnsupportedImplError

__all__ = ["ACCUMS", "ARCH_RULES", "BACKWARDS", "check_dropout", "MIN_SM", "arch_has", "F16_ACC_IMPLS", "HOST_FP16_ACCUM",
           "IMPL_FACTS", "IMPLS", "LOWP_IMPLS", "check_4d_shapes", "check_choices", "check_enable_gqa", "check_gqa_heads", "impl_has_code", "resolve_scale"]


# The C API's impls in its order: name -> (accumulators, arch features needed, precision),
# and the arch rules (min_sm, tma_min_sm, fp8_min_sm, sm120_family), both of
# cmake/kernel-facts.json as the build carries them (build_facts); empty in a source tree
# (SOURCE_TREE_PROBLEM).
IMPL_FACTS = build_facts.impls()
ARCH_RULES = build_facts.arch_rules()
# The lowest arch the kernels support (cp.async, ldmatrix, bf16 mma.sync); None in a source
# tree, which has neither the kernels nor the sources of a first-use build.
MIN_SM: int | None = ARCH_RULES.get("min_sm")


def arch_has(feature: str, token: str, rules: Mapping[str, int] | None = None) -> bool:
    """Whether code for an arch token ("89", "90a", "120f") has an arch feature of
    cmake/kernel-facts.json (tma, fp8, cp_async_heavy, nvfp4): the rules of the generated
    ffpa/arch_rules.h and of cmake/FfpaKernelFacts.cmake's ffpa_arch_has, over the same
    thresholds. ``rules``: the "arch_rules" object to judge by (default: the build's,
    ARCH_RULES; the test scripts pass those of a source tree's cmake/kernel-facts.json)."""
    m = re.fullmatch(r"(\d+)([af]?)", token)
    if m is None:
        raise ValueError(f"{token!r} is not an arch token such as 89, 90a or 120f")
    rules = ARCH_RULES if rules is None else rules
    if not rules:
        raise RuntimeError(SOURCE_TREE_PROBLEM)
    sm, specific = int(m[1]), bool(m[2])
    if feature == "tma":
        return sm >= rules["tma_min_sm"]
    if feature == "fp8":
        return sm >= rules["fp8_min_sm"]
    if feature == "cp_async_heavy":
        return sm < rules["sm120_family"]
    if feature == "nvfp4":
        return sm >= rules["sm120_family"] and specific
    raise ValueError(f"{feature!r} is not an arch feature (tma, fp8, cp_async_heavy, nvfp4)")


def impl_has_code(impl: str, token: str, needs: Sequence[str] | None = None,
                  rules: Mapping[str, int] | None = None) -> bool:
    """Whether the kernel of ``impl`` has real code (not a trap stub) for an arch token: every
    arch feature its "needs" lists is there (cmake/FfpaKernelFacts.cmake's ffpa_impl_has_code).
    ``needs`` / ``rules`` default to the build's facts (IMPL_FACTS, ARCH_RULES)."""
    if needs is None:
        if impl not in IMPL_FACTS:
            raise ValueError(f"no arch rule for impl {impl!r}" if IMPL_FACTS else SOURCE_TREE_PROBLEM)
        needs = IMPL_FACTS[impl][1]
    return all(arch_has(feature, token, rules) for feature in needs)
# The low-precision impls (a precision of their own) and the precision of their Q K^T:
# fp16/bf16 in, the same dtype out, P V on FP8 (e4m3) in both, fp32 accumulation only.
# "fp8" is the alias the library resolves to cute_fp8 or cute_tma_fp8 for the device,
# "fp4" the one NVFP4 kernel. impl="auto" never picks one: they trade accuracy for speed
# (docs/install.md, "Low-precision paths").
LOWP_IMPLS: dict[str, str] = {name: precision for name, (_, _, precision) in IMPL_FACTS.items() if precision}
# The impls that take accum="fp16": the fp16/bf16 tensor-core kernels (auto when it picks one);
# the extension refuses accum="fp16" with any other.
F16_ACC_IMPLS = tuple(name for name, (accums, _, _) in IMPL_FACTS.items() if "fp16" in accums)


# The kernel choices, one entry each, in the order of the C API's Impl enum
# (cmake/kernel-facts.json, the spellings of ffpa::impl_name too; the extension's validation
# says which the build has: launch.check). The low-precision paths (LOWP_IMPLS) are never picked by "auto".
IMPLS = tuple(IMPL_FACTS)
# Accumulator precision of the fp16/bf16 tensor-core kernels (mma, tma, cute, cute_tma; auto
# when it picks one); the SIMT and the low-precision kernels accumulate in fp32 only.
ACCUMS = ("fp32", "fp16")
# How the gradient is computed (ffpa_attn.torch_ops): the FFPA backward kernels, torch's
# fused attention backward from the forward's O and LSE where it takes the input, the
# same math in torch ops a block of rows at a time, or the older full recompute.
BACKWARDS = ("auto", "ffpa", "torch", "fused", "lse", "recompute")


def check_choices(impl: str, accum: str, backward: str) -> None:
    # The spellings, before any path (the host ignores impl but not a misspelling). Which
    # impl takes which accumulator, dtype and build is the extension's to say
    # (launch.check asks it); the host refuses accum="fp16" whatever the impl.
    if not IMPLS:
        raise FFPAError(SOURCE_TREE_PROBLEM)
    if impl not in IMPLS:
        raise UnsupportedImplError(f"impl must be one of {list(IMPLS)}, got {impl!r}")
    if accum not in ACCUMS:
        raise UnsupportedImplError(
            f"accum must be one of {list(ACCUMS)}, got {accum!r} (the accumulator of the CUDA tensor-core kernels)"
        )
    if backward not in BACKWARDS:
        raise UnsupportedImplError(f"backward must be one of {list(BACKWARDS)}, got {backward!r}")


HOST_FP16_ACCUM = (
    "accum='fp16' selects the fp16-accumulating CUDA kernels; the host path (NumPy reference, "
    "torch CPU math) always accumulates in fp32 (fp64 for fp64 inputs). Pass CUDA arrays, or "
    "drop accum for the host"
)


def check_4d_shapes(shapes: dict[str, tuple[int, ...]]) -> tuple[int, int, int, int, int, int]:
    for name, shape in shapes.items():
        if len(shape) != 4:
            raise ShapeError(
                f"{name} must be 4-D [B, H, N, D], got shape {shape}; "
                "transpose [B, N, H, D] inputs with .transpose(1, 2) (torch) / .transpose(0, 2, 1, 3)"
            )
    b, hq, nq, d = shapes["q"]
    bk, hkv, nkv, dk = shapes["k"]
    if shapes["k"] != shapes["v"]:
        raise ShapeError(f"k and v must have the same shape, got {shapes['k']} and {shapes['v']}")
    if bk != b:
        raise ShapeError(f"q and k/v must have the same batch size, got {b} and {bk}")
    if dk != d:
        raise ShapeError(f"q and k/v must have the same head dim, got {d} and {dk}")
    check_gqa_heads(hq, hkv)
    if min(b, hq, nq, nkv, d) <= 0:
        raise ShapeError(f"every dimension must be positive, got q {shapes['q']} and k/v {shapes['k']}")
    return b, hq, hkv, nq, nkv, d


def check_gqa_heads(hq: int, hkv: int) -> None:
    """Grouped-query attention's rule, for every Python path (the NumPy reference, the host
    and torch checks, the packed call): Hq a multiple of Hkv (Hkv > 0). The kernels' own
    check is the extension's (launch.check)."""
    if hkv <= 0 or hq % hkv != 0:
        raise ShapeError(
            f"the number of query heads ({hq}) must be a multiple of the number of kv heads "
            f"({hkv}) for grouped-query attention"
        )


def check_enable_gqa(hq: int, hkv: int, enable_gqa: bool) -> None:
    """SDPA's enable_gqa rule, for Hq a multiple of Hkv: without enable_gqa only one kv head
    is broadcast to every query head; more kv heads than one (and fewer than Hq) need it."""
    if hq != hkv and not enable_gqa and hkv > 1 and hq % hkv == 0:
        raise ShapeError(
            f"q has {hq} heads and k/v {hkv}: grouped-query attention needs enable_gqa=True (as SDPA's "
            "signature has it; without it only one kv head is broadcast to every query head)"
        )


def resolve_scale(scale: float | None, d: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d)
    value = float(scale)
    if not math.isfinite(value):
        raise ValueError(f"scale must be a finite number, got {scale!r}")
    return value


def check_dropout(dropout_p: object) -> None:
    """``dropout_p`` as SDPA means it: a number in ``[0, 1]``; NaN, inf, anything outside
    that range or not a number is our error here rather than torch's later (or none)."""
    # A number, or a scalar that converts like one (numpy, a 0-d tensor); never a string,
    # which float() would parse.
    value, why = math.nan, f"not a number ({type(dropout_p).__name__})"
    if hasattr(dropout_p, "__float__"):
        try:
            value = float(dropout_p)  # type: ignore[arg-type]
            why = "NaN" if math.isnan(value) else "outside [0, 1]"
        except (TypeError, ValueError, RuntimeError):
            pass
    if not 0.0 <= value <= 1.0:
        raise UnsupportedFeatureError(
            f"dropout_p must be a probability in [0, 1] (0.0 for no dropout, as SDPA takes it), got {dropout_p!r}: "
            f"{why}")
