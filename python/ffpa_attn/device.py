"""The device the kernels run on: a CUDA GPU, or the emulated device.

The one seam between the package's CUDA path and the memory it runs on. Without
``FFPA_DEVICE`` the kernels' device is the GPU: CUDA arrays are its arrays and
``ffpa_attn._C`` its extension. With ``FFPA_DEVICE=emulated`` it is the emulated device
(csrc/emulated: the real host code and kernels run on a CPU emulator, for contributors
without a GPU): CPU torch tensors are its arrays, ``ffpa_attn._C_emulated`` (built in a
``dev`` or ``ci`` tree, never shipped) its extension, and ``FFPA_EMULATED_ARCH`` (an
arch of cmake/kernel-facts.json's ``emulated_device``: 89, 90 or 120f, default 90) the GPU
it stands for, so the routing, fallback reasons, errors and ``last_kernel()`` names are
that GPU's. Nothing else in the package asks which device it
is: :func:`device_type`, :func:`on_device` and :func:`capability` answer for it, and
``ffpa_attn.cuda`` loads :func:`extension_module`.

The variable is read once, when ``ffpa_attn.cuda`` loads the extension. A value other
than ``emulated``, or ``emulated`` without an importable ``_C_emulated``, makes every torch
call raise the error that names the fix (:func:`problem`), never a quiet run of torch's
own CPU attention. torch is never imported here.
"""

from __future__ import annotations

import os
from typing import Any

from . import build_facts
from .errors import DeviceError, ExtensionNotAvailableError, FFPAError

__all__ = ["ARCH_ENV", "DEVICE_ENV", "EMULATED", "EMULATED_MODULE", "GPU_MODULE", "capability", "device_type",
           "emulated", "emulated_arch", "emulated_archs", "extension_module", "loaded", "on_device", "ordinal",
           "problem", "requested"]

DEVICE_ENV = "FFPA_DEVICE"
ARCH_ENV = "FFPA_EMULATED_ARCH"
EMULATED = "emulated"
GPU_MODULE = "ffpa_attn._C"
EMULATED_MODULE = "ffpa_attn._C_emulated"

_BUILD_FIX = ("build it in a dev or ci tree (cmake --preset dev && cmake --build build/dev --target "
              "ffpa_C_emulated_cp<python version, e.g. 312>) and put <build tree>/python on PYTHONPATH "
              "(docs/install.md, \"The emulated device (no GPU)\"), or unset FFPA_DEVICE to use a GPU")


def requested() -> str | None:
    """The device ``FFPA_DEVICE`` names, as written (None when unset or empty: the GPU)."""
    value = os.environ.get(DEVICE_ENV, "").strip()
    return value or None


# What ffpa_attn.cuda loaded (it tells this module; this module never imports it): the
# device FFPA_DEVICE named then (None: CUDA GPUs) and the extension's import problem.
_LOADED_FOR: str | None = None
_IMPORT_ERROR: str | None = None


def extension_module() -> str | None:
    """The extension ``ffpa_attn.cuda`` loads (``_C_emulated`` under ``FFPA_DEVICE=emulated``;
    None for a device that does not exist), noting the device it is loaded for."""
    global _LOADED_FOR, _IMPORT_ERROR
    _LOADED_FOR, _IMPORT_ERROR = requested(), None
    if _LOADED_FOR is None:
        return GPU_MODULE
    return EMULATED_MODULE if _LOADED_FOR == EMULATED else None


def loaded(import_error: str | None) -> None:
    """Called by ``ffpa_attn.cuda`` with the extension's import problem (None: it loaded)."""
    global _IMPORT_ERROR
    _IMPORT_ERROR = import_error


def _state() -> tuple[str | None, str | None]:
    return _LOADED_FOR, _IMPORT_ERROR


def emulated() -> bool:
    """Whether the kernels' device is the emulated one (its extension loaded)."""
    return _state()[0] == EMULATED


def problem() -> Exception | None:
    """The error every torch call raises when ``FFPA_DEVICE`` asks for what cannot run, else None."""
    device, import_error = _state()
    if device is None:
        return None
    if device != EMULATED:
        return DeviceError(f"{DEVICE_ENV}={device!r} names no device: set {DEVICE_ENV}={EMULATED} (the emulated "
                           "device, CPU tensors through the kernels) or unset it (CUDA GPUs)")
    if import_error is not None:
        return ExtensionNotAvailableError(
            f"{DEVICE_ENV}={EMULATED} but the emulated device's extension {EMULATED_MODULE} does not import "
            f"({import_error}): {_BUILD_FIX}")
    return None


def _raise_problem() -> None:
    error = problem()
    if error is not None:
        raise error


def device_type(t: Any) -> str:
    """A torch tensor's device type as the routing reads it: ``"cuda"`` for the kernels'
    device (CPU tensors under the emulated device), else torch's own name."""
    _raise_problem()
    kind = str(t.device.type)
    if not emulated():
        return kind
    if kind == "cpu":
        return "cuda"
    if kind == "cuda":
        raise DeviceError(f"CUDA tensors while {DEVICE_ENV}={EMULATED}: the emulated device takes CPU tensors; "
                          f"move them with .cpu(), or unset {DEVICE_ENV} to run them on the GPU")
    return kind


def on_device(t: Any) -> bool:
    """Whether a torch tensor is in the kernels' device memory."""
    return device_type(t) == "cuda"


def ordinal(t: Any) -> int | None:
    """The device ordinal of a torch tensor in the kernels' memory, else None (no error)."""
    if problem() is not None:
        return None
    if emulated():
        return 0 if t.device.type == "cpu" else None
    return int(t.device.index or 0) if t.is_cuda else None


def emulated_archs() -> tuple[dict[str, int], str]:
    """The emulated device's archs (``FFPA_EMULATED_ARCH`` name -> sm number) and the default
    one: cmake/kernel-facts.json's ``emulated_device``, carried by the build's _build_info
    (the emulated device exists in build trees only, which always stage it)."""
    archs = build_facts.emulated_archs()
    if archs is None:
        raise FFPAError(build_facts.SOURCE_TREE_PROBLEM)
    return archs


def emulated_arch() -> str:
    """The emulated arch ``FFPA_EMULATED_ARCH`` names (its default when unset), checked."""
    archs, default = emulated_archs()
    token = os.environ.get(ARCH_ENV, "").strip() or default
    if token not in archs:
        names = list(archs)
        words = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
        raise DeviceError(f"{ARCH_ENV}={token!r} is not an emulated arch: set it to {words} (or unset it: "
                          f"{default})")
    return token


def capability(index: int) -> tuple[int, int] | None:
    """The emulated GPU's compute capability (``FFPA_EMULATED_ARCH``, read per call as the
    library does); None on a real device (torch asks the GPU)."""
    if not emulated():
        return None
    sm = emulated_archs()[0][emulated_arch()]
    return sm // 10, sm % 10
