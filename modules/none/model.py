from torch import nn

from ..base import install_attention
from .attention import none_attention
from .config import NoneConfig


def apply(model: nn.Module, config: NoneConfig) -> nn.Module:
    """Routes attention through transformers' own SDPA function, unchanged; nothing is added."""
    install_attention(model, "none", none_attention)
    return model
