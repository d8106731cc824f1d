"""The module API: a module that gives only the required fields of `AttentionModule` (a name, a config and an
attention function) gets defaults under which every pipeline step that asks a module something works, and
the family table is the one place the pipeline learns about a model family. Figures are worked out by hand
for the tiny models (L = 2 layers, H = 4 heads, d = 8, hidden 32)."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch
from transformers import MistralConfig, RobertaConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from attncard.modules import contract_problems, get_module
from attncard.modules.base import (
    FAMILIES,
    AttentionModule,
    Claims,
    InstallFunction,
    Training,
    attention_layers,
    imported_on_call,
    imported_on_read,
    install_attention,
    installed_config,
)
from attncard.pipeline.record.errors import UnsupportedModelError
from attncard.pipeline.record.results import TrainConfig
from attncard.pipeline.run.models import load_model
from attncard.pipeline.run.scaling import (
    attention_flops,
    max_positions,
    measure_layer_scaling,
    measure_model_scaling,
)
from attncard.pipeline.run.train import train

LABELS = ["negative", "positive"]


class MinimalConfig:
    """A module with nothing to configure."""


def _apply_with_a_hidden_parameter(model: torch.nn.Module, config: MinimalConfig) -> torch.nn.Module:
    for layer in attention_layers(model):
        layer.module.minimal_gate = torch.nn.Linear(1, 1)  # 2 parameters a layer, declared nowhere
    install_attention(model, "minimal_api_test_gate", sdpa_attention_forward)
    return model


# transformers' own function lives outside this folder: the folder is given, not found from the function.
MINIMAL = AttentionModule(
    "minimal_api_test", MinimalConfig, sdpa_attention_forward, folder=Path(__file__).parent
)


def _installed(tiny_model_dir, family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return MINIMAL.apply(load_model(str(tiny_model_dir(family)), LABELS).model, MinimalConfig())


def test_the_defaults_of_a_minimal_module():
    assert MINIMAL.apply == InstallFunction("minimal_api_test", sdpa_attention_forward)
    assert MINIMAL.claims == Claims(causal=True, bidirectional=True, gqa=True, changes_attention=True)
    assert (MINIMAL.paper, MINIMAL.training.trainable_modules) == (None, ())
    training, measurement = MINIMAL.training, MINIMAL.measurement
    assert training.learning_rates is training.penalty is training.calibrate is None
    assert measurement.stats is measurement.plots is None
    assert training.lora_targets("bert", MinimalConfig()) == ["query", "value"]
    assert training.lora_targets("gpt2", MinimalConfig()) == ["c_attn"]  # q, k and v fused: once
    assert training.lora_targets("distilbert", MinimalConfig()) == ["q_lin", "v_lin"]
    # A replaced name installs under the new name: the default apply follows the module.
    renamed = dataclasses.replace(MINIMAL, name="minimal_api_renamed")
    assert renamed.apply == InstallFunction("minimal_api_renamed", sdpa_attention_forward)


@dataclasses.dataclass
class ScaledConfig:
    factor: float = dataclasses.field(default=1.0, metadata={"help": "multiplies the scores' scaling"})


def _scaled_attention(
    module, query, key, value, attention_mask, *, scaling=None, dropout=0.0, config, **kwargs
):
    """sdpa with its scaling multiplied by `config.factor`: reads the config it is given, and nothing else."""
    scaling = (query.shape[-1] ** -0.5 if scaling is None else scaling) * config.factor
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout)


SCALED = AttentionModule("minimal_api_scaled", ScaledConfig, _scaled_attention, folder=Path(__file__).parent)


def test_the_function_is_given_the_config_of_its_model_with_no_apply_of_its_own(tiny_model_dir):
    """Two models of one module in one process, installed under two configs: each call reads its own model's
    config (the function is registered once, under one name); a factor of 1 is the model's own attention."""
    batch = {"input_ids": torch.tensor([[5, 9, 11, 7, 3, 2]])}
    plain = load_model(str(tiny_model_dir("bert")), LABELS).model.eval()
    with torch.no_grad():
        expected = plain(**batch).logits
    models = {factor: SCALED.apply(copy.deepcopy(plain), ScaledConfig(factor)) for factor in (1.0, 4.0)}
    assert installed_config(models[4.0]) == ScaledConfig(4.0)
    with torch.no_grad():
        same, scaled = models[1.0](**batch).logits, models[4.0](**batch).logits
    torch.testing.assert_close(same, expected)
    assert not torch.allclose(scaled, expected)


