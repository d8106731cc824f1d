"""Dense masked banded attention: the O(N²) ground truth the fast kernels are tested against."""

from __future__ import annotations

import torch


def dense_banded_reference(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    window: torch.Tensor,
    *,
    scaling: float,
    causal: bool = False,
    key_padding_mask: torch.Tensor | None = None,
    distance_bias: torch.Tensor | None = None,
    global_index: torch.Tensor | None = None,
) -> torch.Tensor:
    """Banded attention computed the obvious way: build the full (B, H, N, N) mask and bias, then softmax.

    Query i of head h may attend key j when |i - j| <= window[h] (and j <= i when causal), and key j is real.
    With a global token g = global_index[b], every query may also attend key g, and query g may attend every
    key (both still causal and padding-aware). The score of an allowed pair is
    ``scaling * q_i·k_j + distance_bias[h, |i - j|]``, the bias applying to band pairs (|i - j| <= W =
    max(window)); global pairs carry no bias, so the global token sees and is seen with full weight.
    A query with no allowed key, or whose allowed keys all score -inf, outputs zeros, and so does every
    padding query (key_padding_mask False at its position).

    Args:
        query, key, value: (B, H, N, D).
        window: (H,) integer per-head window; values >= N mean "the whole sequence".
        scaling: multiplier of q·k, usually D**-0.5.
        causal: additionally require j <= i.
        key_padding_mask: (B, N) bool, True for real tokens.
        distance_bias: (H, W + 1) float additive bias by distance; -inf entries mask those distances.
        global_index: (B,) int64 position of one global token per row.

    Returns:
        (B, H, N, D) attention output in the dtype of ``query``. Memory is O(B·H·N²).

    Example:
        >>> q = k = v = torch.randn(1, 2, 8, 4)
        >>> dense_banded_reference(q, k, v, torch.tensor([1, 3]), scaling=0.5).shape
        torch.Size([1, 2, 8, 4])
    """
    num_keys = key.shape[2]
    positions = torch.arange(num_keys, device=query.device)
    offset = positions[:, None] - positions[None, :]  # i - j
    distance = offset.abs()

    allowed = distance <= window.to(query.device)[:, None, None]  # (H, N, N)
    if causal:
        allowed = allowed & (offset >= 0)
    allowed = allowed[None]  # (1, H, N, N)
    if global_index is not None:
        is_global = positions[None, :] == global_index[:, None]  # (B, N)
        global_pair = is_global[:, None, :] | is_global[:, :, None]  # key j == g or query i == g: (B, N, N)
        if causal:
            global_pair = global_pair & (offset >= 0)
        allowed = allowed | global_pair[:, None]
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask[:, None, None, :]

    scores = scaling * torch.matmul(query.float(), key.float().transpose(-1, -2))
    if distance_bias is not None:
        max_window = min(int(window.max()), num_keys - 1)
        bias = distance_bias.float()[:, distance.clamp(max=max_window)]  # (H, N, N)
        bias = torch.where(distance <= max_window, bias, 0.0)[None]  # (1, H, N, N)
        if global_index is not None:  # global pairs carry no distance bias
            bias = torch.where(global_pair[:, None], 0.0, bias)
        scores = scores + bias
    scores = scores.masked_fill(~allowed, float("-inf"))

    # Rows with nothing to attend to would be softmax(-inf, ..., -inf) = NaN: give them zero weights instead.
    empty_row = torch.isneginf(scores).all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(empty_row, 0.0), dim=-1).masked_fill(empty_row, 0.0)
    output = torch.matmul(weights, value.float())
    if key_padding_mask is not None:
        output = output * key_padding_mask[:, None, :, None]
    return output.to(query.dtype)
