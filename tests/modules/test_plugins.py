"""Modules from other packages: the example plugin `examples/sliding_window`, installed as a user installs it
(`pip install`, not editable), is found through its entry point with no change to attncard; a tiny run of it
is published, pushed to a loopback Hub, loaded back and re-verified; where the plugin is not installed, or
has other source, loading the run is refused in one line that names the package to install.

The plugin is put on `sys.path` (in this process, with the registry rescanned) or on `PYTHONPATH` (in a
subprocess): importlib.metadata then sees its entry point as it sees any installed package's.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from huggingface_hub.utils import close_session
from torch import nn

from attncard.modules import (
    ModuleProvenance,
    contract_problems,
    get_module,
    module_names,
    module_provenance,
    rescan_modules,
    source_sha256,
)
from attncard.pipeline.checks.lint import lint_run_folder
from attncard.pipeline.cli import main, publish_main
from attncard.pipeline.record.errors import (
    IncompatibleRunError,
    ModuleNotInstalledError,
    ModulePluginError,
    UnknownModuleError,
)
from attncard.pipeline.record.results import Results, Status
from attncard.pipeline.run.scaling import attention_flops
from attncard.pipeline.verify.download import load_verified
from attncard.pipeline.verify.reverify import reverify
from conftest import (
    HUB_TOKEN,
    HUB_USER,
    PLUGIN_IMPORT,
    plugin_installed,
    point_client_at,
    quick_scaling,
    write_sst2_folder,
)
from hub_server import LoopbackHub
from tiny_models import load_with_padded_batch

# huggingface_hub 2.4.0 itself uploads LFS parts with httpx2's deprecated `data=<file>`.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

PACKAGE, VERSION = "attncard-sliding-window", "0.1.0"
# What a refusal tells the user to run: the example plugin is kept in attncard's repository, on no index, so
# it is installed from there at the commit the run records (render.module_install_lines).
INSTALL = f'pip install "{PACKAGE} @ git+https://github.com/attncard/attncard@'
INSTALL_FOLDER = '#subdirectory=examples/sliding_window"'

REPO = f"{HUB_USER}/tiny-gpt2-sliding_window-sst2"
RUN_NAME = "tiny-gpt2-sliding_window-sst2"
ATTNCARD = Path(sys.executable).with_name("attncard")


@pytest.fixture
def plugin(plugin_site: Path) -> Iterator[object]:
    """The plugin's package, imported with the plugin installed for the test."""
    with plugin_installed(plugin_site):
        yield importlib.import_module(PLUGIN_IMPORT)


