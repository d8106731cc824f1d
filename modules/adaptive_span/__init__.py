"""`adaptive_span`: each head learns its attention span (Sukhbaatar et al., 2019)."""

from pathlib import Path

from ..base import AttentionModule
from .config import AdaptiveSpanConfig
from .model import (
    apply,
    attention_flops,
    calibrate_crossover,
    mean_span,
    module_stats,
    plot_spans,
    span_penalty,
)

MODULE = AttentionModule(
    name="adaptive_span",
    config_class=AdaptiveSpanConfig,
    apply=apply,
    folder=Path(__file__).parent,
    causal=True,
    bidirectional=True,
    gqa=True,
    citation=(
        "Sukhbaatar, Grave, Bojanowski and Joulin, Adaptive Attention Span in Transformers, ACL 2019, "
        "https://arxiv.org/abs/1905.07799"
    ),
    bibtex="""@inproceedings{sukhbaatar2019adaptive,
  title = {Adaptive Attention Span in Transformers},
  author = {Sukhbaatar, Sainbayar and Grave, Edouard and Bojanowski, Piotr and Joulin, Armand},
  booktitle = {Proceedings of the 57th Annual Meeting of the Association for Computational Linguistics},
  pages = {331--335},
  year = {2019},
  url = {https://arxiv.org/abs/1905.07799}
}""",
    trainable_modules=("adaptive_span",),
    learning_rates=lambda config: {"span_logits": config.span_lr},
    penalty=span_penalty,
    stats=module_stats,
    calibrate=calibrate_crossover,
    flops=attention_flops,
    plots=plot_spans,
    changes_parameter_count=True,  # the span logits, one per head and layer
)

__all__ = ["MODULE", "AdaptiveSpanConfig", "mean_span", "module_stats", "span_penalty"]
