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

import numpy as np
import torch

from .errors import UnsupportedDTypeError
from .validation import check_4d_shapes

__all__ = ["MASK_BOTTOM_RIGHT", "MASK_NONE", "MASK_TOP_LEFT", "NONFINITE_RULE", "all_finite",
           "attention_backward_lse", "attention_backward_recompute", "attention_math", "causal_allowed",
           "cpu_attention", "cpu_attention_backward", "cpu_segments", "expand_kv", "scale_for", "softmax_probs"]

# The mask kinds of the custom op, numbered as torch's memory-efficient attention numbers
# its custom_mask_type (0 none, 1 causal from the top left, 2 from the bottom right), so
# the fused backward takes them as they are.
MASK_NONE = 0
MASK_TOP_LEFT = 1
MASK_BOTTOM_RIGHT = 2

# Elements of one [B, Hq, rows, Nkv] block of scores in attention_math and
# attention_backward_lse (fp32: 64 MiB).
_BLOCK_ELEMENTS = 1 << 24

NONFINITE_RULE = """NaN and inf: the output is what SDPA's math backend gives for the same inputs.
Scores are q k^T * scale with the causal mask ADDED as a -inf bias, so a NaN or +inf score
stays NaN under the mask; a row whose scores hold a NaN or a +inf is NaN; a row that sees no
key (every score -inf) is 0, with LSE -inf; probabilities multiply V as a matrix product, so a
NaN or inf in V reaches every row (0 * inf is NaN). One NaN in K or V therefore makes every
row of that head NaN; a NaN in a query makes its row NaN (an inf usually does: its scores are
+-inf). The CPU path, the NumPy reference and the CUDA kernels follow it, forward and backward
(the kernels through a non-finite pre-pass on causal calls; docs/install.md "NaN and inf")."""


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


def _math_scores(q32: torch.Tensor, k32: torch.Tensor, kind: int, scale: float, rows: slice | None = None,
                 nq: int | None = None) -> torch.Tensor:
    # As SDPA's math backend: q and k each scaled by sqrt(scale), then the mask ADDED as a
    # -inf bias (not written over the scores), so a NaN or +inf score under the mask stays
    # NaN, as there.
    root = math.sqrt(scale)
    scores = torch.matmul(q32 * root, (k32 * root).transpose(-1, -2))
    allowed = causal_allowed(scores.shape[-2] if nq is None else nq, scores.shape[-1], kind, scores.device, rows)
    if allowed is not None:
        bias = torch.zeros(allowed.shape, dtype=scores.dtype, device=scores.device)
        scores = scores + bias.masked_fill(~allowed, float("-inf"))
    return scores


def safe_softmax(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # SDPA's math backend (_safe_softmax): a row that sees no key (every score -inf) gives
    # probabilities 0, hence output 0; its LSE is -inf. Anything else is torch.softmax's:
    # a NaN score, or a +inf one, makes the row NaN.
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1)
    no_key = torch.isneginf(scores).all(dim=-1, keepdim=True)
    return torch.where(no_key, torch.zeros_like(probs), probs), lse


