"""What the installed build of ffpa-attn can do on CUDA.

Every flag is read from the compiled extension ``ffpa_attn._C`` (its
``build_info()``), never guessed from the environment. In the pure wheel the
extension is absent and everything is False / empty, which is the documented
signal that only the NumPy reference path exists.

``EXTENSION_IMPORT_ERROR`` separates "absent" (``None``: the pure wheel, or a source
tree without a build) from "present but broken" (the loader's message, e.g. an
undefined symbol or a missing ``libffpa_kernels.so``): hiding the second would turn
a broken install into a silent CPU fallback.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from . import build_facts, device as ffpa_device

__all__ = [
    "CUDA_FWD_AVAILABLE",
    "CUDA_BWD_AVAILABLE",
    "BWD_INSTANCES",
    "CUDA_TMA_AVAILABLE",
    "CUDA_CUTE_AVAILABLE",
    "CUDA_CUTE_TMA_AVAILABLE",
    "CUDA_FP8_AVAILABLE",
    "CUDA_FP4_AVAILABLE",
    "FP8_ARCHS",
    "FP4_ARCHS",
    "CUTLASS_VERSION",
    "F16_ACC_AVAILABLE",
    "TMA_ARCHS",
    "COMPILED_HEAD_DIMS",
    "COMPILED_DTYPES",
    "COMPILED_ARCHS",
    "COMPILED_IMPLS",
    "COMPILED_MASKS",
    "CUDA_RUNTIME",
    "EXTENSION_IMPORT_ERROR",
    "EXTENSION_PATH",
    "adopt_extension",
    "auto_impl",
    "build_info",
    "device_count",
    "extension",
    "extension_info",
]

def _load_extension() -> tuple[ModuleType | None, str | None]:
    # ffpa_attn.device says which extension (ffpa_attn._C_emulated under
    # FFPA_DEVICE=emulated) and is told how the import went.
    name = ffpa_device.extension_module()
    if name is None:
        return None, None  # a device that does not exist: ffpa_attn.device.problem() says so
    module, error = _import_extension(name)
    ffpa_device.loaded(error)
    return module, error


def _import_extension(name: str) -> tuple[ModuleType | None, str | None]:
    try:
        # import_module, not "from . import _C": the latter turns "absent" into a plain
        # ImportError that cannot be told apart from a broken extension.
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        # Only "ffpa_attn._C itself is missing" means the pure wheel; a missing
        # module *inside* the extension's import is a broken install. The emulated
        # device's extension missing is an error (ffpa_attn.device.problem()).
        if exc.name == name and name != ffpa_device.EMULATED_MODULE:
            return None, None
        return None, f"{type(exc).__name__}: {exc}"
    except ImportError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return module, None


def _read_info(module: ModuleType | None) -> dict[str, Any]:
    if module is None:
        return {}
    return dict(module.build_info())


# The flags below are module attributes that the rest of the package reads as cuda.X at
# call time; _set_extension assigns them all, at import and when ffpa_attn.jit loads a
# first-use build (adopt_extension), so no reader keeps a stale copy.
_C: ModuleType | None = None
EXTENSION_IMPORT_ERROR: str | None = None


def _set_extension(module: ModuleType | None, import_error: str | None) -> None:
    global _C, EXTENSION_IMPORT_ERROR, _INFO
    global CUDA_FWD_AVAILABLE, CUDA_TMA_AVAILABLE, TMA_ARCHS, F16_ACC_AVAILABLE, CUDA_CUTE_AVAILABLE
    global CUDA_CUTE_TMA_AVAILABLE, CUTLASS_VERSION, CUDA_FP8_AVAILABLE, CUDA_FP4_AVAILABLE, FP8_ARCHS
    global FP4_ARCHS, CUDA_BWD_AVAILABLE, BWD_INSTANCES, COMPILED_HEAD_DIMS, COMPILED_DTYPES, COMPILED_ARCHS
    global COMPILED_IMPLS, COMPILED_MASKS, CUDA_RUNTIME, EXTENSION_PATH
    _C, EXTENSION_IMPORT_ERROR = module, import_error
    _INFO = _read_info(_C)

    CUDA_FWD_AVAILABLE = bool(_INFO.get("fwd", False))
    # Every flag says what the extension compiled; none is inferred from the GPU present.
    # CUDA_TMA_AVAILABLE: the TMA-fed split-D kernel (impl="tma") was compiled for at least
    # one arch >= 90 (TMA_ARCHS): the release's 120f (sm_120 family), or 90/90a in builds
    # naming them. Whether the current GPU can run that code is another question, answered
    # at launch (UnsupportedImplError naming the compiled archs) and by auto_impl().
    CUDA_TMA_AVAILABLE = bool(_INFO.get("tma", False))
    TMA_ARCHS = tuple(str(a) for a in _INFO.get("tma_archs", ()))
    # F16_ACC_AVAILABLE: accum="fp16" (fp16 accumulation in the mma/tma kernels) exists,
    # i.e. the fp16 instances were compiled.
    F16_ACC_AVAILABLE = bool(_INFO.get("f16_acc", False))
    # CUDA_CUTE_AVAILABLE: the CuTe kernels (impl="cute", built on CUTLASS's CuTe headers,
    # CUTLASS_VERSION) were compiled (impl="cute" runs below the sm_120 family; there the
    # CuTe kernel is TMA-fed only, and the launch refuses "cute" naming "cute_tma"). CUDA_CUTE_TMA_AVAILABLE: upstream's flag, True exactly
    # when both the TMA-fed and the CuTe kernels are compiled in (impl="cute_tma", archs
    # >= 90: TMA_ARCHS).
    CUDA_CUTE_AVAILABLE = bool(_INFO.get("cute", False))
    CUDA_CUTE_TMA_AVAILABLE = bool(_INFO.get("cute_tma", False))
    CUTLASS_VERSION = _INFO.get("cutlass") or None
    # The low-precision paths (fp16/bf16 in, the same dtype out, fp32 accumulation; never picked
    # by impl="auto"; docs/install.md, "Low-precision paths"). CUDA_FP8_AVAILABLE: an FP8 (e4m3)
    # kernel has code for at least one arch of FP8_ARCHS (the build's archs >= 89): impl="fp8",
    # "cute_fp8" (cp.async-fed, archs below the sm_120 family) and "cute_tma_fp8" (TMA-fed,
    # archs >= 90), whichever COMPILED_IMPLS lists. CUDA_FP4_AVAILABLE: the NVFP4 kernel
    # (impl="fp4" / "cute_tma_fp4") has code for FP4_ARCHS, the build's family-specific sm_120
    # targets (120f; plain 120 cannot hold the block-scaled mma). The *_ARCHS tuples are the
    # extension's fp8_archs / fp4_archs: the archs such code is for, listed even in a build
    # whose low-precision kernels were not compiled (the flag is False then). Which GPU runs
    # which kernel is decided at launch (UnsupportedImplError naming the GPUs that have it).
    CUDA_FP8_AVAILABLE = bool(_INFO.get("fp8", False))
    CUDA_FP4_AVAILABLE = bool(_INFO.get("fp4", False))
    FP8_ARCHS = tuple(str(a) for a in _INFO.get("fp8_archs", ()))
    FP4_ARCHS = tuple(str(a) for a in _INFO.get("fp4_archs", ()))
    # CUDA_BWD_AVAILABLE: the backward kernels (csrc/kernels/ffpa/bwd_kernel_mma.cuh: dQ, dK,
    # dV, cp.async-fed mma.sync, every compiled arch) were compiled; BWD_INSTANCES lists their
    # (head dim, dtype) instances. backward="auto" takes them where an instance exists.
    CUDA_BWD_AVAILABLE = bool(_INFO.get("bwd", False))
    BWD_INSTANCES = tuple(
        (int(str(e).split(":")[0]), str(e).split(":")[1]) for e in _INFO.get("bwd_instances", ()))
    COMPILED_HEAD_DIMS = tuple(sorted(int(d) for d in _INFO.get("head_dims", ())))
    COMPILED_DTYPES = tuple(str(d) for d in _INFO.get("dtypes", ()))
    COMPILED_ARCHS = tuple(str(a) for a in _INFO.get("archs", ()))
    COMPILED_IMPLS = tuple(str(i) for i in _INFO.get("impls", ()))
    # The masks the kernels take beyond causal, forward and backward ("window": a sliding
    # window, "seqused_k": per-batch key lengths, "varlen": packed sequences with cu_seqlens):
    # the extension's build_info()["masks"]; empty in builds without them, whose torch calls
    # run those masks on torch SDPA (ffpa_attn.routing.FALLBACK_REASONS "window" / "varlen").
    COMPILED_MASKS = tuple(str(m) for m in _INFO.get("masks", ()))
    CUDA_RUNTIME = _INFO.get("cuda_runtime") or None
    EXTENSION_PATH = getattr(_C, "__file__", None)


_set_extension(*_load_extension())


def adopt_extension(module: ModuleType) -> None:
    """Make a JIT-built ``_C`` (ffpa_attn.jit) the extension every flag and launch reads."""
    _set_extension(module, None)


def extension() -> ModuleType | None:
    """The loaded ``ffpa_attn._C`` module, or None when it is absent or broken."""
    return _C


def extension_info() -> dict[str, Any]:
    """A copy of ``ffpa_attn._C.build_info()`` ({} without the extension)."""
    return dict(_INFO)


def device_count() -> int:
    """Number of CUDA devices the extension sees (0 without the extension)."""
    if _C is None:
        return 0
    return int(_C.device_count())


def auto_impl() -> str | None:
    """The kernel ``impl="auto"`` runs for 16-byte aligned inputs on the current device.

    ``"tma"`` on an sm_120-family GPU when this build's TMA code runs there, else
    ``"mma"`` (never a CuTe or a low-precision kernel); None without the extension or a
    device. Unlike the flags above this asks
    the device (the extension's ``auto_impl()``, the same rule its forward() applies),
    so it is a function, evaluated when called. Misaligned inputs take ``"simt"`` under
    fp32 accumulation (see :class:`~ffpa_attn.errors.SlowPathWarning`).
    """
    if _C is None or device_count() == 0:
        return None
    query = getattr(_C, "auto_impl", None)
    return str(query()) if query is not None else None


def build_info() -> dict[str, Any]:
    """How this installation was built, and what its extension contains
    (``ffpa_attn.build_info``).

    Keys: ``version``, ``source_commit``, ``source_dirty``, ``channel`` (None for the
    pure wheel), ``toolchain`` (cmake/gcc/nvcc versions), ``profile`` (None when the
    package runs from a source tree): the build's record (build_facts); then the extension's
    own ``build_info()`` keys (``head_dims``, ``dtypes``, ``archs``, ``fwd``, ``tma``,
    ``tma_archs``, ``f16_acc``, ``cute``, ``cute_tma``, ``fp8``, ``fp8_archs``, ``fp4``,
    ``fp4_archs``, ``cuda_runtime``, ``impls``; empty/False without it; ``auto_impl``,
    the rule ``impl="auto"`` follows in words, when the extension reports it; the
    kernel it picks on the current GPU is :func:`auto_impl`), ``tolerances`` (the build's
    table, absent in a source tree) and ``extension_available``, ``extension_path``,
    ``extension_import_error``.
    """
    info = build_facts.record()
    info.update(
        {
            "head_dims": list(COMPILED_HEAD_DIMS),
            "dtypes": list(COMPILED_DTYPES),
            "archs": list(COMPILED_ARCHS),
            "fwd": CUDA_FWD_AVAILABLE,
            "tma": CUDA_TMA_AVAILABLE,
            "tma_archs": list(TMA_ARCHS),
            "f16_acc": F16_ACC_AVAILABLE,
            "cute": CUDA_CUTE_AVAILABLE,
            "cute_tma": CUDA_CUTE_TMA_AVAILABLE,
            "fp8": CUDA_FP8_AVAILABLE,
            "fp8_archs": list(FP8_ARCHS),
            "fp4": CUDA_FP4_AVAILABLE,
            "fp4_archs": list(FP4_ARCHS),
            "cuda_runtime": CUDA_RUNTIME,
            "impls": list(COMPILED_IMPLS),
        }
    )
    # Keys the extension reports beyond the documented ones are passed through.
    for key, value in extension_info().items():
        info.setdefault(key, value)
    table = build_facts.tolerances()
    if table is not None:
        info["tolerances"] = table
    info["extension_available"] = _C is not None
    info["extension_path"] = EXTENSION_PATH
    info["extension_import_error"] = EXTENSION_IMPORT_ERROR
    return info
