"""Attention in plain torch ops: the host path of the custom op (CPU tensors), its
backward math, and a reference on any device.

* :func:`attention_math`: the forward, fp32 compute (fp64 for fp64 inputs), with the
  three mask kinds of the op (none, causal top-left as SDPA's ``is_causal``, causal
  bottom-right as the kernels and flash-attention), returning the LSE too.
* :func:`attention_backward_lse`: the backward from the forward's output and LSE, the
  math of the fused (flash / memory-efficient) backward: ``P = exp(S - LSE)`` is
  recomputed one block of query rows at a time, so memory is O(rows_per_block * Nkv)
  instead of O(Nq * Nkv). This is the backward of CPU tensors, and of CUDA tensors
  where torch's fused backward does not take the input (torch_ops).
* :func:`attention_backward_recompute`: the older backward from q, k and v alone (the
  full ``Nq x Nkv`` probabilities in fp32), kept as the explicit ``backward="recompute"``.

Imports torch; stands only on ``validation`` and the errors.
"""

from __future__ import annotations

import math

import torch

from .errors import UnsupportedDTypeError
from .validation import check_4d_shapes

__all__ = ["MASK_BOTTOM_RIGHT", "MASK_NONE", "MASK_TOP_LEFT", "attention_backward_lse",
           "attention_backward_recompute", "attention_math", "causal_allowed", "expand_kv", "scale_for",
           "softmax_probs"]

# The mask kinds of the custom op, numbered as torch's memory-efficient attention numbers
# its custom_mask_type (0 none, 1 causal from the top left, 2 from the bottom right), so
# the fused backward takes them as they are.
MASK_NONE = 0
MASK_TOP_LEFT = 1
MASK_BOTTOM_RIGHT = 2

# Elements of one recomputed [B, Hq, rows, Nkv] block in attention_backward_lse (fp32: 64 MiB).
_BLOCK_ELEMENTS = 1 << 24


