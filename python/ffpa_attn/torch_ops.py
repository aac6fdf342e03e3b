"""torch integration: the ``ffpa_attn::attention`` custom op and the torch side of
``ffpa_attn_func`` (autocast, the SDPA fallback, the backward).

Importing this module imports torch; ``import ffpa_attn`` never does (``ffpa_attn_func``
imports this module on its first torch tensor).

The op is registered in Python with ``torch.library.custom_op`` (the extension links no
libtorch and reads tensors through DLPack), with a fake (shape) implementation and an
autograd formula, so ``torch.compile(fullgraph=True)`` traces a model that calls it as
one node:

    ffpa_attn::attention(Tensor q, Tensor k, Tensor v, int mask, float scale, str impl,
                         str accum, str backward, int window_left=-1,
                         int window_right=-1) -> (Tensor out, Tensor lse)

``mask`` is 0 (none), 1 (causal, top-left: SDPA's ``is_causal``) or 2 (causal,
bottom-right: the kernels' and flash-attention's). ``window_left`` / ``window_right`` are
a sliding window (torch_masks: -1 unbounded), aligned as the mask (top-left for 0 and 1);
a causal mask clips its right extent to 0. ``impl`` and ``accum`` are handed to
the kernels as they are (every spelling of ``interface.IMPLS``, the low-precision
``fp8`` / ``fp4`` paths included; launch.check validates them); the fake and the
autograd formula do not depend on them. On CUDA it runs the FFPA kernels on
the current stream into outputs allocated by torch (so CUDA graphs capture it: no host
synchronisation, no allocation outside torch's allocator); on the CPU torch's own CPU
attention, the op SDPA runs there (torch_math.cpu_attention: SDPA's numbers, cost and O(N)
memory; NaN and inf as SDPA's math backend, torch_math.NONFINITE_RULE). ``out`` is ``[B, H, N, D]`` over
``[B, N, H, D]`` memory, the layout SDPA's fused kernels return and the fused
backward reads; ``lse`` is fp32 ``[B, H, N]`` (fp64 for fp64 CPU inputs) and carries no
gradient.

The backward (``backward=`` of ffpa_attn_func) starts from the forward's O and LSE:

* ``"auto"``: ``"ffpa"`` where this build has a backward kernel for the inputs (CUDA,
  fp16 / bf16, a compiled head dim: ffpa_attn.cuda.BWD_INSTANCES), else ``"torch"``.
* ``"ffpa"``: the FFPA backward kernels (ffpa_attn.torch_bwd: split-D, O(N) memory, no
  atomics, so bit-identical run to run) or an error naming why not.
* ``"torch"``: torch's fused attention backward on CUDA (``aten::_flash_attention_backward``
  for D <= 256 where torch has flash attention, else
  ``aten::_efficient_attention_backward``; GQA: flash takes it, the memory-efficient
  kernel gets K/V expanded to the query heads and the gradients summed back over each
  group), O(N) memory; on the CPU torch's CPU attention backward (the one SDPA's CPU
  path uses, torch_math.cpu_attention_backward), O(N) memory; elsewhere ``"lse"``.
* ``"fused"``: torch's fused backward or an error (CUDA only).
* ``"lse"``: torch_math.attention_backward_lse, the same math in torch ops a block of
  query rows at a time (any device).
* ``"recompute"``: the older full ``Nq x Nkv`` recompute from q, k and v.

With a sliding window: ``"auto"`` / ``"ffpa"`` take the FFPA backward kernels where the
build has windows (cuda.COMPILED_MASKS), ``"torch"`` (and ``"auto"`` without them) torch's
CPU attention backward under the window's mask on the CPU, elsewhere the full recompute
under that mask (torch's fused CUDA backward has no window; ``"fused"`` raises).

A low-precision forward (``impl="fp8"``, ``"fp4"``, ...) has the same backward: it is fed
the forward's O and LSE in the input dtype and fp32 like any other, and recomputes
``P`` from q and k in fp16/bf16 (or fp32), so the quantisation error reaches the gradients
only through O and the LSE.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from . import cuda, device as ffpa_device, jit, launch, routing
from .deprecations import deprecation_message
from .errors import DeviceError, UnsupportedDTypeError, UnsupportedImplError
from .torch_math import (
    MASK_BOTTOM_RIGHT,
    MASK_NONE,
    MASK_TOP_LEFT,
    attention_backward_lse,
    attention_backward_recompute,
    attention_math,
    cpu_attention,
    cpu_attention_backward,
)
from .torch_bwd import attention_backward_ffpa, ffpa_backward_problem
from .torch_masks import (
    cpu_masked_attention,
    cpu_masked_backward,
    masked_math,
    window_allowed,
    window_bias,
)
from .validation import check_gqa_heads, resolve_scale
from .window import bound_window, effective_window

__all__ = ["FFPAAttnFunction", "attention_math", "dispatch", "ffpa_attention", "sdpa"]

# torch's own SDPA, the builtin behind torch.nn.functional.scaled_dot_product_attention.
# Taken from torch._C so that `F.scaled_dot_product_attention = ffpa_attn_func` (before or
# after this import) can never make the fallback call ffpa_attn_func again.
SDPA = torch._C._nn.scaled_dot_product_attention

routing.install_compile_hooks(torch.compiler.is_compiling, torch.compiler.assume_constant_result)

_TORCH_DTYPE_NAMES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64"}
_FLASH_MAX_HEAD_DIM = 256  # torch's flash attention kernels take head dims up to 256


# --- facts about the machine, asked once (and, under torch.compile, at trace time) ----------


def _clear_caches() -> None:
    """Forget the asked-once machine facts (tests that install a stand-in extension)."""
    _extension_device_count_eager.cache_clear()
    _capability_eager.cache_clear()


@functools.cache
def _extension_device_count_eager() -> int:
    return cuda.device_count()


@functools.cache
def _capability_eager(index: int) -> tuple[int, int]:
    major, minor = torch.cuda.get_device_capability(index)
    return int(major), int(minor)


_extension_device_count_traced = torch.compiler.assume_constant_result(_extension_device_count_eager)
_capability_traced = torch.compiler.assume_constant_result(_capability_eager)


def _extension_device_count() -> int:
    return _extension_device_count_traced() if torch.compiler.is_compiling() else _extension_device_count_eager()


def _capability(index: int) -> tuple[int, int]:
    emulated = ffpa_device.capability(index)  # the emulated GPU's, read per call (FFPA_EMULATED_ARCH)
    if emulated is not None:
        return emulated
    return _capability_traced(index) if torch.compiler.is_compiling() else _capability_eager(index)


def _jit_problem_eager(index: int, capability: tuple[int, int], head_dim: int, dtype: str
                       ) -> tuple[str, str, str | None] | None:
    # A first-use build (ffpa_attn.jit) when the installed extension has no code for this
    # GPU; never inside CUDA graph capture (jit.ensure raises the error that says so).
    try:
        capturing = bool(torch.cuda.is_current_stream_capturing())
        gpu: str | None = torch.cuda.get_device_name(index)
    except (RuntimeError, AssertionError):
        capturing, gpu = False, None
    problem = jit.ensure(capability, head_dim, dtype, arch_runs=_arch_runs(capability), gpu=gpu, capturing=capturing)
    if jit.loaded_entry() is not None:
        _extension_device_count_eager.cache_clear()
    return problem


# Under torch.compile the build runs once, when the call is traced, never in the graph.
_jit_problem_traced = torch.compiler.assume_constant_result(_jit_problem_eager)


def _arch_runs(capability: tuple[int, int]) -> bool:
    return cuda.extension() is not None and launch.arch_runs(capability)


def _jit_problem(q: torch.Tensor, capability: tuple[int, int]) -> tuple[str, str, str | None] | None:
    dtype = _TORCH_DTYPE_NAMES.get(q.dtype)
    d = int(q.shape[-1])
    if not jit.wanted(_arch_runs(capability), d, dtype):
        return None  # the common case, and the cheap test: the installed (or loaded) kernels serve this call
    if dtype not in ("fp16", "bf16") or d % 64 != 0 or not 64 <= d <= 1024:
        return None  # nothing a build could serve: the reasons below say what is wrong
    fn = _jit_problem_traced if torch.compiler.is_compiling() else _jit_problem_eager
    return fn(q.device.index or 0, capability, d, dtype)


# --- the custom op -------------------------------------------------------------------------


def _lse_dtype(q: torch.Tensor) -> torch.dtype:
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def _empty_outputs(q: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b, hq, nq, _ = q.shape
    out = torch.empty((b, nq, hq, v.shape[-1]), dtype=q.dtype, device=q.device).transpose(1, 2)
    lse = torch.empty((b, hq, nq), dtype=_lse_dtype(q), device=q.device)
    return out, lse


def _cuda_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: int, scale: float, impl: str,
                    accum: str, window: tuple[int, int] = (-1, -1)) -> tuple[torch.Tensor, torch.Tensor]:
    launch.check({n: launch.describe(t) for n, t in (("q", q), ("k", k), ("v", v))}, impl, accum)
    out, lse = _empty_outputs(q, v)
    # One launch for every alignment: the kernels take SDPA's top-left causal mask (and a
    # window aligned with it) themselves, over all Nkv keys, so a NaN or an inf in a key
    # the mask hides reaches the output as it does in SDPA's math backend (ffpa/mask.h).
    window_kw = {"window": effective_window(mask != MASK_NONE, window)} if window != (-1, -1) else {}
    launch.launch(q, k, v, out, lse, mask != MASK_NONE, scale, impl, accum, top_left=mask == MASK_TOP_LEFT,
                  **window_kw)
    return out, lse


def _window_bias_for(q: torch.Tensor, k: torch.Tensor, mask: int, window: tuple[int, int]) -> torch.Tensor | None:
    # The op's mask and window as one additive [Nq, Nkv] mask (torch_masks' rule).
    left, right = effective_window(mask != MASK_NONE, window)
    return window_bias(q.shape[2], k.shape[2], left, right, mask == MASK_BOTTOM_RIGHT, q.dtype, q.device)


@torch.library.custom_op("ffpa_attn::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: int, scale: float, impl: str,
                  accum: str, backward: str, window_left: int = -1,
                  window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    window = (window_left, window_right)
    if ffpa_device.on_device(q):
        return _cuda_attention(q, k, v, mask, scale, impl, accum, window)
    # CPU tensors: torch's own CPU attention (torch_math.cpu_attention; with a window,
    # torch_masks.cpu_masked_attention), copied into the layout the fake promises on every
    # device (an O(N) copy).
    if window != (-1, -1):
        result, lse = cpu_masked_attention(q, k, v, _window_bias_for(q, k, mask, window), scale)
    else:
        result, lse = cpu_attention(q, k, v, mask, scale)
    out, lse_out = _empty_outputs(q, v)
    out.copy_(result)
    lse_out.copy_(lse)
    routing.note_kernel("torch_math")
    return out, lse_out


@torch.library.custom_op("ffpa_attn::cpu_attention_backward", mutates_args=())
def _cpu_backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                     grad_out: torch.Tensor, mask: int, scale: float, window_left: int = -1,
                     window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # An op of its own: which backward runs depends on whether the inputs are finite
    # (torch_math.cpu_attention_backward), a question a traced backward cannot ask.
    window = (window_left, window_right)
    if window != (-1, -1):
        dq, dk, dv = cpu_masked_backward(q, k, v, out, lse, grad_out, _window_bias_for(q, k, mask, window), scale)
    else:
        dq, dk, dv = cpu_attention_backward(q, k, v, out, lse, grad_out, mask, scale)
    return dq.contiguous(), dk.contiguous(), dv.contiguous()


@_cpu_backward_op.register_fake
def _cpu_backward_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                       grad_out: torch.Tensor, mask: int, scale: float, window_left: int = -1,
                       window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (torch.empty(q.shape, dtype=q.dtype, device=q.device), torch.empty(k.shape, dtype=k.dtype, device=k.device),
            torch.empty(v.shape, dtype=v.dtype, device=v.device))


@_attention_op.register_fake
def _attention_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: int, scale: float, impl: str,
                    accum: str, backward: str, window_left: int = -1,
                    window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    return _empty_outputs(q, v)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
    q, k, v, mask, scale, _impl, _accum, backward, *window = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.window = tuple(window) if window else (-1, -1)
    ctx.mask = mask
    ctx.scale = scale
    ctx.backward = backward
    # The LSE is an output for inspection; the fused backward has no gradient term for it.
    ctx.mark_non_differentiable(lse)


def _backward(ctx: Any, grad_out: torch.Tensor, _grad_lse: Any) -> tuple[Any, ...]:
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward(q, k, v, out, lse, grad_out, ctx.mask, ctx.scale, ctx.backward, ctx.window)
    return dq, dk, dv, None, None, None, None, None, None, None


torch.library.register_autograd("ffpa_attn::attention", _backward, setup_context=_setup_context)


# --- the backward ----------------------------------------------------------------------------


def fused_backward_kind(q: torch.Tensor, k: torch.Tensor, mask: int) -> str | None:
    """``"flash"``, ``"efficient"`` or None: which torch fused backward takes these inputs."""
    if q.device.type != "cuda" or q.dtype not in (torch.float16, torch.bfloat16):
        return None
    nq, nkv, d = q.shape[2], k.shape[2], q.shape[3]
    # torch's flash kernels align is_causal bottom-right; top-left only agrees when square.
    flash_mask_ok = mask != MASK_TOP_LEFT or nq == nkv
    if (d <= _FLASH_MAX_HEAD_DIM and d % 8 == 0 and flash_mask_ok and _capability(q.device.index or 0) >= (8, 0)
            and torch.backends.cuda.is_flash_attention_available()):
        return "flash"
    return "efficient"


def _lse_for_fused(lse: torch.Tensor, mask: int, nq: int, nkv: int, pad_to: int) -> torch.Tensor:
    # Rows that see no key (bottom-right, Nq > Nkv) have LSE -inf; the fused kernels
    # compute exp(S - LSE), which is NaN there, and +inf gives the intended P = 0. The
    # memory-efficient kernel reads the LSE in blocks of 32 rows padded with +inf (its
    # forward writes it that way).
    if mask == MASK_BOTTOM_RIGHT and nq > nkv:
        lse = torch.where(torch.isneginf(lse), math.inf, lse)
    npad = -(-nq // pad_to) * pad_to
    if npad == nq and lse.is_contiguous():
        return lse
    padded = torch.full((lse.shape[0], lse.shape[1], npad), math.inf, dtype=torch.float32, device=lse.device)
    padded[:, :, :nq] = lse
    return padded


def _flash_backward(q, k, v, out, lse, grad_out, mask, scale):  # type: ignore[no-untyped-def]
    nq, nkv = q.shape[2], k.shape[2]
    dout = grad_out.transpose(1, 2)
    if dout.stride(-1) != 1:
        dout = dout.contiguous()
    unused = torch.empty(0, dtype=torch.int64, device=q.device)  # philox seed/offset: no dropout
    dq, dk, dv = torch.ops.aten._flash_attention_backward(
        dout, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), out.transpose(1, 2),
        _lse_for_fused(lse, mask, nq, nkv, 1), None, None, nq, nkv, 0.0, mask != MASK_NONE, unused, unused,
        scale=scale)
    return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)


def _efficient_backward(q, k, v, out, lse, grad_out, mask, scale):  # type: ignore[no-untyped-def]
    b, hq, nq, d = q.shape
    hkv, nkv = k.shape[1], k.shape[2]
    group = hq // hkv
    # The memory-efficient kernel needs one kv head per query head.
    kx = k if group == 1 else k.repeat_interleave(group, dim=1)
    vx = v if group == 1 else v.repeat_interleave(group, dim=1)
    out_t = out.transpose(1, 2)
    # It reads O with a row stride of H * Dv ([B, N, H, D] memory, what the op allocates).
    if out_t.stride(3) != 1 or out_t.stride(2) != out.shape[-1] or out_t.stride(1) != hq * out.shape[-1]:
        out_t = out_t.contiguous()
    seed = torch.empty((), dtype=torch.int64, device=q.device)  # philox seed/offset: no dropout
    dq, dk, dv, _ = torch.ops.aten._efficient_attention_backward(
        grad_out.transpose(1, 2), q.transpose(1, 2), kx.transpose(1, 2), vx.transpose(1, 2), None, out_t, None,
        None, nq, nkv, _lse_for_fused(lse, mask, nq, nkv, 32), 0.0, seed, seed, int(mask), False, scale=scale)
    dq, dk, dv = dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)
    if group != 1:
        dk = dk.reshape(b, hkv, group, nkv, d).sum(dim=2)
        dv = dv.reshape(b, hkv, group, nkv, dv.shape[-1]).sum(dim=2)
    return dq, dk, dv


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                       grad_out: torch.Tensor, mask: int, scale: float, choice: str = "auto",
                       window: tuple[int, int] = (-1, -1)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv of the op, by ``choice`` (module docstring)."""
    if window != (-1, -1):
        return _window_backward(q, k, v, out, lse, grad_out, mask, scale, choice, window)
    if choice == "recompute":
        return attention_backward_recompute(q, k, v, grad_out, mask, scale)
    if choice in ("auto", "ffpa"):
        # The FFPA backward kernels where this build has them for the inputs (torch_bwd).
        why_not = ffpa_backward_problem(q)
        if why_not is None:
            return attention_backward_ffpa(q, k, v, out, lse, grad_out, mask, scale)
        if choice == "ffpa":
            raise UnsupportedImplError(f"backward='ffpa' cannot run: {why_not}; use backward='torch' (torch's "
                                       "fused backward on CUDA, its CPU attention backward on the CPU) or 'auto'")
    if choice in ("auto", "torch") and q.device.type == "cpu":
        # The CPU forward's own backward (torch's CPU attention backward), O(N) memory.
        return _cpu_backward_op(q, k, v, out, lse, grad_out, mask, scale)
    if choice in ("auto", "torch", "fused"):
        kind = fused_backward_kind(q, k, mask)
        if kind == "flash":
            return _flash_backward(q, k, v, out, lse, grad_out, mask, scale)
        if kind == "efficient":
            return _efficient_backward(q, k, v, out, lse, grad_out, mask, scale)
        if choice == "fused":
            raise UnsupportedImplError(
                f"backward='fused' is torch's fused CUDA attention backward, which takes fp16/bf16 CUDA tensors; "
                f"got {q.dtype} on {q.device.type}: use backward='auto' (the LSE recompute here) or 'lse'")
    return attention_backward_lse(q, k, v, out, lse, grad_out, mask, scale)


