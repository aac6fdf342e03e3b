"""``attn_implementation="ffpa"`` for Hugging Face transformers models.

    import ffpa_attn.integrations.transformers  # registers "ffpa"
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="ffpa")

Importing this module registers two functions under the name ``"ffpa"`` through
transformers' public registries (``transformers.AttentionInterface`` and
``transformers.masking_utils.AttentionMaskInterface``); :func:`register` registers them
under another name. transformers is an optional dependency: only this module imports it.

How a layer's call runs:

* The mask: where the model's mask is plain causal (or plain bidirectional), with or
  without a sliding window, the model hands the attention the 2-D padding mask
  ``[B, Nkv]`` (or None without padding), as for transformers' flash-attention backends
  (``flash_attention_mask``); the window comes from the layer (``sliding_window=``).
  Any other pattern (packed sequences found from ``position_ids``, image-token blocks,
  chunked attention, a static cache at decode) is built as SDPA's 4-D mask
  (``sdpa_mask``), which the attention runs on torch SDPA.
* The attention: the batch is unpadded into the packed layout (the valid tokens of each
  row, left padding assumed for queries shorter than the keys, as transformers' flash
  path does) and run by :func:`ffpa_attn.ffpa_attn_varlen_func`, causal aligned
  bottom-right per row and the layer's sliding window ``w`` as ``window_size=(w - 1, 0)``
  (a key is seen when ``q - w < k <= q``, transformers' rule); padded query rows are 0.
  Padding-free batches that bring their own offsets (``cu_seq_lens_q`` / ``cu_seq_lens_k``
  / ``max_length_q`` / ``max_length_k``, as transformers' DataCollatorWithFlattening
  passes them to flash attention) run by the varlen call on those offsets.
  Dropout in training and 4-D masks run on torch SDPA through ffpa-attn's own fallback,
  with one SDPAFallbackWarning per reason (``strict=True`` via ``FFPA_STRICT=1`` raises).
  ``softcap`` (Gemma 2's ``attn_logit_softcapping``) and attention sinks raise, as
  transformers' SDPA backend does: set ``attn_logit_softcapping=None`` or use ``eager``.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.masking_utils import (
    AttentionMaskInterface,
    bidirectional_mask_function,
    causal_mask_function,
    flash_attention_mask,
    sdpa_mask,
)

from .. import torch_ops
from ..errors import UnsupportedFeatureError
from ..validation import check_dropout
from ..varlen import ffpa_attn_varlen_func

__all__ = ["MASK_PATTERN_FIX", "NAME", "ffpa_attention_forward", "ffpa_attention_mask", "register"]

NAME = "ffpa"

# The fix the SDPAFallbackWarning of a 4-D mask names (reason "attn_mask"): the model's
# user never passed that mask, so "pass is_causal=True" is nothing they can do.
MASK_PATTERN_FIX = (
    "nothing to change for the result (it is SDPA's); transformers built a 4-D mask for this layer, a pattern the "
    "kernels do not take: a static cache (cache_implementation=\"static\", or the StaticCache of "
    "torch.compile'd generation), packed sequences found from position_ids, image-token blocks or chunked "
    "attention. The kernels take plain causal / bidirectional masks with padding and sliding windows: use the "
    "default dynamic cache, and pass packed sequences as DataCollatorWithFlattening does (cu_seq_lens_q / "
    "cu_seq_lens_k)")


def _plain_pattern(mask_function: Any, kwargs: dict[str, Any]) -> bool:
    """Whether the model's mask is causal or bidirectional (a causal one possibly with the
    config's sliding window) plus padding: what the varlen call expresses. transformers
    sets allow_is_causal_skip / allow_is_bidirectional_skip False whenever it adds any
    other pattern (packing, blocks, or/and overlays); chunked attention keeps it and is
    told apart by its chunk size."""
    if mask_function is bidirectional_mask_function:
        return bool(kwargs.get("allow_is_bidirectional_skip", False))
    if not kwargs.get("allow_is_causal_skip", False):
        return False
    if mask_function is causal_mask_function:
        return True
    config = kwargs.get("config")
    sliding = getattr(config, "sliding_window", None)
    chunked = getattr(config, "attention_chunk_size", None)
    return sliding is not None and kwargs.get("local_size") == sliding and chunked is None


def ffpa_attention_mask(batch_size: int, q_length: int, kv_length: int, q_offset: int = 0, kv_offset: int = 0,
                        mask_function: Any = causal_mask_function, attention_mask: torch.Tensor | None = None,
                        **kwargs: Any) -> torch.Tensor | None:
    """The mask function of ``"ffpa"`` (transformers' AttentionMaskInterface): the 2-D
    padding mask or None where the pattern is plain (module docstring), else SDPA's 4-D mask."""
    if _plain_pattern(mask_function, kwargs):
        return flash_attention_mask(batch_size, q_length, kv_length, q_offset, kv_offset, mask_function,
                                    attention_mask, **kwargs)
    kwargs["allow_is_causal_skip"] = False
    kwargs["allow_is_bidirectional_skip"] = False
    return sdpa_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset,
                     kv_offset=kv_offset, mask_function=mask_function, attention_mask=attention_mask, **kwargs)


