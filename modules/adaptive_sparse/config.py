"""Configuration of `adaptive_sparse`: how many keys each query keeps, and an optional warm-up."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AdaptiveSparseConfig:
    """Top-k attention: each query attends only to its k highest-scoring keys."""

    top_k: int = field(
        default=8,
        metadata={
            "help": "Keys kept per query and head (count, not a share): the k allowed keys with the highest "
            "scaled scores Q·Kᵀ/√d; all others get probability 0. A query with fewer than k allowed keys "
            "(short rows, early causal positions) keeps all of them. At 8, a 30-token SST-2 sentence keeps "
            "about a quarter of its keys."
        },
    )
    warmup_steps: int = field(
        default=0,
        metadata={
            "help": "Training forward passes (counted per layer; one per optimizer step in this pipeline's "
            "loop) that use full attention before top-k selection starts. 0: top-k from the first step. "
            "Evaluation always uses top-k."
        },
    )

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be at least 1; got {self.top_k}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be 0 or more; got {self.warmup_steps}")
