"""Hostile inputs of the drop-in, each through the real CPU path: malformed ``cu_seqlens``
under torch.compile (a clear error, never a signal or a silent row), the offsets the
CUDA branch takes under graph capture, value head dims unlike the query's (SDPA with a
named reason), window extents beyond int64 and dropout probabilities outside [0, 1]
(our errors, not torch's).
"""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from ffpa_attn import (  # noqa: E402
    SDPAFallbackWarning,
    ShapeError,
    UnsupportedFeatureError,
    ffpa_attn_func,
    ffpa_attn_varlen_func,
    last_kernel,
    routing,
    torch_ops,
    varlen,
)

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def _fresh_routing():
    routing._reset_for_tests()
    yield
    routing._reset_for_tests()


def _packed(total_q=16, total_k=16, h=2, d=8, dv=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(total_q, h, d, generator=gen), torch.randn(total_k, h, d, generator=gen),
            torch.randn(total_k, h, dv or d, generator=gen))


def _i32(*xs):
    return torch.tensor(xs, dtype=torch.int32)


# --- malformed offsets under torch.compile ------------------------------------------------------

# (malformed offsets, well-formed ones of the same length, max_seqlen, the error): each of
# _check_offset_values' rules.
MALFORMED = [
    ((0, 9, 4, 16), (0, 4, 8, 16), 12, "non-decreasing"),  # SIGFPE in torch's CPU kernel before
    ((0, 4, 15), (0, 4, 16), 12, "ends at 15"),             # a silent row of zeros before
    ((1, 4, 16), (0, 4, 16), 12, "must start at 0"),        # a silent row of zeros before
    ((0, 4, 16), (0, 4, 16), 5, "max_seqlen_q = 5"),        # rows past max_seqlen
]


@pytest.mark.parametrize("backward", [False, True])
def test_compiled_varlen_refuses_malformed_offsets(backward):
    torch._dynamo.reset()
    q, k, v = _packed()

    def fn(q, k, v, cu_q, cu_k, max_q, max_k):
        return ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)

    compiled = torch.compile(fn, fullgraph=True, dynamic=False, backend="aot_eager" if backward else "eager")
    leaves = [t.clone().requires_grad_(backward) for t in (q, k, v)]
    for offsets, good, max_q, match in MALFORMED:
        bad, good = _i32(*offsets), _i32(*good)
        want = fn(*leaves, good, good, 12, 12)
        torch.testing.assert_close(compiled(*leaves, good, good, 12, 12), want)
        with pytest.raises(ShapeError, match=match):
            out = compiled(*leaves, bad, good, max_q, 12)
            if backward:
                out.sum().backward()
        with pytest.raises(ShapeError, match=match.replace("_q", "_k")):
            compiled(*leaves, good, bad, 12, max_q)
        # The compiled function still serves good offsets afterwards.
        torch.testing.assert_close(compiled(*leaves, good, good, 12, 12), want)


def test_compiled_varlen_refuses_bad_key_counts():
    torch._dynamo.reset()
    q, k, v = _packed()
    cu = _i32(0, 4, 16)
    compiled = torch.compile(lambda q, k, v, used: ffpa_attn_varlen_func(q, k, v, cu, cu, 12, 12, seqused_k=used),
                             fullgraph=True, backend="eager")
    with pytest.raises(ShapeError, match=r"seqused_k\[1\] = 13"):
        compiled(q, k, v, _i32(4, 13))
    with pytest.raises(ShapeError, match=r"seqused_k\[0\] = -1"):
        compiled(q, k, v, _i32(-1, 3))
    out = compiled(q, k, v, _i32(2, 5))
    assert torch.isfinite(out).all()


def test_the_op_called_directly_checks_the_offsets():
    # torch.ops.ffpa_attn.varlen_attention is public through torch.library: its own check.
    q, k, v = _packed()
    with pytest.raises(ShapeError, match="non-decreasing"):
        torch.ops.ffpa_attn.varlen_attention(q, k, v, _i32(0, 9, 4, 16), _i32(0, 4, 8, 16), 12, 12, True, -1, -1,
                                             0.3, "auto", "fp32", "auto")


def test_offsets_under_graph_capture_are_clamped_and_flagged():
    # CUDA graph capture cannot read the offsets on the host: the CUDA branch of the op
    # hands the kernels _device_safe_layout's offsets and makes the output NaN when the
    # given ones are malformed. The helper is device-neutral; here on CPU tensors.
    cases = [((0, 9, 4, 16), True), ((0, 4, 15), True), ((1, 4, 16), True), ((0, -5, 16), True),
             ((0, 4, 40), True), ((0, 4, 16), False), ((0, 0, 16), False)]
    for offsets, malformed in cases:
        cu = _i32(*offsets)
        good = _i32(0, *([16] * (len(offsets) - 1)))
        safe_q, safe_k, used, bad = varlen._device_safe_layout(cu, good, 16, 16, 16, 16, None)
        assert bool(bad) == malformed, offsets
        assert used is None and torch.equal(safe_k, good)
        assert safe_q.dtype == torch.int32 and int(safe_q.min()) >= 0 and int(safe_q.max()) <= 16
        assert bool((safe_q[1:] >= safe_q[:-1]).all()), safe_q
        if not malformed:
            assert torch.equal(safe_q, cu)
    cu = _i32(0, 4, 16)
    for used, malformed in (((4, 12), False), ((0, 3), False), ((5, 1), True), ((-2, 1), True)):
        *_, safe_used, bad = varlen._device_safe_layout(cu, cu, 16, 16, 12, 12, _i32(*used))
        assert bool(bad) == malformed, used
        assert bool((safe_used >= 0).all()) and bool((safe_used <= _i32(4, 12)).all())
    # max_seqlen below the longest sequence: flagged (the kernels' grid would miss rows).
    assert bool(varlen._device_safe_layout(cu, cu, 16, 16, 11, 12, None)[3])


