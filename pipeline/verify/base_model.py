"""The recorded base model of a run, loaded for a download: from the Hub at its recorded commit, from the
packaged MiniLM, or from the local folder it was trained on, and only once the run's config.json is checked
against the base model's own config ([`check_config_fits_base`]): no weight is read before that.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from transformers import AutoConfig, AutoModelForSequenceClassification, PretrainedConfig

from ..checks.integrity import CONFIG_FILE
from ..hub.endpoint import hub_endpoint
from ..record.errors import IncompatibleRunError, ModelLoadError, UnsafeFormatError, first_line
from ..record.manifest import RESULTS_FILE
from ..record.results import Results
from ..record.text import COMMIT_RE, SHA_PREFIX
from ..run.models import MODEL_ALIASES, folder_revision, minilm_folder

# The fields of a run's config.json that publish sets (labels, architecture, dtype, pad token) or that
# name where and how it was loaded; every other field must be the base model's (check_config_fits_base).
PUBLISH_SET_CONFIG_FIELDS = frozenset(
    {
        "id2label",
        "label2id",
        "num_labels",
        "problem_type",
        "architectures",
        "dtype",
        "torch_dtype",
        "transformers_version",
        "_name_or_path",
        "_commit_hash",
        "attn_implementation",
        "_attn_implementation",
        "_attn_implementation_autoset",
    }
)


def load_base_model(
    results: Results, config, where: str, base_model: str | os.PathLike | None
) -> torch.nn.Module:
    """The recorded base weights with the run's config (labels, pad token), as `load_model` loads them.

    A base model from the Hub is read at its recorded commit; the packaged MiniLM from its package; a base
    model trained from a local folder (recorded by its name and the sha256 of its weights, never a path) from
    `base_model`, which must hold those weights.
    """
    record = results.model
    revision: str | None = None
    if base_model is not None:
        source = Path(base_model).expanduser()
        if not source.is_dir():
            raise IncompatibleRunError(
                f"base model folder {source} does not exist; pass the folder it was trained on"
            )
    elif record.model_id == MODEL_ALIASES["minilm"].hub_id and record.revision.startswith("sha256:"):
        source = minilm_folder()  # the packaged weights of that Hub repository; their sha256 is checked below
    elif record.revision.startswith("sha256:"):
        raise IncompatibleRunError(
            f"{where}: the run was trained on a local model folder '{record.model_id}' (weights "
            f"{record.revision[: 7 + SHA_PREFIX]}…); pass that folder as base_model="
        )
    else:
        try:
            validate_repo_id(record.model_id)
        except HFValidationError:
            raise IncompatibleRunError(
                f"{where}: {RESULTS_FILE} names the base model '{record.model_id}', which is not a Hub id; "
                "do not use this checkpoint"
            ) from None
        if not COMMIT_RE.fullmatch(record.revision):
            raise IncompatibleRunError(
                f"{where}: {RESULTS_FILE} pins the base model {record.model_id} to '{record.revision}', "
                "which is not a commit sha; do not use this checkpoint"
            )
        source, revision = record.model_id, record.revision
        hub_endpoint()  # transformers sends the token to HF_ENDPOINT, not to `endpoint`: refused unless safe
    if isinstance(source, Path):
        if not list(source.glob("*.safetensors")):
            raise UnsafeFormatError(
                f"{where}: the base model folder {source} has no safetensors weights; attncard loads only "
                "safetensors: convert it (save_pretrained writes safetensors by default)"
            )
        actual = folder_revision(source)
        if actual != record.revision:
            raise IncompatibleRunError(
                f"{where}: the base model {source.name} here has weights {actual[: 7 + SHA_PREFIX]}… but the "
                f"run was trained on {record.revision[: 7 + SHA_PREFIX]}…; install the versions recorded in "
                f"{RESULTS_FILE} (environment.packages) or use the same model folder"
            )
    check_config_fits_base(config, _base_config(source, revision, record.model_id, where), where)
    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            os.fspath(source),
            config=config,
            revision=revision,
            attn_implementation="sdpa",
            dtype=torch.float32,
            use_safetensors=True,
            trust_remote_code=False,
        )
    except OSError as error:
        raise ModelLoadError(
            f"{where}: could not load the base model {record.model_id}"
            + (f" at revision {revision}" if revision else "")
            + f" ({first_line(error)}); connect to the Hub, or make it available in the local cache"
        ) from error
    return model


def _base_config(source: str | Path, revision: str | None, model_id: str, where: str) -> PretrainedConfig:
    """The base model's own config.json (no weights are read)."""
    try:
        return AutoConfig.from_pretrained(os.fspath(source), revision=revision, trust_remote_code=False)
    except OSError as error:
        raise ModelLoadError(
            f"{where}: could not read the config of the base model {model_id}"
            + (f" at revision {revision}" if revision else "")
            + f" ({first_line(error)}); connect to the Hub, or make it available in the local cache"
        ) from error


def check_config_fits_base(config: PretrainedConfig, base: PretrainedConfig, where: str) -> None:
    """Refuses a run's config.json that differs from its base model's config in anything publish does not set.

    Publish saves the base model's config with the task's labels (`id2label`, `label2id`, `problem_type`),
    the classification architecture, the dtype and, for a tokenizer without one, a pad token. Every other
    field, above all those that size a weight (`vocab_size`, `n_positions`, `max_position_embeddings`,
    `n_inner`, `intermediate_size`, `hidden_size`, layers, heads, …), must be the base model's: transformers
    allocates the model from the config before it compares a single weight with the file, so a field like
    `n_inner=4000000` would take gigabytes before its error. This check reads no weight.

    Args:
        config: the run's config.json, as `AutoConfig` reads it.
        base: the recorded base model's config.
        where: the run, for messages.

    Raises:
        [`IncompatibleRunError`]: one line naming the first differing field and both values.

    Example:
        >>> from transformers import GPT2Config
        >>> check_config_fits_base(GPT2Config(n_inner=4000000), GPT2Config(), "run")
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.IncompatibleRunError: run: config.json sets n_inner to 4000000, but
        ...
    """
    run_fields, base_fields = config.to_dict(), base.to_dict()
    for name in sorted(set(run_fields) | set(base_fields)):
        value, expected = run_fields.get(name), base_fields.get(name)
        if name in PUBLISH_SET_CONFIG_FIELDS or value == expected:
            continue
        vocabulary = base_fields.get("vocab_size")
        if (  # a pad token publish gave a tokenizer without one: any id of the base vocabulary
            name == "pad_token_id"
            and expected is None
            and type(value) is int
            and type(vocabulary) is int
            and 0 <= value < vocabulary
        ):
            continue
        raise IncompatibleRunError(
            f"{where}: {CONFIG_FILE} sets {name} to {_shown_value(value)}, but the base model's config has "
            f"{_shown_value(expected)}; publish keeps every field of the base model's config but the labels, "
            "architecture, dtype and pad token, so the file was edited: do not use this checkpoint (nothing "
            "was loaded)"
        )


def _shown_value(value: object) -> str:
    """A config value for a one-line message: its repr, cut at 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


__all__ = ["PUBLISH_SET_CONFIG_FIELDS", "check_config_fits_base", "load_base_model"]
