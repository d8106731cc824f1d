"""Card template 2 (issue 44, items 3, 4 and 13): the summary gives the headline speed and memory, a stock
load that scores the same says that it agrees, and every install line is one that works without a release on
PyPI. A run that records card template 1 (or none) keeps its card, install lines and stock sentence.
"""

from __future__ import annotations

import dataclasses
import tomllib

import pytest
from packaging.requirements import Requirement

from attncard.pipeline.card.context import headline_scaling, stock_agreement
from attncard.pipeline.card.formats import distinct_percentages
from attncard.pipeline.card.render import render_card
from attncard.pipeline.card.snippet import REPOSITORY_PLUGINS, install_commands
from attncard.pipeline.record.results import Results, StockLoad
from conftest import FIXTURES, REPO_ROOT

FIXTURE = FIXTURES / "tiny_results.json"  # a run of `none`, card template 2
SPAN_RUN = REPO_ROOT / "cards" / "minilm-adaptive_span-mrpc-seed0"  # a module run with both scaling tables
REPOSITORY = "https://github.com/attncard/attncard"
COMMIT = "4f2e7517c47e47c514bb65ae9d7fad69eafd2df8"
STOCK_TOOLS = "Loading with stock tools (peft's `PeftModel.from_pretrained`, the Hub's \"Use in PEFT\")"


def fixture_run(card_template: int | None = 2, **environment: str) -> Results:
    """The fixture's run recording `card_template`, its environment's fields replaced by `environment`."""
    results = Results.load(FIXTURE)
    replaced = dataclasses.replace(results.environment, **environment)
    return dataclasses.replace(results, card_template=card_template, environment=replaced)


def plugin_run(package: str, card_template: int | None = 2, **environment: str) -> Results:
    """The fixture's run as a run of the module `sliding_window` from `package` 0.1.0 records it."""
    results = fixture_run(card_template, **environment)
    module = dataclasses.replace(
        results.module, name="sliding_window", package=package, package_version="0.1.0"
    )
    return dataclasses.replace(results, module=module)


def summary(card: str) -> str:
    """What a card says above "Use it": the title, the summary, the status and the lines beside it."""
    return card[: card.index("\n## Use it\n")]


# ------------------------------------------------------------------------------------------------------------
# Install lines (item 4)


def test_a_recorded_commit_installs_attncard_from_its_repository_in_both_templates():
    line = f'pip install "attncard @ git+{REPOSITORY}@{COMMIT}"'
    for card_template in (None, 1, 2):
        assert install_commands(fixture_run(card_template, git_commit=COMMIT)) == line
    dirty = fixture_run(2, git_commit=f"{COMMIT}+dirty")
    assert install_commands(dirty) == f"{line}  # the run had uncommitted changes on top of this commit"


def test_without_a_commit_template_2_says_where_the_version_comes_from():
    assert install_commands(fixture_run(1, git_commit="unknown")) == 'pip install "attncard==0.1.0"'
    assert install_commands(fixture_run(2, git_commit="unknown")).splitlines() == [
        "# The run recorded attncard 0.1.0 but no commit: its release on PyPI, or where PyPI has none, "
        f"attncard 0.1.0 from {REPOSITORY}",
        'pip install "attncard==0.1.0"',
    ]
    unknown = fixture_run(2, git_commit="unknown", attncard_version="unknown")
    assert install_commands(unknown).splitlines() == [
        "# The run recorded no version or commit of attncard: this installs its newest commit",
        f'pip install "attncard @ git+{REPOSITORY}"',
    ]
    nothing = fixture_run(2, git_commit="unknown", attncard_version="unknown", attncard_repository="")
    assert install_commands(nothing) == (
        "# The run recorded no version, commit or repository of the attncard that made it"
    )
    # Template 1 said `pip install attncard`, which finds nothing while attncard has no release.
    assert install_commands(dataclasses.replace(nothing, card_template=None)) == "pip install attncard"


def test_the_example_plugin_installs_from_attncards_repository_at_the_recorded_commit():
    run = plugin_run("attncard-sliding-window", git_commit=COMMIT)
    attncard_line, plugin_line = install_commands(run).splitlines()
    assert attncard_line == f'pip install "attncard @ git+{REPOSITORY}@{COMMIT}"'
    url = f"git+{REPOSITORY}@{COMMIT}#subdirectory=examples/sliding_window"
    assert (
        plugin_line == f'pip install "attncard-sliding-window @ {url}"  # the attention module sliding_window'
    )
    requirement = Requirement(plugin_line.removeprefix("pip install ").split("  # ")[0].strip('"'))
    assert requirement.name == "attncard-sliding-window"
    assert requirement.url == url
    # Template 1 named a release on PyPI, which does not exist.
    run_1 = dataclasses.replace(run, card_template=1)
    assert install_commands(run_1).splitlines()[1] == (
        'pip install "attncard-sliding-window==0.1.0"  # the attention module sliding_window'
    )


