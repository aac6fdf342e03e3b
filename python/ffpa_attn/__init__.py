"""ffpa-attn: large-head-dim (up to 1024) attention kernels for CUDA, with a NumPy reference.

Public API: :func:`ffpa_attn_func` (SDPA's signature: it can replace
``torch.nn.functional.scaled_dot_product_attention``), :func:`ffpa_attn_varlen_func`
(packed variable-length sequences, flash-attention's varlen call; needs torch, loaded on
first access), :func:`last_kernel`, the
:class:`FFPAError` hierarchy and the warnings, the :mod:`~ffpa_attn.reference` and
:mod:`~ffpa_attn.cuda` modules, :func:`build_info`, :func:`tolerance` and ``__version__``.
This module only gathers them: each is defined where it belongs (``cuda.build_info``,
``build_facts.tolerance``, ``interface``, ``varlen``), and no module of the package
imports this one.
``ffpa_attn.torch_ops`` (the ``ffpa_attn::attention`` torch op) is loaded on the first
torch tensor or on first access and needs torch; importing ``ffpa_attn`` itself never
imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import build_facts, cuda, errors, reference
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
from .build_facts import tolerance
from .cuda import build_info
from .interface import FALLBACK_REASONS, ffpa_attn_func, last_kernel

# The build's version (build_facts reads the generated _build_info.py); 0+unknown in a
# source tree.
__version__: str = build_facts.version()

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


def __getattr__(name: str) -> Any:
    # Lazy submodules: torch_ops/torch_math import torch.
    if name in ("torch_ops", "torch_math", "torch_masks", "varlen", "integrations", "deprecations", "launch",
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
