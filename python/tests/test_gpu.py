"""The compiled kernels on a real GPU against the NumPy reference (skipped without one).

Registered under CTest as python.gpu (label gpu, RESOURCE_LOCK gpu); an all-skipped
run is reported to CTest as "Not Run" through SKIP_RETURN_CODE.
"""

from __future__ import annotations

import numpy as np
import pytest

from ffpa_attn import cuda, ffpa_attn_func, reference

pytestmark = pytest.mark.gpu

TOL = {"fp16": 2e-2, "bf16": 5e-2}


@pytest.fixture(scope="module")
def torch():
    if not cuda.CUDA_FWD_AVAILABLE:
        pytest.skip(f"no CUDA extension ({cuda.EXTENSION_IMPORT_ERROR or 'pure package'})")
    if cuda.device_count() == 0:
        pytest.skip("no CUDA device")
    return pytest.importorskip("torch")


def _dims():
    return list(cuda.COMPILED_HEAD_DIMS) or [128]


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


@pytest.mark.parametrize("impl", ["auto", "mma", "simt"])
def test_transposed_bnhd_views_need_no_copy(torch, impl):
    """[B, N, H, D] tensors viewed as [B, H, N, D]: strides pass through, no refusal."""
    d = _dims()[0]
    q, k, v = _qkv(torch, d, (2, 150, 4), (2, 90, 2))  # [B, N, H, D] in memory
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    assert not qt.is_contiguous()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # aligned strided views take the mma kernel: no fallback warning
        out = ffpa_attn_func(qt, kt, vt, causal=True, impl=impl)
    from ffpa_attn import last_kernel

    assert last_kernel() == ("mma" if impl == "auto" else impl)
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
