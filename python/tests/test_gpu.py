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
