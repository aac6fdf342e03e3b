"""``ffpa_attn_func``: the public entry point.

Where the inputs live decides the path:

* CUDA arrays of any framework that exports ``__cuda_array_interface__`` or DLPack
  (torch, CuPy): validated here, then the compiled kernels (``ffpa_attn._C``) run on
  the caller's current stream. Strided views are passed as they are (the kernels
  take any batch/head/row strides; only the head dim must have unit stride), so a
  ``[B, N, H, D]`` tensor's ``.transpose(1, 2)`` needs no copy. The output (and LSE)
  are allocated with the inputs' own framework. ``impl="auto"`` takes the TMA kernel
  on sm_120-family GPUs when the build has TMA code for them (the release: ``120f``),
  else the MMA kernel, and falls back to the SIMT one, with a
  :class:`~ffpa_attn.errors.SlowPathWarning`, for arrays that are not 16-byte aligned;
  :func:`last_kernel` says which ran. ``accum="fp16"`` (fp16 inputs, tensor-core
  kernels only) accumulates in fp16, faster on consumer GPUs at a stated precision
  cost (docs/install.md).
* NumPy arrays: **the CPU path is the NumPy reference** (``reference.attention``),
  fp32 compute (fp64 for fp64 inputs), output cast back to the input dtype. This is
  what the pure wheel and the notebooks' NumPy checks run.
* torch CPU tensors: plain torch math (``torch_math.attention_math``).

``impl`` is a kernel choice and is ignored on the host. ``accum="fp16"`` is refused
there: it asks for a precision loss only the CUDA kernels have, and a reference that
silently ran in fp32 would hide what the GPU result will look like.

Imports go one way: ``validation`` <- ``torch_math`` <- ``interface`` <- ``torch_ops``
(the autograd wrapper); nothing here imports ``torch_ops``.

torch is never imported by this module: a torch tensor can only exist if the caller
already imported torch, so it is looked up in ``sys.modules``.
"""

from __future__ import annotations

import math
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import cuda, reference
from .validation import check_4d_shapes, resolve_scale
from .errors import (
    DeviceError,
    ExtensionNotAvailableError,
    ShapeError,
    SlowPathWarning,
    UnsupportedArrayTypeError,
    UnsupportedDTypeError,
    UnsupportedHeadDimError,
    UnsupportedImplError,
    UnsupportedLayoutError,
)

__all__ = ["ffpa_attn_func", "last_kernel", "IMPLS", "ACCUMS", "cuda_wheel_hint", "release_channel"]

IMPLS = ("auto", "mma", "simt", "tma", "cute", "cute_tma")
# Accumulator precision of the tensor-core kernels (mma, tma; auto when it picks one).
ACCUMS = ("fp32", "fp16")

def release_channel() -> str | None:
    """The CUDA channel of this release (``cu13``): where its CUDA wheels are published.

    Both wheel kinds carry it in ``_build_info.CUDA_CHANNEL`` (the pure wheel too, so
    that its hints name the right index); None when running from a source tree.
    """
    try:
        from . import _build_info  # type: ignore[attr-defined]
    except ImportError:
        return None
    return getattr(_build_info, "CUDA_CHANNEL", None)


def cuda_wheel_hint() -> str:
    """How to install the CUDA wheel, for error messages (docs/install.md has the rest)."""
    channel = release_channel() or "cu<CUDA major>"
    return (
        "install the CUDA wheel from the project index: "
        f"pip install ffpa-attn --index-url <site>/whl/{channel}/ --extra-index-url https://pypi.org/simple "
        "(see docs/install.md)"
    )


# DLPack device types (dlpack.h DLDeviceType).
_DL_CPU = 1
_DL_CUDA = 2
_DL_CUDA_HOST = 3
_DL_CUDA_MANAGED = 13

_TORCH_DTYPE_NAMES = {
    "torch.float16": "fp16",
    "torch.bfloat16": "bf16",
    "torch.float32": "fp32",
    "torch.float64": "fp64",
}
_NUMPY_LIKE_DTYPE_NAMES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}


