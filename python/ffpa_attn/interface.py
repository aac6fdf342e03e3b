"""``ffpa_attn_func``: the public entry point, with the signature of
``torch.nn.functional.scaled_dot_product_attention`` (SDPA), so that

    torch.nn.functional.scaled_dot_product_attention = ffpa_attn.ffpa_attn_func

runs a model written for SDPA on the FFPA kernels where they take the call.

Where the inputs live decides the path:

* torch tensors (:mod:`ffpa_attn.torch_ops`, imported on the first one): the
  ``ffpa_attn::attention`` custom op, which runs the CUDA kernels on CUDA tensors and
  torch math on CPU tensors, is differentiable (an O(N)-memory fused backward on CUDA)
  and traces under ``torch.compile``. What the kernels do not take (routing.FALLBACK_REASONS:
  a mask tensor, dropout, a dtype / head dim / GPU the build lacks, the pure wheel, ...)
  runs on torch's own SDPA with one :class:`~ffpa_attn.errors.SDPAFallbackWarning` per
  reason, or raises with ``strict=True`` / ``FFPA_STRICT=1``.
* CUDA arrays of other frameworks (CuPy: ``__cuda_array_interface__`` or DLPack): the
  kernels (:mod:`ffpa_attn.launch`), errors raised (there is no SDPA to fall back to).
* NumPy arrays: **the NumPy reference** (``reference.attention``), fp32 compute (fp64
  for fp64 inputs), output cast back to the input dtype: the pure wheel's CPU path.

SDPA's conventions hold on every path: ``is_causal=True`` is aligned top-left (query i
sees keys j <= i); the kernels' own bottom-right alignment (j <= i + Nkv - Nq, flash
attention's) is ``attn_mask=torch.nn.attention.bias.causal_lower_right(Nq, Nkv)`` or
the deprecated ``causal=True``; ``Hq != Hkv`` needs ``enable_gqa=True`` unless
``Hkv == 1`` (SDPA broadcasts one kv head). ``impl``, ``accum`` and ``backward`` are
kernel choices; an explicit ``impl``/``accum`` raises instead of falling back.

Imports go one way: ``validation``/``routing`` <- ``launch`` <- ``torch_math`` <-
``torch_ops`` <- ``interface``; torch is never imported by this module (a torch tensor
can only exist if the caller already imported torch, so it is looked up in
``sys.modules``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import device as ffpa_device, launch, reference, routing
from .deprecations import deprecation_message
from .errors import (
    DeviceError,
    UnsupportedArrayTypeError,
    UnsupportedDTypeError,
    UnsupportedFeatureError,
    UnsupportedImplError,
)
from .routing import FALLBACK_REASONS, last_kernel
from .validation import (ACCUMS, BACKWARDS, HOST_FP16_ACCUM, IMPLS, LOWP_IMPLS, check_4d_shapes, check_choices,
                         check_dropout, check_enable_gqa, resolve_scale)
from .window import check_window

# IMPLS, ACCUMS and BACKWARDS (the keyword choices) live in validation with their check,
# which ffpa_attn_varlen_func shares; here they are part of the signature's story.
__all__ = ["ffpa_attn_func", "last_kernel", "IMPLS", "LOWP_IMPLS", "ACCUMS", "BACKWARDS", "FALLBACK_REASONS"]


def _numpy_attention(arrays: dict[str, np.ndarray], causal: bool, scale: float, compute: Any) -> tuple[Any, Any]:
    return reference.attention(arrays["q"], arrays["k"], arrays["v"], causal=causal, scale=scale, return_lse=True,
                               dtype=compute)


def _numpy_forward(q: Any, k: Any, v: Any, mask: str, scale: float | None, return_lse: bool) -> Any:
    arrays = {n: np.asarray(t) for n, t in (("q", q), ("k", k), ("v", v))}
    _, _, _, nq, nkv, d = check_4d_shapes({n: tuple(a.shape) for n, a in arrays.items()})
    for name, a in arrays.items():
        if not np.issubdtype(a.dtype, np.floating):
            raise UnsupportedDTypeError(
                f"{name} has dtype {a.dtype}; pass floating-point arrays (e.g. .astype(np.float32))"
            )
    if len({a.dtype for a in arrays.values()}) != 1:
        raise UnsupportedDTypeError(
            "q, k and v must have the same dtype (as SDPA and the CUDA kernels require), got "
            f"{'/'.join(str(a.dtype) for a in arrays.values())}; cast them to one, e.g. k.astype(q.dtype)")
    compute = np.float64 if any(a.dtype == np.float64 for a in arrays.values()) else np.float32
    sm_scale = resolve_scale(scale, d)
    if mask == "top_left" and nq <= nkv:
        # Top-left on Nq <= Nkv keys is the bottom-right mask on the first Nq of them.
        out, lse = _numpy_attention({**arrays, "k": arrays["k"][:, :, :nq], "v": arrays["v"][:, :, :nq]}, True,
                                    sm_scale, compute)
    elif mask == "top_left":
        # Nq > Nkv: a causal square on the first Nkv rows, every key for the rest.
        head, head_lse = _numpy_attention({**arrays, "q": arrays["q"][:, :, :nkv]}, True, sm_scale, compute)
        tail, tail_lse = _numpy_attention({**arrays, "q": arrays["q"][:, :, nkv:]}, False, sm_scale, compute)
        out, lse = np.concatenate([head, tail], axis=2), np.concatenate([head_lse, tail_lse], axis=2)
    else:
        out, lse = _numpy_attention(arrays, mask == "bottom_right", sm_scale, compute)
    routing.note_kernel("reference")
    out = out.astype(arrays["q"].dtype, copy=False)
    return (out, lse.astype(np.float32, copy=False)) if return_lse else out


def _check_heads(shapes: list[tuple[int, ...]], enable_gqa: bool) -> None:
    if all(len(s) == 4 for s in shapes):
        # Hq % Hkv != 0 is check_4d_shapes' error; this one is SDPA's enable_gqa rule.
        check_enable_gqa(shapes[0][1], shapes[1][1], enable_gqa)


def ffpa_attn_func(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    impl: str = "auto",
    accum: str = "fp32",
    return_lse: bool = False,
    strict: bool | None = None,
    backward: str = "auto",
    causal: bool | None = None,
    window_size: tuple[int, int] = (-1, -1),
) -> Any:
    """Attention ``softmax(query key^T * scale [+ mask]) value`` for [B, H, N, D] inputs,
    with SDPA's signature and conventions (module docstring).

    SDPA's arguments: ``attn_mask`` (None, or a ``torch.nn.attention.bias`` causal bias,
    which the kernels take; any other mask runs on SDPA), ``dropout_p`` (> 0 runs on
    SDPA), ``is_causal`` (top-left aligned), ``scale`` (default ``1/sqrt(D)``) and
    ``enable_gqa`` (``Hq % Hkv == 0``; without it only ``Hkv == 1`` is taken).

    Keyword-only choices of ffpa-attn:

    * ``impl``: the CUDA kernel, ``"auto"`` (``"tma"`` on sm_120-family GPUs the build
      has TMA code for, else ``"mma"``; ``"simt"`` for arrays that are not 16-byte
      aligned, with a SlowPathWarning), ``"mma"``, ``"tma"``, ``"cute"``, ``"cute_tma"``
      (the CuTe kernels) or ``"simt"``; or a low-precision path, which ``"auto"`` never
      picks: ``"fp8"`` (FP8 e4m3 tensor cores, sm_89 and later: ``"cute_fp8"``, fed by
      cp.async, below the sm_120 family, ``"cute_tma_fp8"``, fed by TMA, on sm_90 and
      later) or ``"fp4"`` = ``"cute_tma_fp4"`` (NVFP4, the sm_120 family only); same
      inputs and output dtype, fp32 accumulation, within the accuracy docs/install.md
      states. Ignored on the host (NumPy and CPU torch compute in fp32 or fp64).
    * ``accum``: ``"fp32"`` (default) or ``"fp16"``, the fp16/bf16 tensor-core kernels'
      accumulator (fp16 inputs; within rel 3e-2 / abs 5e-2 of the reference instead of
      1e-2 / 2e-2); refused with ``impl="simt"``, a low-precision impl, and on the host.
    * ``return_lse``: also return the fp32 [B, Hq, Nq] log-sum-exp (no gradient flows
      through it); needs the kernels or the host path (SDPA has no LSE).
    * ``strict``: True raises the :class:`~ffpa_attn.FFPAError` instead of falling back
      to SDPA; None (default) reads the environment switch ``FFPA_STRICT=1``. An
      explicit ``impl``/``accum`` is always strict.
    * ``backward``: ``"auto"`` (the FFPA backward kernels where the build has them for
      the inputs, else ``"torch"``), ``"ffpa"`` (those kernels or an error), ``"torch"``
      (torch's fused attention backward on CUDA, O(N) memory; the LSE recompute
      elsewhere), ``"fused"``, ``"lse"`` or ``"recompute"`` (the older full Nq x Nkv
      recompute); see :mod:`ffpa_attn.torch_ops`.
    * ``causal``: deprecated (ffpa_attn.deprecations): the bottom-right causal mask.
    * ``window_size``: a sliding window ``(left, right)``, flash-attention's convention:
      query i sees key j iff ``diag(i) - left <= j <= diag(i) + right`` (-1: unbounded;
      ``(-1, -1)``, the default, is no window), with ``diag(i) = i`` (SDPA's top-left
      alignment, ``is_causal``) or ``i + Nkv - Nq`` under a ``causal_lower_right`` bias;
      a causal mask clips ``right`` to 0. Torch tensors only; with an ``attn_mask`` tensor
      both apply (SDPA runs it).

    Returns ``out`` (same framework, device, shape and dtype as query) or, with
    ``return_lse=True``, ``(out, lse)``. Raises the :class:`ffpa_attn.FFPAError`
    subclasses; nothing is launched until every check has passed.
    """
    check_choices(impl, accum, backward)
    window = check_window(window_size)
    check_dropout(dropout_p)
    if isinstance(attn_mask, bool):
        raise UnsupportedArrayTypeError(
            f"attn_mask={attn_mask}: the fourth argument is attn_mask (a tensor), as in SDPA's signature; it was "
            "causal before: pass is_causal=True (or attn_mask=causal_lower_right(Nq, Nkv) for the bottom-right "
            "alignment causal= had)"
        )
    if causal is not None:
        routing.warn_deprecated(deprecation_message("ffpa_attn.ffpa_attn_func", "causal"))
        if is_causal or attn_mask is not None:
            raise UnsupportedFeatureError(
                "causal= (deprecated) together with is_causal=True or attn_mask: pass only one of them")
    if is_causal and attn_mask is not None:
        raise UnsupportedFeatureError(
            "attn_mask together with is_causal=True: SDPA refuses them too; pass one (a causal mask is "
            "is_causal=True)")

    arrays = (query, key, value)
    torch_inputs = [launch.is_torch_tensor(t) for t in arrays]
    if all(torch_inputs) and attn_mask is not None and not launch.is_torch_tensor(attn_mask):
        # SDPA's own TypeError, said once and with the fix, instead of a fallback warning
        # followed by SDPA's error.
        raise UnsupportedArrayTypeError(
            f"attn_mask must be a tensor (or a torch.nn.attention.bias causal bias), as in SDPA's signature; got "
            f"{type(attn_mask).__name__} {attn_mask!r:.40}: for a causal mask pass is_causal=True (or "
            "attn_mask=torch.nn.attention.bias.causal_lower_right(Nq, Nkv) for the bottom-right alignment)")
    if all(torch_inputs):
        from . import torch_ops

        if accum == "fp16" and not ffpa_device.on_device(query):
            raise UnsupportedImplError(HOST_FP16_ACCUM)
        return torch_ops.dispatch(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                  enable_gqa or causal is not None,
                                  legacy_causal=causal, impl=impl, accum=accum, return_lse=return_lse,
                                  strict=strict, backward=backward, window=window)

    devices = [launch.cuda_device_of(t) for t in arrays]
    on_cuda = [dev is not None for dev in devices]
    if any(on_cuda) and not all(on_cuda):
        where = {n: ("cuda" if c else "host") for n, c in zip("qkv", on_cuda)}
        raise DeviceError(f"q, k, v must all be on the GPU or all on the host, got {where}; move them first")
    if any(torch_inputs):
        raise UnsupportedArrayTypeError(
            "mixing torch tensors with other arrays is not supported; convert all three "
            "with torch.as_tensor(x) / torch.from_dlpack(x), or x.numpy()"
        )
    # NumPy and CuPy arrays: there is no SDPA to run what the kernels do not take.
    if window != (-1, -1):
        raise UnsupportedFeatureError(
            f"window_size={window_size!r} needs torch tensors (CPU or CUDA); NumPy/CuPy arrays take no sliding "
            "window: convert them with torch.from_dlpack(x) / torch.from_numpy(x)")
    if attn_mask is not None:
        raise UnsupportedFeatureError(
            "attn_mask needs torch tensors (they run masked calls on torch SDPA); for NumPy/CuPy arrays "
            "pass is_causal=True for a causal mask, or apply the mask yourself")
    if not isinstance(dropout_p, (int, float)) or dropout_p != 0:
        raise UnsupportedFeatureError(
            f"dropout_p={dropout_p!r} needs torch tensors (they run dropout on torch SDPA); NumPy/CuPy arrays take "
            "dropout_p=0.0 only")
    mask = "bottom_right" if causal else ("top_left" if is_causal else "none")
    # causal= is the earlier API, which took grouped-query inputs as they came.
    _check_heads([tuple(getattr(t, "shape", ())) for t in arrays], enable_gqa or causal is not None)

    if all(on_cuda):
        return launch.forward(query, key, value, mask != "none", scale, return_lse, impl, accum,
                              top_left=mask == "top_left")
    if accum == "fp16":
        raise UnsupportedImplError(HOST_FP16_ACCUM)
    for name, t in zip("qkv", arrays):
        if not isinstance(t, np.ndarray) and not hasattr(t, "__array__"):
            raise UnsupportedArrayTypeError(
                f"{name} is a {type(t).__name__}; pass NumPy arrays (CPU reference), torch "
                "tensors, or CUDA arrays with __cuda_array_interface__ / DLPack (torch, CuPy)"
            )
    return _numpy_forward(query, key, value, mask, scale, return_lse)
