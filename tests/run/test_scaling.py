"""Sequence-length scaling: rows measured together and consistent, default lengths from the positions, layer
calls for every module, each module's dense reference, and FLOPs counted by hand. Timing is noisy: no test
asserts a speed-up."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from peft import LoraConfig, TaskType, get_peft_model
from transformers import BertConfig, GPT2Config, RobertaConfig

from attncard.modules import get_module, module_names
from attncard.modules.adaptive_span.model import span_modules
from attncard.modules.base import attention_layers, attention_shape
from attncard.pipeline.card.render import render_card
from attncard.pipeline.record.results import SCALING_MEMORY_METHOD, Results, ScalingRow
from attncard.pipeline.run import scaling
from attncard.pipeline.run.models import load_model
from attncard.pipeline.run.scaling import (
    attention_flops,
    default_lengths,
    layer_attention_runs,
    max_positions,
    measure_layer_scaling,
    measure_model_scaling,
    synthetic_input_ids,
)
from conftest import FIXTURES

LABELS = ["negative", "positive"]
RESULTS = FIXTURES / "tiny_results.json"  # a recorded run of `none`
# Configurations under which each module computes what dense attention computes (see test_modules.py).
OPEN_CONFIGS: dict[str, dict] = {
    "none": {},
    "adaptive_span": {"max_span": 512},
    "span_expanded": {},
    "adaptive_sparse": {"top_k": 512},
    "svd_lowrank": {"rank": 4096},
}


def _model(tiny_model_dir, family: str, module_name: str | None = None, **config) -> torch.nn.Module:
    torch.manual_seed(0)
    model = load_model(str(tiny_model_dir(family)), LABELS).model
    if module_name is not None:
        module = get_module(module_name)
        module.apply(model, module.config_class(**config))
    return model


def _no_reload() -> torch.nn.Module:
    raise AssertionError("a copy of this model is its dense reference; the base model is not loaded again")


def _check_rows(rows: list[ScalingRow], lengths: list[int]) -> None:
    assert [row.n for row in rows] == lengths
    for row in rows:
        assert row.module_seconds > 0 and row.dense_seconds > 0
        assert row.module_seconds_min <= row.module_seconds <= row.module_seconds_max
        assert row.dense_seconds_min <= row.dense_seconds <= row.dense_seconds_max
        assert row.speedup_low <= row.speedup <= row.speedup_high
        # Page-granular on the CPU: a tiny pass may fit in pages the process already holds, so >= 0.
        assert row.module_peak_mb is not None and row.module_peak_mb >= 0
        assert row.dense_peak_mb is not None and row.dense_peak_mb >= 0
        assert row.speedup > 0 and (row.memory_ratio is None or row.memory_ratio >= 0)
    json.dumps([dataclasses.asdict(row) for row in rows])  # JSON-ready


@pytest.mark.parametrize(
    ("module_peaks", "dense_peaks", "medians", "memory_ratio"),
    [
        ((12.0, 9.0, 10.0), (40.0, 44.0, 38.0), (10.0, 40.0), 0.25),
        ((12.0, 9.0, 10.0), (0.0, 1.0, 0.0), (10.0, 0.0), None),
        ((None, None, None), (None, None, None), (None, None), None),
    ],
)
def test_a_row_is_the_medians_and_their_ratios(
    monkeypatch, module_peaks, dense_peaks, medians, memory_ratio
) -> None:
    # Times and peaks are scripted; the expected figures are worked out by hand: module passes take 3, 1, 2 s
    # (median 2, fastest 1, slowest 3), dense passes 4, 8, 6 s (median 6, fastest 4, slowest 8), so dense is
    # 3 times slower, at least 4 / 3 (its fastest against the module's slowest) and at most 8 / 1. The
    # memory passes alternate too, and each peak is the median of its three: 10 and 40 MB give 0.25.
    monkeypatch.setattr(scaling, "MEMORY_PASSES", 3)

    def module_run() -> None: ...

    def dense_run() -> None: ...

    times = {module_run: iter([3.0, 1.0, 2.0]), dense_run: iter([4.0, 8.0, 6.0])}
    peaks = iter([peak for pair in zip(module_peaks, dense_peaks, strict=True) for peak in pair])
    monkeypatch.setattr(scaling, "wall_seconds", lambda run, device: next(times[run]))
    monkeypatch.setattr(scaling, "peak_memory_mb", lambda run, device: next(peaks))
    row = scaling.measure_pair(128, module_run, dense_run, torch.device("cpu"), repeats=3)
    assert (row.n, row.repeats, row.module_seconds, row.dense_seconds, row.speedup) == (128, 3, 2.0, 6.0, 3.0)
    assert (row.module_seconds_min, row.module_seconds_max) == (1.0, 3.0)
    assert (row.dense_seconds_min, row.dense_seconds_max) == (4.0, 8.0)
    assert (row.speedup_low, row.speedup_high) == (4.0 / 3.0, 8.0)
    assert (row.module_peak_mb, row.dense_peak_mb) == medians
    assert row.memory_ratio == memory_ratio
    assert next(peaks, "none left") == "none left"  # three memory passes each, no more


def test_the_speedup_is_the_median_of_the_pairs_ratios(monkeypatch) -> None:
    # The machine runs at half speed through the second pair and through the module's pass of the third: the
    # pairs' ratios are 1.1, 1.1 and 0.55, their median 1.1; the sides' medians (20 and 11 s) would say 0.55.
    monkeypatch.setattr(scaling, "MEMORY_PASSES", 1)

    def module_run() -> None: ...

    def dense_run() -> None: ...

    # In the order they run: module, dense; dense, module; module, dense.
    times = iter([10.0, 11.0, 22.0, 20.0, 20.0, 11.0])
    monkeypatch.setattr(scaling, "wall_seconds", lambda run, device: next(times))
    monkeypatch.setattr(scaling, "peak_memory_mb", lambda run, device: 1.0)
    row = scaling.measure_pair(128, module_run, dense_run, torch.device("cpu"), repeats=3)
    assert (row.module_seconds, row.dense_seconds) == (20.0, 11.0)
    assert row.speedup == pytest.approx(1.1)
    assert (row.speedup_low, row.speedup_high) == (11.0 / 20.0, 22.0 / 10.0)


def test_each_side_runs_first_in_every_other_timed_pair(monkeypatch) -> None:
    # The pass after the other model's ran a little faster (see measure_pair): neither side always gets it.
    monkeypatch.setattr(scaling, "MEMORY_PASSES", 1)
    order = []
    monkeypatch.setattr(scaling, "wall_seconds", lambda run, device: order.append(run()) or 1.0)
    monkeypatch.setattr(scaling, "peak_memory_mb", lambda run, device: 1.0)
    row = scaling.measure_pair(128, lambda: "module", lambda: "dense", torch.device("cpu"), repeats=4)
    assert order == ["module", "dense", "dense", "module", "module", "dense", "dense", "module"]
    assert row.repeats == 4 and row.speedup == 1.0


def test_the_recorded_memory_method_names_the_passes_measured():
    assert f"the median of {scaling.MEMORY_PASSES} passes" in SCALING_MEMORY_METHOD


def _row(
    n: int, module: tuple[float, float, float], dense: tuple[float, float, float], repeats: int = 5
) -> ScalingRow:
    """A row of hand-picked (median, fastest, slowest) times; its ratios are worked out in the test."""
    return ScalingRow(
        n=n,
        repeats=repeats,
        module_seconds=module[0],
        module_seconds_min=module[1],
        module_seconds_max=module[2],
        dense_seconds=dense[0],
        dense_seconds_min=dense[1],
        dense_seconds_max=dense[2],
        module_peak_mb=10.0,
        dense_peak_mb=40.0,
        speedup=dense[0] / module[0],
        speedup_low=dense[1] / module[2],
        speedup_high=dense[2] / module[1],
        memory_ratio=0.25,
    )


def test_card_shows_each_time_with_its_spread_and_a_range_holding_1_as_no_difference():
    results = Results.load(RESULTS)
    results.efficiency.scaling = [
        # Medians 0.02 and 0.019: 0.95, but the range 0.018 / 0.022 … 0.021 / 0.019 = 0.82 … 1.11 holds 1.
        _row(128, (0.02, 0.019, 0.022), (0.019, 0.018, 0.021)),
        # 0.08 / 0.02 = 4.00, range 0.075 / 0.025 … 0.09 / 0.018 = 3.00 … 5.00: a measured speed-up.
        _row(256, (0.02, 0.018, 0.025), (0.08, 0.075, 0.09)),
    ]
    # 0.001 / 0.004 = 0.25, range 0.0009 / 0.005 … 0.0012 / 0.003 = 0.18 … 0.40: measurably slower.
    results.efficiency.layer_scaling = [_row(512, (0.004, 0.003, 0.005), (0.001, 0.0009, 0.0012), repeats=9)]
    lines = render_card(results).splitlines()
    assert (
        "| 128 | 2.000e-02 (1.900e-02 – 2.200e-02) | 1.900e-02 (1.800e-02 – 2.100e-02) | "
        "no measurable difference (0.82 – 1.11) | 10.0 | 40.0 | 0.25 |"
    ) in lines
    assert (
        "| 256 | 2.000e-02 (1.800e-02 – 2.500e-02) | 8.000e-02 (7.500e-02 – 9.000e-02) | "
        "4.00 (3.00 – 5.00) | 10.0 | 40.0 | 0.25 |"
    ) in lines
    assert (
        "| 512 | 4.000e-03 (3.000e-03 – 5.000e-03) | 1.000e-03 (9.000e-04 – 1.200e-03) | "
        "0.25 (0.18 – 0.40) | 10.0 | 40.0 | 0.25 |"
    ) in lines
    card = "\n".join(lines)
    assert (
        "Each time is the median of its timed\npasses (5 for the whole model, 9 for one layer), "
        "with the fastest and the slowest pass in brackets." in card
    )
    assert not any("leaves attention as the model's own" in line for line in lines)


def test_card_of_a_run_without_scaling_says_why():
    results = Results.load(RESULTS)  # a run of `none`: no rows
    assert results.efficiency.scaling == [] and results.efficiency.layer_scaling == []
    card = render_card(results)
    assert "`none` leaves attention as the model's own, so there is no module to time against dense" in card
    assert "| N | Module (s) |" not in card and "Speed-up" not in card


def _set_spans(model: torch.nn.Module, spans: list[list[float]]) -> None:
    """Sets every head's span z_h = S_max·σ(θ_h) to the given value, through its logit."""
    with torch.no_grad():
        for module, layer_spans in zip(span_modules(model), spans, strict=True):
            p = torch.tensor(layer_spans, dtype=torch.float64) / module.max_span
            module.span_logits.copy_(torch.log(p / (1 - p)).float())


