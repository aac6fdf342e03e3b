"""The deprecated-name registry: its shape, the runtime messages, and old names raising
their entry's text (ffpa_attn.__getattr__)."""

from __future__ import annotations

import pytest

import ffpa_attn
from ffpa_attn.deprecations import DEPRECATED_NAMES


def test_registry_shape():
    assert DEPRECATED_NAMES
    for old, replacement in DEPRECATED_NAMES.items():
        assert old.split(".")[0] in ("ffpa_attn", "pyffpa")
        assert isinstance(replacement, str) and replacement
    # The current API must never be listed.
    assert "ffpa_attn.ffpa_attn_func" not in DEPRECATED_NAMES


def test_runtime_messages_come_from_the_registry():
    from ffpa_attn.deprecations import DEPRECATED_KEYWORDS, deprecation_message

    text = deprecation_message("ffpa_attn.ffpa_attn_func", "causal")
    assert text.startswith("ffpa_attn_func(causal=...) is deprecated: ")
    assert text.endswith(DEPRECATED_KEYWORDS["ffpa_attn.ffpa_attn_func"]["causal"])
    assert deprecation_message("pyffpa").startswith("pyffpa is deprecated: ")


@pytest.mark.parametrize("old", sorted(n for n in DEPRECATED_NAMES if n.count(".") == 1 and n.startswith("ffpa_attn.")))
def test_old_names_raise_their_registry_message(old):
    name = old.split(".", 1)[1]
    with pytest.raises(AttributeError, match=f"module 'ffpa_attn' has no attribute '{name}'") as info:
        getattr(ffpa_attn, name)
    assert DEPRECATED_NAMES[old] in str(info.value)
    assert not hasattr(ffpa_attn, name)


def test_unknown_names_stay_plain_attribute_errors():
    with pytest.raises(AttributeError, match=r"^module 'ffpa_attn' has no attribute 'no_such_name'$"):
        ffpa_attn.no_such_name  # noqa: B018
