"""The checks publish runs on a module before training (modules/checks.py): the tensor trace without an
attention row, a package that no index lists at its installed version, and what the card's lint would refuse
in the module's texts (`card_text_problems`, `traced_text_problems`), refused before training.

The index checks run the real `pip index versions`, pointed (`PIP_INDEX_URL`, no configuration file, no
find-links) at a simple index written into a folder, or at a loopback port where nothing listens.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from pathlib import Path

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from attncard.modules import (
    BUILTIN_MODULES,
    AttentionModule,
    Measurement,
    ModuleProvenance,
    Paper,
    contract_problems,
    get_module,
)
from attncard.modules import checks as checks_module
from attncard.modules.base import dense_flops, install_attention
from attncard.modules.checks import (
    indexed_versions,
    package_index_warning,
    traced_text_problems,
    untraced_attention_warning,
)
from attncard.pipeline.checks.lint import card_text_problems
from attncard.pipeline.publish import publish
from attncard.pipeline.publish.publish import PublishOptions, run_publish
from attncard.pipeline.record.errors import AttncardError
from attncard.pipeline.record.results import TrainConfig
from tiny_models import load_with_padded_batch

PACKAGE = "attncard-linear-elu"
INSTALL = f'pip install "{PACKAGE}==0.1.0"'


def untraced_module():
    """`none` with transformers' sdpa function, which records no step of the trace."""

    def apply(model, config):
        install_attention(model, "untraced", sdpa_attention_forward)
        return model

    return dataclasses.replace(get_module("none"), name="untraced", apply=apply)


# ------------------------------------------------------------------------------------------------------------
# The tensor trace


@pytest.mark.parametrize("family", ["bert", "gpt2"])
def test_a_function_that_records_no_step_is_warned_about(tiny_model_dir, family):
    loaded, batch = load_with_padded_batch(tiny_model_dir(family))
    module = untraced_module()
    module.apply(loaded.model, module.config_class())
    warning = untraced_attention_warning(module, loaded.model, batch)
    assert warning is not None and "\n" not in warning
    assert warning.startswith("the attention function of the module 'untraced' records no step")
    projections = "qkv projection (fused)" if family == "gpt2" else "q projection, k projection, v projection"
    assert f"recorded {projections}, output projection)" in warning
    assert "the card's tensor trace will show no attention row" in warning
    assert 'attncard.modules.trace.trace_step(module, "attention"' in warning
    assert str(module.folder / "attention.py") in warning


@pytest.mark.parametrize("name", sorted(BUILTIN_MODULES))
def test_every_built_in_module_records_its_attention(tiny_model_dir, name):
    for family in ("bert", "llama"):
        loaded, batch = load_with_padded_batch(tiny_model_dir(family))
        module = get_module(name)
        module.apply(loaded.model, module.config_class())
        assert untraced_attention_warning(module, loaded.model, batch) is None, (name, family)


def test_the_check_leaves_training_as_it_was(tiny_model_dir):
    """In training mode, with dropout and a module that counts its training passes: after the check the
    random state, every training flag and the count are as before."""
    loaded, batch = load_with_padded_batch(tiny_model_dir("gpt2"))  # dropout 0.1 in attention and MLPs
    module = get_module("adaptive_sparse")
    module.apply(loaded.model, module.config_class())
    loaded.model.train()
    loaded.model.score.eval()  # one submodule in another mode: restored as it was, not set like the rest
    modes = {name: submodule.training for name, submodule in loaded.model.named_modules()}
    counts = {name: buffer.clone() for name, buffer in loaded.model.named_buffers() if name.endswith("steps")}
    assert counts
    torch.manual_seed(0)
    expected = torch.rand(4)
    torch.manual_seed(0)
    assert untraced_attention_warning(module, loaded.model, batch) is None
    assert torch.equal(torch.rand(4), expected)
    assert {name: submodule.training for name, submodule in loaded.model.named_modules()} == modes
    for name, count in counts.items():
        assert torch.equal(loaded.model.get_buffer(name), count), name


def test_a_forward_pass_that_fails_is_reported_not_raised(tiny_model_dir):
    loaded, batch = load_with_padded_batch(tiny_model_dir("bert"))

    def broken(module, query, key, value, attention_mask, **kwargs):
        raise RuntimeError("this kernel runs on CUDA only\nmore detail")

    install_attention(loaded.model, "broken", broken)
    module = dataclasses.replace(get_module("none"), name="broken")
    warning = untraced_attention_warning(module, loaded.model, batch)
    assert warning == (
        "the tensor trace of the module 'broken' could not be recorded before training (RuntimeError: this "
        "kernel runs on CUDA only); whether the card's trace shows an attention row is known after the run"
    )