def _window_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                     grad_out: torch.Tensor, mask: int, scale: float, choice: str,
                     window: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # A sliding window: the FFPA backward kernels where they have it, torch's CPU attention
    # backward on the CPU, else the full recompute under the window's mask (torch's fused
    # CUDA backward has no window).
    if choice in ("auto", "ffpa"):
        why_not = ffpa_backward_problem(q) or (None if "window" in cuda.COMPILED_MASKS else
                                                "this build's backward kernels have no sliding window")
        if why_not is None:
            return attention_backward_ffpa(q, k, v, out, lse, grad_out, mask, scale,
                                           window=effective_window(mask != MASK_NONE, window))
        if choice == "ffpa":
            raise UnsupportedImplError(f"backward='ffpa' cannot run: {why_not}; use backward='torch' or 'auto'")
    if choice in ("auto", "torch", "lse") and q.device.type == "cpu":
        return _cpu_backward_op(q, k, v, out, lse, grad_out, mask, scale, window[0], window[1])
    if choice == "fused":
        raise UnsupportedImplError("backward='fused' (torch's fused CUDA attention backward) has no sliding window; "
                                   "use backward='auto'")
    bias = _window_bias_for(q, k, mask, window)
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
        o, _ = masked_math(*leaves, bias, scale)
        dq, dk, dv = torch.autograd.grad(o, leaves, grad_out)
    return dq, dk, dv


