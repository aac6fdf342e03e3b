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
    "SlowPathWarning",
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


class SlowPathWarning(UserWarning):
    """``impl="auto"`` ran the SIMT kernel (several times slower than the MMA one).

    It happens when an array is not 16-byte aligned (its data pointer, or a batch, head
    or row stride that is not a multiple of 8 elements), which ``cp.async`` needs.
    Make the inputs contiguous (or pad the strides) to get the fast kernel, or pass
    ``impl="simt"`` to say the slow kernel is intended.
    """
