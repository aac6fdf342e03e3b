"""ffpa_attn_func as a replacement for torch.nn.functional.scaled_dot_product_attention.

SDPA's signature, its semantics on CPU torch (masks, GQA, causal alignment, autocast),
every fallback reason with its warning (once), strict mode and FFPA_STRICT, and whole
models run with F.scaled_dot_product_attention replaced. The CUDA-only reasons are
reached on the CPU by standing CPU tensors in for CUDA ones (torch_ops.tensor_device_type)
with a stand-in extension (conftest); the device check runs the real ones on a GPU
(test_torch_gpu.py).
"""

from __future__ import annotations

import ast
import inspect
import re
import warnings

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch.nn.attention.bias import causal_lower_right, causal_upper_left  # noqa: E402

import ffpa_attn  # noqa: E402
from ffpa_attn import (  # noqa: E402
    FALLBACK_REASONS,
    FFPADeprecationWarning,
    SDPAFallbackWarning,
    UnsupportedArrayTypeError,
    UnsupportedFeatureError,
    UnsupportedImplError,
    ffpa_attn_func,
    jit,
    last_kernel,
    routing,
    torch_ops,
)

pytestmark = pytest.mark.torch

SDPA = F.scaled_dot_product_attention


@pytest.fixture(autouse=True)
def _fresh_routing(monkeypatch):
    monkeypatch.delenv("FFPA_STRICT", raising=False)
    routing._reset_for_tests()
    torch_ops._clear_caches()
    yield
    routing._reset_for_tests()
    torch_ops._clear_caches()


def qkv(b=1, hq=4, hkv=4, nq=8, nkv=8, d=16, dtype=torch.float32, seed=0, dv=None):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, nq, d, generator=gen).to(dtype),
            torch.randn(b, hkv, nkv, d, generator=gen).to(dtype),
            torch.randn(b, hkv, nkv, dv or d, generator=gen).to(dtype))


# --- the signature ------------------------------------------------------------------------


def _documented_sdpa_signature():
    """SDPA's signature as its docstring states it (the builtin has no inspectable one)."""
    doc = SDPA.__doc__
    head = doc[: doc.index(") -> Tensor") + 1]
    fn = ast.parse(f"def {head.strip()}: pass").body[0]
    names = [a.arg for a in fn.args.args]
    defaults = [ast.literal_eval(d) for d in fn.args.defaults]
    return names, dict(zip(names[len(names) - len(defaults):], defaults)), [a.arg for a in fn.args.kwonlyargs]


def test_signature_matches_sdpa():
    names, defaults, kwonly = _documented_sdpa_signature()
    assert names == ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
    assert kwonly == []
    params = list(inspect.signature(ffpa_attn_func).parameters.values())
    ours = params[: len(names)]
    assert [p.name for p in ours] == names
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in ours)
    for p in ours:
        if p.name in defaults:
            assert p.default == defaults[p.name] and type(p.default) is type(defaults[p.name]), p.name
        else:
            assert p.default is inspect.Parameter.empty, p.name
    # Everything of ours comes after, keyword-only; no *args/**kwargs to swallow typos.
    rest = params[len(names):]
    assert [p.name for p in rest] == ["impl", "accum", "return_lse", "strict", "backward", "causal", "window_size"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in rest)


def test_signature_agrees_with_the_aten_schema():
    """torch's op schema: the same names, order and defaults (it makes scale and
    enable_gqa keyword-only, which the documented signature does not; ours takes both)."""
    schema = torch.ops.aten.scaled_dot_product_attention.default._schema
    ours = inspect.signature(ffpa_attn_func).parameters
    assert [a.name for a in schema.arguments] == list(ours)[:8]
    for arg in schema.arguments:
        if arg.has_default_value():
            want = arg.default_value
            assert ours[arg.name].default == want, arg.name


