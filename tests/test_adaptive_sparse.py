"""`adaptive_sparse`: exact top-k attention, against a hand reference and inside every model family."""

from __future__ import annotations

import json

import pytest
import torch
from peft import LoraConfig, TaskType, get_peft_model

from attncard.modules.adaptive_sparse import (
    MODULE,
    AdaptiveSparseConfig,
    AdaptiveSparseState,
    adaptive_sparse_attention,
    module_stats,
    select_top_k,
)
from attncard.modules.base import attention_layers, implementation_name
from attncard.modules.trace import record_trace
from tiny_models import FAMILIES, load_with_padded_batch


def _attention(top_k: int, causal: bool, warmup_steps: int = 0) -> torch.nn.Module:
    """A stand-in attention module: what the function reads from a real one."""
    module = torch.nn.Module()
    module.is_causal = causal
    module.adaptive_sparse = AdaptiveSparseState(top_k, warmup_steps)
    return module.eval()


def _inputs(lengths: list[int], n: int = 6, heads: int = 4, kv_heads: int = 2, dim: int = 8, causal=False):
    """Random q, k, v (grouped-query: `kv_heads` key heads) and an sdpa-style mask for rows of `lengths`."""
    generator = torch.Generator().manual_seed(0)
    batch = len(lengths)
    query = torch.randn(batch, heads, n, dim, generator=generator)
    key = torch.randn(batch, kv_heads, n, dim, generator=generator)
    value = torch.randn(batch, kv_heads, n, dim, generator=generator)
    padding = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]  # (B, N)
    mask = padding[:, None, None, :].expand(batch, 1, n, n)
    if causal:
        mask = mask & torch.ones(n, n, dtype=torch.bool).tril()
    return query, key, value, mask


