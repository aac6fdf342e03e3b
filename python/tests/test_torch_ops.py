"""The ffpa_attn::attention op on CPU torch: registration, the fake, opcheck, the
backward math (gradcheck), torch.compile, and the fused backward's calls on meta tensors.

Skipped as a module when torch is not installed (python.unit, the tools venv); CTest's
python.torch runs it in .venv-torch, where a missing torch is a failure.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import ffpa_attn  # noqa: E402
from ffpa_attn import FFPADeprecationWarning, ShapeError, ffpa_attn_func, last_kernel, reference, routing  # noqa: E402
from ffpa_attn import torch_ops  # noqa: E402
from ffpa_attn.torch_math import (  # noqa: E402
    MASK_BOTTOM_RIGHT,
    MASK_NONE,
    MASK_TOP_LEFT,
    attention_backward_lse,
    attention_backward_recompute,
    attention_math,
)

pytestmark = pytest.mark.torch

CASES = [
    # (B, Hq, Hkv, Nq, Nkv, D)
    (1, 2, 2, 7, 7, 16),
    (2, 4, 2, 9, 9, 32),
    (1, 4, 1, 5, 12, 8),
    (1, 2, 2, 10, 6, 8),   # Nq > Nkv: bottom-right leaves rows with no key
    (1, 3, 3, 17, 23, 24),
]
MASKS = [MASK_NONE, MASK_TOP_LEFT, MASK_BOTTOM_RIGHT]


@pytest.fixture(autouse=True)
def _fresh_routing():
    routing._reset_for_tests()
    yield
    routing._reset_for_tests()


def make(b, hq, hkv, nq, nkv, d, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, nq, d, generator=gen, dtype=dtype),
            torch.randn(b, hkv, nkv, d, generator=gen, dtype=dtype),
            torch.randn(b, hkv, nkv, d, generator=gen, dtype=dtype))


def allowed(nq, nkv, mask):
    rows, cols = torch.arange(nq)[:, None], torch.arange(nkv)[None, :]
    if mask == MASK_TOP_LEFT:
        return cols <= rows
    if mask == MASK_BOTTOM_RIGHT:
        return cols <= rows + (nkv - nq)
    return torch.ones(nq, nkv, dtype=torch.bool)


def autograd_reference(q, k, v, mask, scale):
    """Plain differentiable math in fp64, written here (no custom backward)."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    s = q @ k.transpose(-1, -2) * scale
    s = s.masked_fill(~allowed(q.shape[2], k.shape[2], mask), float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # rows with no key: 0
    return p @ v


# --- forward math ---------------------------------------------------------------------


@pytest.mark.parametrize("b,hq,hkv,nq,nkv,d", CASES)
def test_math_forward_matches_numpy_reference(b, hq, hkv, nq, nkv, d):
    q, k, v = make(b, hq, hkv, nq, nkv, d)
    out, lse = attention_math(q, k, v, causal=True, return_lse=True)
    want, want_lse = reference.attention(q.numpy(), k.numpy(), v.numpy(), causal=True, return_lse=True,
                                         dtype=np.float64)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    assert lse.dtype == torch.float64  # fp64 inputs compute and return fp64
    np.testing.assert_array_equal(np.isneginf(lse.numpy()), np.isneginf(want_lse))
    finite = np.isfinite(want_lse)
    np.testing.assert_allclose(lse.numpy()[finite], want_lse[finite], rtol=1e-12)


@pytest.mark.parametrize("nq,nkv", [(7, 7), (5, 12), (12, 5)])
def test_top_left_mask_is_sdpas_is_causal(nq, nkv):
    q, k, v = make(1, 2, 2, nq, nkv, 16)
    out = attention_math(q, k, v, causal=MASK_TOP_LEFT)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


# --- the backward's math: gradcheck and autograd agreement ---------------------------------


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("b,hq,hkv,nq,nkv,d", CASES)
def test_lse_backward_matches_autograd(b, hq, hkv, nq, nkv, d, mask):
    scale = 0.3
    q, k, v = make(b, hq, hkv, nq, nkv, d, seed=nq)
    grad_out = torch.randn(b, hq, nq, d, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    out, lse = attention_math(q, k, v, causal=mask, scale=scale, return_lse=True)
    # block_elements forces several row blocks: the blocked recompute is what is tested.
    got = attention_backward_lse(q, k, v, out, lse, grad_out, mask, scale, block_elements=b * hq * nkv * 2)
    got_full = attention_backward_recompute(q, k, v, grad_out, mask, scale)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    autograd_reference(*leaves, mask, scale).backward(grad_out)
    for name, mine, full, leaf in zip("qkv", got, got_full, leaves):
        torch.testing.assert_close(mine, leaf.grad, rtol=1e-10, atol=1e-12, msg=f"lse d{name}")
        torch.testing.assert_close(full, leaf.grad, rtol=1e-10, atol=1e-12, msg=f"recompute d{name}")


@pytest.mark.parametrize("backward", ["auto", "lse", "recompute"])
@pytest.mark.parametrize("kwargs,shape", [
    ({"is_causal": True, "enable_gqa": True}, (1, 4, 2, 5, 7, 8)),
    ({"is_causal": True}, (1, 2, 2, 7, 4, 8)),      # top-left with Nq > Nkv
    ({"enable_gqa": True, "scale": 0.5}, (2, 2, 1, 3, 6, 8)),
])
def test_gradcheck_through_the_op(backward, kwargs, shape):
    """torch.autograd.gradcheck of ffpa_attn_func (the op and its registered backward) in fp64."""
    q, k, v = (t.requires_grad_(True) for t in make(*shape, seed=3))
    assert torch.autograd.gradcheck(lambda a, b_, c: ffpa_attn_func(a, b_, c, backward=backward, **kwargs),
                                    (q, k, v), eps=1e-6, atol=1e-7, rtol=1e-6)
    assert last_kernel() == "torch_math"


def test_gradcheck_bottom_right_with_rows_that_see_no_key():
    from torch.nn.attention.bias import causal_lower_right

    q, k, v = (t.requires_grad_(True) for t in make(1, 2, 2, 9, 5, 8, seed=4))
    bias = causal_lower_right(9, 5)
    assert torch.autograd.gradcheck(lambda a, b_, c: ffpa_attn_func(a, b_, c, attn_mask=bias), (q, k, v),
                                    eps=1e-6, atol=1e-7, rtol=1e-6)
    out = ffpa_attn_func(q, k, v, attn_mask=bias)
    assert torch.equal(out[:, :, :4], torch.zeros_like(out[:, :, :4]))  # the first Nq - Nkv rows see no key


def test_lse_blocks_do_not_change_the_result():
    q, k, v = make(2, 4, 2, 33, 40, 16, dtype=torch.float32)
    grad_out = torch.randn_like(q)
    out, lse = attention_math(q, k, v, causal=MASK_TOP_LEFT, return_lse=True)
    one = attention_backward_lse(q, k, v, out, lse, grad_out, MASK_TOP_LEFT, 0.25)
    many = attention_backward_lse(q, k, v, out, lse, grad_out, MASK_TOP_LEFT, 0.25, block_elements=1)
    for a, b in zip(one, many):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_grads_agree_with_sdpa_in_half_precision():
    q, k, v = (t.to(torch.bfloat16).requires_grad_(True) for t in make(1, 4, 4, 16, 16, 32, dtype=torch.float32))
    ffpa_attn_func(q, k, v, is_causal=True).float().square().sum().backward()
    mine = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    F.scaled_dot_product_attention(q, k, v, is_causal=True).float().square().sum().backward()
    for a, t in zip(mine, (q, k, v)):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a.float(), t.grad.float(), rtol=5e-2, atol=5e-2)


# --- the op: registration, fake, opcheck ---------------------------------------------------


def test_op_is_registered_with_its_schema():
    op = torch.ops.ffpa_attn.attention.default
    assert str(op._schema) == ("ffpa_attn::attention(Tensor q, Tensor k, Tensor v, SymInt mask, float scale, str impl, "
                               "str accum, str backward, SymInt window_left=-1, SymInt window_right=-1) -> "
                               "(Tensor, Tensor)")
    assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Meta") or \
        torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeExplicitAutograd")


