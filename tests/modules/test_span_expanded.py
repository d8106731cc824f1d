"""`span_expanded`: [memory ‖ current] attention plus the HyLoRA branch, in tiny models of every family."""

from __future__ import annotations

import copy

import pytest
import torch
from peft import LoraConfig, TaskType, get_peft_model
from torch import nn

from attncard.modules.base import attention_layers
from attncard.modules.measure import PeakMemory
from attncard.modules.span_expanded import MODULE, SpanExpandedConfig, module_stats, segment_memory
from attncard.modules.span_expanded.attention import (
    SpanExpandedBranch,
    SpanExpandedState,
    keep_last_positions,
    span_expanded_attention,
)
from attncard.modules.trace import record_trace
from tiny_models import load_with_padded_batch

LONG_TEXT = (
    "it 's a charming and often affecting journey . the acting , costumes , music , cinematography and "
    "sound are all astounding given the production 's austere locales ."
)


def _set_branches(model: nn.Module, seed: int = 1) -> None:
    """Gives every HyLoRA branch a non-zero B (under peft, the trained copy: the wrapper forwards `.B`)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in attention_layers(model):
            weight = layer.module.span_expanded.B.weight
            weight.copy_(torch.randn(weight.shape, generator=generator) * 0.5)


def _fake_attention(heads: int, kv_heads: int, head_dim: int, d_in: int, causal: bool, memory_length: int):
    """A bare attention module carrying what `apply` attaches, for calling the function on random tensors."""
    module = nn.Module()
    module.is_causal = causal
    module.num_key_value_groups = heads // kv_heads
    module.span_expanded = SpanExpandedBranch(d_in, heads * head_dim, rank=2, alpha=4.0)
    module.span_expanded_state = SpanExpandedState(memory_length=memory_length)
    return module


def _dense_attention(query, key, value, allowed, scale):
    """softmax(Q·Kᵀ·scale, masked)·V written out; key/value heads repeated for GQA. Returns (B, N, H, D)."""
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    scores = (query @ key.transpose(-1, -2) * scale).masked_fill(~allowed, float("-inf"))
    return (scores.softmax(-1) @ value).transpose(1, 2)


def test_the_stats_report_the_branch_norms(tiny_model_dir):
    loaded, _ = load_with_padded_batch(tiny_model_dir("bert"))
    MODULE.apply(loaded.model, SpanExpandedConfig())
    assert module_stats(loaded.model)["ab_frobenius_norm"] == [0.0, 0.0]  # B starts at zero
    _set_branches(loaded.model)
    assert all(norm > 0 for norm in module_stats(loaded.model)["ab_frobenius_norm"])


def test_branch_adds_x_a_b_scale_before_the_output_projection():
    torch.manual_seed(0)
    b, n, heads, kv_heads, d, d_in = 2, 5, 4, 2, 8, 24  # GQA, and d_in != H·D as in Qwen3
    module = _fake_attention(heads, kv_heads, d, d_in, causal=True, memory_length=0)
    query, key, value = (
        torch.randn(b, heads, n, d),
        torch.randn(b, kv_heads, n, d),
        torch.randn(b, kv_heads, n, d),
    )
    x = torch.randn(b, n, d_in)

    def call() -> torch.Tensor:
        module.span_expanded_state.hidden_states = x
        return span_expanded_attention(module, query, key, value, None, scaling=d**-0.5)[0]

    base = call()
    torch.testing.assert_close(
        base, _dense_attention(query, key, value, torch.ones(n, n).tril().bool(), d**-0.5)
    )
    with torch.no_grad():
        module.span_expanded.B.weight.normal_()
    branch = module.span_expanded
    by_hand = (x @ branch.A.weight.T @ branch.B.weight.T * branch.scale).view(b, n, heads, d)
    torch.testing.assert_close(call() - base, by_hand, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_the_branch_sums_into_the_attention_with_the_gradients_of_a_plain_sum(layout):
    # Contiguous: SDPA's output when the query is the models' (B, N, H, D) projection seen as (B, H, N, D),
    # summed by one addmm; strided: a (B, H, N, D) output seen as (B, N, H, D), summed in place.
    torch.manual_seed(0)
    b, n, heads, d, d_in = 2, 7, 3, 4, 10
    branch = SpanExpandedBranch(d_in, heads * d, rank=2, alpha=3.0)  # scale 1.5
    with torch.no_grad():
        branch.B.weight.normal_()
    x = torch.randn(b, n, d_in, requires_grad=True)
    if layout == "contiguous":
        attention = torch.randn(b, n, heads, d, requires_grad=True)
        seen = attention
    else:
        attention = torch.randn(b, heads, n, d, requires_grad=True)
        seen = attention.transpose(1, 2)
    assert seen.is_contiguous() == (layout == "contiguous")
    summed = branch(x, seen)
    assert summed.shape == (b, n, heads, d) and summed.is_contiguous()
    grad = torch.randn(b, n, heads, d)
    got = torch.autograd.grad(summed, (x, attention, branch.A.weight, branch.B.weight), grad)

    plain = seen + branch(x).view(b, n, heads, d)
    torch.testing.assert_close(summed, plain)
    expected = torch.autograd.grad(plain, (x, attention, branch.A.weight, branch.B.weight), grad)
    for name, a, e in zip(("x", "attention", "A", "B"), got, expected, strict=True):
        torch.testing.assert_close(a, e, msg=name)


def test_a_model_call_sums_by_one_product_and_copies_nothing(tiny_model_dir):
    loaded, batch = load_with_padded_batch(tiny_model_dir("bert"))
    MODULE.apply(loaded.model, SpanExpandedConfig())
    _set_branches(loaded.model)
    from torch.profiler import profile

    with torch.no_grad(), profile() as profiled:
        loaded.model(**batch)
    calls = {event.key: event.count for event in profiled.key_averages()}
    layers = len(attention_layers(loaded.model))
    # Per layer: SDPA's output is contiguous in (B, N, H, D), so the branch and the sum are one addmm (with
    # the model's own projections, bias included): no separate multiply, in-place add or copy of it.
    assert calls.get("aten::mul", 0) == 0 and calls.get("aten::add_", 0) == 0
    assert calls["aten::addmm"] >= 7 * layers  # q, k, v, o, two feed-forward projections, the branch's sum


def test_a_call_holds_two_tensors_of_the_output_size_as_sdpa_does():
    """N = 2048, 4 heads of 32: the output is 1 MiB. transformers' SDPA path holds the attention and its
    contiguous copy; the module holds the attention and the branch it adds the attention into (four such
    tensors before: twice the SDPA path's peak, 4.1 against 2.1 MB). Medians of 5 alternating measurements
    each; the module's sometimes reads 1 MB more (3.1 MB), hence the bound of 1.75 rather than 1."""
    n, heads, d = 2048, 4, 32
    module = _fake_attention(heads, heads, d, heads * d, causal=False, memory_length=0)
    with torch.no_grad():
        module.span_expanded.B.weight.normal_()
    query, key, value = (torch.randn(1, heads, n, d) for _ in range(3))
    x = torch.randn(1, n, heads * d)

    def call() -> torch.Tensor:
        module.span_expanded_state.hidden_states = x
        return span_expanded_attention(module, query, key, value, None, scaling=d**-0.5)[0]

    def sdpa_path() -> torch.Tensor:
        attention = torch.nn.functional.scaled_dot_product_attention(query, key, value, scale=d**-0.5)
        return attention.transpose(1, 2).contiguous()

    peaks = {call: [], sdpa_path: []}
    with torch.no_grad():
        call(), sdpa_path()  # warm-up
        for _ in range(5):
            for run in peaks:
                with PeakMemory(torch.device("cpu")) as memory:
                    run()
                peaks[run].append(memory.peak_mb)
        output = call()
    if memory.block_only:
        module_peak, sdpa_peak = (sorted(values)[2] for values in peaks.values())
        assert module_peak < 1.75 * sdpa_peak, (module_peak, sdpa_peak)
    expected = _dense_attention(query, key, value, torch.ones(n, n, dtype=torch.bool), d**-0.5)
    a, b = module.span_expanded.A.weight, module.span_expanded.B.weight
    branch = (x @ a.T * module.span_expanded.scale) @ b.T
    torch.testing.assert_close(output, expected + branch.view(1, n, heads, d), atol=1e-4, rtol=1e-4)


def test_gradients_reach_a_and_b(tiny_model_dir):
    loaded, batch = load_with_padded_batch(tiny_model_dir("bert"))
    MODULE.apply(loaded.model, SpanExpandedConfig(hylora_dropout=0.0))
    loaded.model.train()
    branches = [layer.module.span_expanded for layer in attention_layers(loaded.model)]
    params = [p for branch in branches for p in branch.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.5)
    labels = torch.tensor([1, 0, 0])

    loaded.model(**batch, labels=labels).loss.backward()
    for branch in branches:
        assert branch.B.weight.grad.abs().max() > 0
        assert branch.A.weight.grad.abs().max() == 0  # B = 0 blocks A's gradient at initialisation
    optimizer.step()
    optimizer.zero_grad()
    loaded.model(**batch, labels=labels).loss.backward()
    for branch in branches:
        assert branch.A.weight.grad.abs().max() > 0


@pytest.mark.parametrize("padded", [True, False], ids=["padded mask", "no mask"])
def test_memory_attention_equals_dense_attention_over_concatenated_keys(padded):
    torch.manual_seed(0)
    b, n, m, heads, kv_heads, d, d_in = 2, 4, 3, 4, 2, 8, 16  # GQA: two query heads per key/value head
    module = _fake_attention(heads, kv_heads, d, d_in, causal=True, memory_length=5)
    state = module.span_expanded_state
    state.memory_keys, state.memory_values = torch.randn(b, kv_heads, m, d), torch.randn(b, kv_heads, m, d)
    state.memory_mask = torch.tensor([[True, True, True], [True, True, False]])  # row 1: one empty slot
    state.hidden_states = torch.randn(b, n, d_in)
    query = torch.randn(b, heads, n, d)
    key, value = torch.randn(b, kv_heads, n, d), torch.randn(b, kv_heads, n, d)

    causal = torch.ones(n, n).tril().bool()
    key_padding = torch.tensor([[True, True, True, True], [True, True, False, False]])
    if not padded:  # transformers passes None: the function must build the causal part itself
        key_padding = torch.ones(b, n, dtype=torch.bool)
    current = (causal[None] & key_padding[:, None, :])[:, None]  # what transformers' sdpa_mask gives
    # Every query sees every real memory slot: they all lie in its past.
    allowed = torch.cat([state.memory_mask[:, None, None, :].expand(b, 1, n, m), current], dim=-1)
    full_key = torch.cat([state.memory_keys, key], dim=2)
    full_value = torch.cat([state.memory_values, value], dim=2)

    mask = current if padded else None
    got = span_expanded_attention(module, query, key, value, mask, scaling=d**-0.5)[0]
    expected = _dense_attention(query, full_key, full_value, allowed, d**-0.5)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert state.memory_size == m  # outside segment_memory nothing is recorded


def test_memory_keeps_the_last_real_positions():
    keys = torch.arange(2 * 6, dtype=torch.float).view(2, 1, 6, 1)
    valid = torch.tensor([[True, True, True, True, True, False], [True, True, False, False, False, False]])
    kept_keys, kept_values, mask = keep_last_positions(keys, keys.clone(), valid, 3)
    assert kept_keys[:, 0, :, 0].tolist() == [[2.0, 3.0, 4.0], [6.0, 7.0, 0.0]]
    assert mask.tolist() == [[True, True, True], [True, True, False]]  # row 1 had two real positions
    assert torch.equal(kept_values, kept_keys)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_segments_with_memory_equal_one_pass_in_a_decoder(tiny_model_dir, family):
    # A causal layer never sees the future, so segment 2 attending to the keys and values of segment 1
    # (positions continuing) computes exactly what one pass over the whole text computes, in every layer.
    loaded, _ = load_with_padded_batch(tiny_model_dir(family))
    MODULE.apply(loaded.model, SpanExpandedConfig(memory_length=128))
    _set_branches(loaded.model)
    ids = loaded.tokenizer(LONG_TEXT, return_tensors="pt")["input_ids"]
    total, split = ids.shape[1], ids.shape[1] // 2
    assert total <= 128  # the whole first segment fits in the memory
    with torch.no_grad():
        whole = loaded.model(input_ids=ids).logits
        alone = loaded.model(input_ids=ids[:, split:]).logits
        with segment_memory(loaded.model) as memory:
            loaded.model(input_ids=ids[:, :split])
            assert memory.sizes() == [split, split]
            second = loaded.model(input_ids=ids[:, split:], position_ids=torch.arange(split, total)[None])
            assert memory.sizes() == [total, total]
        assert memory.sizes() == [0, 0]  # leaving the block empties the memory
        after = loaded.model(input_ids=ids[:, split:]).logits
    torch.testing.assert_close(second.logits, whole, atol=1e-5, rtol=1e-5)
    assert (alone - whole).abs().max() > 1e-4  # without memory the segment sees less
    torch.testing.assert_close(after, alone)


def test_memory_is_capped_holds_real_keys_and_checks_the_batch(tiny_model_dir):
    loaded, batch = load_with_padded_batch(tiny_model_dir("bert"))
    MODULE.apply(loaded.model, SpanExpandedConfig(memory_length=3))
    layer = attention_layers(loaded.model)[0]
    inputs: list[torch.Tensor] = []
    handle = layer.module.register_forward_pre_hook(lambda module, args: inputs.append(args[0]))
    real = batch["attention_mask"].sum(-1)
    with torch.no_grad(), segment_memory(loaded.model) as memory:
        loaded.model(**batch)
        assert memory.sizes() == [3, 3]
        keys, values, mask = memory.memory(0)
        assert mask.tolist() == [[True] * 3, [True] * 3, [True] * 3]  # "bleak ." is [CLS] bleak . [SEP]
        expected_keys = layer.projection("k")(inputs[0]).view(3, -1, 4, 8).transpose(1, 2)
        for row in range(3):
            last = slice(int(real[row]) - 3, int(real[row]))  # the last three real tokens, never padding
            torch.testing.assert_close(keys[row], expected_keys[row, :, last])
        assert not keys.requires_grad and not values.requires_grad
        with pytest.raises(ValueError, match="batch size 3, but this call has batch size 1"):
            loaded.model(**{name: tensor[:1] for name, tensor in batch.items()})
        memory.reset()
        loaded.model(**{name: tensor[:1] for name, tensor in batch.items()})
        assert memory.sizes() == [3, 3]
        with pytest.raises(RuntimeError, match="already open"), segment_memory(loaded.model):
            pass
    handle.remove()
    with (
        pytest.raises(ValueError, match="not installed"),
        segment_memory(load_with_padded_batch(tiny_model_dir("bert"))[0].model),
    ):
        pass


def test_the_attention_function_sums_peft_s_active_copy_of_the_branch(tiny_model_dir):
    # The function calls the branch's `add_to_attention` through peft's wrapper, not the wrapper itself: the
    # trained copy while the adapter is active, the original (B = 0) while adapters are disabled.
    loaded, batch = load_with_padded_batch(tiny_model_dir("bert"))
    MODULE.apply(loaded.model, SpanExpandedConfig())
    loaded.model.eval()
    with torch.no_grad():
        plain = loaded.model(**batch).logits
    lora = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        target_modules=["query", "value"],
        modules_to_save=list(MODULE.training.trainable_modules),
    )
    model = get_peft_model(loaded.model, lora)
    _set_branches(model.get_base_model())  # the wrapper forwards `.B` to the trained copy only
    model.eval()
    with torch.no_grad():
        active = model(**batch).logits
        with model.disable_adapter():
            disabled = model(**batch).logits
    assert (active - plain).abs().max() > 1e-3
    torch.testing.assert_close(disabled, plain)