def _reference(query, key, value, mask, top_k: int, scaling: float) -> torch.Tensor:
    """Row by row: the top-k allowed keys by score, softmax over them, weighted sum. Returns (B, N, H, D)."""
    groups = query.shape[1] // key.shape[1]
    output = torch.zeros(query.shape[0], query.shape[2], query.shape[1], query.shape[3])
    for b in range(query.shape[0]):
        for h in range(query.shape[1]):
            for i in range(query.shape[2]):
                allowed = mask[b, 0, i].nonzero().flatten().tolist()
                if not allowed:
                    continue
                scores = {j: float(query[b, h, i] @ key[b, h // groups, j]) * scaling for j in allowed}
                kept = sorted(allowed, key=lambda j: scores[j], reverse=True)[:top_k]
                weights = torch.tensor([scores[j] for j in kept]).softmax(dim=0)
                output[b, i, h] = weights @ value[b, h // groups, kept]  # (k,) · (k, D)
    return output


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("top_k", [1, 3])
def test_matches_the_row_by_row_reference(causal, top_k):
    query, key, value, mask = _inputs([6, 4, 2], causal=causal)
    output, probabilities = adaptive_sparse_attention(
        _attention(top_k, causal), query, key, value, mask, scaling=0.35
    )
    assert output.shape == (3, 6, 4, 8)
    torch.testing.assert_close(output, _reference(query, key, value, mask, top_k, 0.35), atol=1e-5, rtol=1e-5)
    # Exactly min(k, allowed) keys per query, and every real query's probabilities sum to one.
    kept = (probabilities > 0).sum(dim=-1)
    torch.testing.assert_close(kept, mask.sum(dim=-1).clamp(max=top_k).expand_as(kept))
    torch.testing.assert_close(probabilities.sum(dim=-1), torch.ones_like(kept, dtype=torch.float))


def test_k_one_attends_to_exactly_the_best_key():
    query, key, value, mask = _inputs([6, 3])
    output, probabilities = adaptive_sparse_attention(
        _attention(1, False), query, key, value, mask, scaling=1.0
    )
    key, value = key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1)
    scores = (query @ key.transpose(-2, -1)).masked_fill(~mask, float("-inf"))
    best = scores.argmax(dim=-1)  # (B, H, N)
    assert torch.equal(probabilities.argmax(dim=-1), best)
    assert torch.equal((probabilities == 1).sum(dim=-1), torch.ones_like(best))
    expected = torch.gather(value, 2, best[..., None].expand(-1, -1, -1, value.shape[-1]))
    torch.testing.assert_close(output, expected.transpose(1, 2))


def test_ties_keep_exactly_k():
    scores = torch.zeros(1, 1, 3, 5)  # every score equal
    allowed = torch.ones(1, 1, 3, 5, dtype=torch.bool)
    keep, threshold = select_top_k(scores, allowed, 2)
    assert keep.sum(dim=-1).tolist() == [[[2, 2, 2]]]
    assert threshold.flatten().tolist() == [0.0, 0.0, 0.0]
    allowed[..., 1:] = False  # a row with fewer allowed keys than k keeps what it has
    keep, threshold = select_top_k(scores, allowed, 2)
    assert keep.sum(dim=-1).tolist() == [[[1, 1, 1]]]
    assert threshold.flatten().tolist() == [float("-inf")] * 3


def test_gradients_are_finite_with_fully_masked_rows():
    query, key, value, mask = _inputs([5, 0])  # the second row is all padding: no key allowed anywhere
    for tensor in (query, key, value):
        tensor.requires_grad_(True)
    module = _attention(2, False).train()
    output, _ = adaptive_sparse_attention(module, query, key, value, mask, scaling=0.35, dropout=0.1)
    assert torch.isfinite(output).all()
    assert torch.equal(output[1], torch.zeros_like(output[1]))
    output.square().sum().backward()
    for tensor in (query, key, value):
        assert torch.isfinite(tensor.grad).all()
    assert query.grad[0].abs().sum() > 0 and key.grad[0].abs().sum() > 0


def test_half_precision_keeps_its_dtype():
    query, key, value, mask = _inputs([6, 3], causal=True)
    half = [tensor.to(torch.bfloat16) for tensor in (query, key, value)]
    output, probabilities = adaptive_sparse_attention(_attention(3, True), *half, mask, scaling=0.35)
    assert output.dtype == probabilities.dtype == torch.bfloat16
    expected = _reference(*(tensor.float() for tensor in half), mask, top_k=3, scaling=0.35)
    torch.testing.assert_close(output.float(), expected, atol=2e-2, rtol=2e-2)


def test_warmup_uses_full_attention_first():
    query, key, value, mask = _inputs([6, 4])
    module = _attention(1, False, warmup_steps=2).train()
    full = _reference(query, key, value, mask, top_k=6, scaling=0.35)
    sparse = _reference(query, key, value, mask, top_k=1, scaling=0.35)
    for expected in (full, full, sparse, sparse):
        output, _ = adaptive_sparse_attention(module, query, key, value, mask, scaling=0.35)
        torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    assert module.adaptive_sparse.steps.item() == 4
    module.eval()  # evaluation neither counts nor warms up
    output, _ = adaptive_sparse_attention(module, query, key, value, mask, scaling=0.35)
    torch.testing.assert_close(output, sparse, atol=1e-5, rtol=1e-5)
    assert module.adaptive_sparse.steps.item() == 4


def test_config_is_validated():
    with pytest.raises(ValueError, match="top_k"):
        AdaptiveSparseConfig(top_k=0)
    with pytest.raises(ValueError, match="warmup_steps"):
        AdaptiveSparseConfig(warmup_steps=-1)


@pytest.mark.parametrize("family", FAMILIES)
def test_k_beyond_the_length_reproduces_original_logits(tiny_model_dir, family):
    loaded, batch = load_with_padded_batch(tiny_model_dir(family))
    with torch.no_grad():
        expected = loaded.model(**batch).logits
    MODULE.apply(loaded.model, AdaptiveSparseConfig(top_k=64))  # max_length 64: every allowed key is kept
    assert loaded.model.config._attn_implementation == implementation_name("adaptive_sparse")
    with torch.no_grad():
        got = loaded.model(**batch).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_k_one_in_a_padded_batch(tiny_model_dir, family):
    loaded, batch = load_with_padded_batch(tiny_model_dir(family))
    MODULE.apply(loaded.model, AdaptiveSparseConfig(top_k=1))
    with torch.no_grad():
        out = loaded.model(**batch, output_attentions=True)
    assert torch.isfinite(out.logits).all()
    for probabilities in out.attentions:  # (B, H, N, N): one key per query, padded queries included
        kept = (probabilities > 0).sum(dim=-1)
        assert torch.equal(kept, torch.ones_like(kept))
        padded_keys = batch["attention_mask"][:, None, None, :] == 0
        assert not probabilities.masked_select(padded_keys).any()


@pytest.mark.parametrize("family", ["bert", "qwen3"])
def test_plain_lora_on_q_and_v_trains(tiny_model_dir, family):
    loaded, batch = load_with_padded_batch(tiny_model_dir(family))
    config = AdaptiveSparseConfig(top_k=4, warmup_steps=1)
    MODULE.apply(loaded.model, config)
    targets = MODULE.lora_targets(family, config)  # the family's q and v projections, as for any module
    assert targets == {"bert": ["query", "value"], "qwen3": ["q_proj", "v_proj"]}[family]
    lora = LoraConfig(task_type=TaskType.SEQ_CLS, r=4, target_modules=targets)
    model = get_peft_model(loaded.model, lora)
    model.train()
    for _ in range(2):
        model(**batch, labels=torch.tensor([1, 0, 0])).loss.backward()
    lora_b = [p for name, p in model.named_parameters() if "lora_B" in name]
    assert lora_b and all(p.grad is not None and p.grad.abs().sum() > 0 for p in lora_b)
    stats = module_stats(model)
    json.dumps(stats)  # results.json takes it as it is
    assert stats["top_k"] == 4
    assert [layer["training_forward_passes"] for layer in stats["layers"]] == [2, 2]
    assert all(layer["warmup_done"] for layer in stats["layers"])
    assert len(stats["layers"]) == len(attention_layers(loaded.model))


def test_trace_records_the_selection(tiny_model_dir):
    loaded, batch = load_with_padded_batch(tiny_model_dir("llama"))
    MODULE.apply(loaded.model, AdaptiveSparseConfig(top_k=2))
    steps = record_trace(loaded.model, batch)
    stages = [step.stage for step in steps]
    assert stages[3:7] == ["attention scores", "top-k selection", "softmax", "weighted sum"]
    b, n = batch["input_ids"].shape
    heads = loaded.model.config.num_attention_heads
    assert steps[3].inputs["key"].shape == steps[3].inputs["query"].shape  # key heads repeated for GQA
    assert steps[4].outputs["keep"].shape == [b, heads, n, n]
    assert steps[4].outputs["threshold"].shape == [b, heads, n, 1]
