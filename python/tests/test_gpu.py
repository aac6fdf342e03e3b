"""The compiled kernels on a real GPU against the NumPy reference (skipped without one).

Registered under CTest as python.gpu (label gpu, RESOURCE_LOCK gpu); an all-skipped
run is reported to CTest as "Not Run" through SKIP_RETURN_CODE.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from ffpa_attn import UnsupportedImplError, cuda, ffpa_attn_func, last_kernel, reference, tolerance

pytestmark = pytest.mark.gpu

# The one tolerance table (cmake/kernel-facts.json): each dtype's atol.
TOL = {"fp16": tolerance("fp16")["atol"], "bf16": tolerance("bf16")["atol"]}
# fp16 accumulation's, measured as the device check does (abs = max |o - ref|, rel = abs /
# max |ref|). The LSE comes from fp16-summed scores: its own, looser lse bound.
F16_ACC_TOL = {"rel": tolerance("fp16_acc")["rtol"], "abs": tolerance("fp16_acc")["atol"],
               "lse": tolerance("fp16_acc")["lse"]}


@pytest.fixture(scope="module")
def torch():
    if not cuda.CUDA_FWD_AVAILABLE:
        pytest.skip(f"no CUDA extension ({cuda.EXTENSION_IMPORT_ERROR or 'pure package'})")
    if cuda.device_count() == 0:
        pytest.skip("no CUDA device")
    return pytest.importorskip("torch")


def _dims():
    return list(cuda.COMPILED_HEAD_DIMS) or [128]


def _sass_covers(token, capability):
    """Whether arch token ("90", "90a", "120f") has machine code this GPU loads."""
    m = re.fullmatch(r"(\d+)([af]?)", token)
    if m is None:
        return False
    major, minor = divmod(int(m[1]), 10)
    if m[2] == "a":  # arch-specific: that exact GPU
        return tuple(capability) == (major, minor)
    return capability[0] == major and capability[1] >= minor  # plain and family: same major


@pytest.fixture(scope="module")
def tma(torch):
    """Skips unless impl="tma" can run here: TMA code compiled, and code for this GPU."""
    if not cuda.CUDA_TMA_AVAILABLE or "tma" not in cuda.COMPILED_IMPLS:
        pytest.skip(f"no TMA code compiled (archs {list(cuda.COMPILED_ARCHS)})")
    capability = torch.cuda.get_device_capability()
    if any(_sass_covers(t, capability) for t in cuda.TMA_ARCHS):
        return True  # must run: a refusal fails the tests below
    # No TMA machine code for this GPU; PTX of an arch >= 90 may still JIT to it.
    q = torch.zeros(1, 1, 8, _dims()[0], device="cuda", dtype=torch.float16)
    try:
        ffpa_attn_func(q, q, q, impl="tma")
    except UnsupportedImplError as exc:
        pytest.skip(f"sm_{capability[0]}{capability[1]} has no TMA code of this build ({cuda.TMA_ARCHS}): {exc}")
    return True


@pytest.mark.parametrize("d", _dims())
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq,nkv,hq,hkv", [(128, 128, 4, 4), (77, 133, 4, 2), (200, 61, 2, 1)])
@pytest.mark.parametrize("impl", ["auto", "simt"])
def test_forward_matches_reference(torch, d, dtype, causal, nq, nkv, hq, hkv, impl):
    if dtype not in cuda.COMPILED_DTYPES:
        pytest.skip(f"{dtype} not compiled")
    if impl != "auto" and impl not in cuda.COMPILED_IMPLS:
        pytest.skip(f"{impl} not compiled")
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(d + nq)
    q = torch.randn(2, hq, nq, d, device="cuda", dtype=tdt, generator=gen)
    k = torch.randn(2, hkv, nkv, d, device="cuda", dtype=tdt, generator=gen)
    v = torch.randn(2, hkv, nkv, d, device="cuda", dtype=tdt, generator=gen)
    out, lse = ffpa_attn_func(q, k, v, causal=causal, return_lse=True, impl=impl)
    torch.cuda.synchronize()
    want, want_lse = reference.attention(*(t.float().cpu().numpy() for t in (q, k, v)), causal=causal,
                                         return_lse=True)
    err = float(np.max(np.abs(out.float().cpu().numpy() - want)))
    assert err <= TOL[dtype], f"D={d} {dtype} causal={causal} Nq={nq} Nkv={nkv} {impl}: O_err={err}"
    got_lse = lse.cpu().numpy()
    finite = np.isfinite(want_lse)
    np.testing.assert_allclose(got_lse[finite], want_lse[finite], rtol=1e-3, atol=1e-3)


def _qkv(torch, d, shape_q, shape_kv, dtype="fp16", seed=0):
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(*shape_q, d, device="cuda", dtype=tdt, generator=gen),
            torch.randn(*shape_kv, d, device="cuda", dtype=tdt, generator=gen),
            torch.randn(*shape_kv, d, device="cuda", dtype=tdt, generator=gen))


def _check(out, q, k, v, causal, dtype):
    want = reference.attention(*(t.float().cpu().numpy() for t in (q, k, v)), causal=causal)
    err = float(np.max(np.abs(out.float().cpu().numpy() - want)))
    assert err <= TOL[dtype], f"O_err={err}"


@pytest.mark.parametrize("impl", ["auto", "mma", "simt", "tma"])
def test_transposed_bnhd_views_need_no_copy(torch, impl, request):
    """[B, N, H, D] tensors viewed as [B, H, N, D]: strides pass through, no refusal."""
    if impl == "tma":
        request.getfixturevalue("tma")
    d = _dims()[0]
    q, k, v = _qkv(torch, d, (2, 150, 4), (2, 90, 2))  # [B, N, H, D] in memory
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    assert not qt.is_contiguous()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # aligned strided views take the mma kernel: no fallback warning
        out = ffpa_attn_func(qt, kt, vt, causal=True, impl=impl)
    # auto: tma on the sm_120 family when this build's TMA code runs there, else mma.
    assert last_kernel() == (cuda.auto_impl() if impl == "auto" else impl)
    assert cuda.auto_impl() in ("mma", "tma")
    _check(out, qt, kt, vt, True, "fp16")


def test_auto_on_misaligned_inputs_warns_and_runs_simt(torch):
    from ffpa_attn import SlowPathWarning, last_kernel

    d = _dims()[0]
    q, k, v = _qkv(torch, d, (1, 4, 64), (1, 4, 64))
    # One element into a flat buffer: the data pointer is 2 bytes off 16-byte alignment.
    buf = torch.empty(q.numel() + 1, device="cuda", dtype=q.dtype)
    qm = buf[1:].view(q.shape)
    qm.copy_(q)
    with pytest.warns(SlowPathWarning):
        out = ffpa_attn_func(qm, k, v)
    assert last_kernel() == "simt"
    _check(out, qm, k, v, False, "fp16")


def test_autograd_wrapper_runs_on_cuda(torch):
    """Tensors that require grad are exported detached; the recomputed backward runs."""
    from ffpa_attn.torch_ops import attention_math, ffpa_attention

    d = _dims()[0]
    q, k, v = (t.requires_grad_(True) for t in _qkv(torch, d, (1, 4, 80), (1, 2, 96)))
    out = ffpa_attention(q, k, v, causal=True)
    out.float().sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    attention_math(q, k, v, causal=True).float().sum().backward()
    for got, want in zip(grads, (q.grad, k.grad, v.grad)):
        assert float((got.float() - want.float()).abs().max()) <= 5e-2


SHAPES = [(128, 128, 4, 4), (77, 133, 4, 2), (200, 61, 2, 1)]


def _run_and_compare(torch, d, dtype, causal, nq, nkv, hq, hkv, impl, accum):
    q, k, v = _qkv(torch, d, (2, hq, nq), (2, hkv, nkv), dtype, seed=d + nq + 7)
    out, lse = ffpa_attn_func(q, k, v, causal=causal, return_lse=True, impl=impl, accum=accum)
    torch.cuda.synchronize()
    want, want_lse = reference.attention(*(t.float().cpu().numpy() for t in (q, k, v)), causal=causal,
                                         return_lse=True)
    err = float(np.max(np.abs(out.float().cpu().numpy() - want)))
    finite = np.isfinite(want_lse)
    return err, float(np.max(np.abs(want))), lse.cpu().numpy()[finite], want_lse[finite]


@pytest.mark.parametrize("d", _dims())
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq,nkv,hq,hkv", SHAPES)
def test_tma_matches_reference(torch, tma, d, dtype, causal, nq, nkv, hq, hkv):
    if dtype not in cuda.COMPILED_DTYPES:
        pytest.skip(f"{dtype} not compiled")
    err, _, got_lse, want_lse = _run_and_compare(torch, d, dtype, causal, nq, nkv, hq, hkv, "tma", "fp32")
    assert last_kernel() == "tma"
    assert err <= TOL[dtype], f"D={d} {dtype} causal={causal} Nq={nq} Nkv={nkv} tma: O_err={err}"
    np.testing.assert_allclose(got_lse, want_lse, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("d", _dims())
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("nq,nkv,hq,hkv", SHAPES)
@pytest.mark.parametrize("impl", ["auto", "mma", "tma"])
def test_fp16_accum_matches_reference(torch, d, causal, nq, nkv, hq, hkv, impl, request):
    if not cuda.F16_ACC_AVAILABLE:
        pytest.skip("fp16 accumulation not compiled (no fp16 instances)")
    if impl == "tma":
        request.getfixturevalue("tma")
    if impl == "mma" and torch.cuda.get_device_capability()[0] == 12:
        # The sm_120 family runs fp16 accumulation on the TMA feed only (docs/perf.md).
        with pytest.raises(UnsupportedImplError, match="TMA path"):
            _run_and_compare(torch, d, "fp16", causal, nq, nkv, hq, hkv, impl, "fp16")
        return
    err, ref_max, got_lse, want_lse = _run_and_compare(torch, d, "fp16", causal, nq, nkv, hq, hkv, impl, "fp16")
    lse_err = float(np.max(np.abs(got_lse - want_lse)))
    assert last_kernel() == (cuda.auto_impl() if impl == "auto" else impl)
    where = f"D={d} causal={causal} Nq={nq} Nkv={nkv} {impl} accum=fp16"
    assert err <= F16_ACC_TOL["abs"], f"{where}: O_err={err}"
    assert err / ref_max <= F16_ACC_TOL["rel"], f"{where}: rel={err / ref_max}"
    assert lse_err <= F16_ACC_TOL["lse"], f"{where}: lse_err={lse_err}"


def test_fp16_accum_auto_never_falls_back_to_simt(torch):
    """Misaligned inputs: auto with fp16 accumulation is a layout error, not the SIMT kernel."""
    import warnings

    from ffpa_attn import UnsupportedLayoutError

    if not cuda.F16_ACC_AVAILABLE:
        pytest.skip("fp16 accumulation not compiled")
    d = _dims()[0]
    q, k, v = _qkv(torch, d, (1, 4, 64), (1, 4, 64))
    buf = torch.empty(q.numel() + 1, device="cuda", dtype=q.dtype)
    qm = buf[1:].view(q.shape)
    qm.copy_(q)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnsupportedLayoutError):
            ffpa_attn_func(qm, k, v, accum="fp16")
