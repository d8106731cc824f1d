"""Citations that more than one layer prints: the card's BibTeX cites LoRA for every run, and a module that
builds on LoRA cites it among its own papers. Here, below both, so that one text serves them (the card
writes each entry once, by its first line).
"""

from __future__ import annotations

LORA_BIBTEX = """@inproceedings{hu2022lora,
  title = "{LoRA}: Low-Rank Adaptation of Large Language Models",
  author = {Hu, Edward J. and Shen, Yelong and Wallis, Phillip and Allen-Zhu, Zeyuan and Li, Yuanzhi
    and Wang, Shean and Wang, Lu and Chen, Weizhu},
  booktitle = {International Conference on Learning Representations},
  year = {2022},
  url = {https://arxiv.org/abs/2106.09685}
}"""