# --- value head dims unlike the query's (MLA) -----------------------------------------------------


def test_v_head_dim_unlike_qs_runs_on_sdpa_with_the_reason():
    # DeepSeek-V3's multi-head latent attention: q / k 192, v 128 (here 24 / 16).
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 4, 9, 24, generator=gen), torch.randn(2, 4, 9, 24, generator=gen)
    v = torch.randn(2, 4, 9, 16, generator=gen)
    with pytest.warns(SDPAFallbackWarning, match="(?s)reason 'shape'.*head dims q 24, k 24, v 16.*nothing to change"):
        out = ffpa_attn_func(q, k, v, is_causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert last_kernel(with_reason=True) == ("sdpa", "shape")


def test_varlen_v_head_dim_unlike_qs_runs_on_sdpa_per_sequence():
    q, k, v = _packed(dv=4)
    cu = _i32(0, 5, 16)
    leaves = [t.requires_grad_() for t in (q, k, v)]
    with pytest.warns(SDPAFallbackWarning, match="(?s)reason 'shape'.*q / k 8 and v 4.*nothing to change"):
        out = ffpa_attn_varlen_func(*leaves, cu, cu, 11, 11, causal=True, window_size=(3, 0))
    assert out.shape == (16, 2, 4)
    pieces = []
    for a, b in ((0, 5), (5, 16)):
        mask = torch.ones(b - a, b - a, dtype=torch.bool).tril().triu(-3)
        pieces.append(F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1) for t in leaves),
                                                     attn_mask=mask).transpose(0, 1))
    want = torch.cat(pieces)
    torch.testing.assert_close(out, want)
    got_grads = torch.autograd.grad(out.sum(), leaves)
    want_grads = torch.autograd.grad(want.sum(), leaves)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b)
    with pytest.raises(ShapeError, match="q and k must have one head dim"):
        ffpa_attn_varlen_func(q, k[..., :4], v, cu, cu, 11, 11)


# --- window extents and dropout: our errors --------------------------------------------------------


def test_window_extents_beyond_int64_are_our_error():
    q, k, v = _packed()
    q4, k4, v4 = (t.transpose(0, 1)[None] for t in (q, k, v))
    cu = _i32(0, 16)
    for window in ((2**63, 0), (0, 2**64), (2**70, 2**70)):
        with pytest.raises(UnsupportedFeatureError, match="beyond int64.*pass -1"):
            ffpa_attn_func(q4, k4, v4, window_size=window)
        with pytest.raises(UnsupportedFeatureError, match="beyond int64.*pass -1"):
            ffpa_attn_varlen_func(q, k, v, cu, cu, 16, 16, window_size=window)


@pytest.mark.parametrize("window", [(2**63 - 1, 2**63 - 1), (2**62, 1), (1, 2**40)])
def test_huge_window_extents_mean_unbounded(window):
    # An extent past every key bounds nothing; int arithmetic on it must not wrap.
    q, k, v = _packed()
    q4, k4, v4 = (t.transpose(0, 1)[None] for t in (q, k, v))
    unbounded = tuple(-1 if x > 100 else x for x in window)
    torch.testing.assert_close(ffpa_attn_func(q4, k4, v4, window_size=window),
                               ffpa_attn_func(q4, k4, v4, window_size=unbounded))
    cu = _i32(0, 7, 16)
    torch.testing.assert_close(ffpa_attn_varlen_func(q, k, v, cu, cu, 9, 9, window_size=window),
                               ffpa_attn_varlen_func(q, k, v, cu, cu, 9, 9, window_size=unbounded))


@pytest.mark.parametrize("dropout_p", [math.nan, -0.1, 1.5, math.inf, "0.1", None])
def test_dropout_outside_zero_one_is_our_error(dropout_p):
    q, k, v = _packed()
    q4, k4, v4 = (t.transpose(0, 1)[None] for t in (q, k, v))
    cu = _i32(0, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)  # refused before any fallback
        with pytest.raises(UnsupportedFeatureError, match=r"dropout_p must be a probability in \[0, 1\]"):
            ffpa_attn_func(q4, k4, v4, dropout_p=dropout_p)
        with pytest.raises(UnsupportedFeatureError, match=r"dropout_p must be a probability in \[0, 1\]"):
            ffpa_attn_varlen_func(q, k, v, cu, cu, 16, 16, dropout_p=dropout_p)


def test_dropout_one_and_zero_keep_sdpas_meaning():
    q, k, v = _packed()
    q4, k4, v4 = (t.transpose(0, 1)[None] for t in (q, k, v))
    torch.testing.assert_close(ffpa_attn_func(q4, k4, v4, dropout_p=0), F.scaled_dot_product_attention(q4, k4, v4))
    with pytest.warns(SDPAFallbackWarning, match="reason 'dropout'"):
        out = ffpa_attn_func(q4, k4, v4, dropout_p=1.0)
    assert torch.equal(out, torch.zeros_like(out))  # SDPA drops every probability


def test_shape_fix_is_named_only_for_value_head_dims():
    q = torch.empty(1, 2, 3, 8)
    assert torch_ops._shape_fix(q, q, torch.empty(1, 2, 3, 4), False) == torch_ops.V_HEAD_DIM_FIX
    assert torch_ops._shape_fix(q, q, q, False) is None
