"""adaptive_span: spans learn, the mask is the paper's, global tokens see everything, both paths agree."""

from __future__ import annotations

import math

import pytest
import torch

from attncard.modules.adaptive_span import MODULE, AdaptiveSpanConfig, mean_span, module_stats, span_penalty
from attncard.modules.adaptive_span.attention import (
    WHOLE_MASK_LENGTH,
    AdaptiveSpan,
    adaptive_span_attention,
    dense_span_attention,
    fused_block_mask,
    fused_span_attention,
    global_key_shortfall,
    whole_span_mask,
)
from attncard.pipeline.run.models import load_model, tokenize

LABELS = ["negative", "positive"]
TEXTS = [
    "a gorgeous , witty , seductive movie that allows us to hope for the best of what cinema can still do .",
    "bleak and desperate .",
]


def _tiny(tiny_model_dir, family, **config):
    torch.manual_seed(0)
    loaded = load_model(str(tiny_model_dir(family)), LABELS)
    MODULE.apply(loaded.model, AdaptiveSpanConfig(**config))
    batch = tokenize(loaded.tokenizer, {"sentence": TEXTS}, ("sentence",), max_length=64)
    return loaded, batch


def test_soft_mask_is_the_papers_ramp():
    span = AdaptiveSpan(num_heads=2, max_span=20, ramp=4, init_logit=0.0)  # z = 10 for both heads
    with torch.no_grad():
        span.span_logits[1] = math.log(1 / 3)  # σ = 0.25: z = 5
    log_mask = span.log_mask(16)
    mask = log_mask.exp()
    # m(x) = clamp((R + z − x)/R, 0, 1)
    for head, z in ((0, 10.0), (1, 5.0)):
        for x in range(17):
            assert mask[head, x].item() == pytest.approx(min(1.0, max(0.0, (4 + z - x) / 4)), abs=1e-6)
    assert span.windows(100).tolist() == [13, 8]  # ⌈z + R⌉ − 1: the farthest non-zero weight
    assert span.windows(6).tolist() == [5, 5]  # capped at length − 1
    assert torch.isinf(log_mask[1, 9:]).all() and not torch.isinf(log_mask[1, :9]).any()


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_span_logits_get_gradients_inside_the_sequence(tiny_model_dir, family):
    loaded, batch = _tiny(tiny_model_dir, family, max_span=16, ramp=4, init_logit=-1.0)  # z ≈ 4.3 tokens
    loaded.model.train()
    loss = loaded.model(**batch, labels=torch.tensor([1, 0])).logits.logsumexp(-1).sum()
    loss.backward()
    first, last = [m for m in loaded.model.modules() if isinstance(m, AdaptiveSpan)]
    assert first.span_logits.grad.abs().min() > 0  # every head of the first layer
    # The classifier reads only the global token, which ignores spans: in the last layer the task gives the
    # spans no gradient at all, only the penalty does.
    assert last.span_logits.grad.abs().max() == 0


def test_penalty_warms_up_and_pulls_spans_down(tiny_model_dir):
    loaded, _ = _tiny(tiny_model_dir, "bert", max_span=64, penalty=0.5, penalty_warmup_steps=10)
    config = AdaptiveSpanConfig(max_span=64, penalty=0.5, penalty_warmup_steps=10)
    assert span_penalty(loaded.model, config, 0).item() == 0.0
    z = mean_span(loaded.model)
    assert span_penalty(loaded.model, config, 5).item() == pytest.approx(0.25 * z / 64, rel=1e-5)
    assert span_penalty(loaded.model, config, 50).item() == pytest.approx(0.5 * z / 64, rel=1e-5)
    span_penalty(loaded.model, config, 50).backward()
    for module in loaded.model.modules():
        if isinstance(module, AdaptiveSpan):
            assert (module.span_logits.grad > 0).all()  # descending the penalty shrinks every span


