"""NumPy reference attention: the ground truth for tests, notebooks and the pure wheel.

``attention(q, k, v)`` computes ``softmax(q k^T * scale [+ causal mask]) v`` for
``[B, H, N, D]`` arrays in fp32 or fp64 with a numerically stable softmax (the row
maximum is subtracted before ``exp``).

Conventions (the CUDA kernels follow the same ones):

* **Grouped-query attention**: k and v may have ``Hkv`` heads with ``Hq % Hkv == 0``;
  query head ``h`` reads kv head ``h // (Hq // Hkv)``.
* **Causal mask, bottom-right aligned** (the flash-attention >= 2.1 convention): query
  row ``i`` may attend to key ``j`` iff ``j <= i + (Nkv - Nq)``. For ``Nq == Nkv`` this
  is the usual lower triangle; for decoding (``Nq < Nkv``) the last query sees every
  key. When ``Nq > Nkv`` the first ``Nq - Nkv`` rows see no key at all: their output is
  0 and their log-sum-exp is ``-inf`` (the log of an empty sum).
* **LSE** is the natural log of the row sum of ``exp(scale * q.k)`` over the keys a row
  may see, fp32/fp64 like the computation, shape ``[B, Hq, Nq]``.
* **NaN and inf** give what torch SDPA's math backend gives for the same inputs (the rule
  of every path, docs/install.md "NaN and inf"): the mask is added to the scores as a
  -inf bias, a row with a NaN or +inf score is NaN, a row that sees no key is 0, and
  ``P V`` is a matrix product (``0 * inf`` is NaN).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import ShapeError, UnsupportedDTypeError
from .validation import check_gqa_heads

__all__ = ["attention", "causal_mask", "round_to_bfloat16"]

_COMPUTE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def causal_mask(nq: int, nkv: int) -> np.ndarray:
    """Boolean [nq, nkv] mask, True where query i may attend to key j (bottom-right)."""
    rows = np.arange(nq)[:, None]
    cols = np.arange(nkv)[None, :]
    return cols <= rows + (nkv - nq)


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round fp32 values to the nearest bfloat16 (ties to even), returned as fp32.

    NumPy has no bfloat16 type; this lets host code see exactly the values a bf16
    tensor would hold.
    """
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    bits = x32.view(np.uint32).astype(np.uint64)
    rounding = np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))
    rounded = ((bits + rounding) & np.uint64(0xFFFF0000)).astype(np.uint32)
    # NaN must stay NaN: rounding can carry a NaN payload into the infinity pattern.
    return np.where(np.isnan(x32), x32, rounded.view(np.float32))


def _check_shapes(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[int, int, int, int, int, int]:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 4:
            raise ShapeError(
                f"{name} must be 4-D [B, H, N, D], got shape {tuple(t.shape)}; "
                "reshape it (e.g. x.reshape(B, N, H, D).transpose(0, 2, 1, 3))"
            )
    b, hq, nq, d = q.shape
    bk, hkv, nkv, dk = k.shape
    if k.shape != v.shape:
        raise ShapeError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if bk != b:
        raise ShapeError(f"q and k/v must have the same batch size, got {b} and {bk}")
    if dk != d:
        raise ShapeError(f"q and k/v must have the same head dim, got {d} and {dk}")
    check_gqa_heads(hq, hkv)
    if min(b, hq, nq, nkv, d) <= 0:
        raise ShapeError(
            f"every dimension must be positive, got q {tuple(q.shape)} and k/v {tuple(k.shape)}"
        )
    return b, hq, hkv, nq, nkv, d


def attention(
    q: Any,
    k: Any,
    v: Any,
    causal: bool = False,
    scale: float | None = None,
    return_lse: bool = False,
    dtype: Any = np.float32,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Attention on the host in ``dtype`` (fp32 or fp64); see the module docstring.

    Inputs of any floating dtype are converted to ``dtype`` first. Returns ``out``
    ([B, Hq, Nq, D], ``dtype``), or ``(out, lse)`` with ``return_lse=True``.
    """
    compute = np.dtype(dtype)
    if compute not in _COMPUTE_DTYPES:
        raise UnsupportedDTypeError(
            f"reference.attention computes in float32 or float64, got dtype={compute}; "
            "pass dtype=np.float32 or dtype=np.float64"
        )
    arrays = [np.asarray(t) for t in (q, k, v)]
    for name, t in zip(("q", "k", "v"), arrays):
        if not np.issubdtype(t.dtype, np.floating):
            raise UnsupportedDTypeError(
                f"{name} has dtype {t.dtype}; the reference takes floating-point arrays "
                "(cast with .astype(np.float32))"
            )
    qa, ka, va = (t.astype(compute, copy=False) for t in arrays)
    b, hq, hkv, nq, nkv, d = _check_shapes(qa, ka, va)
    sm_scale = compute.type(1.0 / math.sqrt(d) if scale is None else scale)

    group = hq // hkv
    # [B, Hkv, G, Nq, D] against [B, Hkv, 1, Nkv, D]: each kv head serves its G query
    # heads by broadcasting, with no copy of k or v.
    qg = qa.reshape(b, hkv, group, nq, d)
    kg = ka[:, :, None]
    vg = va[:, :, None]
    # As SDPA's math backend (NaN and inf below): q and k each scaled by sqrt(scale).
    root = compute.type(math.sqrt(sm_scale))
    with np.errstate(over="ignore", invalid="ignore"):
        scores = np.matmul(qg * root, np.swapaxes(kg * root, -1, -2))
        if causal:
            # The mask is ADDED as a -inf bias: a NaN or +inf score under it stays NaN.
            scores = scores + np.where(causal_mask(nq, nkv), compute.type(0), compute.type(-np.inf))

    # A row that sees no key (every score -inf) gives 0 and LSE -inf; a NaN or +inf score
    # makes its row NaN (np.max passes a NaN on, and exp(inf - inf) is NaN).
    no_key = np.all(scores == -np.inf, axis=-1, keepdims=True)
    row_max = np.where(no_key, compute.type(0), scores.max(axis=-1, keepdims=True))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        probs = np.exp(scores - row_max)
        row_sum = probs.sum(axis=-1, keepdims=True)
        probs = np.where(no_key, compute.type(0), probs / np.where(no_key, compute.type(1), row_sum))
        # P V as a matrix product: 0 * inf in V is NaN, as in SDPA.
        out = np.matmul(probs, vg)
        lse = np.where(no_key, compute.type(-np.inf), row_max + np.log(row_sum))[..., 0]

    out = out.reshape(b, hq, nq, d).astype(compute, copy=False)
    if not return_lse:
        return out
    return out, lse.reshape(b, hq, nq).astype(compute, copy=False)
