"""Sliding windows (``window_size=`` of ffpa_attn_func) and packed variable-length
sequences (``ffpa_attn_varlen_func``) on CPU torch, against torch SDPA run once per
sequence with the equivalent boolean mask: forward, LSE and backward; the op's fake,
opcheck and torch.compile; the fallback reasons "window" and "varlen" (CPU tensors
standing in for CUDA ones, the extension a stand-in); the input checks.

CTest's python.torch runs it in .venv-torch.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import ffpa_attn  # noqa: E402
from ffpa_attn import (  # noqa: E402
    DeviceError,
    SDPAFallbackWarning,
    ShapeError,
    UnsupportedDTypeError,
    UnsupportedFeatureError,
    UnsupportedImplError,
    ffpa_attn_func,
    ffpa_attn_varlen_func,
    last_kernel,
    routing,
)
from ffpa_attn import launch, torch_ops, varlen  # noqa: E402
from ffpa_attn.torch_math import MASK_BOTTOM_RIGHT, MASK_NONE, MASK_TOP_LEFT  # noqa: E402

pytestmark = pytest.mark.torch

SDPA = torch.nn.functional.scaled_dot_product_attention


@pytest.fixture(autouse=True)
def _fresh_routing():
    routing._reset_for_tests()
    yield
    routing._reset_for_tests()


def allowed(nq, nk, causal, left, right, bottom_right):
    """The window rule, written out here: query i sees key j iff diag - left <= j <= diag + right."""
    if causal:
        right = 0 if right == -1 else min(right, 0)
    out = torch.zeros(nq, nk, dtype=torch.bool)
    for i in range(nq):
        diag = i + (nk - nq if bottom_right else 0)
        for j in range(nk):
            out[i, j] = (left == -1 or j >= diag - left) and (right == -1 or j <= diag + right)
    return out


def grads(out, leaves, seed=3):
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    return torch.autograd.grad(out, leaves, g)


def assert_grads_close(got, want, **tol):
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **tol)


# --- window_size= of ffpa_attn_func ------------------------------------------------------------


WINDOWS = [(2, -1), (0, 0), (3, 1), (-1, 2), (1, 0)]


# torch's causal_lower_right warns that SDPA gives NaN rows for Nq > Nkv; here the window's
# mask is what SDPA is given (rows that see no key: 0).
@pytest.mark.filterwarnings("ignore:Lower right causal bias will produce NaNs")
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("mask", [MASK_NONE, MASK_TOP_LEFT, MASK_BOTTOM_RIGHT])
@pytest.mark.parametrize("nq,nk", [(9, 9), (6, 11), (11, 6)])
def test_window_matches_sdpa_with_the_mask(window, mask, nq, nk):
    gen = torch.Generator().manual_seed(nq * 31 + nk)
    q = torch.randn(2, 4, nq, 16, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 2, nk, 16, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 2, nk, 16, generator=gen, dtype=torch.float64, requires_grad=True)
    kwargs = {}
    if mask == MASK_TOP_LEFT:
        kwargs["is_causal"] = True
    elif mask == MASK_BOTTOM_RIGHT:
        from torch.nn.attention.bias import causal_lower_right

        kwargs["attn_mask"] = causal_lower_right(nq, nk)
    out, lse = ffpa_attn_func(q, k, v, enable_gqa=True, window_size=window, return_lse=True, **kwargs)
    assert last_kernel() == "torch_math"
    rule = allowed(nq, nk, mask != MASK_NONE, *window, mask == MASK_BOTTOM_RIGHT)
    want = SDPA(q, k, v, attn_mask=rule, enable_gqa=True)
    torch.testing.assert_close(out, want)
    scores = (q @ k.repeat_interleave(2, dim=1).transpose(-1, -2)) / 4.0
    want_lse = torch.logsumexp(scores.masked_fill(~rule, float("-inf")), dim=-1)
    torch.testing.assert_close(lse, want_lse.detach())
    assert_grads_close(grads(out, (q, k, v)), grads(want, (q, k, v)))


def test_window_is_a_real_restriction():
    # The window changes the answer (a test whose mask were ignored would not notice otherwise).
    q, k, v = (torch.randn(1, 2, 10, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    full = ffpa_attn_func(q, k, v, is_causal=True)
    windowed = ffpa_attn_func(q, k, v, is_causal=True, window_size=(2, -1))
    assert (full[:, :, 3:] - windowed[:, :, 3:]).abs().max() > 1e-3
    torch.testing.assert_close(full[:, :, :3], windowed[:, :, :3])


def test_window_with_an_attn_mask_tensor_runs_sdpa_with_both():
    q, k, v = (torch.randn(1, 2, 8, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    mask = torch.rand(8, 8, generator=torch.Generator().manual_seed(5)) > 0.3
    mask.fill_diagonal_(True)
    with pytest.warns(SDPAFallbackWarning, match="'attn_mask'"):
        out = ffpa_attn_func(q, k, v, attn_mask=mask, window_size=(1, 1))
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=mask & allowed(8, 8, False, 1, 1, False)))
    float_mask = torch.randn(8, 8)
    out = ffpa_attn_func(q, k, v, attn_mask=float_mask, window_size=(2, 0))
    want = SDPA(q, k, v, attn_mask=float_mask.masked_fill(~allowed(8, 8, False, 2, 0, False), float("-inf")))
    torch.testing.assert_close(out, want)


@pytest.mark.parametrize("bad", [(-2, 0), (1,), (1.5, 0), "12", (True, 0), None])
def test_bad_window_sizes_are_refused(bad):
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    with pytest.raises(UnsupportedFeatureError, match="window_size must be a pair of ints"):
        ffpa_attn_func(q, k, v, window_size=bad)


def test_window_needs_torch_tensors():
    import numpy as np

    q = np.zeros((1, 1, 4, 8), dtype=np.float32)
    with pytest.raises(UnsupportedFeatureError, match="window_size=.* needs torch tensors"):
        ffpa_attn_func(q, q, q, window_size=(1, 0))


def test_window_nonfinite_inputs_follow_sdpas_math():
    q, k, v = (torch.randn(1, 2, 6, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    k[0, 0, 1, 3] = float("nan")
    rule = allowed(6, 6, True, 1, -1, False)
    out = ffpa_attn_func(q, k, v, is_causal=True, window_size=(1, -1))
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        want = SDPA(q, k, v, attn_mask=rule)
    torch.testing.assert_close(out, want, equal_nan=True)


# --- CUDA decisions, CPU tensors standing in ----------------------------------------------------


@pytest.fixture
def as_cuda(monkeypatch):
    monkeypatch.setattr(torch_ops, "tensor_device_type", lambda t: "cuda")
    monkeypatch.setattr(torch_ops, "_capability", lambda index: (8, 9))


def _half(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.float16)


def test_window_reason_without_window_kernels(install_extension, as_cuda):
    install_extension()  # the release build's report: no "masks"
    assert ffpa_attn.cuda.COMPILED_MASKS == ()
    q, k, v = (_half(1, 2, 8, 64, seed=i) for i in range(3))
    rule = allowed(8, 8, True, 2, -1, False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ffpa_attn_func(q, k, v, is_causal=True, window_size=(2, -1))
        ffpa_attn_func(q, k, v, is_causal=True, window_size=(2, -1))
    ours = [w for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert len(ours) == 1 and "(reason 'window')" in str(ours[0].message)
    assert FALLBACK_FIX["window"] in str(ours[0].message)
    torch.testing.assert_close(out, SDPA(q.float(), k.float(), v.float(), attn_mask=rule).half(), atol=2e-3, rtol=0)
    assert last_kernel(with_reason=True) == ("sdpa", "window")
    with pytest.raises(UnsupportedFeatureError, match="no sliding window"):
        ffpa_attn_func(q, k, v, is_causal=True, window_size=(2, -1), strict=True)


FALLBACK_FIX = {reason: fix for reason, (_cls, fix) in ffpa_attn.FALLBACK_REASONS.items()}


def test_window_with_window_kernels_goes_to_the_op(install_extension, as_cuda, monkeypatch):
    install_extension({**__import__("conftest").DEFAULT_INFO, "masks": ["window", "seqused_k", "varlen"]})
    assert "window" in ffpa_attn.cuda.COMPILED_MASKS
    calls = []
    real_op = torch_ops._attention_op
    monkeypatch.setattr(torch_ops, "_attention_op", lambda *a: calls.append(a) or real_op(*a))
    q, k, v = (_half(1, 2, 8, 64, seed=i) for i in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)
        ffpa_attn_func(q, k, v, is_causal=True, window_size=(3, -1))
    assert calls and calls[0][3] == MASK_TOP_LEFT and calls[0][8:] == (3, -1)
    # Top-left with Nq != Nkv (SDPA's alignment) is the kernels' too: the op, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)
        ffpa_attn_func(q, k[:, :, :6], v[:, :, :6], window_size=(3, 1))
        ffpa_attn_func(q[:, :, :5], k, v, is_causal=True, window_size=(2, -1))
    assert calls[1][3] == MASK_NONE and calls[1][8:] == (3, 1)
    assert calls[2][3] == MASK_TOP_LEFT and calls[2][8:] == (2, -1) and calls[2][1].shape[2] == 8


def _recording(fake, monkeypatch):
    # CPU tensors stand in for CUDA ones: recorded, not exported through DLPack.
    def forward(*args, **kwargs):
        fake.calls.append(args)
        fake.call_kwargs.append(kwargs)
        return fake.kernel
    monkeypatch.setattr(fake, "forward", forward)
    return fake


def test_launch_hands_the_window_and_layout_to_the_extension(install_extension, monkeypatch):
    fake = _recording(install_extension({**__import__("conftest").DEFAULT_INFO, "masks": ["window", "varlen"]}),
                      monkeypatch)
    q = torch.zeros(1, 2, 8, 64)
    launch.launch(q, q, q, q, None, True, 0.5, "auto", "fp32")
    assert fake.call_kwargs[-1] == {"accum": "fp32"}  # nothing new for a plain call
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    launch.launch(q, q, q, q, None, True, 0.5, "auto", "fp32", window=(4, 0),
                  varlen={"cu_seqlens_q": cu, "cu_seqlens_k": cu, "max_seqlen_q": 5, "max_seqlen_k": 5})
    kwargs = fake.call_kwargs[-1]
    assert kwargs["window_left"] == 4 and kwargs["window_right"] == 0
    assert kwargs["cu_seqlens_q"] is cu and kwargs["max_seqlen_k"] == 5


def test_varlen_cuda_forward_launches_once_on_packed_views(install_extension, monkeypatch):
    fake = _recording(install_extension({**__import__("conftest").DEFAULT_INFO, "masks": ["window", "varlen"]}),
                      monkeypatch)
    checked = []
    monkeypatch.setattr(launch, "check", lambda descs, impl, accum: checked.append(descs))
    monkeypatch.setattr(launch, "describe", lambda t: tuple(t.shape))
    q, k = torch.zeros(13, 4, 64, dtype=torch.float16), torch.zeros(17, 2, 64, dtype=torch.float16)
    cu_q = torch.tensor([0, 5, 5, 13], dtype=torch.int32)
    cu_k = torch.tensor([0, 6, 9, 17], dtype=torch.int32)
    used = torch.tensor([4, 3, 8], dtype=torch.int32)
    out, lse = varlen._cuda_forward(q, k, k, cu_q, cu_k, 8, 8, True, (2, -1), 0.125, "auto", "fp32", used)
    assert checked == [{"q": (1, 4, 13, 64), "k": (1, 2, 17, 64), "v": (1, 2, 17, 64)}]
    (qa, ka, va, oa, la, causal, scale, impl), kwargs = fake.calls[-1], fake.call_kwargs[-1]
    assert qa.shape == (1, 4, 13, 64) and qa.data_ptr() == q.data_ptr()  # a view, nothing copied
    assert oa.shape == (1, 4, 13, 64) and oa.data_ptr() == out.data_ptr() and out.shape == (13, 4, 64)
    assert la.shape == (1, 4, 13) and lse.shape == (4, 13)
    assert causal is True and scale == 0.125
    assert kwargs["window_left"] == 2 and kwargs["window_right"] == 0
    assert kwargs["cu_seqlens_q"] is cu_q and kwargs["cu_seqlens_k"] is cu_k and kwargs["seqused_k"] is used
    assert (kwargs["max_seqlen_q"], kwargs["max_seqlen_k"]) == (8, 8)


# --- ffpa_attn_varlen_func ---------------------------------------------------------------------


def packed(lens_q, lens_k, hq=4, hkv=2, d=16, dtype=torch.float64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(lens_q), hq, d, generator=gen, dtype=dtype, requires_grad=True)
    k = torch.randn(sum(lens_k), hkv, d, generator=gen, dtype=dtype, requires_grad=True)
    v = torch.randn(sum(lens_k), hkv, d, generator=gen, dtype=dtype, requires_grad=True)
    offsets = [torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
               for lens in (lens_q, lens_k)]
    return q, k, v, offsets[0], offsets[1]


def per_sequence_sdpa(q, k, v, cu_q, cu_k, causal, window, scale=None, used=None):
    """The reference: torch SDPA once per sequence with the rule's boolean mask (on the
    first used[s] keys of sequence s when given)."""
    pieces, lses = [], []
    group = q.shape[1] // k.shape[1]
    for s in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[s]), int(cu_q[s + 1]), int(cu_k[s]), int(cu_k[s + 1])
        if used is not None:
            k1 = k0 + int(used[s])
        if q1 == q0:
            continue
        if k1 == k0:
            pieces.append(torch.zeros(q1 - q0, q.shape[1], v.shape[2], dtype=q.dtype))
            lses.append(torch.full((q.shape[1], q1 - q0), float("-inf"), dtype=q.dtype))
            continue
        rule = allowed(q1 - q0, k1 - k0, causal, *window, True)
        qs, ks, vs = (t.transpose(0, 1)[None] for t in (q[q0:q1], k[k0:k1], v[k0:k1]))
        pieces.append(SDPA(qs, ks, vs, attn_mask=rule, enable_gqa=True, scale=scale)[0].transpose(0, 1))
        sc = (qs @ ks.repeat_interleave(group, dim=1).transpose(-1, -2)) * (scale or q.shape[-1] ** -0.5)
        lses.append(torch.logsumexp(sc.masked_fill(~rule, float("-inf")), dim=-1)[0].detach())
    return torch.cat(pieces), torch.cat(lses, dim=1)


RAGGED = [
    ([5, 7, 3], [5, 7, 3]),        # self-attention, ragged
    ([4, 0, 6, 2], [4, 3, 9, 0]),  # an empty query sequence, a sequence without keys, Nq < Nk
    ([6, 1], [3, 8]),              # Nq > Nk: bottom-right rows that see no key
]


@pytest.mark.parametrize("lens_q,lens_k", RAGGED)
@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (True, (2, -1)),
                                           (False, (1, 2)), (True, (0, 0))])
def test_varlen_matches_per_sequence_sdpa(lens_q, lens_k, causal, window):
    q, k, v, cu_q, cu_k = packed(lens_q, lens_k)
    out, lse = ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal,
                                     window_size=window, enable_gqa=True, return_lse=True)
    assert last_kernel() == "torch_math"
    want, want_lse = per_sequence_sdpa(q, k, v, cu_q, cu_k, causal, window)
    assert out.shape == q.shape and lse.shape == (q.shape[1], q.shape[0])
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(lse, want_lse)
    assert_grads_close(grads(out, (q, k, v)), grads(want, (q, k, v)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_varlen_in_lower_precision_matches_sdpa(dtype):
    q, k, v, cu_q, cu_k = packed([9, 4, 12], [9, 4, 12], hq=4, hkv=4, d=32, dtype=dtype)
    out = ffpa_attn_varlen_func(q, k, v, cu_q, None, 12, 12, causal=True, softmax_scale=0.2)
    want, _ = per_sequence_sdpa(q, k, v, cu_q, cu_q, True, (-1, -1), scale=0.2)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out, want, **tol)
    assert_grads_close(grads(out, (q, k, v)), grads(want, (q, k, v)), **tol)


def test_varlen_sequences_do_not_see_each_other():
    q, k, v, cu_q, cu_k = packed([4, 4], [4, 4], hq=2, hkv=2)
    out = ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 4, 4)
    with torch.no_grad():
        v2 = v.detach().clone()
        v2[4:] += 10.0  # the second sequence's values only
    again = ffpa_attn_varlen_func(q, k, v2, cu_q, cu_k, 4, 4)
    torch.testing.assert_close(out[:4], again[:4])
    assert (out[4:] - again[4:]).abs().min() > 1.0


def test_varlen_op_opcheck_and_fake():
    q, k, v, cu_q, cu_k = packed([3, 5], [4, 6], hq=2, hkv=2, d=8)
    args = (q, k, v, cu_q, cu_k, 5, 6, True, 2, -1, 0.3, "auto", "fp32", "auto")
    result = torch.library.opcheck(varlen._varlen_op, args)
    assert result == {name: "SUCCESS" for name in result} and len(result) == 4
    q, k, v = (torch.empty(t.shape, device="meta", dtype=torch.float16) for t in (q, k, v))
    out, lse = torch.ops.ffpa_attn.varlen_attention(q, k, v, cu_q.to("meta"), cu_k.to("meta"), 5, 6, True, -1, -1,
                                                    0.3, "auto", "fp32", "auto")
    assert out.shape == (8, 2, 8) and out.dtype == torch.float16 and lse.shape == (2, 8) and lse.dtype == torch.float32


def test_varlen_compiles_fullgraph_as_one_node():
    torch._dynamo.reset()
    q, k, v, cu_q, cu_k = packed([5, 3, 7], [5, 3, 7], hq=4, hkv=2, d=16, dtype=torch.float32)
    ops = []

    def backend(gm, example_inputs):
        ops.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    def fn(q, k, v):
        return ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 7, 7, causal=True, window_size=(2, -1), enable_gqa=True)

    compiled = torch.compile(fn, fullgraph=True, backend=backend)
    out = compiled(q, k, v)
    torch.testing.assert_close(out, fn(q, k, v))
    assert ops.count("ffpa_attn.varlen_attention") + ops.count("ffpa_attn.varlen_attention.default") == 1, ops
    want, _ = per_sequence_sdpa(q, k, v, cu_q, cu_k, True, (2, -1))
    got = torch.compile(fn, fullgraph=True, backend="aot_eager")(q, k, v)
    assert_grads_close(grads(got, (q, k, v)), grads(want, (q, k, v)), atol=1e-5, rtol=1e-4)


def test_varlen_dropout_runs_sdpa_per_sequence_and_warns_once():
    q, k, v, cu_q, cu_k = packed([5, 3], [5, 3], hq=2, hkv=2, dtype=torch.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(0)
        out = ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 5, dropout_p=0.3, causal=True)
        ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 5, dropout_p=0.3, causal=True)
    ours = [w for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert len(ours) == 1 and "(reason 'dropout')" in str(ours[0].message)
    assert ours[0].filename == __file__
    assert last_kernel(with_reason=True) == ("sdpa", "dropout")
    torch.manual_seed(0)
    want = torch.cat([SDPA(q[a:b].transpose(0, 1)[None], k[a:b].transpose(0, 1)[None], v[a:b].transpose(0, 1)[None],
                           attn_mask=allowed(b - a, b - a, True, -1, -1, True), dropout_p=0.3)[0].transpose(0, 1)
                      for a, b in ((0, 5), (5, 8))])
    torch.testing.assert_close(out, want)
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    with pytest.raises(UnsupportedFeatureError, match="dropout"):
        ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 5, dropout_p=0.3, strict=True)
    with pytest.raises(UnsupportedFeatureError, match="return_lse=True needs them"):
        ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 5, dropout_p=0.3, return_lse=True)


def test_varlen_reason_without_the_layout(install_extension, as_cuda):
    install_extension()  # no "masks": the release build before the varlen kernels
    q, k, v, cu_q, cu_k = packed([6, 2], [6, 2], hq=2, hkv=2, d=64, dtype=torch.float16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 6, causal=True)
        ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 6, causal=True)
    ours = [w for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert len(ours) == 1 and "(reason 'varlen')" in str(ours[0].message) and FALLBACK_FIX["varlen"] in str(
        ours[0].message)
    want, _ = per_sequence_sdpa(q.float(), k.float(), v.float(), cu_q, cu_k, True, (-1, -1))
    torch.testing.assert_close(out.float(), want, atol=2e-3, rtol=0)
    assert last_kernel(with_reason=True) == ("sdpa", "varlen")
    with pytest.raises(UnsupportedFeatureError, match="no varlen layout"):
        ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 6, strict=True)
    # With the layout but not the window: the "window" reason.
    install_extension({**__import__("conftest").DEFAULT_INFO, "masks": ["varlen"]})
    with pytest.raises(UnsupportedFeatureError, match="no sliding window"):
        ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 6, window_size=(2, 0), strict=True)


def _call(q, k, v, cu_q, cu_k, max_q=8, max_k=8, **kwargs):
    return ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, **kwargs)


def test_varlen_bad_inputs_name_the_fix():
    q, k, v, cu_q, cu_k = packed([3, 5], [3, 5], hq=2, hkv=2, d=8)
    cases = [
        (UnsupportedDTypeError, "must be int32", dict(cu_q=cu_q.long())),
        (ShapeError, "1-D with S \\+ 1 >= 2", dict(cu_q=cu_q[None])),
        (ShapeError, "1-D with S \\+ 1 >= 2", dict(cu_q=cu_q[:1])),
        (ShapeError, "must start at 0", dict(cu_q=torch.tensor([1, 3, 8], dtype=torch.int32))),
        (ShapeError, "non-decreasing", dict(cu_q=torch.tensor([0, 5, 3, 8], dtype=torch.int32),
                                            cu_k=torch.tensor([0, 3, 3, 8], dtype=torch.int32))),
        (ShapeError, "ends at 7 but the packed tensor has 8 rows",
         dict(cu_q=torch.tensor([0, 3, 7], dtype=torch.int32))),
        (ShapeError, "max_seqlen_q = 4 but the longest sequence", dict(max_q=4)),
        (ShapeError, "max_seqlen_k must be a non-negative int", dict(max_k=8.0)),
        (ShapeError, "the same sequences", dict(cu_k=torch.tensor([0, 8], dtype=torch.int32))),
        (UnsupportedFeatureError, "must be a torch tensor", dict(cu_q=[0, 3, 8])),
        (ShapeError, "packed \\[total, H, D\\]", dict(q=q[None])),
        (ShapeError, "one head dim", dict(q=q[..., :4])),
        (ShapeError, "enable_gqa=True", dict(q=torch.randn(8, 4, 8, dtype=torch.float64), k=k[:, :1].expand(8, 2, 8))),
        (ShapeError, "multiple of the number of kv heads", dict(q=torch.randn(8, 3, 8, dtype=torch.float64))),
        (UnsupportedDTypeError, "same dtype", dict(k=k.float())),
        (UnsupportedDTypeError, "floating-point", dict(q=torch.zeros(8, 2, 8, dtype=torch.int64))),
        (DeviceError, "cu_seqlens_k is on meta", dict(cu_k=cu_k.to("meta"))),
        (DeviceError, "one device", dict(v=v.to("meta"))),
        (UnsupportedFeatureError, "does not take \\['softcap'\\]", dict(softcap=30.0)),
        (UnsupportedFeatureError, "window_size must be", dict(window_size=(-3, 0))),
        (UnsupportedImplError, "backward must be one of", dict(backward="fused")),
        (UnsupportedImplError, "host path .* always accumulates in fp32", dict(accum="fp16")),
        (ShapeError, "cu_seqlens_k=None means", dict(cu_k=None, k=k[:7], v=v[:7])),
    ]
    for cls, pattern, change in cases:
        args = {"q": q, "k": k, "v": v, "cu_q": cu_q, "cu_k": cu_k, **change}
        with pytest.raises(cls, match=pattern):
            _call(**args)


def test_varlen_backward_ffpa_is_refused_on_the_cpu():
    q, k, v, cu_q, cu_k = packed([3], [3], hq=2, hkv=2, d=8)
    with pytest.raises(UnsupportedImplError, match="backward='ffpa' cannot run"):
        _call(q, k, v, cu_q, cu_k, 3, 3, backward="ffpa")


def test_varlen_nonfinite_inputs_stay_in_their_sequence():
    q, k, v, cu_q, cu_k = packed([4, 4], [4, 4], hq=2, hkv=2, d=8)
    q, k, v = (t.detach().clone() for t in (q, k, v))
    v[1, 0, 0] = float("nan")  # first sequence only
    out = _call(q, k, v, cu_q, cu_k, 4, 4, causal=True)
    assert torch.isnan(out[:4, 0]).any() and torch.isfinite(out[4:]).all()
    # Within the sequence it is what SDPA's math backend gives (torch_math.NONFINITE_RULE:
    # P V as a matrix product, so the NaN reaches every row of its head, the masked ones too).
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        want, _ = per_sequence_sdpa(q, k, v, cu_q, cu_k, True, (-1, -1))
    torch.testing.assert_close(out, want, equal_nan=True)


def test_varlen_cuda_backward_hands_the_layout_to_the_extension(install_extension, monkeypatch):
    fake = install_extension({**__import__("conftest").DEFAULT_INFO, "masks": ["window", "varlen"]})
    calls = []
    monkeypatch.setattr(fake, "backward", lambda *args, **kwargs: calls.append((args, kwargs)), raising=False)
    q = torch.zeros(13, 4, 64, dtype=torch.float16)
    k = torch.zeros(17, 2, 64, dtype=torch.float16)
    out, grad_out = torch.zeros_like(q), torch.ones_like(q)
    lse = torch.zeros(4, 13)
    cu_q = torch.tensor([0, 5, 5, 13], dtype=torch.int32)
    cu_k = torch.tensor([0, 6, 9, 17], dtype=torch.int32)
    dq, dk, dv = varlen._cuda_backward(q, k, k, out, lse, grad_out, cu_q, cu_k, 8, 8, True, (3, -1), 0.125)
    (args, kwargs), = calls
    qa, ka, va, oa, goa, la, dqa, dka, dva, workspace, causal, top_left, scale = args
    assert qa.shape == (1, 4, 13, 64) and ka.shape == va.shape == (1, 2, 17, 64) and goa.shape == (1, 4, 13, 64)
    assert la.shape == (1, 4, 13) and la.dtype == torch.float32
    assert dqa.data_ptr() == dq.data_ptr() and dka.data_ptr() == dk.data_ptr() and dq.shape == q.shape
    assert workspace.numel() >= 2 * 4 * 13 and (causal, top_left, scale) == (True, False, 0.125)
    assert kwargs == {"cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "max_seqlen_q": 8, "max_seqlen_k": 8,
                      "window_left": 3, "window_right": 0}


def test_ffpa_backward_kernels_get_the_window(install_extension, monkeypatch):
    from ffpa_attn import torch_bwd

    fake = install_extension({**__import__("conftest").DEFAULT_INFO, "masks": ["window"]})
    calls = []
    monkeypatch.setattr(fake, "backward", lambda *args, **kwargs: calls.append(kwargs), raising=False)
    q = torch.zeros(1, 2, 8, 64, dtype=torch.float16)
    lse = torch.zeros(1, 2, 8)
    torch_bwd._backward_op(q, q, q, q, lse, q, MASK_TOP_LEFT, 0.125)
    torch_bwd._backward_op(q, q, q, q, lse, q, MASK_TOP_LEFT, 0.125, 2, 0)
    # No window: no new keyword (builds without windows take none); a window: both extents.
    assert calls == [{}, {"window_left": 2, "window_right": 0}]


def test_varlen_meta_tensors_go_through_the_fake():
    q, k, v = (torch.empty(11, 4, 64, device="meta", dtype=torch.float16) for _ in range(3))
    cu = torch.empty(4, dtype=torch.int32, device="meta")
    out, lse = ffpa_attn_varlen_func(q, k, v, cu, cu, 6, 6, causal=True, window_size=(2, -1), return_lse=True)
    assert out.device.type == "meta" and out.shape == (11, 4, 64) and lse.shape == (4, 11)


def test_windowed_op_opcheck():
    # One case (opcheck is slow): bottom-right, Nq < Nkv, a window on both sides of the clip.
    mask, window = MASK_BOTTOM_RIGHT, (3, 1)
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 2, n, 8, generator=gen, dtype=torch.float64, requires_grad=True) for n in (5, 7, 7))
    result = torch.library.opcheck(torch_ops._attention_op, (q, k, v, mask, 0.3, "auto", "fp32", "auto", *window))
    assert result == {name: "SUCCESS" for name in result} and len(result) == 4


@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (True, (1, -1))])
def test_varlen_seqused_k_uses_the_first_keys_of_each_sequence(causal, window):
    q, k, v, cu_q, cu_k = packed([4, 3, 5], [7, 4, 5])
    used = torch.tensor([5, 0, 3], dtype=torch.int32)
    out, lse = ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 7, causal=causal, window_size=window, enable_gqa=True,
                                     seqused_k=used, return_lse=True)
    want, want_lse = per_sequence_sdpa(q, k, v, cu_q, cu_k, causal, window, used=used)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(lse, want_lse)
    got_grads, want_grads = grads(out, (q, k, v)), grads(want, (q, k, v))
    assert_grads_close(got_grads, want_grads)
    unused = torch.ones(k.shape[0], dtype=torch.bool)
    for s, n in enumerate(used.tolist()):
        unused[int(cu_k[s]):int(cu_k[s]) + n] = False
    assert unused.sum() == 8 and not got_grads[1][unused].any() and not got_grads[2][unused].any()
    # The SDPA fallback cuts the same keys.
    with pytest.warns(SDPAFallbackWarning, match="'dropout'"):
        torch.manual_seed(0)
        dropped = ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 7, causal=causal, window_size=window,
                                        enable_gqa=True, seqused_k=used, dropout_p=1e-9)
    torch.testing.assert_close(dropped, want, atol=1e-6, rtol=1e-6)


def test_varlen_seqused_k_checks_and_reason(install_extension, as_cuda):
    q, k, v, cu_q, cu_k = packed([3, 5], [3, 5], hq=2, hkv=2, d=8)
    for cls, pattern, used in [
        (UnsupportedDTypeError, "seqused_k must be int32", torch.tensor([1, 2])),
        (ShapeError, "must be \\[S\\] = \\[2\\]", torch.tensor([1, 2, 3], dtype=torch.int32)),
        (ShapeError, "seqused_k\\[1\\] = 6 but sequence 1 has 5 keys", torch.tensor([1, 6], dtype=torch.int32)),
        (ShapeError, "seqused_k\\[0\\] = -1", torch.tensor([-1, 2], dtype=torch.int32)),
        (DeviceError, "seqused_k is on meta", torch.tensor([1, 2], dtype=torch.int32, device="meta")),
        (UnsupportedFeatureError, "must be a torch tensor", [1, 2]),
    ]:
        with pytest.raises(cls, match=pattern):
            _call(q, k, v, cu_q, cu_k, seqused_k=used)
    # Kernels with the packed layout but not the key counts: the varlen reason, said so.
    install_extension({**__import__("conftest").DEFAULT_INFO, "masks": ["varlen", "window"]})
    q, k, v, cu_q, cu_k = packed([6, 2], [6, 2], hq=2, hkv=2, d=64, dtype=torch.float16)
    with pytest.raises(UnsupportedFeatureError, match="seqused_k .* do not take it"):
        ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 6, seqused_k=torch.tensor([3, 2], dtype=torch.int32),
                              strict=True)


def test_varlen_op_opcheck_with_seqused_k():
    q, k, v, cu_q, cu_k = packed([3, 5], [4, 6], hq=2, hkv=2, d=8)
    used = torch.tensor([2, 6], dtype=torch.int32)
    args = (q, k, v, cu_q, cu_k, 5, 6, True, -1, -1, 0.3, "auto", "fp32", "auto", used)
    result = torch.library.opcheck(varlen._varlen_op, args)
    assert result == {name: "SUCCESS" for name in result} and len(result) == 4