@pytest.mark.parametrize(("package", "folder"), sorted(REPOSITORY_PLUGINS.items()))
def test_each_repository_plugin_is_the_package_in_its_folder(package: str, folder: str):
    project = tomllib.loads((REPO_ROOT / folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == package


def test_an_outside_package_is_installed_by_its_version_and_says_what_the_run_does_not_know():
    lines = install_commands(plugin_run("attncard-linformer", git_commit=COMMIT)).splitlines()
    assert lines[1:] == [
        "# The attention module sliding_window comes from the package attncard-linformer 0.1.0; the run did "
        "not record where it came from: from PyPI, or where its authors publish it (the loader checks its "
        "source against the run's sha256)",
        'pip install "attncard-linformer==0.1.0"',
    ]
    # The example plugin without a recorded commit: no commit to take it from, so by its version too.
    unknown = install_commands(plugin_run("attncard-sliding-window", git_commit="unknown")).splitlines()
    assert unknown[-1] == 'pip install "attncard-sliding-window==0.1.0"'


def test_the_card_shows_template_2s_install_lines():
    run = fixture_run(2, git_commit="unknown")
    card = render_card(run)
    block = card[card.index("## Use it\n\n```bash\n") :].split("```")[1]
    assert block == f"bash\n{install_commands(run)}\n"


# ------------------------------------------------------------------------------------------------------------
# The stock load (item 3)


def with_stock(accuracy: float, predictions_sha256: str, card_template: int = 2) -> Results:
    """The fixture's run as a module run whose stock load scored `accuracy` with those predictions."""
    results = fixture_run(card_template)
    stock = StockLoad(
        accuracy=accuracy, predictions_sha256=predictions_sha256, adapter_weights=44, ignored_weights=18
    )
    return dataclasses.replace(results, stock=stock)


def stock_line(card: str) -> str:
    return next(line for line in card.splitlines() if STOCK_TOOLS in line)


def test_a_stock_load_with_the_same_predictions_says_that_it_agrees():
    results = Results.load(FIXTURE)
    run = with_stock(results.metrics.accuracy, results.metrics.predictions_sha256)
    agreement = stock_agreement(run)
    assert agreement.same_predictions and agreement.same_accuracy
    accuracy = f"{100 * results.metrics.accuracy:.2f}%"
    assert stock_line(render_card(run)) == (
        f"**{STOCK_TOOLS} agrees with this run on all 40 validation rows (the same predictions, so the same "
        f"{accuracy}), but builds another model — use the attncard loader ([Use it](#use-it)):** stock tools "
        "run transformers' own attention, not `none`, and silently ignore 18 of the adapter's 44 weight "
        "tensors; on other rows the two may disagree."
    )
    # Template 1 said "gives X instead of X".
    line_1 = stock_line(render_card(dataclasses.replace(run, card_template=1)))
    assert f"gives {accuracy} instead of {accuracy}" in line_1


def test_a_stock_load_with_the_same_accuracy_and_other_predictions_says_so():
    results = Results.load(FIXTURE)
    run = with_stock(results.metrics.accuracy, "0" * 64)
    accuracy = f"{100 * results.metrics.accuracy:.2f}%"
    assert stock_line(render_card(run)).startswith(
        f"**{STOCK_TOOLS} scores the same {accuracy} as this run, with other predictions, and builds another "
        "model — use the attncard loader ([Use it](#use-it)):** stock tools run transformers' own attention"
    )


def test_a_stock_load_that_scores_otherwise_gives_both_figures_apart():
    results = Results.load(FIXTURE)
    run = with_stock(results.metrics.accuracy - 0.025, "0" * 64)
    stock, own = (
        f"{100 * value:.2f}%" for value in (results.metrics.accuracy - 0.025, results.metrics.accuracy)
    )
    assert f"**{STOCK_TOOLS} gives {stock} instead of {own} — use the attncard loader" in render_card(run)


def test_shares_that_two_decimals_print_alike_get_more_decimals():
    assert distinct_percentages(20215 / 40430, 20216 / 40430) == ("50.000%", "50.002%")
    assert distinct_percentages(0.5, 0.5) == ("50.00%", "50.00%")
    assert distinct_percentages(0.7647, 0.826) == ("76.47%", "82.60%")


# ------------------------------------------------------------------------------------------------------------
# The headline speed and memory (item 13)


def test_the_headline_rows_are_the_layer_at_the_longest_n_and_the_model_at_the_runs_length():
    results = Results.load(SPAN_RUN)
    layer, model = headline_scaling(results)
    assert (layer.n, model.n) == (4096, 128)  # max_length 128; the model at 128, 256, 512
    for max_length, n in ((200, 256), (512, 512), (1024, 512)):
        config = dataclasses.replace(results.training.hyperparameters, max_length=max_length)
        training = dataclasses.replace(results.training, hyperparameters=config)
        assert headline_scaling(dataclasses.replace(results, training=training))[1].n == n


def test_a_module_runs_summary_gives_its_headline_speed_and_memory():
    results = dataclasses.replace(Results.load(SPAN_RUN), card_template=2)
    card = render_card(results)
    assert (
        "attention layer 0 alone at N = 4096, the longest measured: 24.98× the speed of dense attention "
        "(16.69 – 31.53), peak memory 6.1 MB against 12.0 MB (0.51×); the whole model at N = 128, this "
        "run's maximum length: no measurable difference in time (speed-up 0.70 – 1.36), peak memory 2.1 MB "
        "against 2.1 MB (1.00×)."
    ) in summary(card)
    assert card.index("## Efficiency") < card.index("## The attention module")
    # The module's source and the model's printout are folded at the end, after the citations.
    appendix = card[card.index("## Citations") :]
    assert "## Source and printouts" in appendix and appendix.count("<details>") == 2
    assert "```python\nfrom __future__" not in card[: card.index("## Citations")]
    # Template 1 had no speed figure above "Use it", and its speed tables came after the module's source.
    card_1 = render_card(dataclasses.replace(results, card_template=1))
    assert "the longest measured" not in summary(card_1)
    assert card_1.index("## Efficiency") > card_1.index(
        "<summary>modules/adaptive_span/attention.py</summary>"
    )
