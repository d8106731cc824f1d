from dataclasses import dataclass, field


@dataclass
class SlidingWindowConfig:
    """Sliding-window attention (Beltagy et al., 2020, without global tokens): each query reads a band."""

    window: int = field(
        default=16,
        metadata={
            "help": "w, the farthest key a query attends to, in tokens: the 2·w + 1 keys within w positions "
            "in encoders, itself and the w keys before it in decoders."
        },
    )

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ValueError(f"window must be 0 or more, not {self.window}")
