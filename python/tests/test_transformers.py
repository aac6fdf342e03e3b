"""``attn_implementation="ffpa"`` (ffpa_attn.integrations.transformers) on small Llama-,
Qwen2-, Gemma2- and Gemma3-style models built from configs (random weights, no
download), against the same model with transformers' own ``"sdpa"`` (``"eager"`` for
Gemma 2, which has no sdpa): padded batches (left and right padding) and sliding
windows, forward and backward, greedy generation with a cache; what falls back (dropout in
training, packed sequences' 4-D masks) with its one warning; what raises (softcap).

CTest's python.transformers runs it in the torch venv, which tools/torch-venv gives the
transformers of tools/requirements-transformers.txt.
"""

from __future__ import annotations

import copy
import os
import warnings

import pytest

torch = pytest.importorskip("torch")
if os.environ.get("FFPA_PYTEST_REQUIRE_TRANSFORMERS") != "1":
    pytest.importorskip("transformers")

import transformers  # noqa: E402

import ffpa_attn.integrations.transformers as ffpa_hf  # noqa: E402
from ffpa_attn import SDPAFallbackWarning, UnsupportedFeatureError, last_kernel, routing  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.transformers]

SMALL = dict(vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=64)
WINDOW = 4  # shorter than the sequences below, so the sliding layers see a real window

MODELS = {
    # name: (model class, config class, reference implementation, config extras)
    "llama": ("LlamaForCausalLM", "LlamaConfig", "sdpa", {}),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", "sdpa",
              dict(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=0,
                   layer_types=["sliding_attention", "full_attention"])),
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", "eager",
               dict(sliding_window=WINDOW, attn_logit_softcapping=None, query_pre_attn_scalar=16)),
    "gemma3": ("Gemma3ForCausalLM", "Gemma3TextConfig", "sdpa",
               dict(sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"],
                    query_pre_attn_scalar=16)),
}


@pytest.fixture(autouse=True)
def _fresh_routing():
    routing._reset_for_tests()
    yield
    routing._reset_for_tests()


def build(name, implementation, **extra):
    model_cls, config_cls, _, extras = MODELS[name]
    config = getattr(transformers, config_cls)(**SMALL, **{**extras, **extra})
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(config)
    model.set_attn_implementation(implementation)
    return model.eval()


def batch(padding_side="left"):
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 96, (3, 13), generator=gen)
    mask = torch.ones(3, 13, dtype=torch.long)
    pads = [0, 5, 9]
    for row, pad in enumerate(pads):
        if pad:
            if padding_side == "left":
                mask[row, :pad] = 0
            else:
                mask[row, -pad:] = 0
    return ids, mask


def run(model, ids, mask, **kwargs):
    out = model(input_ids=ids, attention_mask=mask, **kwargs).logits
    valid = mask.bool() if mask is not None else torch.ones(ids.shape, dtype=torch.bool)
    loss = out[valid].float().logsumexp(-1).mean()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out.detach(), grads


@pytest.mark.parametrize("padding_side", ["left", "right"])
@pytest.mark.parametrize("name", list(MODELS))
def test_padded_batch_matches_the_reference(name, padding_side):
    reference = build(name, MODELS[name][2])
    ours = build(name, ffpa_hf.NAME)
    assert ours.config._attn_implementation == "ffpa"
    ids, mask = batch(padding_side)
    calls = []
    forward = ffpa_hf.ffpa_attention_forward

    def spy(module, query, key, value, attention_mask, **kwargs):
        calls.append((None if attention_mask is None else attention_mask.dim(), kwargs.get("sliding_window")))
        return forward(module, query, key, value, attention_mask, **kwargs)

    ffpa_hf.register("ffpa-spy")
    transformers.AttentionInterface.register("ffpa-spy", spy)
    ours.set_attn_implementation("ffpa-spy")
    want, want_grads = run(reference, ids, mask)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)  # the kernels' path, never SDPA
        got, got_grads = run(ours, ids, mask)
    valid = mask.bool()
    torch.testing.assert_close(got[valid], want[valid], atol=2e-5, rtol=1e-4)
    assert want_grads.keys() == got_grads.keys()
    for key in want_grads:
        torch.testing.assert_close(got_grads[key], want_grads[key], atol=2e-5, rtol=1e-4, msg=key)
    # Every layer got the 2-D padding mask, and the sliding layers their window.
    assert calls and all(dim == 2 for dim, _ in calls)
    windows = {w for _, w in calls}
    assert windows == ({None} if name == "llama" else {None, WINDOW})
    assert last_kernel() == "torch_math"


