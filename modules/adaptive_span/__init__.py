"""`adaptive_span`: each head learns its attention span (Sukhbaatar et al., 2019)."""

from ..base import AttentionModule, Measurement, Paper, Training, imported_on_call, imported_on_read
from .config import AdaptiveSpanConfig
from .plots import plot_spans

# model.py and attention.py import torch: the hooks import them when first called, so that this folder (and
# `MODULE`, which the registry and the card read) imports without torch.

MODULE = AttentionModule(
    name=__name__.rpartition(".")[2],  # the folder's name
    config_class=AdaptiveSpanConfig,
    function=imported_on_call(f"{__name__}.attention", "adaptive_span_attention"),
    prepare=imported_on_call(f"{__name__}.model", "prepare"),
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

__getattr__ = imported_on_read(
    __name__, {"mean_span": "model", "module_stats": "model", "span_penalty": "model"}
)

# How the module contract (`attncard.testing`, tests/modules/test_module_contract.py) runs it: `config`
# changes attention on rows of 4 to 50 tokens; `dense_config` computes the model's own attention.
CONTRACT_CASE = dict(
    config={"max_span": 4, "ramp": 2},
    dense_config={"max_span": 512},  # every span far beyond the longest row
)