@pytest.mark.parametrize("args", [
    (make(1, 2, 2, 5, 7, 8), MASK_BOTTOM_RIGHT, 0.3, "auto"),
    (make(2, 4, 2, 6, 6, 16), MASK_TOP_LEFT, 0.25, "lse"),
    (make(1, 2, 1, 7, 3, 8), MASK_TOP_LEFT, 0.35, "recompute"),
    (make(1, 2, 2, 4, 4, 8, dtype=torch.float32), MASK_NONE, 0.35, "auto"),
])
def test_opcheck(args):
    """torch.library.opcheck: schema, autograd registration, fake tensor, AOT dispatch (dynamic shapes)."""
    (q, k, v), mask, scale, backward = args
    leaves = tuple(t.clone().requires_grad_(True) for t in (q, k, v))
    result = torch.library.opcheck(torch_ops._attention_op, (*leaves, mask, scale, "auto", "fp32", backward))
    assert result == {name: "SUCCESS" for name in result} and len(result) == 4


def test_fake_gives_the_real_layout():
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v = make(2, 4, 2, 9, 11, 16, dtype=torch.float32)
    real_out, real_lse = torch.ops.ffpa_attn.attention(q, k, v, MASK_NONE, 0.25, "auto", "fp32", "auto")
    with FakeTensorMode() as mode:
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        fake_out, fake_lse = torch.ops.ffpa_attn.attention(fq, fk, fv, MASK_NONE, 0.25, "auto", "fp32", "auto")
    for real, fake in ((real_out, fake_out), (real_lse, fake_lse)):
        assert fake.shape == real.shape and fake.stride() == real.stride() and fake.dtype == real.dtype
    # [B, H, N, D] over [B, N, H, D] memory: what SDPA's fused kernels return and read.
    assert real_out.stride() == (9 * 4 * 16, 16, 4 * 16, 1)
    assert real_lse.dtype == torch.float32 and real_lse.shape == (2, 4, 9)