@pytest.mark.parametrize("name", ["llama", "gemma3"])
def test_unpadded_batch_matches_the_reference(name):
    reference, ours = build(name, MODELS[name][2]), build(name, ffpa_hf.NAME)
    ids, _ = batch()
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids=ids).logits, reference(input_ids=ids).logits, atol=2e-5, rtol=1e-4)


def test_the_sliding_window_is_applied():
    # The same Gemma 3 model with a wider window gives other logits past the window: the
    # window reached the kernels (a test that dropped it would still agree with itself).
    ids, mask = batch()
    with torch.no_grad():
        narrow = build("gemma3", ffpa_hf.NAME)(input_ids=ids, attention_mask=mask).logits
        wide = build("gemma3", ffpa_hf.NAME, sliding_window=64)(input_ids=ids, attention_mask=mask).logits
    assert (narrow[0, WINDOW + 1:] - wide[0, WINDOW + 1:]).abs().max() > 1e-4


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_greedy_generation_with_a_cache_matches(name, padded):
    # Decoding: one query against the cache's keys (bottom-right), through the 2-D padding
    # mask, or with none when no row is padded.
    reference, ours = build(name, MODELS[name][2]), build(name, ffpa_hf.NAME)
    ids, mask = batch("left")
    if not padded:
        mask = torch.ones_like(mask)
    kwargs = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        want = reference.generate(input_ids=ids, attention_mask=mask, **kwargs)
        got = ours.generate(input_ids=ids, attention_mask=mask, **kwargs)
    assert torch.equal(got, want)


def test_dropout_in_training_falls_back_once():
    model = build("llama", ffpa_hf.NAME, attention_dropout=0.5)
    model.train()
    ids, mask = batch()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(input_ids=ids, attention_mask=mask).logits.sum().backward()
    ours = [w for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert len(ours) == 1 and "(reason 'dropout')" in str(ours[0].message)
    assert last_kernel(with_reason=True) == ("sdpa", "dropout")
    model.eval()  # dropout off: the kernels' path again
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)
        model(input_ids=ids, attention_mask=mask)
    assert last_kernel() == "torch_math"


def test_packed_sequences_get_sdpas_mask_and_fall_back():
    # Two sequences packed in one row, told apart by position_ids: transformers builds a
    # block-diagonal 4-D mask, which the varlen path does not read; SDPA runs it.
    reference, ours = build("llama", "sdpa"), build("llama", ffpa_hf.NAME)
    ids = torch.randint(3, 96, (1, 10), generator=torch.Generator().manual_seed(2))
    position_ids = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3, 4, 5]])
    with torch.no_grad():
        want = reference(input_ids=ids, position_ids=position_ids, use_cache=False).logits
        with pytest.warns(SDPAFallbackWarning, match="'attn_mask'"):
            got = ours(input_ids=ids, position_ids=position_ids, use_cache=False).logits
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)


def test_softcap_is_refused_with_the_fix():
    model = build("gemma2", ffpa_hf.NAME, attn_logit_softcapping=50.0)
    ids, mask = batch()
    with pytest.raises(UnsupportedFeatureError, match="attn_logit_softcapping=None"):
        model(input_ids=ids, attention_mask=mask)


def test_mask_function_keeps_plain_patterns_two_dimensional():
    from transformers.masking_utils import (
        causal_mask_function,
        chunked_causal_mask_function,
        sliding_window_causal_mask_function,
    )

    config = build("gemma3", ffpa_hf.NAME).config
    padding = torch.ones(2, 6, dtype=torch.bool)
    padding[1, :2] = False
    common = dict(batch_size=2, q_length=6, kv_length=6, attention_mask=padding, config=config,
                  dtype=torch.float32, device="cpu")
    plain = ffpa_hf.ffpa_attention_mask(mask_function=causal_mask_function, allow_is_causal_skip=True, **common)
    assert plain.shape == (2, 6) and torch.equal(plain, padding)
    sliding = ffpa_hf.ffpa_attention_mask(mask_function=sliding_window_causal_mask_function(WINDOW),
                                          allow_is_causal_skip=True, local_size=WINDOW, **common)
    assert torch.equal(sliding, padding)
    # Anything transformers flags as more than causal: SDPA's 4-D mask.
    other = ffpa_hf.ffpa_attention_mask(mask_function=causal_mask_function, allow_is_causal_skip=False, **common)
    assert other.shape == (2, 1, 6, 6) and not other[1, 0, :, :2].any()
    # Chunked attention (a local size that is not the config's sliding window) too.
    chunked = ffpa_hf.ffpa_attention_mask(
        mask_function=chunked_causal_mask_function(WINDOW - 1, torch.zeros(2, dtype=torch.long)),
        allow_is_causal_skip=True, local_size=WINDOW - 1, **common)
    assert chunked.dim() == 4