@dataclass(frozen=True)
class _Desc:
    """What validation needs to know about one device array, framework-neutral."""

    framework: str  # "torch" or the top-level module name of the array type (e.g. "cupy")
    shape: tuple[int, ...]
    dtype: str  # fp16 / bf16 / fp32 / fp64 / the framework's own spelling
    unit_last_stride: bool  # the head dim is packed; other strides may be anything
    device: int


def _torch_module() -> Any | None:
    return sys.modules.get("torch")


def _is_torch_tensor(x: Any) -> bool:
    torch = _torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def _cuda_device_of(x: Any) -> int | None:
    """CUDA ordinal of x, or None when x is not (known to be) in CUDA memory."""
    if _is_torch_tensor(x):
        return int(x.device.index or 0) if x.is_cuda else None
    dl_device = getattr(x, "__dlpack_device__", None)
    if dl_device is not None:
        try:
            dev_type, dev_id = dl_device()
        except (TypeError, ValueError, RuntimeError):
            dev_type, dev_id = None, None
        if dev_type is not None:
            if int(dev_type) in (_DL_CUDA, _DL_CUDA_MANAGED):
                return int(dev_id)
            return None
    if hasattr(x, "__cuda_array_interface__"):
        device = getattr(x, "device", None)
        return int(getattr(device, "id", 0) or 0)
    return None


def _describe_cuda(x: Any, name: str) -> _Desc:
    device = _cuda_device_of(x)
    assert device is not None
    if _is_torch_tensor(x):
        return _Desc(
            framework="torch",
            shape=tuple(int(s) for s in x.shape),
            dtype=_TORCH_DTYPE_NAMES.get(str(x.dtype), str(x.dtype)),
            unit_last_stride=x.dim() == 0 or int(x.shape[-1]) <= 1 or int(x.stride(-1)) == 1,
            device=device,
        )
    framework = type(x).__module__.split(".")[0]
    shape = tuple(int(s) for s in getattr(x, "shape", ()))
    dtype = str(getattr(x, "dtype", "unknown"))
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        # CAI strides are None for C-contiguous arrays (v2+), else bytes per step.
        strides = cai.get("strides")
        itemsize = np.dtype(cai["typestr"]).itemsize
        unit_last = strides is None or not shape or shape[-1] <= 1 or int(strides[-1]) == itemsize
        if dtype == "unknown":
            dtype = str(np.dtype(cai["typestr"]))
    else:
        # DLPack-only arrays: their strides are read by the extension, which refuses
        # a non-unit head-dim stride with the same UnsupportedLayoutError.
        unit_last = True
    return _Desc(framework, shape, _NUMPY_LIKE_DTYPE_NAMES.get(dtype, dtype), unit_last, device)


def _extension_or_raise() -> Any:
    ext = cuda.extension()
    if ext is not None and cuda.CUDA_FWD_AVAILABLE:
        return ext
    if cuda.EXTENSION_IMPORT_ERROR is not None:
        raise ExtensionNotAvailableError(
            "the CUDA extension ffpa_attn._C is installed but failed to load "
            f"({cuda.EXTENSION_IMPORT_ERROR}); reinstall the CUDA wheel that matches this "
            "Python (pip install --force-reinstall --no-deps ffpa-attn --index-url "
            f"<site>/whl/{release_channel() or 'cu<CUDA major>'}/) "
            "and check that an NVIDIA driver for CUDA 13 is installed"
        )
    if ext is not None:
        raise ExtensionNotAvailableError(
            "this build of ffpa_attn._C has no forward kernels compiled in; "
            "rebuild with FFPA_HEAD_DIMS / FFPA_DTYPES set, or " + cuda_wheel_hint()
        )
    raise ExtensionNotAvailableError(
        "CUDA inputs need the compiled extension ffpa_attn._C, which this installation "
        "(the pure NumPy wheel) does not have; " + cuda_wheel_hint()
        + ", or pass NumPy arrays to use the CPU reference"
    )


