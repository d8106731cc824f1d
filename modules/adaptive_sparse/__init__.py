"""`adaptive_sparse`: exact top-k attention, each query attending only to its k highest-scoring keys."""

import importlib

from ..base import AttentionModule, Measurement, Paper, imported_on_call
from .config import AdaptiveSparseConfig

# model.py and attention.py import torch: the hooks import them when first called, so that this folder (and
# `MODULE`, which the registry and the card read) imports without torch.
_TORCH_NAMES = {
    "AdaptiveSparseState": "attention",
    "adaptive_sparse_attention": "attention",
    "kept_bias": "attention",
    "module_stats": "model",
}
_module_stats = imported_on_call(f"{__name__}.model", "module_stats")

MODULE = AttentionModule(
    name="adaptive_sparse",
    config_class=AdaptiveSparseConfig,
    function=imported_on_call(f"{__name__}.attention", "adaptive_sparse_attention"),
    apply=imported_on_call(f"{__name__}.model", "apply"),
    paper=Paper(
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
    ),
    measurement=Measurement(
        flops=imported_on_call(f"{__name__}.model", "attention_flops"),
        stats=lambda model, lengths: _module_stats(model),
    ),
)

__all__ = [
    "MODULE",
    "AdaptiveSparseConfig",
    "AdaptiveSparseState",
    "adaptive_sparse_attention",
    "kept_bias",
    "module_stats",
]


def __getattr__(name: str) -> object:
    """A name of `_TORCH_NAMES`, imported from its file when first read."""
    if name in _TORCH_NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_TORCH_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
