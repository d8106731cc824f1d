"""Configuration of `svd_lowrank`: how far each attention projection is truncated."""

from __future__ import annotations

from dataclasses import dataclass, field

PROJECTIONS = ("q", "k", "v", "o")


@dataclass
class SvdLowRankConfig:
    """Which attention projections are replaced by a rank-r factorisation, and the rank."""

    rank: int = field(
        default=96,
        metadata={
            "help": "Rank r kept per projection matrix (singular values, largest first); capped at "
            "min(in, out). A matrix W of shape out × in then holds r·(in + out) weights instead of "
            "in·out: at 96, a 384 × 384 MiniLM projection keeps half its weights. Ignored when energy is set."
        },
    )
    energy: float | None = field(
        default=None,
        metadata={
            "help": "Alternative to rank: per matrix, the smallest r whose singular values keep at least "
            "this share (0 < energy ≤ 1) of the sum of squared singular values (the squared Frobenius "
            "norm). Unset: use rank."
        },
    )
    projections: tuple[str, ...] = field(
        default=PROJECTIONS,
        metadata={
            "help": "Projections to factorise, a subset of q, k, v (query, key, value) and o (output). "
            "GPT-2 fuses q, k and v into one c_attn matrix, factorised as one when any of them is named."
        },
    )

    def __post_init__(self) -> None:
        self.projections = tuple(self.projections)
        if self.rank < 1:
            raise ValueError(f"rank must be at least 1; got {self.rank}")
        if self.energy is not None and not 0.0 < self.energy <= 1.0:
            raise ValueError(f"energy must lie in (0, 1]; got {self.energy}")
        unknown = [name for name in self.projections if name not in PROJECTIONS]
        if unknown or not self.projections:
            raise ValueError(
                f"projections must be a non-empty subset of {PROJECTIONS}; got {self.projections}"
            )
