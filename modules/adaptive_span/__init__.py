"""`adaptive_span`: each head learns its attention span (Sukhbaatar et al., 2019)."""

import importlib

from ..base import AttentionModule, Measurement, Paper, Training, imported_on_call
from .config import AdaptiveSpanConfig
from .plots import plot_spans

# model.py and attention.py import torch: the hooks import them when first called, so that this folder (and
# `MODULE`, which the registry and the card read) imports without torch.
_TORCH_NAMES = {"mean_span": "model", "module_stats": "model", "span_penalty": "model"}

MODULE = AttentionModule(
    name="adaptive_span",
    config_class=AdaptiveSpanConfig,
    function=imported_on_call(f"{__name__}.attention", "adaptive_span_attention"),
    apply=imported_on_call(f"{__name__}.model", "apply"),
    paper=Paper(
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
    ),
    training=Training(
        trainable_modules=("adaptive_span",),
        learning_rates=lambda config: {"span_logits": config.span_lr},
        penalty=imported_on_call(f"{__name__}.model", "span_penalty"),
        calibrate=imported_on_call(f"{__name__}.model", "calibrate_crossover"),
    ),
    measurement=Measurement(
        flops=imported_on_call(f"{__name__}.model", "attention_flops"),
        stats=imported_on_call(f"{__name__}.model", "module_stats"),
        plots=plot_spans,
    ),
)

__all__ = ["MODULE", "AdaptiveSpanConfig", "mean_span", "module_stats", "span_penalty"]


def __getattr__(name: str) -> object:
    """A name of `_TORCH_NAMES`, imported from its file when first read."""
    if name in _TORCH_NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_TORCH_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
