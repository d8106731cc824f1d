"""`svd_lowrank`: the q/k/v/o projections replaced by their truncated SVD, the factors trained in full."""

from ..base import AttentionModule, Measurement, Paper, Training, imported_on_call, imported_on_read
from .config import SvdLowRankConfig

# model.py and attention.py import torch: the hooks import them when first called, so that this folder (and
# `MODULE`, which the registry and the card read) imports without torch.
_module_stats = imported_on_call(f"{__name__}.model", "module_stats")

MODULE = AttentionModule(
    name=__name__.rpartition(".")[2],  # the folder's name
    config_class=SvdLowRankConfig,
    function=imported_on_call(f"{__name__}.attention", "svd_lowrank_attention"),
    prepare=imported_on_call(f"{__name__}.model", "prepare"),
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

__getattr__ = imported_on_read(
    __name__,
    {
        "LowRankLinear": "attention",
        "factorised_parameter_count": "attention",
        "rank_for_energy": "attention",
        "lora_target_modules": "model",
        "module_stats": "model",
    },
)

# How the module contract (`attncard.testing`, tests/modules/test_module_contract.py) runs it: `config`
# changes attention on rows of 4 to 50 tokens; `dense_config` computes the model's own attention.
CONTRACT_CASE = dict(config={"rank": 4}, dense_config={"rank": 4096})  # capped at full rank
