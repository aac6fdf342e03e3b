"""The low-precision impls on a CPU torch (CTest python.torch): the custom op carries the impl
to the kernels (its fake and autograd unchanged), and the bench's cuda path runs end to end
on CPU tensors with a stand-in for the kernels, printing and judging the accuracy columns
against its float64 reference.

CPU tensors stand in for CUDA ones where the CUDA path is under test; the kernels by the
conftest FakeExtension or by a stand-in ffpa_attn_func that quantises like the FP8 path.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from conftest import DEFAULT_INFO

torch = pytest.importorskip("torch")

import ffpa_attn  # noqa: E402
import ffpa_bench as bench  # noqa: E402
from ffpa_attn import interface, launch, reference, routing, torch_ops  # noqa: E402
from ffpa_attn.errors import SDPAFallbackWarning, UnsupportedImplError  # noqa: E402
from ffpa_attn.torch_math import MASK_BOTTOM_RIGHT, MASK_NONE, MASK_TOP_LEFT  # noqa: E402

pytestmark = pytest.mark.torch

LOWP_INFO = {**DEFAULT_INFO, "fp8": True, "fp8_archs": ["89", "120f"], "fp4": True, "fp4_archs": ["120f"],
             "impls": [*DEFAULT_INFO["impls"], "cute_fp8", "cute_tma_fp8", "fp8", "cute_tma_fp4", "fp4"]}


@pytest.fixture(autouse=True)
def _fresh_routing():
    routing._reset_for_tests()
    yield
    routing._reset_for_tests()


def make(b=1, hq=4, hkv=2, nq=8, nkv=8, d=16, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, h, n, d, generator=gen, dtype=dtype) for h, n in ((hq, nq), (hkv, nkv), (hkv, nkv)))


# --- the op carries the impl ---------------------------------------------------------------


def test_dispatch_hands_the_impl_to_the_op_and_autograd_still_works(monkeypatch):
    seen = []
    real = torch_ops._attention_op

    def recording(*args):
        seen.append(args[5:8])  # impl, accum, backward
        return real(*args)

    monkeypatch.setattr(torch_ops, "_attention_op", recording)
    q, k, v = (t.requires_grad_(True) for t in make(dtype=torch.float64))
    out = ffpa_attn.ffpa_attn_func(q, k, v, is_causal=True, enable_gqa=True, impl="fp8", backward="lse")
    out.square().sum().backward()
    assert seen == [("fp8", "fp32", "lse")]
    assert ffpa_attn.last_kernel() == "torch_math"  # the host path: impl is a CUDA choice
    want = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(*want, is_causal=True, enable_gqa=True).square().sum().backward()
    for mine, ref in zip((q, k, v), want):
        torch.testing.assert_close(mine.grad, ref.grad)


@pytest.mark.parametrize("impl", ["fp8", "cute_tma_fp4"])
def test_opcheck_with_a_lowp_impl(impl):
    """Schema, fake, autograd registration and AOT dispatch do not depend on the impl."""
    leaves = tuple(t.requires_grad_(True) for t in make(dtype=torch.float64))
    result = torch.library.opcheck(torch_ops._attention_op, (*leaves, MASK_BOTTOM_RIGHT, 0.25, impl, "fp32", "auto"))
    assert result == {name: "SUCCESS" for name in result} and len(result) == 4


def test_fake_of_a_lowp_impl_has_the_real_layout():
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v = make(b=2, nq=9, nkv=11, dtype=torch.float16)
    with FakeTensorMode() as mode:
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        out, lse = torch.ops.ffpa_attn.attention(fq, fk, fv, MASK_NONE, 0.25, "fp8", "fp32", "auto")
    assert out.shape == q.shape and out.dtype == torch.float16 and out.stride() == (9 * 4 * 16, 16, 4 * 16, 1)
    assert lse.shape == (2, 4, 9) and lse.dtype == torch.float32


@pytest.fixture
def stand_in_cuda(install_extension, monkeypatch):
    """The op's CUDA body on CPU tensors: launch.describe sees device 0, the fake extension
    records each forward's impl and reports `ran` as the kernel that ran."""
    calls = []

    def install(info, ran):
        ext = install_extension(info)

        def forward(q, k, v, out, lse, causal, scale, impl, accum="fp32", causal_top_left=False):
            calls.append((impl, accum, causal, causal_top_left, tuple(q.shape), tuple(k.shape)))
            return ran

        monkeypatch.setattr(ext, "forward", forward)
        return calls

    names = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
    monkeypatch.setattr(launch, "describe", lambda t: launch.ArrayDesc(
        "torch", tuple(t.shape), names[t.dtype], tuple(t.stride()), 0))
    return install