def _random_inputs(batch=2, heads=3, length=23, dim=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, length, dim, generator=generator) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True])
def test_banded_and_dense_paths_agree(causal):
    """Inference (banded kernel) and training (dense bias) compute the same attention."""
    query, key, value = _random_inputs()
    span = AdaptiveSpan(num_heads=3, max_span=12, ramp=3, init_logit=0.0)
    with torch.no_grad():
        span.span_logits.copy_(torch.tensor([-2.0, 0.0, 3.0]))
    padding = torch.ones(2, 23, dtype=torch.bool)
    padding[1, 15:] = False
    mask = padding[:, None, None, :].expand(2, 1, 23, 23)
    if causal:
        mask = mask & torch.tril(torch.ones(23, 23, dtype=torch.bool))
    layer = torch.nn.Module()
    layer.is_causal, layer.adaptive_span = causal, span
    layer.eval()
    banded, _ = adaptive_span_attention(layer, query, key, value, mask, scaling=0.3)
    global_index = torch.tensor([22, 14]) if causal else torch.tensor([0, 0])
    windows = span.windows(23)
    dense = dense_span_attention(
        query,
        key,
        value,
        span.log_mask(int(windows.max())),
        scaling=0.3,
        causal=causal,
        key_padding_mask=padding,
        global_index=global_index,
        dropout=0.0,
    ).transpose(1, 2)
    real = padding[:, :, None, None].expand_as(dense)  # padding queries may differ, real ones may not
    torch.testing.assert_close(banded[real], dense[real], atol=1e-5, rtol=1e-5)


def test_last_real_token_of_a_decoder_row_sees_every_earlier_real_token():
    """Even with spans of a token or two, the global token (the last real one) attends the whole row."""
    length = 12
    query = key = torch.zeros(1, 1, length, length)  # every score 0: weights show the mask alone
    value = torch.eye(length)[None, None]  # value j = one-hot(j): each output row is its attention weights
    padding = torch.ones(1, length, dtype=torch.bool)
    padding[0, 9:] = False  # real tokens 0 … 8
    mask = padding[:, None, None, :] & torch.tril(torch.ones(length, length, dtype=torch.bool))
    span = AdaptiveSpan(num_heads=1, max_span=4, ramp=1, init_logit=-4.0)  # z ≈ 0.07: window 1
    layer = torch.nn.Module()
    layer.is_causal, layer.adaptive_span = True, span
    layer.eval()
    output, _ = adaptive_span_attention(layer, query, key, value, mask, scaling=1.0)
    weights = output[0, :, 0, :]  # (N, N): row i holds the weights of query i
    torch.testing.assert_close(weights[8, :9], torch.full((9,), 1 / 9))  # every real token, equally
    assert weights[8, 9:].abs().max() == 0
    assert (weights[5, :4] == 0).all() and (weights[5, 6:] == 0).all()  # an ordinary query: its window
    z = span.spans().item()
    assert weights[5, 4].item() == pytest.approx(z / (1 + z), rel=1e-4)  # m(1) = z, m(0) = 1


def test_module_stats(tiny_model_dir):
    loaded, _ = _tiny(tiny_model_dir, "bert", max_span=8, ramp=2, init_logit=0.0)  # z = 4, window 5
    stats = module_stats(loaded.model, lengths=[10, 20])
    assert len(stats["spans"]) == 2 and len(stats["spans"][0]) == 4
    assert stats["mean_span"] == pytest.approx(4.0)
    assert stats["windows"][0] == [5, 5, 5, 5]
    # Length 10: pairs with |i − j| ≤ 5 plus the [CLS] row and column; by hand: 84 in band + 8 global.
    in_band_10 = sum(1 for i in range(10) for j in range(10) if abs(i - j) <= 5)
    in_band_20 = sum(1 for i in range(20) for j in range(20) if abs(i - j) <= 5)
    extra_10 = sum(1 for i in range(10) for j in range(10) if abs(i - j) > 5 and (i == 0 or j == 0))
    extra_20 = sum(1 for i in range(20) for j in range(20) if abs(i - j) > 5 and (i == 0 or j == 0))
    kept = in_band_10 + extra_10 + in_band_20 + extra_20
    assert stats["skipped_pair_share"] == pytest.approx(1 - kept / (100 + 400))


def test_trainable_through_peft(tiny_model_dir):
    from peft import LoraConfig, TaskType, get_peft_model

    loaded, _ = _tiny(tiny_model_dir, "bert", max_span=16, init_logit=0.0)
    model = get_peft_model(
        loaded.model,
        LoraConfig(
            task_type=TaskType.SEQ_CLS,
            target_modules=["query", "value"],
            modules_to_save=list(MODULE.training.trainable_modules),
        ),
    )
    names = [name for name, p in model.named_parameters() if p.requires_grad and "span_logits" in name]
    assert len(names) == 2  # one per layer


