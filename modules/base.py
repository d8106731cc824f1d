"""What every attention module provides, and how one is installed into a transformers model.

Each module is a folder `modules/<name>/` of the same shape:

    config.py      a dataclass whose every field has `metadata={"help": ...}` (the card's configuration table)
    attention.py   the attention function, `(module, query, key, value, attention_mask, *, scaling, dropout,
                   **kwargs) -> (output, None)` like transformers' `sdpa_attention_forward`, and the small
                   `nn.Module` holding a layer's learnable parameters, if any
    model.py       `apply(model, config)`: installs the module in place and returns the model
    spec.md        the module's specification, printed in the card
    __init__.py    `MODULE`, an [`AttentionModule`]

Installing goes through transformers' `AttentionInterface`: the function is registered under
`attncard_<name>`, with `sdpa_mask` registered for the same name in `AttentionMaskInterface` (without it a
padded batch reaches the function with `attention_mask=None`), and the model is switched to it with
`set_attn_implementation`. The pretrained q/k/v/o projections stay where they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from ..pipeline.errors import UnsupportedModelError


@dataclass(frozen=True)
class AttentionModule:
    """An attention module: its name, config class, installer and the facts its card states.

    Attributes:
        name: the name given to `publish --module`.
        config_class: a dataclass; every field has `metadata={"help": ...}`.
        apply: installs the module into a loaded model, in place, and returns the model.
        folder: the module's folder (its `spec.md` and source files).
        causal: works in causal (decoder) models.
        bidirectional: works in bidirectional (encoder) models.
        gqa: works with grouped-query attention (fewer key/value heads than query heads).
        citation: the paper the module implements; empty for `none`.
        trainable_modules: names of the submodules holding the module's own learnable parameters (peft's
            `modules_to_save` matches these names).
        learning_rates: `config -> {parameter-name fragment: learning rate}` for parameters that need their
            own rate (adaptive_span's span logits).
        penalty: `(model, config, step) -> scalar tensor` added to the training loss (adaptive_span's L1).
        stats: `(model, lengths) -> dict` of JSON-ready figures about the trained module, for results.json;
            `lengths` are the token counts of the evaluated rows.
        lora_targets: `(family, config) -> target_modules` for LoRA when the module changes which
            projections LoRA can adapt (svd_lowrank factorises them); None keeps the family's default.
    """

    name: str
    config_class: type
    apply: Callable[[nn.Module, object], nn.Module]
    folder: Path
    causal: bool
    bidirectional: bool
    gqa: bool
    citation: str = ""
    trainable_modules: tuple[str, ...] = field(default=())
    learning_rates: Callable[[object], dict[str, float]] | None = None
    penalty: Callable[[nn.Module, object, int], torch.Tensor] | None = None
    stats: Callable[[nn.Module, list[int]], dict] | None = None
    lora_targets: Callable[[str, object], list[str] | str] | None = None

    @property
    def spec(self) -> str:
        return (self.folder / "spec.md").read_text(encoding="utf-8")

    @property
    def source_files(self) -> list[Path]:
        return sorted(self.folder.glob("*.py"))

    def config_fields(self) -> list[tuple[str, object, str]]:
        """`(name, default, help)` of every config field, for the card's configuration table."""
        return [(f.name, f.default, f.metadata["help"]) for f in fields(self.config_class)]


@dataclass(frozen=True)
class FamilyLayout:
    """Where a model family keeps its self-attention and the projections around it.

    `output` is the output projection's path from the attention module's parent (BERT keeps it beside the
    attention module, in `BertAttention.output.dense`) or, when it starts with `.`, from the module itself.
    GPT-2 fuses q, k and v into one `c_attn`; `q`, `k` and `v` then all name it.
    """

    attention_class: str
    q: str
    k: str
    v: str
    output: str


FAMILIES: dict[str, FamilyLayout] = {
    "bert": FamilyLayout("BertSelfAttention", "query", "key", "value", "output.dense"),
    "roberta": FamilyLayout("RobertaSelfAttention", "query", "key", "value", "output.dense"),
    "distilbert": FamilyLayout("DistilBertSelfAttention", "q_lin", "k_lin", "v_lin", ".out_lin"),
    "gpt2": FamilyLayout("GPT2Attention", "c_attn", "c_attn", "c_attn", ".c_proj"),
    "llama": FamilyLayout("LlamaAttention", "q_proj", "k_proj", "v_proj", ".o_proj"),
    "qwen2": FamilyLayout("Qwen2Attention", "q_proj", "k_proj", "v_proj", ".o_proj"),
    "qwen3": FamilyLayout("Qwen3Attention", "q_proj", "k_proj", "v_proj", ".o_proj"),
}


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
    config = getattr(unwrap_peft(model), "config", None)
    family = getattr(config, "model_type", None)
    if family not in FAMILIES:
        raise UnsupportedModelError(
            f"attention modules support the families {', '.join(FAMILIES)}; this model is '{family}'"
        )
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


def install_attention(model: nn.Module, module_name: str, attention_function: Callable) -> None:
    """Registers `attention_function` (and `sdpa_mask` for its masks) and switches the model to it."""
    name = implementation_name(module_name)
    AttentionInterface.register(name, attention_function)
    # Without a registered mask function a padded batch reaches the function with attention_mask=None.
    AttentionMaskInterface.register(name, sdpa_mask)
    model.set_attn_implementation(name)
    for layer in attention_layers(model):
        layer.module.attncard_layer_index = layer.index  # for the tensor trace and per-layer statistics


def padding_and_causality(
    module: nn.Module, query: torch.Tensor, attention_mask: torch.Tensor | None
) -> tuple[torch.Tensor | None, bool]:
    """From the mask transformers passes to an attention function: `(key_padding_mask, causal)`.

    `sdpa_mask` gives a boolean (B, 1, Q, K) mask, True where a query may attend, with the causal triangle
    folded in; it is `None` when nothing is padded. The key padding is the mask's last query row: in a causal
    mask that row sees every earlier key, so it is False exactly on the padding.
    """
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
    if not causal:
        return torch.zeros(batch, dtype=torch.long, device=device)
    if key_padding_mask is None:
        return torch.full((batch,), length - 1, dtype=torch.long, device=device)
    positions = torch.arange(length, device=device)
    return (positions * key_padding_mask).argmax(dim=-1)  # the rightmost real token