def subprocess_env(**extra: str) -> dict[str, str]:
    """This environment without PYTHONPATH (no plugin), plus `extra`."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **extra}


# ------------------------------------------------------------------------------------------------------------
# The module itself


class _Layer(nn.Module):
    """What the attention function reads of a transformers attention module."""

    def __init__(self, causal: bool, groups: int):
        super().__init__()
        self.is_causal, self.num_key_value_groups = causal, groups


def _band_reference(query, key, value, padding, window: int, causal: bool) -> torch.Tensor:
    """Dense attention under an explicit band mask written out pair by pair: (B, H, N, D)."""
    length = query.shape[-2]
    band = torch.tensor(
        [[abs(i - j) <= window and (j <= i or not causal) for j in range(length)] for i in range(length)]
    )
    return F.scaled_dot_product_attention(query, key, value, attn_mask=band & padding[:, None, None, :])


@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "decoder"])
@pytest.mark.parametrize("window", [0, 1, 3, 5, 6, 11, 12, 100])
def test_the_window_is_dense_attention_under_a_band_mask(plugin, window: int, causal: bool):
    """Windows below N/2 take the band path, the others the dense one (N = 13); GQA with 2 query heads per
    key/value head; row 1 padded after 9 tokens. Real query rows must equal the explicit reference."""
    attention = importlib.import_module(f"{PLUGIN_IMPORT}.attention").sliding_window_attention
    torch.manual_seed(0)
    batch, heads, kv_heads, length, dim = 2, 4, 2, 13, 8
    query = torch.randn(batch, heads, length, dim)
    key, value = torch.randn(batch, kv_heads, length, dim), torch.randn(batch, kv_heads, length, dim)
    padding = torch.ones(batch, length, dtype=torch.bool)
    padding[1, 9:] = False
    mask = padding[:, None, None, :].expand(batch, 1, length, length)  # as transformers' sdpa_mask gives it
    if causal:
        mask = mask & torch.ones(length, length, dtype=torch.bool).tril()
    layer = _Layer(causal, heads // kv_heads)
    config = plugin.SlidingWindowConfig(window=window)  # as attncard gives it to every call
    output, weights = attention(layer, query, key, value, mask, scaling=dim**-0.5, dropout=0.0, config=config)
    assert weights is None and output.shape == (batch, length, heads, dim)
    expected = _band_reference(
        query, key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1), padding, window, causal
    ).transpose(1, 2)
    torch.testing.assert_close(output[0], expected[0])
    torch.testing.assert_close(output[1, :9], expected[1, :9])
    # A padding query with no real key in its window reads nothing: zeros, not NaN or a mean of padding.
    empty = [i for i in range(9, length) if i - window > 8]
    assert torch.isfinite(output).all() and (output[1, empty] == 0).all()


def test_the_flops_are_the_band(plugin, tiny_model_dir):
    """L = 2, H = 4, d = 8: the band 2·4·4·8·64·(2·w + 1) against dense 2·4·4·8·64²."""
    loaded, _ = load_with_padded_batch(tiny_model_dir("bert"))
    module = get_module("sliding_window")
    module.apply(loaded.model, module.config_class(window=5))
    estimate = attention_flops(loaded.model, module, 64)
    assert (estimate.dense, estimate.module) == (2 * 4 * 4 * 8 * 64 * 64, 2 * 4 * 4 * 8 * 64 * 11)
    assert "min(w, N − 1) = 5" in estimate.formula
    assert attention_flops(loaded.model, module, 8).ratio == 1.0  # a band of 11 is wider than N = 8


# ------------------------------------------------------------------------------------------------------------
# The registry


def test_the_registry_finds_the_plugin_through_its_entry_point(plugin_site):
    assert "sliding_window" not in module_names()
    with plugin_installed(plugin_site):
        assert "sliding_window" in module_names()
        module = get_module("sliding_window")
        assert contract_problems(module) == []
        provenance = module_provenance("sliding_window")
        assert provenance == ModuleProvenance(PACKAGE, VERSION, source_sha256(module))
        assert module.folder == plugin_site / PLUGIN_IMPORT
    assert "sliding_window" not in module_names()
    with pytest.raises(UnknownModuleError, match="unknown module 'sliding_window'"):
        get_module("sliding_window")
    assert module_provenance("none") == ModuleProvenance(
        "attncard", metadata.version("attncard"), source_sha256(get_module("none"))
    )


def _fake_plugin(site: Path, name: str, target: str, package: str = "attncard-broken") -> Path:
    """Writes the metadata of an installed package registering `name = target` in the entry-point group,
    and a `broken_plugin` package whose import fails."""
    info = site / f"{package.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[attncard.modules]\n{name} = {target}\n")
    (site / "broken_plugin.py").write_text("raise ImportError('a dependency is missing')\n")
    return site


def test_a_broken_plugin_is_refused_only_when_asked_for_and_a_clash_is_skipped(tmp_path, caplog, capsys):
    broken = _fake_plugin(tmp_path / "broken", "broken_module", "broken_plugin:MODULE")
    clash = _fake_plugin(tmp_path / "clash", "none", "broken_plugin:MODULE", package="attncard-clash")
    not_a_module = _fake_plugin(tmp_path / "str", "text_module", "os:sep", package="attncard-text")
    twins = [_fake_plugin(tmp_path / t, "twin", "os:sep", package=f"attncard-{t}") for t in ("a", "b")]
    sites = (broken, clash, not_a_module, *twins)
    for site in sites:
        sys.path.insert(0, str(site))
    try:
        rescan_modules()
        names = module_names()
        assert "broken_module" in names and "text_module" in names
        assert "attncard-clash 1.0 registers an attention module 'none'" in caplog.text
        assert get_module("none").folder.parent == get_module("adaptive_span").folder.parent  # the built-in
        assert get_module("adaptive_span").name == "adaptive_span"  # the others still work
        with pytest.raises(ModulePluginError, match=r"attncard-broken 1\.0 does not import \(ImportError"):
            get_module("broken_module")
        with pytest.raises(ModulePluginError, match=r"attncard-text 1\.0 breaks the module contract: it is"):
            get_module("text_module")
        with pytest.raises(ModulePluginError, match=r"'twin' is registered by attncard-. 1\.0 and attncard-"):
            get_module("twin")
        capsys.readouterr()
        assert main(["modules"]) == 0  # the command lists the others and names the broken packages
        out, err = capsys.readouterr()
        assert "adaptive_span" in out and "broken_module" not in out
        assert "warning: the attention module 'broken_module' of the package attncard-broken 1.0" in err
    finally:
        for site in sites:
            sys.path.remove(str(site))
        sys.modules.pop("broken_plugin", None)
        rescan_modules()
    assert "broken_module" not in module_names()


@pytest.mark.slow  # a process of its own, which imports torch and transformers again
def test_attncard_modules_lists_the_plugin_with_its_package_and_version(plugin_site):
    """The console script, in a process where the plugin is installed (PYTHONPATH) and attncard unchanged."""
    result = subprocess.run(
        [str(ATTNCARD), "modules"],
        env=subprocess_env(PYTHONPATH=str(plugin_site)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr[-2000:]
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[1:]}
    assert rows["sliding_window"] == ["yes", "yes", "yes", PACKAGE, VERSION]
    assert rows["none"][3] == "attncard"


# ------------------------------------------------------------------------------------------------------------
# A run of the plugin: published, pushed, loaded, verified; refused without the plugin


@pytest.fixture(scope="module")
def plugin_run(plugin_site, tiny_model_dir, tmp_path_factory) -> Iterator[tuple[Path, Path, LoopbackHub]]:
    """`(run folder, GLUE folder, hub)`: a tiny GPT-2 run of sliding_window (10 steps memorise 8 rows),
    written and pushed to `REPO` by `publish --push` with the plugin installed."""
    root = tmp_path_factory.mktemp("plugin-run")
    glue = write_sst2_folder(root / "glue")
    argv = [
        *("--model", str(tiny_model_dir("gpt2")), "--module", "sliding_window"),
        *("--steps", "10", "--batch-size", "8", "--lr", "3e-2"),
        *("--data-dir", str(glue), "--output", str(root / "runs"), "--repo-id", REPO, "--push"),
    ]
    with LoopbackHub(root / "hub", token=HUB_TOKEN, user=HUB_USER) as server:
        # The scaling tables of the run are no concern of these tests: measured quickly.
        with pytest.MonkeyPatch.context() as patch, plugin_installed(plugin_site), quick_scaling():
            point_client_at(server, root / "hf_home", HUB_TOKEN, patch)
            assert publish_main(argv) == 0
        close_session()
        yield root / "runs" / RUN_NAME, glue, server
    assert server.internal_errors == []


@pytest.fixture
def client(plugin_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackHub]:
    """This process's huggingface_hub client pointed at the hub the plugin run was pushed to."""
    server = plugin_run[2]
    point_client_at(server, tmp_path / "hf_home", HUB_TOKEN, monkeypatch)
    yield server
    close_session()


