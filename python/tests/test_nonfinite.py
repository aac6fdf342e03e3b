"""NaN and inf as SDPA, and the CPU path at SDPA's cost.

The rule of every path (docs/install.md "NaN and inf", torch_math.NONFINITE_RULE): the
output is what torch SDPA's math backend gives for the same inputs. Checked here for CPU
torch tensors (forward and backward), the NumPy reference and NumPy arrays through
ffpa_attn_func, against SDPA's math backend itself. The CUDA kernels' side is
csrc/tests/emulate_kernels.cpp (emulator) and the device checks.

The CPU path of finite inputs is torch's own CPU attention: the same numbers as SDPA
(bit for bit where SDPA runs that op), and O(N) memory (a subprocess's peak RSS).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from ffpa_attn import SDPAFallbackWarning, UnsupportedDTypeError, ffpa_attn_func, last_kernel, reference, routing  # noqa: E402
from ffpa_attn.torch_math import MASK_BOTTOM_RIGHT, MASK_NONE, MASK_TOP_LEFT  # noqa: E402

pytestmark = pytest.mark.torch

NAN, INF = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def _fresh_routing():
    routing._reset_for_tests()
    yield
    routing._reset_for_tests()


def _bool_mask(nq: int, nkv: int, mask: int):
    if mask == MASK_NONE:
        return None
    offset = nkv - nq if mask == MASK_BOTTOM_RIGHT else 0
    return torch.ones(nq, nkv, dtype=torch.bool).tril(diagonal=offset)


def _math_sdpa(q, k, v, mask: int):
    """SDPA's math backend: the rule's definition."""
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=_bool_mask(q.shape[2], k.shape[2], mask),
                                              enable_gqa=q.shape[1] != k.shape[1])


def _ffpa_kwargs(nq: int, nkv: int, mask: int) -> dict:
    if mask == MASK_TOP_LEFT:
        return {"is_causal": True}
    if mask == MASK_BOTTOM_RIGHT:
        from torch.nn.attention.bias import causal_lower_right
        return {"attn_mask": causal_lower_right(nq, nkv)}
    return {}


def _planted(which: str, value: float, row: int, nq: int, nkv: int, hq: int = 2, hkv: int = 2, d: int = 8,
             dtype=torch.float32):
    gen = torch.Generator().manual_seed(row + 10 * nq)
    q = torch.randn(1, hq, nq, d, generator=gen, dtype=dtype)
    k = torch.randn(1, hkv, nkv, d, generator=gen, dtype=dtype)
    v = torch.randn(1, hkv, nkv, d, generator=gen, dtype=dtype)
    target = {"q": q, "k": k, "v": v}[which]
    target[0, 0, min(row, target.shape[2] - 1), 3] = value
    return q, k, v


# (Nq, Nkv, mask): square, decode-like, and rows that see no key (bottom-right, Nq > Nkv).
GEOMETRIES = [(6, 6, MASK_NONE), (6, 6, MASK_TOP_LEFT), (4, 7, MASK_BOTTOM_RIGHT), (7, 4, MASK_BOTTOM_RIGHT),
              (7, 4, MASK_TOP_LEFT)]
PLANTS = list(itertools.product("qkv", (NAN, INF, -INF), (0, 5)))


@pytest.mark.filterwarnings("ignore:Lower right causal bias")
@pytest.mark.parametrize("nq,nkv,mask", GEOMETRIES)
@pytest.mark.parametrize("which,value,row", PLANTS)
def test_cpu_path_gives_sdpa_math_for_nan_and_inf(which, value, row, nq, nkv, mask):
    q, k, v = _planted(which, value, row, nq, nkv)
    want = _math_sdpa(q, k, v, mask)
    got = ffpa_attn_func(q, k, v, **_ffpa_kwargs(nq, nkv, mask))
    assert last_kernel() == "torch_math"
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("which,value,row", PLANTS)
@pytest.mark.parametrize("causal", [False, True])
def test_reference_gives_sdpa_math_for_nan_and_inf(which, value, row, causal):
    # The NumPy reference's causal=True is bottom-right; Nq > Nkv has rows that see no key.
    q, k, v = _planted(which, value, row, 7, 4)
    want = _math_sdpa(q, k, v, MASK_BOTTOM_RIGHT if causal else MASK_NONE).numpy()
    out = reference.attention(q.numpy(), k.numpy(), v.numpy(), causal=causal)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("which,value", [("q", NAN), ("k", NAN), ("v", NAN), ("k", INF), ("v", -INF)])
def test_numpy_arrays_give_sdpa_math(which, value):
    q, k, v = _planted(which, value, 2, 6, 6)
    want = _math_sdpa(q, k, v, MASK_TOP_LEFT).numpy()
    got = ffpa_attn_func(q.numpy(), k.numpy(), v.numpy(), is_causal=True)
    assert last_kernel() == "reference"
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_one_nan_in_k_is_nan_not_zeros():
    # The report that started this file: one NaN in K gave the head's output as zeros.
    q, k, v = _planted("k", NAN, 3, 16, 16, d=64)
    out = ffpa_attn_func(q, k, v)
    assert torch.isnan(out[0, 0]).all() and torch.isfinite(out[0, 1]).all()


def test_nan_query_row_is_nan_also_where_torchs_cpu_flash_gives_zero():
    # torch's CPU flash kernel (SDPA's default on the CPU) returns 0 for a NaN query row;
    # the rule is the math backend's NaN, and the CPU path follows the rule.
    q, k, v = _planted("q", NAN, 2, 6, 6)
    out = ffpa_attn_func(q, k, v)
    assert torch.isnan(out[0, 0, 2]).all()
    assert torch.isfinite(out[0, 0, [0, 1, 3, 4, 5]]).all()


@pytest.mark.parametrize("which,value", list(itertools.product("qkv", (NAN, INF, -INF))))
@pytest.mark.parametrize("causal", [False, True])
def test_backward_of_nan_and_inf_gives_sdpa_math(which, value, causal):
    q, k, v = (t.requires_grad_() for t in _planted(which, value, 2, 6, 6))
    grad = torch.randn(1, 2, 6, 8, generator=torch.Generator().manual_seed(9))
    got = torch.autograd.grad(ffpa_attn_func(q, k, v, is_causal=causal), (q, k, v), grad)
    want = torch.autograd.grad(_math_sdpa(q, k, v, MASK_TOP_LEFT if causal else MASK_NONE), (q, k, v), grad)
    for name, a, b in zip("qkv", got, want):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-5, atol=1e-5, msg=f"d{name}")
    # Head 1 holds no NaN/inf: its gradients stay finite.
    assert all(torch.isfinite(g[0, 1]).all() for g in got)


@pytest.mark.filterwarnings("ignore:Lower right causal bias")
def test_rows_that_see_no_key_are_zero_with_zero_gradient():
    q, k, v = (t.requires_grad_() for t in _planted("q", 0.5, 0, 7, 4))
    out, lse = ffpa_attn_func(q, k, v, attn_mask=_ffpa_kwargs(7, 4, MASK_BOTTOM_RIGHT)["attn_mask"],
                              return_lse=True)
    assert torch.equal(out[:, :, :3], torch.zeros_like(out[:, :, :3]))
    assert torch.isneginf(lse[:, :, :3]).all() and torch.isfinite(lse[:, :, 3:]).all()
    torch.testing.assert_close(out, _math_sdpa(q, k, v, MASK_BOTTOM_RIGHT))
    (dq,) = torch.autograd.grad(out.sum(), (q,))
    assert torch.equal(dq[:, :, :3], torch.zeros_like(dq[:, :, :3]))


# --- the CPU path of finite inputs: torch's CPU attention -----------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("is_causal,hkv", [(False, 4), (True, 4), (True, 2)])
def test_cpu_path_is_sdpa_bit_for_bit(dtype, is_causal, hkv):
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 33, 64, generator=gen).to(dtype).requires_grad_()
    k = torch.randn(2, hkv, 47, 64, generator=gen).to(dtype).requires_grad_()
    v = torch.randn(2, hkv, 47, 64, generator=gen).to(dtype).requires_grad_()
    got = ffpa_attn_func(q, k, v, is_causal=is_causal, enable_gqa=True)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)
    assert torch.equal(got, want)
    grad = torch.randn(got.shape, generator=gen).to(dtype)
    for a, b in zip(torch.autograd.grad(got, (q, k, v), grad), torch.autograd.grad(want, (q, k, v), grad)):
        assert torch.equal(a, b)


@pytest.mark.filterwarnings("ignore:Lower right causal bias")
@pytest.mark.parametrize("nq,nkv", [(5, 19), (19, 5), (12, 12)])
def test_cpu_path_bottom_right_matches_sdpa(nq, nkv):
    # Bottom-right runs as segments of torch's CPU attention merged by their LSEs.
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 2, n, 32, generator=gen, dtype=torch.float64).requires_grad_()
               for n in (nq, nkv, nkv))
    got = ffpa_attn_func(q, k, v, attn_mask=_ffpa_kwargs(nq, nkv, MASK_BOTTOM_RIGHT)["attn_mask"])
    want = _math_sdpa(q, k, v, MASK_BOTTOM_RIGHT)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    grad = torch.randn(got.shape, generator=gen, dtype=torch.float64)
    for a, b in zip(torch.autograd.grad(got, (q, k, v), grad), torch.autograd.grad(want, (q, k, v), grad)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


_PEAK_SCRIPT = textwrap.dedent("""
    import json, resource, sys
    import torch, ffpa_attn
    n = int(sys.argv[1])
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, n, 64, generator=gen).requires_grad_() for _ in range(3))
    small = [t[:, :, :64].detach().requires_grad_() for t in (q, k, v)]
    ffpa_attn.ffpa_attn_func(*small, is_causal=True).sum().backward()  # load the kernels first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ffpa_attn.ffpa_attn_func(q, k, v, is_causal=True).sum().backward()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"growth_kib": after - before, "kernel": ffpa_attn.last_kernel()}))