@pytest.mark.parametrize("name", ["llama", "gemma3"])
def test_padding_free_batches_run_on_their_offsets(name):
    # What transformers' DataCollatorWithFlattening hands flash attention: the sequences
    # end to end in one row, with their offsets; the reference is sdpa with the
    # block-diagonal mask transformers builds from position_ids.
    reference, ours = build(name, MODELS[name][2]), build(name, ffpa_hf.NAME)
    ids = torch.randint(3, 96, (1, 13), generator=torch.Generator().manual_seed(4))
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 0, 1, 2]])
    offsets = torch.tensor([0, 7, 10, 13], dtype=torch.int32)
    packed = dict(cu_seq_lens_q=offsets, cu_seq_lens_k=offsets, max_length_q=7, max_length_k=7)
    want, want_grads = run(reference, ids, None, position_ids=position_ids, use_cache=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SDPAFallbackWarning)
        got, got_grads = run(ours, ids, None, position_ids=position_ids, use_cache=False, **packed)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    for key in want_grads:
        torch.testing.assert_close(got_grads[key], want_grads[key], atol=2e-5, rtol=1e-4, msg=key)


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
def test_gemma3_training_step_with_a_nan_embedding(padded):
    # Issue 43: one NaN embedding crashed the windowed backward ("element 0 of tensors does
    # not require grad"); eager gives a NaN loss and NaN gradients. The NaN pattern of
    # every gradient is eager's (SDPA's math: one NaN key makes its head's rows NaN).
    ids, mask = batch()
    if not padded:
        mask = torch.ones_like(mask)
    results = []
    for implementation in ("eager", ffpa_hf.NAME):
        model = build("gemma3", implementation)
        model.train()
        with torch.no_grad():
            model.model.embed_tokens.weight[int(ids[1, 10])] = float("nan")
        logits = model(input_ids=ids, attention_mask=mask).logits
        loss = logits[mask.bool()].float().logsumexp(-1).mean()
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}))
    (want_loss, want), (got_loss, got) = results
    assert torch.isnan(want_loss) and torch.isnan(got_loss)
    assert got.keys() == want.keys()
    for name in want:
        assert torch.equal(torch.isnan(got[name]), torch.isnan(want[name])), name
    assert any(torch.isnan(g).any() for g in got.values())


def test_mla_head_dims_run_on_sdpa_with_the_reason():
    # DeepSeek-V3's multi-head latent attention: q / k head dim (nope + rope) unlike v's.
    config = transformers.DeepseekV3Config(
        vocab_size=96, hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=16,
        qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
        first_k_dense_replace=2, max_position_embeddings=64)
    models = []
    for implementation in ("sdpa", ffpa_hf.NAME):
        torch.manual_seed(0)
        model = transformers.DeepseekV3ForCausalLM(copy.deepcopy(config))  # set_attn_implementation edits it
        model.set_attn_implementation(implementation)
        models.append(model.eval())
    ids, mask = batch()
    want, want_grads = run(models[0], ids, mask)
    with pytest.warns(SDPAFallbackWarning, match="(?s)reason 'shape'.*q / k 24 and v 16.*nothing to change"):
        got, got_grads = run(models[1], ids, mask)
    assert models[0].config._attn_implementation == "sdpa"
    valid = mask.bool()
    torch.testing.assert_close(got[valid], want[valid], atol=2e-5, rtol=1e-4)
    for key in want_grads:
        torch.testing.assert_close(got_grads[key], want_grads[key], atol=2e-5, rtol=1e-4, msg=key)
    assert last_kernel(with_reason=True) == ("sdpa", "shape")


def test_a_static_cache_warning_names_what_a_model_user_can_do(monkeypatch):
    # transformers builds a 4-D mask for a static cache: the fallback's fix must be one a
    # model's user can act on, never "pass is_causal=True" (they pass no mask).
    reference, ours = build("llama", "sdpa"), build("llama", ffpa_hf.NAME)
    ids, mask = batch("left")
    kwargs = dict(max_new_tokens=3, do_sample=False, pad_token_id=0, cache_implementation="static")
    with torch.no_grad():
        want = reference.generate(input_ids=ids, attention_mask=mask, **kwargs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = ours.generate(input_ids=ids, attention_mask=mask, **kwargs)
    assert torch.equal(got, want)
    texts = [str(w.message) for w in caught if issubclass(w.category, SDPAFallbackWarning)]
    assert len(texts) == 1 and "(reason 'attn_mask')" in texts[0], texts
    assert ffpa_hf.MASK_PATTERN_FIX in texts[0] and "is_causal" not in texts[0]
    monkeypatch.setenv("FFPA_STRICT", "1")
    with pytest.raises(UnsupportedFeatureError, match="static cache"), torch.no_grad():
        ours.generate(input_ids=ids, attention_mask=mask, **kwargs)
