"""The backward choices on CPU torch: "ffpa" (the backward kernels' custom op,
ffpa_attn.torch_bwd) is refused with the reason and the fix off CUDA or without the
kernels, "auto" falls back to torch's backward there, "torch" is torch's; the op's fake
gives the gradients' shapes on meta tensors. Its GPU rows are in gpu_torch_check.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import ffpa_attn  # noqa: E402
from ffpa_attn import ffpa_attn_func, torch_bwd  # noqa: E402
from ffpa_attn.torch_math import MASK_BOTTOM_RIGHT  # noqa: E402

pytestmark = pytest.mark.torch


def _qkv(dtype=torch.float64, requires_grad=True):
    g = torch.Generator().manual_seed(3)
    return [torch.randn(1, 2, n, 8, generator=g, dtype=dtype, requires_grad=requires_grad) for n in (5, 7, 7)]


def test_ffpa_backward_refused_on_cpu_with_the_fix():
    q, k, v = _qkv()
    with pytest.raises(ffpa_attn.UnsupportedImplError, match=r"backward='ffpa' cannot run: .*on cpu.*'torch'"):
        ffpa_attn_func(q, k, v, backward="ffpa")


@pytest.mark.parametrize("choice", ["auto", "torch"])
def test_auto_and_torch_give_the_math_gradient_on_cpu(choice):
    q, k, v = _qkv()
    ffpa_attn_func(q, k, v, is_causal=True, backward=choice).square().sum().backward()
    got = [t.grad.clone() for t in (q, k, v)]
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    torch.nn.functional.scaled_dot_product_attention(q2, k2, v2, is_causal=True).square().sum().backward()
    for g, t in zip(got, (q2, k2, v2)):
        torch.testing.assert_close(g, t.grad)


def test_problem_names_what_is_missing(install_extension):
    cuda_q = SimpleNamespace(device=SimpleNamespace(type="cuda"), dtype=torch.float16, shape=(1, 2, 5, 128))
    install_extension({"head_dims": [128], "dtypes": ["fp16"], "archs": ["89"], "fwd": True, "impls": ["mma"]})
    assert "no backward kernels" in torch_bwd.ffpa_backward_problem(cuda_q)
    install_extension({"head_dims": [128], "dtypes": ["fp16"], "archs": ["89"], "fwd": True, "impls": ["mma"],
                       "bwd": True, "bwd_instances": ["128:fp16"]})
    assert ffpa_attn.cuda.CUDA_BWD_AVAILABLE is True and ffpa_attn.cuda.BWD_INSTANCES == ((128, "fp16"),)
    assert torch_bwd.ffpa_backward_problem(cuda_q) is None
    assert "head dim 64 fp16" in torch_bwd.ffpa_backward_problem(
        SimpleNamespace(device=cuda_q.device, dtype=torch.float16, shape=(1, 2, 5, 64)))
    assert "bf16" in torch_bwd.ffpa_backward_problem(
        SimpleNamespace(device=cuda_q.device, dtype=torch.bfloat16, shape=(1, 2, 5, 128)))
    assert "fp16 / bf16" in torch_bwd.ffpa_backward_problem(
        SimpleNamespace(device=cuda_q.device, dtype=torch.float32, shape=(1, 2, 5, 128)))
    assert "on cpu" in torch_bwd.ffpa_backward_problem(torch.empty(1, 2, 5, 128, dtype=torch.float16))


def test_backward_op_fake_on_meta():
    """The op's fake (what torch.compile traces): one gradient per input, contiguous, their shapes."""
    q = torch.empty(2, 4, 33, 64, dtype=torch.float16, device="meta").transpose(1, 2).transpose(1, 2)
    k = torch.empty(2, 2, 40, 64, dtype=torch.float16, device="meta")
    v = torch.empty(2, 2, 40, 64, dtype=torch.float16, device="meta")
    out = torch.empty_like(q)
    lse = torch.empty(2, 4, 33, dtype=torch.float32, device="meta")
    dq, dk, dv = torch_bwd._backward_op(q, k, v, out, lse, torch.empty_like(q), MASK_BOTTOM_RIGHT, 0.125)
    assert (dq.shape, dk.shape, dv.shape) == (q.shape, k.shape, v.shape)
    assert all(t.is_contiguous() and t.dtype == torch.float16 for t in (dq, dk, dv))
