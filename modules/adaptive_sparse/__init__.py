"""`adaptive_sparse`: exact top-k attention, each query attending only to its k highest-scoring keys."""

from ..base import AttentionModule, Measurement, Paper, imported_on_call, imported_on_read
from .config import AdaptiveSparseConfig

# model.py and attention.py import torch: the hooks import them when first called, so that this folder (and
# `MODULE`, which the registry and the card read) imports without torch.
_module_stats = imported_on_call(f"{__name__}.model", "module_stats")

MODULE = AttentionModule(
    name=__name__.rpartition(".")[2],  # the folder's name
    config_class=AdaptiveSparseConfig,
    function=imported_on_call(f"{__name__}.attention", "adaptive_sparse_attention"),
    prepare=imported_on_call(f"{__name__}.model", "prepare"),
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

__getattr__ = imported_on_read(
    __name__,
    {
        "AdaptiveSparseState": "attention",
        "adaptive_sparse_attention": "attention",
        "kept_bias": "attention",
        "module_stats": "model",
    },
)

# How the module contract (`attncard.testing`, tests/modules/test_module_contract.py) runs it: `config`
# changes attention on rows of 4 to 50 tokens; `dense_config` computes the model's own attention.
CONTRACT_CASE = dict(config={"top_k": 2}, dense_config={"top_k": 512})  # k beyond every row
