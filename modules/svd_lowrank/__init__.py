"""`svd_lowrank`: the q/k/v/o projections replaced by their truncated SVD, the factors trained in full."""

from pathlib import Path

from ..base import AttentionModule
from .attention import LowRankLinear, factorised_parameter_count, rank_for_energy
from .config import SvdLowRankConfig
from .model import apply, lora_target_modules, module_stats

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
        "for Efficient Evaluation, NeurIPS 2014"
    ),
    trainable_modules=("svd_down", "svd_up"),
    stats=lambda model, lengths: module_stats(model),
    lora_targets=lora_target_modules,
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
