"""``ffpa_attn_varlen_func``: attention over packed variable-length sequences, the
flash-attention varlen call (upstream ffpa-attn's shape plus flash-attention's
``window_size``).

    out = ffpa_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                causal=True, window_size=(-1, -1))

``q`` is ``[total_q, Hq, D]`` and ``k`` / ``v`` ``[total_k, Hkv, D]``: the sequences laid
end to end; sequence ``s`` holds rows ``cu_seqlens_q[s]:cu_seqlens_q[s + 1]`` of ``q``
and ``cu_seqlens_k[s]:cu_seqlens_k[s + 1]`` of ``k`` / ``v`` (int32, ``S + 1`` entries
from 0 to the total; a sequence may be empty). Each sequence attends only to its own keys;
``causal`` and the window are aligned bottom-right per sequence, as flash-attention
does (query i of a sequence with Nq queries and Nk keys sees key j <= i + Nk - Nq);
``seqused_k`` (flash-attention's) cuts each sequence's keys to their first
``seqused_k[s]`` (key padding without repacking).
Returns ``out [total_q, Hq, D]`` and, with ``return_lse=True``, the fp32 LSE
``[Hq, total_q]`` (flash-attention's layout; -inf on rows that see no key).

The torch custom op ``ffpa_attn::varlen_attention`` runs it (fake implementation,
autograd formula, so ``torch.compile(fullgraph=True)`` traces it as one node and CUDA
graphs capture it):

* CUDA tensors: one launch of the kernels over the packed layout when the build has it
  (``"varlen"`` in ffpa_attn.cuda.COMPILED_MASKS, ``"window"`` for a window,
  ``"seqused_k"`` for key counts); the
  backward kernels likewise. Anything the kernels cannot take (a build without the
  layout, dropout, a dtype / head dim / GPU the build lacks, ...) runs torch SDPA once
  per sequence with the equivalent mask, with one SDPAFallbackWarning per reason
  (routing.FALLBACK_REASONS), or raises with ``strict=True`` / ``FFPA_STRICT=1``.
* CPU tensors: torch's own CPU attention per sequence (torch_math / torch_masks), forward
  and backward, which is what SDPA gives per sequence.

The inputs are checked before anything runs (clear errors naming the fix): shapes,
dtypes, devices, and the offsets' dtype, length, monotonicity and totals, and that the
``max_seqlen`` values cover the longest sequence. The offsets' values are read on the
host for that (one device-to-host copy on CUDA); under ``torch.compile`` and CUDA graph
capture, where that copy cannot happen, only their shapes and dtypes are checked.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from . import cuda, device as ffpa_device, launch, routing, torch_ops
from .errors import DeviceError, ShapeError, UnsupportedDTypeError, UnsupportedFeatureError, UnsupportedImplError
from .torch_bwd import ffpa_backward_problem
from .torch_masks import cpu_masked_attention, cpu_masked_backward, window_allowed, window_bias
from .torch_math import (
    MASK_BOTTOM_RIGHT,
    MASK_NONE,
    all_finite,
    attention_backward_lse,
    cpu_attention,
    cpu_attention_backward,
)
from .torch_ops import SDPA, autocast_inputs, cuda_problem
from .validation import (HOST_FP16_ACCUM, check_choices, check_dropout, check_enable_gqa, check_gqa_heads,
                         resolve_scale)
from .window import NO_WINDOW, bound_window, check_window, effective_window

__all__ = ["VARLEN_BACKWARDS", "ffpa_attn_varlen_func"]

# backward= of ffpa_attn_varlen_func: the FFPA backward kernels where the build has them
# ("auto" falls back to "torch"), or torch's: its CPU attention backward per sequence on
# the CPU, the per-sequence math backward from O and the LSE elsewhere.
VARLEN_BACKWARDS = ("auto", "ffpa", "torch")


def _bounds(cu: torch.Tensor) -> list[int]:
    return [int(x) for x in cu.tolist()]


def _sequences(cu_q: torch.Tensor, cu_k: torch.Tensor,
               seqused_k: torch.Tensor | None) -> list[tuple[int, int, int, int]]:
    """``(q0, q1, k0, k1)`` per sequence: its query rows and the keys it uses (the first
    ``seqused_k[s]`` of its key rows when given)."""
    bq, bk = _bounds(cu_q), _bounds(cu_k)
    used = None if seqused_k is None else _bounds(seqused_k)
    return [(bq[s], bq[s + 1], bk[s], bk[s + 1] if used is None else bk[s] + used[s]) for s in range(len(bq) - 1)]


def _lse_dtype(q: torch.Tensor) -> torch.dtype:
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def _heads(t: torch.Tensor) -> torch.Tensor:
    # rows [n, H, D] of one sequence as SDPA's [1, H, n, D] (a view).
    return t.transpose(0, 1)[None]


def _sequence_bias(nq: int, nk: int, causal: bool, window: tuple[int, int], q: torch.Tensor) -> torch.Tensor | None:
    left, right = effective_window(causal, window)
    return window_bias(nq, nk, left, right, True, q.dtype, q.device)


# --- the host path: torch's CPU attention, one sequence at a time -----------------------------


def _cpu_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 sequences: list[tuple[int, int, int, int]], causal: bool, window: tuple[int, int],
                 scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    # Finite or not, asked once for the whole batch, and the output joined by one cat: each
    # of these is a parallel region with a fixed cost, which once per sequence made this
    # path 2-3x SDPA's run per sequence (issue 43). A batch holding a NaN or an inf asks
    # again per sequence, so that only those sequences take the math.
    finite = True if all_finite(q, k, v) else None
    outs, lses = [], []
    for q0, q1, k0, k1 in sequences:
        if q1 == q0:
            continue
        if k1 == k0:
            # No key: 0 with LSE -inf (torch's CPU kernel cannot take an empty sequence).
            outs.append(q.new_zeros((q1 - q0, q.shape[1], v.shape[-1])))
            lses.append(torch.full((q.shape[1], q1 - q0), float("-inf"), dtype=_lse_dtype(q)))
            continue
        qs, ks, vs = _heads(q[q0:q1]), _heads(k[k0:k1]), _heads(v[k0:k1])
        if window == NO_WINDOW:
            o, l = cpu_attention(qs, ks, vs, MASK_BOTTOM_RIGHT if causal else MASK_NONE, scale, finite)
        else:
            o, l = cpu_masked_attention(qs, ks, vs, _sequence_bias(q1 - q0, k1 - k0, causal, window, q), scale,
                                        finite)
        outs.append(o[0].transpose(0, 1))
        lses.append(l[0].to(_lse_dtype(q)))
    if not outs:  # every sequence empty (total_q == 0)
        return (q.new_zeros((q.shape[0], q.shape[1], v.shape[-1])),
                torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=_lse_dtype(q)))
    # The op's outputs must not alias its inputs or each other: cat copies even one piece.
    return torch.cat(outs), torch.cat(lses, dim=1)


def _cpu_backward(q, k, v, out, lse, grad_out, sequences, causal, window, scale):  # type: ignore[no-untyped-def]
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    finite = True if all_finite(q, k, v, grad_out) else None  # as in _cpu_forward
    for q0, q1, k0, k1 in sequences:
        if q1 == q0 or k1 == k0:
            continue
        args = (_heads(q[q0:q1]), _heads(k[k0:k1]), _heads(v[k0:k1]), _heads(out[q0:q1]), lse[None, :, q0:q1],
                _heads(grad_out[q0:q1]))
        if window == NO_WINDOW:
            g = cpu_attention_backward(*args, MASK_BOTTOM_RIGHT if causal else MASK_NONE, scale, finite)
        else:
            g = cpu_masked_backward(*args, _sequence_bias(q1 - q0, k1 - k0, causal, window, q), scale, finite)
        dq[q0:q1] += g[0][0].transpose(0, 1)
        dk[k0:k1] += g[1][0].transpose(0, 1)
        dv[k0:k1] += g[2][0].transpose(0, 1)
    return dq, dk, dv


def _math_backward(q, k, v, out, lse, grad_out, sequences, causal, window, scale):  # type: ignore[no-untyped-def]
    # Any device: the backward from O and the LSE under each sequence's mask
    # (torch_math.attention_backward_lse, explicit math: this runs inside a custom op,
    # where autograd builds no graph), one sequence at a time: the CUDA backward where
    # the backward kernels do not take the inputs.
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for q0, q1, k0, k1 in sequences:
        if q1 == q0 or k1 == k0:
            continue
        bias = _sequence_bias(q1 - q0, k1 - k0, causal, window, q)
        g = attention_backward_lse(_heads(q[q0:q1]), _heads(k[k0:k1]), _heads(v[k0:k1]), _heads(out[q0:q1]),
                                   lse[None, :, q0:q1], _heads(grad_out[q0:q1]), MASK_NONE, scale, bias=bias)
        dq[q0:q1] += g[0][0].transpose(0, 1)
        dk[k0:k1] += g[1][0].transpose(0, 1)
        dv[k0:k1] += g[2][0].transpose(0, 1)
    return dq, dk, dv


# --- the CUDA path: one launch over the packed layout ------------------------------------------


def _packed_view(t: torch.Tensor) -> torch.Tensor:
    # [total, H, D] as the kernels' [1, H, total, D] (a strided view, nothing copied).
    return t.transpose(0, 1)[None]


def _layout(cu_q: torch.Tensor, cu_k: torch.Tensor, max_q: int, max_k: int,
            seqused_k: torch.Tensor | None) -> dict[str, Any]:
    layout = {"cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "max_seqlen_q": int(max_q), "max_seqlen_k": int(max_k)}
    if seqused_k is not None:
        layout["seqused_k"] = seqused_k
    return layout


def _cuda_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor, max_q: int,
                  max_k: int, causal: bool, window: tuple[int, int], scale: float, impl: str, accum: str,
                  seqused_k: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    q4, k4, v4 = (_packed_view(t) for t in (q, k, v))
    launch.check({n: launch.describe(t) for n, t in (("q", q4), ("k", k4), ("v", v4))}, impl, accum)
    out = torch.empty((q.shape[0], q.shape[1], v.shape[-1]), dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    launch.launch(q4, k4, v4, _packed_view(out), lse[None], causal, scale, impl, accum,
                  window=effective_window(causal, window), varlen=_layout(cu_q, cu_k, max_q, max_k, seqused_k))
    return out, lse


def _cuda_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                   grad_out: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor, max_q: int, max_k: int,
                   causal: bool, window: tuple[int, int], scale: float,
                   seqused_k: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    q, k, v, out, lse, grad_out = (t.detach() for t in (q, k, v, out, lse, grad_out))
    grad_out = grad_out.contiguous()
    dq, dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))
    workspace = torch.empty(2 * q.shape[0] * q.shape[1], dtype=torch.float32, device=q.device)
    masks: dict[str, Any] = _layout(cu_q, cu_k, max_q, max_k, seqused_k)
    left, right = effective_window(causal, window)
    if (left, right) != NO_WINDOW:
        masks.update(window_left=left, window_right=right)
    ext = cuda.extension()
    assert ext is not None, "the forward ran on the kernels"
    ext.backward(*(_packed_view(t) for t in (q, k, v, out, grad_out)), lse.float()[None],
                 *(_packed_view(t) for t in (dq, dk, dv)), workspace, bool(causal), False, scale, **masks)
    return dq, dk, dv


# --- the custom ops ----------------------------------------------------------------------------


@torch.library.custom_op("ffpa_attn::varlen_attention", mutates_args=())
def _varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
               cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, causal: bool, window_left: int,
               window_right: int, scale: float, impl: str, accum: str, backward: str,
               seqused_k: torch.Tensor | None = None,
               offsets_checked: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    # offsets_checked: the wrapper read and checked the offsets' values (eager calls);
    # False under torch.compile and CUDA graph capture, where only the op sees them.
    window = (window_left, window_right)
    if not offsets_checked and _host_checks_possible(cu_seqlens_q):
        _check_layout_in_op(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k)
        offsets_checked = True
    if ffpa_device.on_device(q):
        if offsets_checked:
            return _cuda_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, window,
                                 scale, impl, accum, seqused_k)
        cu_q, cu_k, used, bad = _device_safe_layout(cu_seqlens_q, cu_seqlens_k, q.shape[0], k.shape[0],
                                                    max_seqlen_q, max_seqlen_k, seqused_k)
        out, lse = _cuda_forward(q, k, v, cu_q, cu_k, max_seqlen_q, max_seqlen_k, causal, window, scale, impl, accum,
                                 used)
        return out.masked_fill_(bad, float("nan")), lse.masked_fill_(bad, float("nan"))
    with torch.autocast(device_type=q.device.type, enabled=False):
        out, lse = _cpu_forward(q, k, v, _sequences(cu_seqlens_q, cu_seqlens_k, seqused_k), causal, window, scale)
    routing.note_kernel("torch_math")
    return out, lse


@_varlen_op.register_fake
def _varlen_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                 cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, causal: bool, window_left: int,
                 window_right: int, scale: float, impl: str, accum: str, backward: str,
                 seqused_k: torch.Tensor | None = None,
                 offsets_checked: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty((q.shape[0], q.shape[1], v.shape[-1]), dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[1], q.shape[0]), dtype=_lse_dtype(q), device=q.device)
    return out, lse


@torch.library.custom_op("ffpa_attn::varlen_attention_backward", mutates_args=())
def _varlen_backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                        grad_out: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                        max_seqlen_q: int, max_seqlen_k: int, causal: bool, window_left: int, window_right: int,
                        scale: float, kernels: bool,
                        seqused_k: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    window = (window_left, window_right)
    if kernels:
        if not _host_checks_possible(cu_seqlens_q):
            # Under capture the forward ran on clamped offsets (_device_safe_layout), and so
            # does the backward: no kernel reads outside the packed tensors.
            cu_seqlens_q, cu_seqlens_k, seqused_k, _ = _device_safe_layout(
                cu_seqlens_q, cu_seqlens_k, q.shape[0], k.shape[0], max_seqlen_q, max_seqlen_k, seqused_k)
        return _cuda_backward(q, k, v, out, lse, grad_out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              causal, window, scale, seqused_k)
    sequences = _sequences(cu_seqlens_q, cu_seqlens_k, seqused_k)
    with torch.autocast(device_type=q.device.type, enabled=False):
        if q.device.type == "cpu":
            grads = _cpu_backward(q, k, v, out, lse, grad_out, sequences, causal, window, scale)
        else:
            grads = _math_backward(q, k, v, out, lse, grad_out, sequences, causal, window, scale)
    return tuple(g.contiguous() for g in grads)  # type: ignore[return-value]


@_varlen_backward_op.register_fake
def _varlen_backward_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                          grad_out: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                          max_seqlen_q: int, max_seqlen_k: int, causal: bool, window_left: int, window_right: int,
                          scale: float, kernels: bool,
                          seqused_k: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format),
            torch.empty_like(v, memory_format=torch.contiguous_format))


def _backward_kernels_problem(q: torch.Tensor, window: tuple[int, int], seqused: bool = False) -> str | None:
    why_not = ffpa_backward_problem(q)
    if why_not is None and "varlen" not in cuda.COMPILED_MASKS:
        why_not = "this build's backward kernels have no packed (varlen) layout"
    if why_not is None and seqused and "seqused_k" not in cuda.COMPILED_MASKS:
        why_not = "this build's backward kernels have no per-sequence key lengths (seqused_k)"
    if why_not is None and window != NO_WINDOW and "window" not in cuda.COMPILED_MASKS:
        why_not = "this build's backward kernels have no sliding window"
    return why_not


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
    q, k, v, cu_q, cu_k, max_q, max_k, causal, wl, wr, scale, _impl, _accum, backward, *rest = inputs
    seqused_k = rest[0] if rest else None
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, seqused_k)
    ctx.args = (max_q, max_k, causal, wl, wr, scale)
    ctx.backward = backward
    ctx.mark_non_differentiable(lse)


def _backward(ctx: Any, grad_out: torch.Tensor, _grad_lse: Any) -> tuple[Any, ...]:
    q, k, v, out, lse, cu_q, cu_k, seqused_k = ctx.saved_tensors
    max_q, max_k, causal, wl, wr, scale = ctx.args
    kernels = False
    if ctx.backward in ("auto", "ffpa"):
        why_not = _backward_kernels_problem(q, (wl, wr), seqused_k is not None)
        kernels = why_not is None
        if ctx.backward == "ffpa" and not kernels:
            raise UnsupportedImplError(f"backward='ffpa' cannot run: {why_not}; use backward='torch' or 'auto'")
    dq, dk, dv = _varlen_backward_op(q, k, v, out, lse, grad_out, cu_q, cu_k, max_q, max_k, causal, wl, wr, scale,
                                     kernels, seqused_k)
    return dq, dk, dv, None, None, None, None, None, None, None, None, None, None, None, None, None


torch.library.register_autograd("ffpa_attn::varlen_attention", _backward, setup_context=_setup_context)


# --- checks and the SDPA fallback ---------------------------------------------------------------


def _host_checks_possible(t: torch.Tensor) -> bool:
    # Reading the offsets needs a device-to-host copy: impossible while tracing or capturing,
    # and meta tensors have no values.
    if torch.compiler.is_compiling() or t.device.type == "meta":
        return False
    return not (t.device.type == "cuda" and torch.cuda.is_current_stream_capturing())


def _check_offsets(name: str, cu: Any, total: int, device: torch.device, max_name: str, max_seqlen: Any) -> None:
    if not isinstance(cu, torch.Tensor):
        raise UnsupportedFeatureError(f"{name} must be a torch tensor of int32 offsets, got {type(cu).__name__}")
    if cu.dtype != torch.int32:
        raise UnsupportedDTypeError(f"{name} must be int32 (flash-attention's convention), got {cu.dtype}: pass "
                                    f"{name}.to(torch.int32)")
    if cu.dim() != 1 or cu.shape[0] < 2:
        raise ShapeError(f"{name} must be 1-D with S + 1 >= 2 entries (0, then each sequence's end), got shape "
                         f"{tuple(cu.shape)}")
    if cu.device != device:
        raise DeviceError(f"{name} is on {cu.device} and q on {device}: move it with {name}.to(q.device)")
    if isinstance(max_seqlen, bool) or not isinstance(max_seqlen, int) or max_seqlen < 0:
        raise ShapeError(f"{max_name} must be a non-negative int (the longest sequence), got {max_seqlen!r}")
    if not _host_checks_possible(cu):
        return
    _check_offset_values(name, _bounds(cu), total, max_name, max_seqlen)


def _check_offset_values(name: str, bounds: list[int], total: int, max_name: str, max_seqlen: int) -> None:
    if bounds[0] != 0:
        raise ShapeError(f"{name} must start at 0, got {bounds[0]}: its first entry is the first sequence's start")
    steps = [b - a for a, b in zip(bounds, bounds[1:])]
    if min(steps) < 0:
        at = steps.index(min(steps))
        raise ShapeError(f"{name} must be non-decreasing (each entry a sequence's end), got {bounds[at]} then "
                         f"{bounds[at + 1]} at index {at}")
    if bounds[-1] != total:
        raise ShapeError(f"{name} ends at {bounds[-1]} but the packed tensor has {total} rows: its last entry must "
                         "be the total")
    if max(steps) > max_seqlen:
        raise ShapeError(f"{max_name} = {max_seqlen} but the longest sequence in {name} has {max(steps)} rows: "
                         f"pass {max_name} >= {max(steps)} (the kernels size their grid by it)")


def _check_seqused_values(cu_k: list[int], used: list[int]) -> None:
    for s, n in enumerate(used):
        if not 0 <= n <= cu_k[s + 1] - cu_k[s]:
            raise ShapeError(f"seqused_k[{s}] = {n} but sequence {s} has {cu_k[s + 1] - cu_k[s]} keys in "
                             "cu_seqlens_k: each count must be between 0 and its sequence's key rows")


def _check_layout_in_op(q: torch.Tensor, k: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor, max_q: int,
                        max_k: int, seqused_k: torch.Tensor | None) -> None:
    """The offsets' values, checked inside the ops: under torch.compile the wrapper could
    only check shapes and dtypes (the values are data), and the ops run on the real
    tensors, where a malformed offset would make torch's CPU kernel divide by zero or a
    row silently 0. CUDA graph capture cannot read them: _device_safe_layout covers it."""
    if cu_q.dim() != 1 or cu_q.shape != cu_k.shape or cu_q.shape[0] < 2:
        raise ShapeError(f"cu_seqlens_q {tuple(cu_q.shape)} and cu_seqlens_k {tuple(cu_k.shape)} must be 1-D with "
                         "the same S + 1 >= 2 entries")
    bounds_q, bounds_k = _bounds(cu_q), _bounds(cu_k)
    _check_offset_values("cu_seqlens_q", bounds_q, q.shape[0], "max_seqlen_q", max_q)
    _check_offset_values("cu_seqlens_k", bounds_k, k.shape[0], "max_seqlen_k", max_k)
    if seqused_k is not None:
        if seqused_k.shape != (cu_k.shape[0] - 1,):
            raise ShapeError(f"seqused_k must be [S] = [{cu_k.shape[0] - 1}], got shape {tuple(seqused_k.shape)}")
        _check_seqused_values(bounds_k, _bounds(seqused_k))


def _device_safe_layout(cu_q: torch.Tensor, cu_k: torch.Tensor, total_q: int, total_k: int, max_q: int, max_k: int,
                        seqused_k: torch.Tensor | None
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """``(cu_q, cu_k, seqused_k, bad)`` for CUDA graph capture, where nothing can read the
    offsets on the host: offsets clamped into ``[0, total]`` and made non-decreasing, key
    counts clamped into their sequences (so no kernel reads or writes outside the packed
    tensors, whatever the offsets say), and ``bad``, a device bool that is True when the
    offsets given break a rule of _check_offset_values (the caller makes the output NaN
    then: never a silent wrong row, and no host synchronisation)."""
    bad = torch.zeros((), dtype=torch.bool, device=cu_q.device)
    safe = []
    for cu, total, longest in ((cu_q, total_q, max_q), (cu_k, total_k, max_k)):
        steps = cu[1:] - cu[:-1]
        bad = bad | (cu[0] != 0) | (cu[-1] != total) | (steps < 0).any() | (steps > longest).any()
        safe.append(torch.cummax(cu.clamp(0, total), dim=0).values.to(torch.int32))
    used = None
    if seqused_k is not None:
        room = safe[1][1:] - safe[1][:-1]
        bad = bad | (seqused_k < 0).any() | (seqused_k > cu_k[1:] - cu_k[:-1]).any()
        used = torch.minimum(seqused_k.clamp(min=0), room).to(torch.int32)
    return safe[0], safe[1], used, bad


def _check_seqused(seqused_k: Any, cu_k: torch.Tensor, device: torch.device) -> None:
    if not isinstance(seqused_k, torch.Tensor):
        raise UnsupportedFeatureError(f"seqused_k must be a torch tensor of int32 key counts, got "
                                      f"{type(seqused_k).__name__}")
    if seqused_k.dtype != torch.int32:
        raise UnsupportedDTypeError(f"seqused_k must be int32, got {seqused_k.dtype}: pass seqused_k.to(torch.int32)")
    if seqused_k.shape != (cu_k.shape[0] - 1,):
        raise ShapeError(f"seqused_k must be [S] = [{cu_k.shape[0] - 1}] (one key count per sequence), got shape "
                         f"{tuple(seqused_k.shape)}")
    if seqused_k.device != device:
        raise DeviceError(f"seqused_k is on {seqused_k.device} and q on {device}: move it with seqused_k.to(q.device)")
    if not _host_checks_possible(seqused_k):
        return
    _check_seqused_values(_bounds(cu_k), _bounds(seqused_k))


def _check_inputs(q: Any, k: Any, v: Any, enable_gqa: bool) -> None:
    for name, t in zip("qkv", (q, k, v)):
        if not isinstance(t, torch.Tensor):
            raise UnsupportedFeatureError(
                f"{name} is a {type(t).__name__}; ffpa_attn_varlen_func takes torch tensors [total, H, D]")
        if t.dim() != 3:
            raise ShapeError(f"{name} must be packed [total, H, D] (3-D), got shape {tuple(t.shape)}; for [B, H, N, D] "
                             "batches use ffpa_attn_func")
        if not t.is_floating_point():
            raise UnsupportedDTypeError(f"{name} has dtype {t.dtype}; pass floating-point tensors")
    torch_ops.check_one_device(q, k, v)
    if not (q.dtype == k.dtype == v.dtype):
        raise UnsupportedDTypeError(f"q, k and v must have the same dtype, got {q.dtype}/{k.dtype}/{v.dtype}; cast "
                                    "them to one, e.g. k.to(q.dtype)")
    if k.shape[:2] != v.shape[:2]:
        raise ShapeError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have the same rows and heads")
    if q.shape[2] != k.shape[2]:
        # As SDPA: q and k share a head dim (their dot product); v's may differ (it runs on SDPA).
        raise ShapeError(f"q and k must have one head dim (as SDPA requires), got {q.shape[2]}/{k.shape[2]}")
    hq, hkv = q.shape[1], k.shape[1]
    if hq == 0 or hkv == 0 or q.shape[2] == 0 or v.shape[2] == 0:
        raise ShapeError(f"heads and head dim must be positive, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    check_gqa_heads(hq, hkv)
    check_enable_gqa(hq, hkv, enable_gqa)


def _fallback_problem(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: Any, window: tuple[int, int],
                      seqused: bool) -> tuple[str, str, str | None] | None:
    device_type = torch_ops.tensor_device_type(q)  # one place reads it (tests stand CPU tensors in for CUDA)
    if device_type not in ("cuda", "cpu", "meta"):
        return "device_type", f"tensors on {device_type}", None
    if not isinstance(dropout_p, (int, float)) or dropout_p != 0:
        return "dropout", f"dropout_p={dropout_p!r}", None
    if v.shape[2] != q.shape[2]:
        return ("shape", f"head dims q / k {q.shape[2]} and v {v.shape[2]} (the kernels and the host path need one "
                         "head dim)", torch_ops.V_HEAD_DIM_FIX)
    if device_type != "cuda":
        return None
    problem = cuda_problem(q, k, v)
    if problem is not None:
        return problem
    if "varlen" not in cuda.COMPILED_MASKS:
        return "varlen", "packed sequences (ffpa_attn_varlen_func) and this build's kernels have no varlen layout", None
    if seqused and "seqused_k" not in cuda.COMPILED_MASKS:
        return "varlen", "seqused_k (per-sequence key lengths) and this build's kernels do not take it", None
    if window != NO_WINDOW and "window" not in cuda.COMPILED_MASKS:
        return "window", f"window_size={window} and this build's kernels have no sliding window", None
    return None


def sdpa_per_sequence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor, cu_k: torch.Tensor,
                      dropout_p: float, causal: bool, window: tuple[int, int], scale: float, enable_gqa: bool,
                      seqused_k: torch.Tensor | None = None) -> torch.Tensor:
    """The varlen call as torch SDPA once per sequence with the equivalent boolean mask
    (bottom-right causal and window); differentiable by torch autograd. An empty
    sequence contributes nothing, a sequence without keys zeros."""
    left, right = effective_window(causal, window)
    pieces = []
    for q0, q1, k0, k1 in _sequences(cu_q, cu_k, seqused_k):
        if q1 == q0:
            continue
        if k1 == k0:
            pieces.append(q.new_zeros((q1 - q0, q.shape[1], v.shape[-1])))
            continue
        mask = window_allowed(q1 - q0, k1 - k0, left, right, True, q.device)
        o = SDPA(_heads(q[q0:q1]), _heads(k[k0:k1]), _heads(v[k0:k1]), mask, dropout_p, False, scale=scale,
                  enable_gqa=enable_gqa and q.shape[1] != k.shape[1])
        pieces.append(o[0].transpose(0, 1))
    if not pieces:
        return q.new_zeros((q.shape[0], q.shape[1], v.shape[-1]))
    return torch.cat(pieces, dim=0)


def ffpa_attn_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor | None,
    max_seqlen_q: int,
    max_seqlen_k: int,
    *,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    enable_gqa: bool = False,
    return_lse: bool = False,
    seqused_k: torch.Tensor | None = None,
    impl: str = "auto",
    accum: str = "fp32",
    strict: bool | None = None,
    backward: str = "auto",
    **kwargs: Any,
) -> Any:
    """Attention over packed variable-length sequences (module docstring).

    ``q [total_q, Hq, D]``, ``k`` / ``v [total_k, Hkv, D]``; ``cu_seqlens_q`` /
    ``cu_seqlens_k`` int32 offsets ``[S + 1]`` on q's device (``cu_seqlens_k=None``: the
    same as ``cu_seqlens_q``, self-attention); ``max_seqlen_q`` / ``max_seqlen_k`` at
    least the longest sequence. ``causal`` and ``window_size = (left, right)``
    (flash-attention's; -1 unbounded) are aligned bottom-right per sequence;
    ``softmax_scale`` defaults to ``1/sqrt(D)``; ``enable_gqa`` as in ffpa_attn_func
    (``Hq % Hkv == 0``; without it only ``Hkv == 1``); ``dropout_p > 0`` runs on torch
    SDPA. ``seqused_k`` (flash-attention's): int32 ``[S]``, sequence s uses only the first
    ``seqused_k[s]`` of its keys (its key length for the causal alignment and the window
    too; the rest get no gradient). ``impl`` / ``accum`` / ``strict`` / ``backward`` are
    ffpa_attn_func's kernel choices (``backward``: ``"auto"``, ``"ffpa"`` or ``"torch"``).
    Other flash-attention keywords (``softcap``, ``alibi_slopes``, ``block_table``, ...) raise.

    Returns ``out [total_q, Hq, D]``, or ``(out, lse)`` with the fp32 LSE ``[Hq, total_q]``
    (needs the kernels or the host path: SDPA returns none).
    """
    if kwargs:
        raise UnsupportedFeatureError(
            f"ffpa_attn_varlen_func does not take {sorted(kwargs)}: it has dropout_p, softmax_scale, causal, "
            "window_size, enable_gqa, return_lse, seqused_k and the kernel choices impl, accum, strict, backward")
    check_choices(impl, accum, "auto")
    if backward not in VARLEN_BACKWARDS:
        raise UnsupportedImplError(f"backward must be one of {list(VARLEN_BACKWARDS)} for ffpa_attn_varlen_func, got "
                                   f"{backward!r}")
    window = check_window(window_size)
    check_dropout(dropout_p)
    _check_inputs(q, k, v, enable_gqa)
    window = bound_window(window, int(q.shape[0]), int(k.shape[0]))
    if cu_seqlens_k is None:
        if k.shape[0] != q.shape[0]:
            raise ShapeError(f"cu_seqlens_k=None means k has q's sequences, but q has {q.shape[0]} rows and k "
                             f"{k.shape[0]}: pass cu_seqlens_k")
        cu_seqlens_k = cu_seqlens_q
    _check_offsets("cu_seqlens_q", cu_seqlens_q, q.shape[0], q.device, "max_seqlen_q", max_seqlen_q)
    _check_offsets("cu_seqlens_k", cu_seqlens_k, k.shape[0], q.device, "max_seqlen_k", max_seqlen_k)
    if cu_seqlens_q.shape != cu_seqlens_k.shape:
        raise ShapeError(f"cu_seqlens_q has {cu_seqlens_q.shape[0] - 1} sequences and cu_seqlens_k "
                         f"{cu_seqlens_k.shape[0] - 1}: they must describe the same sequences")
    if seqused_k is not None:
        _check_seqused(seqused_k, cu_seqlens_k, q.device)
    if accum == "fp16" and not ffpa_device.on_device(q):
        raise UnsupportedImplError(HOST_FP16_ACCUM)
    if softmax_scale is not None and not math.isfinite(float(softmax_scale)):
        raise ValueError(f"softmax_scale must be a finite number, got {softmax_scale!r}")

    strict_mode = routing.strict_enabled(strict) or impl != "auto" or accum != "fp32"
    q, k, v = autocast_inputs(q, k, v)
    scale = resolve_scale(softmax_scale, q.shape[-1])
    problem = _fallback_problem(q, k, v, dropout_p, window, seqused_k is not None)
    if problem is not None:
        routing.take_fallback(problem, strict_mode, return_lse)
        return sdpa_per_sequence(q, k, v, cu_seqlens_q, cu_seqlens_k, float(dropout_p), causal, window, scale,
                                 enable_gqa, seqused_k)
    if backward == "ffpa" and (why_not := _backward_kernels_problem(q, window, seqused_k is not None)) is not None:
        raise UnsupportedImplError(f"backward='ffpa' cannot run: {why_not}; use backward='auto' or 'torch'")
    out, lse = _varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, int(max_seqlen_q), int(max_seqlen_k), bool(causal),
                          window[0], window[1], scale, impl, accum, backward, seqused_k,
                          _host_checks_possible(cu_seqlens_q))
    return (out, lse) if return_lse else out