# ----------------------------------------------------------------------------------------------------------
# Lengths and inputs


def test_default_lengths_follow_the_positions():
    assert default_lengths(BertConfig(max_position_embeddings=160)) == [128]  # the tiny models
    assert default_lengths(BertConfig(max_position_embeddings=512)) == [128, 256, 512]  # MiniLM
    assert default_lengths(GPT2Config(n_positions=1024)) == [128, 256, 512, 1024]
    assert default_lengths(GPT2Config(n_positions=1024), cap=256) == [128, 256]
    assert default_lengths(BertConfig(max_position_embeddings=100)) == [100]
    # RoBERTa's positions start after the padding index: 514 − (1 + 1) usable.
    roberta = RobertaConfig(max_position_embeddings=514, pad_token_id=1)
    assert max_positions(roberta) == 512
    assert default_lengths(roberta) == [128, 256, 512]
    assert default_lengths(RobertaConfig(max_position_embeddings=512, pad_token_id=1)) == [128, 256]


def test_roberta_offset_is_respected_in_a_real_model(tiny_model_dir):
    model = _model(tiny_model_dir, "roberta", "none")
    limit = max_positions(model.config)
    assert limit == 160 - model.config.pad_token_id - 1
    reference = get_module("none").measurement.dense_reference(model, _no_reload)
    rows = measure_model_scaling(model, reference, lengths=[limit], repeats=1)  # the longest row fits
    _check_rows(rows, [limit])
    with pytest.raises(ValueError, match="positions"):
        measure_model_scaling(model, reference, lengths=[limit + 1], repeats=1)


