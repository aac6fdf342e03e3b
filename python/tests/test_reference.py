"""reference.attention against a naive per-element loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ffpa_attn import ShapeError, UnsupportedDTypeError, reference


def naive_attention(q, k, v, causal=False, scale=None):
    """Textbook formula, one query row at a time, in float64 Python loops."""
    b, hq, nq, d = q.shape
    hkv, nkv = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    out = np.zeros((b, hq, nq, d))
    lse = np.full((b, hq, nq), -np.inf)
    for bi in range(b):
        for h in range(hq):
            kh = h // (hq // hkv)
            for i in range(nq):
                keys = [j for j in range(nkv) if not causal or j <= i + nkv - nq]
                if not keys:
                    continue
                logits = [scale * float(np.dot(q[bi, h, i].astype(np.float64), k[bi, kh, j])) for j in keys]
                m = max(logits)
                weights = [math.exp(x - m) for x in logits]
                total = sum(weights)
                lse[bi, h, i] = m + math.log(total)
                for w, j in zip(weights, keys):
                    out[bi, h, i] += w / total * v[bi, kh, j].astype(np.float64)
    return out, lse


def make(shape_q, shape_kv, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape_q).astype(dtype),
            rng.standard_normal(shape_kv).astype(dtype),
            rng.standard_normal(shape_kv).astype(dtype))


CASES = [
    # (B, Hq, Hkv, Nq, Nkv, D, causal, scale)
    (1, 1, 1, 4, 4, 8, False, None),
    (2, 2, 2, 5, 5, 16, True, None),
    (1, 4, 2, 7, 9, 12, False, None),   # GQA, cross lengths
    (1, 4, 1, 6, 11, 8, True, None),    # MQA, causal decode-style (Nq < Nkv)
    (1, 2, 2, 9, 5, 8, True, None),     # Nq > Nkv: first rows fully masked
    (2, 3, 3, 13, 17, 24, False, 0.3),  # non-aligned sizes, explicit scale
    (1, 2, 1, 33, 33, 64, True, 0.05),
]


@pytest.mark.parametrize("b,hq,hkv,nq,nkv,d,causal,scale", CASES)
def test_matches_naive_formula_fp64(b, hq, hkv, nq, nkv, d, causal, scale):
    q, k, v = make((b, hq, nq, d), (b, hkv, nkv, d), seed=nq * 31 + d)
    want_out, want_lse = naive_attention(q, k, v, causal, scale)
    out, lse = reference.attention(q, k, v, causal=causal, scale=scale, return_lse=True, dtype=np.float64)
    assert out.dtype == np.float64 and lse.dtype == np.float64
    assert out.shape == (b, hq, nq, d) and lse.shape == (b, hq, nq)
    np.testing.assert_allclose(out, want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.isfinite(lse), np.isfinite(want_lse))
    np.testing.assert_allclose(lse[np.isfinite(lse)], want_lse[np.isfinite(want_lse)], rtol=1e-12)


@pytest.mark.parametrize("b,hq,hkv,nq,nkv,d,causal,scale", CASES)
def test_fp32_close_to_naive(b, hq, hkv, nq, nkv, d, causal, scale):
    q, k, v = make((b, hq, nq, d), (b, hkv, nkv, d), seed=d, dtype=np.float32)
    want_out, _ = naive_attention(q, k, v, causal, scale)
    out = reference.attention(q, k, v, causal=causal, scale=scale)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)


def test_fully_masked_rows_are_zero_with_minus_inf_lse():
    q, k, v = make((1, 1, 5, 4), (1, 1, 2, 4))
    out, lse = reference.attention(q, k, v, causal=True, return_lse=True)
    # bottom-right alignment: rows 0..2 see no key, row 3 sees key 0, row 4 sees both.
    assert np.all(out[0, 0, :3] == 0) and np.all(np.isneginf(lse[0, 0, :3]))
    np.testing.assert_allclose(out[0, 0, 3], v[0, 0, 0], rtol=1e-6)
    assert np.all(np.isfinite(out))


def test_causal_mask_is_bottom_right_aligned():
    mask = reference.causal_mask(2, 4)
    np.testing.assert_array_equal(mask, [[True, True, True, False], [True, True, True, True]])
    np.testing.assert_array_equal(reference.causal_mask(3, 3), np.tril(np.ones((3, 3), bool)))


def test_softmax_is_stable_for_large_logits():
    q = np.full((1, 1, 2, 4), 1e3)
    k = np.full((1, 1, 3, 4), 1e3)
    v = np.arange(12, dtype=np.float64).reshape(1, 1, 3, 4)
    out, lse = reference.attention(q, k, v, return_lse=True, dtype=np.float64)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(lse))
    np.testing.assert_allclose(out[0, 0, 0], v[0, 0].mean(axis=0))


def test_default_scale_is_inverse_sqrt_d():
    q, k, v = make((1, 2, 3, 16), (1, 2, 3, 16))
    np.testing.assert_allclose(reference.attention(q, k, v), reference.attention(q, k, v, scale=0.25), rtol=1e-6)


def test_gqa_equals_repeated_heads():
    q, k, v = make((1, 6, 5, 8), (1, 2, 5, 8))
    expanded = reference.attention(q, np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1), causal=True)
    np.testing.assert_allclose(reference.attention(q, k, v, causal=True), expanded, rtol=1e-6)


@pytest.mark.parametrize(
    "shape_q,shape_kv",
    [((1, 2, 3), (1, 2, 3, 4)), ((1, 3, 4, 8), (1, 2, 4, 8)), ((2, 2, 4, 8), (1, 2, 4, 8)),
     ((1, 2, 4, 8), (1, 2, 4, 16)), ((1, 2, 0, 8), (1, 2, 4, 8))],
)
def test_shape_errors(shape_q, shape_kv):
    q = np.zeros(shape_q, np.float32)
    k = np.zeros(shape_kv, np.float32)
    with pytest.raises(ShapeError) as info:
        reference.attention(q, k, k)
    assert isinstance(info.value, ValueError)


def test_k_v_shape_mismatch():
    with pytest.raises(ShapeError, match="same shape"):
        reference.attention(np.zeros((1, 1, 2, 4)), np.zeros((1, 1, 3, 4)), np.zeros((1, 1, 2, 4)))


def test_dtype_errors():
    x = np.zeros((1, 1, 2, 4), np.float32)
    with pytest.raises(UnsupportedDTypeError, match="float32 or float64"):
        reference.attention(x, x, x, dtype=np.float16)
    with pytest.raises(UnsupportedDTypeError, match="astype"):
        reference.attention(x.astype(np.int32), x, x)


def test_round_to_bfloat16():
    x = np.array([1.0, 1.00390625, 1.01171875, 3.14159265, -2.5e-3, np.inf, np.nan], np.float32)
    got = reference.round_to_bfloat16(x)
    assert got[0] == 1.0
    assert got[1] == 1.0  # tie: rounds to even mantissa
    assert got[2] == np.float32(1.015625)  # tie: rounds up to even
    assert got[3] == np.float32(3.140625)
    assert np.isinf(got[5]) and np.isnan(got[6])
    assert np.all(got.view(np.uint32)[:5] & 0xFFFF == 0)
