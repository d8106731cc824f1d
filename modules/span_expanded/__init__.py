"""`span_expanded`: attention over [memory ‖ current] keys and values (a Transformer-XL-style memory of up to
L_span earlier positions, empty for single sentences) plus the parallel low-rank HyLoRA branch X·A·B added
before the output projection."""

from ..base import (
    LORA_BIBTEX,
    AttentionModule,
    Measurement,
    Paper,
    Training,
    imported_on_call,
    imported_on_read,
)
from .config import SpanExpandedConfig

# model.py and attention.py import torch: the hooks import them when first called, so that this folder (and
# `MODULE`, which the registry and the card read) imports without torch.
_module_stats = imported_on_call(f"{__name__}.model", "module_stats")

MODULE = AttentionModule(
    name=__name__.rpartition(".")[2],  # the folder's name
    config_class=SpanExpandedConfig,
    function=imported_on_call(f"{__name__}.attention", "span_expanded_attention"),
    prepare=imported_on_call(f"{__name__}.model", "prepare"),
    paper=Paper(
        citation=(
            "Dai et al., Transformer-XL: Attentive Language Models beyond a Fixed-Length Context, ACL 2019, "
            "https://arxiv.org/abs/1901.02860 (segment memory); Hu et al., LoRA: Low-Rank Adaptation of "
            "Large Language Models, ICLR 2022, https://arxiv.org/abs/2106.09685 (the low-rank branch)"
        ),
        bibtex="""@inproceedings{dai2019transformerxl,
  title = {Transformer-{XL}: Attentive Language Models beyond a Fixed-Length Context},
  author = {Dai, Zihang and Yang, Zhilin and Yang, Yiming and Carbonell, Jaime and Le, Quoc
    and Salakhutdinov, Ruslan},
  booktitle = {Proceedings of the 57th Annual Meeting of the Association for Computational Linguistics},
  pages = {2978--2988},
  year = {2019},
  url = {https://arxiv.org/abs/1901.02860}
}
"""
        + LORA_BIBTEX,
    ),
    training=Training(trainable_modules=("span_expanded",)),
    measurement=Measurement(
        flops=imported_on_call(f"{__name__}.model", "attention_flops"),
        dense_reference=imported_on_call(f"{__name__}.model", "dense_reference"),
        layer_attention=imported_on_call(f"{__name__}.model", "layer_attention"),
        stats=lambda model, lengths: _module_stats(model),
    ),
)

__all__ = ["MODULE", "SpanExpandedConfig", "apply", "module_stats", "segment_memory"]

__getattr__ = imported_on_read(
    __name__, {"apply": "model", "module_stats": "model", "segment_memory": "model"}
)

# How the module contract (`attncard.testing`, tests/modules/test_module_contract.py) runs it: `config`
# changes attention on rows of 4 to 50 tokens; `dense_config` computes the model's own attention.
CONTRACT_CASE = dict(dense_config={})  # the branch's B starts at zero; no memory for one row
