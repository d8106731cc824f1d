"""`svd_lowrank`: the q/k/v/o projections replaced by their truncated SVD, the factors trained in full."""

from pathlib import Path

from ..base import AttentionModule
from .attention import LowRankLinear, factorised_parameter_count, rank_for_energy
from .config import SvdLowRankConfig
from .model import apply, dense_reference, lora_target_modules, module_stats, projection_flops

MODULE = AttentionModule(
    name="svd_lowrank",
    config_class=SvdLowRankConfig,
    apply=apply,
    folder=Path(__file__).parent,
    causal=True,
    bidirectional=True,
    gqa=True,
    citation=(
        "Denton, Zaremba, Bruna, LeCun and Fergus, Exploiting Linear Structure Within Convolutional Networks "
        "for Efficient Evaluation, NeurIPS 2014, https://arxiv.org/abs/1404.0736"
    ),
    bibtex="""@inproceedings{denton2014exploiting,
  title = {Exploiting Linear Structure Within Convolutional Networks for Efficient Evaluation},
  author = {Denton, Emily L. and Zaremba, Wojciech and Bruna, Joan and LeCun, Yann and Fergus, Rob},
  booktitle = {Advances in Neural Information Processing Systems 27},
  pages = {1269--1277},
  year = {2014},
  url = {https://arxiv.org/abs/1404.0736}
}""",
    trainable_modules=("svd_down", "svd_up"),
    stats=lambda model, lengths: module_stats(model),
    lora_targets=lora_target_modules,
    projection_flops=projection_flops,
    dense_reference=dense_reference,
    changes_parameter_count=True,  # the factors replace the projections
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