def test_synthetic_ids_are_ordinary_tokens():
    bert = BertConfig()
    ids = synthetic_input_ids(bert, 2, 300)
    assert ids.shape == (2, 300) and ids.dtype == torch.long
    assert int(ids.min()) >= 1000 and int(ids.max()) < bert.vocab_size
    assert torch.equal(ids, synthetic_input_ids(bert, 2, 300))  # fixed seed
    gpt2 = GPT2Config(vocab_size=50257, eos_token_id=50256, bos_token_id=50256)
    assert int(synthetic_input_ids(gpt2, 1, 2000).max()) < 50256  # the trailing special token is avoided
    tiny = GPT2Config(vocab_size=400, eos_token_id=0, bos_token_id=0)  # smaller than vocab_low
    ids = synthetic_input_ids(tiny, 1, 2000)
    assert int(ids.min()) >= 1 and int(ids.max()) < 400


# ----------------------------------------------------------------------------------------------------------
# Whole model


@pytest.mark.parametrize(("family", "module_name"), [("bert", "adaptive_span"), ("gpt2", "svd_lowrank")])
def test_model_scaling_rows(tiny_model_dir, family, module_name):
    model = _model(
        tiny_model_dir, family, module_name, **({"rank": 4} if module_name == "svd_lowrank" else {})
    )
    module = get_module(module_name)
    if module_name == "svd_lowrank":  # factorised projections: no copy is dense, the base is loaded again
        base = _model(tiny_model_dir, family)
        reference = module.measurement.dense_reference(model, lambda: base)
        assert reference is base
    else:
        reference = module.measurement.dense_reference(model, _no_reload)
        assert reference is not model
        assert model.config._attn_implementation == "attncard_adaptive_span"
    assert reference.config._attn_implementation == "sdpa"
    model.train()
    rows = measure_model_scaling(model, reference, lengths=[32, 128], batch_size=2, repeats=1)
    _check_rows(rows, [32, 128])
    assert rows[-1].dense_peak_mb > 0 and rows[-1].module_peak_mb > 0  # (2, 128) rows need fresh pages
    assert model.training and all(module.training for module in model.modules())  # mode restored
    with pytest.raises(ValueError, match="sdpa"):
        measure_model_scaling(model, model, lengths=[32], repeats=1)