def test_under_peft_the_trained_copy_is_used(tiny_model_dir):
    from peft import LoraConfig, TaskType, get_peft_model

    from attncard.modules.adaptive_span.model import span_modules

    loaded, batch = _tiny(tiny_model_dir, "bert", max_span=16, init_logit=0.0)
    model = get_peft_model(
        loaded.model,
        LoraConfig(
            task_type=TaskType.SEQ_CLS,
            target_modules=["query", "value"],
            modules_to_save=list(MODULE.training.trainable_modules),
        ),
    )
    spans = span_modules(model)
    assert len(spans) == 2 and all(s.span_logits.requires_grad for s in spans)
    with torch.no_grad():
        for s in spans:
            s.span_logits.fill_(-3.0)  # train the copy only
    assert mean_span(model) == pytest.approx(16 * torch.sigmoid(torch.tensor(-3.0)).item(), rel=1e-5)
    model.eval()
    with torch.no_grad():
        short = model(**batch).logits
        model.disable_adapter_layers()
        original = model(**batch).logits
    assert not torch.allclose(short, original)  # the forward pass read the trained spans


# ----------------------------------------------------------------------------------------------------------
# Inference dispatch: dense when the spans cover the sequence, below the measured crossover one fused call
# with the whole mask (short sequences) or fused calls on blocks of rows, the banded kernel from the
# crossover; every path computes the reference.


def _layer(span, causal, groups=None):
    layer = torch.nn.Module()
    layer.is_causal, layer.adaptive_span = causal, span
    if groups:
        layer.num_key_value_groups = groups
    return layer.eval()


def _spy_paths(monkeypatch):
    from attncard.modules.adaptive_span import attention

    calls = []
    for name in ("whole_mask_attention", "fused_span_attention", "banded_attention"):
        original = getattr(attention, name)

        def spy(*args, _name=name, _original=original, **kwargs):
            calls.append(_name.split("_")[0])
            return _original(*args, **kwargs)

        monkeypatch.setattr(attention, name, spy)
    return calls


def _short_spans(heads, global_token=True):
    span = AdaptiveSpan(num_heads=heads, max_span=12, ramp=3, init_logit=0.0, global_token=global_token)
    with torch.no_grad():
        span.span_logits.copy_(torch.linspace(-2.0, 3.0, heads))
    return span


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("global_token", [True, False])
@pytest.mark.parametrize("groups", [None, 3])  # grouped-query attention: 1 key/value head for 3 query heads
@pytest.mark.parametrize("crossover", [0, 1000])  # the banded kernel, or the fused call where it can run
@pytest.mark.parametrize("length", [41, WHOLE_MASK_LENGTH + 32])  # one fused call, or blocks of rows
def test_every_inference_path_computes_the_reference(
    monkeypatch, causal, padded, global_token, groups, crossover, length
):
    query, key, value = _random_inputs(length=length)
    if groups:
        key, value = key[:, :1], value[:, :1]
    span = _short_spans(3, global_token)
    span.crossover.fill_(crossover)
    padding = torch.ones(2, length, dtype=torch.bool)
    if padded:
        padding[1, 30:] = False
    mask = padding[:, None, None, :].expand(2, 1, length, length)
    if causal:
        mask = mask & torch.tril(torch.ones(length, length, dtype=torch.bool))
    calls = _spy_paths(monkeypatch)
    with torch.no_grad():
        output, _ = adaptive_span_attention(
            _layer(span, causal, groups), query, key, value, mask if padded else None, scaling=0.3
        )
    fused = "whole" if length <= WHOLE_MASK_LENGTH else "fused"
    assert calls == [fused if crossover and not padded else "banded"]
    global_index = None
    if global_token:
        global_index = (
            torch.tensor([length - 1, 29 if padded else length - 1]) if causal else torch.zeros(2).long()
        )
    reference = dense_span_attention(
        query,
        key.expand_as(query),
        value.expand_as(query),
        span.log_mask(int(span.windows(length).max())),
        scaling=0.3,
        causal=causal,
        key_padding_mask=padding,
        global_index=global_index,
        dropout=0.0,
    ).transpose(1, 2)
    real = padding[:, :, None, None].expand_as(reference)
    torch.testing.assert_close(output[real], reference[real], atol=1e-5, rtol=1e-5)


