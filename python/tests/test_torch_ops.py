"""The torch wrapper: math forward and the recomputed backward against torch autograd.

Skipped as a module when torch is not installed (the tools venv has no torch); the
no-torch behaviour is covered in test_package.py.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ffpa_attn  # noqa: E402
from ffpa_attn import ShapeError, reference  # noqa: E402
from ffpa_attn.torch_ops import attention_math, ffpa_attention  # noqa: E402

CASES = [
    # (B, Hq, Hkv, Nq, Nkv, D, causal)
    (1, 2, 2, 7, 7, 16, False),
    (2, 4, 2, 9, 9, 32, True),
    (1, 4, 1, 5, 12, 8, True),
    (1, 2, 2, 10, 6, 8, True),   # Nq > Nkv: fully masked rows
    (1, 3, 3, 17, 23, 24, False),
]


def make(b, hq, hkv, nq, nkv, d, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, nq, d, generator=gen, dtype=dtype),
            torch.randn(b, hkv, nkv, d, generator=gen, dtype=dtype),
            torch.randn(b, hkv, nkv, d, generator=gen, dtype=dtype))


def autograd_reference(q, k, v, causal, scale):
    """Plain differentiable math in fp64 (no custom backward) for the gradient check."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = q @ k.transpose(-1, -2) * scale
    if causal:
        nq, nkv = s.shape[-2:]
        mask = torch.ones(nq, nkv, dtype=torch.bool).tril(diagonal=nkv - nq)
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ v


@pytest.mark.parametrize("b,hq,hkv,nq,nkv,d,causal", CASES)
def test_math_forward_matches_numpy_reference(b, hq, hkv, nq, nkv, d, causal):
    q, k, v = make(b, hq, hkv, nq, nkv, d)
    out, lse = attention_math(q, k, v, causal=causal, return_lse=True)
    want, want_lse = reference.attention(q.numpy(), k.numpy(), v.numpy(), causal=causal, return_lse=True,
                                         dtype=np.float64)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.isneginf(lse.numpy()), np.isneginf(want_lse))
    finite = np.isfinite(want_lse)
    np.testing.assert_allclose(lse.numpy()[finite], want_lse[finite], rtol=1e-5)


@pytest.mark.parametrize("b,hq,hkv,nq,nkv,d,causal", CASES)
def test_backward_matches_autograd(b, hq, hkv, nq, nkv, d, causal):
    scale = 0.3
    q, k, v = (t.requires_grad_(True) for t in make(b, hq, hkv, nq, nkv, d, seed=nq))
    grad_out = torch.randn(b, hq, nq, d, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    ffpa_attention(q, k, v, causal=causal, scale=scale).backward(grad_out)
    got = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    autograd_reference(q, k, v, causal, scale).backward(grad_out)
    for mine, want, name in zip(got, (q.grad, k.grad, v.grad), "qkv"):
        assert mine.shape == want.shape, name
        # fp32 recompute inside the backward: compare at fp32 precision.
        torch.testing.assert_close(mine, want, rtol=1e-4, atol=1e-5, msg=f"d{name}")


def test_half_inputs_keep_their_dtype_in_grads():
    q, k, v = (t.half().requires_grad_(True) for t in make(1, 2, 2, 6, 6, 16, dtype=torch.float32))
    out = ffpa_attention(q, k, v)
    assert out.dtype == torch.float16
    out.float().sum().backward()
    assert q.grad.dtype == k.grad.dtype == v.grad.dtype == torch.float16


def test_ffpa_attn_func_on_cpu_tensors_uses_torch_math():
    q, k, v = make(1, 4, 2, 5, 8, 16, dtype=torch.float32)
    out, lse = ffpa_attn.ffpa_attn_func(q, k, v, causal=True, return_lse=True)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and lse.shape == (1, 4, 5)
    want = reference.attention(q.numpy(), k.numpy(), v.numpy(), causal=True)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


def test_shape_errors_on_cpu_tensors():
    q, k, v = make(1, 3, 2, 5, 5, 8)
    with pytest.raises(ShapeError):
        ffpa_attention(q, k, v)


def test_training_through_the_wrapper_reduces_loss():
    torch.manual_seed(0)
    proj = torch.nn.Linear(16, 48)
    x = torch.randn(4, 10, 16)
    target = torch.randn(4, 2, 10, 8)
    opt = torch.optim.SGD(proj.parameters(), lr=0.5)
    losses = []
    for _ in range(20):
        q, k, v = proj(x).reshape(4, 10, 3, 2, 8).permute(2, 0, 3, 1, 4)
        loss = torch.nn.functional.mse_loss(ffpa_attention(q, k, v, causal=True), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
