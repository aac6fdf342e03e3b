"""The FFPA backward kernels in torch: the ``ffpa_attn::attention_backward`` custom op.

``backward="auto"`` and ``"ffpa"`` of ``ffpa_attn_func`` run it (ffpa_attn.torch_ops):
dq, dk, dv from the forward's O and LSE by the library's split-D backward kernels
(csrc/kernels/ffpa/bwd_kernel_mma.cuh), on the current stream, into tensors torch
allocates (so CUDA graphs capture it), with a fake implementation (so
``torch.compile(fullgraph=True)`` traces the backward as one node). No atomics: the
gradients are bit-identical run to run, so ``torch.use_deterministic_algorithms`` needs no
other path.
"""

from __future__ import annotations

import torch

from . import cuda, device as ffpa_device
from .torch_math import MASK_NONE, MASK_TOP_LEFT

__all__ = ["attention_backward_ffpa", "ffpa_backward_problem"]

_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}


def ffpa_backward_problem(q: torch.Tensor) -> str | None:
    """None when the backward kernels take these inputs, else why not (in words)."""
    if not ffpa_device.on_device(q):
        return f"the backward kernels run on CUDA tensors, these are on {q.device.type}"
    if not cuda.CUDA_BWD_AVAILABLE:
        return "this build has no backward kernels (ffpa_attn.cuda.CUDA_BWD_AVAILABLE is False)"
    dtype = _DTYPES.get(q.dtype)
    if dtype is None:
        return f"the backward kernels take fp16 / bf16, got {q.dtype}"
    if (q.shape[-1], dtype) not in cuda.BWD_INSTANCES:
        have = ", ".join(f"{d}:{t}" for d, t in cuda.BWD_INSTANCES)
        return f"no backward kernel for head dim {q.shape[-1]} {dtype} in this build (it has {have})"
    return None


def _aligned(t: torch.Tensor) -> bool:
    # cp.async reads 16-byte vectors: the data pointer and the batch, head and row strides
    # (elements) must keep 16-byte alignment, and D must be unit-stride.
    return t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all(s % 8 == 0 for s in t.stride()[:-1])


@torch.library.custom_op("ffpa_attn::attention_backward", mutates_args=())
def _backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                 grad_out: torch.Tensor, mask: int, scale: float, window_left: int = -1,
                 window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # torch refuses to export a tensor that requires grad through DLPack; the kernels only
    # read these. An expanded or otherwise misaligned grad_out (e.g. the gradient of a sum)
    # is copied once.
    q, k, v, out, lse, grad_out = (t.detach() for t in (q, k, v, out, lse, grad_out))
    q, k, v, grad_out = (t if _aligned(t) else t.contiguous() for t in (q, k, v, grad_out))
    dq, dk, dv = (torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))
    b, hq, nq, _ = q.shape
    workspace = torch.empty(2 * b * hq * nq, dtype=torch.float32, device=q.device)
    ext = cuda.extension()
    assert ext is not None, "ffpa_backward_problem() said the backward kernels exist"
    # The window (bottom-right or top-left as the mask) only when there is one: builds
    # without windows (ffpa_attn.cuda.COMPILED_MASKS) take no such keyword.
    window = {} if (window_left, window_right) == (-1, -1) else {"window_left": window_left,
                                                                 "window_right": window_right}
    ext.backward(q, k, v, out, grad_out, lse.float(), dq, dk, dv, workspace, mask != MASK_NONE,
                 mask == MASK_TOP_LEFT, scale, **window)
    return dq, dk, dv


@_backward_op.register_fake
def _backward_fake(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                   grad_out: torch.Tensor, mask: int, scale: float, window_left: int = -1,
                   window_right: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return tuple(torch.empty_like(t, memory_format=torch.contiguous_format) for t in (q, k, v))  # type: ignore[return-value]


def attention_backward_ffpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                            grad_out: torch.Tensor, mask: int, scale: float,
                            window: tuple[int, int] = (-1, -1)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv by the backward kernels (the caller checked ffpa_backward_problem(), and
    cuda.COMPILED_MASKS for a window)."""
    if window != (-1, -1):
        return _backward_op(q, k, v, out, lse, grad_out, mask, scale, window[0], window[1])
    return _backward_op(q, k, v, out, lse, grad_out, mask, scale)