def _offsets(lengths: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pad(torch.cumsum(lengths, dim=0, dtype=torch.int32), (1, 0))


# The configs whose first call asked for a first-use build (ids: a config is alive as long as its model).
_FIRST_USE_ASKED: set[int] = set()


def _first_use_build(module: torch.nn.Module, query: torch.Tensor) -> None:
    """On a model's first call, one first-use build holding every head dim its layers use
    (ffpa_attn.jit.prepare_for_model; nothing where the installed kernels serve the GPU),
    so no layer runs SDPA for want of its head dim. A failure is the calls' own "jit"
    fallback, said by them."""
    if torch.compiler.is_compiling():
        return  # traced code asks per call (ffpa_attn.torch_ops), never builds inside a graph
    config = getattr(module, "config", None)
    if config is None or not query.is_cuda or id(config) in _FIRST_USE_ASKED:
        return
    _FIRST_USE_ASKED.add(id(config))
    from .. import jit
    jit.prepare_for_model(config, query)


def ffpa_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                           attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                           sliding_window: int | None = None, softcap: float | None = None,
                           is_causal: bool | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """The attention function of ``"ffpa"`` (transformers' AttentionInterface): query
    ``[B, Hq, Nq, D]``, key / value ``[B, Hkv, Nkv, D]``; returns ``([B, Nq, Hq, D], None)``."""
    if softcap is not None:
        raise UnsupportedFeatureError(
            f"attn_implementation='{NAME}' has no logit softcapping (softcap={softcap}), as transformers' sdpa has "
            "none: set the config's attn_logit_softcapping=None, or use attn_implementation='eager'")
    if kwargs.get("s_aux") is not None:
        raise UnsupportedFeatureError(f"attn_implementation='{NAME}' has no attention sinks (s_aux); use 'eager'")
    _first_use_build(module, query)
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    b, hq, nq, d = query.shape
    hkv, nkv = key.shape[1], key.shape[2]
    gqa = hq != hkv
    if sliding_window is not None and not causal:
        raise UnsupportedFeatureError(
            f"attn_implementation='{NAME}' got a sliding window on a bidirectional layer with a plain mask; its "
            "masks come from ffpa_attention_mask, which gives such layers SDPA's 4-D mask")
    window = (sliding_window - 1, -1) if sliding_window is not None else (-1, -1)
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))  # [B, N, H, D]
    packed_layout = [kwargs.get(n) for n in ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")]
    if all(x is not None for x in packed_layout):
        # Padding-free batches (sequences laid end to end, e.g. transformers'
        # DataCollatorWithFlattening): their own offsets, as transformers' flash path
        # takes them, whatever mask was built from position_ids.
        cu_q, cu_k, max_q, max_k = packed_layout
        out = ffpa_attn_varlen_func(q.reshape(b * nq, hq, d), k.reshape(b * nkv, hkv, d),
                                    v.reshape(b * nkv, hkv, v.shape[-1]), cu_q.to(torch.int32), cu_k.to(torch.int32),
                                    int(max_q), int(max_k), dropout_p=dropout, softmax_scale=scaling, causal=causal,
                                    window_size=window, enable_gqa=gqa)
        return out.view(b, nq, hq, -1), None
    if attention_mask is not None and attention_mask.dim() != 2:
        # A pattern the varlen call does not express: torch SDPA, said once (SDPAFallbackWarning)
        # with a fix a model's user can act on (they pass no mask themselves).
        check_dropout(dropout)
        out = torch_ops.dispatch(query, key, value, attention_mask, dropout, False, scaling, gqa, legacy_causal=None,
                                 impl="auto", accum="fp32", return_lse=False, strict=None, backward="auto",
                                 attn_mask_fix=MASK_PATTERN_FIX)
        return out.transpose(1, 2).contiguous(), None
    if attention_mask is None:
        cu_q = torch.arange(b + 1, dtype=torch.int32, device=query.device) * nq
        cu_k = torch.arange(b + 1, dtype=torch.int32, device=query.device) * nkv
        out = ffpa_attn_varlen_func(q.reshape(b * nq, hq, d), k.reshape(b * nkv, hkv, d),
                                    v.reshape(b * nkv, hkv, v.shape[-1]), cu_q, cu_k, nq, nkv, dropout_p=dropout,
                                    softmax_scale=scaling, causal=causal, window_size=window, enable_gqa=gqa)
        return out.view(b, nq, hq, -1), None
    valid_k = attention_mask.to(torch.bool)
    if nkv > valid_k.shape[1]:
        # A static cache longer than the mask: the slots past it hold no token yet.
        k, v, nkv = k[:, :valid_k.shape[1]], v[:, :valid_k.shape[1]], valid_k.shape[1]
    if valid_k.shape != (b, nkv):
        raise UnsupportedFeatureError(f"a 2-D attention mask of shape {tuple(valid_k.shape)} for {b} rows of {nkv} "
                                      "keys; pass the model's padding mask [B, Nkv]")
    # Queries shorter than the keys are their last tokens (left padding, as transformers'
    # flash-attention path assumes).
    valid_q = valid_k if nq == nkv else valid_k[:, -nq:]
    lengths_q, lengths_k = valid_q.sum(dim=1, dtype=torch.int32), valid_k.sum(dim=1, dtype=torch.int32)
    rows_q = torch.nonzero(valid_q.reshape(-1)).flatten()
    rows_k = torch.nonzero(valid_k.reshape(-1)).flatten()
    packed = ffpa_attn_varlen_func(q.reshape(b * nq, hq, d)[rows_q], k.reshape(b * nkv, hkv, d)[rows_k],
                                   v.reshape(b * nkv, hkv, v.shape[-1])[rows_k], _offsets(lengths_q),
                                   _offsets(lengths_k), int(lengths_q.max()), int(lengths_k.max()),
                                   dropout_p=dropout, softmax_scale=scaling, causal=causal, window_size=window,
                                   enable_gqa=gqa)
    out = packed.new_zeros((b * nq, hq, packed.shape[-1])).index_copy(0, rows_q, packed)
    return out.view(b, nq, hq, -1), None


def register(name: str = NAME) -> None:
    """Register the attention and mask functions under ``name`` (done for ``"ffpa"`` on import)."""
    AttentionInterface.register(name, ffpa_attention_forward)
    AttentionMaskInterface.register(name, ffpa_attention_mask)


register()
