"""`span_expanded`: attention over [memory ‖ current] keys and values (a Transformer-XL-style memory of up to
L_span earlier positions, empty for single sentences) plus the parallel low-rank HyLoRA branch X·A·B added
before the output projection."""

import importlib

from ..base import AttentionModule, Measurement, Paper, Training, imported_on_call
from .config import SpanExpandedConfig

# model.py and attention.py import torch: the hooks import them when first called, so that this folder (and
# `MODULE`, which the registry and the card read) imports without torch.
_TORCH_NAMES = {"apply": "model", "module_stats": "model", "segment_memory": "model"}
_module_stats = imported_on_call(f"{__name__}.model", "module_stats")

MODULE = AttentionModule(
    name="span_expanded",
    config_class=SpanExpandedConfig,
    function=imported_on_call(f"{__name__}.attention", "span_expanded_attention"),
    apply=imported_on_call(f"{__name__}.model", "apply"),
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
@inproceedings{hu2022lora,
  title = "{LoRA}: Low-Rank Adaptation of Large Language Models",
  author = {Hu, Edward J. and Shen, Yelong and Wallis, Phillip and Allen-Zhu, Zeyuan and Li, Yuanzhi
    and Wang, Shean and Wang, Lu and Chen, Weizhu},
  booktitle = {International Conference on Learning Representations},
  year = {2022},
  url = {https://arxiv.org/abs/2106.09685}
}""",
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


def __getattr__(name: str) -> object:
    """A name of `_TORCH_NAMES`, imported from its file when first read."""
    if name in _TORCH_NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_TORCH_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