def _fused(span, query, key, value, *, causal, global_token, block, call_rows):
    """`fused_span_attention` with the masks of `span`'s plan, its blocks of `block` rows; and the plan."""
    length = query.shape[2]
    with torch.no_grad():
        plan = span.plan(length, causal, torch.float32)
        output = fused_span_attention(
            query,
            key,
            value,
            fused_block_mask(plan.log_mask, causal, block),
            global_key_shortfall(plan.log_mask, length),
            scaling=0.3,
            causal=causal,
            global_token=global_token,
            window=plan.window,
            call_rows=call_rows,
        )
    return output, plan


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("global_token", [True, False])
# Blocks of query rows and rows per call: blocks cut by either end only, one per call, several per call,
# a last call with fewer, and blocks longer than the sequence.
@pytest.mark.parametrize(("block", "call_rows"), [(1, 1), (4, 4), (4, 12), (8, 24), (12, 512), (64, 64)])
@pytest.mark.parametrize("layout", ["layer", "contiguous"])
def test_the_fused_path_in_blocks_of_rows_computes_the_reference(
    causal, global_token, block, call_rows, layout
):
    length = 41
    inputs = _random_inputs(length=length)
    if layout == "layer":  # the (B, N, H, D) memory a layer hands over
        inputs = tuple(x.transpose(1, 2).contiguous().transpose(1, 2) for x in inputs)
    query, key, value = inputs
    output, plan = _fused(
        _short_spans(3, global_token),
        query,
        key,
        value,
        causal=causal,
        global_token=global_token,
        block=block,
        call_rows=call_rows,
    )
    assert 0 < plan.window < length - 1  # a band narrower than the sequence: blocks skip keys
    global_index = torch.full((2,), length - 1 if causal else 0) if global_token else None
    reference = dense_span_attention(
        query,
        key,
        value,
        plan.log_mask,
        scaling=0.3,
        causal=causal,
        key_padding_mask=None,
        global_index=global_index,
        dropout=0.0,
    )
    assert output.is_contiguous()
    torch.testing.assert_close(output, reference.transpose(1, 2), atol=1e-5, rtol=1e-5)


def test_the_plans_of_every_length_share_their_masks():
    span = _short_spans(3)
    with torch.no_grad():
        plans = [span.plan(length, False, torch.float32) for length in (300, 400, 500)]  # blocks of 32
        assert plans[0].window == plans[1].window == plans[2].window
        assert plans[0].block_mask is plans[1].block_mask is plans[2].block_mask
        assert all(plan.whole_mask is None for plan in plans)
        assert [plan.missing.shape[1] for plan in plans] == [300, 400, 500]  # per length
        torch.testing.assert_close(plans[0].block_mask, fused_block_mask(plans[0].log_mask, False, 32))
        # Up to WHOLE_MASK_LENGTH: corners of one whole mask, read in place.
        short = [span.plan(length, False, torch.float32) for length in (23, 64, WHOLE_MASK_LENGTH)]
        assert all(plan.block_mask is None and plan.missing is None for plan in short)
        assert [tuple(plan.whole_mask.shape) for plan in short] == [(1, 3, n, n) for n in (23, 64, 128)]
        assert len({plan.whole_mask.data_ptr() for plan in short}) == 1
        whole = whole_span_mask(short[0].log_mask, causal=False, global_token=True)
        torch.testing.assert_close(short[1].whole_mask, whole[:, :, :64, :64])
        span.span_logits.add_(0.5)  # other spans: other masks
        wider = span.plan(300, False, torch.float32)
        wider_short = span.plan(64, False, torch.float32)
    assert wider.block_mask is not plans[0].block_mask
    torch.testing.assert_close(wider.block_mask, fused_block_mask(wider.log_mask, False, 32))
    assert not torch.equal(wider_short.log_mask, short[1].log_mask)
    torch.testing.assert_close(
        wider_short.whole_mask, whole_span_mask(wider_short.log_mask, False, True)[:, :, :64, :64]
    )


@pytest.mark.parametrize("causal", [False, True])
def test_the_whole_mask_is_the_band_with_the_global_token_unmasked(causal):
    log_mask = torch.log(torch.tensor([[1.0, 0.5, 0.25], [1.0, 1.0, 0.5]]))  # two heads, W = 2
    mask = whole_span_mask(log_mask, causal, global_token=True, length=6)[0]
    for i in range(6):
        for j in range(6):
            offset = i - j
            inside = 0 <= offset <= 2 if causal else abs(offset) <= 2
            expected = log_mask[:, abs(offset)] if inside else torch.full((2,), -math.inf)
            if not causal and 0 in (i, j):  # the encoder's global token: row and column 0
                expected = torch.zeros(2)
            torch.testing.assert_close(mask[:, i, j], expected)


