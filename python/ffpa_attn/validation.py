"""Argument checks of the host paths (NumPy, torch math) and the kernels' facts.

A call that reaches the CUDA kernels is judged by the extension's own validation
(``_C.validate_forward``, asked by ``launch.check``): its messages are not restated here.

No imports from the rest of the package besides the errors: ``interface`` and
``torch_math`` both stand on this module, so the dependency runs one way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from .errors import ShapeError, UnsupportedFeatureError

__all__ = ["ARCH_RULES", "check_dropout", "MIN_SM", "arch_has", "F16_ACC_IMPLS", "IMPL_FACTS", "LOWP_IMPLS", "SOURCE_TREE_PROBLEM",
           "check_4d_shapes", "impl_has_code", "resolve_scale"]


# What a source tree lacks: the generated build-info module, which carries the kernels'
# facts (cmake/kernel-facts.json) and the build's own. Importing works there (the notebook
# checks read the deprecation registry from it); choosing a kernel or a tolerance does not.
SOURCE_TREE_PROBLEM = (
    "ffpa_attn runs from a source tree without its generated _build_info.py, which carries the kernels' "
    "facts (cmake/kernel-facts.json: impls, tolerances): build the package (cmake --workflow --preset dev) "
    "and import it from build/dev/python, or install a wheel")


def _impl_facts() -> dict[str, tuple[tuple[str, ...], tuple[str, ...], str | None]]:
    """The C API's impls in its order (cmake/kernel-facts.json, generated into the build-info
    module of both wheels): name -> (accumulators, arch features needed, precision); empty in
    a source tree (SOURCE_TREE_PROBLEM)."""
    try:
        from ._build_info import IMPLS as facts
    except ImportError:
        return {}
    return dict(facts)


IMPL_FACTS = _impl_facts()


def _arch_rules() -> dict[str, int]:
    """The arch rules (cmake/kernel-facts.json's "arch_rules", through the build-info module):
    min_sm (the lowest arch the kernels support), tma_min_sm, fp8_min_sm, sm120_family;
    empty in a source tree."""
    try:
        from . import _build_info as info  # type: ignore[attr-defined]
    except ImportError:
        return {}
    return {"min_sm": info.MIN_SM, "tma_min_sm": info.TMA_MIN_SM, "fp8_min_sm": info.FP8_MIN_SM,
            "sm120_family": info.SM120_FAMILY}


ARCH_RULES = _arch_rules()
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
    if hkv <= 0 or hq % hkv != 0:
        raise ShapeError(
            f"the number of query heads ({hq}) must be a multiple of the number of kv heads "
            f"({hkv}) for grouped-query attention"
        )
    if min(b, hq, nq, nkv, d) <= 0:
        raise ShapeError(f"every dimension must be positive, got q {shapes['q']} and k/v {shapes['k']}")
    return b, hq, hkv, nq, nkv, d


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
