from dataclasses import dataclass, field


@dataclass
class AdaptiveSpanConfig:
    """Adaptive attention span (Sukhbaatar et al., 2019): each head learns how far back it attends."""

    max_span: int = field(
        default=128,
        metadata={"help": "S_max, the longest span a head can learn, in tokens: z_h = S_max·σ(θ_h)."},
    )
    ramp: int = field(
        default=8,
        metadata={"help": "R, the length in tokens of the soft ramp from full weight to zero past the span."},
    )
    init_logit: float = field(
        default=4.0,
        metadata={"help": "Initial span logit θ_h of every head; 4.0 opens spans to 0.982·S_max."},
    )
    span_lr: float = field(
        default=0.05,
        metadata={"help": "Learning rate of the span logits θ; Adam moves θ by about this much per step."},
    )
    penalty: float = field(
        default=0.05,
        metadata={"help": "λ of the L1 span penalty λ·mean_h(z_h)/S_max added to the training loss."},
    )
    penalty_warmup_steps: int = field(
        default=100,
        metadata={
            "help": "Steps over which λ rises linearly from 0, so the task is learned before spans shrink."
        },
    )
    global_token: bool = field(
        default=True,
        metadata={
            "help": "Keep one global token per row, attending and attended by every position: the first "
            "token in encoders, the last real token in decoders."
        },
    )
