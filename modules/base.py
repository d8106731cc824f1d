"""What every attention module provides, so the pipeline can treat them alike.

Each module is a folder `modules/<name>/` holding `config.py` (a dataclass whose fields carry their own
help text: the card's configuration table is generated from it), `spec.md` (the module's specification,
printed in the card) and `__init__.py`, which defines `MODULE`, an [`AttentionModule`].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import torch


@dataclass(frozen=True)
class AttentionModule:
    """An attention module: its name, config class, installer and the facts its card states.

    Attributes:
        name: the name given to `publish --module`.
        config_class: a dataclass; every field has `metadata={"help": ...}`.
        apply: installs the module into a loaded model, in place, and returns the model.
        folder: the module's folder (its `spec.md` and source files).
        causal: works in causal (decoder) models.
        bidirectional: works in bidirectional (encoder) models.
        gqa: works with grouped-query attention (fewer key/value heads than query heads).
        citation: the paper the module implements; empty for `none`.
    """

    name: str
    config_class: type
    apply: Callable[[torch.nn.Module, object], torch.nn.Module]
    folder: Path
    causal: bool
    bidirectional: bool
    gqa: bool
    citation: str = ""

    @property
    def spec(self) -> str:
        return (self.folder / "spec.md").read_text(encoding="utf-8")

    def config_fields(self) -> list[tuple[str, object, str]]:
        """`(name, default, help)` of every config field, for the card's configuration table."""
        return [(f.name, f.default, f.metadata["help"]) for f in fields(self.config_class)]