# --- the torch side of ffpa_attn_func --------------------------------------------------------


def _causal_bias_kind(attn_mask: Any, nq: int, nkv: int) -> int | None:
    """The mask kind of a torch.nn.attention.bias.CausalBias of these lengths, else None."""
    try:
        from torch.nn.attention.bias import CausalBias, CausalVariant
    except ImportError:  # pragma: no cover - torch without the module
        return None
    if not isinstance(attn_mask, CausalBias):
        return None
    if (int(attn_mask.seq_len_q), int(attn_mask.seq_len_kv)) != (nq, nkv):
        return None
    if attn_mask.variant == CausalVariant.UPPER_LEFT:
        return MASK_TOP_LEFT
    if attn_mask.variant == CausalVariant.LOWER_RIGHT:
        return MASK_BOTTOM_RIGHT
    return None


def autocast_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # SDPA is on autocast's lower-precision list: every floating input but fp64 (autocast's
    # eligible ones: fp32, and fp16 under a bf16 autocast) runs in the autocast dtype.
    device_type = q.device.type
    if device_type in ("cuda", "cpu") and torch.is_autocast_enabled(device_type):
        target = torch.get_autocast_dtype(device_type)
        return tuple(t.to(target) if t.dtype != torch.float64 else t for t in (q, k, v))  # type: ignore[return-value]
    return q, k, v