# ------------------------------------------------------------------------------------------------------------
# The package index


def write_simple_index(root: Path, files: dict[str, list[str]]) -> Path:
    """A PEP 503 simple index in `root`: per project, a page linking its (empty) files."""
    for project, names in files.items():
        folder = root / project
        folder.mkdir(parents=True)
        links = "".join(f'<a href="{name}">{name}</a>\n' for name in names)
        (folder / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")
        for name in names:
            (folder / name).touch()
    return root


def point_pip_at(monkeypatch: pytest.MonkeyPatch, index_url: str) -> None:
    """pip in subprocesses reads `index_url` only: no configuration file, no find-links, no extra index."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", index_url)
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)


@pytest.fixture
def index(tmp_path, monkeypatch) -> Path:
    """pip pointed at a simple index holding pip 26.0 and attncard-linear-elu 0.2.0 and 0.3.0rc1."""
    root = write_simple_index(
        tmp_path / "simple",
        {
            "pip": ["pip-26.0-py3-none-any.whl"],
            PACKAGE: ["attncard_linear_elu-0.2.0-py3-none-any.whl", "attncard_linear_elu-0.3.0rc1.tar.gz"],
        },
    )
    point_pip_at(monkeypatch, root.as_uri())
    return root


def provenance(version: str, package: str = PACKAGE) -> ModuleProvenance:
    return ModuleProvenance(package, version, "0" * 64)


@pytest.mark.parametrize("version", ["0.2.0", "0.2", "0.3.0rc1"])
def test_a_listed_version_is_not_warned_about(index, version):
    assert package_index_warning(provenance(version)) is None


def test_a_version_the_index_does_not_list_is_warned_about(index):
    assert indexed_versions(PACKAGE) == (["0.3.0rc1", "0.2.0"], "")  # pre-releases too, newest first
    warning = package_index_warning(provenance("0.1.0"))
    assert warning == (
        f"{PACKAGE} 0.1.0 is on no package index pip reaches here (`pip index versions {PACKAGE}` lists "
        f"only 0.3.0rc1, 0.2.0): the card tells readers to `{INSTALL}`, which will fail for them; upload "
        f"{PACKAGE} 0.1.0 to PyPI (or the index your readers use) before you push the card, or give readers "
        "the URL to install it from"
    )


def test_a_package_the_index_lacks_is_warned_about(index):
    assert indexed_versions("attncard-sliding-window") == ([], "finds no version of it")
    warning = package_index_warning(provenance("0.1.0", "attncard-sliding-window"))
    assert warning is not None and "\n" not in warning
    assert warning.startswith(
        "attncard-sliding-window 0.1.0 is on no package index pip reaches here (`pip index versions "
        "attncard-sliding-window` finds no version of it): the card tells readers to "
        '`pip install "attncard-sliding-window==0.1.0"`, which will fail for them; upload'
    )


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_index_skips_the_check_in_one_line(monkeypatch):
    point_pip_at(monkeypatch, f"http://127.0.0.1:{closed_port()}/simple")
    versions, why = indexed_versions(PACKAGE)
    assert versions is None
    assert why == f"pip finds neither {PACKAGE} nor pip itself on its package index (offline?)"
    assert package_index_warning(provenance("0.1.0")) == (
        f"could not check that readers can `{INSTALL}` as the card tells them: {why}; run `pip index "
        f"versions {PACKAGE}` where the package index can be reached"
    )


def test_an_index_slower_than_the_timeout_skips_the_check(index):
    warning = package_index_warning(provenance("0.1.0"), timeout=0.01)
    assert warning.startswith(f"could not check that readers can `{INSTALL}` as the card tells them: ")
    assert f"`pip index versions {PACKAGE}` took over 0.01 s" in warning


def test_a_built_in_module_asks_no_index(monkeypatch):
    def no_subprocess(*args, **kwargs):
        raise AssertionError("pip was run for a built-in module")

    monkeypatch.setattr(checks_module.subprocess, "run", no_subprocess)
    assert package_index_warning(ModuleProvenance("attncard", "0.1.0", "0" * 64)) is None
    assert package_index_warning(provenance("unknown")) is None


# ------------------------------------------------------------------------------------------------------------
# In publish: both said before training


class TrainingStarted(Exception):
    pass


def warnings_before_training(
    package: ModuleProvenance, model: Path, data_dir: Path, output: Path, monkeypatch, caplog
) -> list[str]:
    """The warnings publish logs for `untraced_module()` of `package` before it trains (training stops it)."""
    module = untraced_module()
    monkeypatch.setattr(publish, "get_module", lambda name: module)
    monkeypatch.setattr(publish, "module_provenance", lambda name: package)

    def train(*args, **kwargs):
        raise TrainingStarted

    monkeypatch.setattr(publish, "train", train)
    options = PublishOptions(
        model=str(model),
        module="untraced",
        task="sst2",
        train=TrainConfig(steps=2, batch_size=8),
        data_dir=data_dir,
        output=output,
        repo_id=None,
        push=False,
    )
    with (
        caplog.at_level(logging.INFO, logger="attncard.pipeline.publish.publish"),
        pytest.raises(TrainingStarted),
    ):
        run_publish(options)
    return [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]


def test_publish_warns_before_training(index, tiny_model_dir, small_glue, tmp_path, monkeypatch, caplog):
    warnings = warnings_before_training(
        provenance("0.1.0"), tiny_model_dir("bert"), small_glue, tmp_path / "runs", monkeypatch, caplog
    )
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith(f"{PACKAGE} 0.1.0 is on no package index pip reaches here")
    assert warnings[1].startswith("the attention function of the module 'untraced' records no step")
    assert not (tmp_path / "runs").exists()


def test_publish_does_not_ask_an_index_for_a_package_kept_in_attncards_repository(
    tiny_model_dir, small_glue, tmp_path, monkeypatch, caplog
):
    """The card installs the example plugin from attncard's repository (#subdirectory=), not from an index:
    no warning that an index lacks it, and no `pip index` asked."""
    monkeypatch.setattr(publish, "package_index_warning", lambda _: pytest.fail("an index was asked"))
    kept = provenance("0.1.0", "attncard-sliding-window")
    warnings = warnings_before_training(
        kept, tiny_model_dir("bert"), small_glue, tmp_path / "runs", monkeypatch, caplog
    )
    assert len(warnings) == 1 and warnings[0].startswith("the attention function of the module 'untraced'")


# ------------------------------------------------------------------------------------------------------------
# The card's texts: what the card's lint would refuse after training is refused before it

SIGMOID_SOURCE = '''"""Sigmoid attention: each weight sigmoid(q·kᵀ / temperature), rows not normalised."""

import torch
from transformers.integrations.sdpa_attention import repeat_kv

from attncard.modules.base import padding_and_causality
from attncard.modules.trace import trace_step


def sigmoid_attention(module, query, key, value, attention_mask, *, scaling=None, dropout=0.0, **kwargs):
    key, value = (repeat_kv(t, query.shape[1] // key.shape[1]) for t in (key, value))
    key_padding_mask, causal = padding_and_causality(module, query, attention_mask)
    temperature = module.attncard_temperature
    scores = query @ key.transpose(-1, -2) * (scaling if temperature is None else 1 / temperature)
    weights = torch.sigmoid(scores - torch.log(torch.tensor(float(query.shape[-2]))))
    if key_padding_mask is not None:
        weights = weights * key_padding_mask[:, None, None, :]
    if causal:
        weights = weights.tril()
    output = weights @ value
    trace_step(module, "attention", OPERATION, {"query": query, "key": key}, {"output": output})
    return output.transpose(1, 2).contiguous(), None
'''
SIGMOID_SPEC = (
    "### `sigmoid`: softmax replaced by sigmoid(q·kᵀ / temperature − log N)\n\nRows do not sum to 1.\n"
)


@dataclasses.dataclass
class SigmoidConfig:
    """The issue's sigmoid module: a temperature whose default None means "the layer's own scaling"."""

    temperature: float | None = dataclasses.field(
        default=None, metadata={"help": "divides q·kᵀ; not set: the layer's own scaling"}
    )


def sigmoid_module(
    folder: Path,
    config_class: type = SigmoidConfig,
    spec: str = SIGMOID_SPEC,
    operation: str = '"sigmoid(q·kᵀ / temperature − log N)"',
    **fields,
):
    """A sigmoid-attention module written out as a package folder would hold it: attention.py (its trace
    operation the Python expression `operation`, over `temperature`), spec.md, and `apply` giving every layer
    its temperature. Keyword arguments replace fields of the `AttentionModule`."""
    folder.mkdir(parents=True, exist_ok=True)
    source = SIGMOID_SOURCE.replace("OPERATION", operation)
    (folder / "attention.py").write_text(source, encoding="utf-8")
    (folder / "spec.md").write_text(spec, encoding="utf-8")
    namespace: dict = {}
    exec(compile(source, str(folder / "attention.py"), "exec"), namespace)
    function = namespace["sigmoid_attention"]

    def apply(model, config):
        from attncard.modules.base import attention_layers

        for layer in attention_layers(model):
            layer.module.attncard_temperature = config.temperature
        install_attention(model, "sigmoid", function)
        return model

    module = AttentionModule("sigmoid", config_class, function, apply=apply, folder=folder)
    return dataclasses.replace(module, **fields)


def config_with(name: str, default: object = None, help_text: str = "what it does", factory=None) -> type:
    """A config class of one field `name`, its default `default` (or `factory()`) and help `help_text`."""
    default_kind = {"default_factory": factory} if factory is not None else {"default": default}
    return dataclasses.make_dataclass(
        "Config", [(name, object, dataclasses.field(**default_kind, metadata={"help": help_text}))]
    )


def test_a_default_of_none_is_shown_as_not_set_and_passes(tmp_path):
    """svd_lowrank's `energy` defaults to None too: the card shows "not set", which the lint passes."""
    module = sigmoid_module(tmp_path / "sigmoid")
    assert contract_problems(module) == [] and card_text_problems(module) == []


# (what the module holds, the one problem card_text_problems must report, as its start)
TEXT_PROBLEMS = {
    "help saying None": (
        dict(config_class=config_with("temperature", None, "divides q·kᵀ; None: the layer's own scaling")),
        "the help of the config field 'temperature' holds placeholder 'None', which the card's lint refuses "
        "in the configuration table; say it in words (`not set`, `unset`, `the layer's own`)",
    ),
    "None inside a default": (
        dict(config_class=config_with("temperatures", factory=lambda: (1.0, None))),
        "the config field 'temperatures' defaults to (1.0, None), which the card's configuration table shows "
        "as '[1.0, None]': placeholder 'None', which the card's lint refuses; give a default without it (a "
        "default of None itself is shown as 'not set')",
    ),
    "a marker word as a default": (
        dict(config_class=config_with("schedule", "TBD")),
        "the config field 'schedule' defaults to 'TBD', which the card's configuration table shows as 'TBD': "
        "placeholder 'TBD'",
    ),
    "a NaN default": (
        dict(config_class=config_with("temperature", float("nan"))),
        "the config field 'temperature' defaults to nan, which results.json cannot hold (strict JSON); give "
        "a number, a string, a bool, None, or a list or mapping of them",
    ),
    "a default results.json cannot hold": (
        dict(config_class=config_with("cache", Path("cache"))),
        "the config field 'cache' defaults to PosixPath('cache'), which results.json cannot hold",
    ),
    "a field named nan": (
        dict(config_class=config_with("nan", 0.5)),
        "the config field named 'nan' is placeholder 'nan' in the card's configuration table, which the "
        "card's lint refuses; rename the field",
    ),
    "a marker in spec.md": (
        dict(spec=SIGMOID_SPEC + "\nTODO: the causal case.\n"),
        "its spec.md, line 5: placeholder 'TODO'; the card prints spec.md as it is, so write it out (no "
        "placeholder, no link to a file, figures in prose)",
    ),
    "None in spec.md prose": (
        dict(spec=SIGMOID_SPEC + "\nA temperature of None uses the layer's scaling.\n"),
        "its spec.md, line 5: placeholder 'None'",
    ),
    "Jinja in spec.md": (
        dict(spec=SIGMOID_SPEC + "\nThe weight is `{{ sigmoid }}`.\n"),
        "its spec.md, line 5: unrendered Jinja '{{'",
    ),
    "a link to a file in spec.md": (
        dict(spec=SIGMOID_SPEC + "\nTimings: [bench](../bench/sigmoid.md).\n"),
        "its spec.md, line 5: link to the file '../bench/sigmoid.md', which is not in the run folder; link a "
        "URL instead",
    ),
    "a figure in a spec.md table": (
        dict(spec=SIGMOID_SPEC + "\n| Case | Passes |\n|---|---|\n| decoder | 2 |\n"),
        "its spec.md, line 7: figure 2 in table row 'decoder', which the card's lint must find in "
        "results.json",
    ),
    "a marker in the paper's citation": (
        dict(paper=Paper("Ramapuram et al., Theory of sigmoid attention, N/A")),
        "its paper's citation holds placeholder 'N/A', which the card's lint refuses; write the citation out",
    ),
    "None in the BibTeX": (
        dict(paper=Paper("Ramapuram et al., 2024", "@article{sigmoid,\n  year = {None}\n}")),
        "its paper's BibTeX, line 2: placeholder 'None', which the card's lint refuses; complete the entry",
    ),
}


@pytest.mark.parametrize("change", TEXT_PROBLEMS, ids=list(TEXT_PROBLEMS))
def test_card_text_problems_find_what_the_card_lint_refuses(tmp_path, change):
    fields, expected = TEXT_PROBLEMS[change]
    module = sigmoid_module(tmp_path / "sigmoid", **fields)
    assert contract_problems(module) == []  # the registry's contract holds: the texts are the card's lint's
    problems = card_text_problems(module)
    assert len(problems) == 1 and problems[0].startswith(expected), problems
    assert "\n" not in problems[0]


def test_a_marker_word_in_attention_py_is_refused_but_python_values_are_not(tmp_path):
    """attention.py is printed in a Python block: `is None` is code there, a TODO is not."""
    module = sigmoid_module(tmp_path / "sigmoid")
    source = module.folder / "attention.py"
    assert "temperature is None" in source.read_text() and card_text_problems(module) == []
    source.write_text(source.read_text() + "# TODO: a fused kernel\n# {% raw %}\n", encoding="utf-8")
    lines = len(source.read_text().splitlines())
    assert card_text_problems(module) == [
        f"its attention.py, line {lines - 1}: placeholder 'TODO', which the card's lint refuses in the "
        "Python block that prints the file; remove it (None and nan are allowed there)",
        f"its attention.py, line {lines}: unrendered Jinja '{{%', which the card's lint refuses in the "
        "Python block that prints the file; remove it (None and nan are allowed there)",
    ]


def test_every_built_in_module_has_texts_the_card_lint_passes():
    for name in BUILTIN_MODULES:
        assert card_text_problems(get_module(name)) == [], name


def test_the_texts_a_module_writes_as_it_runs_are_checked(tiny_model_dir, tmp_path):
    """A trace operation and a FLOPs formula that print a config value of None."""
    loaded, batch = load_with_padded_batch(tiny_model_dir("gpt2"))

    def flops(model, n):
        return dense_flops(model, n)[0], f"the dense count, temperature {None}"

    module = sigmoid_module(
        tmp_path / "sigmoid",
        operation='f"sigmoid(q·kᵀ / {temperature})"',
        measurement=Measurement(flops=flops),
    )
    assert card_text_problems(module) == []  # nothing of it is wrong before it runs
    module.apply(loaded.model, module.config_class())
    assert traced_text_problems(module, loaded.model, batch) == [
        "the operation 'sigmoid(q·kᵀ / None)' of the trace step 'attention' holds placeholder 'None', which "
        "the card's lint refuses in the tensor trace; write it without (a config value of None prints as "
        f"None: say what it stands for; in {module.folder / 'attention.py'})",
        "the FLOPs formula 'the dense count, temperature None' holds placeholder 'None', which the card's "
        "lint refuses; write the formula without it (a config value of None prints as None: say what it "
        "stands for)",
    ]
    clean = sigmoid_module(tmp_path / "clean")
    clean.apply(loaded.model, clean.config_class())
    assert traced_text_problems(clean, loaded.model, batch) == []


def write_plugin(site: Path, module_file: str, help_text: str) -> Path:
    """The docs' sigmoid module as an installed package `attncard-sigmoid` 1.0 in `site` (its metadata with
    the entry point, and the package), its config's help `help_text`."""
    info = site / "attncard_sigmoid-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: attncard-sigmoid\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[attncard.modules]\nsigmoid = attncard_sigmoid:MODULE\n")
    package = site / "attncard_sigmoid"
    package.mkdir()
    source = SIGMOID_SOURCE.replace("OPERATION", '"sigmoid(q·kᵀ / temperature − log N)"')
    (package / "attention.py").write_text(source, encoding="utf-8")
    (package / "spec.md").write_text(SIGMOID_SPEC, encoding="utf-8")
    (package / "__init__.py").write_text(module_file.replace("HELP", help_text), encoding="utf-8")
    return site


