"""`adaptive_sparse`: exact top-k attention, each query attending only to its k highest-scoring keys."""

from pathlib import Path

from ..base import AttentionModule
from .attention import AdaptiveSparseState, adaptive_sparse_attention, kept_bias
from .config import AdaptiveSparseConfig
from .model import apply, attention_flops, module_stats

MODULE = AttentionModule(
    name="adaptive_sparse",
    config_class=AdaptiveSparseConfig,
    apply=apply,
    folder=Path(__file__).parent,
    causal=True,
    bidirectional=True,
    gqa=True,
    citation=(
        "Zhao, Lin, Zhang, Ren, Su and Sun, Explicit Sparse Transformer: Concentrated Attention Through "
        "Explicit Selection, 2019, https://arxiv.org/abs/1912.11637"
    ),
    bibtex="""@article{zhao2019explicit,
  title = {Explicit Sparse Transformer: Concentrated Attention Through Explicit Selection},
  author = {Zhao, Guangxiang and Lin, Junyang and Zhang, Zhiyuan and Ren, Xuancheng and Su, Qi
    and Sun, Xu},
  journal = {arXiv preprint arXiv:1912.11637},
  year = {2019},
  url = {https://arxiv.org/abs/1912.11637}
}""",
    stats=lambda model, lengths: module_stats(model),
    flops=attention_flops,
)

__all__ = [
    "MODULE",
    "AdaptiveSparseConfig",
    "AdaptiveSparseState",
    "adaptive_sparse_attention",
    "kept_bias",
    "module_stats",
]
