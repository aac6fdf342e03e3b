"""Which path a call took, and what ffpa_attn_func says when it is not the kernels.

Framework-neutral (never imports torch). Holds:

* :data:`FALLBACK_REASONS`: every reason ``ffpa_attn_func`` runs torch SDPA instead of
  the FFPA kernels, with the error strict mode raises for it and the fix its warning
  names (docs/install.md lists the same table);
* the once-per-reason :class:`~ffpa_attn.errors.SDPAFallbackWarning`, strict mode
  (``strict=True`` or ``FFPA_STRICT=1``) and the per-thread record behind
  :func:`last_kernel`.

Under ``torch.compile`` a Python warning or a write to thread-local state inside the
traced function would be a graph break; :mod:`ffpa_attn.torch_ops` installs
``torch.compiler`` hooks here so that these side effects run once, when the call is
traced (:func:`install_compile_hooks`), and the traced graph has none.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

from .errors import (
    DeviceError,
    ExtensionNotAvailableError,
    FFPADeprecationWarning,
    FFPAError,
    SDPAFallbackWarning,
    UnsupportedDTypeError,
    UnsupportedFeatureError,
    UnsupportedHeadDimError,
    UnsupportedLayoutError,
)
from .validation import MIN_SM

__all__ = ["FALLBACK_REASONS", "STRICT_ENV", "fallback_error", "last_kernel", "note_kernel", "strict_enabled",
           "warn_deprecated", "warn_fallback"]

STRICT_ENV = "FFPA_STRICT"

# reason -> (the FFPAError strict mode raises, the fix the warning and the error name).
# Ordered as the checks run: the first reason that applies is the one reported. None of
# them is about the impl: an explicit impl (the low-precision ones included) is strict, so
# these raise for it, and an impl the build or the GPU lacks is launch.check's or the
# library's UnsupportedImplError, never a fallback (a low-precision request must not
# quietly become SDPA's fp16 numbers, nor SDPA's speed be reported as FP8's).
FALLBACK_REASONS: dict[str, tuple[type[FFPAError], str]] = {
    "device_type": (DeviceError, "the kernels run on CUDA tensors (and the host path on CPU ones): move the "
                                 "tensors with .cuda()"),
    "attn_mask": (UnsupportedFeatureError,
                  "the kernels take causal masks only: pass is_causal=True (SDPA's top-left alignment) or "
                  "attn_mask=torch.nn.attention.bias.causal_lower_right(Nq, Nkv) (bottom-right) instead of a "
                  "mask tensor; any other mask runs on SDPA"),
    "dropout": (UnsupportedFeatureError,
                "the kernels have no dropout: pass dropout_p=0.0 (models that pass `p if self.training else "
                "0.0` get the kernels after model.eval())"),
    "shape": (UnsupportedFeatureError,
              "pass 4-D [B, H, N, D] tensors with one batch size, no empty dimension, the same head dim in q, "
              "k and v, and Hq a multiple of Hkv"),
    "layout": (UnsupportedLayoutError, "the head dim (last) must have unit stride: call .contiguous()"),
    "pure_wheel": (ExtensionNotAvailableError, ""),  # the fix is cuda_wheel_hint(), filled in by the caller
    # The installed wheel has no code for this GPU and the first-use build (ffpa_attn.jit)
    # cannot run or failed; the detail names what is missing, the fix how to install it.
    "jit": (ExtensionNotAvailableError, "pip install \"ffpa-attn[jit]\" (docs/install.md, \"First-use builds\")"),
    "extension": (ExtensionNotAvailableError,
                  "reinstall the CUDA wheel that matches this Python and check the NVIDIA driver"),
    "device": (DeviceError, "the extension sees no CUDA device: check nvidia-smi, the driver and "
                            "CUDA_VISIBLE_DEVICES"),
    # The lowest arch: cmake/kernel-facts.json's arch_rules.min_sm (unknown in a source tree).
    "arch": (DeviceError, f"the kernels need an NVIDIA GPU from sm_{MIN_SM if MIN_SM else '<arch_rules.min_sm>'}; "
                          "on those the first call builds them for "
                          "the GPU (pip install \"ffpa-attn[jit]\"; docs/install.md, \"First-use builds\") "
                          "unless FFPA_JIT=0"),
    "dtype": (UnsupportedDTypeError, "cast the inputs to a compiled dtype (.half(), .to(torch.bfloat16)) or "
                                     "run under torch.autocast"),
    "head_dim": (UnsupportedHeadDimError, "rebuild with -DFFPA_HEAD_DIMS including it (multiples of 64 up to "
                                          "1024), or pad the head dim to a compiled one"),
    # The masks of the kernels beyond causal (ffpa_attn.cuda.COMPILED_MASKS): a build
    # without them runs sliding windows and packed sequences on SDPA (per sequence).
    "window": (UnsupportedFeatureError, "install a build whose kernels take sliding windows "
                                        "('window' in ffpa_attn.cuda.COMPILED_MASKS), or drop window_size"),
    "varlen": (UnsupportedFeatureError, "install a build whose kernels take packed sequences "
                                        "('varlen' in ffpa_attn.cuda.COMPILED_MASKS); without it "
                                        "ffpa_attn_varlen_func runs torch SDPA once per sequence"),
}

_WARNED: set[str] = set()
_WARN_LOCK = threading.Lock()
_STATE = threading.local()


def strict_enabled(strict: bool | None) -> bool:
    """``strict`` when given, else the environment switch ``FFPA_STRICT`` (1/true/yes/on)."""
    if strict is not None:
        return bool(strict)
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def fallback_error(reason: str, detail: str, fix: str | None = None) -> FFPAError:
    """The error strict mode raises instead of falling back for ``reason``."""
    cls, default_fix = FALLBACK_REASONS[reason]
    return cls(f"{detail}; {fix or default_fix} (without strict=True / {STRICT_ENV}=1, torch tensors run on "
               f"torch SDPA for this, with an SDPAFallbackWarning)")


# Frames a warning never points at: this package's, and torch's (a model's
# F.scaled_dot_product_attention call inside torch.nn, and torch.compile's tracing
# machinery, under which the warning is raised while the user's call waits below it).
_NOT_THE_CALLER = ("ffpa_attn", "torch")


def _is_library_frame(frame: Any) -> bool:
    name = str(frame.f_globals.get("__name__", ""))
    return any(name == p or name.startswith(p + ".") for p in _NOT_THE_CALLER)


def caller_stacklevel() -> int:
    # The first frame outside this package and torch: the user's call.
    frame = sys._getframe(1)
    level = 1
    while frame is not None and _is_library_frame(frame):
        frame = frame.f_back
        level += 1
    return level


def _warn_fallback(reason: str, detail: str, fix: str) -> bool:
    with _WARN_LOCK:
        if reason in _WARNED:
            return False
        _WARNED.add(reason)
    warnings.warn(
        f"ffpa_attn_func ran torch SDPA instead of the FFPA kernels (reason {reason!r}): {detail}. Fix: {fix}. "
        f"Shown once per reason; strict=True or {STRICT_ENV}=1 raises instead",
        SDPAFallbackWarning,
        stacklevel=caller_stacklevel(),
    )
    return True


def _note_kernel(kernel: str, reason: str | None) -> bool:
    _STATE.kernel = kernel
    _STATE.reason = reason
    return True


def _warn_deprecated(message: str) -> bool:
    warnings.warn(message, FFPADeprecationWarning, stacklevel=caller_stacklevel())
    return True


def _not_compiling() -> bool:
    return False


# Replaced by torch_ops (torch.compiler.is_compiling and assume_constant_result wrappers).
_is_compiling: Callable[[], bool] = _not_compiling
_traced_warn_fallback: Callable[..., bool] = _warn_fallback
_traced_note_kernel: Callable[..., bool] = _note_kernel
_traced_warn_deprecated: Callable[..., bool] = _warn_deprecated


def install_compile_hooks(is_compiling: Callable[[], bool], constant: Callable[[Callable[..., Any]], Any]) -> None:
    """Called by torch_ops at import: side effects run at trace time under torch.compile."""
    global _is_compiling, _traced_warn_fallback, _traced_note_kernel, _traced_warn_deprecated
    _traced_warn_fallback = constant(_warn_fallback)
    _traced_note_kernel = constant(_note_kernel)
    _traced_warn_deprecated = constant(_warn_deprecated)
    _is_compiling = is_compiling


def warn_fallback(reason: str, detail: str, fix: str | None = None) -> None:
    """The :class:`SDPAFallbackWarning` for ``reason``, at most once per process."""
    text = fix or FALLBACK_REASONS[reason][1]
    if _is_compiling():
        _traced_warn_fallback(reason, detail, text)
    else:
        _warn_fallback(reason, detail, text)


def warn_deprecated(message: str) -> None:
    """An :class:`~ffpa_attn.errors.FFPADeprecationWarning` (texts: ffpa_attn.deprecations)."""
    if _is_compiling():
        _traced_warn_deprecated(message)
    else:
        _warn_deprecated(message)


def note_kernel(kernel: str, reason: str | None = None) -> None:
    """Record the path this thread's last call took (see :func:`last_kernel`)."""
    if _is_compiling():
        _traced_note_kernel(kernel, reason)
    else:
        _note_kernel(kernel, reason)


