"""`none`: the identity module. The model keeps its own attention; only LoRA and the head are trained."""

from pathlib import Path

from ..base import AttentionModule, imported_on_call
from .config import NoneConfig

# model.py and attention.py import torch: the hooks import them when first called, so that this folder (and
# `MODULE`, which the registry and the card read) imports without torch.
MODULE = AttentionModule(
    name="none",
    config_class=NoneConfig,
    apply=imported_on_call(f"{__name__}.model", "apply"),
    folder=Path(__file__).parent,
    causal=True,
    bidirectional=True,
    gqa=True,
    changes_attention=False,  # the model's own attention
)