def test_the_fused_path_calls_batches_of_blocks_on_overlapping_views(monkeypatch):
    """The blocks inside the sequence go several to a call, their key windows read in place (no copy)."""
    from attncard.modules.adaptive_span import attention

    length, block = 64, 8
    inputs = _random_inputs(length=length)
    query, key, value = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in inputs)
    calls = []
    original = attention._FUSED_CPU_OP

    def recording(q, k, v, *args, **kwargs):
        shares_storage = k.untyped_storage().data_ptr() == key.untyped_storage().data_ptr()
        calls.append((tuple(q.shape), tuple(k.shape), shares_storage))
        return original(q, k, v, *args, **kwargs)

    monkeypatch.setattr(attention, "_FUSED_CPU_OP", recording)
    _, plan = _fused(
        _short_spans(3), query, key, value, causal=False, global_token=False, block=block, call_rows=4 * block
    )
    assert all(shares_storage for _, _, shares_storage in calls)  # every key window a view of the keys
    # Four blocks of 8 rows to a call, each against its block + 2W keys.
    assert (4, 3, block, 8) == next(q for q, _, _ in calls if q[0] > 1)  # (blocks, H, rows, D)
    assert {k[2] for q, k, _ in calls if q[0] > 1} == {block + 2 * plan.window}
    assert sum(q[0] * q[2] for q, _, _ in calls) == 2 * length  # every row once per batch row


@pytest.mark.parametrize("causal", [False, True])
def test_spans_that_cover_the_sequence_are_plain_sdpa(monkeypatch, causal):
    query, key, value = _random_inputs()
    span = AdaptiveSpan(num_heads=3, max_span=64, ramp=4, init_logit=4.0)  # z ≈ 62.8 > N + R: weight 1
    calls = _spy_paths(monkeypatch)
    with torch.no_grad():
        assert span.plan(23, causal, torch.float32).covers
        output, _ = adaptive_span_attention(_layer(span, causal), query, key, value, None, scaling=0.3)
    assert calls == []
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, scale=0.3, is_causal=causal
    )
    torch.testing.assert_close(output, expected.transpose(1, 2))
    # Spans shorter than the sequence are not dense.
    assert not span.plan(80, causal, torch.float32).covers


def test_the_dispatch_follows_the_crossover_padding_and_gradients(monkeypatch):
    query, key, value = _random_inputs()  # N = 23
    span = _short_spans(3)
    layer = _layer(span, causal=False)
    calls = _spy_paths(monkeypatch)
    padding = torch.ones(2, 1, 23, 23, dtype=torch.bool)
    padding[1, ..., 20:] = False
    with torch.no_grad():
        for crossover, mask in ((24, None), (23, None), (24, padding)):
            span.crossover.fill_(crossover)
            adaptive_span_attention(layer, query, key, value, mask, scaling=0.3)
    # Below the crossover one fused call (N = 23: the whole mask); at it the banded kernel; padded rows always
    # the banded kernel.
    assert calls == ["whole", "banded", "banded"]
    calls.clear()
    span.crossover.fill_(1000)
    adaptive_span_attention(layer, query, key, value, None, scaling=0.3)  # the spans' bias needs a gradient
    assert calls == ["banded"]


def test_the_plan_is_cached_until_the_spans_change():
    span = _short_spans(3)
    with torch.no_grad():
        first = span.plan(23, False, torch.float32)
        assert span.plan(23, False, torch.float32) is first
        span.span_logits.add_(0.5)
        changed = span.plan(23, False, torch.float32)
    assert changed is not first and not torch.equal(changed.log_mask, first.log_mask)
    assert span.plan(23, False, torch.float32).log_mask.requires_grad  # with grad: computed, not cached


