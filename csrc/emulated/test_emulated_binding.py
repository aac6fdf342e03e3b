"""The binding over the emulated device (ffpa_attn._C_emulated, csrc/emulated): CPU torch
tensors read through DLPack as the device's arrays, the real C API's forward and backward
behind them on each emulated arch (FFPA_EMULATED_ARCH), against float64 attention computed
by torch at the tolerance table's rows (build_info()["tolerances"]). Each call must name
the kernel it ran. Run by ctest (ffpa.emulated.binding) in the torch venv with the build
tree's python/ on PYTHONPATH."""

import math
import os

import pytest
import torch

from ffpa_attn import _C_emulated as C
from ffpa_attn.errors import DeviceError

TOL = C.build_info()["tolerances"]
# impl='auto' on each emulated arch (the library's auto rule: tma on the sm_120 family).
AUTO = {"89": "mma", "90": "mma", "120f": "tma"}


@pytest.fixture(params=sorted(AUTO))
def arch(request, monkeypatch):
    monkeypatch.setenv("FFPA_EMULATED_ARCH", request.param)
    return request.param


def reference(q, k, v, causal, top_left, window=(-1, -1)):
    """float64 attention as SDPA's math backend computes it (the mask added as -inf, so a NaN
    score stays NaN under it), with
    the causal diagonal bottom-right (key j <= i + Nkv - Nq) or top-left (j <= i)."""
    q, k, v = (t.double() for t in (q, k, v))
    hq, hkv, nq, nkv = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    i = torch.arange(nq).view(-1, 1)
    j = torch.arange(nkv).view(1, -1)
    diag = i + (0 if top_left else nkv - nq)
    hidden = torch.zeros(nq, nkv, dtype=torch.bool)
    if causal:
        hidden |= j > diag
    if window[0] >= 0:
        hidden |= j < diag - window[0]
    if window[1] >= 0:
        hidden |= j > diag + window[1]
    s = s + torch.zeros(nq, nkv, dtype=torch.float64).masked_fill(hidden, -math.inf)
    return torch.softmax(s, dim=-1) @ v, torch.logsumexp(s, dim=-1)


def run_forward(q, k, v, causal, top_left=False, window=(-1, -1), impl="auto"):
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32)
    used = C.forward(q, k, v, out, lse, causal, 1 / math.sqrt(q.shape[-1]), impl,
                     window_left=window[0], window_right=window[1], causal_top_left=top_left)
    return out, lse, used


def assert_close(got, ref, row):
    t = TOL[row]
    err = (got.double() - ref).abs()
    assert bool((err <= t["atol"] + t["rtol"] * ref.abs()).all()), f"max |err| {err.max().item():.3e} ({row})"


CASES = [
    # (name, dtype, B, Hq, Hkv, Nq, Nkv, causal, top_left, window)
    ("gqa-bottom-right", torch.float16, 1, 2, 1, 40, 72, True, False, (-1, -1)),
    ("top-left-nq-gt-nkv", torch.bfloat16, 1, 2, 2, 72, 40, True, True, (-1, -1)),
    ("window", torch.float16, 1, 2, 1, 48, 48, True, False, (16, 0)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_forward_backward_against_float64(arch, case):
    _, dtype, b, hq, hkv, nq, nkv, causal, top_left, window = case
    g = torch.Generator().manual_seed(40)
    q = torch.randn(b, hq, nq, 64, generator=g).to(dtype)
    k = torch.randn(b, hkv, nkv, 64, generator=g).to(dtype)
    v = torch.randn(b, hkv, nkv, 64, generator=g).to(dtype)
    dout = torch.randn(b, hq, nq, 64, generator=g).to(dtype)
    out, lse, used = run_forward(q, k, v, causal, top_left, window)
    assert used == AUTO[arch]
    row = "bf16" if dtype == torch.bfloat16 else "fp16"
    ref_out, ref_lse = reference(q, k, v, causal, top_left, window)
    assert_close(out, ref_out, row)
    assert float((lse.double() - ref_lse).abs().max()) <= TOL[row]["lse"]

    qr, kr, vr = (t.double().requires_grad_() for t in (q, k, v))
    o, _ = reference(qr, kr, vr, causal, top_left, window)
    o.backward(dout.double())
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    ws = torch.empty(2 * b * hq * nq, dtype=torch.float32)
    C.backward(q, k, v, out, dout, lse, dq, dk, dv, ws, causal, top_left, 1 / math.sqrt(64),
               window_left=window[0], window_right=window[1])
    t = TOL["bwd_bf16" if dtype == torch.bfloat16 else "bwd_fp16"]
    for name, got, ref in (("dq", dq, qr.grad), ("dk", dk, kr.grad), ("dv", dv, vr.grad)):
        err = (got.double() - ref).abs()
        assert float(err.max() / ref.abs().max()) <= t["atol"], name
        assert float(err.sum() / ref.abs().sum()) <= t["max_rel_l1"], name


def test_the_check_refuses_the_other_alignment(arch):
    """The comparison discriminates: the bottom-right output fails against top-left."""
    g = torch.Generator().manual_seed(41)
    q = torch.randn(1, 2, 40, 64, generator=g).half()
    k = torch.randn(1, 2, 72, 64, generator=g).half()
    v = torch.randn(1, 2, 72, 64, generator=g).half()
    out, _, _ = run_forward(q, k, v, causal=True)
    with pytest.raises(AssertionError):
        assert_close(out, reference(q, k, v, True, top_left=True)[0], "fp16")


def test_nan_follows_the_math_backend(arch):
    """A NaN in a key the causal mask hides from most rows: the math backend's rule (the
    -inf is added, so every row reading the NaN's score is NaN) through the pre-pass."""
    g = torch.Generator().manual_seed(42)
    q = torch.randn(1, 2, 32, 64, generator=g).half()
    k = torch.randn(1, 2, 32, 64, generator=g).half()
    v = torch.randn(1, 2, 32, 64, generator=g).half()
    k[0, 1, 20, 3] = float("nan")
    out, _, used = run_forward(q, k, v, causal=True)
    assert used == AUTO[arch]
    ref, _ = reference(q, k, v, True, False)
    assert torch.equal(out.isnan(), ref.isnan())
    assert bool(out[0, 1].isnan().all()) and not bool(out[0, 0].isnan().any())
    finite = ~ref.isnan()
    assert_close(out[finite], ref[finite], "fp16")


def test_tma_by_name_and_its_refusal(monkeypatch):
    g = torch.Generator().manual_seed(43)
    q, k, v = (torch.randn(1, 1, 24, 64, generator=g).half() for _ in range(3))
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "90")
    out, _, used = run_forward(q, k, v, causal=False, impl="tma")
    assert used == "tma"
    assert_close(out, reference(q, k, v, False, False)[0], "fp16")
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "89")
    with pytest.raises(Exception, match=r"cannot run on this GPU \(sm_89\)"):
        run_forward(q, k, v, causal=False, impl="tma")


def test_device_errors(monkeypatch):
    q = torch.randn(1, 1, 16, 64).half()
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "75")
    with pytest.raises(DeviceError, match="set it to 89, 90 or 120f"):
        run_forward(q, q, q, causal=False)
    monkeypatch.delenv("FFPA_EMULATED_ARCH")
    assert os.environ.get("FFPA_EMULATED_ARCH") is None
    out, _, used = run_forward(q, q, q, causal=False)  # the default arch: 90
    assert used == "mma"
