"""The notebook checks' scanner for deprecated ffpa_attn API (deprecated_uses.py), with the
registry of the package on PYTHONPATH."""

from __future__ import annotations

import pytest
from deprecated_uses import find_deprecated_uses


def names(source, registry=None):
    return [(name, line) for name, line, _ in find_deprecated_uses(source, registry)]


def test_attribute_use_through_alias():
    src = "import ffpa_attn as fa\nout = fa.ffpa(q, k, v, o)\n"
    assert names(src) == [("ffpa_attn.ffpa", 2)]


def test_from_import_and_old_package():
    src = ("from ffpa_attn import ffpa_attn_func, faster_prefill_attn_func\n"
           "import pyffpa\n"
           "from pyffpa import L1\n")
    assert names(src) == [("ffpa_attn.faster_prefill_attn_func", 1), ("pyffpa", 2), ("pyffpa", 3)]


def test_dotted_module_use():
    src = "import ffpa_attn\nffpa_attn.ffpa_mma_acc_f16_L1(q, k, v, o)\nffpa_attn.MMAAccType.FP32\n"
    assert names(src) == [("ffpa_attn.ffpa_mma_acc_f16_L1", 2), ("ffpa_attn.MMAAccType", 3)]


def test_current_api_and_unrelated_names_are_not_flagged():
    src = ("import ffpa_attn\n"
           "ffpa = 3\n"                       # a local variable, not the old function
           "out = ffpa_attn.ffpa_attn_func(q, k, v)\n"
           "text = 'ffpa_attn.ffpa(q)'\n"      # inside a string
           "# ffpa_attn.ffpa(q, k, v)\n"       # inside a comment
           "other.ffpa(1)\n")
    assert names(src) == []


def test_ipython_magics_do_not_break_parsing():
    src = "!pip install ffpa-attn\n%time x = 1\nimport ffpa_attn\nffpa_attn.L2\n"
    assert names(src) == [("ffpa_attn.L2", 4)]


def test_unparsable_source_falls_back_to_tokens():
    src = "x = (\nffpa_attn.ffpa(q)\n"
    assert names(src) == [("ffpa_attn.ffpa", 2)]


def test_replacement_text_is_returned():
    [(name, line, replacement)] = find_deprecated_uses("import pyffpa\n")
    assert (name, line) == ("pyffpa", 1) and "ffpa_attn" in replacement


def test_custom_registry():
    registry = {"ffpa_attn.old_name": "use ffpa_attn.new_name"}
    assert names("from ffpa_attn import old_name as o\n", registry) == [("ffpa_attn.old_name", 1)]
    assert names("import ffpa_attn\nffpa_attn.ffpa(q)\n", registry) == []
    assert find_deprecated_uses("import ffpa_attn\n", {}) == []


@pytest.mark.parametrize("source", ["", "\n\n", "pass\n"])
def test_empty_and_trivial_sources(source):
    assert find_deprecated_uses(source) == []


def test_deprecated_keyword_through_imports_and_aliases():
    src = ("import ffpa_attn as fa\n"
           "from ffpa_attn import ffpa_attn_func as attend\n"
           "fa.ffpa_attn_func(q, k, v, causal=True)\n"
           "attend(q, k, v,\n"
           "       causal=False)\n"
           "fa.ffpa_attn_func(q, k, v, is_causal=True)\n"   # the current keyword
           "other(q, causal=True)\n")                       # not ffpa_attn's
    assert names(src) == [("ffpa_attn.ffpa_attn_func(causal=)", 3), ("ffpa_attn.ffpa_attn_func(causal=)", 5)]
    [(_, _, fix)] = find_deprecated_uses("import ffpa_attn\nffpa_attn.ffpa_attn_func(q, k, v, causal=True)\n")
    assert "is_causal=" in fix and "causal_lower_right" in fix


def test_the_earlier_torch_wrapper_is_deprecated():
    src = ("from ffpa_attn.torch_ops import attention_math, ffpa_attention\n"
           "import ffpa_attn.torch_ops\n"
           "ffpa_attn.torch_ops.FFPAAttnFunction.apply(q, k, v)\n")
    assert names(src) == [("ffpa_attn.torch_ops.ffpa_attention", 1), ("ffpa_attn.torch_ops.FFPAAttnFunction", 3)]


def test_custom_names_registry_scans_no_keywords_unless_given():
    src = "import ffpa_attn\nffpa_attn.ffpa_attn_func(q, causal=True)\n"
    assert find_deprecated_uses(src, {"ffpa_attn.old": "x"}) == []
    assert names(src, {}) == []
    hits = find_deprecated_uses(src, {}, {"ffpa_attn.ffpa_attn_func": {"causal": "use is_causal"}})
    assert hits == [("ffpa_attn.ffpa_attn_func(causal=)", 2, "use is_causal")]
