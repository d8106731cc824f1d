from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from huggingface_hub import constants

from attncard.pipeline.record.errors import ModelLoadError, UnknownNameError
from attncard.pipeline.run.models import (
    base_model_license,
    folder_revision,
    load_model,
    minilm_folder,
    resolve_model_name,
    tokenize,
)
from tiny_models import ENCODERS, FAMILIES

LABELS = ["negative", "positive"]
TEXTS = [
    "a gorgeous , witty , seductive movie .",
    "bleak .",
    "the story is bogus and its characters tissue-thin .",
]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_loads_from_a_local_folder(tiny_model_dir, family):
    torch.manual_seed(0)
    loaded = load_model(str(tiny_model_dir(family)), LABELS)
    assert loaded.family == family
    assert loaded.is_decoder == (family not in ENCODERS)
    assert loaded.model.config.id2label == {0: "negative", 1: "positive"}
    assert loaded.revision.startswith("sha256:")
    assert loaded.tokenizer.padding_side == "right"
    assert loaded.tokenizer.pad_token_id is not None
    assert loaded.model.config.pad_token_id == loaded.tokenizer.pad_token_id
    if loaded.is_decoder:  # our decoder tokenizer, like GPT-2's, has no pad token: EOS pads
        assert loaded.tokenizer.pad_token == loaded.tokenizer.eos_token


@pytest.mark.parametrize("family", FAMILIES)
def test_right_padding_does_not_change_logits(tiny_model_dir, family):
    """Each row of a right-padded batch gets the logits it gets alone: padding is masked and decoders pool
    the last real token."""
    torch.manual_seed(0)
    loaded = load_model(str(tiny_model_dir(family)), LABELS)
    model = loaded.model.eval()
    batch = tokenize(loaded.tokenizer, {"sentence": TEXTS}, ("sentence",), max_length=64)
    assert (batch["attention_mask"] == 0).any(), (
        "the batch must contain padding for this test to mean anything"
    )
    with torch.no_grad():
        padded = model(**batch).logits
        for row, text in enumerate(TEXTS):
            alone = model(**tokenize(loaded.tokenizer, {"sentence": [text]}, ("sentence",), 64)).logits
            torch.testing.assert_close(padded[row], alone[0], atol=1e-5, rtol=1e-5)


def test_minilm_loads_offline():
    torch.manual_seed(0)
    loaded = load_model("minilm", LABELS)
    assert loaded.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert loaded.family == "bert"
    assert loaded.license == "apache-2.0"
    assert loaded.model.config.hidden_size == 384
    assert loaded.model.config._attn_implementation == "sdpa"


def test_aliases_map_to_hub_ids():
    assert resolve_model_name("roberta")[:2] == ("FacebookAI/roberta-base", "FacebookAI/roberta-base")
    assert resolve_model_name("some-org/some-model")[0] == "some-org/some-model"


def test_unknown_alias_lists_valid_names():
    with pytest.raises(
        UnknownNameError, match="unknown model 'robrta'; valid models: minilm, bert, distilbert"
    ):
        resolve_model_name("robrta")


def test_hub_model_offline_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub read the variable at import: without this it still asks the Hub, through every retry.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(
        ModelLoadError, match=r"could not load model 'roberta' .*pass a local folder"
    ) as caught:
        load_model("roberta", LABELS)
    assert "\n" not in str(caught.value)


def test_a_local_folder_is_recorded_by_name_not_path(tiny_model_dir, tmp_path):
    """results.json, the card and adapter_config.json are published: a folder is named, never located."""
    folder = tmp_path / "models" / "tiny-gpt2"
    folder.mkdir(parents=True)
    for path in tiny_model_dir("gpt2").iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    torch.manual_seed(0)
    loaded = load_model(f"{folder}/", LABELS)
    assert (loaded.name, loaded.model_id) == ("tiny-gpt2", "tiny-gpt2")
    assert loaded.revision == folder_revision(folder)
    assert loaded.source == str(folder.resolve())  # kept for loading it again here, never recorded
    origins = {loaded.model.name_or_path, loaded.model.config._name_or_path, loaded.tokenizer.name_or_path}
    assert origins == {"tiny-gpt2"}


def test_minilm_records_its_hub_id_not_the_package_folder():
    source, model_id = resolve_model_name("minilm")
    license_name = base_model_license("minilm", source, model_id)[0]
    assert source == str(minilm_folder())
    assert (model_id, license_name) == ("sentence-transformers/all-MiniLM-L6-v2", "apache-2.0")


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_model_name_says_what_to_pass(name):
    with pytest.raises(ModelLoadError, match="the model name is empty; pass an alias \\(minilm, bert"):
        resolve_model_name(name)


@pytest.mark.parametrize(
    ("keep", "missing"),
    [({"config.json"}, "weights \\(\\*.safetensors or \\*.bin\\)"), ({"model.safetensors"}, "config.json")],
)
def test_a_folder_without_config_or_weights_is_refused_by_name(tiny_model_dir, tmp_path, keep, missing):
    for path in tiny_model_dir("bert").iterdir():
        if path.name in keep:
            (tmp_path / path.name).write_bytes(path.read_bytes())
    with pytest.raises(ModelLoadError, match=f"{tmp_path}: model folder without {missing}; pass a folder"):
        resolve_model_name(str(tmp_path))


@pytest.mark.parametrize(
    ("front_matter", "expected"),
    [
        ("license: apache-2.0\n", ("apache-2.0", "", "")),
        (
            "license: other\nlicense_name: my-licence-1.0\nlicense_link: https://example.org/licence\n",
            ("other", "my-licence-1.0", "https://example.org/licence"),
        ),
        # A local folder is no Hub repository: a file it links cannot be linked from the run.
        (
            "license: other\nlicense_name: my-licence-1.0\nlicense_link: LICENSE\n",
            ("other", "my-licence-1.0", ""),
        ),
        ("tags: [x]\n", ("other", "", "")),
        # A card is data: a value that is not a licence id or an https URL is not carried into the run.
        ("license: 'Apache 2.0 <script>'\n", ("other", "", "")),
        (
            "license: other\nlicense_name: '[x](javascript:1)'\nlicense_link: 'javascript:alert(1)'\n",
            ("other", "", ""),
        ),
        ("license: [mit]\n", ("other", "", "")),
    ],
)
def test_the_licence_is_read_from_the_base_models_card(tiny_model_dir, tmp_path, front_matter, expected):
    folder = Path(shutil.copytree(tiny_model_dir("gpt2"), tmp_path / "model"))
    (folder / "README.md").write_text(f"---\n{front_matter}---\n\n# a model\n", encoding="utf-8")
    assert base_model_license(str(folder), str(folder), folder.name) == expected
    loaded = load_model(str(folder), ["negative", "positive"])
    assert (loaded.license, loaded.license_name, loaded.license_link) == expected