def _allocate(q: Any, desc: _Desc, lse_shape: tuple[int, int, int], want_lse: bool) -> tuple[Any, Any]:
    if desc.framework == "torch":
        torch = _torch_module()
        out = torch.empty_like(q)
        lse = torch.empty(lse_shape, dtype=torch.float32, device=q.device) if want_lse else None
        return out, lse
    module = sys.modules.get(desc.framework)
    empty_like = getattr(module, "empty_like", None)
    empty = getattr(module, "empty", None)
    if empty_like is None or empty is None:
        raise UnsupportedArrayTypeError(
            f"cannot allocate the output for a {type(q).__module__}.{type(q).__name__}: "
            "ffpa_attn_func allocates with the inputs' framework and knows torch and CuPy; "
            "convert the inputs with torch.from_dlpack(x) or cupy.from_dlpack(x)"
        )
    device_ctx = getattr(getattr(module, "cuda", None), "Device", None)
    if device_ctx is not None:
        with device_ctx(desc.device):
            out = empty_like(q)
            lse = empty(lse_shape, dtype=np.float32) if want_lse else None
    else:
        out = empty_like(q)
        lse = empty(lse_shape, dtype=np.float32) if want_lse else None
    return out, lse


def _cuda_forward(
    q: Any, k: Any, v: Any, causal: bool, scale: float | None, return_lse: bool, impl: str, accum: str
) -> Any:
    descs = {name: _describe_cuda(t, name) for name, t in (("q", q), ("k", k), ("v", v))}
    b, hq, _hkv, nq, _nkv, d = check_4d_shapes({n: s.shape for n, s in descs.items()})

    frameworks = {s.framework for s in descs.values()}
    if len(frameworks) != 1:
        raise UnsupportedArrayTypeError(
            f"q, k, v come from different frameworks ({sorted(frameworks)}); "
            "convert them to one (e.g. torch.from_dlpack) before calling ffpa_attn_func"
        )
    dtypes = {n: s.dtype for n, s in descs.items()}
    if len(set(dtypes.values())) != 1:
        raise UnsupportedDTypeError(
            f"q, k, v must have the same dtype, got {dtypes}; cast them to one of fp16/bf16"
        )
    dtype = dtypes["q"]
    supported = cuda.COMPILED_DTYPES or ("fp16", "bf16")
    if dtype not in supported:
        raise UnsupportedDTypeError(
            f"the CUDA kernels take {'/'.join(supported)} inputs, got {dtype}; cast with "
            ".half() / .to(torch.bfloat16) (torch) or .astype(cupy.float16), or run under "
            "torch.autocast; rebuild with FFPA_DTYPES to compile other dtypes"
        )
    if accum == "fp16" and dtype != "fp16":
        raise UnsupportedDTypeError(
            f"accum='fp16' needs fp16 inputs, got {dtype}: fp16 accumulation exists only in the fp16 "
            "kernels; cast with .half() or use accum='fp32' (the default)"
        )
    for name, s in descs.items():
        if not s.unit_last_stride:
            raise UnsupportedLayoutError(
                f"{name} must have a unit-stride last dim (the head dim D of [B, H, N, D]); other "
                "strides may be anything (a [B, N, H, D] tensor's .transpose(1, 2) is fine). "
                "Call .contiguous() (torch) or cupy.ascontiguousarray() first"
            )
    devices = {n: s.device for n, s in descs.items()}
    if len(set(devices.values())) != 1:
        raise DeviceError(f"q, k, v must be on the same CUDA device, got {devices}; move them with .to(device)")
    ext = _extension_or_raise()
    if cuda.device_count() == 0:
        raise DeviceError(
            "no CUDA device: the extension sees no GPU (check nvidia-smi, the driver and "
            "CUDA_VISIBLE_DEVICES), or pass NumPy arrays / CPU tensors to use the CPU path"
        )
    if d not in cuda.COMPILED_HEAD_DIMS:
        raise UnsupportedHeadDimError(
            f"head dim {d} was not compiled; this build has {list(cuda.COMPILED_HEAD_DIMS)}. "
            "Rebuild with -DFFPA_HEAD_DIMS=\"...;" + str(d) + "\" (multiples of 64 up to 1024), "
            "or pad the head dim to a compiled one"
        )
    impls = cuda.COMPILED_IMPLS or ("mma", "simt")
    if impl != "auto" and impl not in impls:
        why = ""
        if impl in ("tma", "cute_tma"):
            why = (f" (TMA code needs an arch >= 90; this build has archs {list(cuda.COMPILED_ARCHS)}: rebuild "
                   "with e.g. -DFFPA_CUDA_ARCHS=\"89;120f\" as the release does, or \"90a\" for Hopper)")
        raise UnsupportedImplError(f"impl={impl!r} is not in this build{why}; choose one of {['auto', *impls]}")
    if accum == "fp16" and not cuda.F16_ACC_AVAILABLE:
        raise UnsupportedImplError(
            "accum='fp16' is not in this build (its fp16 accumulation kernels were not compiled, "
            "F16_ACC_AVAILABLE is False); use accum='fp32', or rebuild with fp16 in FFPA_DTYPES"
        )

    sm_scale = resolve_scale(scale, d)
    out, lse = _allocate(q, descs["q"], (b, hq, nq), return_lse)
    # torch refuses to export a tensor that requires grad through DLPack; the kernel
    # only reads it, and the autograd wrapper (torch_ops) owns the gradient.
    qx, kx, vx = (_exportable(t) for t in (q, k, v))
    used = ext.forward(qx, kx, vx, out, lse, bool(causal), sm_scale, impl, accum=accum)
    _LAST.kernel = str(used) if used is not None else impl
    if impl == "auto" and _LAST.kernel == "simt":
        warnings.warn(
            "impl='auto' ran the SIMT kernel, several times slower than the MMA kernel, because an "
            "input is not 16-byte aligned (data pointer, or a batch/head/row stride that is not a "
            "multiple of 8 elements); make the inputs contiguous to get the MMA kernel, or pass "
            "impl='simt' to choose it explicitly",
            SlowPathWarning,
            stacklevel=3,
        )
    return (out, lse) if return_lse else out


