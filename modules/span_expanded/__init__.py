"""`span_expanded`: attention over [memory ‖ current] keys and values (a Transformer-XL-style memory of up to
L_span earlier positions, empty for single sentences) plus the parallel low-rank HyLoRA branch X·A·B added
before the output projection."""

from pathlib import Path

from ..base import AttentionModule
from .config import SpanExpandedConfig
from .model import apply, attention_flops, dense_reference, layer_attention, module_stats, segment_memory

MODULE = AttentionModule(
    name="span_expanded",
    config_class=SpanExpandedConfig,
    apply=apply,
    folder=Path(__file__).parent,
    causal=True,
    bidirectional=True,
    gqa=True,
    citation=(
        "Dai et al., Transformer-XL: Attentive Language Models beyond a Fixed-Length Context, ACL 2019, "
        "https://arxiv.org/abs/1901.02860 (segment memory); Hu et al., LoRA: Low-Rank Adaptation of Large "
        "Language Models, ICLR 2022, https://arxiv.org/abs/2106.09685 (the low-rank branch)"
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
    trainable_modules=("span_expanded",),
    stats=lambda model, lengths: module_stats(model),
    flops=attention_flops,
    dense_reference=dense_reference,
    layer_attention=layer_attention,
    changes_parameter_count=True,  # the HyLoRA branch of every layer
)

__all__ = ["MODULE", "SpanExpandedConfig", "apply", "module_stats", "segment_memory"]
