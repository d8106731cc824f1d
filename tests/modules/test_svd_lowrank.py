"""`svd_lowrank`: truncated-SVD factors of the attention projections, their parameter count, and peft."""

from __future__ import annotations

import json

import pytest
import torch
from peft import LoraConfig, TaskType, get_peft_model
from peft.utils import get_peft_model_state_dict
from peft.utils.constants import DUMMY_TARGET_MODULES
from transformers.pytorch_utils import Conv1D

from attncard.modules.base import attention_layers
from attncard.modules.svd_lowrank import (
    MODULE,
    LowRankLinear,
    SvdLowRankConfig,
    factorised_parameter_count,
    lora_target_modules,
    module_stats,
    rank_for_energy,
)
from attncard.modules.trace import record_trace
from tiny_models import FAMILIES, load_with_padded_batch


def _unique_projections(model) -> list[torch.nn.Module]:
    """Every distinct q/k/v/o module of the model (GPT-2's fused c_attn once)."""
    seen: dict[int, torch.nn.Module] = {}
    for layer in attention_layers(model):
        for which in "qkvo":
            projection = layer.projection(which)
            seen.setdefault(id(projection), projection)
    return list(seen.values())


def _matrix_with_singular_values(values: list[float], out_features: int, in_features: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    u, _ = torch.linalg.qr(torch.randn(out_features, len(values), generator=generator, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(in_features, len(values), generator=generator, dtype=torch.float64))
    return u @ torch.diag(torch.tensor(values, dtype=torch.float64)) @ v.T


def test_factorised_parameter_count():
    assert factorised_parameter_count(384, 384, 96) == 96 * 768 + 384
    assert factorised_parameter_count(32, 96, 8, bias=False) == 8 * 128


def test_config_is_validated():
    with pytest.raises(ValueError, match="rank"):
        SvdLowRankConfig(rank=0)
    with pytest.raises(ValueError, match="energy"):
        SvdLowRankConfig(energy=1.5)
    with pytest.raises(ValueError, match="projections"):
        SvdLowRankConfig(projections=("q", "x"))
    assert SvdLowRankConfig(projections=["q", "v"]).projections == ("q", "v")


def test_energy_picks_the_smallest_sufficient_rank():
    singular_values = [8.0, 4.0, 2.0, 1.0, 0.5]  # squares 64, 16, 4, 1, 0.25: total 85.25
    total = sum(s**2 for s in singular_values)
    s = torch.tensor(singular_values)
    assert rank_for_energy(s, 0.5) == 1  # 64 / 85.25 = 0.751
    assert rank_for_energy(s, 0.9) == 2  # 80 / 85.25 = 0.938
    assert rank_for_energy(s, 80 / total) == 2  # exactly the share of two values
    assert rank_for_energy(s, 0.99) == 4
    assert rank_for_energy(s, 1.0) == 5

    weight = _matrix_with_singular_values(singular_values, out_features=7, in_features=6)
    linear = torch.nn.Linear(6, 7).double()
    with torch.no_grad():
        linear.weight.copy_(weight)
    low = LowRankLinear.from_projection(linear, energy=0.9)
    assert low.rank == 2
    assert low.energy_kept == pytest.approx(80 / total)
    product = low.svd_up.weight @ low.svd_down.weight
    # Eckart–Young: the truncation error is exactly the dropped singular values.
    error = torch.linalg.matrix_norm(weight - product) ** 2
    assert error.item() == pytest.approx(4.0 + 1.0 + 0.25)
    torch.testing.assert_close(torch.linalg.svdvals(product)[:2], s[:2].double())


def test_conv1d_is_factorised_as_the_matrix_it_applies():
    torch.manual_seed(0)
    conv = Conv1D(12, 6)  # GPT-2 layout: weight (in, out), y = x·W + b
    torch.nn.init.normal_(conv.bias)
    x = torch.randn(2, 5, 6)
    full = LowRankLinear.from_projection(conv, rank=100)
    assert (full.rank, full.source) == (6, "Conv1D")
    torch.testing.assert_close(full(x), conv(x), atol=1e-5, rtol=1e-5)

    low = LowRankLinear.from_projection(conv, rank=2)
    u, s, vh = torch.linalg.svd(conv.weight.detach().T.double())
    truncated = (u[:, :2] * s[:2]) @ vh[:2]  # (out, in)
    expected = x.double() @ truncated.T + conv.bias.double()
    torch.testing.assert_close(low(x).double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_parameter_count_is_the_formulas(tiny_model_dir, family):
    loaded, _ = load_with_padded_batch(tiny_model_dir(family))
    model = loaded.model
    rank = 3
    before = sum(p.numel() for p in model.parameters())
    saved = 0
    for projection in _unique_projections(model):
        weight = projection.weight
        in_features, out_features = weight.shape if isinstance(projection, Conv1D) else weight.shape[::-1]
        saved += in_features * out_features - rank * (in_features + out_features)
    MODULE.apply(model, SvdLowRankConfig(rank=rank))
    after = sum(p.numel() for p in model.parameters())
    assert after == before - saved

    stats = module_stats(model)
    json.dumps(stats)  # results.json takes it as it is
    assert (stats["model_parameters_before"], stats["model_parameters_after"]) == (before, after)
    assert stats["projection_parameters_before"] - stats["projection_parameters_after"] == saved
    first = stats["layers"][0]["projections"]
    assert sorted(first) == (["o", "qkv"] if family == "gpt2" else ["k", "o", "q", "v"])
    assert all(entry["rank"] == rank for entry in first.values())


def test_applying_twice_is_refused(tiny_model_dir):
    loaded, _ = load_with_padded_batch(tiny_model_dir("bert"))
    with pytest.raises(ValueError, match="not installed"):
        module_stats(loaded.model)
    MODULE.apply(loaded.model, SvdLowRankConfig(rank=4))
    with pytest.raises(ValueError, match="already factorised"):
        MODULE.apply(loaded.model, SvdLowRankConfig(rank=4))


def test_lora_targets():
    for family in ("bert", "gpt2", "qwen3"):  # every q and v factorised: nothing left for LoRA
        assert lora_target_modules(family, SvdLowRankConfig()) == DUMMY_TARGET_MODULES
    assert lora_target_modules("llama", SvdLowRankConfig(projections=("q", "k", "o"))) == ["v_proj"]
    assert lora_target_modules("bert", SvdLowRankConfig(projections=("k", "o"))) == ["query", "value"]
    assert lora_target_modules("gpt2", SvdLowRankConfig(projections=("o",))) == ["c_attn"]


@pytest.mark.parametrize(
    ("family", "projections"),
    [("bert", ("q", "k", "v", "o")), ("bert", ("k", "o")), ("gpt2", ("q", "k", "v", "o"))],
)
def test_peft_saves_every_factor_and_adapts_the_projections_left_unfactorised(
    tiny_model_dir, family, projections
):
    """How peft holds the module (that it trains and reloads is the module contract's, in
    tests/modules/test_module_contract.py): the factors as modules_to_save, LoRA on the q and v left
    unfactorised."""
    loaded, batch = load_with_padded_batch(tiny_model_dir(family))
    config = SvdLowRankConfig(rank=8, projections=projections)
    MODULE.apply(loaded.model, config)
    with torch.no_grad():
        expected = loaded.model(**batch).logits
    lora = LoraConfig(
        task_type=TaskType.SEQ_CLS,
        r=4,
        target_modules=lora_target_modules(family, config),
        modules_to_save=list(MODULE.training.trainable_modules),
    )
    model = get_peft_model(loaded.model, lora)
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, expected)  # LoRA starts at zero

    factorised = [p for p in _unique_projections(model.get_base_model()) if isinstance(p, LowRankLinear)]
    per_layer = 2 if family == "gpt2" else len(projections)  # GPT-2: c_attn and c_proj
    assert len(factorised) == 2 * per_layer  # two layers
    factors = [module for projection in factorised for module in (projection.svd_down, projection.svd_up)]
    for wrapper in factors:
        assert wrapper.modules_to_save["default"].weight.requires_grad
        assert not wrapper.original_module.weight.requires_grad
    lora_b = [name for name, _ in model.named_parameters() if "lora_B" in name]
    if "q" in projections and "v" in projections:
        assert lora_b == []  # the factors are the trained attention projections
    else:
        assert {name.split(".")[-4] for name in lora_b} == {"query", "value"}

    saved = get_peft_model_state_dict(model, save_embedding_layers=False)
    # The adapter carries every trained factor: a reader's fresh SVD is only where training started.
    assert sum(key.endswith("svd_down.weight") for key in saved) == len(factorised)
    assert sum(key.endswith("svd_up.weight") for key in saved) == len(factorised)
    assert sum(key.endswith("svd_up.bias") for key in saved) == len(factorised)
    # The stats still read through the peft wrapper.
    assert module_stats(model)["layers"][1]["projections"]["o"]["rank"] == 8


def test_trace_names_the_fused_low_rank_projection(tiny_model_dir):
    loaded, batch = load_with_padded_batch(tiny_model_dir("gpt2"))
    MODULE.apply(loaded.model, SvdLowRankConfig(rank=8))
    steps = record_trace(loaded.model, batch)
    assert (steps[0].stage, steps[0].op) == ("qkv projection (fused)", "LowRankLinear")
    assert "attention" in [step.stage for step in steps]
    assert steps[0].outputs["y"].shape[-1] == 3 * loaded.model.config.n_embd
