"""The module registry, and what every module relies on in transformers' interfaces: the attention layers
of every family, the mask, the trace. What each module must do once installed is the module contract
(`attncard.testing`, run by tests/modules/test_module_contract.py)."""

from __future__ import annotations

import pytest
import torch

from attncard.modules import get_module, module_names
from attncard.modules.base import (
    attention_layers,
    global_token_index,
    padding_and_causality,
)
from attncard.modules.trace import record_trace
from tiny_models import FAMILIES, load_with_padded_batch


def test_registry_lists_modules():
    assert module_names() == ["adaptive_span", "adaptive_sparse", "none", "span_expanded", "svd_lowrank"]
    for name in module_names():
        module = get_module(name)
        assert module.name == name
        assert module.spec.strip(), f"{name} has no spec"
        for field_name, _, help_text in module.config_fields():
            assert help_text.strip(), f"{name}.{field_name} has no help text"


def test_the_builtin_names_are_the_module_folders_and_name_their_modules():
    """`BUILTIN_MODULE_NAMES` lists the modules without importing them (publish --help): it must name every
    folder of `modules/` that holds a module, and each folder's module must carry its folder's name."""
    from attncard.modules import BUILTIN_MODULE_NAMES, BUILTIN_MODULES
    from conftest import REPO_ROOT

    folders = {path.parent.name for path in (REPO_ROOT / "modules").glob("*/__init__.py")} - {"kernels"}
    assert sorted(BUILTIN_MODULE_NAMES) == sorted(folders)
    assert {name: module.name for name, module in BUILTIN_MODULES.items()} == {
        name: name for name in BUILTIN_MODULE_NAMES
    }


def test_each_builtin_folder_brings_its_contract_case():
    """A new module folder is all a built-in module needs: its `contract.toml` puts it in the contract table
    (tests/modules/test_module_contract.py), with configurations its config class takes."""
    from attncard.modules import BUILTIN_MODULE_NAMES
    from attncard.testing import builtin_cases

    cases = builtin_cases()
    assert [case.name for case in cases] == list(BUILTIN_MODULE_NAMES)
    for case in cases:
        case.module_config()
        if case.dense_config is not None:
            case.module_config(dense=True)


@pytest.mark.parametrize("family", FAMILIES)
def test_attention_layers_found_with_projections(tiny_model_dir, family):
    loaded, _ = load_with_padded_batch(tiny_model_dir(family))
    layers = attention_layers(loaded.model)
    assert [layer.index for layer in layers] == [0, 1]
    for layer in layers:
        for which in "qkvo":
            assert isinstance(layer.projection(which), torch.nn.Module)
        assert layer.projection("o") is not layer.projection("q")


def test_padding_and_global_token_from_the_mask():
    # Two rows of length 4, the second padded after 2 tokens; a causal sdpa-style mask.
    key_padding = torch.tensor([[True, True, True, True], [True, True, False, False]])
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    mask = (causal[None] & key_padding[:, None, :])[:, None]
    decoder = torch.nn.Module()
    decoder.is_causal = True
    query = torch.zeros(2, 1, 4, 8)
    padding, is_causal = padding_and_causality(decoder, query, mask)
    assert is_causal and torch.equal(padding, key_padding)
    assert global_token_index(padding, True, 2, 4, "cpu").tolist() == [3, 1]  # the last real token
    assert global_token_index(padding, False, 2, 4, "cpu").tolist() == [0, 0]  # [CLS]
    assert padding_and_causality(decoder, query, None) == (None, True)


@pytest.mark.parametrize("family", ["bert", "gpt2", "llama"])
def test_trace_records_one_layer(tiny_model_dir, family):
    loaded, batch = load_with_padded_batch(tiny_model_dir(family))
    get_module("none").apply(loaded.model, get_module("none").config_class())
    steps = record_trace(loaded.model, batch)
    stages = [step.stage for step in steps]
    assert stages[-1] == "output projection"
    assert "attention" in stages
    b, n = batch["input_ids"].shape
    attention = steps[stages.index("attention")]
    heads = loaded.model.config.num_attention_heads
    assert attention.inputs["query"].shape[:3] == [b, heads, n]
    assert attention.outputs["output"].shape[:3] == [b, n, heads]
    if family == "gpt2":
        assert stages[0] == "qkv projection (fused)"
    else:
        assert stages[:3] == ["q projection", "k projection", "v projection"]
    if family == "llama":  # grouped-query attention: fewer key heads than query heads
        assert attention.inputs["key"].shape[1] == loaded.model.config.num_key_value_heads < heads