@pytest.mark.slow
def test_the_run_records_and_shows_the_plugins_package(plugin_run, plugin_site):
    run_dir = plugin_run[0]
    results = Results.load(run_dir)
    assert results.verification.status == Status.PASS_NO_COMPRESSION
    with plugin_installed(plugin_site):
        provenance = module_provenance("sliding_window")
        assert lint_run_folder(run_dir) == []
    assert (results.module.package, results.module.package_version) == (PACKAGE, VERSION)
    assert results.module.source_sha256 == provenance.source_sha256
    assert results.module.config == {"window": 16}
    card = (run_dir / "README.md").read_text(encoding="utf-8")
    assert f"From the package `{PACKAGE}` {VERSION}, which registers `sliding_window`" in card
    assert f"is `{provenance.source_sha256}`" in card
    # The card's one install block gives attncard's line, then the plugin's: the example plugin from
    # attncard's repository at the commit the run records (no release of it is on PyPI; card template 2).
    commit = results.environment.git_commit.removesuffix("+dirty")
    url = f"git+{results.environment.attncard_repository}@{commit}"
    plugin_line = f'pip install "{PACKAGE} @ {url}#subdirectory=examples/sliding_window"'
    plugin_line += "  # the attention module sliding_window"
    block = f'\n```bash\npip install "attncard @ {re.escape(url)}"(  # .*)?\n{re.escape(plugin_line)}\n```'
    assert re.search(block, card), card[card.index("## Use it") :][:600]