def test_trace_and_stats_describe_the_module(tiny_model_dir):
    loaded, batch = load_with_padded_batch(tiny_model_dir("llama"))
    MODULE.apply(loaded.model, SpanExpandedConfig(hylora_rank=4))
    stages = [step.stage for step in record_trace(loaded.model, batch)]
    assert stages[3:6] == ["memory concat", "attention", "HyLoRA branch and sum"]
    stats = module_stats(loaded.model)
    # r·(d_in + H·D) per layer: hidden 32 in, 4 heads × 8 out.
    assert stats["parameters_added"] == 2 * 4 * (32 + 32)
    assert stats["hylora_scale"] == 16.0 / 4 and stats["memory_length"] == 128
    with pytest.raises(ValueError, match="already installed"):
        MODULE.apply(loaded.model, SpanExpandedConfig())
    with pytest.raises(ValueError, match="hylora_rank"):
        SpanExpandedConfig(hylora_rank=0)


def test_copies_capture_into_their_own_layers_and_the_dense_reference_captures_nothing(tiny_model_dir):
    loaded, batch = load_with_padded_batch(tiny_model_dir("bert"))
    MODULE.apply(loaded.model, SpanExpandedConfig())
    _set_branches(loaded.model)
    with torch.no_grad():
        expected = loaded.model(**batch).logits

    copied = copy.deepcopy(loaded.model)
    original_states = [layer.module.span_expanded_state for layer in attention_layers(loaded.model)]
    with torch.no_grad():
        torch.testing.assert_close(copied(**batch).logits, expected)
    # The copy's forwards stored into (and its function consumed from) the copy's states, not the original's.
    assert all(state.hidden_states is None for state in original_states)

    reference = MODULE.measurement.dense_reference(loaded.model, lambda: None)
    for layer in attention_layers(reference):
        assert layer.module.forward.__func__ is type(layer.module).forward  # the model's own forward
    with torch.no_grad():
        dense = reference(**batch).logits
    states = [layer.module.span_expanded_state for layer in attention_layers(reference)]
    assert all(state.hidden_states is None for state in states)
    assert (dense - expected).abs().max() > 1e-4  # sdpa alone, without the trained branches