def test_reference_copy_of_span_expanded_keeps_no_layer_input(tiny_model_dir):
    model = _model(tiny_model_dir, "bert", "span_expanded")
    reference = get_module("span_expanded").measurement.dense_reference(model, _no_reload).eval()
    model.eval()
    input_ids = synthetic_input_ids(model.config, 1, 24)
    with torch.inference_mode():
        expected = model(input_ids=input_ids).logits
        got = reference(input_ids=input_ids).logits
    torch.testing.assert_close(got, expected)  # HyLoRA's B starts at zero: the same model, on sdpa
    states = [layer.module.span_expanded_state for layer in attention_layers(reference)]
    assert all(state.hidden_states is None for state in states)  # dropped when each layer returned


def test_peft_wrapped_model(tiny_model_dir):
    model = _model(tiny_model_dir, "bert", "adaptive_span", max_span=16)
    lora = LoraConfig(
        task_type=TaskType.SEQ_CLS, r=4, target_modules=["query", "value"], modules_to_save=["adaptive_span"]
    )
    peft_model = get_peft_model(model, lora)
    module = get_module("adaptive_span")
    reference = module.measurement.dense_reference(peft_model, _no_reload)
    _check_rows(measure_model_scaling(peft_model, reference, lengths=[64], repeats=1), [64])
    _check_rows(measure_layer_scaling(peft_model, module, lengths=(64,), repeats=1), [64])
    assert attention_flops(peft_model, module, 64).ratio < 1


