"""Exceptions raised by ffpa-attn.

Every error a user can hit derives from :class:`FFPAError`, so ``except
ffpa_attn.FFPAError`` catches all of them. Errors about bad arguments also derive
from the matching builtin (``ValueError`` / ``TypeError``) so code written against
the builtins keeps working.

The compiled extension ``ffpa_attn._C`` imports this module and raises these same
classes, so Python-side and C++-side validation are indistinguishable to callers.
Messages say what was wrong *and* how to fix it.
"""

from __future__ import annotations

__all__ = [
    "FFPAError",
    "ExtensionNotAvailableError",
    "UnsupportedHeadDimError",
    "UnsupportedDTypeError",
    "UnsupportedLayoutError",
    "UnsupportedArrayTypeError",
    "UnsupportedImplError",
    "ShapeError",
    "DeviceError",
    "UnsupportedFeatureError",
    "SlowPathWarning",
    "SDPAFallbackWarning",
    "FFPADeprecationWarning",
]


class FFPAError(Exception):
    """Base class of every ffpa-attn error."""


class ExtensionNotAvailableError(FFPAError, ImportError):
    """The CUDA extension ``ffpa_attn._C`` is absent (pure wheel) or failed to load."""


class UnsupportedHeadDimError(FFPAError, ValueError):
    """The head dim was not compiled into this build."""


class UnsupportedDTypeError(FFPAError, TypeError):
    """The dtype is not supported by the selected path (CUDA: fp16/bf16)."""


class UnsupportedLayoutError(FFPAError, ValueError):
    """The tensor is not laid out as the kernels need ([B, H, N, D] with a unit-stride head dim)."""


class UnsupportedArrayTypeError(FFPAError, TypeError):
    """The object is not an array type ffpa-attn knows how to read or allocate."""


class UnsupportedImplError(FFPAError, ValueError):
    """The requested kernel implementation does not exist in this build."""


class ShapeError(FFPAError, ValueError):
    """Shapes of q, k, v are inconsistent or not 4-D [B, H, N, D]."""


class DeviceError(FFPAError, RuntimeError):
    """No CUDA device, or inputs on different devices / on the host where CUDA is needed."""


class UnsupportedFeatureError(FFPAError, ValueError):
    """An argument of SDPA's signature that the kernels do not implement.

    ``attn_mask`` tensors other than a causal bias, ``dropout_p > 0``, inputs that are
    not 4-D ``[B, H, N, D]`` with one batch size, a value head dim different from the
    query's. torch tensors go to SDPA for these (with an :class:`SDPAFallbackWarning`)
    unless ``strict=True`` or ``FFPA_STRICT=1``; NumPy and CuPy arrays, which have no
    SDPA to go to, raise it.
    """


class SlowPathWarning(UserWarning):
    """``impl="auto"`` ran the SIMT kernel (several times slower than the MMA one).

    It happens when an array is not 16-byte aligned (its data pointer, or a batch, head
    or row stride that is not a multiple of 8 elements), which ``cp.async`` needs.
    Make the inputs contiguous (or pad the strides) to get the fast kernel, or pass
    ``impl="simt"`` to say the slow kernel is intended.
    """


class SDPAFallbackWarning(UserWarning):
    """``ffpa_attn_func`` ran ``torch.nn.functional.scaled_dot_product_attention`` instead
    of the FFPA kernels, for the reason (and with the fix) the message names.

    Shown once per reason per process; ``strict=True`` or ``FFPA_STRICT=1`` raises the
    matching :class:`FFPAError` instead. ``ffpa_attn.last_kernel(with_reason=True)``
    returns ``("sdpa", reason)`` after such a call. The reasons are listed in
    ``ffpa_attn.interface.FALLBACK_REASONS`` and docs/install.md.
    """


class FFPADeprecationWarning(DeprecationWarning):
    """A deprecated ffpa-attn name or keyword was used; the message says what to write.

    The deprecated API is listed, with its replacement, in
    :mod:`ffpa_attn.deprecations` (which the notebook checks read too).
    """
