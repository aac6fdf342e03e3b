"""The compiled kernels (``ffpa_attn._C``) for CUDA arrays of any framework.

Arrays arrive as they are: torch tensors and CuPy arrays (``__cuda_array_interface__``
or DLPack), strided views included (the kernels take any batch/head/row strides; only
the head dim must have unit stride). :func:`check` raises the
:class:`~ffpa_attn.errors.FFPAError` subclasses before anything is allocated or launched:
the checks only the package can make (one framework, one device, an extension and a GPU,
no empty dimension), and the extension's own validation (``_C.validate_forward``, the
library's ``validate_forward``), whose messages are not restated here; :func:`launch`
runs the kernel on the caller's current stream (the binding's rule,
csrc/python/binding.cpp) into outputs the caller allocated, so the
torch custom op (torch_ops) allocates with torch's allocator and CUDA graph capture
sees no foreign allocation or host synchronisation. :func:`forward` allocates with
the inputs' own framework (CuPy) and launches.

torch is never imported here: a torch tensor can only exist if the caller already
imported torch, so it is looked up in ``sys.modules``.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import build_facts, cuda, device as ffpa_device, routing
from .errors import (
    DeviceError,
    ExtensionNotAvailableError,
    SlowPathWarning,
    ShapeError,
    UnsupportedArrayTypeError,
)
from .validation import ARCH_RULES, LOWP_IMPLS, resolve_scale

__all__ = ["ArrayDesc", "IMPL_BUILD_HINTS", "arch_runs", "check", "cuda_device_of", "cuda_wheel_hint", "describe",
           "extension_problem", "forward", "impl_build_hint", "is_torch_tensor", "launch"]

# Why an impl may be missing from a build, for the error that names it; an impl without
# an entry gets the generic message. The {tma_min_sm}-style fields are the arch rules of
# cmake/kernel-facts.json (validation.ARCH_RULES): TMA, FP8 tensor cores (fed by cp.async
# below the sm_120 family, by TMA from the TMA threshold), NVFP4 only in code for the
# sm_120 family's family target.
_TMA_HINT = ("TMA code needs an arch >= {tma_min_sm}; this build has archs {archs}: rebuild with e.g. "
             "-DFFPA_CUDA_ARCHS=\"89;120f\" as the release does, or \"90a\" for Hopper")
_FP8_HINT = ("FP8 tensor cores need an arch >= {fp8_min_sm}; this build has archs {archs}: rebuild with "
             "-DFFPA_CUDA_ARCHS including 89, 90 or 120f")
_FP4_HINT = ("NVFP4 (the block-scaled mma) runs on the sm_120 family only (RTX 50xx, RTX PRO Blackwell) and "
             "needs its family target 120f; this build has archs {archs}: rebuild with -DFFPA_CUDA_ARCHS "
             "including 120f, or use impl='fp8'")
IMPL_BUILD_HINTS = {
    "tma": _TMA_HINT,
    "cute_tma": _TMA_HINT,
    "fp8": _FP8_HINT,
    "cute_fp8": ("the cp.async-fed FP8 kernel needs an arch >= {fp8_min_sm} below the sm_{sm120_family} family (there FP8 is "
                 "TMA-fed: impl='fp8' or 'cute_tma_fp8'); this build has archs {archs}: rebuild with "
                 "-DFFPA_CUDA_ARCHS including 89"),
    "cute_tma_fp8": ("the TMA-fed FP8 kernel needs an arch >= {tma_min_sm} (impl='fp8' takes the cp.async-fed "
                     "one below sm_{tma_min_sm}); this build has archs {archs}: rebuild with -DFFPA_CUDA_ARCHS including "
                     "90 or 120f"),
    "cute_tma_fp4": _FP4_HINT,
    "fp4": _FP4_HINT,
}


def impl_build_hint(impl: str) -> str:
    """Why ``impl`` is not in this build and what to do, or "" when nothing specific is known."""
    precision = LOWP_IMPLS.get(impl)
    if precision is not None:
        # The build has archs for the path (the extension's fp8_archs / fp4_archs) but not its
        # kernels: the archs are not what is missing.
        archs, available, flag = ((cuda.FP8_ARCHS, cuda.CUDA_FP8_AVAILABLE, "CUDA_FP8_AVAILABLE")
                                  if precision == "fp8" else
                                  (cuda.FP4_ARCHS, cuda.CUDA_FP4_AVAILABLE, "CUDA_FP4_AVAILABLE"))
        if archs and not available:
            return (f"the FP8 / NVFP4 kernels were not compiled in this build (archs {list(cuda.COMPILED_ARCHS)}, "
                    f"cuda.{flag} is False): install a build whose cuda.{flag} is True, or use impl='cute_tma', "
                    "'tma' or 'mma'")
    hint = IMPL_BUILD_HINTS.get(impl)
    return hint.format(archs=list(cuda.COMPILED_ARCHS), **ARCH_RULES) if hint and ARCH_RULES else ""


def cuda_wheel_hint() -> str:
    """How to install the CUDA wheel, for error messages (docs/install.md has the rest)."""
    lines = build_facts.cuda_install_lines()
    channel = build_facts.cuda_channel() or "cu<CUDA major>"
    if not lines:
        return (f"install the CUDA wheel from the project index <site>/whl/{channel}/, pinned to its local version "
                f"(ffpa-attn==V+{channel}): docs/install.md has the line")
    return (f"install the CUDA wheel from the project index, pinned to its local version: {lines['pip']} (uv: "
            f"{lines['uv']}); the +{channel} pin also replaces an installed pure wheel, which a plain ==V would "
            "keep (docs/install.md)")


# DLPack device types (dlpack.h DLDeviceType).
_DL_CUDA = 2
_DL_CUDA_MANAGED = 13

_TORCH_DTYPE_NAMES = {
    "torch.float16": "fp16",
    "torch.bfloat16": "bf16",
    "torch.float32": "fp32",
    "torch.float64": "fp64",
}
_NUMPY_LIKE_DTYPE_NAMES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}


@dataclass(frozen=True)
class ArrayDesc:
    """What validation needs to know about one device array, framework-neutral."""

    framework: str  # "torch" or the top-level module name of the array type (e.g. "cupy")
    shape: tuple[int, ...]
    dtype: str  # fp16 / bf16 / fp32 / fp64 / the framework's own spelling
    # Strides in elements; None where only the extension can read them (DLPack-only
    # arrays: the launch checks them) or for C-contiguous arrays.
    strides: tuple[int, ...] | None
    device: int


def _torch_module() -> Any | None:
    return sys.modules.get("torch")


def is_torch_tensor(x: Any) -> bool:
    torch = _torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def cuda_device_of(x: Any) -> int | None:
    """CUDA ordinal of x, or None when x is not (known to be) in CUDA memory (the kernels'
    device: CPU tensors under FFPA_DEVICE=emulated, ffpa_attn.device)."""
    if is_torch_tensor(x):
        return ffpa_device.ordinal(x)
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


def describe(x: Any) -> ArrayDesc:
    device = cuda_device_of(x)
    assert device is not None
    if is_torch_tensor(x):
        return ArrayDesc(
            framework="torch",
            shape=tuple(int(s) for s in x.shape),
            dtype=_TORCH_DTYPE_NAMES.get(str(x.dtype), str(x.dtype)),
            strides=tuple(int(s) for s in x.stride()),
            device=device,
        )
    framework = type(x).__module__.split(".")[0]
    shape = tuple(int(s) for s in getattr(x, "shape", ()))
    dtype = str(getattr(x, "dtype", "unknown"))
    cai = getattr(x, "__cuda_array_interface__", None)
    strides: tuple[int, ...] | None = None
    if cai is not None:
        # CAI strides are None for C-contiguous arrays (v2+), else bytes per step; a byte
        # stride that is no multiple of the element size is the launch's error.
        byte_strides = cai.get("strides")
        itemsize = np.dtype(cai["typestr"]).itemsize
        if byte_strides is not None and all(int(b) % itemsize == 0 for b in byte_strides):
            strides = tuple(int(b) // itemsize for b in byte_strides)
        if dtype == "unknown":
            dtype = str(np.dtype(cai["typestr"]))
    return ArrayDesc(framework, shape, _NUMPY_LIKE_DTYPE_NAMES.get(dtype, dtype), strides, device)


def extension_problem() -> tuple[str, str, str] | None:
    """``(reason, what is wrong, fix)`` when the kernels cannot run at all, else None.

    reason is ``"pure_wheel"`` (no ``ffpa_attn._C``) or ``"extension"`` (present but
    broken, or without forward kernels): the two fallback reasons of routing.
    """
    ext = cuda.extension()
    if ext is not None and cuda.CUDA_FWD_AVAILABLE:
        return None
    if cuda.EXTENSION_IMPORT_ERROR is not None:
        reinstall = (build_facts.cuda_install_lines().get("pip", "").replace(
            "pip install", "pip install --force-reinstall --no-deps", 1)
            or f"docs/install.md, the index <site>/whl/{build_facts.cuda_channel() or 'cu<CUDA major>'}/")
        return ("extension",
                f"the CUDA extension ffpa_attn._C is installed but failed to load ({cuda.EXTENSION_IMPORT_ERROR})",
                f"reinstall the CUDA wheel that matches this Python ({reinstall}) and check that an NVIDIA driver "
                "for CUDA 13 is installed")
    if ext is not None:
        return ("extension", "this build of ffpa_attn._C has no forward kernels compiled in",
                "rebuild with FFPA_HEAD_DIMS / FFPA_DTYPES set, or " + cuda_wheel_hint())
    return ("pure_wheel",
            "CUDA inputs need the compiled extension ffpa_attn._C, which this installation (the pure wheel) "
            "does not have",
            cuda_wheel_hint())


def _extension_or_raise() -> Any:
    device_problem = ffpa_device.problem()
    if device_problem is not None:
        raise device_problem
    problem = extension_problem()
    if problem is None:
        return cuda.extension()
    reason, what, fix = problem
    if reason == "pure_wheel":
        fix += ", or pass NumPy arrays to use the CPU reference"
    raise ExtensionNotAvailableError(f"{what}; {fix}")


def serving_arch(capability: tuple[int, int], archs: Sequence[str] | None = None) -> str | None:
    """The arch token of ``archs`` (default: this build's) whose machine code a GPU of
    ``capability`` runs (the highest it loads), or None.

    The kernels are compiled as SASS only (``-real``, cmake/FfpaCudaArchs.cmake): a plain
    arch ``XY`` runs on major X with minor >= Y, a family arch ``XYf`` on the same, an
    arch-specific ``XYa`` on exactly X.Y.
    """
    major, minor = int(capability[0]), int(capability[1])
    best: tuple[int, str] | None = None
    for token in cuda.COMPILED_ARCHS if archs is None else archs:
        m = re.fullmatch(r"(\d+)([af]?)", str(token))
        if m is None:
            continue
        t_major, t_minor = divmod(int(m[1]), 10)
        loads = (t_major, t_minor) == (major, minor) if m[2] == "a" else (t_major == major and minor >= t_minor)
        if loads and (best is None or int(m[1]) > best[0]):
            best = (int(m[1]), str(token))
    return None if best is None else best[1]


def arch_runs(capability: tuple[int, int]) -> bool:
    """Whether this build holds machine code a GPU of ``capability`` loads
    (:func:`serving_arch`). An extension that reports no archs is trusted."""
    if not cuda.COMPILED_ARCHS:
        return True
    return serving_arch(capability) is not None


def check(descs: dict[str, ArrayDesc], impl: str, accum: str) -> tuple[int, int, int, int, int, int]:
    """Every check before a launch, in the extension's order; returns (B, Hq, Hkv, Nq, Nkv, D).

    The arguments themselves (shapes, dtypes, strides, head dim, the impl and accum rules
    of this build) are the extension's to judge: ``_C.validate_forward`` runs the checks
    of its ``forward`` and hands back the error it would raise, so each message is
    written once, in csrc/src/validate.cpp and csrc/python/binding.cpp. What stays here is what
    only the package knows: the frameworks and devices of the three arrays, whether an
    extension and a GPU exist, and the empty dimensions the library would take but the
    package refuses (there is no SDPA here to give SDPA's answer)."""
    frameworks = {s.framework for s in descs.values()}
    if len(frameworks) != 1:
        raise UnsupportedArrayTypeError(
            f"q, k, v come from different frameworks ({sorted(frameworks)}); "
            "convert them to one (e.g. torch.from_dlpack) before calling ffpa_attn_func"
        )
    devices = {n: s.device for n, s in descs.items()}
    if len(set(devices.values())) != 1:
        raise DeviceError(f"q, k, v must be on the same CUDA device, got {devices}; move them with .to(device)")
    ext = _extension_or_raise()
    problem = ext.validate_forward(*((descs[n].shape, descs[n].strides, descs[n].dtype) for n in "qkv"),
                                   impl=impl, accum=accum)
    if problem is not None:
        raise problem
    if cuda.device_count() == 0:
        raise DeviceError(
            "no CUDA device: the extension sees no GPU (check nvidia-smi, the driver and "
            "CUDA_VISIBLE_DEVICES), or pass NumPy arrays / CPU tensors to use the CPU path"
        )
    b, hq, nq, d = descs["q"].shape
    hkv, nkv = descs["k"].shape[1:3]
    if min(b, hq, nq, nkv, d) <= 0:
        raise ShapeError(f"every dimension must be positive, got q {descs['q'].shape} and k/v {descs['k'].shape}")
    return b, hq, hkv, nq, nkv, d


def _exportable(x: Any) -> Any:
    # torch refuses to export a tensor that requires grad through DLPack; the kernel
    # only reads it, and autograd (torch_ops) owns the gradient.
    if is_torch_tensor(x) and getattr(x, "requires_grad", False):
        return x.detach()
    return x


def launch(q: Any, k: Any, v: Any, out: Any, lse: Any, causal: bool, scale: float, impl: str, accum: str, *,
           top_left: bool = False, window: tuple[int, int] = (-1, -1),
           varlen: dict[str, Any] | None = None) -> str:
    """``out[...] = attention(q, k, v)`` (and lse when not None) on the current stream.

    The caller has run :func:`check`; ``causal`` is bottom-right aligned (the kernels'
    convention, docs/perf.md) unless ``top_left`` (SDPA's ``is_causal``: query i sees keys
    j <= i), and ``window`` (left, right; -1 unbounded) is aligned as the mask; ``varlen``
    holds the packed layout's ``cu_seqlens_q`` / ``cu_seqlens_k`` / ``max_seqlen_q`` /
    ``max_seqlen_k`` (ffpa_attn.varlen). Both are handed to the extension only when given
    (cuda.COMPILED_MASKS says whether it has them). Returns the kernel that ran and records
    it for :func:`ffpa_attn.last_kernel`; warns when impl="auto" had to take the SIMT kernel.
    """
    ext = _extension_or_raise()
    qx, kx, vx = (_exportable(t) for t in (q, k, v))
    masks: dict[str, Any] = dict(varlen or {})
    if window != (-1, -1):
        masks.update(window_left=int(window[0]), window_right=int(window[1]))
    if top_left:
        masks.update(causal_top_left=True)
    used = ext.forward(qx, kx, vx, out, lse, bool(causal), float(scale), impl, accum=accum, **masks)
    kernel = str(used) if used is not None else impl
    routing.note_kernel(kernel)
    if impl == "auto" and kernel == "simt":
        warnings.warn(
            "impl='auto' ran the SIMT kernel, several times slower than the MMA kernel, because an "
            "input is not 16-byte aligned (data pointer, or a batch/head/row stride that is not a "
            "multiple of 8 elements); make the inputs contiguous to get the MMA kernel, or pass "
            "impl='simt' to choose it explicitly",
            SlowPathWarning,
            stacklevel=routing.caller_stacklevel(),
        )
    return kernel


def _allocate(q: Any, desc: ArrayDesc, lse_shape: tuple[int, int, int], want_lse: bool) -> tuple[Any, Any]:
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


def forward(q: Any, k: Any, v: Any, causal: bool, scale: float | None, return_lse: bool, impl: str,
            accum: str, *, top_left: bool = False) -> Any:
    """Validate, allocate with the inputs' framework, launch (the path of CuPy-like arrays)."""
    descs = {name: describe(t) for name, t in (("q", q), ("k", k), ("v", v))}
    b, hq, _hkv, nq, _nkv, d = check(descs, impl, accum)
    sm_scale = resolve_scale(scale, d)
    out, lse = _allocate(q, descs["q"], (b, hq, nq), return_lse)
    launch(q, k, v, out, lse, causal, sm_scale, impl, accum, top_left=top_left and causal)
    return (out, lse) if return_lse else out
