"""Adaptive attention span (Sukhbaatar et al., 2019, "Adaptive Attention Span in Transformers").

Each head h learns a span z_h = S_max·σ(θ_h). A key at distance x from the query is weighted by the soft
ramp mask

    m_h(x) = clamp((R + z_h − x) / R, 0, 1)

(full weight up to z_h, falling linearly to zero at z_h + R), applied as the additive bias log m_h(x) before
the softmax — softmax(s + log m) is the paper's m·exp(s) renormalised — so θ receives gradients through the
ramp. Distances are |i − j| in encoders and i − j ≥ 0 (past only) in decoders. One global token per row
attends to and is attended by every position with full weight. Keys beyond z_h + R get weight zero, so a
head only reads a band of ⌈z_h + R⌉ − 1 keys on each side. At inference each call takes the fastest
exact path: plain SDPA when every span covers the sequence; below a crossover length measured after training
([`AdaptiveSpan.crossover`]) fused SDPA, in one call with the whole span bias as its mask up to
`WHOLE_MASK_LENGTH` tokens, beyond that on batches of blocks of query rows and their key windows, read in
place, with one block's bias as the mask of every block; and from the crossover the banded kernel, in memory
linear in the sequence length: on the CPU one compiled kernel in which each query reads only its band of keys
(`modules/kernels/banded_cpu.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.integrations.sdpa_attention import repeat_kv

from ..base import global_token_index, padding_and_causality
from ..kernels import banded_attention
from ..trace import trace_step

# Sequence lengths at which `calibrate_crossover` measures the fused path against the banded kernel.
CALIBRATION_LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096)
# The crossover of a layer never calibrated (whose adapter holds no measured one): one past the longest
# calibration length, so that inference keeps the fused path, which is exact, wherever it can run. Every run
# of the pipeline measures its own crossover.
DEFAULT_CROSSOVER = 4097
# Up to this length the fused path is one fused SDPA call over the whole sequence, the span bias an (N, N)
# mask; beyond it, blocks of query rows, which on short sequences cost more than they save: their several
# calls and the global token's two corrections. spec.md has the measurements behind it.
WHOLE_MASK_LENGTH = 128
# Query rows per block of the fused path beyond `WHOLE_MASK_LENGTH`. Each block reads the keys within the
# band's width W of its rows, block + 2W of them for the 2W + 1 of each row's band, so small blocks waste
# less; the blocks of a call are one batched fused call, which keeps small blocks efficient (spec.md).
FUSED_BLOCK_ROWS = 32
# Query rows per fused call (16 blocks of 32): each call's result is the temporary beside the output it is
# copied into, 0.75 MiB with MiniLM's 12 heads of 32.
FUSED_CALL_ROWS = 512
# Entries each of a layer's caches holds (plans by length, masks by band) before it starts afresh.
CACHED_ENTRIES = 8
# The fused path reads the softmax normaliser from this CPU kernel (a private but stable ATen op).
_FUSED_CPU_OP = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


class AdaptiveSpan(nn.Module):
    """The learnable spans of one attention layer: one logit θ_h per head, and the measured length from which
    inference is faster on the banded kernel (`crossover`, saved with the adapter).

    Example:
        >>> spans = AdaptiveSpan(num_heads=12, max_span=128, ramp=8, init_logit=4.0)
        >>> spans.spans().shape
        torch.Size([12])
    """

    def __init__(
        self, num_heads: int, max_span: int, ramp: int, init_logit: float, global_token: bool = True
    ):
        super().__init__()
        self.span_logits = nn.Parameter(torch.full((num_heads,), float(init_logit)))
        self.max_span = max_span
        self.ramp = ramp
        self.global_token = global_token
        # Persistent buffers: peft's modules_to_save saves them with the adapter, so a reloaded run dispatches
        # as the evaluated one did. `calibration` rows hold a measured length and the median seconds of the
        # fused path and of the banded kernel there, then their peak memory in MB (NaN rows: not measured).
        self.register_buffer("crossover", torch.tensor(DEFAULT_CROSSOVER, dtype=torch.long))
        self.register_buffer("calibration", torch.full((len(CALIBRATION_LENGTHS), 5), math.nan))

    def spans(self) -> torch.Tensor:
        """z_h = S_max·σ(θ_h), in tokens: (H,)."""
        return self.max_span * torch.sigmoid(self.span_logits)

    def windows(self, length: int) -> torch.Tensor:
        """Per head, the farthest distance with non-zero weight, ⌈z_h + R⌉ − 1, capped at length − 1: (H,)."""
        reach = torch.ceil(self.spans().detach() + self.ramp).long() - 1
        return reach.clamp(min=0, max=max(length - 1, 0))

    def log_mask(self, max_distance: int) -> torch.Tensor:
        """log m_h(x) for x = 0 … max_distance: (H, max_distance + 1), −inf where the weight is zero."""
        distance = torch.arange(max_distance + 1, device=self.span_logits.device, dtype=torch.float32)
        mask = ((self.ramp + self.spans()[:, None].float() - distance) / self.ramp).clamp(0, 1)
        # Two-sided where: log(0) must give −inf without a NaN gradient flowing into θ.
        return torch.where(mask > 0, torch.log(mask.clamp_min(1e-30)), -math.inf)

    def plan(self, length: int, causal: bool, dtype: torch.dtype) -> SpanPlan:
        """The [`SpanPlan`] of an inference call at `length`. Cached (a few lengths, on each side of the
        crossover) while the logits keep their values, unless the span bias needs a gradient."""
        needs_grad = torch.is_grad_enabled() and self.span_logits.requires_grad
        below_crossover = length < int(self.crossover)
        # The crossover is part of the key, not a reason to start afresh: calibrate_crossover moves it between
        # every two calls, and would otherwise time the rebuilding of the plan and masks as the path's.
        key = (length, causal, dtype, below_crossover)
        if not needs_grad:
            logits = getattr(self, "_plan_logits", None)
            if logits is None or not torch.equal(logits, self.span_logits.detach()):
                self._plans: dict = {}
                self._masks: dict = {}
                self._plan_logits = self.span_logits.detach().clone()
            if key in self._plans:
                return self._plans[key]
        windows = self.windows(length)
        window = int(windows.max())
        log_mask = self.log_mask(window).to(dtype)
        covers = bool((windows >= length - 1).all()) and bool((log_mask == 0).all())
        whole_mask = block_mask = missing = None
        if not needs_grad and not covers and fused_path_available(self.span_logits.device):
            # The masks depend on the band, not on the length: the plans of every length share them, the
            # whole mask's top-left (N, N) corner serving each N up to `WHOLE_MASK_LENGTH`.
            whole = length <= WHOLE_MASK_LENGTH
            mask_key = (whole, window, causal, dtype)
            mask = self._masks.get(mask_key)
            if mask is None:
                if whole:
                    mask = whole_span_mask(log_mask, causal, self.global_token)
                else:
                    mask = fused_block_mask(log_mask, causal)
                _cache(self._masks, mask_key, mask)
            if whole:
                whole_mask = mask[:, :, :length, :length]
            else:
                block_mask, missing = mask, global_key_shortfall(log_mask, length)
        plan = SpanPlan(
            windows,
            window,
            log_mask,
            covers,
            whole_mask,
            block_mask,
            missing,
            below_crossover,
            self.global_token,
        )
        if not needs_grad:
            _cache(self._plans, key, plan)
        return plan

    def extra_repr(self) -> str:
        return f"heads={self.span_logits.numel()}, max_span={self.max_span}, ramp={self.ramp}"


def _cache(entries: dict, key: object, value: object) -> object:
    """Stores `value` under `key` in a cache of at most `CACHED_ENTRIES` (emptied when full); returns it."""
    if len(entries) >= CACHED_ENTRIES:
        entries.clear()
    entries[key] = value
    return value


def dense_span_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    log_mask: torch.Tensor,
    *,
    scaling: float,
    causal: bool,
    key_padding_mask: torch.Tensor | None,
    global_index: torch.Tensor | None,
    dropout: float,
) -> torch.Tensor:
    """The span mask as a full (B, H, N, N) bias on the scores: used for training with dropout.

    Shapes: query, key, value (B, H, N, D); log_mask (H, W + 1); returns (B, H, N, D).
    """
    batch, _, length, _ = query.shape
    positions = torch.arange(length, device=query.device)
    offset = positions[:, None] - positions[None, :]  # i − j
    bias = band_bias(log_mask, offset, causal=False)[None].expand(batch, -1, -1, -1)  # causality: below
    if global_index is not None:
        is_global = positions[None, :] == global_index[:, None]  # (B, N)
        global_pair = is_global[:, :, None] | is_global[:, None, :]  # query or key is the global token
        bias = torch.where(global_pair[:, None], 0.0, bias)
    allowed = torch.ones(batch, 1, length, length, dtype=torch.bool, device=query.device)
    if causal:
        allowed = allowed & (offset >= 0)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask[:, None, None, :]
    bias = torch.where(allowed, bias, -math.inf).to(query.dtype)
    # Written out rather than F.scaled_dot_product_attention: its fused CPU kernels give no gradient to a
    # float attn_mask, and the span logits learn only through that gradient.
    weights = torch.softmax(torch.matmul(query, key.transpose(-1, -2)) * scaling + bias, dim=-1)
    weights = F.dropout(weights, p=dropout, training=True)
    return torch.matmul(weights, value)


def band_bias(log_mask: torch.Tensor, offset: torch.Tensor, causal: bool) -> torch.Tensor:
    """log m_h at each query–key offset i − j (R, C), from log_mask (H, W + 1): (H, R, C); −inf outside the
    band |i − j| ≤ W (0 ≤ i − j ≤ W in decoders).

    Example:
        >>> log_mask = torch.tensor([[0.0, -0.7]])  # one head, W = 1
        >>> band_bias(log_mask, torch.tensor([[0, -1, -2]]), causal=False).tolist()
        [[[0.0, -0.699999988079071, -inf]]]
    """
    window = log_mask.shape[1] - 1
    distance = offset.abs()
    inside = (offset >= 0) & (offset <= window) if causal else distance <= window
    return torch.where(inside, log_mask[:, distance.clamp(max=window)], -math.inf)


def whole_span_mask(
    log_mask: torch.Tensor, causal: bool, global_token: bool, length: int = WHOLE_MASK_LENGTH
) -> torch.Tensor:
    """The span bias of a whole sequence of `length` tokens as the mask of one fused call, from log_mask
    (H, W + 1): (1, H, length, length). Its top-left (N, N) corner is the mask of every shorter N, the
    bias depending on i − j only; the encoder's global token (row and column 0) has no bias. The decoder's
    (the last row) moves with N: [`whole_mask_attention`] computes that row apart.

    Example:
        >>> log_mask = torch.tensor([[0.0, -0.7]])  # one head, W = 1
        >>> whole_span_mask(log_mask, causal=False, global_token=True, length=4)[0, 0, 2].tolist()
        [0.0, -0.699999988079071, 0.0, -0.699999988079071]
    """
    positions = torch.arange(length, device=log_mask.device)
    bias = band_bias(log_mask, positions[:, None] - positions[None, :], causal)
    if global_token and not causal:
        bias[:, 0, :] = 0.0
        bias[:, :, 0] = 0.0
    return bias[None].contiguous()


def whole_mask_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    whole_mask: torch.Tensor,
    *,
    scaling: float,
    causal: bool,
    global_token: bool,
) -> torch.Tensor:
    """The span bias through one fused SDPA call over the whole sequence, with `whole_mask` (1, H, N, N)
    ([`whole_span_mask`]'s corner) as its mask: short rows without padding. A decoder's global token, the
    last, reads every key with full weight: its row is a dense call of one row.

    Shapes: query, key, value (B, H, N, D); returns (B, H, N, D).
    """
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=whole_mask, scale=scaling)
    if global_token and causal:
        last_row = F.scaled_dot_product_attention(query[:, :, -1:], key, value, scale=scaling)
        output[:, :, -1:] = last_row
    return output


def fused_block_mask(log_mask: torch.Tensor, causal: bool, block: int = FUSED_BLOCK_ROWS) -> torch.Tensor:
    """The bias of one block of `block` query rows against its key window, which [`fused_span_attention`]
    gives every block, from log_mask (H, W + 1): (1, H, block, span).

    Row r is position start + r, column c key start − W + c, so the offset i − j is r + W − c whatever the
    block; span = block + 2W (block + W in decoders, which read no later key); −inf outside the band.

    Example:
        >>> log_mask = torch.tensor([[0.0, -0.7]])  # one head, W = 1: full weight at 0, half at distance 1
        >>> block_mask = fused_block_mask(log_mask, causal=False, block=2)
        >>> block_mask.shape, block_mask[0, 0, 0].tolist()  # row 0 against keys start − 1 … start + 2
        (torch.Size([1, 1, 2, 4]), [-0.699999988079071, 0.0, -0.699999988079071, -inf])
    """
    window = log_mask.shape[1] - 1
    span = block + window if causal else block + 2 * window
    positions = torch.arange(max(block, span), device=log_mask.device)
    offset = positions[:block, None] + window - positions[None, :span]
    return band_bias(log_mask, offset, causal)[None].contiguous()


def global_key_shortfall(log_mask: torch.Tensor, length: int) -> torch.Tensor:
    """Per position i, log(1 − m_h(i)): the weight key 0 lacks in the band for the global token's, which
    [`fused_span_attention`] adds back; from log_mask (H, W + 1): (H, N).

    Example:
        >>> log_mask = torch.tensor([[0.0, -0.7]])  # key 0 has weight 1, 0.497, 0, 0 in the band
        >>> global_key_shortfall(log_mask, length=4).exp().tolist()  # 1 − that is the rest
        [[0.0, 0.5034..., 1.0, 1.0]]
    """
    window = log_mask.shape[1] - 1
    distance = torch.arange(length, device=log_mask.device)
    band = torch.where(distance <= window, log_mask[:, distance.clamp(max=window)], -math.inf)
    return torch.log1p(-band.exp())  # log(1 − m_h(i)), i the distance to key 0


def fused_span_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    block_mask: torch.Tensor,
    missing: torch.Tensor,
    *,
    scaling: float,
    causal: bool,
    global_token: bool,
    window: int,
    call_rows: int = FUSED_CALL_ROWS,
) -> torch.Tensor:
    """The span bias through fused SDPA calls on the CPU, on blocks of query rows and their key windows:
    rows without padding.

    The queries are cut into blocks of `block` rows (the mask's third dimension), each against the keys
    within `window` of its rows (the band's width, the largest over the heads). The bias of a row and a key
    depends on their offset only, so every block has the same (H, block, span) mask ([`fused_block_mask`]).
    The blocks whose windows lie inside the sequence go `call_rows` rows at a time into one fused call, as a
    batch of blocks: the blocks of queries, keys and values are strided views of the inputs, overlapping for
    the keys and values, which the kernel reads in place. The few blocks at either end, whose windows are cut
    by the sequence, go one call each with the mask's columns cut alike.

    The global token is added after: its key column (position 0 in encoders) through the kernel's
    log-sum-exp, by giving key 0 the weight (1 − m_h(i))·exp(s_i0) it lacks in the band (`missing`, see
    [`global_key_shortfall`]; a row out of key 0's reach lacks all of it, m_h(i) being 0 there); its query
    row by a dense call of one row. In decoders the global token is the last one (there is no padding), whose
    key only its own row sees.

    Shapes: query, key, value (B, H, N, D) with the same strides (any layout whose last dimension is
    contiguous); block_mask (1, H, block, span); missing (H, N); returns (B, N, H, D), contiguous.
    """
    batch, heads, length, head_dim = query.shape
    block = block_mask.shape[2]
    blocks = -(-length // block)
    # Blocks first to last whose window [start − W, start + block + W) lies inside the sequence.
    first = -(-window // block)
    last = (length if causal else length - window) // block - 1
    per_call = max(1, call_rows // block)
    output = query.new_empty(batch, length, heads, head_dim)

    if global_token and not causal:
        # The global key's logit for every row at once, s_i0 + log(1 − m_h(i)): (B, H, N).
        key_logits = torch.matmul(query, key[:, :, :1].transpose(-1, -2)).squeeze_(-1).mul_(scaling)
        key_logits += missing

    def add_global_key(out: torch.Tensor, log_sum: torch.Tensor, b: int, start: int) -> None:
        # softmax over the band and key 0 again with log(1 − m): the logit of the second share is
        # s_i0 + log(1 − m_h(i)) − logsumexp(band), and the output moves towards v_0 by that share.
        count, _, rows = log_sum.shape  # (blocks, H, rows per block)
        logit = key_logits[b, :, start : start + count * rows].view(heads, count, rows).transpose(0, 1)
        out.lerp_(value[b : b + 1, :, :1], (logit - log_sum).sigmoid_().unsqueeze_(-1))

    for b in range(batch):
        for index in [j for j in range(blocks) if not first <= j <= last]:  # cut by either end
            start, stop = index * block, min(length, (index + 1) * block)
            keys = slice(max(0, start - window), stop if causal else min(length, stop + window))
            columns = slice(keys.start - (start - window), keys.stop - (start - window))
            out, log_sum = _FUSED_CPU_OP(
                query[b : b + 1, :, start:stop],
                key[b : b + 1, :, keys],
                value[b : b + 1, :, keys],
                0.0,
                False,
                attn_mask=block_mask[:, :, : stop - start, columns],
                scale=scaling,
            )[:2]
            if global_token and not causal:
                add_global_key(out, log_sum, b, start)
            output[b, start:stop] = out[0].transpose(0, 1)
        for index in range(first, last + 1, per_call):
            count = min(per_call, last + 1 - index)
            start = index * block
            out, log_sum = _FUSED_CPU_OP(
                _blocks(query, b, start, count, block, block),
                _blocks(key, b, start - window, count, block, block_mask.shape[3]),
                _blocks(value, b, start - window, count, block, block_mask.shape[3]),
                0.0,
                False,
                attn_mask=block_mask,
                scale=scaling,
            )[:2]
            if global_token and not causal:
                add_global_key(out, log_sum, b, start)
            # Copied into place block by block: a reshape of the transposed result would copy it first.
            rows = output[b, start : start + count * block].view(count, block, heads, head_dim)
            rows.copy_(out.transpose(1, 2))
    if global_token:
        row = length - 1 if causal else 0
        global_row = query[:, :, row : row + 1]
        output[:, row] = F.scaled_dot_product_attention(global_row, key, value, scale=scaling)[:, :, 0]
    return output


def _blocks(states: torch.Tensor, b: int, start: int, count: int, step: int, rows: int) -> torch.Tensor:
    """`count` blocks of `rows` positions of batch row `b` of states (B, H, N, D), the first at `start`, each
    `step` after the last, as a (count, H, rows, D) view: overlapping when rows > step."""
    batch_stride, head_stride, position_stride, dim_stride = states.stride()
    return states.as_strided(
        (count, states.shape[1], rows, states.shape[3]),
        (step * position_stride, head_stride, position_stride, dim_stride),
        states.storage_offset() + b * batch_stride + start * position_stride,
    )


def fused_path_available(device: torch.device) -> bool:
    """Whether [`fused_span_attention`] can run there: on the CPU, whose fused kernel returns the
    log-sum-exp."""
    return device.type == "cpu" and _FUSED_CPU_OP is not None


@dataclass
class SpanPlan:
    """What an inference call at one length reads of the spans, computed once per length while the spans
    do not change. `window`: the largest of `windows`; `covers`: every span gives every distance < N full
    weight; `below_crossover`: N is below the layer's `crossover`; the fused path's masks, None where that
    path cannot run (a gradient is needed, the spans cover the sequence, or not on the CPU): `whole_mask` up
    to `WHOLE_MASK_LENGTH` tokens (the corner of [`whole_span_mask`]), else `block_mask` and `missing`
    ([`fused_block_mask`], [`global_key_shortfall`]); the whole and block masks are shared by the plans of
    every length."""

    windows: torch.Tensor
    window: int
    log_mask: torch.Tensor
    covers: bool
    whole_mask: torch.Tensor | None
    block_mask: torch.Tensor | None
    missing: torch.Tensor | None
    below_crossover: bool
    global_token: bool


def adaptive_span_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Attention with a learned span per head.

    Shapes: query (B, H, N, D), key and value (B, H_kv, N, D), attention_mask sdpa's boolean (B, 1, N, N)
    or None; returns (B, N, H, D) like transformers' `sdpa_attention_forward`.

    With dropout (training) the span is applied as a dense bias, so dropout acts on the same probabilities as
    in the model's own attention; without it (inference) the call is plain SDPA when the spans cover the
    sequence, below the layer's measured `crossover` (CPU, no padding) [`whole_mask_attention`] up to
    `WHOLE_MASK_LENGTH` tokens and [`fused_span_attention`] beyond, and the banded kernel otherwise.
    """
    span: AdaptiveSpan = module.adaptive_span
    if hasattr(module, "num_key_value_groups"):
        key = repeat_kv(key, module.num_key_value_groups)
        value = repeat_kv(value, module.num_key_value_groups)
        trace_step(
            module,
            "repeat_kv",
            "repeat key/value heads for grouped-query attention",
            {},
            {"key": key, "value": value},
        )
    batch, _, length, head_dim = query.shape
    scaling = head_dim**-0.5 if scaling is None else scaling
    key_padding_mask, causal = padding_and_causality(module, query, attention_mask)
    training = dropout > 0.0 and module.training
    if training:
        windows = span.windows(length)
        log_mask = span.log_mask(int(windows.max()))
    else:
        plan = span.plan(length, causal, query.dtype)
        windows, log_mask = plan.windows, plan.log_mask
    # The plan carries what inference reads of the layer, so that a peft-wrapped span is looked up once.
    fused = (
        not training
        and (plan.whole_mask is not None or plan.block_mask is not None)
        and key_padding_mask is None
        and plan.below_crossover
    )
    heads_last = False  # whether `output` is (B, N, H, D) already (the blocks and the banded kernel)
    global_token = span.global_token if training else plan.global_token
    global_index = None
    if global_token and (training or not (plan.covers or fused)):
        global_index = global_token_index(key_padding_mask, causal, batch, length, query.device)
    trace_step(
        module,
        "span mask",
        "log m(x), m(x) = clamp((R + z_h − x)/R, 0, 1), z_h = S_max·σ(θ_h)",
        {"span_logits": span.span_logits},
        {"log_mask": log_mask},
    )

    if training:
        output = dense_span_attention(
            query,
            key,
            value,
            log_mask,
            scaling=scaling,
            causal=causal,
            key_padding_mask=key_padding_mask,
            global_index=global_index,
            dropout=dropout,
        )
        op = "scaled_dot_product_attention with the span bias, dropout"
    elif plan.covers:
        output = F.scaled_dot_product_attention(
            query,
            key,
            value,
            attn_mask=attention_mask,
            scale=scaling,
            is_causal=causal and attention_mask is None,
        )
        op = "scaled_dot_product_attention: every span covers the sequence"
    elif fused and plan.whole_mask is not None:
        output = whole_mask_attention(
            query,
            key,
            value,
            plan.whole_mask,
            scaling=scaling,
            causal=causal,
            global_token=global_token,
        )
        op = "fused scaled_dot_product_attention, the span bias of the whole sequence as mask"
    elif fused:
        output = fused_span_attention(
            query,
            key,
            value,
            plan.block_mask,
            plan.missing,
            scaling=scaling,
            causal=causal,
            global_token=global_token,
            window=plan.window,
        )
        heads_last = True
        op = "fused scaled_dot_product_attention on batches of blocks of query rows, the span bias as mask"
    else:
        # Written into the (B, N, H, D) result through its transposed view: no copy after.
        output = query.new_empty(batch, length, query.shape[1], head_dim)
        banded_attention(
            query,
            key,
            value,
            windows,
            scaling=scaling,
            causal=causal,
            key_padding_mask=key_padding_mask,
            distance_bias=log_mask,
            global_index=global_index,
            out=output.transpose(1, 2),
        )
        heads_last = True
        op = "banded attention over each head's window ⌈z_h + R⌉ − 1, span bias"
    heads_first = output.transpose(1, 2) if heads_last else output
    trace_step(module, "attention", op, {"query": query, "key": key, "value": value}, {"output": heads_first})
    return (output if heads_last else output.transpose(1, 2).contiguous()), None
