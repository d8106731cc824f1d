"""`sliding_window`: each query attends to the keys within w positions (Beltagy et al., 2020, local part).

An attncard attention module in a package of its own: `pyproject.toml` registers `MODULE` in the entry-point
group `attncard.modules`, and attncard finds it there.
"""

from attncard.modules.base import AttentionModule, Measurement, Paper

from .attention import sliding_window_attention
from .config import SlidingWindowConfig
from .model import attention_flops

MODULE = AttentionModule(
    name="sliding_window",
    config_class=SlidingWindowConfig,
    function=sliding_window_attention,  # given the config as `config` at every call
    paper=Paper(
        "Beltagy, Peters and Cohan, Longformer: The Long-Document Transformer, 2020, "
        "https://arxiv.org/abs/2004.05150"
    ),
    measurement=Measurement(flops=attention_flops),
)

__all__ = ["MODULE", "SlidingWindowConfig", "attention_flops", "sliding_window_attention"]