@pytest.mark.parametrize("call", [
    lambda f, q, k, v, m: f(q, k, v),
    lambda f, q, k, v, m: f(q, k, v, None, 0.0, True),
    lambda f, q, k, v, m: f(q, k, v, m),
    lambda f, q, k, v, m: f(q, k, v, attn_mask=m, dropout_p=0.0),
    lambda f, q, k, v, m: f(query=q, key=k, value=v, is_causal=True, scale=0.3),
    lambda f, q, k, v, m: f(q, k, v, is_causal=True, enable_gqa=True),
])
def test_sdpa_call_forms_give_sdpas_result(call):
    q, k, v = qkv(hq=4, hkv=4, nq=6, nkv=9)
    mask = torch.rand(6, 9, generator=torch.Generator().manual_seed(1)) > 0.3
    mask[:, 0] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SDPAFallbackWarning)
        torch.testing.assert_close(call(ffpa_attn_func, q, k, v, mask), call(SDPA, q, k, v, mask))


# --- SDPA's semantics on the kernel path ------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("hq,hkv,nq,nkv", [(4, 4, 8, 8), (4, 2, 5, 11), (6, 3, 11, 5), (4, 1, 7, 7)])
def test_kernel_path_matches_sdpa(dtype, is_causal, hq, hkv, nq, nkv):
    q, k, v = qkv(hq=hq, hkv=hkv, nq=nq, nkv=nkv, dtype=dtype, seed=nq)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback: the op takes all of these
        out = ffpa_attn_func(q, k, v, is_causal=is_causal, scale=0.4, enable_gqa=True)
    assert last_kernel(with_reason=True) == ("torch_math", None)
    want = SDPA(q, k, v, is_causal=is_causal, scale=0.4, enable_gqa=True)
    tol = {torch.bfloat16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-12}[dtype]
    assert out.dtype == dtype
    torch.testing.assert_close(out, want, rtol=tol, atol=tol)


def test_one_kv_head_is_broadcast_without_enable_gqa_as_sdpa_does():
    q, k, v = qkv(hq=4, hkv=1)
    out = ffpa_attn_func(q, k, v)
    assert last_kernel() == "torch_math"
    torch.testing.assert_close(out, SDPA(q, k, v))


def test_grouped_heads_without_enable_gqa_fail_as_in_sdpa():
    q, k, v = qkv(hq=4, hkv=2)
    with pytest.raises(RuntimeError):
        SDPA(q, k, v)
    with pytest.raises(RuntimeError), pytest.warns(SDPAFallbackWarning, match="without enable_gqa=True"):
        ffpa_attn_func(q, k, v)


@pytest.mark.parametrize("bias", [causal_upper_left(5, 9), causal_lower_right(5, 9), causal_lower_right(7, 7)],
                         ids=["upper-left", "lower-right", "square"])
def test_causal_biases_take_the_kernel_path(bias):
    q, k, v = qkv(nq=bias.seq_len_q, nkv=bias.seq_len_kv)
    out = ffpa_attn_func(q, k, v, attn_mask=bias)
    assert last_kernel() == "torch_math"
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=bias))


def test_autocast_lowers_fp32_inputs_as_sdpa_does():
    q, k, v = qkv()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ffpa_attn_func(q, k, v, is_causal=True)
        want = SDPA(q, k, v, is_causal=True)
    assert out.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(out, want, rtol=2e-2, atol=2e-2)


def test_deprecated_causal_keyword_keeps_bottom_right_and_gqa():
    q, k, v = qkv(hq=4, hkv=2, nq=5, nkv=9)
    deprecated = r"causal=\.\.\.\) is deprecated: use is_causal=.*causal_lower_right"
    with pytest.warns(FFPADeprecationWarning, match=deprecated):
        out = ffpa_attn_func(q, k, v, causal=True)
    torch.testing.assert_close(out, SDPA(q, k, v, attn_mask=causal_lower_right(5, 9), enable_gqa=True))


