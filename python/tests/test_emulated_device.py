"""The package on the emulated device (``FFPA_DEVICE=emulated``, ffpa_attn.device): CPU
torch tensors take the CUDA path (the routing, the custom ops forward and backward,
varlen, transformers' ``attn_implementation="ffpa"``) into ``ffpa_attn._C_emulated``, whose
real host code and kernels run on the CPU emulator (csrc/emulated). Every call must name
our kernel in ``last_kernel()`` (never a fallback), against float64 attention at the
tolerance table's rows (the extension's build_info()["tolerances"]).

Run by CTest's ffpa.emulated.package (csrc/emulated/CMakeLists.txt) in the torch venv with
the build tree's python/ on PYTHONPATH and FFPA_DEVICE=emulated; the other pytest runs
deselect it (the marker ``emulated``). Small shapes: the emulator runs one fiber per
CUDA thread.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import sys
import types

import pytest

torch = pytest.importorskip("torch")

import ffpa_attn  # noqa: E402
from ffpa_attn import ffpa_attn_func, last_kernel, routing  # noqa: E402
from ffpa_attn.errors import DeviceError, ExtensionNotAvailableError, UnsupportedImplError  # noqa: E402
from torch.nn.attention.bias import causal_lower_right  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.emulated]

# impl='auto' on each emulated arch: the GPU's rule (tma on the sm_120 family only).
AUTO = {"89": "mma", "90": "mma", "120f": "tma"}
TOL: dict = {}


@pytest.fixture(autouse=True)
def _fresh_routing():
    # Selected without the emulated device (-m emulated elsewhere) is a failure, not a skip.
    assert os.environ.get("FFPA_DEVICE") == "emulated" and ffpa_attn.device.emulated(), (
        "run with FFPA_DEVICE=emulated and the build tree's python/ on PYTHONPATH (CTest ffpa.emulated.package): "
        f"{ffpa_attn.device.problem()}")
    TOL.update(ffpa_attn.cuda.extension_info()["tolerances"])
    routing._reset_for_tests()
    yield
    routing._reset_for_tests()


@pytest.fixture(params=["89", "90"])
def arch(request, monkeypatch):
    monkeypatch.setenv("FFPA_EMULATED_ARCH", request.param)
    return request.param


def reference(q, k, v, top_left, causal=True, window=(-1, -1)):
    """float64 attention, the causal diagonal bottom-right (key j <= i + Nkv - Nq) or
    top-left (j <= i), an optional (left, right) window around it."""
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
    # The mask is added, as in SDPA's math backend: a NaN score stays NaN under it.
    return torch.softmax(s + torch.zeros(nq, nkv, dtype=torch.float64).masked_fill(hidden, -math.inf), dim=-1) @ v


def assert_out_close(got, ref, dtype):
    t = TOL["bf16" if dtype == torch.bfloat16 else "fp16"]
    err = (got.double() - ref).abs()
    assert bool((err <= t["atol"] + t["rtol"] * ref.abs()).all()), f"max |err| {err.max().item():.3e}"


def assert_grads_close(got, ref, dtype, name):
    t = TOL["bwd_bf16" if dtype == torch.bfloat16 else "bwd_fp16"]
    err = (got.double() - ref).abs()
    assert float(err.max() / ref.abs().max()) <= t["atol"], name
    assert float(err.sum() / ref.abs().sum()) <= t["max_rel_l1"], name


CASES = [
    # (name, dtype, B, Hq, Hkv, Nq, Nkv, D, alignment, window)
    ("gqa-bottom-right", torch.float16, 1, 2, 1, 40, 72, 64, "bottom_right", (-1, -1)),
    ("top-left-nq-gt-nkv", torch.bfloat16, 1, 2, 2, 72, 40, 64, "top_left", (-1, -1)),
    ("window-d128", torch.float16, 2, 2, 1, 33, 33, 128, "top_left", (8, 0)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_ffpa_attn_func_forward_backward(arch, case):
    _, dtype, b, hq, hkv, nq, nkv, d, alignment, window = case
    g = torch.Generator().manual_seed(40)
    q, k, v = (torch.randn(b, h, n, d, generator=g).to(dtype).requires_grad_()
               for h, n in ((hq, nq), (hkv, nkv), (hkv, nkv)))
    dout = torch.randn(b, hq, nq, d, generator=g).to(dtype)
    top_left = alignment == "top_left"
    mask = {"is_causal": True} if top_left else {
        "attn_mask": causal_lower_right(nq, nkv)}
    # strict: a fallback raises; backward='ffpa': the backward kernels or an error.
    out = ffpa_attn_func(q, k, v, **mask, enable_gqa=hq != hkv, window_size=window, strict=True, backward="ffpa")
    assert last_kernel(with_reason=True) == (AUTO[arch], None)
    out.backward(dout)
    qr, kr, vr = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = reference(qr, kr, vr, top_left, window=window)
    assert_out_close(out.detach(), ref.detach(), dtype)
    ref.backward(dout.double())
    for name, got, want in (("dq", q.grad, qr.grad), ("dk", k.grad, kr.grad), ("dv", v.grad, vr.grad)):
        assert_grads_close(got, want, dtype, name)


def test_the_comparison_discriminates(monkeypatch):
    """The bottom-right output fails against the top-left reference (Nq != Nkv)."""
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "90")
    g = torch.Generator().manual_seed(41)
    q = torch.randn(1, 2, 24, 64, generator=g).half()
    k, v = (torch.randn(1, 2, 40, 64, generator=g).half() for _ in range(2))
    out = ffpa_attn_func(q, k, v, attn_mask=causal_lower_right(24, 40), strict=True)
    assert last_kernel() == "mma"
    assert_out_close(out, reference(q, k, v, top_left=False), torch.float16)
    with pytest.raises(AssertionError):
        assert_out_close(out, reference(q, k, v, top_left=True), torch.float16)


def test_each_arch_runs_its_gpus_kernel(monkeypatch):
    g = torch.Generator().manual_seed(42)
    q, k, v = (torch.randn(1, 2, 24, 64, generator=g).half() for _ in range(3))
    ref = reference(q, k, v, top_left=True, causal=False)
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "120f")
    assert_out_close(ffpa_attn_func(q, k, v, strict=True), ref, torch.float16)
    assert last_kernel() == "tma"
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "90")
    assert_out_close(ffpa_attn_func(q, k, v, impl="tma"), ref, torch.float16)
    assert last_kernel() == "tma"
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "89")
    with pytest.raises(UnsupportedImplError, match=r"sm_89"):
        ffpa_attn_func(q, k, v, impl="tma")


def test_fallback_reasons_are_the_gpus(monkeypatch):
    """What the kernels do not take falls back with the GPU's reason (a head dim this
    build lacks, fp32), and raises it under strict."""
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "90")
    q = torch.randn(1, 1, 8, 32).half()
    with pytest.warns(ffpa_attn.SDPAFallbackWarning, match="'head_dim'"):
        ffpa_attn_func(q, q, q)
    assert last_kernel(with_reason=True) == ("sdpa", "head_dim")
    with pytest.raises(ffpa_attn.UnsupportedHeadDimError):
        ffpa_attn_func(q, q, q, strict=True)
    q = torch.randn(1, 1, 8, 64)
    with pytest.warns(ffpa_attn.SDPAFallbackWarning, match="'dtype'"):
        ffpa_attn_func(q, q, q)
    assert last_kernel(with_reason=True) == ("sdpa", "dtype")


def test_nan_follows_the_math_backend(arch):
    """A NaN in a key the causal mask hides from most rows: SDPA's math backend's rule
    (the mask is added, so every row of that head is NaN), through the pre-pass."""
    g = torch.Generator().manual_seed(44)
    q, k, v = (torch.randn(1, 2, 32, 64, generator=g).half() for _ in range(3))
    k[0, 1, 20, 3] = float("nan")
    out = ffpa_attn_func(q, k, v, is_causal=True, strict=True)
    assert last_kernel() == AUTO[arch]
    ref = reference(q, k, v, top_left=True)
    assert torch.equal(out.isnan(), ref.isnan())
    assert bool(out[0, 1].isnan().all()) and not bool(out[0, 0].isnan().any())
    assert_out_close(out[0, 0], ref[0, 0], torch.float16)


def test_strided_views(monkeypatch):
    """q, k, v as views of one [B, N, 3, H, D] projection (the layout models hand over):
    the kernels read the strides as given."""
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "90")
    g = torch.Generator().manual_seed(45)
    qkv = torch.randn(1, 24, 3, 2, 64, generator=g).half()
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    out = ffpa_attn_func(q, k, v, is_causal=True, strict=True)
    assert last_kernel() == "mma"
    assert_out_close(out, reference(q, k, v, top_left=True), torch.float16)


def test_an_unknown_arch_is_a_device_error(monkeypatch):
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "75")
    q = torch.randn(1, 1, 16, 64).half()
    with pytest.raises(DeviceError, match="set it to 89, 90 or 120f"):
        ffpa_attn_func(q, q, q, strict=True)


@pytest.mark.parametrize(("emulated_arch", "kernel", "fault"), [
    ("90", "mma", "cp.async source outside the input arrays"),
    ("120f", "tma", "TMA box reads outside the input arrays")])
def test_a_fault_in_a_kernel_is_an_error_not_an_exit(monkeypatch, emulated_arch, kernel, fault):
    """A fault the emulator finds inside a kernel (injected: q's last 16 bytes are not
    memory the kernel may read, FFPA_EMULATED_INJECT_FAULT=short_read) is that launch's
    DeviceError, a RuntimeError naming the kernel and the fault, forward and backward; the
    process goes on (an exit would end this run), and the next call runs clean."""
    monkeypatch.setenv("FFPA_EMULATED_ARCH", emulated_arch)
    g = torch.Generator().manual_seed(46)
    q, k, v = (torch.randn(1, 2, 24, 64, generator=g).half().requires_grad_() for _ in range(3))
    monkeypatch.setenv("FFPA_EMULATED_INJECT_FAULT", "short_read")
    with pytest.raises(RuntimeError, match=rf"^{kernel} forward kernel launch failed: the emulated device faulted: "
                                           rf"{re.escape(fault)} \(block 0,1,0\)") as raised:
        ffpa_attn_func(q, k, v, is_causal=True, strict=True)
    assert isinstance(raised.value, DeviceError)
    monkeypatch.delenv("FFPA_EMULATED_INJECT_FAULT")
    out = ffpa_attn_func(q, k, v, is_causal=True, strict=True, backward="ffpa")
    assert last_kernel() == kernel
    assert_out_close(out.detach(), reference(q.detach(), k.detach(), v.detach(), top_left=True), torch.float16)
    monkeypatch.setenv("FFPA_EMULATED_INJECT_FAULT", "short_read")
    with pytest.raises(DeviceError, match=r"^dK / dV kernel launch.* failed: the emulated device faulted: "):
        out.backward(torch.ones_like(out))
    monkeypatch.setenv("FFPA_EMULATED_INJECT_FAULT", "short")
    with pytest.raises(DeviceError, match="FFPA_EMULATED_INJECT_FAULT='short' is not a fault the emulated device "
                                          "injects: set it to short_read or unset it"):
        ffpa_attn_func(q, k, v, strict=True)


@pytest.mark.parametrize(("emulated_arch", "sm", "auto"), [("89", "sm_89", "mma"), ("120f", "sm_120", "tma")])
def test_info_reports_the_emulated_device(monkeypatch, capsys, emulated_arch, sm, auto):
    """python -m ffpa_attn.info names the emulated device and its arch (text and --json),
    never a CUDA wheel; what it says runs is what the routing runs there."""
    from ffpa_attn import info

    monkeypatch.setenv("FFPA_EMULATED_ARCH", emulated_arch)
    assert info.main(["--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    sm_number = int(sm[3:])
    assert rep["device"] == {"kind": "emulated", "arch": emulated_arch,
                             "capability": [sm_number // 10, sm_number % 10], "error": None}
    assert rep["package"]["wheel"] == "emulated"
    (gpu,) = rep["gpus"]
    assert gpu["arch"] == sm and f"FFPA_EMULATED_ARCH={emulated_arch}" in gpu["name"]
    assert gpu["auto"] == auto and gpu["impls"]["tma"]["runs"] == (auto == "tma" or emulated_arch == "90")
    q = torch.randn(1, 1, 16, 64).half()
    ffpa_attn_func(q, q, q, strict=True)
    assert last_kernel() == gpu["auto"]
    assert info.main([]) == 0
    text = capsys.readouterr().out
    assert f"device: emulated {sm} (FFPA_EMULATED_ARCH={emulated_arch})" in text
    assert "cuda wheel" not in text and "torch_math" not in text
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "75")
    assert info.main([]) == 0
    assert "device: emulated: FFPA_EMULATED_ARCH='75' is not an emulated arch: set it to" in capsys.readouterr().out


def _packed(lengths, heads, d, dtype, g):
    total = sum(lengths)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)
    return torch.randn(total, heads, d, generator=g).to(dtype).requires_grad_(), cu


@pytest.mark.parametrize("layout", ["packed", "padded"])
def test_varlen_forward_backward(arch, layout):
    """ffpa_attn_varlen_func on packed sequences of unequal lengths (Nq != Nkv per
    sequence, bottom-right causal, GQA), and on a padded batch's key slots cut by
    seqused_k, with a window."""
    dtype = torch.bfloat16 if layout == "packed" else torch.float16
    g = torch.Generator().manual_seed(43)
    if layout == "packed":
        lq, lk, used, window = [17, 5, 30], [20, 9, 30], None, (-1, -1)
    else:
        lq, lk, used, window = [24, 11], [24, 24], [24, 11], (6, 0)
    q, cu_q = _packed(lq, 2, 64, dtype, g)
    k, cu_k = _packed(lk, 1, 64, dtype, g)
    v, _ = _packed(lk, 1, 64, dtype, g)
    seqused_k = None if used is None else torch.tensor(used, dtype=torch.int32)
    out = ffpa_attn_func_varlen(q, k, v, cu_q, cu_k, max(lq), max(lk), window, seqused_k)
    assert last_kernel(with_reason=True) == (AUTO[arch], None)
    dout = torch.randn(out.shape, generator=g).to(dtype)
    out.backward(dout)
    refs = []
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    for i in range(len(lq)):
        k_end = int(cu_k[i + 1]) if used is None else int(cu_k[i]) + used[i]
        sq, sk = slice(int(cu_q[i]), int(cu_q[i + 1])), slice(int(cu_k[i]), k_end)
        one = [t[s].transpose(0, 1)[None] for t, s in zip(leaves, (sq, sk, sk))]
        refs.append(reference(*one, top_left=False, window=window)[0].transpose(0, 1))
    ref = torch.cat(refs)
    assert_out_close(out.detach(), ref.detach(), dtype)
    ref.backward(dout.double())
    for name, got, want in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), (t.grad for t in leaves)):
        assert_grads_close(got, want, dtype, name)


def ffpa_attn_func_varlen(q, k, v, cu_q, cu_k, max_q, max_k, window, seqused_k):
    from ffpa_attn import ffpa_attn_varlen_func

    return ffpa_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, causal=True, window_size=window,
                                 enable_gqa=True, seqused_k=seqused_k, strict=True, backward="ffpa")


@pytest.fixture
def reload_device(monkeypatch):
    """Reload ffpa_attn.cuda under another FFPA_DEVICE (or without _C_emulated); the
    emulated device is put back afterwards."""
    saved = sys.modules.get("ffpa_attn._C_emulated")
    blockers = []

    class _Absent:
        def find_spec(self, name, path=None, target=None):
            if name == "ffpa_attn._C_emulated":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    def put_back():
        while blockers:
            sys.meta_path.remove(blockers.pop())
        if saved is not None:
            sys.modules["ffpa_attn._C_emulated"] = saved

    def reload(value, without_extension=False):
        put_back()
        if value is None:
            monkeypatch.delenv("FFPA_DEVICE", raising=False)
        else:
            monkeypatch.setenv("FFPA_DEVICE", value)
        if without_extension:
            sys.modules.pop("ffpa_attn._C_emulated", None)
            blockers.append(_Absent())
            sys.meta_path.insert(0, blockers[-1])
        importlib.reload(ffpa_attn.cuda)
        ffpa_attn.torch_ops._clear_caches()

    yield reload
    put_back()
    os.environ["FFPA_DEVICE"] = "emulated"
    importlib.reload(ffpa_attn.cuda)
    ffpa_attn.torch_ops._clear_caches()
    assert ffpa_attn.device.emulated()


def test_never_by_accident(reload_device):
    """Without FFPA_DEVICE CPU tensors run torch's CPU attention; a misspelt device or a
    missing _C_emulated is an error naming the fix, never that quiet CPU run."""
    q = torch.randn(1, 1, 16, 64).half()
    reload_device(None)
    assert not ffpa_attn.device.emulated()
    ffpa_attn_func(q, q, q)
    assert last_kernel() == "torch_math"
    reload_device("emulate")
    with pytest.raises(DeviceError, match="FFPA_DEVICE='emulate' names no device: set FFPA_DEVICE=emulated"):
        ffpa_attn_func(q, q, q)
    reload_device("emulated", without_extension=True)
    with pytest.raises(ExtensionNotAvailableError, match=r"_C_emulated does not import .*<build tree>/python on "
                                                         "PYTHONPATH"):
        ffpa_attn_func(q, q, q)
    reload_device("emulated")
    with pytest.raises(DeviceError, match=r"move them with \.cpu\(\), or unset FFPA_DEVICE"):
        ffpa_attn.device.device_type(types.SimpleNamespace(device=torch.device("cuda", 0)))


# --- transformers' attn_implementation="ffpa" ----------------------------------------------------


def _gemma4_head_dims():
    """Gemma 4's (sliding, global) head dims (256, 512) where the emulated build has them (a
    ci tree), else its smallest and largest (a dev tree: 64 and 128)."""
    dims = ffpa_attn.cuda.COMPILED_HEAD_DIMS
    return (256, 512) if {256, 512} <= set(dims) else (min(dims), max(dims))


def _gemma4(implementation, dtype, window=4):
    import transformers

    sliding, full = _gemma4_head_dims()
    config = transformers.Gemma4TextConfig(
        vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=sliding, global_head_dim=full, sliding_window=window,
        layer_types=["sliding_attention", "full_attention"], max_position_embeddings=64,
        vocab_size_per_layer_input=96, hidden_size_per_layer_input=16)
    torch.manual_seed(0)
    model = transformers.Gemma4ForCausalLM(config).to(dtype)
    model.set_attn_implementation(implementation)
    return model.eval()


def _gemma4_batch():
    # Two rows of 9 tokens, one padded on the right and one on the left.
    ids = torch.randint(3, 96, (2, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[0, -2:] = 0
    mask[1, :3] = 0
    return ids, mask


def _train_step(model, ids, mask):
    """Logits on the real tokens and the gradients of one step (float32 copies)."""
    logits = model(input_ids=ids, attention_mask=mask).logits
    valid = logits[mask.bool()]
    valid.float().logsumexp(-1).mean().backward()
    return valid.detach().float(), {n: p.grad.float() for n, p in model.named_parameters() if p.grad is not None}


@pytest.fixture(scope="module")
def gemma4_references():
    ids, mask = _gemma4_batch()
    return _train_step(_gemma4("sdpa", torch.float32), ids, mask), _train_step(_gemma4("sdpa", torch.bfloat16),
                                                                                 ids, mask)


def _within_sdpas_error(got, exact, sdpa):
    """got (bf16 through our kernels) is as close to the float32 SDPA model as the bf16
    SDPA model is: at most twice its error (max for logits, relative L1 for gradients)."""
    if isinstance(got, dict):
        return got.keys() == exact.keys() and all(
            float((got[n] - exact[n]).abs().sum()) <= 2 * float((sdpa[n] - exact[n]).abs().sum()) + 1e-6 for n in exact)
    return float((got - exact).abs().max()) <= 2 * float((sdpa - exact).abs().max()) + 1e-3


@pytest.mark.parametrize("emulated_arch", ["89", "90", "120f"])
def test_gemma4_shaped_model_matches_sdpa(monkeypatch, gemma4_references, emulated_arch):
    """A Gemma-4-shaped model (sliding and global layers at two head dims, a window, GQA
    2:1, a batch padded left and right) with attn_implementation="ffpa" in bf16: every
    attention call ran our forward and backward kernels, and its logits and one training
    step's gradients are as close to the float32 SDPA model as bf16 SDPA's are."""
    import ffpa_attn.integrations.transformers as ffpa_hf

    monkeypatch.setenv("FFPA_EMULATED_ARCH", emulated_arch)
    ext = ffpa_attn.cuda.extension()
    kernels, backwards = [], []
    note = routing._note_kernel
    monkeypatch.setattr(routing, "_note_kernel", lambda k, r: kernels.append((k, r)) or note(k, r))
    backward = ext.backward
    monkeypatch.setattr(ext, "backward", lambda *a, **kw: backwards.append(1) or backward(*a, **kw))
    (exact_logits, exact_grads), (sdpa_logits, sdpa_grads) = gemma4_references
    ids, mask = _gemma4_batch()
    logits, grads = _train_step(_gemma4(ffpa_hf.NAME, torch.bfloat16), ids, mask)
    assert kernels == [(AUTO[emulated_arch], None)] * 2 and len(backwards) == 2
    torch.testing.assert_close(logits, sdpa_logits, atol=TOL["bf16"]["atol"], rtol=TOL["bf16"]["rtol"])
    assert _within_sdpas_error(logits, exact_logits, sdpa_logits)
    assert _within_sdpas_error(grads, exact_grads, sdpa_grads)


def test_the_model_comparison_discriminates(monkeypatch, gemma4_references):
    """A window of 8 instead of 4 in the sliding layers fails the comparison."""
    import ffpa_attn.integrations.transformers as ffpa_hf

    monkeypatch.setenv("FFPA_EMULATED_ARCH", "90")
    (exact_logits, _), (sdpa_logits, _) = gemma4_references
    ids, mask = _gemma4_batch()
    logits, _ = _train_step(_gemma4(ffpa_hf.NAME, torch.bfloat16, window=8), ids, mask)
    assert last_kernel() == "mma"
    assert not _within_sdpas_error(logits, exact_logits, sdpa_logits)


def _small_model(name, implementation, dtype):
    """A Llama at the tree's largest head dim, a Qwen2 with a sliding window of 4 on its
    first layer, each GQA 2:1."""
    import transformers

    d = max(ffpa_attn.cuda.COMPILED_HEAD_DIMS)
    common = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=d, max_position_embeddings=64)
    if name == "llama":
        config, cls = transformers.LlamaConfig(**common), transformers.LlamaForCausalLM
    else:
        config = transformers.Qwen2Config(**common, use_sliding_window=True, sliding_window=4, max_window_layers=0,
                                          layer_types=["sliding_attention", "full_attention"])
        cls = transformers.Qwen2ForCausalLM
    torch.manual_seed(0)
    model = cls(config).to(dtype)
    model.set_attn_implementation(implementation)
    return model.eval()


@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_llama_and_qwen2_match_sdpa(monkeypatch, name):
    import ffpa_attn.integrations.transformers as ffpa_hf

    monkeypatch.setenv("FFPA_EMULATED_ARCH", "89")
    kernels = []
    note = routing._note_kernel
    monkeypatch.setattr(routing, "_note_kernel", lambda k, r: kernels.append((k, r)) or note(k, r))
    ids, mask = _gemma4_batch()
    exact_logits, exact_grads = _train_step(_small_model(name, "sdpa", torch.float32), ids, mask)
    sdpa_logits, sdpa_grads = _train_step(_small_model(name, "sdpa", torch.bfloat16), ids, mask)
    kernels.clear()
    logits, grads = _train_step(_small_model(name, ffpa_hf.NAME, torch.bfloat16), ids, mask)
    assert kernels == [("mma", None)] * 2
    torch.testing.assert_close(logits, sdpa_logits, atol=TOL["bf16"]["atol"], rtol=TOL["bf16"]["rtol"])
    assert _within_sdpas_error(logits, exact_logits, sdpa_logits)
    assert _within_sdpas_error(grads, exact_grads, sdpa_grads)


@pytest.mark.parametrize(("name", "emulated_arch", "dtype"), [
    ("llama", "89", torch.float16), ("gemma4", "90", torch.bfloat16), ("qwen2", "120f", torch.bfloat16)])
def test_generate_gives_sdpas_tokens(monkeypatch, name, emulated_arch, dtype):
    """Greedy generate (a prompt batch of two, one left-padded; five new tokens) with
    attn_implementation="ffpa" gives the tokens the same model gives with "sdpa": every
    attention call, prefill and each one-token decode step with its cache, ran our kernel."""
    import ffpa_attn.integrations.transformers as ffpa_hf

    monkeypatch.setenv("FFPA_EMULATED_ARCH", emulated_arch)
    kernels = []
    note = routing._note_kernel
    monkeypatch.setattr(routing, "_note_kernel", lambda k, r: kernels.append((k, r)) or note(k, r))
    ids, mask = _gemma4_batch()
    mask[0] = 1  # generate continues after the prompt's last slot: padding goes on the left

    def make(implementation):
        if name == "gemma4":
            return _gemma4(implementation, dtype)
        return _small_model(name, implementation, dtype)

    def generate(model):
        return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=5, do_sample=False, pad_token_id=0,
                              return_dict_in_generate=True, output_scores=True)

    want = generate(make("sdpa"))
    kernels.clear()
    got = generate(make(ffpa_hf.NAME))
    assert kernels == [(AUTO[emulated_arch], None)] * 2 * 5  # two layers, five forward passes
    assert got.sequences.shape == want.sequences.shape == (2, 14)
    # A random tiny model in 16 bits has near-ties among its logits: two correct kernels may
    # pick different tokens where SDPA's own top two are within the dtype's tolerance. Each
    # row gives SDPA's tokens up to its first difference, and there SDPA's scores of the two
    # tokens must be such a tie (a wrong kernel's pick is far off); after it the rows diverge.
    tol = TOL["bf16" if dtype == torch.bfloat16 else "fp16"]
    new_got, new_want = got.sequences[:, 9:], want.sequences[:, 9:]
    for row in range(2):
        differ = (new_got[row] != new_want[row]).nonzero()
        if len(differ) == 0:
            continue
        step = int(differ[0])
        scores = want.scores[step][row].float()
        top, mine = scores[new_want[row, step]], scores[new_got[row, step]]
        assert top - mine <= tol["atol"] + tol["rtol"] * abs(top), (
            f"row {row}, new token {step}: ours {int(new_got[row, step])} scores {float(mine):.4f} in SDPA's logits, "
            f"SDPA's {int(new_want[row, step])} {float(top):.4f}: not a tie", new_got.tolist(), new_want.tolist())


def test_tma_forward_and_its_backward_on_90(monkeypatch):
    """impl='tma' on 90 (the first-use build's kernel set: the TMA-fed forward, the
    backward's TMA feed) with GQA, Nq != Nkv bottom-right and a window, bf16, against float64."""
    monkeypatch.setenv("FFPA_EMULATED_ARCH", "90")
    g = torch.Generator().manual_seed(47)
    q = torch.randn(1, 4, 40, 64, generator=g).bfloat16().requires_grad_()
    k, v = (torch.randn(1, 2, 56, 64, generator=g).bfloat16().requires_grad_() for _ in range(2))
    dout = torch.randn(1, 4, 40, 64, generator=g).bfloat16()
    out = ffpa_attn_func(q, k, v, attn_mask=causal_lower_right(40, 56), enable_gqa=True, window_size=(16, 0),
                         impl="tma", strict=True, backward="ffpa")
    assert last_kernel(with_reason=True) == ("tma", None)
    out.backward(dout)
    qr, kr, vr = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = reference(qr, kr, vr, top_left=False, window=(16, 0))
    assert_out_close(out.detach(), ref.detach(), torch.bfloat16)
    ref.backward(dout.double())
    for name, got, want in (("dq", q.grad, qr.grad), ("dk", k.grad, kr.grad), ("dv", v.grad, vr.grad)):
        assert_grads_close(got, want, torch.bfloat16, name)
