"""`none`: the identity module. The model keeps its own attention; only LoRA and the head are trained."""

from pathlib import Path

import torch

from ..base import AttentionModule
from .config import NoneConfig


def apply(model: torch.nn.Module, config: NoneConfig) -> torch.nn.Module:
    """Installs nothing and returns the model unchanged."""
    return model


MODULE = AttentionModule(
    name="none",
    config_class=NoneConfig,
    apply=apply,
    folder=Path(__file__).parent,
    causal=True,
    bidirectional=True,
    gqa=True,
)
