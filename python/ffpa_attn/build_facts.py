"""The build's facts: the one reader of the generated ``ffpa_attn._build_info``.

CMake writes ``_build_info.py`` into every wheel and staged build
(cmake/templates/_build_info.py.in, cmake/FfpaWheelPackaging.cmake): the build's own
record (version, commit, channel, toolchain, profile), this release's CUDA channel, archs
and install lines (the pure wheel carries them too, for its hints), and the kernels'
facts of cmake/kernel-facts.json (impls, arch rules, tolerances). A source tree has no
such module: every reader here then answers "unknown" (None, empty) and
``SOURCE_TREE_PROBLEM`` says what to do. No other module of the package imports
``_build_info``; they ask this one, which imports nothing of the package but the errors.

``GENERATED`` is the module read at import (None in a source tree); the readers look it
up at call time, so one assignment (a test's stand-in) changes what they all answer.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from .errors import FFPAError

__all__ = ["BUILD_FIELDS", "GENERATED", "SOURCE_TREE_PROBLEM", "arch_rules", "cuda_channel", "cuda_install_lines",
           "cuda_wheel_archs", "emulated_archs", "impls", "record", "tolerance", "tolerances", "version"]

# What a source tree lacks: the generated build-info module, which carries the kernels'
# facts (cmake/kernel-facts.json) and the build's own. Importing works there (the notebook
# checks read the deprecation registry from it); choosing a kernel or a tolerance does not.
SOURCE_TREE_PROBLEM = (
    "ffpa_attn runs from a source tree without its generated _build_info.py, which carries the kernels' "
    "facts (cmake/kernel-facts.json: impls, tolerances): build the package (cmake --workflow --preset dev) "
    "and import it from build/dev/python, or install a wheel")

# The build's own record, as ffpa_attn.build_info() reports it (lower-cased).
BUILD_FIELDS = ("VERSION", "SOURCE_COMMIT", "SOURCE_DIRTY", "CHANNEL", "TOOLCHAIN", "PROFILE")


def _load() -> ModuleType | None:
    try:
        return importlib.import_module(f"{__package__}._build_info")
    except ImportError:
        return None


GENERATED: ModuleType | None = _load()


def version() -> str:
    """This build's version (``ffpa_attn.__version__``); ``0+unknown`` in a source tree."""
    return str(getattr(GENERATED, "VERSION", "0+unknown"))


def record() -> dict[str, Any]:
    """The build's own record: ``version``, ``source_commit``, ``source_dirty``, ``channel``
    (None for the pure wheel), ``toolchain`` (a copy), ``profile``; None where unknown."""
    info: dict[str, Any] = {field.lower(): getattr(GENERATED, field, None) for field in BUILD_FIELDS}
    info["version"] = version()
    if isinstance(info["toolchain"], dict):
        info["toolchain"] = dict(info["toolchain"])
    return info


def tolerances() -> dict[str, dict[str, float]] | None:
    """The accuracy table of cmake/kernel-facts.json (path -> bounds, a copy); None in a
    source tree."""
    table = getattr(GENERATED, "TOLERANCES", None)
    return None if table is None else {path: dict(row) for path, row in table.items()}


def tolerance(path: str) -> dict[str, float]:
    """The accuracy a path is held to, against the fp32 / fp64 reference on the same inputs.

    ``path``: ``"fp16"``, ``"bf16"``, ``"fp16_acc"`` (fp16 accumulation), ``"fp8"``,
    ``"fp4"``. Keys: ``rtol`` / ``atol`` (elementwise, ``|out - ref| <= atol + rtol
    |ref|``), ``lse`` (max LSE error), and for the low-precision paths ``min_cos``
    (cosine similarity), ``max_rel_l1`` (``sum |out - ref| / sum |ref|``) and
    ``max_gain_err`` (``|sum(out ref) / sum(ref^2) - 1|``); 0 where unused. The one table
    is cmake/kernel-facts.json; both wheels carry it (docs/install.md states it).
    """
    table = tolerances()
    if table is None:
        raise FFPAError(SOURCE_TREE_PROBLEM)
    if path not in table:
        raise ValueError(f"no tolerance for {path!r}; the paths are {', '.join(table)}")
    return {key: float(value) for key, value in table[path].items()}


def impls() -> dict[str, tuple[tuple[str, ...], tuple[str, ...], str | None]]:
    """The C API's impls in its order (cmake/kernel-facts.json): name -> (accumulators, arch
    features needed, precision); empty in a source tree."""
    return dict(getattr(GENERATED, "IMPLS", {}))


def arch_rules() -> dict[str, int]:
    """cmake/kernel-facts.json's "arch_rules": min_sm (the lowest arch the kernels support),
    tma_min_sm, fp8_min_sm, sm120_family; empty in a source tree."""
    if GENERATED is None:
        return {}
    return {"min_sm": GENERATED.MIN_SM, "tma_min_sm": GENERATED.TMA_MIN_SM, "fp8_min_sm": GENERATED.FP8_MIN_SM,
            "sm120_family": GENERATED.SM120_FAMILY}


def cuda_channel() -> str | None:
    """The CUDA channel of this release (``cu13``): where its CUDA wheels are published;
    None in a source tree."""
    return getattr(GENERATED, "CUDA_CHANNEL", None)


def cuda_install_lines() -> dict[str, str]:
    """This release's CUDA install lines, ``{"pip": ..., "uv": ...}`` with ``<site>`` for the
    project's site (cmake/install-lines.json); {} in a source tree."""
    return dict(getattr(GENERATED, "CUDA_INSTALL_LINES", {}) or {})


def emulated_archs() -> tuple[dict[str, int], str] | None:
    """The emulated device's archs (cmake/kernel-facts.json's ``emulated_device``: the
    ``FFPA_EMULATED_ARCH`` name -> sm number) and the default one; None in a source tree."""
    archs = getattr(GENERATED, "EMULATED_ARCHS", None)
    if archs is None:
        return None
    return dict(archs), str(GENERATED.EMULATED_DEFAULT_ARCH)


def cuda_wheel_archs() -> tuple[str, ...]:
    """The archs this release's CUDA wheels hold code for (FFPA_CUDA_ARCHS); () in a source
    tree."""
    return tuple(str(a) for a in getattr(GENERATED, "CUDA_WHEEL_ARCHS", ()))