def expand_kv(x: torch.Tensor, hq: int) -> torch.Tensor:
    """Repeat kv heads so each query head has its own ([B, Hkv, N, D] -> [B, Hq, N, D])."""
    hkv = x.shape[1]
    return x if hkv == hq else x.repeat_interleave(hq // hkv, dim=1)


def _mask_kind(causal: bool | int) -> int:
    # attention_math's causal=True has always meant bottom-right (the kernels' convention).
    if causal is True:
        return MASK_BOTTOM_RIGHT
    if causal is False or causal is None:
        return MASK_NONE
    kind = int(causal)
    if kind not in (MASK_NONE, MASK_TOP_LEFT, MASK_BOTTOM_RIGHT):
        raise ValueError(f"mask kind must be 0 (none), 1 (causal top-left) or 2 (causal bottom-right), got {causal!r}")
    return kind


def causal_allowed(nq: int, nkv: int, kind: int, device: torch.device,
                   rows: slice | None = None) -> torch.Tensor | None:
    """Boolean [rows, Nkv], True where a query row may attend to a key; None without a mask.

    Top-left (SDPA's is_causal): key j <= i. Bottom-right: j <= i + (Nkv - Nq).
    """
    if kind == MASK_NONE:
        return None
    start, stop = (0, nq) if rows is None else (rows.start, rows.stop)
    r = torch.arange(start, stop, device=device)[:, None]
    c = torch.arange(nkv, device=device)[None, :]
    offset = nkv - nq if kind == MASK_BOTTOM_RIGHT else 0
    return c <= r + offset


def _compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def softmax_probs(q32: torch.Tensor, k32: torch.Tensor, causal: bool | int,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax probabilities [B, Hq, Nq, Nkv] and LSE [B, Hq, Nq] in q32's dtype.

    ``causal``: False/True (bottom-right, as before) or a mask kind of this module.
    """
    scores = torch.matmul(q32, k32.transpose(-1, -2)) * scale
    allowed = causal_allowed(scores.shape[-2], scores.shape[-1], _mask_kind(causal), scores.device)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    # Fully masked rows have lse = -inf; exp(-inf - -inf) is NaN, so give them p = 0,
    # matching the reference (output 0, lse -inf).
    finite = torch.isfinite(lse)
    probs = torch.exp(scores - torch.where(finite, lse, torch.zeros_like(lse))[..., None])
    probs = torch.where(finite[..., None], probs, torch.zeros_like(probs))
    return probs, lse


def scale_for(q: torch.Tensor, scale: float | None) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def attention_math(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool | int = False,
    scale: float | None = None,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention in plain torch ops (fp32 compute, fp64 for fp64 inputs; output in q's dtype).

    Same conventions as :func:`ffpa_attn.reference.attention` (GQA, fully masked rows
    give 0 / -inf). ``causal=True`` is bottom-right aligned, as there; a mask kind
    (:data:`MASK_TOP_LEFT`, :data:`MASK_BOTTOM_RIGHT`) picks the alignment. The LSE is
    fp32 (fp64 for fp64 inputs). Differentiable by torch autograd.
    """
    check_4d_shapes({"q": tuple(q.shape), "k": tuple(k.shape), "v": tuple(v.shape)})
    if not (q.is_floating_point() and k.is_floating_point() and v.is_floating_point()):
        raise UnsupportedDTypeError(
            f"attention needs floating-point tensors, got {q.dtype}/{k.dtype}/{v.dtype}; cast with .float()"
        )
    hq = q.shape[1]
    compute = _compute_dtype(q, k, v)
    # autocast would silently lower these matmuls back to fp16/bf16.
    with torch.autocast(device_type=q.device.type, enabled=False):
        qc = q.to(compute)
        kc = expand_kv(k.to(compute), hq)
        vc = expand_kv(v.to(compute), hq)
        probs, lse = softmax_probs(qc, kc, causal, scale_for(q, scale))
        out = torch.matmul(probs, vc).to(q.dtype)
    return (out, lse) if return_lse else out


def attention_backward_lse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    mask: int,
    scale: float,
    block_elements: int = _BLOCK_ELEMENTS,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv from the forward's output and LSE, a block of query rows at a time.

    For each row block: ``S = q k^T * scale`` (masked), ``P = exp(S - LSE)`` (0 on rows
    whose LSE is -inf: they saw no key), ``dV += P^T dO``, ``dP = dO V^T``,
    ``dS = P * (dP - delta)`` with ``delta = rowsum(dO * O)``, ``dQ = dS K * scale``,
    ``dK += dS^T Q * scale``; GQA sums each kv head's query-head group. Compute is
    fp32 (fp64 for fp64 inputs); the gradients come back in the inputs' dtypes.
    """
    b, hq, nq, d = q.shape
    hkv, nkv = k.shape[1], k.shape[2]
    group = hq // hkv
    compute = _compute_dtype(q, k, v)
    rows = max(1, min(nq, block_elements // max(1, b * hq * nkv)))
    with torch.autocast(device_type=q.device.type, enabled=False):
        # [B, Hkv, G, N, D] against [B, Hkv, 1, Nkv, D]: no copy of k or v per query head.
        qg = q.to(compute).reshape(b, hkv, group, nq, d)
        og = out.to(compute).reshape(b, hkv, group, nq, -1)
        dog = grad_out.to(compute).reshape(b, hkv, group, nq, -1)
        lseg = lse.to(compute).reshape(b, hkv, group, nq)
        kg = k.to(compute)[:, :, None]
        vg = v.to(compute)[:, :, None]
        dq = torch.empty_like(qg)
        dk = torch.zeros(b, hkv, nkv, d, dtype=compute, device=q.device)
        dv = torch.zeros(b, hkv, nkv, v.shape[-1], dtype=compute, device=q.device)
        for start in range(0, nq, rows):
            block = slice(start, min(nq, start + rows))
            q_b = qg[:, :, :, block]
            s = torch.matmul(q_b, kg.transpose(-1, -2)) * scale
            allowed = causal_allowed(nq, nkv, mask, q.device, rows=block)
            if allowed is not None:
                s = s.masked_fill(~allowed, float("-inf"))
            lse_b = lseg[..., block]
            finite = torch.isfinite(lse_b)
            p = torch.exp(s - torch.where(finite, lse_b, torch.zeros_like(lse_b))[..., None])
            p = torch.where(finite[..., None], p, torch.zeros_like(p))
            do_b = dog[:, :, :, block]
            delta = (do_b * og[:, :, :, block]).sum(dim=-1, keepdim=True)
            dv += torch.matmul(p.transpose(-1, -2), do_b).sum(dim=2)
            ds = p * (torch.matmul(do_b, vg.transpose(-1, -2)) - delta)
            dq[:, :, :, block] = torch.matmul(ds, kg) * scale
            dk += torch.matmul(ds.transpose(-1, -2), q_b).sum(dim=2) * scale
    return dq.reshape(b, hq, nq, d).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def attention_backward_recompute(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, grad_out: torch.Tensor, mask: int, scale: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv recomputed from q, k and v alone: the full probabilities, O(Nq * Nkv) memory."""
    hq, hkv = q.shape[1], k.shape[1]
    compute = _compute_dtype(q, k, v)
    with torch.autocast(device_type=q.device.type, enabled=False):
        qc = q.to(compute)
        kc = expand_kv(k.to(compute), hq)
        vc = expand_kv(v.to(compute), hq)
        do = grad_out.to(compute)
        probs, _ = softmax_probs(qc, kc, mask, scale)
        # O = P V  =>  dV = P^T dO, dP = dO V^T.
        dv = torch.matmul(probs.transpose(-1, -2), do)
        dp = torch.matmul(do, vc.transpose(-1, -2))
        # Softmax Jacobian per row: dS = P * (dP - rowsum(dP * P)); rowsum(dP * P)
        # equals rowsum(dO * O), the usual flash-attention "delta".
        delta = (dp * probs).sum(dim=-1, keepdim=True)
        ds = probs * (dp - delta) * scale
        dq = torch.matmul(ds, kc)
        dk = torch.matmul(ds.transpose(-1, -2), qc)
        if hkv != hq:
            # Each kv head served hq // hkv query heads: sum their contributions.
            group = hq // hkv
            b, _, nkv, d = dk.shape
            dk = dk.reshape(b, hkv, group, nkv, d).sum(dim=2)
            dv = dv.reshape(b, hkv, group, nkv, dv.shape[-1]).sum(dim=2)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
