"""Banded attention forward pass in Triton (flash-attention style), for inference on GPU.

One program handles ``BLOCK_M`` queries of one (batch, head). It walks only the key tiles that overlap the
head's band, keeping a running max / normalizer / weighted sum (online softmax), then adds the global key as
one more column. The global query row (query g attends every key) is a single dense row per batch row; the
wrapper computes it in torch (:func:`modules.kernels.banded.global_query_rows`) and writes it over row g.

There is no backward kernel: the wrapper refuses inputs that require grad, and the dispatcher sends training
to the torch kernel. On CPU the kernel runs under the Triton interpreter, which Triton chooses when its own
and this module's kernels are decorated: set ``TRITON_INTERPRET=1`` before anything imports triton (importing
transformers or torch._dynamo does).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .banded import check_banded_inputs, global_query_rows


@triton.jit
def _banded_forward_kernel(
    Q,
    K,
    V,
    Out,
    Window,
    KeyValid,
    Bias,
    GlobalIndex,
    stride_qb,
    stride_qh,
    stride_qn,
    stride_kb,
    stride_kh,
    stride_kn,
    stride_vb,
    stride_vh,
    stride_vn,
    stride_ob,
    stride_oh,
    stride_on,
    stride_valid_b,
    stride_bias_h,
    num_heads,
    length,
    head_dim,
    max_window,
    scaling,
    CAUSAL: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    HAS_GLOBAL: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    batch_head = tl.program_id(1).to(tl.int64)  # 64-bit offsets: b * stride_qb can pass 2**31
    b = batch_head // num_heads
    h = batch_head % num_heads
    window = tl.load(Window + h)
    start_m = tl.program_id(0) * BLOCK_M
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    row_ok = rows < length
    dim_ok = dims < head_dim

    q_ptrs = Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qn + dims[None, :]
    q = tl.load(q_ptrs, mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
    global_index = tl.load(GlobalIndex + b) if HAS_GLOBAL else -1

    # Running softmax state. A row stays at max -inf while it has seen no allowed key; exp() is then taken
    # against 0 instead of -inf, so masked entries give exactly 0 and empty rows end with l = 0, never NaN.
    row_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # Key tiles overlapping [start_m - window, start_m + BLOCK_M + window), up to the diagonal if causal.
    lo = tl.maximum(start_m - window, 0) // BLOCK_N * BLOCK_N
    hi = start_m + BLOCK_M if CAUSAL else start_m + BLOCK_M + window
    hi = tl.minimum(hi, length)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        col_ok = cols < length
        k_ptrs = K + b * stride_kb + h * stride_kh + cols[:, None] * stride_kn + dims[None, :]
        v_ptrs = V + b * stride_vb + h * stride_vh + cols[:, None] * stride_vn + dims[None, :]
        k = tl.load(k_ptrs, mask=col_ok[:, None] & dim_ok[None, :], other=0.0)
        v = tl.load(v_ptrs, mask=col_ok[:, None] & dim_ok[None, :], other=0.0)

        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scaling
        offset = rows[:, None] - cols[None, :]
        distance = tl.abs(offset)
        if HAS_BIAS:
            in_reach = (distance <= max_window) & col_ok[None, :]
            scores += tl.load(Bias + h * stride_bias_h + distance, mask=in_reach, other=0.0)
        key_ok = tl.load(KeyValid + b * stride_valid_b + cols, mask=col_ok, other=0) != 0
        key_ok = key_ok & (cols != global_index)  # the global key is added once, after the band
        allowed = (distance <= window) & key_ok[None, :]
        if CAUSAL:
            allowed = allowed & (offset >= 0)
        scores = tl.where(allowed, scores, float("-inf"))

        new_max = tl.maximum(row_max, tl.max(scores, 1))
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
        rescale = tl.exp(row_max - safe_max)
        weights = tl.exp(scores - safe_max[:, None])
        row_sum = row_sum * rescale + tl.sum(weights, 1)
        acc = acc * rescale[:, None] + tl.dot(weights.to(v.dtype), v, input_precision=DOT_PRECISION)
        row_max = new_max

    if HAS_GLOBAL:
        k_ptrs = K + b * stride_kb + h * stride_kh + global_index * stride_kn + dims
        v_ptrs = V + b * stride_vb + h * stride_vh + global_index * stride_vn + dims
        global_key = tl.load(k_ptrs, mask=dim_ok, other=0.0)
        global_value = tl.load(v_ptrs, mask=dim_ok, other=0.0)
        scores = tl.sum(q.to(tl.float32) * global_key.to(tl.float32)[None, :], 1) * scaling
        offset = rows - global_index
        # Global pairs carry no distance bias: the global token sees and is seen with full weight.
        allowed = tl.load(KeyValid + b * stride_valid_b + global_index) != 0
        if CAUSAL:
            allowed = allowed & (offset >= 0)
        scores = tl.where(allowed, scores, float("-inf"))

        new_max = tl.maximum(row_max, scores)
        safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
        rescale = tl.exp(row_max - safe_max)
        weights = tl.exp(scores - safe_max)
        row_sum = row_sum * rescale + weights
        acc = acc * rescale[:, None] + weights[:, None] * global_value.to(tl.float32)[None, :]

    # Empty rows (row_sum 0) and padding queries output zeros.
    query_ok = tl.load(KeyValid + b * stride_valid_b + rows, mask=row_ok, other=0) != 0
    output = acc / tl.where(row_sum == 0.0, 1.0, row_sum)[:, None]
    output = tl.where(query_ok[:, None], output, 0.0)
    o_ptrs = Out + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + dims[None, :]
    tl.store(o_ptrs, output.to(Out.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :])


def banded_attention_triton(
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
    block_m: int | None = None,
    block_n: int | None = None,
) -> torch.Tensor:
    """Forward-only Triton banded attention; same semantics as :func:`modules.kernels.banded_attention_torch`.

    Query i of head h attends key j when |i - j| <= window[h] (and j <= i when causal) and key j is real; the
    global token g is attended by every query and attends every key; the score is
    ``scaling * q_i·k_j + distance_bias[h, |i - j|]`` for band pairs, no bias for global pairs. Queries with
    nothing to attend to, and padding queries, output zeros.

    Args:
        query, key, value: (B, H, N, D), on a CUDA device (or on CPU with ``TRITON_INTERPRET=1``).
        window: (H,) integer per-head window.
        scaling: multiplier of q·k, usually D**-0.5.
        causal: additionally require j <= i.
        key_padding_mask: (B, N) bool, True for real tokens.
        distance_bias: (H, W + 1) float additive bias by distance; -inf entries mask those distances.
        global_index: (B,) int64 position of one global token per row.
        block_m, block_n: query and key tile sizes; default 64 on GPU, 16 under the interpreter.

    Returns:
        (B, H, N, D) in the dtype of ``query``.

    Raises:
        RuntimeError: if gradients are required (there is no backward kernel).

    Example:

        # On a CUDA GPU, so not a doctest (tests/modules/test_kernels.py runs the kernel under
        # TRITON_INTERPRET)
        q = k = v = torch.randn(1, 4, 4096, 64, device="cuda", dtype=torch.float16)
        out = banded_attention_triton(q, k, v, torch.tensor([32, 64, 128, 256]), scaling=0.125)
        assert out.shape == (1, 4, 4096, 64) and out.dtype == torch.float16
    """
    tensors = (query, key, value, distance_bias)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise RuntimeError(
            "banded_attention_triton has no backward kernel; use banded_attention_torch (or the dispatcher) "
            "for inputs that require grad"
        )
    check_banded_inputs(query, key, value, window, key_padding_mask, distance_bias, global_index)
    batch, heads, length, head_dim = query.shape
    device = query.device
    max_window = min(int(window.max()), length - 1)
    block_m = block_m or (64 if device.type == "cuda" else 16)
    block_n = block_n or (64 if device.type == "cuda" else 16)

    query, key, value = query.contiguous(), key.contiguous(), value.contiguous()
    window = window.clamp(max=length - 1).to(device=device, dtype=torch.int32).contiguous()
    if key_padding_mask is None:
        key_valid = torch.ones(batch, length, dtype=torch.int8, device=device)
    else:
        key_valid = key_padding_mask.to(torch.int8).contiguous()
    # Unused pointers still need a tensor; the constexpr flags keep the kernel from reading them.
    bias = torch.zeros(1, 1, device=device) if distance_bias is None else distance_bias.float().contiguous()
    index = torch.zeros(1, device=device) if global_index is None else global_index
    index = index.to(torch.int32).contiguous()
    output = torch.empty_like(query)

    grid = (triton.cdiv(length, block_m), batch * heads)
    _banded_forward_kernel[grid](
        query,
        key,
        value,
        output,
        window,
        key_valid,
        bias,
        index,
        query.stride(0),
        query.stride(1),
        query.stride(2),
        key.stride(0),
        key.stride(1),
        key.stride(2),
        value.stride(0),
        value.stride(1),
        value.stride(2),
        output.stride(0),
        output.stride(1),
        output.stride(2),
        key_valid.stride(0),
        bias.stride(0),
        heads,
        length,
        head_dim,
        max_window,
        scaling,
        CAUSAL=causal,
        HAS_BIAS=distance_bias is not None,
        HAS_GLOBAL=global_index is not None,
        DOT_PRECISION="ieee" if query.dtype == torch.float32 else "tf32",
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
    )
    if global_index is not None:
        rows = global_query_rows(
            query,
            key,
            value,
            global_index,
            scaling=scaling,
            causal=causal,
            key_padding_mask=key_padding_mask,
        )
        positions = global_index.view(batch, 1, 1, 1).expand(-1, heads, 1, head_dim)
        output = output.scatter(2, positions, rows)
    return output