def test_prepare_runs_before_the_function_is_installed(tiny_model_dir):
    seen = []

    def prepare(model, config):
        seen.append((model.config._attn_implementation, config))
        for layer in attention_layers(model):
            layer.module.minimal_gate = torch.nn.Linear(1, 1)

    module = dataclasses.replace(SCALED, name="minimal_api_prepared", prepare=prepare)
    assert module.apply == InstallFunction("minimal_api_prepared", _scaled_attention, prepare)
    model = module.apply(load_model(str(tiny_model_dir("bert")), LABELS).model, ScaledConfig(2.0))
    assert seen == [("sdpa", ScaledConfig(2.0))]
    assert model.config._attn_implementation == "attncard_minimal_api_prepared"
    assert all(hasattr(layer.module, "minimal_gate") for layer in attention_layers(model))
    assert contract_problems(dataclasses.replace(module, prepare="prepare"))[0] == (
        "its prepare is not callable; give prepare(model, config), or leave it out"
    )


def test_names_are_imported_from_their_file_when_first_read():
    read = imported_on_read("attncard.modules.adaptive_sparse", {"kept_bias": "attention"})
    assert read("kept_bias").__module__ == "attncard.modules.adaptive_sparse.attention"
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        read("nothing")


def test_the_folder_is_found_from_the_function():
    from attncard.modules.none import NoneConfig

    # An imported_on_call function names its file: the folder is found without importing it.
    function = imported_on_call("attncard.modules.none.attention", "none_attention")
    module = AttentionModule("folder_test", NoneConfig, function)
    assert module.folder == get_module("none").folder
    assert contract_problems(module) == []


def test_contract_problems_say_what_to_give():
    problems = contract_problems(AttentionModule("bad", MinimalConfig, "not a function", training={}))
    assert problems[0].startswith("its function is not callable; give the attention function")
    assert "its training is a dict, not a Training; give training=Training(...), or leave it out" in problems
    assert any("put the attention function in attention.py" in problem for problem in problems)


def test_a_minimal_module_is_counted_as_dense(tiny_model_dir):
    model = _installed(tiny_model_dir, "gpt2")
    estimate = attention_flops(model, MINIMAL, 64)
    # Dense attention 2·4·4·64²·8 = 1_048_576. GPT-2's projections per layer: c_attn 32 → 96 once,
    # 2·64·32·96 = 393_216, and c_proj 32 → 32, 2·64·32·32 = 131_072: 2·524_288 = 1_048_576 for two layers.
    assert (estimate.dense, estimate.module, estimate.ratio) == (1_048_576, 1_048_576, 1.0)
    assert (estimate.projections_dense, estimate.projections_module) == (1_048_576, 1_048_576)
    assert "; minimal_api_test: the same attention; " in estimate.formula


def test_a_minimal_module_is_measured_against_a_copy_on_sdpa(tiny_model_dir):
    model = _installed(tiny_model_dir, "bert")

    def no_reload() -> torch.nn.Module:
        raise AssertionError("the default dense reference is a copy; nothing is loaded again")

    reference = MINIMAL.measurement.dense_reference(model, no_reload)
    assert reference is not model
    assert (model.config._attn_implementation, reference.config._attn_implementation) == (
        "attncard_minimal_api_test",
        "sdpa",
    )
    for (name, weight), (_, copied) in zip(
        model.state_dict().items(), reference.state_dict().items(), strict=True
    ):
        assert torch.equal(weight, copied), name
    rows = measure_model_scaling(model, reference, lengths=[32], repeats=1)
    rows += measure_layer_scaling(model, MINIMAL, lengths=(32,), repeats=1)
    assert [row.n for row in rows] == [32, 32]
    json.dumps([row.speedup for row in rows])


