"""`svd_lowrank`: installs truncated-SVD factorisations of the attention projections, reports on them, and
what the pipeline asks of it: LoRA targets, the projections' FLOPs and the dense reference."""

from __future__ import annotations

from collections.abc import Callable

from peft.utils.constants import DUMMY_TARGET_MODULES
from torch import nn

from ..base import (
    attention_layers,
    distinct_projections,
    family_layout,
    install_attention,
    model_family,
    projection_shape,
    unwrap_peft,
)
from .attention import LowRankLinear, factorised_parameter_count, svd_lowrank_attention
from .config import SvdLowRankConfig


def _parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def apply(model: nn.Module, config: SvdLowRankConfig) -> nn.Module:
    """Replaces the chosen projections of every attention layer by their truncated SVD, in place.

    Each chosen `nn.Linear` (or GPT-2 `Conv1D`) becomes a [`LowRankLinear`] whose factors `svd_down` and
    `svd_up` come from the SVD of the pretrained weight. GPT-2's fused `c_attn` is factorised once, as one
    (3·hidden, hidden) matrix. The attention function is transformers' SDPA, registered as
    `attncard_svd_lowrank`.

    Args:
        model: a loaded transformers model of a family in `modules.base.FAMILIES`, not yet wrapped by peft.
        config: the rank (or energy) and the projections to factorise.

    Returns:
        The same model. Its parameter counts before and after are kept for [`module_stats`].

    Raises:
        ValueError: a projection is already factorised (the module was applied twice).

    Example:
        >>> model = apply(model, SvdLowRankConfig(rank=4))  # a tiny BERT: projections of 32 → 32
        >>> type(attention_layers(model)[0].projection("q")).__name__
        'LowRankLinear'
    """
    before = _parameter_count(model)
    for layer in attention_layers(model):
        replaced: set[int] = set()  # ids of this layer's new modules: GPT-2's q, k and v all name c_attn
        for which in config.projections:
            projection = layer.projection(which)
            if id(projection) in replaced:
                continue
            if isinstance(projection, LowRankLinear):
                raise ValueError(f"the {which} projection of layer {layer.index} is already factorised")
            if config.energy is not None:
                low = LowRankLinear.from_projection(projection, energy=config.energy)
            else:
                low = LowRankLinear.from_projection(projection, rank=config.rank)
            layer.replace_projection(which, low)
            replaced.add(id(low))
    install_attention(model, "svd_lowrank", svd_lowrank_attention)
    model.attncard_svd_lowrank_parameters = {"before": before, "after": _parameter_count(model)}
    return model


def lora_target_modules(family: str, config: SvdLowRankConfig) -> list[str] | str:
    """The module names LoRA should target in a model of `family` with `svd_lowrank` installed.

    LoRA adapts the query and value projections, as for every other module. A factorised projection is a
    [`LowRankLinear`] whose factors are trained in full (`modules_to_save`), which already contains anything
    LoRA could add there, and peft cannot wrap it anyway. When both are factorised (the default) there is
    nothing left for LoRA: peft's `DUMMY_TARGET_MODULES` then builds the adapter with no LoRA layer, and
    only the factors and the classification head are trained.

    Args:
        family: the transformers `model_type` (`bert`, `gpt2`, `qwen3`, …).
        config: the installed configuration.

    Returns:
        Names for `LoraConfig(target_modules=...)`; use `MODULE.training.trainable_modules` as
        `modules_to_save`.

    Example:
        >>> lora_target_modules("bert", SvdLowRankConfig())
        'dummy-target-modules'
        >>> lora_target_modules("bert", SvdLowRankConfig(projections=("k", "o")))
        ['query', 'value']
    """
    layout = family_layout(family)
    factorised = {getattr(layout, which) for which in config.projections if which != "o"}
    plain = [name for name in layout.lora_targets if name not in factorised]
    return plain or DUMMY_TARGET_MODULES