def test_meta_tensors_go_through_the_fake():
    q, k, v = (torch.empty(2, 4, 9, 64, device="meta", dtype=torch.float16) for _ in range(3))
    out, lse = ffpa_attn_func(q, k, v, is_causal=True, return_lse=True)
    assert out.device.type == "meta" and out.shape == q.shape and lse.shape == (2, 4, 9)


def test_lse_carries_no_gradient():
    q, k, v = (t.requires_grad_(True) for t in make(1, 2, 2, 4, 4, 8))
    out, lse = ffpa_attn_func(q, k, v, return_lse=True)
    assert out.requires_grad and not lse.requires_grad


# --- torch.compile ---------------------------------------------------------------------------


class Block(torch.nn.Module):
    """A model written for SDPA: it calls torch.nn.functional.scaled_dot_product_attention."""

    def __init__(self, dim=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = torch.nn.Linear(dim, dim)
        self.kv = torch.nn.Linear(dim, 2 * kv_heads * self.head_dim)
        self.o = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o(o.transpose(1, 2).reshape(b, n, -1))


class DirectBlock(Block):
    def forward(self, x):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return self.o(ffpa_attn_func(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2).reshape(b, n, -1))


def _counting_backend():
    graphs = []

    def backend(gm, example_inputs):
        from torch._dynamo.backends.common import aot_autograd

        graphs.append(gm)
        return aot_autograd(fw_compiler=_record_ops(graphs), bw_compiler=_record_ops(graphs))(gm, example_inputs)

    return backend, graphs


def _record_ops(graphs):
    from functorch.compile import make_boxed_func

    def compiler(gm, _inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)
    return compiler


def _train_step(model, x):
    loss = model(x).square().mean()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return loss.detach(), grads


@pytest.mark.parametrize("patched", [False, True], ids=["ffpa_attn_func", "F.sdpa replaced"])
def test_compile_fullgraph_traces_the_op_as_one_node(patched, monkeypatch):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Block() if patched else DirectBlock()
    x = torch.randn(2, 10, 32)
    eager_sdpa_loss, eager_sdpa_grads = _train_step(model, x)  # unpatched SDPA, eager
    if patched:
        monkeypatch.setattr(F, "scaled_dot_product_attention", ffpa_attn_func)
    backend, graphs = _counting_backend()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    loss, grads = _train_step(compiled, x)
    torch.testing.assert_close(loss, eager_sdpa_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads, eager_sdpa_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    dynamo_graph, forward, backward_graph = graphs  # one dynamo graph (no break), its fw and bw
    targets = [str(n.target) for n in forward.graph.nodes if n.op == "call_function"]
    assert targets.count("ffpa_attn.attention.default") == 1, targets
    assert not any("scaled_dot_product" in t for t in targets), targets
    assert last_kernel() == "torch_math"


def test_compile_with_inductor_fullgraph():
    """The default backend, once: the op stays one opaque node inductor calls."""
    torch._dynamo.reset()
    torch.manual_seed(1)
    model = DirectBlock()
    x = torch.randn(2, 12, 32)
    want, want_grads = _train_step(model, x)
    loss, grads = _train_step(torch.compile(model, fullgraph=True), x)
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads, want_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_compile_of_a_fallback_warns_once_when_traced():
    torch._dynamo.reset()
    q, k, v = make(1, 2, 2, 6, 6, 8, dtype=torch.float32)
    mask = torch.rand(6, 6) > 0.3

    def fn(q, k, v):
        return ffpa_attn_func(q, k, v, attn_mask=mask)

    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(q, k, v)
        compiled(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    fallback = [w for w in caught if issubclass(w.category, ffpa_attn.SDPAFallbackWarning)]
    assert len(fallback) == 1 and "'attn_mask'" in str(fallback[0].message)
    assert last_kernel(with_reason=True) == ("sdpa", "attn_mask")


def test_compile_strict_fallback_is_an_error():
    torch._dynamo.reset()
    q, k, v = make(1, 2, 2, 6, 6, 8, dtype=torch.float32)
    compiled = torch.compile(lambda q, k, v: ffpa_attn_func(q, k, v, dropout_p=0.1, strict=True), fullgraph=True,
                             backend="aot_eager")
    with pytest.raises(Exception, match="dropout"):
        compiled(q, k, v)


# --- the fused CUDA backward's calls, checked on meta tensors --------------------------------


@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2)])
@pytest.mark.parametrize("kind", ["efficient", "flash"])
def test_fused_backward_calls_on_meta(kind, hq, hkv):
    """The argument lists of aten::_efficient/_flash_attention_backward and the GQA
    reshapes, run on meta tensors (torch's meta kernels check arity and shapes)."""
    b, nq, nkv, d = 2, 40, 70, 64

    def meta(*shape, dtype=torch.float16):
        return torch.empty(*shape, device="meta", dtype=dtype)

    q, k, v = meta(b, hq, nq, d), meta(b, hkv, nkv, d), meta(b, hkv, nkv, d)
    out = meta(b, nq, hq, d).transpose(1, 2)
    lse = meta(b, hq, nq, dtype=torch.float32)
    grad_out = meta(b, hq, nq, d)
    if kind == "flash":
        dq, dk, dv = torch_ops._flash_backward(q, k, v, out, lse, grad_out, MASK_BOTTOM_RIGHT, 0.125)
    else:
        dq, dk, dv = torch_ops._efficient_backward(q, k, v, out, lse, grad_out, MASK_TOP_LEFT, 0.125)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert dq.dtype == dk.dtype == dv.dtype == torch.float16


