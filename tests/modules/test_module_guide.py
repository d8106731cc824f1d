"""The worked example of the module guide (docs/modules.md) works as the guide shows it.

The guide's four blocks titled with a file name are written out as those files, `pip install`ed like any
package, and found by attncard through their entry point; the module then keeps the contract (the registry's
and `attncard.testing`'s), computes its N×N form, records its step of the tensor trace and counts its FLOPs
by its formula.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attncard.modules import contract_problems, get_module, module_provenance
from attncard.modules.checks import untraced_attention_warning
from attncard.modules.trace import PROJECTION_STAGES, record_trace
from attncard.pipeline.run.scaling import attention_flops
from attncard.testing import ModuleContract
from conftest import PIP_INSTALL, REPO_ROOT, plugin_installed
from tiny_models import ENCODERS, FAMILIES, TEXTS, load_with_padded_batch

GUIDE = REPO_ROOT / "docs" / "modules.md"
PACKAGE, IMPORT, NAME = "attncard-linear-elu", "attncard_linear_elu", "linear_elu"
FILES = ("pyproject.toml", f"{IMPORT}/__init__.py", f"{IMPORT}/attention.py", f"{IMPORT}/spec.md")
# A fence with a file name: ```python title="attncard_linear_elu/attention.py"
TITLED_BLOCK = re.compile(r'^```\w+ title="([^"]+)"\n(.*?)^```$', re.MULTILINE | re.DOTALL)


def guide_files() -> dict[str, str]:
    """The guide's blocks titled with a file name: file name -> text."""
    return dict(TITLED_BLOCK.findall(GUIDE.read_text(encoding="utf-8")))


def test_the_guide_shows_the_whole_package():
    assert sorted(guide_files()) == sorted(FILES)


@pytest.fixture(scope="module")
def guide_site(tmp_path_factory) -> Path:
    """The guide's package, written from its blocks and `pip install`ed into a folder of its own."""
    root = tmp_path_factory.mktemp("guide")
    for name, text in guide_files().items():
        (root / "source" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "source" / name).write_text(text, encoding="utf-8")
    site = root / "site"
    subprocess.run(
        [*PIP_INSTALL, "--target", str(site), str(root / "source")], check=True, capture_output=True
    )
    return site


@pytest.fixture
def guide_module(guide_site):
    """The guide's module, found through its entry point with the package installed for the test."""
    with plugin_installed(guide_site, IMPORT):
        yield get_module(NAME)


def test_the_module_keeps_the_contract_and_comes_from_its_package(guide_module, guide_site):
    assert contract_problems(guide_module) == []
    assert guide_module.folder == guide_site / IMPORT
    provenance = module_provenance(NAME)
    assert (provenance.package, provenance.version) == (PACKAGE, "0.1.0")
    assert [name for name, _, _ in guide_module.config_fields()] == ["eps"]


def _dense_form(query, key, value, padding, causal: bool, eps: float) -> torch.Tensor:
    """The same attention from N×N weights φ(q_i)·φ(k_j), written out: (B, H, N, D)."""
    weights = (F.elu(query) + 1) @ (F.elu(key) + 1).transpose(-1, -2)
    length = query.shape[-2]
    allowed = padding[:, None, None, :]
    if causal:
        allowed = allowed & torch.ones(length, length, dtype=torch.bool).tril()
    weights = weights * allowed
    return (weights @ value) / (weights.sum(-1, keepdim=True) + eps)