def module_stats(model: nn.Module) -> dict:
    """Ranks and parameter counts of the factorised projections, for results.json and the card.

    Args:
        model: a model with `svd_lowrank` installed, peft-wrapped or not.

    Returns:
        A JSON-serialisable dict:
            `layers`: per attention layer, `{"index", "projections": {name: {...}}}`, where name is `q`, `k`,
                `v`, `o` (or `qkv` for GPT-2's fused matrix) and each entry holds `module`, `source`,
                `in_features`, `out_features`, `rank`, `energy_kept`, `parameters_before`,
                `parameters_after`;
            `projection_parameters_before` / `_after`: summed over the factorised projections;
            `model_parameters_before` / `_after`: the whole model before and after `apply` (no LoRA);
            `compression`: model parameters before / after.

    Example:
        >>> model = apply(model, SvdLowRankConfig(rank=4))
        >>> module_stats(model)["layers"][0]["projections"]["q"]["rank"]
        4
    """
    base = unwrap_peft(model)
    counts = getattr(base, "attncard_svd_lowrank_parameters", None)
    if counts is None:
        raise ValueError("svd_lowrank is not installed in this model; call apply first")
    layout = family_layout(model_family(base))
    layers = []
    total_before = total_after = 0
    for layer in attention_layers(base):
        groups: dict[int, list[str]] = {}
        for which in "qkvo":
            groups.setdefault(id(layer.projection(which)), []).append(which)
        projections = {}
        for names in groups.values():
            low = layer.projection(names[0])
            if not isinstance(low, LowRankLinear):
                continue
            bias = low.svd_up.bias is not None
            before = low.in_features * low.out_features + (low.out_features if bias else 0)
            after = factorised_parameter_count(low.in_features, low.out_features, low.rank, bias)
            projections["".join(names)] = {
                "module": layout.output if names[0] == "o" else getattr(layout, names[0]),
                "source": low.source,
                "in_features": low.in_features,
                "out_features": low.out_features,
                "rank": low.rank,
                "energy_kept": round(low.energy_kept, 6),
                "parameters_before": before,
                "parameters_after": after,
            }
            total_before += before
            total_after += after
        layers.append({"index": layer.index, "projections": projections})
    return {
        "layers": layers,
        "projection_parameters_before": total_before,
        "projection_parameters_after": total_after,
        "model_parameters_before": counts["before"],
        "model_parameters_after": counts["after"],
        "compression": round(counts["before"] / counts["after"], 6),
    }


def projection_flops(model: nn.Module, n: int) -> float:
    """`MODULE.measurement.projection_flops`: the q, k, v and o projections as installed, at length N.

    A factorised projection ([`LowRankLinear`]) costs 2·N·r·(in + out) (x·down then ·up), any other
    2·N·in·out; GPT-2's fused `c_attn` is counted once. Biases and LoRA adapters are not counted.

    Example:
        >>> projection_flops(model, 64)  # a tiny BERT: 2 layers, q, k, v, o 32 → 32: 2·4·2·64·32·32
        1048576.0
        >>> projection_flops(apply(model, SvdLowRankConfig(rank=4)), 64)  # rank 4: 2·4·2·64·4·64
        262144.0
    """
    flops = 0
    for layer in attention_layers(model):
        for projection in distinct_projections(layer):
            in_features, out_features = projection_shape(projection)
            if isinstance(projection, LowRankLinear):
                flops += 2 * n * projection.rank * (in_features + out_features)
            else:
                flops += 2 * n * in_features * out_features
    return float(flops)


def dense_reference(model: nn.Module, load_base: Callable[[], nn.Module]) -> nn.Module:
    """`MODULE.measurement.dense_reference`: the base model loaded again.

    The module replaced the projections themselves by their factors, so no copy of the installed model
    computes the dense model; the reference is the base model reloaded (with a new head, which does not
    change its cost). A peft-wrapped `model` with unmerged LoRA adapters carries their cost, the reference
    does not.
    """
    return load_base()
