"""torch integration: a trainable wrapper around the kernel (and ``attention_math``,
re-exported from :mod:`ffpa_attn.torch_math`).

Importing this module imports torch; ``import ffpa_attn`` never does (the package
imports this module lazily, and only when torch is installed).

The CUDA kernels are forward-only. :class:`FFPAAttnFunction` runs the kernel in the
forward pass and recomputes the backward with plain tensor math (scores and softmax
in fp32, then the standard gradients), so models can train through it. Memory for the
backward is O(Nq * Nkv) per head, like unfused attention.
"""

from __future__ import annotations

from typing import Any

import torch

from . import cuda
from .interface import ffpa_attn_func
from .torch_math import attention_math, expand_kv, scale_for, softmax_probs

__all__ = ["attention_math", "FFPAAttnFunction", "ffpa_attention"]


def _kernel_accepts(q: torch.Tensor) -> bool:
    return (
        cuda.CUDA_FWD_AVAILABLE
        and q.shape[-1] in cuda.COMPILED_HEAD_DIMS
        and {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(q.dtype) in cuda.COMPILED_DTYPES
    )


class FFPAAttnFunction(torch.autograd.Function):
    """Forward: the FFPA kernel on CUDA (torch math on CPU). Backward: recomputed math.

    ``apply(q, k, v, causal, scale, allow_fallback)``; gradients flow to q, k and v.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        causal: bool = False,
        scale: float | None = None,
        allow_fallback: bool = False,
    ) -> torch.Tensor:
        sm_scale = scale_for(q, scale)
        if q.is_cuda and (not allow_fallback or _kernel_accepts(q)):
            out = ffpa_attn_func(q, k, v, causal=causal, scale=sm_scale)
        else:
            out = attention_math(q, k, v, causal=causal, scale=sm_scale)
        ctx.save_for_backward(q, k, v)
        ctx.causal = bool(causal)
        ctx.scale = sm_scale
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        q, k, v = ctx.saved_tensors
        hq, hkv = q.shape[1], k.shape[1]
        with torch.autocast(device_type=q.device.type, enabled=False):
            q32 = q.float()
            k32 = expand_kv(k.float(), hq)
            v32 = expand_kv(v.float(), hq)
            do = grad_out.float()
            probs, _ = softmax_probs(q32, k32, ctx.causal, ctx.scale)
            # O = P V  =>  dV = P^T dO, dP = dO V^T.
            dv = torch.matmul(probs.transpose(-1, -2), do)
            dp = torch.matmul(do, v32.transpose(-1, -2))
            # Softmax Jacobian per row: dS = P * (dP - rowsum(dP * P)); rowsum(dP * P)
            # equals rowsum(dO * O), the usual flash-attention "delta".
            delta = (dp * probs).sum(dim=-1, keepdim=True)
            ds = probs * (dp - delta) * ctx.scale
            dq = torch.matmul(ds, k32)
            dk = torch.matmul(ds.transpose(-1, -2), q32)
            if hkv != hq:
                # Each kv head served hq // hkv query heads: sum their contributions.
                group = hq // hkv
                b, _, nkv, d = dk.shape
                dk = dk.reshape(b, hkv, group, nkv, d).sum(dim=2)
                dv = dv.reshape(b, hkv, group, nkv, d).sum(dim=2)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None


def ffpa_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    allow_fallback: bool = False,
) -> torch.Tensor:
    """Differentiable attention for training: the kernel forward, a recomputed backward.

    On CPU tensors the forward is plain torch math. On CUDA it is the FFPA kernel; the
    kernel's errors (e.g. fp32 inputs: use autocast or .half()) propagate unless
    ``allow_fallback=True``, which uses torch math for inputs the build cannot take
    (pure wheel, head dim or dtype not compiled).
    """
    return FFPAAttnFunction.apply(q, k, v, causal, scale, allow_fallback)