PLUGIN_INIT = """from dataclasses import dataclass, field

from attncard.modules.base import AttentionModule, attention_layers, install_attention

from .attention import sigmoid_attention


@dataclass
class SigmoidConfig:
    temperature: float | None = field(default=None, metadata={"help": "HELP"})


def apply(model, config):
    for layer in attention_layers(model):
        layer.module.attncard_temperature = config.temperature
    install_attention(model, "sigmoid", sigmoid_attention)
    return model


MODULE = AttentionModule("sigmoid", SigmoidConfig, sigmoid_attention, apply=apply)
"""


def test_publish_refuses_the_plugin_before_training(
    tiny_model_dir, small_glue, tmp_path, monkeypatch, capsys
):
    """The issue's run: a plugin whose config help says None trained, then its card failed lint at the very
    end. Now: exit 2, one line, nothing trained, no folder."""
    from attncard.pipeline.cli import publish_main
    from conftest import plugin_installed

    site = write_plugin(tmp_path / "site", PLUGIN_INIT, "divides q·kᵀ; None: the layer's own scaling")

    def train(*args, **kwargs):
        raise TrainingStarted

    monkeypatch.setattr(publish, "train", train)
    argv = [
        *("--model", str(tiny_model_dir("gpt2")), "--module", "sigmoid", "--task", "sst2"),
        *(
            "--steps",
            "2",
            "--batch-size",
            "8",
            "--data-dir",
            str(small_glue),
            "--output",
            str(tmp_path / "runs"),
        ),
    ]
    capsys.readouterr()
    with plugin_installed(site, "attncard_sigmoid"):
        assert publish_main(argv) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        "error: the attention module 'sigmoid' of the package attncard-sigmoid 1.0: the help of the config "
        "field 'temperature' holds placeholder 'None', which the card's lint refuses in the configuration "
        "table; say it in words (`not set`, `unset`, `the layer's own`); fix attncard-sigmoid, or uninstall "
        "it; nothing was trained or written"
    )
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_publish_refuses_a_trace_that_prints_none_before_training(
    tiny_model_dir, small_glue, tmp_path, monkeypatch
):
    module = sigmoid_module(tmp_path / "sigmoid", operation='f"sigmoid(q·kᵀ / {temperature})"')
    monkeypatch.setattr(publish, "get_module", lambda name: module)
    monkeypatch.setattr(
        publish, "module_provenance", lambda name: ModuleProvenance("attncard", "0.1.0", "0" * 64)
    )

    def train(*args, **kwargs):
        raise TrainingStarted

    monkeypatch.setattr(publish, "train", train)
    options = PublishOptions(
        model=str(tiny_model_dir("gpt2")),
        module="sigmoid",
        task="sst2",
        train=TrainConfig(steps=2, batch_size=8),
        data_dir=small_glue,
        output=tmp_path / "runs",
        repo_id=None,
        push=False,
    )
    with pytest.raises(AttncardError) as refused:
        run_publish(options)
    assert str(refused.value).startswith(
        "the module 'sigmoid': the operation 'sigmoid(q·kᵀ / None)' of the trace step 'attention' holds "
        "placeholder 'None', which the card's lint refuses in the tensor trace"
    )
    assert str(refused.value).endswith("; nothing was trained or written")
    assert not (tmp_path / "runs").exists()


def test_publish_refuses_a_built_in_module_whose_texts_the_lint_refuses(
    tiny_model_dir, small_glue, tmp_path, monkeypatch
):
    """A built-in module is not checked as it loads (no entry point): publish checks it, before the data."""
    module = dataclasses.replace(get_module("none"), config_class=config_with("window", "TBD"))
    monkeypatch.setattr(publish, "get_module", lambda name: module)

    def load_task(*args, **kwargs):
        raise TrainingStarted

    monkeypatch.setattr(publish, "load_task", load_task)
    options = PublishOptions(
        model=str(tiny_model_dir("gpt2")),
        module="none",
        task="sst2",
        train=TrainConfig(steps=2, batch_size=8),
        data_dir=small_glue,
        output=tmp_path / "runs",
        repo_id=None,
        push=False,
    )
    with pytest.raises(
        AttncardError, match=r"^the module 'none': the config field 'window' defaults to 'TBD'"
    ):
        run_publish(options)
