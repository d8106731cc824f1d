"""`svd_lowrank`: the rank-r factorised projection, and the (unchanged) attention function.

A projection y = W·x + b, with W of shape (out, in), is replaced by y = U_r·(V_r·x) + b, where
W ≈ U_r·V_r is its truncated singular value decomposition W = U·diag(S)·Vᵀ cut to the r largest singular
values, with √S split evenly between the factors:

    svd_down.weight = diag(√S_r)·V_rᵀ    (r, in)    no bias
    svd_up.weight   = U_r·diag(√S_r)     (out, r)   the original bias

By the Eckart–Young theorem this is the best rank-r approximation of W in the Frobenius and spectral norms.
Splitting √S evenly keeps both factors on the same scale, so neither dominates their gradients when they
are trained. The attention between the projections is transformers' own SDPA.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from ..none.attention import none_attention


def factorised_parameter_count(in_features: int, out_features: int, rank: int, bias: bool = True) -> int:
    """Parameters of a rank-`rank` factorised projection: r·(in + out), plus the bias.

    Args:
        in_features: input width of the projection.
        out_features: output width of the projection.
        rank: the rank r kept.
        bias: whether the projection has a bias (kept on `svd_up`).

    Returns:
        The number of scalars in `svd_down` and `svd_up` together.

    Example:
        >>> factorised_parameter_count(384, 384, 96)  # a MiniLM projection: 147,840 before
        74112
    """
    return rank * (in_features + out_features) + (out_features if bias else 0)


def rank_for_energy(singular_values: torch.Tensor, energy: float) -> int:
    """The smallest r whose r largest singular values hold at least `energy` of the sum of their squares.

    Args:
        singular_values: 1-D, in decreasing order (as `torch.linalg.svd` returns them).
        energy: the share of Σ S² to keep, in (0, 1].

    Returns:
        r, between 1 and `len(singular_values)`.

    Example:
        >>> rank_for_energy(torch.tensor([4.0, 3.0, 2.0, 1.0]), 0.8)  # 16/30 < 0.8 ≤ 25/30
        2
    """
    squares = singular_values.double() ** 2
    total = squares.sum()
    if total == 0:  # a zero matrix: rank 1 represents it exactly
        return 1
    kept = squares.cumsum(0) / total
    # The tolerance keeps an energy that equals a prefix share exactly from spilling into the next value.
    rank = int((kept < energy - 1e-12).sum().item()) + 1
    return min(rank, len(singular_values))


def projection_matrix(projection: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`(W, b)` of a projection as y = W·x + b, with W of shape (out, in).

    `nn.Linear` stores W as (out, in); GPT-2's `Conv1D` computes x·W + b and stores W as (in, out).

    Raises:
        TypeError: the projection is neither (for example a peft LoRA layer: install the module first).
    """
    if isinstance(projection, nn.Linear):
        return projection.weight, projection.bias
    if isinstance(projection, Conv1D):
        return projection.weight.t(), projection.bias
    raise TypeError(
        "svd_lowrank factorises nn.Linear and transformers' Conv1D projections, not "
        f"{type(projection).__name__} (install the module before wrapping the model with peft)"
    )


class LowRankLinear(nn.Module):
    """A projection factorised as y = svd_up(svd_down(x)): in → rank → out.

    Args:
        in_features: input width.
        out_features: output width.
        rank: the inner width r.
        bias: whether `svd_up` has a bias (the original projection's).
        source: class name of the projection it replaces (`Linear` or `Conv1D`), for the card.
        energy_kept: share of the original matrix's squared singular values the factors keep.

    The factors are named `svd_down` and `svd_up` so that peft's `modules_to_save` can name them.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        rank: int,
        bias: bool = True,
        *,
        source: str = "Linear",
        energy_kept: float = 1.0,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.rank = rank
        self.source = source
        self.energy_kept = energy_kept
        self.svd_down = nn.Linear(in_features, rank, bias=False, device=device, dtype=dtype)
        self.svd_up = nn.Linear(rank, out_features, bias=bias, device=device, dtype=dtype)

    @classmethod
    def from_projection(
        cls, projection: nn.Module, rank: int | None = None, energy: float | None = None
    ) -> LowRankLinear:
        """The truncated SVD of a pretrained projection, as a `LowRankLinear`.

        Args:
            projection: an `nn.Linear`, or transformers' `Conv1D` (GPT-2).
            rank: the rank to keep, capped at min(in, out). Ignored when `energy` is given.
            energy: keep the smallest rank holding this share of the squared singular values.

        Returns:
            A `LowRankLinear` on the projection's device and dtype. At full rank it computes what the
            projection computed, up to floating-point rounding.

        Example:
            >>> low = LowRankLinear.from_projection(nn.Linear(384, 384), rank=96)
            >>> low.svd_down.weight.shape, low.svd_up.weight.shape
            (torch.Size([96, 384]), torch.Size([384, 96]))
        """
        if (rank is None) == (energy is None):
            raise ValueError("give exactly one of rank and energy")
        weight, bias = projection_matrix(projection)
        out_features, in_features = weight.shape
        # float64: the factors are exact to float32 rounding even for ill-conditioned matrices.
        u, s, vh = torch.linalg.svd(weight.detach().double(), full_matrices=False)
        r = rank_for_energy(s, energy) if energy is not None else min(rank, len(s))
        squares = s**2
        energy_kept = float(squares[:r].sum() / squares.sum()) if squares.sum() > 0 else 1.0
        root = s[:r].sqrt()
        low = cls(
            in_features,
            out_features,
            r,
            bias=bias is not None,
            source=type(projection).__name__,
            energy_kept=energy_kept,
            device=weight.device,
            dtype=weight.dtype,
        )
        with torch.no_grad():
            low.svd_down.weight.copy_((root[:, None] * vh[:r]).to(weight.dtype))
            low.svd_up.weight.copy_((u[:, :r] * root[None, :]).to(weight.dtype))
            if bias is not None:
                low.svd_up.bias.copy_(bias.detach())
        return low

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., in) → (..., out)."""
        return self.svd_up(self.svd_down(x))

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}, "
            f"source={self.source}, energy_kept={self.energy_kept:.4f}"
        )


def svd_lowrank_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """The model's own attention, unchanged (`none`'s function): svd_lowrank changes the projections around
    attention, not attention itself. Shapes as in `modules.none.attention.none_attention`."""
    return none_attention(module, query, key, value, attention_mask, **kwargs)