_LAST = threading.local()


def last_kernel() -> str | None:
    """The CUDA kernel ("mma", "tma" or "simt") of this thread's last CUDA ``ffpa_attn_func`` call.

    None before the first CUDA call. ``python -m ffpa_attn.bench`` reports it per row,
    with the accumulator it asked for.
    """
    return getattr(_LAST, "kernel", None)


def _exportable(x: Any) -> Any:
    if _is_torch_tensor(x) and getattr(x, "requires_grad", False):
        return x.detach()
    return x


def _numpy_forward(q: np.ndarray, k: Any, v: Any, causal: bool, scale: float | None, return_lse: bool) -> Any:
    arrays = {n: np.asarray(t) for n, t in (("q", q), ("k", k), ("v", v))}
    _, _, _, _, _, d = check_4d_shapes({n: tuple(a.shape) for n, a in arrays.items()})
    for name, a in arrays.items():
        if not np.issubdtype(a.dtype, np.floating):
            raise UnsupportedDTypeError(
                f"{name} has dtype {a.dtype}; pass floating-point arrays (e.g. .astype(np.float32))"
            )
    compute = np.float64 if any(a.dtype == np.float64 for a in arrays.values()) else np.float32
    result = reference.attention(
        arrays["q"], arrays["k"], arrays["v"], causal=causal, scale=resolve_scale(scale, d),
        return_lse=True, dtype=compute,
    )
    out, lse = result
    out = out.astype(arrays["q"].dtype, copy=False)
    return (out, lse.astype(np.float32, copy=False)) if return_lse else out