def take_fallback(problem: tuple[str, str, str | None], strict: bool, return_lse: bool) -> None:
    """A torch call's way to SDPA for ``problem`` (reason, detail, fix): strict mode raises
    the reason's error; return_lse=True raises too (SDPA returns no LSE); otherwise the
    reason's one warning, and the call is recorded as SDPA's. The caller then runs SDPA."""
    reason, detail, fix = problem
    if strict:
        raise fallback_error(reason, detail, fix)
    if return_lse:
        cls, default_fix = FALLBACK_REASONS[reason]
        raise cls(f"{detail}: the FFPA kernels cannot take this call and return_lse=True needs them (torch SDPA "
                  f"returns no LSE); {fix or default_fix}")
    warn_fallback(reason, detail, fix)
    note_kernel("sdpa", reason)


def last_kernel(with_reason: bool = False) -> Any:
    """The path of this thread's last ``ffpa_attn_func`` call.

    ``"mma"``, ``"tma"``, ``"cute"``, ``"cute_tma"``, ``"simt"``, or a low-precision
    ``"cute_fp8"``, ``"cute_tma_fp8"``, ``"cute_tma_fp4"`` (a CUDA kernel: the one the
    extension reports it ran; ``impl="fp8"`` resolves to one of the two FP8 kernels,
    ``"fp4"`` to ``"cute_tma_fp4"``), ``"sdpa"`` (torch SDPA, for the
    fallback reason), ``"torch_math"`` (torch tensors on the CPU, or meta tensors) or
    ``"reference"`` (NumPy arrays); None before the first call. ``with_reason=True``
    returns ``(kernel, reason)``, reason None unless the kernel is ``"sdpa"``.

    Under torch.compile the kernels record themselves each time they run; the SDPA
    fallback is recorded when the call is traced.
    """
    kernel = getattr(_STATE, "kernel", None)
    if with_reason:
        return kernel, getattr(_STATE, "reason", None)
    return kernel


def _reset_for_tests() -> None:
    with _WARN_LOCK:
        _WARNED.clear()
    _STATE.kernel = None
    _STATE.reason = None