def test_a_change_of_the_parameter_count_is_measured_not_declared(tiny_model_dir, small_glue):
    from attncard.pipeline.run.data import load_task
    from attncard.pipeline.run.evaluate import count_deployed_parameters

    module = dataclasses.replace(MINIMAL, name="minimal_api_test_gate", apply=_apply_with_a_hidden_parameter)
    data = load_task("sst2", small_glue)
    torch.manual_seed(0)
    loaded = load_model(str(tiny_model_dir("bert")), data.spec.label_names)
    module.apply(loaded.model, MinimalConfig())
    result = train(loaded, data, TrainConfig(steps=1, batch_size=4), module, MinimalConfig())
    # Two layers, a 1 → 1 linear each (weight and bias): 4 parameters more than the model as loaded.
    assert result.base_parameters == loaded.parameters
    assert count_deployed_parameters(result.model) == loaded.parameters + 4


def test_the_family_table_is_the_one_the_pipeline_reads(tiny_model_dir, tmp_path):
    assert sorted(FAMILIES) == ["bert", "distilbert", "gpt2", "llama", "qwen2", "qwen3", "roberta"]
    decoders = [family for family, layout in FAMILIES.items() if layout.decoder]
    assert decoders == ["gpt2", "llama", "qwen2", "qwen3"]
    # RoBERTa's positions start after the padding index: 514 − (1 + 1) usable.
    assert max_positions(RobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512
    with pytest.raises(UnsupportedModelError, match="this model is 'mistral'"):
        max_positions(MistralConfig())
    # A family outside the table is refused by name when the model is loaded, before its weights are read.
    MistralConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4).save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not read")
    with pytest.raises(UnsupportedModelError, match="supports the model families bert, roberta, distilbert"):
        load_model(str(tmp_path), LABELS)


def test_the_pipeline_never_names_a_module():
    """`grep -rnwE "adaptive_span|span_expanded|adaptive_sparse|svd_lowrank" pipeline/` prints nothing: what
    the pipeline needs from a module, it asks the module object (the identity module `none` may be named)."""
    from attncard.modules import BUILTIN_MODULES
    from conftest import REPO_ROOT

    names = sorted(set(BUILTIN_MODULES) - {"none"})
    assert names == ["adaptive_span", "adaptive_sparse", "span_expanded", "svd_lowrank"]
    pattern = re.compile(rf"\b({'|'.join(names)})\b")
    found = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
        for path in sorted((REPO_ROOT / "pipeline").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_the_calibrate_hook_runs_once_on_the_trained_model(tiny_model_dir, small_glue):
    from attncard.pipeline.run.data import load_task

    assert MINIMAL.training.calibrate is None  # the default: nothing measured, the training result keeps {}
    seen = []

    def calibrate(model: torch.nn.Module, config: MinimalConfig) -> dict:
        seen.append((model.training, isinstance(config, MinimalConfig)))
        return {"crossover": 7}

    module = dataclasses.replace(MINIMAL, training=Training(calibrate=calibrate))
    data = load_task("sst2", small_glue)
    torch.manual_seed(0)
    loaded = load_model(str(tiny_model_dir("bert")), data.spec.label_names)
    module.apply(loaded.model, MinimalConfig())
    result = train(loaded, data, TrainConfig(steps=2, batch_size=4), module, MinimalConfig())
    assert seen == [(False, True)]  # once, after training, in eval mode
    assert result.calibration == {"crossover": 7}
    loaded = load_model(str(tiny_model_dir("bert")), data.spec.label_names)
    MINIMAL.apply(loaded.model, MinimalConfig())
    plain = train(loaded, data, TrainConfig(steps=1, batch_size=4), MINIMAL, MinimalConfig())
    assert plain.calibration == {}
