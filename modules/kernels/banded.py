"""Banded (sliding-window) attention in plain torch: any device, autograd, memory linear in N.

Queries are cut into blocks of ``block`` rows. A block only needs the keys within W = max(window) of its
rows: the ``span = block + 2W`` positions starting W before it (``block + W`` when causal). So the scores are
one batched matmul of shape (B·H·blocks, block, span) instead of (B, H, N, N). Whether a (row, column) pair of
that grid is inside a head's band depends on the row and column only, not on the block, so the band mask and
the distance bias are one small (H, block, span) tensor shared by every block.

Each (batch, head) sequence is padded to a whole number of blocks, with W zeros in front, and all of them are
laid end to end. The key windows are then a strided view of that buffer (consecutive windows start ``block``
rows apart, even across heads), which ``bmm`` reads in place: K and V are never copied span/block times. The
few windows that straddle two heads belong to blocks past the end of the sequence and are dropped.

The global token adds one key column to every block's scores (the global key is masked out of the windows so
it is never counted twice) and one dense query row, computed separately and written over row g.

:func:`banded_attention_sdpa` is the faster forward: the same blocks and windows, but each group of blocks is
one call of the fused ``F.scaled_dot_product_attention`` (scores, mask, softmax and the product with V in one
pass, never storing the (block, span) scores), with the band, distance bias and key padding as a small float
mask. It gives no gradient to ``distance_bias``; :func:`modules.kernels.dispatch.banded_attention` picks it
whenever that gradient is not needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

# The fused CPU kernel that also returns the softmax's log-sum-exp (a private but stable ATen op).
_FLASH_CPU_OP = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)

# Disallowed scores. Finite, so that the fused softmax of a row with nothing to attend to is uniform instead
# of NaN; such rows are found by their max and zeroed. exp(MASKED - s) is exactly 0 next to any real score s.
MASKED = -1e30

# Queries per block. Smaller blocks waste less of the (block + 2W) key span on pairs outside the band; too
# small a block makes the matmuls inefficient (docs/benchmarks.md, "Kernel constants").
DEFAULT_BLOCK_SIZE = 32

# Queries per block of the fused path. Every block computes (block + 2W) scores per query for the 2W + 1 of
# its band, so small blocks waste less, down to where the fused kernel's per-block overhead wins
# (docs/benchmarks.md).
SDPA_BLOCK_SIZE = 32
# Query rows per fused call. Each call's (H, rows, D) result (and, with padding, its (H, rows, span) mask) is
# the temporary on top of the output it is copied into, so the peak is the output plus one call's share:
# the largest number of rows whose peak stays below unmasked fused SDPA's (docs/benchmarks.md).
SDPA_CHUNK_ROWS = 64


@dataclass(frozen=True)
class BandLayout:
    """How the sequence is cut: query blocks of ``block`` rows, each reading ``span`` keys starting
    ``left_pad`` positions before its first row; every (batch, head) is padded to ``blocks_per_head``."""

    block: int
    span: int
    left_pad: int
    blocks_per_head: int

    @classmethod
    def build(cls, length: int, max_window: int, causal: bool, block_size: int | None = None) -> BandLayout:
        block = block_size or DEFAULT_BLOCK_SIZE
        span = block + max_window if causal else block + 2 * max_window
        if span >= length:
            # The band covers (nearly) the whole sequence: a single dense block, no padding.
            return cls(block=length, span=length, left_pad=0, blocks_per_head=1)
        span = -(-span // block) * block  # whole blocks, for the backward of _BlocksTimesWindows
        real_blocks = -(-length // block)
        padded_length = (real_blocks - 1) * block + span  # the last real block's window must fit
        return cls(block=block, span=span, left_pad=max_window, blocks_per_head=-(-padded_length // block))

    @property
    def padded_length(self) -> int:
        return self.blocks_per_head * self.block


def banded_attention_torch(
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
    block_size: int | None = None,
) -> torch.Tensor:
    """Banded attention with per-head windows, optional causal mask, padding, distance bias and global token.

    Same semantics as :func:`modules.kernels.reference.dense_banded_reference`: query i of head h attends key
    j when |i - j| <= window[h] (and j <= i when causal) and key j is real; the global token g is attended by
    every query and attends every key; the score is ``scaling * q_i·k_j + distance_bias[h, |i - j|]`` for
    band pairs and carries no bias for global pairs. Queries with nothing to attend to, and padding queries,
    output zeros. Gradients flow to query, key, value and distance_bias.

    Args:
        query, key, value: (B, H, N, D).
        window: (H,) integer per-head window; values >= N mean "the whole sequence".
        scaling: multiplier of q·k, usually D**-0.5.
        causal: additionally require j <= i.
        key_padding_mask: (B, N) bool, True for real tokens.
        distance_bias: (H, W + 1) float additive bias by distance; -inf entries mask those distances.
        global_index: (B,) int64 position of one global token per row.
        block_size: queries per block; defaults to ``DEFAULT_BLOCK_SIZE``.

    Returns:
        (B, H, N, D) in the dtype of ``query``. Memory is O(B·H·N·(block + 2W)).

    Example:
        >>> q = k = v = torch.randn(2, 4, 1024, 32)
        >>> window = torch.tensor([8, 16, 32, 64])
        >>> out = banded_attention_torch(q, k, v, window, scaling=32**-0.5, causal=True)
        >>> out.shape
        torch.Size([2, 4, 1024, 32])
    """
    check_banded_inputs(query, key, value, window, key_padding_mask, distance_bias, global_index)
    batch, heads, length, head_dim = query.shape
    window = window.to(query.device).clamp(max=length - 1)
    max_window = int(window.max())
    layout = BandLayout.build(length, max_window, causal, block_size)
    blocks = batch * heads * layout.blocks_per_head

    key_valid = torch.ones(batch, length, dtype=torch.bool, device=query.device)
    if key_padding_mask is not None:
        key_valid = key_padding_mask.bool()
    if global_index is not None:
        # The global key gets its own score column below; masking it in the windows avoids counting it twice.
        key_valid = key_valid & (torch.arange(length, device=query.device) != global_index[:, None])

    # reshape, not view: the caller's query may be a transposed view; the product is a new tensor either way.
    query_blocks = F.pad(query, (0, 0, 0, layout.padded_length - length))
    query_blocks = query_blocks.reshape(blocks, layout.block, head_dim) * scaling
    # Padding enters as an additive bias rather than masked_fill: an add needs no extra tensor in backward.
    key_bias = torch.zeros(batch, length, 1, device=query.device).masked_fill_(~key_valid[:, :, None], MASKED)
    key_bias = _padded_sequences(key_bias, layout, pad_value=MASKED).unfold(0, layout.span, layout.block)
    key_bias = key_bias[: batch * layout.blocks_per_head].view(batch, 1, -1, 1, layout.span)
    band_bias = _band_bias(window, distance_bias, layout, causal)

    scores = _BlocksTimesWindows.apply(query_blocks, _padded_sequences(key, layout), layout, True)
    scores = scores.view(batch, heads, -1, layout.block, layout.span)
    scores = scores.float().add_(band_bias[:, None]).add_(key_bias)
    if global_index is not None:
        global_key = _gather_position(key, global_index).transpose(-1, -2)  # (B, H, D, 1)
        global_scores = torch.matmul(query_blocks.view(batch, heads, -1, head_dim), global_key).float()
        global_bias = _global_key_bias(global_index, key_padding_mask, causal, heads, length)
        global_bias = F.pad(global_bias, (0, layout.padded_length - length), value=MASKED)[..., None]
        global_scores = (global_scores + global_bias).view(batch, heads, -1, layout.block, 1)
        scores = torch.cat([scores, global_scores], dim=-1)

    with torch.no_grad():
        has_keys = scores.amax(dim=-1, keepdim=True) > MASKED / 2  # (B, H, blocks, block, 1)
    weights = torch.softmax(scores, dim=-1).to(value.dtype)
    band_weights = weights[..., : layout.span].reshape(blocks, layout.block, layout.span)
    output = _BlocksTimesWindows.apply(band_weights, _padded_sequences(value, layout), layout, False)
    output = output.view(batch, heads, -1, layout.block, head_dim)
    if global_index is not None:
        output = output + weights[..., layout.span :] * _gather_position(value, global_index)[:, :, None]

    keep = has_keys.view(batch, heads, layout.padded_length, 1)[:, :, :length]
    if key_padding_mask is not None:
        keep = keep & key_padding_mask[:, None, :, None]
    output = output.view(batch, heads, layout.padded_length, head_dim)[:, :, :length] * keep
    if global_index is not None:
        global_rows = global_query_rows(
            query,
            key,
            value,
            global_index,
            scaling=scaling,
            causal=causal,
            key_padding_mask=key_padding_mask,
        )  # (B, H, 1, D)
        rows = global_index.view(batch, 1, 1, 1).expand(-1, heads, 1, head_dim)
        output = output.scatter(2, rows, global_rows)
    return output.to(query.dtype)


def banded_attention_sdpa(
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
    block_size: int | None = None,
    chunk_rows: int | None = None,
) -> torch.Tensor:
    """Banded attention by fused SDPA on query blocks against their key windows: the fast forward.

    Same semantics and arguments as :func:`banded_attention_torch`. Queries are cut into blocks of ``block``
    rows (``SDPA_BLOCK_SIZE``); ``chunk_rows`` rows of blocks (``SDPA_CHUNK_ROWS``) of one batch row are one
    call of ``F.scaled_dot_product_attention``, with the blocks as its "heads" and the heads as its batch.
    Queries and key windows are strided views of the inputs, so a call copies nothing and stores no scores.
    The band and the distance bias are one (H, block, span) float mask shared by every block (one head's,
    when all windows are equal and there is no bias); key padding and the global key column make it per
    block, for that call only. The global key column joins each call through the log-sum-exp the CPU kernel
    returns (the call's output moves towards v_g by g's share of the softmax) when no gradient is needed;
    otherwise it is appended to the call's key windows, a copy of them. The few blocks at each end, whose
    windows would reach past the sequence, are a call of their own: all of them read one shared window of the
    keys they need (a stride-0 view), with a per-block band. Memory beyond the output is
    O(H·chunk_rows·(D + span)), never O(N²).

    Gradients flow to query, key and value (through SDPA's own backward) but not to ``distance_bias``: the
    fused kernels give an additive mask no gradient, so a ``distance_bias`` that requires grad (with grad
    enabled) raises ValueError; :func:`modules.kernels.dispatch.banded_attention` sends such calls to
    :func:`banded_attention_torch`.

    Example:
        >>> q = k = v = torch.randn(2, 4, 1024, 32)
        >>> window = torch.tensor([8, 16, 32, 64])
        >>> out = banded_attention_sdpa(q, k, v, window, scaling=32**-0.5, causal=True)
        >>> expected = banded_attention_torch(q, k, v, window, scaling=32**-0.5, causal=True)
        >>> torch.allclose(out, expected, atol=1e-5)
        True
    """
    check_banded_inputs(query, key, value, window, key_padding_mask, distance_bias, global_index)
    if distance_bias is not None and distance_bias.requires_grad and torch.is_grad_enabled():
        raise ValueError(
            "banded_attention_sdpa gives no gradient to distance_bias; use banded_attention_torch "
            "(banded_attention picks it by itself)"
        )
    batch, heads, length, head_dim = query.shape
    window = window.to(query.device).clamp(max=length - 1)
    layout = _sdpa_layout(length, int(window.max()), causal, block_size)
    # The same band for every head: one mask, built and read for one head only. (Below the size at which
    # torch splits an op across threads, an op wakes no threads: wake-ups dominate on a busy machine.)
    uniform = distance_bias is None and bool((window == window[0]).all())
    band_window = window[:1] if uniform else window
    band = _band_bias(band_window, distance_bias, layout, causal)  # (H or 1, block, span)
    band = band[:, None].to(query.dtype)  # (H or 1, 1, block, span): broadcast over the blocks of a call

    key_bias = None  # (B, N, 1) additive bias of each key position; None when every key is valid
    if key_padding_mask is not None or global_index is not None:
        key_valid = torch.ones(batch, length, dtype=torch.bool, device=query.device)
        if key_padding_mask is not None:
            key_valid = key_padding_mask.bool()
        if global_index is not None:
            # The global key gets its own column; masking it in the windows avoids counting it twice.
            key_valid = key_valid & (torch.arange(length, device=query.device) != global_index[:, None])
            global_bias = _global_key_bias(global_index, key_padding_mask, causal, 1, length)[:, 0]  # (B, N)
        key_bias = torch.zeros(batch, length, 1, dtype=query.dtype, device=query.device)
        key_bias = key_bias.masked_fill_(~key_valid[:, :, None], MASKED)
    # Without padding or distance bias, every query attends at least its own key (the global row, whose own
    # key is masked in its window, is computed apart): no row can be empty, nothing to check.
    may_be_empty = key_padding_mask is not None or distance_bias is not None

    # The global key column joins each call's softmax through the kernel's log-sum-exp (no copy of the key
    # windows to append it to) where the CPU kernel returns it and no gradient flows: the log-sum-exp output
    # has no derivative, so with autograd the column is appended to the keys.
    merge_global = (
        global_index is not None
        and query.device.type == "cpu"
        and _FLASH_CPU_OP is not None
        and not (torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)))
    )
    block, span = layout.block, layout.span
    calls = _sdpa_calls(layout, length, max(1, (chunk_rows or SDPA_CHUNK_ROWS) // block))
    # Each call's result is copied into place as it comes, so the peak is the output and one call's result; a
    # single call's result is the output.
    single_call = batch == 1 and len(calls) == 1
    output = None if single_call else query.new_empty(query.shape)
    for b in range(batch):
        all_keys_valid = key_bias is None or bool((key_bias[b] == 0).all())
        for first, count in calls:
            start = first * block
            stop = min(start + count * block, length)
            window_start = start - layout.left_pad
            queries = _windows(query[b], start, count, block, block)  # (H, count, block, D)
            if window_start < 0 or window_start + (count - 1) * block + span > length:
                # The blocks at the sequence ends all read one shared window, the keys that all their rows
                # need, in place (a stride-0 view) with a per-block band: no padded copies of K and V.
                key_start = max(0, window_start)
                key_stop = min(length, start + count * block + span - block - layout.left_pad)
                keys = key[b, :, None, key_start:key_stop].expand(-1, count, -1, -1)  # (H, count, S, D)
                values = value[b, :, None, key_start:key_stop].expand(-1, count, -1, -1)
                rows = torch.arange(start, start + count * block, device=query.device).view(count, block, 1)
                offset = rows - torch.arange(key_start, key_stop, device=query.device)  # i - j
                mask = _offset_bias(band_window, distance_bias, offset, causal).to(query.dtype)
                if key_bias is not None:
                    mask = mask + key_bias[b, key_start:key_stop, 0]  # (H or 1, count, block, S)
            else:
                keys = _windows(key[b], window_start, count, span, block)  # (H, count, span, D): a view
                values = _windows(value[b], window_start, count, span, block)
                mask = band
                if not all_keys_valid:
                    columns = _windows(key_bias[b], window_start, count, span, block)[..., 0]  # (count, span)
                    mask = band + columns[:, None]  # (H or 1, count, block, span)
            rows_bias = None  # (count, block, 1): the bias of each query row towards the global key
            if global_index is not None:
                rows_bias = _windows(global_bias[b, :, None], start, count, block, block, pad_value=MASKED)
            # The highest bias of each row, to find the rows with no key at all (before a global column).
            reach = mask.amax(dim=-1) if may_be_empty else None
            if merge_global:
                attended, log_sum = _FLASH_CPU_OP(
                    queries, keys, values, 0.0, False, attn_mask=mask, scale=scaling
                )[:2]
                # softmax over the window and the global key g: the window's output moves towards v_g by g's
                # share σ(s_ig − logsumexp(window)), s_ig with the row's bias (MASKED where i may not see g).
                g = int(global_index[b])
                logit = torch.matmul(queries, key[b, :, None, g, :, None]).float().mul_(scaling)
                logit = logit.add_(rows_bias).sub_(log_sum[..., None])  # (H, count, block, 1)
                attended.lerp_(value[b, :, None, g : g + 1, :], logit.sigmoid_().to(attended.dtype))
                if reach is not None:
                    reach = torch.maximum(reach, rows_bias[..., 0].to(reach.dtype))
            else:
                if global_index is not None:
                    global_key = _gather_position(key, global_index)[b, :, None].expand(-1, count, 1, -1)
                    global_value = _gather_position(value, global_index)[b, :, None].expand(-1, count, 1, -1)
                    keys = torch.cat([keys, global_key], dim=2)
                    values = torch.cat([values, global_value], dim=2)
                    mask = mask.expand(-1, count, -1, -1)
                    mask = torch.cat(
                        [mask, rows_bias.to(query.dtype).expand(mask.shape[0], -1, -1, -1)], dim=-1
                    )
                    reach = mask.amax(dim=-1) if may_be_empty else None
                attended = F.scaled_dot_product_attention(
                    queries, keys, values, attn_mask=mask, scale=scaling
                )
            attended = attended.flatten(1, 2)[:, : stop - start]  # (H, rows, D)
            if may_be_empty:
                # Rows whose mask is all MASKED got a uniform softmax, and padding queries output zeros.
                keep = (reach > MASKED / 2).expand(-1, count, -1).flatten(1, 2)[:, : stop - start]
                if key_padding_mask is not None:
                    keep = keep & key_padding_mask[b, start:stop]
                if not bool(keep.all()):
                    attended = torch.where(keep[..., None], attended, 0.0)
            if single_call:
                output = attended[None]
            else:
                output[b, :, start:stop] = attended

    if global_index is not None:
        global_rows = global_query_rows(
            query,
            key,
            value,
            global_index,
            scaling=scaling,
            causal=causal,
            key_padding_mask=key_padding_mask,
        )  # (B, H, 1, D)
        rows = global_index.view(batch, 1, 1, 1).expand(-1, heads, 1, head_dim)
        # In place when no gradient flows: a copy of the whole output for one row per head would be the peak.
        # With autograd the output may be SDPA's own, which its backward reads, so it is not overwritten.
        if output.requires_grad:
            output = output.scatter(2, rows, global_rows)
        else:
            output.scatter_(2, rows, global_rows)
    return output


def _sdpa_layout(length: int, max_window: int, causal: bool, block_size: int | None) -> BandLayout:
    """Blocks of the fused path: each block's window is exactly the ``block + W (+ W)`` keys its rows need
    (SDPA has no backward to round it for), or a single block over the whole sequence when that is shorter."""
    block = block_size or SDPA_BLOCK_SIZE
    span = block + max_window if causal else block + 2 * max_window
    if span >= length:
        return BandLayout(block=length, span=length, left_pad=0, blocks_per_head=1)
    return BandLayout(block=block, span=span, left_pad=max_window, blocks_per_head=-(-length // block))


def _sdpa_calls(layout: BandLayout, length: int, per_call: int) -> list[tuple[int, int]]:
    """(first block, block count) of each fused call: the blocks whose windows reach before the sequence, the
    blocks whose windows (or rows) reach past it, and the blocks between, at most ``per_call`` per call.

    Only the end calls need padded copies of their keys and a per-block mask; keeping them apart lets every
    other call read its windows in place with the one shared band mask.

    Example:
        >>> _sdpa_calls(BandLayout(block=32, span=160, left_pad=64, blocks_per_head=32), 1024, 8)
        [(0, 2), (2, 8), (10, 8), (18, 8), (26, 4), (30, 2)]
    """
    blocks = layout.blocks_per_head
    head_end = min(blocks, -(-layout.left_pad // layout.block))  # block f reads from f·block - left_pad
    # Block f's window ends at f·block - left_pad + span: past N from this block on.
    tail_start = max(head_end, min(blocks, (length - layout.span + layout.left_pad) // layout.block + 1))
    calls = []
    for region_start, region_end in ((0, head_end), (head_end, tail_start), (tail_start, blocks)):
        for first in range(region_start, region_end, per_call):
            calls.append((first, min(per_call, region_end - first)))
    return calls


def _windows(
    states: torch.Tensor, first_row: int, count: int, size: int, step: int, pad_value: float = 0.0
) -> torch.Tensor:
    """(..., N, D) -> (..., count, size, D): ``count`` windows of ``size`` rows, window f starting at row
    ``first_row + f·step``; rows outside [0, N) read ``pad_value``.

    A strided view of ``states`` when every window lies inside it; otherwise a view of a padded copy of just
    the rows the windows cover.
    """
    length = states.shape[-2]
    last_row = first_row + (count - 1) * step + size
    segment = states[..., max(first_row, 0) : min(last_row, length), :]
    if first_row < 0 or last_row > length:
        segment = F.pad(segment, (0, 0, max(-first_row, 0), max(last_row - length, 0)), value=pad_value)
    return segment.unfold(-2, size, step).transpose(-1, -2)


def check_banded_inputs(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    window: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
    distance_bias: torch.Tensor | None,
    global_index: torch.Tensor | None,
    values: bool = True,
) -> None:
    """Raise ValueError unless the shapes agree with the (B, H, N, D) convention of the banded kernels.

    `values=False` checks the shapes only, not the windows' and global positions' values (each a tensor
    operation, some 10 µs a call): for the compiled kernel, which checks those itself.
    """
    if query.dim() != 4 or key.shape != query.shape or value.shape != query.shape:
        raise ValueError(
            f"query, key, value must share one (B, H, N, D) shape, got {query.shape}, "
            f"{key.shape}, {value.shape}"
        )
    batch, heads, length, _ = query.shape
    if window.shape != (heads,) or window.is_floating_point() or (values and bool((window < 0).any())):
        raise ValueError(f"window must be ({heads},) non-negative integers, got {window}")
    if key_padding_mask is not None and key_padding_mask.shape != (batch, length):
        raise ValueError(f"key_padding_mask must be ({batch}, {length}), got {tuple(key_padding_mask.shape)}")
    reach = min(int(window.max()), length - 1) if values else 0
    if distance_bias is not None and (
        distance_bias.dim() != 2 or distance_bias.shape[0] != heads or distance_bias.shape[1] <= reach
    ):
        raise ValueError(
            f"distance_bias must be ({heads}, W + 1) with W >= {reach}, got {tuple(distance_bias.shape)}"
        )
    if global_index is not None and (
        global_index.shape != (batch,)
        or (values and bool((global_index < 0).any() | (global_index >= length).any()))
    ):
        raise ValueError(f"global_index must be ({batch},) positions in [0, {length}), got {global_index}")


def _padded_sequences(states: torch.Tensor, layout: BandLayout, pad_value: float = 0.0) -> torch.Tensor:
    """(..., N, D) -> ((prod(...) + 1)·padded_length, D): every sequence padded and laid end to end.

    Each sequence gets ``left_pad`` rows of ``pad_value`` in front and is padded to ``padded_length``, so the
    window of block f is rows [f·block, f·block + span). One extra padded sequence at the end keeps the
    windows of the last sequence's trailing blocks inside the buffer.
    """
    flat = states.flatten(0, -3)  # (B·H, N, D), or (B, N, 1) for the key mask
    right_pad = layout.padded_length - layout.left_pad - flat.shape[1]
    return F.pad(flat, (0, 0, layout.left_pad, right_pad, 0, 1), value=pad_value).flatten(0, 1)


class _BlocksTimesWindows(torch.autograd.Function):
    """Batched product of per-block matrices with the overlapping windows of a padded buffer (a strided view).

    ``keys=True``: scores = blocks @ windowᵀ, blocks (n, block, D). ``keys=False``: outputs = blocks @ window,
    blocks (n, block, span). Window f is rows [f·block, f·block + span) of the (rows, D) buffer.

    Plain autograd through the window view would build the (n, span, D) gradient of all windows, span/block
    times the size of the buffer, before summing the overlaps. As span is a whole number of blocks, the
    backward adds the gradient one block-wide slice at a time straight into the buffer's gradient instead.
    """

    @staticmethod
    def forward(
        ctx, blocks: torch.Tensor, buffer: torch.Tensor, layout: BandLayout, keys: bool
    ) -> torch.Tensor:
        windows = buffer.unfold(0, layout.span, layout.block)[: blocks.shape[0]]  # (n, D, span)
        ctx.save_for_backward(blocks, buffer)
        ctx.layout, ctx.keys = layout, keys
        return torch.bmm(blocks, windows if keys else windows.transpose(1, 2))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        blocks, buffer = ctx.saved_tensors
        block, span = ctx.layout.block, ctx.layout.span
        count = blocks.shape[0]
        windows = buffer.unfold(0, span, block)[:count]
        grad_blocks = grad_buffer = None
        if ctx.needs_input_grad[0]:
            grad_blocks = torch.bmm(grad, windows.transpose(1, 2) if ctx.keys else windows)
        if ctx.needs_input_grad[1]:
            # Gradient of window f as a (span, D) matrix: grad[f]ᵀ @ blocks[f] (keys) or blocks[f]ᵀ @ grad[f].
            left, right = (grad, blocks) if ctx.keys else (blocks, grad)
            grad_buffer = torch.zeros_like(buffer)
            chunks = grad_buffer.view(-1, block, buffer.shape[1])  # chunk f + t is slice t of window f
            for t in range(span // block):
                chunks[t : t + count].baddbmm_(left[:, :, t * block : (t + 1) * block].transpose(1, 2), right)
        return grad_blocks, grad_buffer, None, None


def _band_bias(
    window: torch.Tensor, distance_bias: torch.Tensor | None, layout: BandLayout, causal: bool
) -> torch.Tensor:
    """(H, block, span) additive bias of block row r against window column c: the distance bias inside the
    head's band, MASKED outside it (and for -inf bias entries)."""
    rows = torch.arange(layout.block, device=window.device)
    columns = torch.arange(layout.span, device=window.device)
    offset = rows[:, None] + layout.left_pad - columns  # i - j for i = start + r, j = start - left_pad + c
    return _offset_bias(window, distance_bias, offset, causal)


def _offset_bias(
    window: torch.Tensor, distance_bias: torch.Tensor | None, offset: torch.Tensor, causal: bool
) -> torch.Tensor:
    """(H, *offset.shape) additive bias of the pairs whose i - j is ``offset``: the distance bias inside
    each head's band, MASKED outside it (and for -inf bias entries)."""
    distance = offset.abs()
    in_band = distance <= window.view(-1, *[1] * offset.dim())
    if causal:
        in_band = in_band & (offset >= 0)
    if distance_bias is None:
        bias = torch.zeros(in_band.shape, device=window.device)
    else:
        bias = distance_bias.float()[:, distance.clamp(max=int(window.max()))].clamp(min=MASKED)
    return bias.masked_fill(~in_band, MASKED)


def _gather_position(states: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """states[b, :, index[b]] as (B, H, 1, D)."""
    batch, heads, _, head_dim = states.shape
    return states.gather(2, index.view(batch, 1, 1, 1).expand(-1, heads, 1, head_dim))


def _global_key_bias(
    global_index: torch.Tensor,
    key_padding_mask: torch.Tensor | None,
    causal: bool,
    heads: int,
    length: int,
) -> torch.Tensor:
    """(B, H, N) bias of query i towards the global key g: 0 (global pairs carry no distance bias), MASKED
    where query i may not attend g."""
    offset = torch.arange(length, device=global_index.device) - global_index[:, None]  # i - g: (B, N)
    bias = torch.zeros(global_index.shape[0], heads, length, device=global_index.device)
    allowed = torch.ones_like(offset, dtype=torch.bool) if not causal else offset >= 0
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask.gather(1, global_index[:, None])
    return bias.masked_fill(~allowed[:, None], MASKED)


def global_query_rows(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    global_index: torch.Tensor,
    *,
    scaling: float,
    causal: bool,
    key_padding_mask: torch.Tensor | None,
) -> torch.Tensor:
    """Output of the global query g = global_index[b], attending every real (and causal) key with no distance
    bias: (B, H, 1, D).

    Zeros when row g has nothing to attend to or is itself padding.
    """
    length = key.shape[2]
    global_query = _gather_position(query, global_index) * scaling
    scores = torch.matmul(global_query, key.transpose(-1, -2)).float()  # (B, H, 1, N)
    offset = global_index[:, None] - torch.arange(length, device=query.device)  # g - j: (B, N)
    allowed = torch.ones_like(offset, dtype=torch.bool) if not causal else offset >= 0
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask
    scores = scores.masked_fill(~allowed[:, None, None], MASKED)
    keep = scores.amax(dim=-1, keepdim=True) > MASKED / 2
    if key_padding_mask is not None:
        keep = keep & key_padding_mask.gather(1, global_index[:, None])[:, :, None, None]
    return torch.matmul(torch.softmax(scores, dim=-1).to(value.dtype), value) * keep
