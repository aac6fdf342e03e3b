"""What the drop-in says when it does not take a call: one clear message, naming the fix,
pointing at the user's frame (also under torch.compile); and what nn.MultiheadAttention
hands it (docs/install.md)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from ffpa_attn import SDPAFallbackWarning, UnsupportedArrayTypeError, ffpa_attn_func, routing  # noqa: E402

pytestmark = pytest.mark.torch

INSTALL_MD = Path(__file__).resolve().parents[2] / "docs" / "install.md"


@pytest.fixture(autouse=True)
def _fresh_routing():
    routing._reset_for_tests()
    yield
    routing._reset_for_tests()


def test_gqa_without_enable_gqa_names_enable_gqa():
    q, kv = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError):
            ffpa_attn_func(q, kv, kv)  # SDPA itself refuses 4 heads over 2 without enable_gqa
    (warning,) = [w for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert "pass enable_gqa=True" in str(warning.message)
    assert "Hq a multiple of Hkv" not in str(warning.message)
    # With it, the call runs (no fallback) and equals SDPA's.
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)
        out = ffpa_attn_func(q, kv, kv, enable_gqa=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True))


@pytest.mark.parametrize("mask", ["causal", 1, 0.5, [[True]]])
def test_a_mask_that_is_not_a_tensor_is_one_clear_error(mask):
    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(TypeError):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask)  # SDPA's own refusal
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning before the error
        with pytest.raises(UnsupportedArrayTypeError, match="is_causal=True") as info:
            ffpa_attn_func(q, q, q, attn_mask=mask)
    assert isinstance(info.value, TypeError) and "attn_mask must be a tensor" in str(info.value)


def test_fallback_warning_points_at_the_user_under_torch_compile():
    q = torch.randn(1, 2, 8, 16)
    compiled = torch.compile(lambda t: ffpa_attn_func(t, t, t, dropout_p=0.5))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled(q)
    ours = [w for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert ours and ours[0].filename == __file__, [(w.filename, w.lineno) for w in ours]


def test_fallback_warning_from_a_torch_module_points_at_the_user():
    # A model's call (inside torch.nn) reaches ffpa_attn_func through the replaced SDPA.
    layer = torch.nn.TransformerEncoderLayer(32, 4, batch_first=True, dropout=0.5)
    layer.train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(F, "scaled_dot_product_attention", ffpa_attn_func)
            layer(torch.randn(2, 5, 32))
    ours = [w for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert ours and ours[0].filename == __file__


def test_multihead_attention_reaches_sdpa_only_without_weights(monkeypatch):
    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return ffpa_attn_func(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    # (Training mode: in eval under no_grad MHA may take torch's fused fast path, which
    # calls neither.)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    x = torch.randn(2, 7, 32)
    mha(x, x, x)  # need_weights=True by default: MHA computes the weights itself
    assert calls == []
    mha(x, x, x, need_weights=False)
    assert calls == [1]
    # docs/install.md says so where it shows the replacement.
    text = INSTALL_MD.read_text(encoding="utf-8")
    assert "nn.MultiheadAttention included" not in text
    assert "need_weights=False" in text
