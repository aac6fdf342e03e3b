"""ffpa-attn: large-head-dim (up to 1024) attention kernels for CUDA, with a NumPy reference.

Public API: :func:`ffpa_attn_func` (SDPA's signature: it can replace
``torch.nn.functional.scaled_dot_product_attention``), :func:`ffpa_attn_varlen_func`
(packed variable-length sequences, flash-attention's varlen call; needs torch, loaded on
first access), :func:`last_kernel`, the
:class:`FFPAError` hierarchy and the warnings, the :mod:`~ffpa_attn.reference` and
:mod:`~ffpa_attn.cuda` modules, :func:`build_info` and ``__version__``.
``ffpa_attn.torch_ops`` (the ``ffpa_attn::attention`` torch op) is loaded on the first
torch tensor or on first access and needs torch; importing ``ffpa_attn`` itself never
imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import cuda, errors, reference
from .errors import (
    DeviceError,
    ExtensionNotAvailableError,
    FFPADeprecationWarning,
    FFPAError,
    SDPAFallbackWarning,
    ShapeError,
    SlowPathWarning,
    UnsupportedArrayTypeError,
    UnsupportedDTypeError,
    UnsupportedFeatureError,
    UnsupportedHeadDimError,
    UnsupportedImplError,
    UnsupportedLayoutError,
)
from .interface import FALLBACK_REASONS, ffpa_attn_func, last_kernel
from .validation import SOURCE_TREE_PROBLEM

try:
    # Written by CMake at build time (VERSION, SOURCE_COMMIT, SOURCE_DIRTY, CHANNEL,
    # TOOLCHAIN, PROFILE); absent when running straight from the source tree.
    _build_info: Any = importlib.import_module(f"{__name__}._build_info")
except ImportError:
    _build_info = None

__version__: str = str(getattr(_build_info, "VERSION", "0+unknown"))

__all__ = [
    "__version__",
    "build_info",
    "tolerance",
    "cuda",
    "reference",
    "ffpa_attn_func",
    "ffpa_attn_varlen_func",
    "last_kernel",
    "FALLBACK_REASONS",
    *errors.__all__,
]

_BUILD_FIELDS = ("VERSION", "SOURCE_COMMIT", "SOURCE_DIRTY", "CHANNEL", "TOOLCHAIN", "PROFILE")


def tolerance(path: str) -> dict[str, float]:
    """The accuracy a path is held to, against the fp32 / fp64 reference on the same inputs.

    ``path``: ``"fp16"``, ``"bf16"``, ``"fp16_acc"`` (fp16 accumulation), ``"fp8"``,
    ``"fp4"``. Keys: ``rtol`` / ``atol`` (elementwise, ``|out - ref| <= atol + rtol
    |ref|``), ``lse`` (max LSE error), and for the low-precision paths ``min_cos``
    (cosine similarity), ``max_rel_l1`` (``sum |out - ref| / sum |ref|``) and
    ``max_gain_err`` (``|sum(out ref) / sum(ref^2) - 1|``); 0 where unused. The one table
    is cmake/kernel-facts.json; both wheels carry it (docs/install.md states it).
    """
    table = getattr(_build_info, "TOLERANCES", None)
    if table is None:
        raise FFPAError(SOURCE_TREE_PROBLEM)
    if path not in table:
        raise ValueError(f"no tolerance for {path!r}; the paths are {', '.join(table)}")
    return {key: float(value) for key, value in table[path].items()}


def build_info() -> dict[str, Any]:
    """How this installation was built, and what its extension contains.

    Keys: ``version``, ``source_commit``, ``source_dirty``, ``channel`` (None for the
    pure wheel), ``toolchain`` (cmake/gcc/nvcc versions), ``profile`` (None when the
    package runs from a source tree), then the extension's own ``build_info()`` keys
    (``head_dims``, ``dtypes``, ``archs``, ``fwd``, ``tma``, ``tma_archs``, ``f16_acc``,
    ``cute``, ``cute_tma``, ``fp8``, ``fp8_archs``, ``fp4``, ``fp4_archs``, ``cuda_runtime``,
    ``impls``; empty/False without it; ``auto_impl``,
    the rule ``impl="auto"`` follows in words, when the extension reports it; the
    kernel it picks on the current GPU is :func:`ffpa_attn.cuda.auto_impl`) and
    ``extension_available``, ``extension_path``, ``extension_import_error``.
    """
    info: dict[str, Any] = {field.lower(): getattr(_build_info, field, None) for field in _BUILD_FIELDS}
    info["version"] = __version__
    if isinstance(info["toolchain"], dict):
        info["toolchain"] = dict(info["toolchain"])
    info.update(
        {
            "head_dims": list(cuda.COMPILED_HEAD_DIMS),
            "dtypes": list(cuda.COMPILED_DTYPES),
            "archs": list(cuda.COMPILED_ARCHS),
            "fwd": cuda.CUDA_FWD_AVAILABLE,
            "tma": cuda.CUDA_TMA_AVAILABLE,
            "tma_archs": list(cuda.TMA_ARCHS),
            "f16_acc": cuda.F16_ACC_AVAILABLE,
            "cute": cuda.CUDA_CUTE_AVAILABLE,
            "cute_tma": cuda.CUDA_CUTE_TMA_AVAILABLE,
            "fp8": cuda.CUDA_FP8_AVAILABLE,
            "fp8_archs": list(cuda.FP8_ARCHS),
            "fp4": cuda.CUDA_FP4_AVAILABLE,
            "fp4_archs": list(cuda.FP4_ARCHS),
            "cuda_runtime": cuda.CUDA_RUNTIME,
            "impls": list(cuda.COMPILED_IMPLS),
        }
    )
    # Keys the extension reports beyond the documented ones are passed through.
    for key, value in cuda.extension_info().items():
        info.setdefault(key, value)
    table = getattr(_build_info, "TOLERANCES", None)
    if table is not None:
        info["tolerances"] = {path: dict(row) for path, row in table.items()}
    info["extension_available"] = cuda.extension() is not None
    info["extension_path"] = cuda.EXTENSION_PATH
    info["extension_import_error"] = cuda.EXTENSION_IMPORT_ERROR
    return info


def __getattr__(name: str) -> Any:
    # Lazy submodules: torch_ops/torch_math import torch, bench is for tools.
    if name in ("torch_ops", "torch_math", "torch_masks", "varlen", "integrations", "bench", "deprecations", "launch",
                "routing"):
        return importlib.import_module(f"{__name__}.{name}")
    if name == "ffpa_attn_varlen_func":
        return importlib.import_module(f"{__name__}.varlen").ffpa_attn_varlen_func
    # An old name of an earlier release (ffpa_attn.ffpa, ...) says what to write instead.
    from .deprecations import DEPRECATED_NAMES

    replacement = DEPRECATED_NAMES.get(f"{__name__}.{name}")
    if replacement is not None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}: it is deprecated: {replacement}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