@pytest.mark.parametrize("impl,ran", [("fp8", "cute_fp8"), ("cute_tma_fp8", "cute_tma_fp8"),
                                      ("fp4", "cute_tma_fp4")])
def test_the_ops_cuda_body_launches_the_impl(stand_in_cuda, impl, ran):
    calls = stand_in_cuda(LOWP_INFO, ran)
    q, k, v = make(nq=12, nkv=8, d=64, dtype=torch.bfloat16)
    out, lse = torch_ops._cuda_attention(q, k, v, MASK_TOP_LEFT, 0.25, impl, "fp32")
    # Top-left with Nq > Nkv: one launch of the impl asked for, with the kernels' top-left mask.
    assert calls == [(impl, "fp32", True, True, (1, 4, 12, 64), (1, 2, 8, 64))]
    assert routing.last_kernel() == ran
    assert out.shape == q.shape and out.dtype == torch.bfloat16 and lse.dtype == torch.float32


def test_the_ops_cuda_body_refuses_what_the_extension_refuses(stand_in_cuda, install_extension):
    """The op's CUDA body asks the extension's validation and raises its answer, launching nothing."""
    calls = stand_in_cuda(DEFAULT_INFO, "mma")
    fake = ffpa_attn.cuda.extension()
    q, k, v = make(d=64, dtype=torch.float16)
    fake.problem = UnsupportedImplError("the extension's refusal")
    with pytest.raises(UnsupportedImplError, match="the extension's refusal"):
        torch_ops._cuda_attention(q, k, v, MASK_NONE, 0.25, "fp8", "fp32")
    assert [call[3:] for call in fake.validations] == [("fp8", "fp32")]
    assert calls == []
    # The built extension's own words.
    d = install_extension.real().build_info()["head_dims"][0]
    q, k, v = make(d=d, dtype=torch.float16)
    with pytest.raises(UnsupportedImplError, match="accum='fp16' is not an option of impl='fp8'"):
        torch_ops._cuda_attention(q, k, v, MASK_NONE, 0.25, "fp8", "fp16")


def test_an_explicit_lowp_impl_never_falls_back_to_sdpa(install_extension, monkeypatch):
    """Stand-in CUDA tensors with a fallback reason: the explicit impl raises that reason's error."""
    install_extension(LOWP_INFO)
    monkeypatch.setattr(torch_ops, "tensor_device_type", lambda t: "cuda")
    monkeypatch.setattr(torch_ops, "_capability", lambda index: (8, 9))
    q, k, v = make(d=96, dtype=torch.float16)  # a head dim the build lacks
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)
        with pytest.raises(ffpa_attn.UnsupportedHeadDimError):
            ffpa_attn.ffpa_attn_func(q, k, v, impl="fp8", enable_gqa=True)
        # Without the explicit impl the same call runs SDPA, with the warning.
    with pytest.warns(SDPAFallbackWarning, match="'head_dim'"):
        ffpa_attn.ffpa_attn_func(q, k, v, enable_gqa=True)


# --- the bench's cuda path on a CPU torch ------------------------------------------------------


def _e4m3(x, scale):
    return (x / scale).to(torch.float8_e4m3fn).to(torch.float32) * scale


def _fp8_stand_in(kernel, broken=False):
    """ffpa_attn_func as an FP8 kernel computes it, roughly: Q and K per tensor, V per
    channel in e4m3, the rest in fp32. ``broken`` drops the softmax scale (a kernel bug)."""
    def attention(q, k, v, attn_mask=None, is_causal=False, enable_gqa=False, impl="auto", accum="fp32",
                  strict=None, **_):
        qf, kf, vf = (t.float() for t in (q, k, v))
        q8 = _e4m3(qf, qf.abs().amax() / 448)
        k8 = _e4m3(kf, kf.abs().amax() / 448)
        v8 = _e4m3(vf, vf.abs().amax(dim=2, keepdim=True) / 448)
        out = torch.nn.functional.scaled_dot_product_attention(
            q8, k8, v8, attn_mask=attn_mask, is_causal=is_causal, enable_gqa=enable_gqa,
            scale=1.0 if broken else None)
        routing.note_kernel(kernel)
        return out.to(q.dtype)
    return attention