def test_lse_for_the_fused_kernels():
    lse = torch.tensor([[[-math.inf, -math.inf, 1.0, 2.0, 3.0]]])
    padded = torch_ops._lse_for_fused(lse, MASK_BOTTOM_RIGHT, 5, 3, 32)
    # Rows that see no key get +inf (P = 0 there); the tail up to 32 rows is +inf too.
    assert padded.shape == (1, 1, 32)
    assert torch.equal(padded[0, 0, :5], torch.tensor([math.inf, math.inf, 1.0, 2.0, 3.0]))
    assert torch.isposinf(padded[0, 0, 5:]).all()
    assert torch_ops._lse_for_fused(lse[..., 2:], MASK_NONE, 3, 3, 1) is not None


def test_fused_backward_is_cuda_only():
    q, k, v = (t.requires_grad_(True) for t in make(1, 2, 2, 4, 4, 8, dtype=torch.float16))
    assert torch_ops.fused_backward_kind(q, k, MASK_NONE) is None
    with pytest.raises(ffpa_attn.UnsupportedImplError, match="fused CUDA attention backward"):
        ffpa_attn_func(q, k, v, backward="fused")


# --- the earlier torch API -------------------------------------------------------------------


def test_deprecated_wrappers_keep_working():
    q, k, v = (t.requires_grad_(True) for t in make(1, 4, 2, 6, 9, 8))
    with pytest.warns(FFPADeprecationWarning, match="ffpa_attention is deprecated"):
        out = torch_ops.ffpa_attention(q, k, v, causal=True, scale=0.3)
    want = attention_math(q, k, v, causal=True, scale=0.3)  # bottom-right, GQA as before
    torch.testing.assert_close(out, want)
    with pytest.warns(FFPADeprecationWarning, match="FFPAAttnFunction is deprecated"):
        again = torch_ops.FFPAAttnFunction.apply(q, k, v, True, 0.3)
    torch.testing.assert_close(again, want)
    out.sum().backward()
    assert q.grad is not None and k.grad.shape == k.shape
    with pytest.raises(ShapeError), pytest.warns(FFPADeprecationWarning):
        torch_ops.ffpa_attention(*make(1, 3, 2, 5, 5, 8))


def test_training_through_ffpa_attn_func_reduces_loss():
    torch.manual_seed(0)
    proj = torch.nn.Linear(16, 48)
    x = torch.randn(4, 10, 16)
    target = torch.randn(4, 2, 10, 8)
    opt = torch.optim.SGD(proj.parameters(), lr=0.5)
    losses = []
    for _ in range(20):
        q, k, v = proj(x).reshape(4, 10, 3, 2, 8).permute(2, 0, 3, 1, 4)
        loss = torch.nn.functional.mse_loss(ffpa_attn_func(q, k, v, is_causal=True), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
