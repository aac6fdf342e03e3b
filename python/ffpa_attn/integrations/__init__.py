"""Integrations of ffpa-attn with other libraries, each an optional dependency imported
only by its own module: :mod:`ffpa_attn.integrations.transformers` (``attn_implementation="ffpa"``)."""
