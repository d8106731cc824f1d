"""What every attention module provides, and how one is installed into a transformers model.

Each module is a folder `modules/<name>/` of the same shape:

    config.py      a dataclass whose every field has `metadata={"help": ...}` (the card's configuration table)
    attention.py   the attention function, `(module, query, key, value, attention_mask, *, scaling, dropout,
                   **kwargs) -> (output, None)` like transformers' `sdpa_attention_forward`, and the small
                   `nn.Module` holding a layer's learnable parameters, if any
    model.py       where the module needs them: its `prepare(model, config)`, which adds its submodules or
                   state to each layer before the function is installed, and its answers to what the
                   pipeline asks (statistics, FLOPs, dense reference, plots, …), where it does not take
                   [`AttentionModule`]'s defaults
    spec.md        the module's specification, printed in the card
    __init__.py    `MODULE`, an [`AttentionModule`] named as the folder, and `CONTRACT_CASE`, the
                   configurations the module contract (`attncard.testing.builtin_cases`) runs it with

Installing goes through transformers' `AttentionInterface`: the function is registered under
`attncard_<name>`, with `sdpa_mask` registered for the same name in `AttentionMaskInterface` (without it a
padded batch reaches the function with `attention_mask=None`), and the model is switched to it with
`set_attn_implementation`. Each layer keeps the module's configuration, which every call of the function
is given as `config` ([`ConfiguredAttention`]). The pretrained q/k/v/o projections stay where they are.

The pipeline knows a module only through its [`AttentionModule`]: every hook there has a default here
(dense FLOPs, a copy of the model on sdpa as the dense reference, the family's LoRA targets, …), so that a
module that only changes the attention function needs only a name, a config and that function.
[`FAMILIES`] is the one table of the model families attncard supports.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from ..pipeline.record.errors import UnsupportedModelError

# torch and transformers are imported by the functions that use them: the registry (`modules/__init__.py`)
# imports this file for `AttentionModule`, and `publish --help` lists the modules without importing torch.
if TYPE_CHECKING:
    import torch
    from torch import nn


@dataclass(frozen=True)
class FamilyLayout:
    """A model family attncard supports: where it keeps its self-attention, and what the pipeline must know.

    Attributes:
        attention_class: the class name of the family's self-attention module (`BertSelfAttention`).
        q, k, v: the attribute names of the query, key and value projections on that module. GPT-2 fuses
            them into one `c_attn`; `q`, `k` and `v` then all name it.
        output: the output projection's path from the attention module's parent (BERT keeps it beside the
            attention module, in `BertAttention.output.dense`) or, when it starts with `.`, from the module
            itself.
        decoder: the family's attention is causal, and its classifier pools the last real token (encoders
            read the first).
        positions_after_padding: position ids start after the padding index (RoBERTa counts from
            `pad_token_id + 1`), so `pad_token_id + 1` of `max_position_embeddings` are never used.

    Example:
        >>> FAMILIES["gpt2"].lora_targets
        ['c_attn']
    """

    attention_class: str
    q: str
    k: str
    v: str
    output: str
    decoder: bool
    positions_after_padding: bool = False

    @property
    def lora_targets(self) -> list[str]:
        """The module names LoRA adapts by default: the query and value projections (Hu et al., 2021
        adapt W_q and W_v), once each (GPT-2's fused `c_attn` once)."""
        return list(dict.fromkeys((self.q, self.v)))


# The one table of supported families, keyed by transformers' `model_type`.
FAMILIES: dict[str, FamilyLayout] = {
    "bert": FamilyLayout("BertSelfAttention", "query", "key", "value", "output.dense", decoder=False),
    "roberta": FamilyLayout(
        "RobertaSelfAttention",
        "query",
        "key",
        "value",
        "output.dense",
        decoder=False,
        positions_after_padding=True,
    ),
    "distilbert": FamilyLayout(
        "DistilBertSelfAttention", "q_lin", "k_lin", "v_lin", ".out_lin", decoder=False
    ),
    "gpt2": FamilyLayout("GPT2Attention", "c_attn", "c_attn", "c_attn", ".c_proj", decoder=True),
    "llama": FamilyLayout("LlamaAttention", "q_proj", "k_proj", "v_proj", ".o_proj", decoder=True),
    "qwen2": FamilyLayout("Qwen2Attention", "q_proj", "k_proj", "v_proj", ".o_proj", decoder=True),
    "qwen3": FamilyLayout("Qwen3Attention", "q_proj", "k_proj", "v_proj", ".o_proj", decoder=True),
}


def family_layout(family: str | None) -> FamilyLayout:
    """The [`FamilyLayout`] of a transformers `model_type`.

    Args:
        family: the `model_type` (`bert`, `gpt2`, `qwen3`, …).

    Returns:
        Its row of [`FAMILIES`].

    Raises:
        [`UnsupportedModelError`]: the family is not in the table; the message lists those that are.

    Example:
        >>> family_layout("mistral")
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.UnsupportedModelError: attncard supports the model families bert, ...
    """
    if family not in FAMILIES:
        raise UnsupportedModelError(
            f"attncard supports the model families {', '.join(FAMILIES)}; this model is '{family}': pick a "
            "model of one of those families"
        )
    return FAMILIES[family]


@dataclass
class AttentionLayer:
    """One self-attention layer of a model and the projections around it."""

    index: int
    name: str  # qualified name of the attention module in the model
    module: nn.Module
    layout: FamilyLayout
    parent: nn.Module  # the module holding `module`
    output_owner: nn.Module  # the module holding the output projection
    output_attr: str

    def projection(self, which: str) -> nn.Module:
        """The `q`, `k`, `v` or `o` projection module."""
        if which == "o":
            return getattr(self.output_owner, self.output_attr)
        return getattr(self.module, getattr(self.layout, which))

    def replace_projection(self, which: str, new: nn.Module) -> None:
        if which == "o":
            setattr(self.output_owner, self.output_attr, new)
        else:
            setattr(self.module, getattr(self.layout, which), new)


def unwrap_peft(model: nn.Module) -> nn.Module:
    """The transformers model inside a peft model; any other model as it is."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def model_family(model: nn.Module) -> str:
    """The `model_type` of a model (peft-wrapped or not); raises [`UnsupportedModelError`] outside
    [`FAMILIES`]."""
    config = getattr(unwrap_peft(model), "config", None)
    family = getattr(config, "model_type", None)
    family_layout(family)
    return family


def attention_layers(model: nn.Module) -> list[AttentionLayer]:
    """The self-attention layers of a model (peft-wrapped or not), in order, with their projections.

    Example:
        >>> layers = attention_layers(model)  # a BERT
        >>> layers[0].name, type(layers[0].projection("o")).__name__
        ('bert.encoder.layer.0.attention.self', 'Linear')
    """
    model = unwrap_peft(model)
    layout = FAMILIES[model_family(model)]
    named = dict(model.named_modules())
    layers = []
    for name, module in named.items():
        if type(module).__name__ != layout.attention_class:
            continue
        parent = named[name.rpartition(".")[0]]
        if layout.output.startswith("."):
            owner_path, attr = layout.output[1:].rpartition(".")[::2]
            owner = module.get_submodule(owner_path) if owner_path else module
        else:
            owner_path, attr = layout.output.rpartition(".")[::2]
            owner = parent.get_submodule(owner_path) if owner_path else parent
        layers.append(AttentionLayer(len(layers), name, module, layout, parent, owner, attr))
    if not layers:
        raise UnsupportedModelError(f"no {layout.attention_class} layers found in {type(model).__name__}")
    return layers


def implementation_name(module_name: str) -> str:
    """The name a module's attention function is registered under in transformers' interfaces."""
    return f"attncard_{module_name}"


# The attribute of each attention layer holding the configuration its module was installed with.
CONFIG_ATTRIBUTE = "attncard_config"


@dataclass(frozen=True)
class ConfiguredAttention:
    """An attention function as [`install_attention`] registers it: each call is given the configuration the
    module was installed with, as the keyword `config`, read from the layer it is called for (two models in
    one process may run one module under two configurations).

    Example:
        >>> from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        >>> from attncard.modules import get_module
        >>> model = get_module("none").apply(model, get_module("none").config_class())
        >>> ALL_ATTENTION_FUNCTIONS["attncard_none"].function.__name__
        'none_attention'
    """

    function: Callable

    def __call__(self, module: nn.Module, query, key, value, attention_mask, **kwargs):
        kwargs.setdefault("config", getattr(module, CONFIG_ATTRIBUTE, None))
        return self.function(module, query, key, value, attention_mask, **kwargs)


def install_attention(
    model: nn.Module, module_name: str, attention_function: Callable, config: object = None
) -> None:
    """Registers `attention_function` (and `sdpa_mask` for its masks) and switches the model to it; every call
    of the function is given `config` as the keyword `config` ([`ConfiguredAttention`]).

    Args:
        model: a loaded transformers model of a family in [`FAMILIES`], peft-wrapped or not.
        module_name: the module's name; the function is registered as `attncard_<name>`.
        attention_function: transformers' signature, `(module, query, key, value, attention_mask, *, scaling,
            dropout, **kwargs) -> (output, None)`.
        config: the module's configuration, which each layer keeps (default None).
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    name = implementation_name(module_name)
    AttentionInterface.register(name, ConfiguredAttention(attention_function))
    # Without a registered mask function a padded batch reaches the function with attention_mask=None.
    AttentionMaskInterface.register(name, sdpa_mask)
    model.set_attn_implementation(name)
    for layer in attention_layers(model):
        layer.module.attncard_layer_index = layer.index  # for the tensor trace and per-layer statistics
        setattr(layer.module, CONFIG_ATTRIBUTE, config)


def installed_config(model: nn.Module) -> object:
    """The configuration the model's module was installed with, as its attention function is given it: for
    hooks called with the model only (`measurement.flops`, `stats`).

    Example:
        >>> from attncard.modules import get_module
        >>> module = get_module("adaptive_sparse")
        >>> install_attention(model, module.name, module.function, module.config_class(top_k=4))
        >>> installed_config(model)
        AdaptiveSparseConfig(top_k=4, warmup_steps=0)
    """
    return getattr(attention_layers(model)[0].module, CONFIG_ATTRIBUTE)


def padding_and_causality(
    module: nn.Module, query: torch.Tensor, attention_mask: torch.Tensor | None
) -> tuple[torch.Tensor | None, bool]:
    """From the mask transformers passes to an attention function: `(key_padding_mask, causal)`.

    `sdpa_mask` gives a boolean (B, 1, Q, K) mask, True where a query may attend, with the causal triangle
    folded in; it is `None` when nothing is padded. The key padding is the mask's last query row: in a causal
    mask that row sees every earlier key, so it is False exactly on the padding.
    """
    import torch

    causal = bool(getattr(module, "is_causal", False)) and query.shape[-2] > 1
    if attention_mask is None:
        return None, causal
    if attention_mask.dtype != torch.bool:  # an additive float mask: 0 where allowed, very negative elsewhere
        attention_mask = attention_mask == 0
    return attention_mask[:, 0, -1, :], causal


def global_token_index(
    key_padding_mask: torch.Tensor | None, causal: bool, batch: int, length: int, device: torch.device
) -> torch.Tensor:
    """Per row, the position of the global token: the first token in an encoder ([CLS], which the classifier
    reads), the last real token in a decoder (the one its classifier pools). Vectorised over the batch."""
    import torch

    if not causal:
        return torch.zeros(batch, dtype=torch.long, device=device)
    if key_padding_mask is None:
        return torch.full((batch,), length - 1, dtype=torch.long, device=device)
    positions = torch.arange(length, device=device)
    return (positions * key_padding_mask).argmax(dim=-1)  # the rightmost real token


# ----------------------------------------------------------------------------------------------------------
# What the pipeline asks of a module: the helpers and the default of every hook of `AttentionModule`


def attention_shape(config) -> tuple[int, int, int]:
    """`(heads, key_value_heads, head_dim)` of a model's self-attention.

    Key/value heads are `num_key_value_heads` where the config has it (grouped-query attention), else the
    query heads; the head dimension is `head_dim` where set (Qwen3), else hidden_size / heads.

    Example:
        >>> from transformers import BertConfig
        >>> attention_shape(BertConfig(hidden_size=384, num_attention_heads=12))
        (12, 12, 32)
    """
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    return heads, kv_heads, head_dim


def projection_shape(projection: nn.Module) -> tuple[int, int]:
    """`(in, out)` of a projection: an `nn.Linear`, a GPT-2 `Conv1D` (weight (in, out)), either inside a peft
    layer, or any module with `in_features` and `out_features` (what a module installs in place of one).

    Raises:
        [`UnsupportedModelError`]: the projection is none of those.
    """
    from transformers.pytorch_utils import Conv1D

    base = projection.get_base_layer() if hasattr(projection, "get_base_layer") else projection
    if isinstance(base, Conv1D):
        return int(base.weight.shape[0]), int(base.weight.shape[1])
    if hasattr(base, "in_features") and hasattr(base, "out_features"):
        return int(base.in_features), int(base.out_features)
    raise UnsupportedModelError(f"cannot tell the shape of a {type(base).__name__} projection")


def distinct_projections(layer: AttentionLayer) -> list[nn.Module]:
    """The q, k, v and o projections of a layer, each module once (GPT-2's fused `c_attn` once)."""
    projections: dict[int, nn.Module] = {}
    for which in "qkvo":
        projection = layer.projection(which)
        projections.setdefault(id(projection), projection)
    return list(projections.values())


def dense_attention_flops(model: nn.Module, n: int) -> float:
    """FLOPs of dense attention in the whole model at length N: L·H·(2·N²·d [Q·Kᵀ] + 2·N²·d [P·V]).

    A multiply-add counts 2; d is the head dimension, L the layers, H the query heads. Every query–key pair
    is counted, in decoders too (a dense kernel computes the masked triangle); softmax, scaling and masks
    are not.

    Example:
        >>> dense_attention_flops(minilm, 128)  # 6 layers, 12 heads, d = 32: 6·12·4·128²·32
        150994944.0
    """
    heads, _, head_dim = attention_shape(unwrap_peft(model).config)
    return float(len(attention_layers(model)) * heads * 4 * n * n * head_dim)


def dense_flops(model: nn.Module, n: int) -> tuple[float, str]:
    """The default `AttentionModule.flops`: the module computes what dense attention computes.

    Returns:
        `(dense_attention_flops(model, n), "the same attention")`.
    """
    return dense_attention_flops(model, n), "the same attention"


def dense_projection_flops(model: nn.Module, n: int) -> float:
    """FLOPs of the q, k, v and o projections at length N, each 2·N·in·out (a fused `c_attn` once), from
    their shapes (see [`projection_shape`]). Biases and LoRA adapters are not counted.

    The default `AttentionModule.projection_flops`, and the pipeline's count of the projections as loaded:
    a projection a module replaced reports its original `in_features` and `out_features`.
    """
    flops = 0
    for layer in attention_layers(model):
        for projection in distinct_projections(layer):
            in_features, out_features = projection_shape(projection)
            flops += 2 * n * in_features * out_features
    return float(flops)


def sdpa_copy(model: nn.Module, load_base: Callable[[], nn.Module]) -> nn.Module:
    """The default `AttentionModule.dense_reference`: a copy of `model` on transformers' sdpa attention.

    The copy has the same weights (LoRA adapters included) and the module's own submodules, which are never
    called: only the module's attention function reads them. It holds a second set of weights.

    Args:
        model: a model with a module installed, peft-wrapped or not.
        load_base: unused here (see `AttentionModule.dense_reference`).

    Returns:
        The copy, on the model's device, its attention implementation "sdpa".

    Example:
        >>> from attncard.modules import get_module
        >>> module = get_module("adaptive_sparse")
        >>> model = module.apply(model, module.config_class())
        >>> reference = sdpa_copy(model, load_base)
        >>> reference.config._attn_implementation, model.config._attn_implementation
        ('sdpa', 'attncard_adaptive_sparse')
    """
    reference = copy.deepcopy(model)
    unwrap_peft(reference).set_attn_implementation("sdpa")
    return reference


def call_attention(
    attention: Callable,
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    hidden_states: torch.Tensor | None,
) -> torch.Tensor:
    """The default `AttentionModule.layer_attention`: one call of an attention function on one layer's
    attention module, as its forward makes it with no padding (no mask), its own `scaling` and dropout 0.

    Args:
        attention: an attention function of transformers' signature (the module's, or sdpa's).
        module: the layer's attention module.
        query: (B, H, N, D).
        key: (B, H_kv, N, D).
        value: (B, H_kv, N, D).
        hidden_states: the layer input (B, N, hidden); unused here.

    Returns:
        The attention output (B, N, H, D).
    """
    config = getattr(module, CONFIG_ATTRIBUTE, None)
    output, _ = attention(module, query, key, value, None, scaling=module.scaling, dropout=0.0, config=config)
    return output


def family_lora_targets(family: str, config: object) -> list[str]:
    """The default `AttentionModule.lora_targets`: the family's query and value projections.

    Example:
        >>> family_lora_targets("distilbert", None)
        ['q_lin', 'v_lin']
    """
    return family_layout(family).lora_targets


@dataclass(frozen=True)
class Claims:
    """What a module says it supports; `attncard.testing.ModuleContract` checks each claim on tiny models.

    Attributes:
        causal: works in causal (decoder) models.
        bidirectional: works in bidirectional (encoder) models.
        gqa: works with grouped-query attention (fewer key/value heads than query heads).
        changes_attention: the module changes what every attention layer computes, so each counts among the
            layers the run changed; False only for a module that keeps the model's own attention (`none`),
            whose stock load is then the evaluated model itself.

    Example:
        >>> Claims(gqa=False)
        Claims(causal=True, bidirectional=True, gqa=False, changes_attention=True)
    """

    causal: bool = True
    bidirectional: bool = True
    gqa: bool = True
    changes_attention: bool = True


@dataclass(frozen=True)
class Paper:
    """The paper a module implements, as the card cites it.

    Attributes:
        citation: one line: authors, title, venue and year, and a link.
        bibtex: its BibTeX entries (default ""), shown in the card's citations.

    Example:
        >>> Paper("Beltagy, Peters and Cohan, Longformer, 2020").bibtex
        ''
    """

    citation: str
    bibtex: str = ""


@dataclass(frozen=True)
class Training:
    """How a module is trained, where it differs from LoRA on the family's query and value projections.

    Attributes:
        trainable_modules: names of the submodules holding the module's own learnable parameters (default
            none); peft's `modules_to_save` trains and saves the submodules of these names.
        learning_rates: `config -> {parameter-name fragment: learning rate}` for parameters that need their
            own rate (default None: every parameter at the run's `lr`).
        penalty: `(model, config, step) -> scalar tensor` added to the training loss at each optimizer step
            (default None: no penalty).
        lora_targets: `(family, config) -> target_modules` for peft's `LoraConfig` (default
            [`family_lora_targets`]: the family's query and value projections). A module that replaces
            projections returns the others, or peft's `DUMMY_TARGET_MODULES` when none is left.
        calibrate: `(model, config) -> dict`: called once after training, on the trained model in eval mode
            on the training device, for measurements the module's attention needs to dispatch (a crossover
            length between two kernels, say); the module keeps what it measured in the model (in a buffer
            of a `trainable_modules` submodule, so that it is saved with the adapter) and reports it in its
            statistics; the returned figures are kept in the training result (default None).

    Example:
        >>> Training().lora_targets("gpt2", None)
        ['c_attn']
    """

    trainable_modules: tuple[str, ...] = ()
    learning_rates: Callable[[object], dict[str, float]] | None = None
    penalty: Callable[[nn.Module, object, int], torch.Tensor] | None = None
    lora_targets: Callable[[str, object], list[str] | str] = family_lora_targets
    calibrate: Callable[[nn.Module, object], dict] | None = None


@dataclass(frozen=True)
class Measurement:
    """How the pipeline measures a module, where dense attention's answers are wrong for it.

    Attributes:
        flops: `(model, n) -> (flops, formula)`: the attention FLOPs of the whole model with the module
            installed at length N (one row, no padding, a multiply-add counting 2), and the text of the
            formula with its numbers, which the card prints after `"<name>: "` (default [`dense_flops`]:
            the dense count, "the same attention").
        projection_flops: `(model, n) -> flops` of the q, k, v and o projections as installed (default
            [`dense_projection_flops`], 2·N·in·out each). The count as loaded is always
            `dense_projection_flops`, so a module that installs a projection in place of a pretrained one
            keeps its `in_features` and `out_features` on the replacement.
        dense_reference: `(model, load_base) -> reference`: the model without the module, on transformers'
            sdpa attention and the model's device, that the scaling tables measure against; `load_base()`
            loads the base model again (a new head, in eval mode, on the model's device) for a module whose
            installed model cannot be turned back into the dense one (default [`sdpa_copy`]).
        layer_attention: `(attention, module, query, key, value, hidden_states) -> output`: one call of
            `attention` (the module's function, and sdpa for the dense side) on layer 0's attention module,
            for the single-layer scaling table; q (1, H, N, D), k and v (1, H_kv, N, D), the synthetic layer
            input `hidden_states` (1, N, hidden), output (1, N, H, D) (default [`call_attention`]). A module
            whose function reads more than q, k and v sets that up here.
        stats: `(model, lengths) -> dict` of JSON-ready figures about the trained module, for results.json
            and the card; `lengths` are the token counts of the evaluated rows (default None: no figures).
        plots: `(stats, folder) -> [{"file", "title"}, …]`: draws figures of the module's `stats` (as
            results.json holds them) as PNG files named `[a-z0-9_]+.png` in `folder`, with matplotlib on
            its Agg backend, and returns them for the card; the same stats must draw the same bytes
            (default None: no figures).

    Example:
        >>> Measurement().flops is dense_flops
        True
    """

    flops: Callable[[nn.Module, int], tuple[float, str]] = dense_flops
    projection_flops: Callable[[nn.Module, int], float] = dense_projection_flops
    dense_reference: Callable[[nn.Module, Callable[[], nn.Module]], nn.Module] = sdpa_copy
    layer_attention: Callable[..., torch.Tensor] = call_attention
    stats: Callable[[nn.Module, list[int]], dict] | None = None
    plots: Callable[[dict, Path], list[dict[str, str]]] | None = None


@dataclass(frozen=True)
class InstallFunction:
    """The default `AttentionModule.apply`: runs the module's `prepare`, if any, then installs `function`
    under `name` with the config ([`install_attention`])."""

    name: str
    function: Callable
    prepare: Callable[[nn.Module, object], None] | None = None

    def __call__(self, model: nn.Module, config: object) -> nn.Module:
        if self.prepare is not None:
            self.prepare(model, config)
        install_attention(model, self.name, self.function, config)
        return model


def defining_folder(function: Callable) -> Path | None:
    """The folder of the file that defines `function`, found without importing that file (an
    [`imported_on_call`] function names its file); None when it has no file (a builtin, `__main__`)."""
    name = getattr(function, "__module__", None)
    loaded = sys.modules.get(name) if name else None
    file = getattr(loaded, "__file__", None)
    if file is None and name:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        file = spec.origin if spec is not None and spec.has_location else None
    return Path(file).parent if file else None


@dataclass(frozen=True)
class AttentionModule:
    """An attention module: everything the pipeline knows about it, and the only way it knows it.

    A module that only changes the attention function gives three fields: `name`, `config_class` and
    `function` (each call of which is given the run's configuration as `config`). Everything else has a
    default under which it works with the whole pipeline (train, evaluate, render, publish, download), in
    four typed groups: `claims` (what it supports), `paper` (what the card cites), `training` and
    `measurement` (hooks for a module that trains or costs something dense attention does not), and
    `prepare` for a module that adds submodules to each layer. A hook is a plain function. What the pipeline
    can measure (the parameter count as installed and after training), it measures: nothing declares it.

    Attributes:
        name: the name given to `publish --module`; the attention function is registered as
            `attncard_<name>` ([`implementation_name`]).
        config_class: a dataclass whose every field has a default and `metadata={"help": ...}` (the card's
            configuration table); `config_class()` is the configuration a run uses.
        function: the attention function, transformers' `AttentionInterface` signature
            `(module, query, key, value, attention_mask, *, scaling, dropout, **kwargs) -> (output, None)`.
        apply: `(model, config) -> model`: installs the module into a loaded transformers model, in place,
            before peft wraps it (default: `prepare`, then [`install_attention`] of `function` with the
            config, which every call of the function is given as the keyword `config`). Give your own only
            to install something else than `function`.
        folder: the module's folder, holding `spec.md` and `attention.py` (printed in the card); the sha256
            of each of its `*.py` files is recorded (default: the folder of the file defining `function`).
        claims: [`Claims`], checked by the contract suite (default: everything supported).
        paper: [`Paper`], the paper it implements (default None: the card cites none).
        training: [`Training`] (default: LoRA on the family's query and value projections, nothing else).
        measurement: [`Measurement`] (default: dense attention's FLOPs, a copy on sdpa as the reference).
        prepare: `(model, config) -> None`: what the module adds to the model before its function is
            installed: its submodules on each layer, projections it replaces, state (default None: nothing).

    Example:
        >>> import attncard_sliding_window as plugin  # with examples/sliding_window installed
        >>> from attncard.modules import contract_problems
        >>> module = AttentionModule(
        ...     "sliding_window", plugin.SlidingWindowConfig, plugin.sliding_window_attention
        ... )
        >>> module.folder.name, contract_problems(module)
        ('attncard_sliding_window', [])
        >>> module.measurement.flops(model, 128)[1]  # no `flops` given: the dense count
        'the same attention'
    """

    name: str
    config_class: type
    function: Callable
    apply: Callable[[nn.Module, object], nn.Module] | None = None
    folder: Path | None = None
    claims: Claims = field(default_factory=Claims)
    paper: Paper | None = None
    training: Training = field(default_factory=Training)
    measurement: Measurement = field(default_factory=Measurement)
    prepare: Callable[[nn.Module, object], None] | None = None

    def __post_init__(self) -> None:
        # A default `apply` is rebuilt, so that `dataclasses.replace(module, name=...)` installs the new name.
        if self.apply is None or isinstance(self.apply, InstallFunction):
            object.__setattr__(self, "apply", InstallFunction(self.name, self.function, self.prepare))
        if self.folder is None:
            object.__setattr__(self, "folder", defining_folder(self.function))
        elif isinstance(self.folder, str):
            object.__setattr__(self, "folder", Path(self.folder))

    @property
    def spec(self) -> str:
        return (self.folder / "spec.md").read_text(encoding="utf-8")

    @property
    def source_files(self) -> list[Path]:
        return sorted(self.folder.glob("*.py"))

    def config_fields(self) -> list[tuple[str, object, str]]:
        """`(name, default, help)` of every config field, for the card's configuration table."""
        return [(f.name, f.default, f.metadata["help"]) for f in fields(self.config_class)]


def imported_on_call(module: str, function: str) -> Callable:
    """`module.function`, imported when first called: a module's `__init__.py` can name hooks that live in
    files importing torch and still import without it (the registry, the card and `attncard verify
    --predictions` read `MODULE` without torch).

    Args:
        module: the absolute name of the hook's file, e.g. `f"{__name__}.model"` in a module's `__init__.py`.
        function: the name of the hook in it.

    Returns:
        A function taking the same arguments and returning what `module.function` returns.

    Example:
        >>> from attncard.modules.none import NoneConfig
        >>> function = imported_on_call("attncard.modules.none.attention", "none_attention")
        >>> function.__name__, function.__module__  # the folder of `AttentionModule` is found from the latter
        ('none_attention', 'attncard.modules.none.attention')
        >>> module = AttentionModule("none", NoneConfig, function)
        >>> module.apply(model, NoneConfig()).config._attn_implementation  # imports the file, and torch, now
        'attncard_none'
    """

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), function)(*args, **kwargs)

    call.__name__ = call.__qualname__ = function
    call.__module__ = module  # where `AttentionModule` finds the module's folder, without importing the file
    call.__doc__ = f"`{module}.{function}`, imported when first called."
    return call


def imported_on_read(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A `__getattr__` for a module's `__init__.py`: each of `names` is imported from its file when first
    read, so that the folder exports names of files importing torch and still imports without it.

    Args:
        package: the folder's `__name__`.
        names: `{name: file}`, e.g. `{"module_stats": "model"}` for `model.py`'s `module_stats`.

    Returns:
        The `__getattr__` function (PEP 562).

    Example:
        >>> __getattr__ = imported_on_read("attncard.modules.none", {"none_attention": "attention"})
        >>> __getattr__("none_attention").__module__
        'attncard.modules.none.attention'
    """

    def __getattr__(name: str) -> object:
        if name in names:
            return getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