# ----------------------------------------------------------------------------------------------------------
# One attention layer


@pytest.mark.parametrize("family", ["bert", "llama"])
@pytest.mark.parametrize("module_name", module_names())
def test_layer_scaling_for_every_module(tiny_model_dir, family, module_name):
    model = _model(tiny_model_dir, family, module_name, **OPEN_CONFIGS[module_name])
    model.eval()
    module = get_module(module_name)
    heads, kv_heads, head_dim = attention_shape(model.config)
    assert (heads, kv_heads, head_dim) == ((4, 2, 8) if family == "llama" else (4, 4, 8))  # GQA in llama
    # Open configurations compute dense attention: the module call and sdpa agree on the same tensors.
    module_run, dense_run = layer_attention_runs(model, module, 48)
    with torch.inference_mode():
        module_output, dense_output = module_run(), dense_run()
    assert module_output.shape == (1, 48, heads, head_dim)
    torch.testing.assert_close(module_output, dense_output, atol=1e-5, rtol=1e-5)
    if module_name == "adaptive_span":  # short windows, so that N = 128 runs the banded kernel
        _set_spans(model, [[9.5] * heads, [9.5] * heads])
    rows = measure_layer_scaling(model, module, lengths=(64, 256), repeats=1)  # beyond the 160 positions
    _check_rows(rows, [64, 256])


def test_layer_scaling_needs_an_attention_interface_function(tiny_model_dir):
    torch.manual_seed(0)
    eager = load_model(str(tiny_model_dir("bert")), LABELS, attn_implementation="eager").model
    with pytest.raises(ValueError, match="AttentionInterface"):
        measure_layer_scaling(eager, None, lengths=(16,), repeats=1)


# ----------------------------------------------------------------------------------------------------------
# FLOPs, by hand. The tiny models: L = 2 layers, H = 4 heads, d = 8, hidden 32; N = 64 unless said.
# Dense attention: L·H·4·N²·d = 2·4·4·64²·8 = 8·131_072 = 1_048_576.
# Projections q, k, v, o of BERT, 32 → 32 each: L·4·2·N·32·32 = 2·4·131_072 = 1_048_576.

NONE_FORMULA_AT_64 = (
    "dense = L·H·(2·N²·d [Q·Kᵀ] + 2·N²·d [P·V]) with L = 2, H = 4, N = 64, d = 8; every query–key pair "
    "counted (decoders too), softmax and masks not counted; none: the same attention; projections "
    "(separate): q, k, v, o 2·N·in·out each (a fused c_attn once), factorised 2·N·r·(in + out), biases and "
    "LoRA not counted: 1048576 before, 1048576 after"
)