""")


def test_long_cpu_call_peak_memory_is_o_n():
    # N = 8192: one fp32 N x N matrix is 256 MiB, the old path made several; inputs,
    # outputs and gradients are 2 MiB each. Peak RSS growth of a fresh process (ru_maxrss,
    # KiB on Linux) over forward + backward must stay far below one N x N matrix.
    n = 8192
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, str(n)], capture_output=True, text=True, env=env,
                          timeout=300, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["kernel"] == "torch_math"
    assert result["growth_kib"] * 1024 < n * n * 4 // 4, result


# --- mixed dtypes: refused as SDPA refuses them, on every path ------------------------------------


def test_mixed_dtypes_are_refused_on_the_cpu_like_sdpa():
    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(RuntimeError, match="same dtype"):
        F.scaled_dot_product_attention(q, q.bfloat16(), q)
    with pytest.raises(UnsupportedDTypeError, match="same dtype"):
        ffpa_attn_func(q, q.bfloat16(), q)
    with pytest.raises(UnsupportedDTypeError, match="same dtype"):
        ffpa_attn_func(q.numpy(), q.double().numpy(), q.numpy())


def test_mixed_dtypes_are_refused_for_cuda_routes_too(monkeypatch):
    # The CUDA route (find_problem's checks, stood in by CPU tensors) refuses before any
    # fallback: no SDPAFallbackWarning, the same error.
    from ffpa_attn import torch_ops
    monkeypatch.setattr(torch_ops, "tensor_device_type", lambda t: "cuda")
    q = torch.randn(1, 2, 8, 64, dtype=torch.float16)
    with _no_fallback_warning():
        with pytest.raises(UnsupportedDTypeError, match="same dtype"):
            ffpa_attn_func(q, q.bfloat16(), q)


def test_autocast_makes_one_dtype_as_for_sdpa():
    q = torch.randn(1, 2, 8, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = ffpa_attn_func(q, q.bfloat16(), q.half())
        want = F.scaled_dot_product_attention(q, q.bfloat16(), q.half())
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.equal(got, want)


@contextlib.contextmanager
def _no_fallback_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)
        yield


# --- NaN and inf under sliding windows, forward and backward (the CPU path's ops) ----------------


def _window_mask(nq: int, nkv: int, left: int, right: int, causal: bool, bottom_right: bool):
    """The window rule written out here (ffpa_attn.window's docstring), as SDPA's boolean mask."""
    if causal:
        right = 0 if right == -1 else min(right, 0)
    i = torch.arange(nq)[:, None] + (nkv - nq if bottom_right else 0)
    j = torch.arange(nkv)[None, :]
    allowed = torch.ones(nq, nkv, dtype=torch.bool)
    if left != -1:
        allowed &= j >= i - left
    if right != -1:
        allowed &= j <= i + right
    return allowed


def _window_trials(count: int):
    gen = torch.Generator().manual_seed(43)
    for _ in range(count):
        nq, nkv = (int(x) for x in torch.randint(1, 10, (2,), generator=gen))
        left, right = (int(x) for x in torch.randint(-1, 4, (2,), generator=gen))
        if (left, right) == (-1, -1):
            left = 2
        causal = bool(torch.randint(0, 2, (1,), generator=gen))
        which = "qkv"[int(torch.randint(0, 3, (1,), generator=gen))]
        value = (NAN, INF, -INF)[int(torch.randint(0, 3, (1,), generator=gen))]
        row = int(torch.randint(0, 10, (1,), generator=gen))
        yield nq, nkv, left, right, causal, which, value, row


@pytest.mark.parametrize("nq,nkv,left,right,causal,which,value,row", list(_window_trials(60)))
def test_window_backward_of_nan_and_inf_gives_sdpa_math(nq, nkv, left, right, causal, which, value, row):
    # Issue 43: the windowed backward of non-finite inputs differentiated through torch
    # inside the custom op, where autograd builds no graph ("element 0 of tensors does not
    # require grad"). 60 random windows, NaN / +-inf planted in q, k or v.
    q, k, v = (t.requires_grad_() for t in _planted(which, value, row, nq, nkv))
    grad = torch.randn(1, 2, nq, 8, generator=torch.Generator().manual_seed(nq * 10 + nkv))
    out = ffpa_attn_func(q, k, v, is_causal=causal, window_size=(left, right))
    got = torch.autograd.grad(out, (q, k, v), grad)
    mask = _window_mask(nq, nkv, left, right, causal, bottom_right=False)
    with sdpa_kernel(SDPBackend.MATH):
        want_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    want = torch.autograd.grad(want_out, (q, k, v), grad)
    torch.testing.assert_close(out, want_out, equal_nan=True, rtol=1e-5, atol=1e-5)
    for name, a, b in zip("qkv", got, want):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-5, atol=1e-5, msg=f"d{name}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("which,value", [("q", NAN), ("k", NAN), ("v", INF), ("k", -INF)])
def test_varlen_window_backward_of_nan_and_inf_gives_sdpa_math(which, value, causal):
    from ffpa_attn import ffpa_attn_varlen_func

    lengths_q, lengths_k = [5, 3, 6], [5, 7, 6]
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(sum(lengths_q), 2, 8, generator=gen)
    k = torch.randn(sum(lengths_k), 2, 8, generator=gen)
    v = torch.randn(sum(lengths_k), 2, 8, generator=gen)
    {"q": q, "k": k, "v": v}[which][6, 1, 2] = value  # in the second sequence
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    cu_q = torch.tensor([0, 5, 8, 14], dtype=torch.int32)
    cu_k = torch.tensor([0, 5, 12, 18], dtype=torch.int32)
    grad = torch.randn(sum(lengths_q), 2, 8, generator=gen)
    out = ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, 6, 7, causal=causal, window_size=(2, 1))
    got = torch.autograd.grad(out, (q, k, v), grad)
    pieces = []
    with sdpa_kernel(SDPBackend.MATH):
        for s in range(3):
            q0, q1, k0, k1 = int(cu_q[s]), int(cu_q[s + 1]), int(cu_k[s]), int(cu_k[s + 1])
            mask = _window_mask(q1 - q0, k1 - k0, 2, 1, causal, bottom_right=True)
            o = F.scaled_dot_product_attention(*(t[a:b].transpose(0, 1) for t, a, b in
                                                 ((q, q0, q1), (k, k0, k1), (v, k0, k1))), attn_mask=mask)
            pieces.append(o.transpose(0, 1))
    want_out = torch.cat(pieces)
    want = torch.autograd.grad(want_out, (q, k, v), grad)
    torch.testing.assert_close(out, want_out, equal_nan=True, rtol=1e-5, atol=1e-5)
    for name, a, b in zip("qkv", got, want):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-5, atol=1e-5, msg=f"d{name}")
    # The other sequences hold no NaN / inf: their gradients stay finite.
    assert torch.isfinite(got[0][:5]).all() and torch.isfinite(got[0][8:]).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_all_finite_reads_every_element_exactly(dtype):
    # The CPU path's choice between torch's kernel and the math (torch_math.all_finite, from
    # the bits, in blocks): every NaN / inf found wherever it sits, in views too, and the
    # largest finite values are finite.
    from ffpa_attn.torch_math import all_finite

    x = torch.randn(3, 300000, dtype=dtype, generator=torch.Generator().manual_seed(0))
    assert all_finite(x, x.t(), x[:, ::2], x.transpose(0, 1)[None])
    for value, at in itertools.product((NAN, INF, -INF), (0, 262143, 262144, 600001, 899999)):
        y = x.clone()
        y.view(-1)[at] = value
        assert not all_finite(y) and not all_finite(y.t()) and not all_finite(x, y), (value, at)
    biggest = torch.full((10,), torch.finfo(dtype).max, dtype=dtype)
    assert all_finite(biggest, -biggest, torch.zeros(0, dtype=dtype))
