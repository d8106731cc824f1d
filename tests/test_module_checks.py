"""The checks publish runs on a module before training (modules/checks.py): the tensor trace without an
attention row, and a package that no index lists at its installed version.

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

from attncard.modules import BUILTIN_MODULES, ModuleProvenance, get_module
from attncard.modules import checks as checks_module
from attncard.modules.base import install_attention
from attncard.modules.checks import indexed_versions, package_index_warning, untraced_attention_warning
from attncard.pipeline import publish
from attncard.pipeline.publish import PublishOptions, run_publish
from attncard.pipeline.results import TrainConfig
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


def test_publish_warns_before_training(index, tiny_model_dir, small_glue, tmp_path, monkeypatch, caplog):
    module = untraced_module()
    monkeypatch.setattr(publish, "get_module", lambda name: module)
    monkeypatch.setattr(publish, "module_provenance", lambda name: provenance("0.1.0"))

    def train(*args, **kwargs):
        raise TrainingStarted

    monkeypatch.setattr(publish, "train", train)
    options = PublishOptions(
        model=str(tiny_model_dir("bert")),
        module="untraced",
        task="sst2",
        train=TrainConfig(steps=2, batch_size=8),
        data_dir=small_glue,
        output=tmp_path / "runs",
        repo_id=None,
        push=False,
    )
    with caplog.at_level(logging.INFO, logger="attncard.pipeline.publish"), pytest.raises(TrainingStarted):
        run_publish(options)
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith(f"{PACKAGE} 0.1.0 is on no package index pip reaches here")
    assert warnings[1].startswith("the attention function of the module 'untraced' records no step")
    assert not (tmp_path / "runs").exists()
