"""Tiny random models of every supported family: the tests' names for what `attncard.testing` builds (the
contract suite and the tests share one builder, so both use the same models)."""

from __future__ import annotations

from attncard.testing import (
    CORPUS,
    ENCODERS,
    FAMILIES,
    LABELS,
    TEXTS,
    decoder_tokenizer,
    load_with_padded_batch,
    save_tiny_model,
    tiny_config,
)

__all__ = [
    "CORPUS",
    "ENCODERS",
    "FAMILIES",
    "LABELS",
    "TEXTS",
    "decoder_tokenizer",
    "load_with_padded_batch",
    "save_tiny_model",
    "tiny_config",
]