# Bounds for these tests only (bench.LOWP_BOUNDS is empty until the measurement states them),
# loose enough for the stand-in's per-tensor e4m3 at N = 96.
TEST_BOUNDS = {"fp8": (0.995, 6e-2), "fp4": (0.99, None)}


@pytest.fixture
def cpu_bench(install_extension, monkeypatch):
    install_extension(LOWP_INFO)
    monkeypatch.setattr(bench, "_TORCH_DEVICE", "cpu")
    monkeypatch.setattr(bench, "LOWP_BOUNDS", dict(TEST_BOUNDS))

    def run(argv, attention=None):
        if attention is not None:
            monkeypatch.setattr(interface, "ffpa_attn_func", attention)
        return bench.main(["--backend", "cuda", "--B", "1", "--H", "6", "--Hkv", "3", "--N", "96", "--D", "64",
                           "--warmup", "0", "--iters", "1", "--baselines", "none", "--no-bwd", *argv])
    return run


@pytest.mark.parametrize("impl,kernel,bound", [("fp8", "cute_tma_fp8", "cos>=0.995,rel_l1<=0.06"),
                                               ("cute_fp8", "cute_fp8", "cos>=0.995,rel_l1<=0.06"),
                                               ("fp4", "cute_tma_fp4", "cos>=0.99")])
def test_bench_lowp_row_prints_and_passes_its_bound(cpu_bench, capsys, impl, kernel, bound):
    assert cpu_bench(["--cuda-impl", impl, "--verbose", "--dtype", "both"], _fp8_stand_in(kernel)) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [bench.LINE_RE.match(line) for line in lines if line.startswith("[")]
    assert [r["dtype"] for r in rows] == ["fp16", "bf16"]
    for row in rows:
        assert row, lines
        assert (row["kernel"], row["accum"], row["ref"], row["bound"]) == (kernel, "fp32", "b0:h0,2,3,5", bound)
        # e4m3 of fp16 inputs: close to the fp64 reference, but measurably not equal.
        assert 0.995 < float(row["cos"]) < 0.9999 and 1e-2 < float(row["rel_l1"]) < 6e-2
        assert row["bound_ok"] == "True"


def test_bench_lowp_row_outside_its_bound_fails(cpu_bench, capsys):
    assert cpu_bench(["--cuda-impl", "fp8", "--verbose"], _fp8_stand_in("cute_tma_fp8", broken=True)) == 1
    out, err = capsys.readouterr()
    row = bench.LINE_RE.match(out.splitlines()[0])
    assert row["bound_ok"] == "False" and float(row["cos"]) < 0.995
    assert "MISMATCH: fwd fp16 D=64 (cute_tma_fp8, fp8) cos=" in err and "outside the bound cos >= 0.995" in err


def test_bench_full_precision_row_carries_the_columns_too(cpu_bench, capsys):
    """The real ffpa_attn_func on CPU tensors (torch math): exact up to fp16 rounding, no bound."""
    assert cpu_bench(["--cuda-impl", "auto", "--verbose", "--causal", "--Nkv", "130"]) == 0
    row = bench.LINE_RE.match(capsys.readouterr().out.splitlines()[0])
    assert row["tag"] == "cross-attn" and row["causal"] and row["kernel"] == "torch_math"
    assert float(row["cos"]) > 0.99999 and float(row["rel_l1"]) < 2e-3 and row["bound"] is None


@pytest.mark.parametrize("b,hq,hkv,nq,nkv,causal", [(2, 6, 3, 17, 17, False), (1, 4, 2, 9, 23, True),
                                                     (1, 4, 4, 23, 9, True), (1, 8, 1, 33, 33, True)])
def test_the_bench_reference_is_the_fp64_reference_on_its_slice(b, hq, hkv, nq, nkv, causal):
    q, k, v = make(b=b, hq=hq, hkv=hkv, nq=nq, nkv=nkv, d=32, dtype=torch.float16, seed=nq)
    heads = bench.reference_heads(hq, 3)
    got = bench._torch_reference(torch, q, k, v, heads, causal, rows_per_block=5)  # several row blocks
    want = reference.attention(q.numpy(), k.numpy(), v.numpy(), causal=causal, dtype=np.float64)[0, heads]
    assert got.dtype == torch.float64 and tuple(got.shape) == (len(heads), nq, 32)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    assert math.isfinite(float(got.abs().sum()))  # rows that see no key are 0, not NaN