def ffpa_attn_func(
    q: Any,
    k: Any,
    v: Any,
    causal: bool = False,
    scale: float | None = None,
    return_lse: bool = False,
    impl: str = "auto",
    accum: str = "fp32",
) -> Any:
    """Attention ``softmax(q k^T * scale [+ causal mask]) v`` for [B, H, N, D] inputs.

    k and v may have fewer heads than q (grouped-query attention, ``Hq % Hkv == 0``).
    ``scale`` defaults to ``1/sqrt(D)``. The causal mask is bottom-right aligned when
    ``Nq != Nkv`` (see :mod:`ffpa_attn.reference`). ``impl`` picks the CUDA kernel:
    ``"auto"`` (``"tma"`` on sm_120-family GPUs the build has TMA code for, else
    ``"mma"``; ``"simt"`` for arrays that are not 16-byte aligned), ``"mma"`` (the
    split-D kernel fed by cp.async), ``"tma"`` (the same kernel fed by the Tensor
    Memory Accelerator; only where :data:`ffpa_attn.cuda.CUDA_TMA_AVAILABLE` and the
    GPU runs that code) or ``"simt"`` (the plain kernel used as a second witness); it
    is ignored on the host.

    ``accum`` is the accumulator of the tensor-core kernels: ``"fp32"`` (default) or
    ``"fp16"``, which needs fp16 inputs and impl ``"auto"``/``"mma"``/``"tma"`` (auto
    then never falls back to simt: misaligned arrays raise UnsupportedLayoutError). It
    is faster on GPUs whose fp16-accumulate tensor rate is twice the fp32 one, with a
    wider error: within rel 3e-2 / abs 5e-2 of the reference instead of 1e-2 / 2e-2.
    The host paths refuse it (they always accumulate in fp32).

    Returns ``out`` (same framework, device, shape and dtype as q) or, with
    ``return_lse=True``, ``(out, lse)`` where lse is fp32 [B, Hq, Nq].

    Raises the :class:`ffpa_attn.FFPAError` subclasses; nothing is launched until every
    check has passed.
    """
    if impl not in IMPLS:
        raise UnsupportedImplError(f"impl must be one of {list(IMPLS)}, got {impl!r}")
    if accum not in ACCUMS:
        raise UnsupportedImplError(
            f"accum must be one of {list(ACCUMS)}, got {accum!r} (the accumulator of the CUDA tensor-core kernels)"
        )
    if accum == "fp16" and impl == "simt":
        raise UnsupportedImplError(
            "accum='fp16' is for the tensor-core kernels (impl 'auto', 'mma', 'tma'); the SIMT kernel "
            "accumulates in fp32 only: drop accum or pick another impl"
        )
    devices = [_cuda_device_of(t) for t in (q, k, v)]
    on_cuda = [dev is not None for dev in devices]
    if any(on_cuda):
        if not all(on_cuda):
            where = {n: ("cuda" if c else "host") for n, c in zip("qkv", on_cuda)}
            raise DeviceError(f"q, k, v must all be on the GPU or all on the host, got {where}; move them first")
        return _cuda_forward(q, k, v, causal, scale, return_lse, impl, accum)
    if accum == "fp16":
        raise UnsupportedImplError(
            "accum='fp16' selects the fp16-accumulating CUDA kernels; the host path (NumPy reference, "
            "torch CPU math) always accumulates in fp32 (fp64 for fp64 inputs). Pass CUDA arrays, or "
            "drop accum for the host"
        )
    if all(_is_torch_tensor(t) for t in (q, k, v)):
        from . import torch_math

        return torch_math.attention_math(q, k, v, causal=causal, scale=scale, return_lse=return_lse)
    if any(_is_torch_tensor(t) for t in (q, k, v)):
        raise UnsupportedArrayTypeError(
            "mixing torch CPU tensors with other arrays is not supported; convert all three "
            "with torch.as_tensor(x) or x.numpy()"
        )
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, np.ndarray) and not hasattr(t, "__array__"):
            raise UnsupportedArrayTypeError(
                f"{name} is a {type(t).__name__}; pass NumPy arrays (CPU reference), torch "
                "tensors, or CUDA arrays with __cuda_array_interface__ / DLPack (torch, CuPy)"
            )
    return _numpy_forward(q, k, v, causal, scale, return_lse)