@pytest.mark.slow
def test_the_run_loads_back_from_the_hub_and_reverifies(
    plugin_run, plugin_site, client, tiny_model_dir, tmp_path
):
    _, glue, server = plugin_run
    base = tiny_model_dir("gpt2")
    with plugin_installed(plugin_site):
        verified = load_verified(REPO, endpoint=server.endpoint, cache_dir=tmp_path / "c1", base_model=base)
        assert verified.results.module.package == PACKAGE
        assert verified.model.config._attn_implementation == "attncard_sliding_window"
        check = reverify(
            REPO, data_dir=glue, endpoint=server.endpoint, cache_dir=tmp_path / "c2", base_model=base
        )
    assert check.matches, check.problems


def test_without_the_plugin_loading_names_the_package_and_installs_nothing(
    plugin_run, client, tiny_model_dir, tmp_path, capsys
):
    server = plugin_run[2]
    base = tiny_model_dir("gpt2")
    with pytest.raises(ModuleNotInstalledError) as caught:
        load_verified(REPO, endpoint=server.endpoint, cache_dir=tmp_path / "cache", base_model=base)
    message = str(caught.value)
    assert "\n" not in message and f"from the package {PACKAGE} {VERSION}, which is not installed" in message
    assert INSTALL in message and INSTALL_FOLDER in message
    # The command line says the same in one line, with exit status 2.
    assert main(["download", REPO, "--hub-endpoint", server.endpoint]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert INSTALL in err and INSTALL_FOLDER in err, err
    assert_the_plugin_is_not_installed()


@pytest.mark.slow  # a process of its own, which imports torch and transformers again
def test_the_download_command_without_the_plugin_names_the_package_and_installs_nothing(plugin_run, client):
    """The command line, in a process without the plugin: exit status 2, one line, no traceback."""
    server = plugin_run[2]
    result = subprocess.run(
        [str(ATTNCARD), "download", REPO, "--hub-endpoint", server.endpoint],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr[-2000:]
    assert result.stderr.startswith("error: ") and INSTALL in result.stderr
    assert INSTALL_FOLDER in result.stderr
    assert_the_plugin_is_not_installed()


def assert_the_plugin_is_not_installed() -> None:
    """A refusal installs nothing: not in this process, not in the environment."""
    assert importlib.util.find_spec(PLUGIN_IMPORT) is None
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.distribution(PACKAGE)


def test_a_plugin_with_other_source_is_refused(plugin_run, plugin_site, tiny_model_dir, tmp_path):
    changed = shutil.copytree(plugin_site, tmp_path / "site")
    with (changed / PLUGIN_IMPORT / "attention.py").open("a", encoding="utf-8") as attention:
        attention.write("# a change after the run was trained\n")
    with plugin_installed(changed), pytest.raises(IncompatibleRunError) as caught:
        load_verified(plugin_run[0], base_model=tiny_model_dir("gpt2"))
    message = str(caught.value)
    assert "\n" not in message
    assert f"module 'sliding_window' installed here ({PACKAGE} {VERSION}, source sha256" in message
    assert f"attention.py differ); install the recorded one ({INSTALL}" in message
    assert f"{INSTALL_FOLDER})" in message
