"""`adaptive_sparse`: exact top-k attention, against a hand reference, against the full-matrix computation it
replaced (tiled path, gradients included), bounded in memory, and inside every model family."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from peft import LoraConfig, TaskType, get_peft_model
from transformers.integrations.sdpa_attention import repeat_kv

from attncard.modules.adaptive_sparse import (
    MODULE,
    AdaptiveSparseConfig,
    AdaptiveSparseState,
    adaptive_sparse_attention,
    kept_bias,
    module_stats,
)
from attncard.modules.adaptive_sparse import attention as sparse_attention
from attncard.modules.base import attention_layers
from attncard.modules.measure import PeakMemory
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
        _attention(top_k, causal), query, key, value, mask, scaling=0.35, output_attentions=True
    )
    assert output.shape == (3, 6, 4, 8)
    torch.testing.assert_close(output, _reference(query, key, value, mask, top_k, 0.35), atol=1e-5, rtol=1e-5)
    # Exactly min(k, allowed) keys per query, and every real query's probabilities sum to one.
    kept = (probabilities > 0).sum(dim=-1)
    torch.testing.assert_close(kept, mask.sum(dim=-1).clamp(max=top_k).expand_as(kept))
    torch.testing.assert_close(probabilities.sum(dim=-1), torch.ones_like(kept, dtype=torch.float))


@pytest.mark.parametrize("causal", [False, True])
def test_short_inputs_without_autograd_take_the_sparse_tile_with_the_same_result(causal, monkeypatch):
    # Short inputs are one tile: a masked softmax over all N columns with autograd (training), the k kept
    # scores and value rows picked by index without it (inference). Both give the full matrix's result.
    query, key, value, mask = _inputs([6, 4, 0], causal=causal)
    expected, expected_probabilities = _full_matrix(query, key, value, mask, 3, 0.35, causal)
    dense_tiles = []
    dense_tile = sparse_attention._dense_tile
    monkeypatch.setattr(
        sparse_attention, "_dense_tile", lambda *args: dense_tiles.append(1) or dense_tile(*args)
    )
    for grad in (False, True):
        dense_tiles.clear()
        inputs = [tensor.clone().requires_grad_(grad) for tensor in (query, key, value)]
        output, probabilities = adaptive_sparse_attention(
            _attention(3, causal), *inputs, mask, scaling=0.35, output_attentions=True
        )
        assert dense_tiles == ([1] if grad else [])
        torch.testing.assert_close(output.detach(), expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(probabilities.detach(), expected_probabilities, atol=1e-5, rtol=1e-5)


def test_k_one_attends_to_exactly_the_best_key():
    query, key, value, mask = _inputs([6, 3])
    output, probabilities = adaptive_sparse_attention(
        _attention(1, False), query, key, value, mask, scaling=1.0, output_attentions=True
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
    bias, threshold, empty = kept_bias(scores, allowed, 2)
    assert (bias == 0).sum(dim=-1).tolist() == [[[2, 2, 2]]]
    assert threshold.flatten().tolist() == [0.0, 0.0, 0.0]
    assert empty is None
    allowed[..., 1:] = False  # a row with fewer allowed keys than k keeps what it has
    bias, threshold, empty = kept_bias(scores, allowed, 2)
    assert (bias == 0).sum(dim=-1).tolist() == [[[1, 1, 1]]]
    assert threshold.flatten().tolist() == [float("-inf")] * 3
    allowed[:, :, 1] = False  # a row with no allowed key keeps nothing, and is reported as empty
    bias, threshold, empty = kept_bias(scores, allowed, 2)
    assert (bias == 0).sum(dim=-1).tolist() == [[[1, 0, 1]]]
    assert empty.flatten().tolist() == [False, True, False]
    assert torch.isfinite(bias).all()  # finite: the softmax of a row with nothing kept is not NaN


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
    output, probabilities = adaptive_sparse_attention(
        _attention(3, True), *half, mask, scaling=0.35, output_attentions=True
    )
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
def test_the_stats_count_training_passes_through_peft(tiny_model_dir, family):
    loaded, batch = load_with_padded_batch(tiny_model_dir(family))
    config = AdaptiveSparseConfig(top_k=4, warmup_steps=1)
    MODULE.apply(loaded.model, config)
    targets = MODULE.training.lora_targets(family, config)
    lora = LoraConfig(task_type=TaskType.SEQ_CLS, r=4, target_modules=targets)
    model = get_peft_model(loaded.model, lora)
    model.train()
    for _ in range(2):
        model(**batch, labels=torch.tensor([1, 0, 0])).loss.backward()
    stats = module_stats(model)  # read through the peft wrapper
    json.dumps(stats)  # results.json takes it as it is
    assert stats["top_k"] == 4
    assert [layer["training_forward_passes"] for layer in stats["layers"]] == [2, 2]
    assert all(layer["warmup_done"] for layer in stats["layers"])
    assert len(stats["layers"]) == len(attention_layers(loaded.model))


def test_trace_records_the_selection(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(sparse_attention, "top_k_kernel", lambda: None)  # the tiles with torch.topk
    loaded, batch = load_with_padded_batch(tiny_model_dir("llama"))
    MODULE.apply(loaded.model, AdaptiveSparseConfig(top_k=2))
    steps = record_trace(loaded.model, batch)
    stages = [step.stage for step in steps]
    assert stages[3:7] == ["attention scores", "top-k selection", "softmax", "weighted sum"]
    b, n = batch["input_ids"].shape
    heads = loaded.model.config.num_attention_heads
    # Traced without autograd, as inference runs: one sparse tile, the k kept keys of each query by index.
    assert steps[3].inputs["key"].shape == steps[3].inputs["scaled query"].shape  # key heads repeated (GQA)
    assert steps[3].outputs["scores"].shape == [b, heads, n, n]
    assert steps[4].outputs["indices"].shape == [b, heads, n, 2]
    assert steps[4].outputs["threshold"].shape == [b, heads, n, 1]
    assert steps[5].outputs["probabilities"].shape == [b, heads, n, 2]


# ----------------------------------------------------------------------------------------------------------
# The tiled computation against the full-matrix one it replaced


def _full_matrix(query, key, value, mask, top_k: int | None, scaling: float, causal: bool):
    """The former implementation: the whole (B, H, N, N) score matrix, the top-k keep mask (all allowed keys
    when `top_k` is None), a masked softmax over all N columns, a dense P·V. Returns (output, P)."""
    groups = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    scores = torch.matmul(query, key.transpose(-2, -1)) * scaling
    n_q, n_k = scores.shape[-2:]
    if mask is None:
        mask = torch.ones(n_q, n_k, dtype=torch.bool)
        mask = (mask.tril(diagonal=n_k - n_q) if causal else mask)[None, None]
    allowed = mask.expand_as(scores)
    if top_k is None:
        keep = allowed
    else:
        indices = scores.detach().masked_fill(~allowed, float("-inf")).topk(min(top_k, n_k), dim=-1).indices
        keep = torch.zeros_like(allowed).scatter_(-1, indices, True) & allowed
    masked = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    probabilities = masked.softmax(dim=-1, dtype=torch.float32).to(value.dtype).masked_fill(~keep, 0.0)
    return torch.matmul(probabilities, value).transpose(1, 2), probabilities


@pytest.fixture
def small_tiles(monkeypatch):
    """Tiles of a given shape (batch rows, heads, query rows) from 8 keys on, so that short inputs take the
    tiled path (`torch.topk`, the compiled kernel left out)."""

    def set_tiles(tile: tuple[int, int, int]) -> None:
        monkeypatch.setattr(sparse_attention, "SINGLE_BLOCK_MAX_KEYS", 8)
        monkeypatch.setattr(sparse_attention, "query_tiles", lambda *shape, **options: tile)
        monkeypatch.setattr(sparse_attention, "top_k_kernel", lambda: None)  # tiles, not the compiled call

    return set_tiles


TILED_CASES = {
    # name: (row lengths, N, heads, kv heads, causal, padding mask given, top_k, tile), the tile as
    # (batch rows, heads, query rows)
    "encoder, no mask, N not a multiple of the tile": ([37], 37, 4, 4, False, False, 5, (1, 1, 6)),
    "encoder, padded batch, GQA": ([37, 20, 3, 0], 37, 4, 2, False, True, 5, (1, 1, 8)),
    "decoder, no mask (keys cut at the tile's last row)": ([29, 29], 29, 4, 2, True, False, 4, (1, 1, 5)),
    "decoder, padded batch": ([29, 11, 2], 29, 2, 1, True, True, 3, (1, 1, 7)),
    "top_k beyond N: full rows": ([23, 9], 23, 2, 2, False, True, 40, (1, 1, 4)),
    "several heads per tile": ([12, 12], 12, 6, 3, False, False, 3, (1, 2, 12)),
    "several batch rows per tile": ([10, 7, 10], 10, 2, 2, True, True, 2, (2, 2, 10)),
    # Tiles of every head of a block of query rows, the long inputs' tiles (`query_tiles`)
    "every head: encoder, no mask, N not a multiple of tiles": ([37], 37, 4, 4, False, False, 5, (1, 4, 6)),
    "every head: encoder, padded batch, GQA": ([37, 20, 3, 0], 37, 4, 2, False, True, 5, (1, 4, 8)),
    "every head: decoder, no mask": ([29, 29], 29, 4, 2, True, False, 4, (1, 4, 5)),
    "every head: decoder, padded batch": ([29, 11, 2], 29, 2, 1, True, True, 3, (1, 2, 7)),
    "every head: top_k beyond N": ([23, 9], 23, 2, 2, False, True, 40, (1, 2, 4)),
    "every head: one row per tile, k of 1": ([15, 15], 15, 3, 1, False, False, 1, (1, 3, 1)),
}


def _case(name: str):
    lengths, n, heads, kv_heads, causal, masked, top_k, tile = TILED_CASES[name]
    query, key, value, mask = _inputs(lengths, n=n, heads=heads, kv_heads=kv_heads, dim=8, causal=causal)
    return query, key, value, (mask if masked else None), causal, top_k, tile


@pytest.mark.parametrize("name", TILED_CASES)
def test_tiles_equal_the_full_matrix(name, small_tiles):
    query, key, value, mask, causal, top_k, tile = _case(name)
    small_tiles(tile)
    module = _attention(top_k, causal)
    with torch.no_grad():  # the no-grad path writes every tile into the result
        output, probabilities = adaptive_sparse_attention(
            module, query, key, value, mask, scaling=0.35, output_attentions=True
        )
    expected, expected_probabilities = _full_matrix(query, key, value, mask, top_k, 0.35, causal)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(probabilities, expected_probabilities, atol=1e-5, rtol=1e-5)
    assert torch.equal(probabilities > 0, expected_probabilities > 0)  # the same keys kept
    output_only, nothing = adaptive_sparse_attention(module, query, key, value, mask, scaling=0.35)
    assert nothing is None  # no (B, H, N, N) probabilities unless the model asks for attentions
    torch.testing.assert_close(output_only, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", TILED_CASES)
def test_tiles_have_the_full_matrix_gradients(name, small_tiles):
    query, key, value, mask, causal, top_k, tile = _case(name)
    small_tiles(tile)
    weights = torch.randn(query.shape[0], query.shape[2], query.shape[1], query.shape[3])
    grads = []
    for attend in (
        lambda q, k, v: adaptive_sparse_attention(
            _attention(top_k, causal).train(), q, k, v, mask, scaling=0.35
        ),
        lambda q, k, v: _full_matrix(q, k, v, mask, top_k, 0.35, causal),
    ):
        leaves = [tensor.clone().requires_grad_(True) for tensor in (query, key, value)]
        (attend(*leaves)[0] * weights).sum().backward()
        grads.append([leaf.grad for leaf in leaves])
    for got, expected in zip(*grads, strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("tile", [(1, 1, 6), (1, 4, 6), (1, 4, 1)])
@pytest.mark.parametrize("causal, masked", [(False, False), (True, False), (False, True), (True, True)])
def test_tiles_with_the_two_stage_top_k(tile, causal, masked, small_tiles, monkeypatch):
    """Chunks of 4 keys, so that rows of 64 keys take the two-stage top-k (16 chunks, at least 2k); a causal
    tile without padding reads its keys up to a whole chunk past its last row."""
    monkeypatch.setattr(sparse_attention, "CHUNK", 4)
    small_tiles(tile)
    query, key, value, mask = _inputs([64, 45], n=64, heads=4, kv_heads=2, dim=8, causal=causal)
    mask = mask if masked else None
    expected, expected_probabilities = _full_matrix(query, key, value, mask, 2, 0.35, causal)
    with torch.no_grad():
        output, probabilities = adaptive_sparse_attention(
            _attention(2, causal), query, key, value, mask, scaling=0.35, output_attentions=True
        )
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(probabilities > 0, expected_probabilities > 0)
    leaves = [tensor.clone().requires_grad_(True) for tensor in (query, key, value)]
    output, _ = adaptive_sparse_attention(_attention(2, causal).train(), *leaves, mask, scaling=0.35)
    output.square().sum().backward()
    expected_leaves = [tensor.clone().requires_grad_(True) for tensor in (query, key, value)]
    _full_matrix(*expected_leaves, mask, 2, 0.35, causal)[0].square().sum().backward()
    for got, wanted in zip(leaves, expected_leaves, strict=True):
        torch.testing.assert_close(got.grad, wanted.grad, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["decoder, padded batch", "every head: decoder, padded batch"])
def test_tiles_in_half_precision_and_with_a_float_mask(name, small_tiles):
    query, key, value, mask, causal, top_k, tile = _case(name)
    small_tiles(tile)
    additive = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    output, _ = adaptive_sparse_attention(
        _attention(top_k, causal), query, key, value, additive, scaling=0.35
    )
    expected, _ = _full_matrix(query, key, value, mask, top_k, 0.35, causal)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    half = [tensor.to(torch.bfloat16) for tensor in (query, key, value)]
    output, _ = adaptive_sparse_attention(_attention(top_k, causal), *half, mask, scaling=0.35)
    assert output.dtype == torch.bfloat16
    expected, _ = _full_matrix(*(tensor.float() for tensor in half), mask, top_k, 0.35, causal)
    torch.testing.assert_close(output.float(), expected, atol=2e-2, rtol=2e-2)


def test_tiles_warm_up_with_full_attention_and_apply_dropout(small_tiles):
    query, key, value, mask, causal, _, tile = _case("encoder, padded batch, GQA")
    small_tiles(tile)
    module = _attention(2, causal, warmup_steps=1).train()
    output, _ = adaptive_sparse_attention(module, query, key, value, mask, scaling=0.35)
    torch.testing.assert_close(output, _full_matrix(query, key, value, mask, None, 0.35, causal)[0])
    output, _ = adaptive_sparse_attention(module, query, key, value, mask, scaling=0.35)  # warm-up over
    torch.testing.assert_close(output, _full_matrix(query, key, value, mask, 2, 0.35, causal)[0])
    torch.manual_seed(0)
    dropped, probabilities = adaptive_sparse_attention(
        module, query, key, value, mask, scaling=0.35, dropout=0.5, output_attentions=True
    )
    assert torch.isfinite(dropped).all() and not torch.allclose(dropped, output)
    # Each kept probability is dropped (0) or doubled: at most the 2 kept keys are non-zero, and some are 0.
    kept = (probabilities > 0).sum(dim=-1)
    assert kept.max() <= 2 and (kept[0] < 2).any()


def test_the_trace_shows_the_first_tile(small_tiles, monkeypatch):
    query, key, value, mask, causal, top_k, tile = _case("encoder, padded batch, GQA")
    small_tiles(tile)
    rows = tile[2]
    steps = []
    monkeypatch.setattr(
        sparse_attention,
        "trace_step",
        lambda module, stage, op, inputs, outputs: steps.append((stage, op, outputs)),
    )
    adaptive_sparse_attention(_attention(top_k, causal), query, key, value, mask, scaling=0.35)
    assert [stage for stage, _, _ in steps] == [
        "attention scores",
        "top-k selection",
        "softmax",
        "weighted sum",
    ]
    n = query.shape[2]
    tiles = len(range(0, n, rows)) * query.shape[0] * query.shape[1]
    assert f"the first of {tiles} query tiles" in steps[0][1]
    assert steps[0][2]["scores"].shape == (1, 1, rows, n)
    assert steps[1][2]["indices"].shape == (1, 1, rows, top_k)
    assert steps[3][2]["output"].shape == (1, 1, rows, query.shape[3])


def test_long_inputs_build_no_n_by_n_tensor(monkeypatch):
    """N = 2048 tokens, 2 heads: one N×N float32 matrix per head would be 16 MiB, the pair 32 MiB."""
    n, heads, dim = 2048, 2, 16
    # At most TILE_SCORES // N = 112 rows per tile: 19 tiles, evened out to 108 rows.
    assert sparse_attention.query_tiles(1, heads, n, n) == (1, 1, 108)
    query, key, value = (torch.randn(1, heads, n, dim) for _ in range(3))
    largest = []
    topk = torch.Tensor.topk

    def recording_topk(self, *args, **kwargs):
        largest.append(self.numel())
        return topk(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "topk", recording_topk)
    monkeypatch.setattr(sparse_attention, "top_k_kernel", lambda: None)  # the tiles (the kernel: below)
    monkeypatch.setattr(sparse_attention, "top_k_rows_kernel", lambda: None)  # with torch.topk, recorded
    for causal in (False, True):
        largest.clear()
        module = _attention(8, causal)
        with torch.no_grad():
            adaptive_sparse_attention(module, query, key, value, None, scaling=dim**-0.5)  # warm-up
            # The tensors torch allocates, not the resident set, which threads of other tests' servers in
            # this process (make test-all runs it single-process) can move by megabytes.
            with PeakMemory(torch.device("cpu"), exact=True) as memory:
                output, _ = adaptive_sparse_attention(module, query, key, value, None, scaling=dim**-0.5)
        assert largest and max(largest) <= sparse_attention.TILE_SCORES  # every selection reads one tile
        # The output (256 KiB) plus one tile (under 1 MiB) and small change; an N×N matrix alone is 16 MiB.
        assert memory.exact
        assert memory.peak_mb < 4, memory.peak_mb
        # and still exact
        expected, _ = _full_matrix(query, key, value, None, 8, dim**-0.5, causal)
        torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("masked", [False, True])
def test_the_two_stage_selection_is_torch_topk(masked):
    generator = torch.Generator().manual_seed(1)
    scores = torch.randn(2, 3, 5, 1024, generator=generator)  # 16 chunks of 64 keys: two stages for k = 8
    if masked:  # rows with few allowed keys, all in one chunk or spread; one row with none
        allowed = torch.rand(2, 3, 5, 1024, generator=generator) < 0.3
        allowed[0, 0, 0] = False
        allowed[0, 0, 0, 70:73] = True
        allowed[0, 0, 1] = False
        allowed[1, 2, 4] = False
        scores = scores.masked_fill(~allowed, float("-inf"))
    values, indices = sparse_attention.top_k_of_rows(scores, 8)
    expected = scores.topk(8, dim=-1)
    assert torch.equal(values, expected.values)
    finite = values > float("-inf")  # among -inf (disallowed) keys the choice is free
    assert torch.equal(indices[finite], expected.indices[finite])
    assert torch.equal(scores.gather(-1, indices), values)


@pytest.mark.parametrize("tile", [(1, 1, 5), (1, 4, 5), (2, 4, 16)])
@pytest.mark.parametrize("layout", ["projection", "fused projection", "expanded key heads"])
def test_tiles_read_the_layouts_models_pass(tile, layout, small_tiles):
    """Models pass q, k, v as transposed views of their projections, (B, N, H, D) read as (B, H, N, D),
    sometimes slices of one fused projection; the value rows are read in place ([`row_table`])."""
    generator = torch.Generator().manual_seed(2)
    batch, n, heads, dim = 2, 16, 4, 8
    if layout == "fused projection":  # q, k and v side by side in one (B, N, 3·H·D) tensor
        fused = torch.randn(batch, n, 3 * heads * dim, generator=generator)
        query, key, value = (part.view(batch, n, heads, dim).transpose(1, 2) for part in fused.chunk(3, -1))
    else:
        shape = (batch, n, heads, dim)
        query, key, value = (torch.randn(shape, generator=generator).transpose(1, 2) for _ in "qkv")
        if layout == "expanded key heads":  # one key and value head, expanded (stride 0), not copied
            key, value = key[:, :1].expand_as(query), value[:, :1].expand_as(query)
    small_tiles(tile)
    for causal in (False, True):
        output, _ = adaptive_sparse_attention(_attention(3, causal), query, key, value, None, scaling=0.35)
        expected, _ = _full_matrix(query, key, value, None, 3, 0.35, causal)
        torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)


def test_the_row_table_reads_value_rows_in_place():
    generator = torch.Generator().manual_seed(3)
    base = torch.randn(2, 5, 3 * 4 * 6, generator=generator)
    values = {
        "contiguous": torch.randn(2, 3, 5, 6, generator=generator),
        "projection": base[..., :72].reshape(2, 5, 12, 6)[:, :, :3].transpose(1, 2),
        "fused slice": base[..., 24:48].view(2, 5, 4, 6).transpose(1, 2),
        "expanded heads": torch.randn(2, 1, 5, 6, generator=generator).expand(2, 3, 5, 6),
        "one batch row of a batch": torch.randn(3, 3, 5, 6, generator=generator)[1:2],
    }
    for name, value in values.items():
        table, b_step, h_step, n_step = sparse_attention.row_table(value)
        assert table.data_ptr() == value.data_ptr(), name  # a view, no copy
        for b, h, j in itertools.product(*map(range, value.shape[:-1])):
            assert torch.equal(table[b * b_step + h * h_step + j * n_step], value[b, h, j]), name
    assert sparse_attention.row_table(torch.randn(1, 2, 6, 5).transpose(-2, -1)) is None  # D not contiguous


def test_weighted_rows_with_and_without_autograd():
    generator = torch.Generator().manual_seed(4)
    value = torch.randn(2, 3, 7, 5, generator=generator)
    indices = torch.randint(0, 7, (2, 3, 4, 2), generator=generator)
    weights = torch.rand(2, 3, 4, 2, generator=generator)
    expected = torch.zeros(2, 3, 4, 5)
    for b, h, r in itertools.product(range(2), range(3), range(4)):
        expected[b, h, r] = weights[b, h, r] @ value[b, h, indices[b, h, r]]
    in_place = sparse_attention.weighted_rows(value, indices, weights)  # torch.embedding_bag over the rows
    torch.testing.assert_close(in_place, expected)
    leaf = value.clone().requires_grad_(True)
    gathered = sparse_attention.weighted_rows(leaf, indices, weights)  # gathered rows, for the backward
    torch.testing.assert_close(gathered, expected)
    gathered.sum().backward()
    expected_grad = torch.zeros_like(value).index_put_(
        (torch.arange(2)[:, None, None, None], torch.arange(3)[None, :, None, None], indices),
        weights[..., None].expand(-1, -1, -1, -1, 5),
        accumulate=True,
    )
    torch.testing.assert_close(leaf.grad, expected_grad)
