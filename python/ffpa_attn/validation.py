"""Argument checks shared by every path (NumPy, torch math, the CUDA kernels).

No imports from the rest of the package besides the errors: ``interface`` and
``torch_math`` both stand on this module, so the dependency runs one way.
"""

from __future__ import annotations

import math

from .errors import ShapeError

__all__ = ["check_4d_shapes", "resolve_scale"]


def check_4d_shapes(shapes: dict[str, tuple[int, ...]]) -> tuple[int, int, int, int, int, int]:
    for name, shape in shapes.items():
        if len(shape) != 4:
            raise ShapeError(
                f"{name} must be 4-D [B, H, N, D], got shape {shape}; "
                "transpose [B, N, H, D] inputs with .transpose(1, 2) (torch) / .transpose(0, 2, 1, 3)"
            )
    b, hq, nq, d = shapes["q"]
    bk, hkv, nkv, dk = shapes["k"]
    if shapes["k"] != shapes["v"]:
        raise ShapeError(f"k and v must have the same shape, got {shapes['k']} and {shapes['v']}")
    if bk != b:
        raise ShapeError(f"q and k/v must have the same batch size, got {b} and {bk}")
    if dk != d:
        raise ShapeError(f"q and k/v must have the same head dim, got {d} and {dk}")
    if hkv <= 0 or hq % hkv != 0:
        raise ShapeError(
            f"the number of query heads ({hq}) must be a multiple of the number of kv heads "
            f"({hkv}) for grouped-query attention"
        )
    if min(b, hq, nq, nkv, d) <= 0:
        raise ShapeError(f"every dimension must be positive, got q {shapes['q']} and k/v {shapes['k']}")
    return b, hq, hkv, nq, nkv, d


def resolve_scale(scale: float | None, d: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d)
    value = float(scale)
    if not math.isfinite(value):
        raise ValueError(f"scale must be a finite number, got {scale!r}")
    return value