def test_argument_errors_name_the_fix():
    q, k, v = qkv()
    with pytest.raises(UnsupportedArrayTypeError, match="pass is_causal=True"):
        ffpa_attn_func(q, k, v, True)  # the earlier positional causal
    with pytest.raises(UnsupportedFeatureError, match="SDPA refuses them too"):
        ffpa_attn_func(q, k, v, torch.ones(8, 8, dtype=torch.bool), is_causal=True)
    with pytest.raises(UnsupportedImplError, match="host path .* always accumulates in fp32"):
        ffpa_attn_func(q, k, v, accum="fp16")
    with pytest.raises(UnsupportedImplError, match="backward must be one of"):
        ffpa_attn_func(q, k, v, backward="flash")
    with pytest.raises(TypeError):
        ffpa_attn_func(q, k, v, unknown=1)  # no **kwargs swallowing typos
    # impl is a kernel choice, ignored on the host.
    torch.testing.assert_close(ffpa_attn_func(q, k, v, impl="tma"), SDPA(q, k, v))


# --- every fallback reason --------------------------------------------------------------------


@pytest.fixture
def as_cuda(monkeypatch):
    """CPU tensors stand in for CUDA ones: the CUDA checks run, SDPA and the op run on the CPU."""
    monkeypatch.setattr(torch_ops, "tensor_device_type", lambda t: "cuda")
    monkeypatch.setattr(torch_ops, "_capability", lambda index: (8, 9))


def _cpu_case(reason):
    """(q, k, v, kwargs) that hit `reason` on the CPU."""
    if reason == "attn_mask":
        q, k, v = qkv()
        return q, k, v, {"attn_mask": torch.randn(8, 8)}
    if reason == "dropout":
        return (*qkv(), {"dropout_p": 0.25})
    if reason == "shape":
        return (*qkv(dv=24), {})
    raise AssertionError(reason)


CUDA_REASONS = {
    # reason: (extension setup, capability, tensor kwargs)
    "pure_wheel": ("absent", (8, 9), {"dtype": torch.float16, "d": 64}),
    "jit": ("jit-missing", (9, 0), {"dtype": torch.float16, "d": 64}),
    "extension": ("broken", (8, 9), {"dtype": torch.float16, "d": 64}),
    "device": ("no-device", (8, 9), {"dtype": torch.float16, "d": 64}),
    "arch": ("release", (9, 0), {"dtype": torch.float16, "d": 64}),
    "dtype": ("release", (8, 9), {"dtype": torch.float32, "d": 64}),
    "head_dim": ("release", (8, 9), {"dtype": torch.float16, "d": 96}),
    "layout": ("release", (8, 9), {"dtype": torch.float16, "d": 64}),
}


@pytest.fixture
def cuda_case(install_extension, as_cuda, monkeypatch):
    def make(reason):
        setup, capability, kwargs = CUDA_REASONS[reason]
        if setup == "absent":
            install_extension.absent()
        elif setup == "broken":
            install_extension(broken="undefined symbol: ffpa_forward")
        elif setup == "jit-missing":
            # The pure wheel on a GPU it could build for, on a machine without nvcc.
            install_extension.absent()
            monkeypatch.setenv("FFPA_JIT", "1")
            monkeypatch.setattr(jit, "_FAILED", {})
            monkeypatch.setattr(jit, "find_toolchain", lambda *a, **k: jit.Toolchain(
                missing=(("nvcc (a CUDA 13 toolkit)", 'pip install "ffpa-attn[jit]"'),)))
        else:
            install_extension(devices=0 if setup == "no-device" else 1)
        monkeypatch.setattr(torch_ops, "_capability", lambda index: capability)
        q, k, v = qkv(dtype=kwargs["dtype"], d=kwargs["d"])
        if reason == "layout":
            q = torch.randn(1, 4, 8, 128).to(torch.float16)[..., ::2]
        return q, k, v, {}
    return make


ALL_REASONS = ["attn_mask", "dropout", "shape", *CUDA_REASONS]


def test_every_reason_is_covered_here():
    # "window" and "varlen" are the masks' reasons: test_masks.py runs them (warning, strict).
    assert set(ALL_REASONS) | {"device_type", "window", "varlen"} == set(FALLBACK_REASONS)


@pytest.fixture
def case(request, cuda_case):
    reason = request.param
    return reason, (cuda_case(reason) if reason in CUDA_REASONS else _cpu_case(reason))


