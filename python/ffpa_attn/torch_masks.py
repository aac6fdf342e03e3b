"""Sliding windows and per-sequence masks in plain torch: the host (CPU) path of the
windowed ``ffpa_attn::attention`` and of ``ffpa_attn::varlen_attention``, and the masks
the SDPA fallback is given for them.

The window rule is ffpa_attn.window's (flash-attention's ``window_size``).

On the CPU the finite inputs run torch's own CPU attention (the op SDPA runs there,
torch_math's ``CPU_FLASH``) with the window as its additive ``attn_mask``: SDPA's numbers
at SDPA's cost. Inputs holding NaN or inf run :func:`masked_math` (SDPA's math backend,
torch_math.NONFINITE_RULE) and its gradients from O and the LSE
(torch_math.attention_backward_lse).

Imports torch; stands on torch_math and window.
"""

from __future__ import annotations

import torch

from .window import UNBOUNDED, check_window, effective_window
from .torch_math import MASK_NONE, CPU_FLASH, CPU_FLASH_BACKWARD, safe_softmax, all_finite, attention_backward_lse

__all__ = ["cpu_masked_attention", "cpu_masked_backward", "masked_math",
           "window_allowed", "window_bias"]

def window_allowed(nq: int, nkv: int, left: int, right: int, bottom_right: bool,
                   device: torch.device | str = "cpu") -> torch.Tensor | None:
    """Boolean ``[Nq, Nkv]``, True where query row i may see key j; None when every key is seen."""
    if left == UNBOUNDED and right == UNBOUNDED:
        return None
    rows = torch.arange(nq, device=device)[:, None] + (nkv - nq if bottom_right else 0)
    cols = torch.arange(nkv, device=device)[None, :]
    allowed = torch.ones((nq, nkv), dtype=torch.bool, device=device)
    if left != UNBOUNDED:
        allowed &= cols >= rows - left
    if right != UNBOUNDED:
        allowed &= cols <= rows + right
    return allowed


def window_bias(nq: int, nkv: int, left: int, right: int, bottom_right: bool, dtype: torch.dtype,
                device: torch.device | str = "cpu") -> torch.Tensor | None:
    """The window as an additive ``[Nq, Nkv]`` mask (0 seen, -inf not), or None."""
    allowed = window_allowed(nq, nkv, left, right, bottom_right, device)
    if allowed is None:
        return None
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, float("-inf"))


def masked_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None,
                scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out, lse)`` as SDPA's math backend computes them with an additive mask: q and k
    each scaled by sqrt(scale), the bias added (so a NaN score under the mask stays NaN),
    a row that sees no key 0 with LSE -inf. fp32 compute (fp64 for fp64 inputs), GQA;
    differentiable by torch autograd (the reference the tests hold the backward to)."""
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    hq, hkv = q.shape[1], k.shape[1]
    with torch.autocast(device_type=q.device.type, enabled=False):
        root = scale ** 0.5
        kx = k.to(compute).repeat_interleave(hq // hkv, dim=1) if hq != hkv else k.to(compute)
        vx = v.to(compute).repeat_interleave(hq // hkv, dim=1) if hq != hkv else v.to(compute)
        scores = torch.matmul(q.to(compute) * root, (kx * root).transpose(-1, -2))
        if bias is not None:
            scores = scores + bias.to(compute)
        probs, lse = safe_softmax(scores)
        out = torch.matmul(probs, vx)
    return out.to(q.dtype), lse


def _no_key_rows(bias: torch.Tensor | None) -> torch.Tensor | None:
    # [Nq] True on rows the mask leaves no key (their LSE is -inf, their output 0).
    if bias is None:
        return None
    rows = torch.isneginf(bias).all(dim=-1)
    return rows if bool(rows.any()) else None


def cpu_masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None,
                         scale: float, finite: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out [B, Hq, Nq, D], lse [B, Hq, Nq])`` on CPU tensors under an additive ``[Nq, Nkv]``
    mask (None: every key). Empty Nq or Nkv (a zero-length sequence) is handled here:
    torch's CPU kernel would divide by zero on them."""
    b, hq, nq = q.shape[:3]
    nkv = k.shape[2]
    lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    if nq == 0 or nkv == 0:
        return (torch.zeros((b, hq, nq, v.shape[-1]), dtype=q.dtype),
                torch.full((b, hq, nq), float("-inf"), dtype=lse_dtype))
    if not (all_finite(q, k, v) if finite is None else finite):
        return masked_math(q, k, v, bias, scale)
    with torch.autocast(device_type="cpu", enabled=False):
        out, lse = CPU_FLASH(q, k, v, 0.0, False, attn_mask=None if bias is None else bias.to(q.dtype),
                              scale=scale)
    no_key = _no_key_rows(bias)
    if no_key is not None:
        # torch's kernel leaves 0 in the LSE of a row that sees no key; SDPA's math (and the
        # kernels) say -inf.
        lse = lse.masked_fill(no_key, float("-inf"))
    return out, lse.to(lse_dtype)


def cpu_masked_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                        grad_out: torch.Tensor, bias: torch.Tensor | None, scale: float,
                        finite: bool | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv of :func:`cpu_masked_attention`: torch's CPU attention backward fed the
    forward's O and LSE; torch_math.attention_backward_lse under the same mask where
    anything is not finite (the gradients of :func:`masked_math`, SDPA's math backend)."""
    if q.shape[2] == 0 or k.shape[2] == 0:
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    if not (all_finite(q, k, v, grad_out) if finite is None else finite):
        # The explicit backward from O and LSE (SDPA's math backend's NaN rule), never
        # autograd: this runs inside custom ops, where nothing builds a graph.
        return attention_backward_lse(q, k, v, out, lse, grad_out, MASK_NONE, scale, bias=bias)
    # Rows that saw no key: their LSE is -inf, and exp(S - LSE) would be NaN there; any
    # finite value gives P = exp(-inf) = 0.
    lse_in = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
    with torch.autocast(device_type="cpu", enabled=False):
        dq, dk, dv = CPU_FLASH_BACKWARD(grad_out, q, k, v, out, lse_in, 0.0, False,
                                         attn_mask=None if bias is None else bias.to(q.dtype), scale=scale)
    return dq, dk, dv
