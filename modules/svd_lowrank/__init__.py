"""`svd_lowrank`: the q/k/v/o projections replaced by their truncated SVD, the factors trained in full."""

import importlib

from ..base import AttentionModule, Measurement, Paper, Training, imported_on_call
from .config import SvdLowRankConfig

# model.py and attention.py import torch: the hooks import them when first called, so that this folder (and
# `MODULE`, which the registry and the card read) imports without torch.
_TORCH_NAMES = {
    "LowRankLinear": "attention",
    "factorised_parameter_count": "attention",
    "rank_for_energy": "attention",
    "lora_target_modules": "model",
    "module_stats": "model",
}
_module_stats = imported_on_call(f"{__name__}.model", "module_stats")

MODULE = AttentionModule(
    name="svd_lowrank",
    config_class=SvdLowRankConfig,
    function=imported_on_call(f"{__name__}.attention", "svd_lowrank_attention"),
    apply=imported_on_call(f"{__name__}.model", "apply"),
    paper=Paper(
        citation=(
            "Denton, Zaremba, Bruna, LeCun and Fergus, Exploiting Linear Structure Within Convolutional "
            "Networks for Efficient Evaluation, NeurIPS 2014, https://arxiv.org/abs/1404.0736"
        ),
        bibtex="""@inproceedings{denton2014exploiting,
  title = {Exploiting Linear Structure Within Convolutional Networks for Efficient Evaluation},
  author = {Denton, Emily L. and Zaremba, Wojciech and Bruna, Joan and LeCun, Yann and Fergus, Rob},
  booktitle = {Advances in Neural Information Processing Systems 27},
  pages = {1269--1277},
  year = {2014},
  url = {https://arxiv.org/abs/1404.0736}
}""",
    ),
    training=Training(
        trainable_modules=("svd_down", "svd_up"),
        lora_targets=imported_on_call(f"{__name__}.model", "lora_target_modules"),
    ),
    measurement=Measurement(
        projection_flops=imported_on_call(f"{__name__}.model", "projection_flops"),
        dense_reference=imported_on_call(f"{__name__}.model", "dense_reference"),
        stats=lambda model, lengths: _module_stats(model),
    ),
)

__all__ = [
    "MODULE",
    "LowRankLinear",
    "SvdLowRankConfig",
    "factorised_parameter_count",
    "lora_target_modules",
    "module_stats",
    "rank_for_energy",
]


def __getattr__(name: str) -> object:
    """A name of `_TORCH_NAMES`, imported from its file when first read."""
    if name in _TORCH_NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_TORCH_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