def test_the_crossover_is_the_measured_length_from_which_the_banded_kernel_wins(tiny_model_dir, monkeypatch):
    from attncard.modules.adaptive_span import model as span_model

    loaded, _ = _tiny(tiny_model_dir, "bert", max_span=16, init_logit=-2.0)
    first = span_model.span_modules(loaded.model)[0]

    def fake_seconds(run, device):  # fused ∝ N², banded ∝ 40·N: the banded kernel wins above N = 40
        n = run.args[1].shape[-2]
        return float(n * n) if int(first.crossover) > n else 40.0 * n

    banded_mb_per_token = 0.01

    def fake_peak(run, device):  # the fused path 1 kB a token; the banded kernel `banded_mb_per_token`
        n = run.args[1].shape[-2]
        return 0.001 * n if int(first.crossover) > n else banded_mb_per_token * n

    monkeypatch.setattr(span_model, "wall_seconds", fake_seconds)
    monkeypatch.setattr(span_model, "peak_memory_mb", fake_peak)
    lengths = (16, 32, 64, 128)
    # Faster from N = 64 but ten times the memory: never the better path.
    measured = MODULE.training.calibrate(loaded.model, AdaptiveSpanConfig(), lengths=lengths, repeats=1)
    assert measured["crossover"] == 129
    banded_mb_per_token = 0.0005  # faster from N = 64, and half the memory
    measured = MODULE.training.calibrate(loaded.model, AdaptiveSpanConfig(), lengths=lengths, repeats=1)
    assert measured["crossover"] == 64
    assert [row["n"] for row in measured["crossover_table"]] == [16, 32, 64, 128]
    assert measured["crossover_table"][2] == {
        "n": 64,
        "fused_ms": 4096e3,
        "banded_ms": 2560e3,
        "fused_mb": 0.064,
        "banded_mb": 0.032,
    }
    assert [int(s.crossover) for s in span_model.span_modules(loaded.model)] == [64, 64]
    stats = module_stats(loaded.model)
    assert (stats["crossover"], stats["crossover_measured"]) == (64, True)
    assert stats["crossover_table"] == measured["crossover_table"]


def test_the_calibration_times_calls_whose_plans_are_already_built(tiny_model_dir, monkeypatch):
    # calibrate_crossover moves the crossover between every two calls. When that emptied the plan cache,
    # each timed call built its plan and masks again, and the calibration timed that as the path's cost:
    # 2.2 ms a call at N = 128 where a warm call took 0.29-0.49 ms, and the banded kernel, 1.5 times as fast
    # there, lost to the fused path up to N = 256.
    from attncard.modules.adaptive_span import model as span_model

    loaded, _ = _tiny(tiny_model_dir, "bert", max_span=16, init_logit=-2.0)
    built = []
    windows = AdaptiveSpan.windows
    monkeypatch.setattr(
        AdaptiveSpan, "windows", lambda self, length: built.append(length) or windows(self, length)
    )
    builds_while_timed = []
    wall_seconds = span_model.wall_seconds

    def counting_seconds(run, device):
        before = len(built)
        seconds = wall_seconds(run, device)
        builds_while_timed.append(len(built) - before)
        return seconds

    monkeypatch.setattr(span_model, "wall_seconds", counting_seconds)
    measured = MODULE.training.calibrate(loaded.model, AdaptiveSpanConfig(), lengths=(16, 32), repeats=3)
    assert [row["n"] for row in measured["crossover_table"]] == [16, 32]
    assert len(builds_while_timed) == 2 * 2 * 3 and not any(builds_while_timed)  # lengths × paths × repeats


def test_an_uncalibrated_model_reports_the_default_crossover(tiny_model_dir):
    from attncard.modules.adaptive_span.attention import DEFAULT_CROSSOVER

    loaded, _ = _tiny(tiny_model_dir, "bert", max_span=16)
    stats = module_stats(loaded.model)
    assert (stats["crossover"], stats["crossover_measured"]) == (DEFAULT_CROSSOVER, False)
    assert "crossover_table" not in stats


def test_the_crossover_is_saved_and_restored_with_the_adapter(tiny_model_dir, tmp_path):
    from peft import LoraConfig, PeftModel, TaskType, get_peft_model

    from attncard.modules.adaptive_span.model import span_modules

    loaded, batch = _tiny(tiny_model_dir, "bert", max_span=16, init_logit=-2.0)
    model = get_peft_model(
        loaded.model,
        LoraConfig(
            task_type=TaskType.SEQ_CLS, target_modules=["query", "value"], modules_to_save=["adaptive_span"]
        ),
    ).eval()
    measured = MODULE.training.calibrate(model, AdaptiveSpanConfig(), lengths=(16, 32), repeats=1)
    assert measured["crossover"] in (16, 32, 33)
    for span in span_modules(model):
        span.crossover.fill_(37)  # a value no default gives
    model.save_pretrained(tmp_path, save_embedding_layers=False)  # as publish saves it
    with torch.no_grad():
        expected = model(**batch).logits

    fresh, _ = _tiny(tiny_model_dir, "bert", max_span=16, init_logit=-2.0)
    restored = PeftModel.from_pretrained(fresh.model, tmp_path).eval()
    spans = span_modules(restored)
    assert [int(s.crossover) for s in spans] == [37, 37]
    assert module_stats(restored)["crossover_table"] == module_stats(model)["crossover_table"]
    with torch.no_grad():
        torch.testing.assert_close(restored(**batch).logits, expected)
