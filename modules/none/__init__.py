"""`none`: the identity module. The model keeps its own attention; only LoRA and the head are trained."""

from pathlib import Path

from ..base import AttentionModule
from .config import NoneConfig
from .model import apply

MODULE = AttentionModule(
    name="none",
    config_class=NoneConfig,
    apply=apply,
    folder=Path(__file__).parent,
    causal=True,
    bidirectional=True,
    gqa=True,
    changes_attention=False,  # the model's own attention
)
