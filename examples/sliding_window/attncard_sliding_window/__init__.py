"""`sliding_window`: each query attends to the keys within w positions (Beltagy et al., 2020, local part).

An attncard attention module in a package of its own: `pyproject.toml` registers `MODULE` in the entry-point
group `attncard.modules`, and attncard finds it there.
"""

from pathlib import Path

from attncard.modules.base import AttentionModule

from .config import SlidingWindowConfig
from .model import apply, attention_flops

MODULE = AttentionModule(
    name="sliding_window",
    config_class=SlidingWindowConfig,
    apply=apply,
    folder=Path(__file__).parent,
    causal=True,
    bidirectional=True,
    gqa=True,
    citation=(
        "Beltagy, Peters and Cohan, Longformer: The Long-Document Transformer, 2020, "
        "https://arxiv.org/abs/2004.05150"
    ),
    flops=attention_flops,
)

__all__ = ["MODULE", "SlidingWindowConfig", "apply", "attention_flops"]
