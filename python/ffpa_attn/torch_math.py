"""Attention in plain torch ops: the CPU path of ``ffpa_attn_func`` for torch tensors,
the recomputed backward of the autograd wrapper, and a reference on any device.

Imports torch; stands only on ``validation`` and the errors (``interface`` imports it
lazily, ``torch_ops`` on top of both).
"""

from __future__ import annotations

import math

import torch

from .errors import UnsupportedDTypeError
from .validation import check_4d_shapes

__all__ = ["attention_math", "expand_kv", "softmax_probs", "scale_for"]


def expand_kv(x: torch.Tensor, hq: int) -> torch.Tensor:
    """Repeat kv heads so each query head has its own ([B, Hkv, N, D] -> [B, Hq, N, D])."""
    hkv = x.shape[1]
    return x if hkv == hq else x.repeat_interleave(hq // hkv, dim=1)


def softmax_probs(q32: torch.Tensor, k32: torch.Tensor, causal: bool, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax probabilities [B, Hq, Nq, Nkv] and LSE [B, Hq, Nq], fp32, bottom-right causal."""
    scores = torch.matmul(q32, k32.transpose(-1, -2)) * scale
    if causal:
        nq, nkv = scores.shape[-2], scores.shape[-1]
        rows = torch.arange(nq, device=scores.device)[:, None]
        cols = torch.arange(nkv, device=scores.device)[None, :]
        scores = scores.masked_fill(cols > rows + (nkv - nq), float("-inf"))
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
    causal: bool = False,
    scale: float | None = None,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention in plain torch ops (fp32 compute, output in q's dtype), any device.

    Same conventions as :func:`ffpa_attn.reference.attention` (GQA, bottom-right
    causal, fully masked rows give 0 / -inf). Differentiable by torch autograd.
    """
    check_4d_shapes({"q": tuple(q.shape), "k": tuple(k.shape), "v": tuple(v.shape)})
    if not (q.is_floating_point() and k.is_floating_point() and v.is_floating_point()):
        raise UnsupportedDTypeError(
            f"attention needs floating-point tensors, got {q.dtype}/{k.dtype}/{v.dtype}; cast with .float()"
        )
    hq = q.shape[1]
    # autocast would silently lower these matmuls back to fp16/bf16.
    with torch.autocast(device_type=q.device.type, enabled=False):
        q32 = q.float()
        k32 = expand_kv(k.float(), hq)
        v32 = expand_kv(v.float(), hq)
        probs, lse = softmax_probs(q32, k32, causal, scale_for(q, scale))
        out = torch.matmul(probs, v32).to(q.dtype)
    return (out, lse) if return_lse else out