@pytest.mark.parametrize("case", ALL_REASONS, indirect=True)
def test_fallback_runs_sdpa_and_warns_once(case):
    reason, (q, k, v, kwargs) = case
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(0)
        out = ffpa_attn_func(q, k, v, **kwargs)
        torch.manual_seed(0)
        again = ffpa_attn_func(q, k, v, **kwargs)
    torch.manual_seed(0)
    want = SDPA(q, k, v, **kwargs)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(again, want)
    assert last_kernel(with_reason=True) == ("sdpa", reason)
    ours = [w for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    message = str(ours[0].message)
    assert f"(reason {reason!r})" in message and "Fix: " in message and "strict=True or FFPA_STRICT=1" in message
    assert ours[0].filename == __file__  # it points at the caller
    fix = FALLBACK_REASONS[reason][1]
    if reason == "pure_wheel":
        assert re.search(r"pip install ffpa-attn==\S+\+\S*cu\d+ --index-url", message) and "/whl/" in message
    elif reason == "extension":
        assert "undefined symbol: ffpa_forward" in message and "reinstall" in message
    elif reason == "jit":
        assert "sm_90" in message and "nvcc (a CUDA 13 toolkit)" in message
        assert 'pip install "ffpa-attn[jit]"' in message and "FFPA_JIT=0" in message
    elif reason == "shape":
        # The case is a value head dim unlike the query's (MLA), whose fix is its own.
        assert torch_ops.V_HEAD_DIM_FIX in message and fix not in message
    else:
        assert fix in message


@pytest.mark.parametrize("case", ALL_REASONS, indirect=True)
def test_strict_raises_the_reasons_error(case, monkeypatch):
    reason, (q, k, v, kwargs) = case
    cls = FALLBACK_REASONS[reason][0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)  # strict never falls back
        with pytest.raises(cls) as info:
            ffpa_attn_func(q, k, v, strict=True, **kwargs)
        assert isinstance(info.value, ffpa_attn.FFPAError)
        monkeypatch.setenv("FFPA_STRICT", "1")
        with pytest.raises(cls):
            ffpa_attn_func(q, k, v, **kwargs)
        with pytest.raises(cls, match="return_lse=True needs them"):
            ffpa_attn_func(q, k, v, strict=False, return_lse=True, **kwargs)
    # strict=False beats the environment.
    with pytest.warns(SDPAFallbackWarning):
        ffpa_attn_func(q, k, v, strict=False, **kwargs)


def test_device_type_reason(monkeypatch):
    monkeypatch.setattr(torch_ops, "tensor_device_type", lambda t: "mps")
    q, k, v = qkv()
    with pytest.warns(SDPAFallbackWarning, match="'device_type'.*tensors on mps"):
        torch.testing.assert_close(ffpa_attn_func(q, k, v), SDPA(q, k, v))
    with pytest.raises(ffpa_attn.DeviceError):
        ffpa_attn_func(q, k, v, strict=True)


@pytest.mark.parametrize("make", [
    lambda: (*qkv(), {}),  # 3-D below
    lambda: (torch.randn(2, 4, 8, 16), torch.randn(1, 4, 8, 16), torch.randn(1, 4, 8, 16), {}),  # batch broadcast
    lambda: (torch.randn(1, 1, 8, 16), torch.randn(1, 4, 8, 16), torch.randn(1, 4, 8, 16), {}),  # q heads broadcast
    lambda: (torch.randn(1, 4, 0, 16), torch.randn(1, 4, 8, 16), torch.randn(1, 4, 8, 16), {}),  # empty
])
def test_shapes_sdpa_takes_and_the_kernels_do_not(make):
    q, k, v, kwargs = make()
    if q.shape[2] == 8 and q.shape[1] == 4 and q.shape[0] == 1:
        q, k, v = q[0], k[0], v[0]  # 3-D
    with pytest.warns(SDPAFallbackWarning, match="'shape'"):
        out = ffpa_attn_func(q, k, v, **kwargs)
    torch.testing.assert_close(out, SDPA(q, k, v, **kwargs))


def test_each_reason_warns_once_and_others_still_warn():
    q, k, v = qkv()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            ffpa_attn_func(q, k, v, attn_mask=torch.zeros(8, 8))
            ffpa_attn_func(q, k, v, dropout_p=0.1)
            ffpa_attn_func(q, k, v)  # the kernel path: no warning
    reasons = [str(w.message).split("(reason ")[1].split(")")[0] for w in caught
               if issubclass(w.category, SDPAFallbackWarning)]
    assert reasons == ["'attn_mask'", "'dropout'"]


def test_explicit_kernel_choices_are_strict():
    q, k, v = qkv()
    with pytest.raises(UnsupportedFeatureError, match="attn_mask"):
        ffpa_attn_func(q, k, v, attn_mask=torch.zeros(8, 8), impl="mma")


def test_the_op_path_under_stand_in_cuda(install_extension, as_cuda):
    """No reason applies: the op is called (on the CPU it computes with torch math)."""
    install_extension()
    q, k, v = qkv(dtype=torch.float16, d=64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)
        out = ffpa_attn_func(q, k, v, is_causal=True)
    assert last_kernel() == "torch_math"
    torch.testing.assert_close(out, SDPA(q, k, v, is_causal=True), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("value,strict", [("1", True), ("true", True), ("YES", True), ("on", True), ("0", False),
                                          ("", False), ("no", False)])
def test_strict_environment_switch(value, strict, monkeypatch):
    monkeypatch.setenv("FFPA_STRICT", value)
    assert routing.strict_enabled(None) is strict
    assert routing.strict_enabled(False) is False and routing.strict_enabled(True) is True


# --- models written for SDPA, with SDPA replaced ------------------------------------------------


@pytest.fixture
def replaced(monkeypatch):
    monkeypatch.setattr(F, "scaled_dot_product_attention", ffpa_attn_func)


def _parameters(model):
    return list(model.parameters()) if isinstance(model, torch.nn.Module) else \
        [p for cell in model.__closure__ or () for p in _module_parameters(cell.cell_contents)]


def _module_parameters(obj):
    return list(obj.parameters()) if isinstance(obj, torch.nn.Module) else []


def _run(model, x, **kwargs):
    torch.manual_seed(0)
    out = model(x, **kwargs)
    out = out[0] if isinstance(out, tuple) else out
    out.float().square().mean().backward()
    params = _parameters(model)
    grads = [p.grad.clone() for p in params if p.grad is not None]
    for p in params:
        p.grad = None
    return out.detach(), grads


def _compare_with_sdpa(model, x, monkeypatch, **kwargs):
    want, want_grads = _run(model, x, **kwargs)
    monkeypatch.setattr(F, "scaled_dot_product_attention", ffpa_attn_func)
    try:
        got, grads = _run(model, x, **kwargs)
    finally:
        monkeypatch.setattr(F, "scaled_dot_product_attention", SDPA)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert len(grads) == len(want_grads)
    for a, b in zip(grads, want_grads):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-5)


def _fallback_reasons(caught):
    return [str(w.message).split("(reason ")[1].split(")")[0].strip("'") for w in caught
            if issubclass(w.category, SDPAFallbackWarning)]


@pytest.mark.parametrize("training", [False, True])
def test_transformer_encoder_layer(training, monkeypatch):
    """nn.TransformerEncoderLayer (nn.MultiheadAttention calls F.scaled_dot_product_attention)."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.1, batch_first=True)
    layer.train(training)
    x = torch.randn(2, 10, 32)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _compare_with_sdpa(layer, x, monkeypatch, src_mask=mask, is_causal=True)
    # With is_causal the layer hands SDPA is_causal=True and no mask; training adds dropout.
    assert _fallback_reasons(caught) == (["dropout"] if training else [])


def test_multihead_attention_with_and_without_a_mask(monkeypatch):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    x = torch.randn(2, 7, 32)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[1, 5:] = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _compare_with_sdpa(lambda t: mha(t, t, t, need_weights=False), x, monkeypatch)
        kernel = last_kernel()
        _compare_with_sdpa(lambda t: mha(t, t, t, key_padding_mask=padding, need_weights=False), x, monkeypatch)
    assert kernel == "torch_math"
    assert _fallback_reasons(caught) == ["attn_mask"]  # the padding mask reaches SDPA as attn_mask


class GPTBlock(torch.nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                             dropout_p=0.1 if self.training else 0.0)
        return self.proj(o.transpose(1, 2).reshape(b, n, c))


@pytest.mark.parametrize("training", [False, True])
def test_a_model_written_for_sdpa(training, monkeypatch):
    torch.manual_seed(0)
    model = GPTBlock().train(training)
    x = torch.randn(2, 12, 32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _compare_with_sdpa(model, x, monkeypatch)
    fallbacks = [w for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    if training:
        assert len(fallbacks) == 1 and "'dropout'" in str(fallbacks[0].message)
        assert last_kernel(with_reason=True) == ("sdpa", "dropout")
    else:
        assert fallbacks == [] and last_kernel() == "torch_math"


def test_fallback_with_a_causal_bias_does_not_recurse(replaced):
    """SDPA's causal bias dispatches on F.scaled_dot_product_attention, which is
    ffpa_attn_func here: the fallback hands the builtin a plain mask instead."""
    q, k, v = qkv(nq=5, nkv=9)
    bias = causal_lower_right(5, 9)
    torch.manual_seed(0)
    with pytest.warns(SDPAFallbackWarning, match="'dropout'"):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=0.3)
    torch.manual_seed(0)
    want = SDPA(q, k, v, attn_mask=torch.ones(5, 9, dtype=torch.bool).tril(diagonal=4), dropout_p=0.3)
    torch.testing.assert_close(out, want)


@pytest.mark.parametrize("dtype,reason", [(torch.float16, None), (torch.float32, "dtype")])
def test_compile_traces_the_cuda_routing(dtype, reason, install_extension, monkeypatch):
    """The CUDA checks (extension, device count, arch, dtype, head dim) run inside
    torch.compile's trace with no graph break: machine facts are asked once, at trace time."""
    install_extension()
    monkeypatch.setattr(torch_ops, "tensor_device_type", lambda t: "cuda")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (8, 9))
    torch._dynamo.reset()
    q, k, v = qkv(dtype=dtype, d=64)
    compiled = torch.compile(lambda q, k, v: ffpa_attn_func(q, k, v, is_causal=True), fullgraph=True,
                             backend="aot_eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(q, k, v)
        compiled(q, k, v)
    torch.testing.assert_close(out, SDPA(q, k, v, is_causal=True), rtol=2e-3, atol=2e-3)
    assert _fallback_reasons(caught) == ([reason] if reason else [])
    assert last_kernel(with_reason=True) == (("sdpa", reason) if reason else ("torch_math", None))


def test_compile_runs_the_first_use_build_step_at_trace_time(install_extension, monkeypatch):
    """The pure wheel on a GPU it could build for, under torch.compile(fullgraph=True): the
    first-use build step (here: no toolchain) runs when the call is traced, with no graph
    break, and its one 'jit' warning comes from the trace; replays ask nothing."""
    install_extension.absent()
    lookups = []

    def lookup(for_build=True):
        lookups.append(for_build)
        return jit.Toolchain(missing=(("nvcc (a CUDA 13 toolkit)", 'pip install "ffpa-attn[jit]"'),))

    monkeypatch.setenv("FFPA_JIT", "1")
    monkeypatch.setattr(jit, "_FAILED", {})
    monkeypatch.setattr(jit, "find_toolchain", lookup)
    monkeypatch.setattr(torch_ops, "tensor_device_type", lambda t: "cuda")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 0))
    torch._dynamo.reset()
    q, k, v = qkv(dtype=torch.float16, d=64)
    compiled = torch.compile(lambda q, k, v: ffpa_attn_func(q, k, v, is_causal=True), fullgraph=True,
                             backend="aot_eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(q, k, v)
        traced = len(lookups)
        compiled(q, k, v)
    torch.testing.assert_close(out, SDPA(q, k, v, is_causal=True), rtol=2e-3, atol=2e-3)
    assert _fallback_reasons(caught) == ["jit"]
    assert traced >= 1 and len(lookups) == traced  # asked while tracing, never by the replay
    assert last_kernel(with_reason=True) == ("sdpa", "jit")