@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "decoder"])
def test_the_function_is_its_n_by_n_form(guide_module, causal: bool):
    """Grouped-query attention (2 query heads per key/value head), row 1 padded after 5 of 9 tokens."""
    attention = importlib.import_module(f"{IMPORT}.attention")
    torch.manual_seed(0)
    batch, heads, kv_heads, length, dim = 2, 4, 2, 9, 8
    query = torch.randn(batch, heads, length, dim)
    key, value = torch.randn(batch, kv_heads, length, dim), torch.randn(batch, kv_heads, length, dim)
    padding = torch.ones(batch, length, dtype=torch.bool)
    padding[1, 5:] = False
    mask = padding[:, None, None, :].expand(batch, 1, length, length)  # as transformers' sdpa_mask gives it
    if causal:
        mask = mask & torch.ones(length, length, dtype=torch.bool).tril()
    layer = torch.nn.Module()
    layer.is_causal = causal
    config = importlib.import_module(IMPORT).LinearEluConfig(eps=1e-6)  # as attncard gives it to every call
    output, weights = attention.linear_elu_attention(
        layer, query, key, value, mask, scaling=0.3, dropout=0.0, config=config
    )
    assert weights is None and output.shape == (batch, length, heads, dim)
    expected = _dense_form(
        query, key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1), padding, causal, 1e-6
    ).transpose(1, 2)
    torch.testing.assert_close(output[0], expected[0])
    torch.testing.assert_close(output[1, :5], expected[1, :5])
    assert torch.isfinite(output).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_module_traces_its_step_and_counts_its_flops_in_every_family(
    guide_module, tiny_model_dir, family
):
    """Installed on a tiny model: the attention function's step is in the trace, as the guide shows it,
    publish's check finds it, and the FLOPs follow the guide's formula."""
    loaded, batch = load_with_padded_batch(tiny_model_dir(family))
    guide_module.apply(loaded.model, guide_module.config_class())
    assert loaded.model.config._attn_implementation == f"attncard_{NAME}"
    steps = record_trace(loaded.model, batch)
    attention = [step for step in steps if step.stage not in PROJECTION_STAGES]
    assert [step.stage for step in attention] == ["attention"]
    length = batch["input_ids"].shape[1]
    assert attention[0].outputs["output"].shape == [len(TEXTS), 4, length, 8]  # (B, H, N, D)
    assert ("prefix sums" in attention[0].op) == (family not in ENCODERS)
    assert untraced_attention_warning(guide_module, loaded.model, batch) is None

    estimate = attention_flops(loaded.model, guide_module, 64)  # L = 2, H = 4, d = 8
    assert estimate.module == 2 * 4 * (4 * 64 * 8 * 8 + 2 * 64 * 8)
    assert f"{NAME}: L·H·(4·N·d² + 2·N·d), L = 2, H = 4, d = 8" in estimate.formula


class TestTheGuideModuleKeepsTheModuleContract(ModuleContract):
    """The module contract, run as the guide's "Testing a module" tells an author to run it: padded rows,
    causal and grouped-query attention, training and reloading, the trace. Linear attention equals no
    softmax attention, so the module claims no dense configuration."""

    module = NAME
    dense_config = None

    @pytest.fixture(autouse=True)
    def package_installed(self, guide_site: Path) -> Iterator[None]:
        with plugin_installed(guide_site, IMPORT):
            yield


def test_the_guide_says_what_the_card_may_print():
    """The guide's table of what a module's texts may hold names every word the card's lint refuses (read from
    the lint's own rules), and its examples are refused and allowed as it says."""
    from attncard.pipeline.record import placeholders as lint  # the lint's own rules

    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("### What the card may print", 1)[1].split("\n## ", 1)[0]
    for word in (*lint.MARKER_WORDS, *lint.UPPERCASE_MARKERS, *lint.VALUE_WORDS):
        assert f"`{word}`" in section, word
    rows = {
        cells[0]: cells[1:]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| In ")
        for cells in [[cell.strip() for cell in line.strip("|").split(" | ")]]
    }
    spans = re.compile(r"`([^`]+)`")
    refused, allowed = rows["config help"]
    assert all(lint.line_placeholders(example) for example in spans.findall(refused))
    assert not any(lint.line_placeholders(example) for example in spans.findall(allowed))
    assert not any(lint.line_placeholders(example) for example in spans.findall(rows["every text"][1]))
    assert lint.line_placeholders("None") and not lint.line_placeholders("if x is None", fence="python")