def softmax_probs(q32: torch.Tensor, k32: torch.Tensor, causal: bool | int,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax probabilities [B, Hq, Nq, Nkv] and LSE [B, Hq, Nq] in q32's dtype.

    ``causal``: False/True (bottom-right, as before) or a mask kind of this module. NaN
    and inf follow NONFINITE_RULE.
    """
    return safe_softmax(_math_scores(q32, k32, _mask_kind(causal), scale))


def scale_for(q: torch.Tensor, scale: float | None) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def attention_math(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool | int = False,
    scale: float | None = None,
    return_lse: bool = False,
    block_elements: int = _BLOCK_ELEMENTS,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention in plain torch ops (fp32 compute, fp64 for fp64 inputs; output in q's dtype).

    SDPA's math backend computed a block of query rows at a time (O(rows * Nkv) memory),
    NaN and inf included (NONFINITE_RULE), with GQA. ``causal=True`` is bottom-right
    aligned, as in :func:`ffpa_attn.reference.attention`; a mask kind
    (:data:`MASK_TOP_LEFT`, :data:`MASK_BOTTOM_RIGHT`) picks the alignment. The LSE is
    fp32 (fp64 for fp64 inputs), -inf on rows that see no key. Differentiable by torch
    autograd.
    """
    check_4d_shapes({"q": tuple(q.shape), "k": tuple(k.shape), "v": tuple(v.shape)})
    if not (q.is_floating_point() and k.is_floating_point() and v.is_floating_point()):
        raise UnsupportedDTypeError(
            f"attention needs floating-point tensors, got {q.dtype}/{k.dtype}/{v.dtype}; cast with .float()"
        )
    b, hq, nq, d = q.shape
    hkv, nkv = k.shape[1], k.shape[2]
    group = hq // hkv
    kind = _mask_kind(causal)
    sm_scale = scale_for(q, scale)
    compute = _compute_dtype(q, k, v)
    rows = max(1, min(nq, block_elements // max(1, b * hq * nkv)))
    # autocast would silently lower these matmuls back to fp16/bf16.
    with torch.autocast(device_type=q.device.type, enabled=False):
        # [B, Hkv, G, N, D] against [B, Hkv, 1, Nkv, D]: no copy of k or v per query head.
        qg = q.to(compute).reshape(b, hkv, group, nq, d)
        kg = k.to(compute)[:, :, None]
        vg = v.to(compute)[:, :, None]
        outs, lses = [], []
        for start in range(0, nq, rows):
            block = slice(start, min(nq, start + rows))
            probs, lse = safe_softmax(_math_scores(qg[:, :, :, block], kg, kind, sm_scale, block, nq))
            outs.append(torch.matmul(probs, vg))
            lses.append(lse)
        out = torch.cat(outs, dim=3).reshape(b, hq, nq, -1).to(q.dtype)
        lse = torch.cat(lses, dim=3).reshape(b, hq, nq)
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
    bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv from the forward's output and LSE, a block of query rows at a time.

    For each row block: ``S = q k^T * scale`` (masked), ``P = exp(S - LSE)`` (0 on rows
    whose LSE is -inf: they saw no key; NaN on rows whose LSE is NaN or +inf, as the
    softmax of SDPA's math backend), ``dV += P^T dO``, ``dP = dO V^T``, ``dS = P * (dP - delta)`` with
    ``delta = rowsum(dO * O)``, ``dQ = dS K * scale``, ``dK += dS^T Q * scale``; GQA sums
    each kv head's query-head group. Compute is fp32 (fp64 for fp64 inputs); the
    gradients come back in the inputs' dtypes. ``bias``: an additive ``[Nq, Nkv]`` mask
    (a sliding window, torch_masks.window_bias) added to the scores after the mask, as
    SDPA's math backend adds its ``attn_mask``.

    Plain tensor math, no autograd: it runs inside custom ops (whose implementations see
    no autograd graph), for any input, NaN and inf included.
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
            s = _math_scores(q_b, kg, mask, scale, block, nq)
            if bias is not None:
                s = s + bias[block].to(compute)
            lse_b = lseg[..., block, None]
            p = torch.exp(s - lse_b)
            # A row that saw no key has P = 0; one with a +inf score had a NaN softmax row
            # in the forward (exp(inf - inf)), so all of its P is NaN, as in SDPA's math.
            p = torch.where(torch.isneginf(lse_b), torch.zeros_like(p), p)
            p = torch.where(torch.isposinf(lse_b), torch.full_like(p, float("nan")), p)
            do_b = dog[:, :, :, block]
            delta = (do_b * og[:, :, :, block]).sum(dim=-1, keepdim=True)
            dv += torch.matmul(p.transpose(-1, -2), do_b).sum(dim=2)
            ds = p * (torch.matmul(do_b, vg.transpose(-1, -2)) - delta)
            dq[:, :, :, block] = torch.matmul(ds, kg) * scale
            dk += torch.matmul(ds.transpose(-1, -2), q_b).sum(dim=2) * scale
    return dq.reshape(b, hq, nq, d).to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# --- the CPU path of the custom op: torch's own CPU attention ---------------------------------

# The op SDPA runs for CPU tensors (its "flash attention for CPU"): O(N) memory, and it
# returns the LSE the backward needs. The custom op calls it directly for CPU tensors.
CPU_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
CPU_FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def _in_memory_order(t: torch.Tensor) -> torch.Tensor:
    # The same elements with the dimensions permuted into descending strides: contiguous
    # whenever t is a permuted view of contiguous memory (the [1, H, n, D] view of a packed
    # [total, H, D] slice, a transposed batch), which a pass over it reads in order.
    if t.is_contiguous():
        return t
    order = sorted(range(t.dim()), key=lambda d: (t.shape[d] != 1, t.stride(d)), reverse=True)
    permuted = t.permute(order)
    return permuted if permuted.is_contiguous() else t


# dtype -> (the integer dtype of its bits, the bits but the sign, the least of them that
# is not finite: every exponent bit set, inf or NaN).
_NONFINITE_BITS = {
    torch.float16: (torch.int16, 0x7FFF, 0x7C00),
    torch.bfloat16: (torch.int16, 0x7FFF, 0x7F80),
    torch.float32: (torch.int32, 0x7FFFFFFF, 0x7F800000),
    torch.float64: (torch.int64, 0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000),
}


# Elements of one block of _bits_finite: its scratch stays in cache, and the pass needs no
# second copy of a large tensor.
_BITS_BLOCK = 1 << 18


def _bits_finite(raw: np.ndarray, magnitude: int, least: int) -> bool:
    flat = raw.reshape(-1) if raw.flags.c_contiguous else None
    if flat is None:
        return int(np.bitwise_and(raw, magnitude).max()) < least
    scratch = np.empty(min(flat.size, _BITS_BLOCK), dtype=flat.dtype)
    for start in range(0, flat.size, _BITS_BLOCK):
        block = flat[start:start + _BITS_BLOCK]
        part = scratch[:block.size]
        np.bitwise_and(block, magnitude, out=part)
        if int(part.max()) >= least:
            return False
    return True


def all_finite(*tensors: torch.Tensor) -> bool:
    """True when no tensor holds a NaN or an inf (one host-side answer).

    CPU tensors: their bits, read through NumPy in memory order (one single-threaded pass:
    an element is not finite when every exponent bit is set). torch's reductions (aminmax,
    sum, dot) open a parallel region whose fixed cost, on a loaded 2-core machine, was 20x
    that pass and showed next to the attention itself (issue 43: the varlen CPU path at
    2-3x SDPA's cost); ``isfinite(t).all()`` builds a bool tensor and is slower still.
    Other devices: ``aminmax``, one pass that passes a NaN on.
    """
    for t in tensors:
        if not t.numel():
            continue
        bits = _NONFINITE_BITS.get(t.dtype)
        if bits is not None and t.device.type == "cpu":
            if not _bits_finite(_in_memory_order(t.detach()).view(bits[0]).numpy(), bits[1], bits[2]):
                return False
            continue
        lo, hi = torch.aminmax(t)
        if not (math.isfinite(float(lo)) and math.isfinite(float(hi))):
            return False
    return True


def cpu_segments(nq: int, nkv: int, mask: int) -> list[tuple[slice, slice, bool]]:
    """``(query rows, keys, top-left causal)``: the calls of torch's CPU attention that
    make up the op's mask. That op knows no mask but SDPA's top-left ``is_causal``; a
    bottom-right mask is the top-left square on the last Nkv rows (Nq > Nkv: the first
    rows see no key and are left 0 / -inf) or every row on the first Nkv - Nq keys plus
    the top-left square on the rest (Nq < Nkv), merged by their LSEs."""
    every_row, every_key = slice(0, nq), slice(0, nkv)
    if mask == MASK_NONE:
        return [(every_row, every_key, False)]
    if mask == MASK_TOP_LEFT or nq == nkv:
        return [(every_row, every_key, True)]
    if nq > nkv:
        return [(slice(nq - nkv, nq), every_key, True)]
    return [(every_row, slice(0, nkv - nq), False), (every_row, slice(nkv - nq, nkv), True)]


def cpu_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: int,
                  scale: float, finite: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The op's forward on CPU tensors: ``(out [B, Hq, Nq, D], lse [B, Hq, Nq])``.

    Finite inputs run torch's CPU attention (:data:`CPU_FLASH`, what SDPA runs for them:
    the same numbers at the same cost); inputs holding NaN or inf run
    :func:`attention_math`, block by block, which gives what SDPA's math backend gives
    (NONFINITE_RULE; torch's CPU flash kernel returns 0 for a NaN query row, for one).
    ``finite``: the caller's answer of :func:`all_finite` for these inputs (the varlen path
    asks once for the whole packed batch), None to ask here.
    """
    if not (all_finite(q, k, v) if finite is None else finite):
        return attention_math(q, k, v, causal=mask, scale=scale, return_lse=True)  # type: ignore[return-value]
    nq, nkv = q.shape[2], k.shape[2]
    segments = cpu_segments(nq, nkv, mask)
    with torch.autocast(device_type="cpu", enabled=False):
        if len(segments) == 1 and segments[0][0] == slice(0, nq):
            # None and both causal masks with Nq == Nkv: SDPA's own call, nothing around it.
            return CPU_FLASH(q, k, v, 0.0, segments[0][2], scale=scale)
        b, hq = q.shape[:2]
        lse_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
        out = torch.zeros((b, hq, nq, v.shape[-1]), dtype=q.dtype)
        lse = torch.full((b, hq, nq), float("-inf"), dtype=lse_dtype)
        for i, (rows, keys, causal) in enumerate(segments):
            o, l = CPU_FLASH(q[:, :, rows], k[:, :, keys], v[:, :, keys], 0.0, causal, scale=scale)
            if i == 0:
                out[:, :, rows], lse[:, :, rows] = o, l
                continue
            # Two key ranges of the same rows: softmax over their union.
            prev_out, prev_lse = out[:, :, rows].to(lse_dtype), lse[:, :, rows]
            both = torch.logaddexp(prev_lse, l)
            out[:, :, rows] = (prev_out * torch.exp(prev_lse - both)[..., None]
                               + o.to(lse_dtype) * torch.exp(l - both)[..., None]).to(q.dtype)
            lse[:, :, rows] = both
    return out, lse


def cpu_attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                           grad_out: torch.Tensor, mask: int, scale: float,
                           finite: bool | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv of :func:`cpu_attention`: torch's CPU attention backward on each of its
    segments (fed the merged O and LSE, so each segment's ``P = exp(S - LSE)`` is the
    share of the whole row), :func:`attention_backward_lse` where anything is not finite."""
    if not (all_finite(q, k, v, grad_out) if finite is None else finite):
        return attention_backward_lse(q, k, v, out, lse, grad_out, mask, scale)
    nq, nkv = q.shape[2], k.shape[2]
    segments = cpu_segments(nq, nkv, mask)
    with torch.autocast(device_type="cpu", enabled=False):
        if len(segments) == 1 and segments[0][0] == slice(0, nq):
            _, _, causal = segments[0]
            return CPU_FLASH_BACKWARD(grad_out, q, k, v, out, lse, 0.0, causal, scale=scale)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for rows, keys, causal in segments:
            gq, gk, gv = CPU_FLASH_BACKWARD(grad_out[:, :, rows], q[:, :, rows], k[:, :, keys], v[:, :, keys],
                                             out[:, :, rows], lse[:, :, rows], 0.0, causal, scale=scale)
            dq[:, :, rows] += gq
            dk[:, :, keys] += gk
            dv[:, :, keys] += gv
    return dq, dk, dv


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
