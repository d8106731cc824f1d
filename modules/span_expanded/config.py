"""Configuration of `span_expanded`: the memory span and the HyLoRA branch."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SpanExpandedConfig:
    """Settings of `span_expanded`, attention over [memory ‖ current] plus a parallel low-rank branch.

    Example:
        >>> SpanExpandedConfig(memory_length=64, hylora_rank=4).hylora_alpha
        16.0
    """

    memory_length: int = field(
        default=128,
        metadata={
            "help": "L_span: the most earlier positions each layer keeps as memory inside `segment_memory` "
            "(0 disables memory). Single sentences never see memory."
        },
    )
    hylora_rank: int = field(
        default=8, metadata={"help": "Rank r of the HyLoRA branch X·A·B added before the output projection."}
    )
    hylora_alpha: float = field(
        default=16.0, metadata={"help": "HyLoRA scaling numerator: the branch is multiplied by alpha / r."}
    )
    hylora_dropout: float = field(
        default=0.05, metadata={"help": "Dropout on the HyLoRA branch input X (training only)."}
    )

    def __post_init__(self) -> None:
        if self.memory_length < 0:
            raise ValueError(f"memory_length must be >= 0, got {self.memory_length}")
        if self.hylora_rank < 1:
            raise ValueError(f"hylora_rank must be >= 1, got {self.hylora_rank}")
        if not 0.0 <= self.hylora_dropout < 1.0:
            raise ValueError(f"hylora_dropout must be in [0, 1), got {self.hylora_dropout}")

    @property
    def hylora_scale(self) -> float:
        """The factor alpha / r the branch output is multiplied by."""
        return self.hylora_alpha / self.hylora_rank