def check_one_device(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """The torch paths' one-device rule (ffpa_attn_func's and the packed call's), before any
    path is chosen; the kernels' own is the extension's (launch.check)."""
    if not (q.device == k.device == v.device):
        raise DeviceError(f"q, k, v must be on one device, got {q.device}/{k.device}/{v.device}; "
                          "move them with .to(device)")


def _check_one_dtype(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    # SDPA refuses mixed dtypes on every device (after autocast); so does every path here,
    # rather than a CPU answer in one dtype and a CUDA fallback in another.
    if not (q.dtype == k.dtype == v.dtype):
        raise UnsupportedDTypeError(
            f"q, k and v must have the same dtype (as SDPA requires), got {q.dtype}/{k.dtype}/{v.dtype}; cast them "
            "to one, e.g. k.to(q.dtype), or run under torch.autocast")


def _shape_problem(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enable_gqa: bool) -> str | None:
    if q.is_nested or k.is_nested or v.is_nested:
        return "nested tensors"
    if not (q.dim() == k.dim() == v.dim() == 4):
        return f"{q.dim()}-D/{k.dim()}-D/{v.dim()}-D inputs (the kernels take 4-D [B, H, N, D])"
    b, hq, nq, d = q.shape
    bk, hkv, nkv, dk = k.shape
    if not (b == bk == v.shape[0]):
        return f"batch sizes {b}/{bk}/{v.shape[0]} (broadcast)"
    if v.shape[1] != hkv or v.shape[2] != nkv:
        return f"k {tuple(k.shape)} and v {tuple(v.shape)} differ in heads or length"
    if dk != d or v.shape[3] != d:
        return f"head dims q {d}, k {dk}, v {v.shape[3]} (the kernels need one head dim)"
    if min(b, hq, nq, nkv, d) == 0:
        return f"an empty dimension (q {tuple(q.shape)}, k/v {tuple(k.shape)})"
    if hq != hkv:
        if enable_gqa and hq % hkv != 0:
            return f"{hq} query heads and {hkv} kv heads (enable_gqa needs Hq % Hkv == 0)"
        # Without enable_gqa SDPA broadcasts the head dim: one kv head serving every query
        # head is grouped-query attention with one group, anything else is not.
        if not enable_gqa and hkv != 1:
            return f"{hq} query heads and {hkv} kv heads without enable_gqa=True (SDPA broadcasts heads)"
    return None


# The fix of a value head dim unlike the query's (the ``shape`` reason): models built
# that way (DeepSeek's MLA: q / k 192, v 128) cannot change it; they still run, on SDPA.
V_HEAD_DIM_FIX = ("nothing to change for a model whose value head dim differs from its query / key head dim (e.g. "
                  "DeepSeek's multi-head latent attention): it runs on torch SDPA; to run the kernels pad v with "
                  "zeros to the q / k head dim (torch.nn.functional.pad) and slice the output back")


def _shape_fix(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enable_gqa: bool) -> str | None:
    """The fix of a ``shape`` problem where it is not the reason's generic one."""
    if q.dim() == 4 and k.dim() == 4 and v.dim() == 4 and q.shape[-1] == k.shape[-1] != v.shape[-1]:
        return V_HEAD_DIM_FIX
    return _gqa_fix(q, k, enable_gqa)


def _gqa_fix(q: torch.Tensor, k: torch.Tensor, enable_gqa: bool) -> str | None:
    """The fix for grouped-query inputs given without enable_gqa (None for other shapes)."""
    if enable_gqa or q.dim() != 4 or k.dim() != 4:
        return None
    hq, hkv = q.shape[1], k.shape[1]
    if hkv > 1 and hq != hkv and hq % hkv == 0:
        return (f"pass enable_gqa=True: {hq} query heads over {hkv} kv heads is grouped-query attention, which "
                "SDPA (and the kernels) take only with enable_gqa=True; without it SDPA broadcasts one kv head")
    return None


def cuda_problem(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[str, str, str | None] | None:
    """The first reason the kernels cannot take these CUDA tensors: (reason, detail, fix)."""
    if any(t.stride(-1) != 1 and t.shape[-1] > 1 for t in (q, k, v)):
        return "layout", f"strides q {q.stride()}, k {k.stride()}, v {v.stride()}", None
    problem = _jit_problem(q, _capability(q.device.index or 0))
    if problem is not None:
        return problem
    problem = launch.extension_problem()
    if problem is not None:
        return problem
    if _extension_device_count() == 0:
        return "device", "torch has CUDA tensors but the FFPA extension sees no CUDA device", None
    major, minor = _capability(q.device.index or 0)
    if not launch.arch_runs((major, minor)):
        return ("arch", f"this GPU is sm_{major}{minor} and this build has machine code for archs "
                        f"{list(cuda.COMPILED_ARCHS)} only", None)
    names = {_TORCH_DTYPE_NAMES.get(t.dtype, str(t.dtype)) for t in (q, k, v)}
    supported = cuda.COMPILED_DTYPES or ("fp16", "bf16")
    if len(names) != 1 or not names <= set(supported):
        return ("dtype", f"dtype {'/'.join(sorted(names))}; this build takes {'/'.join(supported)}",
                jit.widen_hint(int(q.shape[-1]), next(iter(names)) if len(names) == 1 else ""))
    d = q.shape[-1]
    if d not in cuda.COMPILED_HEAD_DIMS:
        return ("head_dim", f"head dim {d}; this build has {list(cuda.COMPILED_HEAD_DIMS)}",
                jit.widen_hint(int(d), next(iter(names)) if len(names) == 1 else ""))
    return None


def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Any, dropout_p: float,
         is_causal: bool, scale: float | None, enable_gqa: bool, kind: int | None = None,
         window: tuple[int, int] = (-1, -1)) -> torch.Tensor:
    """torch's own SDPA (never the patched attribute). ``kind`` is the mask kind when it
    came from a causal bias or causal=, which torch's builtin is given in its own terms;
    ``window`` a sliding window (torch_masks), given to it as a boolean mask."""
    if window != (-1, -1):
        mask = kind if kind is not None else (MASK_TOP_LEFT if is_causal else MASK_NONE)
        nq, nkv = query.shape[-2], key.shape[-2]
        left, right = effective_window(mask != MASK_NONE, window)
        allowed = window_allowed(nq, nkv, left, right, mask == MASK_BOTTOM_RIGHT, query.device)
        if kind is not None or attn_mask is None:
            attn_mask = allowed
        elif attn_mask.dtype == torch.bool:
            attn_mask = attn_mask & allowed
        else:
            attn_mask = attn_mask.masked_fill(~allowed, float("-inf"))
        return SDPA(query, key, value, attn_mask, dropout_p, False, scale=scale, enable_gqa=enable_gqa)
    if kind is not None:
        nq, nkv = query.shape[-2], key.shape[-2]
        attn_mask, is_causal = None, False
        if kind == MASK_TOP_LEFT or (kind == MASK_BOTTOM_RIGHT and nq == nkv):
            is_causal = True
        elif kind == MASK_BOTTOM_RIGHT:
            # A CausalBias would dispatch on F.scaled_dot_product_attention, which may be
            # ffpa_attn_func now; the boolean mask means the same to the builtin.
            attn_mask = torch.ones(nq, nkv, dtype=torch.bool, device=query.device).tril(diagonal=nkv - nq)
    return SDPA(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


def tensor_device_type(t: torch.Tensor) -> str:
    # One place that reads the device type (the tests stand CPU tensors in for CUDA ones
    # here): "cuda" is the kernels' device (ffpa_attn.device: CPU tensors under
    # FFPA_DEVICE=emulated).
    return ffpa_device.device_type(t)


def find_problem(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any, dropout_p: Any,
                 is_causal: bool, enable_gqa: bool, legacy_causal: bool | None
                 ) -> tuple[int, int | None, tuple[str, str, str | None] | None]:
    """``(mask, kind, problem)``: the op's mask kind; the kind to give SDPA in its own terms
    (None: attn_mask / is_causal as the caller gave them); the first fallback reason as
    ``(reason, detail, fix or None)``, None when the op takes the call."""
    device_type = tensor_device_type(q)
    kind: int | None = None
    problem: tuple[str, str, str | None] | None = None
    if device_type not in ("cuda", "cpu", "meta"):
        problem = ("device_type", f"tensors on {device_type}", None)
    nq = q.shape[-2] if q.dim() >= 2 else 0
    nkv = k.shape[-2] if k.dim() >= 2 else 0
    if attn_mask is None:
        mask = MASK_TOP_LEFT if is_causal else MASK_NONE
        if legacy_causal is not None:
            mask = kind = MASK_BOTTOM_RIGHT if legacy_causal else MASK_NONE
    else:
        bias_kind = _causal_bias_kind(attn_mask, nq, nkv)
        if bias_kind is not None:
            mask = kind = bias_kind
        else:
            mask = MASK_NONE
            if problem is None:
                problem = ("attn_mask", f"an attn_mask {type(attn_mask).__name__} of shape "
                                        f"{tuple(getattr(attn_mask, 'shape', ()))}", None)
    if problem is None and (not isinstance(dropout_p, (int, float)) or dropout_p != 0):
        problem = ("dropout", f"dropout_p={dropout_p!r}", None)
    if problem is None:
        shape = _shape_problem(q, k, v, enable_gqa)
        if shape is not None:
            problem = ("shape", shape, _shape_fix(q, k, v, enable_gqa))
    if problem is None and device_type == "cuda":
        problem = cuda_problem(q, k, v)
    return mask, kind, problem


def window_problem(q: torch.Tensor, k: torch.Tensor, mask: int,
                   window: tuple[int, int]) -> tuple[str, str, str | None] | None:
    """Why the CUDA kernels cannot take this sliding window (a fallback reason), or None."""
    if window == (-1, -1) or tensor_device_type(q) != "cuda":
        return None
    if "window" not in cuda.COMPILED_MASKS:
        return "window", f"window_size={window} and this build's kernels have no sliding window", None
    return None


def dispatch(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Any, dropout_p: Any,
             is_causal: bool, scale: float | None, enable_gqa: bool, *, legacy_causal: bool | None, impl: str,
             accum: str, return_lse: bool, strict: bool | None, backward: str,
             window: tuple[int, int] = (-1, -1), attn_mask_fix: str | None = None) -> Any:
    """ffpa_attn_func for torch tensors: the op where the kernels (or the host math) take
    the call, torch SDPA with a warning where they do not (routing.FALLBACK_REASONS).
    ``attn_mask_fix``: the fix an ``attn_mask`` fallback names instead of the reason's
    (the transformers backend's, whose users pass no mask themselves)."""
    for t in (query, key, value):
        if not t.is_floating_point():
            raise UnsupportedDTypeError(
                f"attention needs floating-point tensors, got {query.dtype}/{key.dtype}/{value.dtype}; cast with "
                ".half(), .bfloat16() or .float()")
    check_one_device(query, key, value)
    # An explicit kernel choice is a request for that kernel: its errors, not SDPA.
    strict_mode = routing.strict_enabled(strict) or impl != "auto" or accum != "fp32"
    q, k, v = autocast_inputs(query, key, value)
    _check_one_dtype(q, k, v)
    if window != (-1, -1) and q.dim() >= 2 and k.dim() >= 2:
        window = bound_window(window, int(q.shape[-2]), int(k.shape[-2]))
    mask, kind, problem = find_problem(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa, legacy_causal)
    if problem is None:
        problem = window_problem(q, k, mask, window)
    if problem is not None:
        if problem[0] == "attn_mask" and attn_mask_fix is not None:
            problem = (problem[0], problem[1], attn_mask_fix)
        routing.take_fallback(problem, strict_mode, return_lse)
        return sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, kind, window)
    if backward == "ffpa" and (why_not := ffpa_backward_problem(q)) is not None:
        raise UnsupportedImplError(f"backward='ffpa' cannot run: {why_not}; use backward='auto' or 'torch'")
    if backward == "fused" and tensor_device_type(q) != "cuda":
        raise UnsupportedImplError(
            "backward='fused' is torch's fused CUDA attention backward; these tensors are on "
            f"{tensor_device_type(q)}: use backward='auto' or 'lse'")
    sm_scale = resolve_scale(scale, q.shape[-1])
    if window != (-1, -1):
        out, lse = _attention_op(q, k, v, mask, sm_scale, impl, accum, backward, window[0], window[1])
    else:
        out, lse = _attention_op(q, k, v, mask, sm_scale, impl, accum, backward)
    return (out, lse) if return_lse else out


# --- the earlier torch API, kept working --------------------------------------------------------


def ffpa_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    allow_fallback: bool = False,
) -> torch.Tensor:
    """Deprecated: ``ffpa_attn_func`` is differentiable. Same behaviour as before: GQA
    without ``enable_gqa``, bottom-right causal, errors on CUDA inputs the kernels do not
    take unless ``allow_fallback=True`` (which now means torch SDPA, with a warning)."""
    routing.warn_deprecated(deprecation_message("ffpa_attn.torch_ops.ffpa_attention"))
    return _legacy(q, k, v, causal, scale, allow_fallback)


def _legacy(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None,
            allow_fallback: bool) -> torch.Tensor:
    # No kv heads at all is the dispatch's "shape" problem, not this rule's.
    if q.dim() == 4 and k.dim() == 4 and k.shape[1]:
        check_gqa_heads(q.shape[1], k.shape[1])
    return dispatch(q, k, v, None, 0.0, False, scale, True, legacy_causal=bool(causal), impl="auto", accum="fp32",
                    return_lse=False, strict=not allow_fallback, backward="auto")


class FFPAAttnFunction:
    """Deprecated: ``ffpa_attn_func`` is differentiable (the ``ffpa_attn::attention`` op).

    ``FFPAAttnFunction.apply(q, k, v, causal, scale, allow_fallback)`` keeps working.
    """

    @staticmethod
    def apply(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None,
              allow_fallback: bool = False) -> torch.Tensor:
        routing.warn_deprecated(deprecation_message("ffpa_attn.torch_ops.FFPAAttnFunction"))
        return _legacy(q, k, v, causal, scale, allow_fallback)