def test_flops_dense_and_none(tiny_model_dir):
    estimate = attention_flops(_model(tiny_model_dir, "bert", "none"), get_module("none"), 64)
    assert (estimate.n, estimate.dense, estimate.module, estimate.ratio) == (64, 1_048_576, 1_048_576, 1.0)
    assert (estimate.projections_dense, estimate.projections_module) == (1_048_576, 1_048_576)
    assert estimate.formula == NONE_FORMULA_AT_64
    json.dumps(dataclasses.asdict(estimate))
    with pytest.raises(ValueError, match="not the module"):
        attention_flops(_model(tiny_model_dir, "bert", "none"), get_module("adaptive_span"), 64)
    # The model's own attention, no module: the dense count.
    plain = attention_flops(_model(tiny_model_dir, "bert"), None, 64)
    assert (plain.dense, plain.module, plain.projections_module) == (1_048_576, 1_048_576, 1_048_576)


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        # Encoder, band 2w + 1 keys: w = 12 → 25, w = 24 → 49; per head 4·d·(N·band + 2·N [global token]):
        #   w = 12: 32·(64·25 + 128) = 32·1728 = 55_296;  w = 24: 32·(64·49 + 128) = 32·3264 = 104_448.
        # Two heads of w = 12, six of w = 24: 2·55_296 + 6·104_448 = 110_592 + 626_688 = 737_280.
        ("bert", 737_280),
        # Decoder, band w + 1 keys (the past): w = 12 → 13, w = 24 → 25:
        #   w = 12: 32·(64·13 + 128) = 32·960 = 30_720;  w = 24: 32·(64·25 + 128) = 32·1728 = 55_296.
        # 2·30_720 + 6·55_296 = 61_440 + 331_776 = 393_216.
        ("gpt2", 393_216),
    ],
)
def test_flops_adaptive_span_counts_the_band(tiny_model_dir, family, expected):
    model = _model(tiny_model_dir, family, "adaptive_span", max_span=64, ramp=4)
    # z = 8.5 → w = ⌈8.5 + 4⌉ − 1 = 12; z = 20.5 → w = 24.
    _set_spans(model, [[8.5, 20.5, 8.5, 20.5], [20.5] * 4])
    assert [module.windows(1000).tolist() for module in span_modules(model)] == [[12, 24, 12, 24], [24] * 4]
    estimate = attention_flops(model, get_module("adaptive_span"), 64)
    assert (estimate.dense, estimate.module) == (1_048_576, expected)
    assert estimate.ratio == {"bert": 0.703125, "gpt2": 0.375}[family]  # 737_280 / 1_048_576, 393_216 / …
    assert "; adaptive_span: Σ_layers Σ_h min(4·N²·d" in estimate.formula
    assert "w_h = [[12, 24, 12, 24], [24, 24, 24, 24]]" in estimate.formula
    # At N = 8 every band covers the row, 4·8·(8·8 + 16) = 2560 > the dense 4·8²·8 = 2048: capped, ratio 1.
    assert attention_flops(model, get_module("adaptive_span"), 8).ratio == 1.0


@pytest.mark.parametrize(
    ("family", "before", "after"),
    [
        # q, k, v, o 32 → 32: before 2·4·(2·64·32·32) = 1_048_576; rank 4: 2·4·(2·64·4·(32 + 32)) = 262_144.
        ("bert", 1_048_576, 262_144),
        # GPT-2: the fused c_attn 32 → 96 once (2·64·32·96 = 393_216) and c_proj 32 → 32 (131_072), per layer:
        # before 2·524_288 = 1_048_576; after 2·(2·64·4·(32 + 96) + 2·64·4·(32 + 32)) = 2·(65_536 + 32_768).
        ("gpt2", 1_048_576, 196_608),
    ],
)
def test_flops_svd_lowrank_projections(tiny_model_dir, family, before, after):
    model = _model(tiny_model_dir, family, "svd_lowrank", rank=4)
    estimate = attention_flops(model, get_module("svd_lowrank"), 64)
    assert (estimate.dense, estimate.module) == (1_048_576, 1_048_576)  # attention itself is unchanged
    assert (estimate.projections_dense, estimate.projections_module) == (before, after)
    assert estimate.formula.endswith(f"{before} before, {after} after")


def test_flops_span_expanded_and_adaptive_sparse(tiny_model_dir):
    expanded = attention_flops(
        _model(tiny_model_dir, "bert", "span_expanded", hylora_rank=8), get_module("span_expanded"), 64
    )
    # Dense + HyLoRA X·A·B per layer, 2·N·r·(d_in + d_out) = 2·64·8·(32 + 32) = 65_536, two layers:
    # 1_048_576 + 131_072.
    assert expanded.module == 1_179_648
    assert "(r, d_in, d_out) = [(8, 32, 32), (8, 32, 32)]" in expanded.formula
    sparse = attention_flops(
        _model(tiny_model_dir, "bert", "adaptive_sparse", top_k=8), get_module("adaptive_sparse"), 64
    )
    # Every score, L·H·2·N²·d = 2·4·2·64²·8 = 524_288, P·V over the 8 kept keys, L·H·2·N·k·d = 2·4·2·64·8·8 =
    # 65_536, and the top-k comparisons L·H·N·N·⌈log₂ 8⌉ = 2·4·64·64·3 = 98_304: 688_128.
    assert sparse.module == 688_128
    assert "all scores are computed" in sparse.formula and "k = [8, 8]" in sparse.formula
