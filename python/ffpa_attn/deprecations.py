"""Registry of deprecated API names and keywords.

``DEPRECATED_NAMES`` maps a fully qualified old name to what to write instead. The
entries are the public names of the earlier ffpa-attn releases (the ``pyffpa`` package
and its level/accumulator-specific entry points, which took a preallocated output and a
"level"/"acc" selector instead of returning the result) and the torch wrapper that
``ffpa_attn_func`` itself replaced once it became differentiable.

``DEPRECATED_KEYWORDS`` maps a function's qualified name to its deprecated keywords:
``ffpa_attn_func(causal=...)``, the keyword before SDPA's signature. The same text is
the runtime :class:`~ffpa_attn.errors.FFPADeprecationWarning` (:func:`deprecation_message`).

At run time an old name of the package (``ffpa_attn.ffpa``) raises AttributeError with
its entry's text (``ffpa_attn.__getattr__``). The notebook checks find old names in
notebook sources with this registry (ctest/notebooks/deprecated_uses.py).
"""

from __future__ import annotations

__all__ = ["DEPRECATED_KEYWORDS", "DEPRECATED_NAMES", "deprecation_message"]

_NEW_CALL = "ffpa_attn.ffpa_attn_func(q, k, v, is_causal=..., scale=...) (returns the output)"
# accum="fp16" is ffpa_attn_func's switch (interface.ACCUMS; the fp16/bf16 tensor-core kernels
# take it, the extension's validation says which: validation.F16_ACC_IMPLS).
_ACC_NOTE = "fp32 accumulation is the default; fp16 accumulation is accum='fp16' (CUDA tensor-core kernels)"

DEPRECATED_NAMES: dict[str, str] = {
    "pyffpa": "the package is now ffpa_attn: import ffpa_attn",
    "ffpa_attn.ffpa": f"use {_NEW_CALL}",
    "ffpa_attn.faster_prefill_attn_func": f"use {_NEW_CALL}",
    "ffpa_attn.faster_prefill_attn_acc_f32_L1": f"use {_NEW_CALL}; {_ACC_NOTE}",
    "ffpa_attn.faster_prefill_attn_acc_f16_L1": f"use {_NEW_CALL}; {_ACC_NOTE}",
    "ffpa_attn.ffpa_mma_acc_f32_L1": f"use {_NEW_CALL}; {_ACC_NOTE}",
    "ffpa_attn.ffpa_mma_acc_f16_L1": f"use {_NEW_CALL}; {_ACC_NOTE}",
    "ffpa_attn.ffpa_acc_f32_L1": f"use {_NEW_CALL}; {_ACC_NOTE}",
    "ffpa_attn.ffpa_acc_f16_L1": f"use {_NEW_CALL}; {_ACC_NOTE}",
    "ffpa_attn.LevelType": "levels are gone: the kernel is chosen by head dim; use impl='auto'|'mma'|'simt'",
    "ffpa_attn.L1": "levels are gone: drop the argument (impl='auto' picks the kernel)",
    "ffpa_attn.L2": "levels are gone: drop the argument (impl='auto' picks the kernel)",
    "ffpa_attn.L3": "levels are gone: drop the argument (impl='auto' picks the kernel)",
    "ffpa_attn.MMAAccType": f"drop the accumulator argument: {_ACC_NOTE}",
    "ffpa_attn.FP32": f"drop the accumulator argument: {_ACC_NOTE}",
    "ffpa_attn.FP16": f"drop the accumulator argument: {_ACC_NOTE}",
    "ffpa_attn.torch_ops.ffpa_attention": (
        "use ffpa_attn.ffpa_attn_func(q, k, v, is_causal=..., scale=..., enable_gqa=True): it is differentiable "
        "(an O(N)-memory fused backward) and falls back to SDPA for what the kernels do not take"),
    "ffpa_attn.torch_ops.FFPAAttnFunction": "use ffpa_attn.ffpa_attn_func, which is differentiable",
    "ffpa_attn.bench": ("the bench is a tool of the repository, no longer in the wheels: from a checkout, "
                        "python python/bench/ffpa_bench.py (it times the ffpa_attn its interpreter imports)"),
}

# ffpa_attn_func's causal= was bottom-right aligned (the kernels' convention); SDPA's
# is_causal is top-left aligned. They agree when Nq == Nkv, so the replacement names both.
DEPRECATED_KEYWORDS: dict[str, dict[str, str]] = {
    "ffpa_attn.ffpa_attn_func": {
        "causal": ("use is_causal= (SDPA's signature; the same mask when Nq == Nkv, aligned top-left otherwise) "
                   "or, for causal='s bottom-right alignment when Nq != Nkv, "
                   "attn_mask=torch.nn.attention.bias.causal_lower_right(Nq, Nkv); causal= still works, "
                   "bottom-right aligned"),
    },
}


def deprecation_message(qualified: str, keyword: str | None = None) -> str:
    """The warning text for a deprecated name (or a deprecated keyword of a function)."""
    if keyword is None:
        return f"{qualified} is deprecated: {DEPRECATED_NAMES[qualified]}"
    short = qualified.rsplit(".", 1)[-1]
    return f"{short}({keyword}=...) is deprecated: {DEPRECATED_KEYWORDS[qualified][keyword]}"
