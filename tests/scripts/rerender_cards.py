"""Renders every cards copy under cards/ again from its results.json, after a deliberate change to the card's
template, its plots, the results.json schema or the comments of a module's source (`make golden` runs it),
then writes the leaderboard again (`attncard summary cards`).

Only what attncard builds from the recorded figures changes: the card, the plots, the `.eval_results` entry,
the usage snippet's text (rebuilt from the run's recorded location and first row, as every check rebuilds it)
and the manifest of those files. The measured figures, predictions.csv and the weights' sha256 (the copies do
not hold the weights) stay as recorded. A module run's `comparison.baselines[].results_sha256` is set to the
dense run's new results.json, so the dense runs go first. Besides:

- a results.json of schema 2 is written in schema 3 (`upgrade`), from what it recorded; schemas 3 and 4
  stay as recorded;
- a run not on the Hub whose usage snippet loads it by any other location than its cards copy (an absolute
  path of the machine that published it, one through `..`, or `runs/<name>`, relative to the folder publish
  ran in: no reader has any of them) loads its cards copy instead, `./<name>`, as publish now writes it, and
  the card says to run it in the folder that holds the copy (`readers_location`); a Hub id stays;
- the plots are drawn in plot style 2 (`PLOT_STYLE`), which results.json then records (`current_plot_style`):
  a run without `plot_style` is drawn the first way, which matplotlib 3.8-3.10 draw 71-102 worst tile RMS
  from 3.11, so a reader with one of them could not check the copy's plots at all (a download refuses them
  as another matplotlib's); matplotlib 3.8.4-3.11.2 draw style 2 within 0.14, the leaderboard
  included (0.0 since it marks FAIL runs; bench/cards_plots_anywhere.py).
  The figures the plots are drawn from stay as recorded; only the drawing changes;
- the card is rendered with the current card template (`CARD_TEMPLATE`), which results.json then records
  (`current_card_template`): a copy shows what a run published now shows (card template 2: the headline
  speed and memory in the summary, the source folded at the end, install lines that work without a release
  on PyPI). The run itself keeps verifying with any template it records; only the copy's wording changes;
- a module whose source changed since the run is recorded with its new source only when every Python file
  parses to the same code as at the run's recorded commit (comments and docstrings aside: what ran is what
  is installed) and its other files (spec.md) are text. Otherwise the run keeps the source it recorded (what
  ran), and is rendered again by the installed module only when that module renders its card and plots as
  published (`card_problems` finds nothing before the re-render, as a download's check would): then nothing
  but what this script means to change can change (the SST-2 copies, whose modules were restructured in
  issue 32). A run that needs nothing rewritten (`needs_rewriting`) is kept as published; one the installed
  module renders otherwise stops the script, and the run must be published again.

Review `git diff cards` before committing.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from attncard.modules import get_module, module_provenance
from attncard.pipeline.card.eval_results import write_eval_results
from attncard.pipeline.card.plots import write_plots
from attncard.pipeline.card.render import render_card
from attncard.pipeline.card.snippet import card_usage_code, run_folder_location, usage_location
from attncard.pipeline.checks.card_render import card_problems
from attncard.pipeline.cli import main
from attncard.pipeline.record.manifest import CARD_FILE, RESULTS_FILE, build_manifest, sha256_file
from attncard.pipeline.record.results import (
    CARD_TEMPLATE,
    PLOT_STYLE,
    READABLE_SCHEMA_VERSIONS,
    Parameters,
    Results,
)

ROOT = Path(__file__).resolve().parents[2]
CARDS = ROOT / "cards"
Read = Callable[[str], str | None]  # a repository path -> the file's text, at a commit or installed


def upgrade(results: Results) -> None:
    """Writes a schema 2 run in schema 3: schema 2's one layer count was the layers with LoRA plus, for a
    module that changes attention, every attention layer (`pipeline/run/train.py` of schema 2), so it splits
    into the two counts schema 3 records. A run of schema 3 or later stays in its schema, which renders the
    card it was published with: schema 4's official GLUE metric is a measured figure a schema 3 run never
    recorded, so no re-render can add it."""
    if results.schema_version != 2:
        assert results.schema_version in READABLE_SCHEMA_VERSIONS, results.schema_version
        return
    old = results.parameters
    changed = results.model.num_layers if get_module(results.module.name).claims.changes_attention else 0
    results.parameters = Parameters(
        before=old.before,
        after=old.after,
        trainable=old.trainable,
        lora_layers=old.layers_changed - changed,
        attention_layers_changed=changed,
        compression_factor=old.compression_factor,
    )
    results.schema_version = 3


def _tree(source: str) -> ast.Module:
    """A Python file's syntax tree without its docstrings (comments are never in it)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        docstring = isinstance(body, list) and body and isinstance(body[0], ast.Expr)
        if docstring and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _imported(relative: str, node: ast.ImportFrom, read: Read) -> str | None:
    """The source of the module a relative import in the repository's file `relative` names, as `read` gives
    files; None when it is not a file of the repository."""
    base = PurePosixPath(relative).parents[node.level - 1]
    target = base.joinpath(*node.module.split(".")) if node.module else base
    return next(filter(None, (read(f"{target}.py"), read(f"{target}/__init__.py"))), None)


def same_code(relative: str, recorded: Read, installed: Read) -> bool:
    """Whether the repository's Python file `relative` runs the same code at the recorded commit and
    installed: the same syntax tree but for comments, docstrings and relative imports of the same names from
    a module that moved with the same code."""
    old, new = _tree(recorded(relative) or ""), _tree(installed(relative) or "")
    for was, now in zip(ast.walk(old), ast.walk(new), strict=False):
        moved = (
            isinstance(was, ast.ImportFrom) and isinstance(now, ast.ImportFrom) and was.level and now.level
        )
        if moved and (was.module, was.level) != (now.module, now.level) and ast.dump(was) != ast.dump(now):
            before, after = _imported(relative, was, recorded), _imported(relative, now, installed)
            if before is not None and after is not None and ast.dump(_tree(before)) == ast.dump(_tree(after)):
                now.module, now.level = was.module, was.level
    return ast.dump(old) == ast.dump(new)


def update_module_source(results: Results) -> str | None:
    """Records the installed source of the run's module when only comments, docstrings, the place of a module
    it imports or its spec changed since the run's recorded commit; otherwise records nothing and returns the
    file that runs other code."""
    provenance = module_provenance(results.module.name)
    if provenance.source_sha256 == results.module.source_sha256:
        return None
    module = get_module(results.module.name)
    commit = results.environment.git_commit.removesuffix("+dirty")

    def recorded(relative: str) -> str | None:
        shown = subprocess.run(
            ["git", "show", f"{commit}:{relative}"], cwd=ROOT, capture_output=True, text=True
        )
        return shown.stdout if shown.returncode == 0 else None

    def installed(relative: str) -> str | None:
        return (ROOT / relative).read_text(encoding="utf-8") if (ROOT / relative).is_file() else None

    files = {path.name: path for path in [*module.source_files, Path(module.folder) / "spec.md"]}
    for name, path in sorted(files.items()):
        if results.module.source.get(name) == sha256_file(path) or not name.endswith(".py"):
            continue
        relative = path.resolve().relative_to(ROOT).as_posix()
        if recorded(relative) is None or not same_code(relative, recorded, installed):
            return f"{relative} runs other code than at {commit[:12]}"
    results.module.source = {path.name: sha256_file(path) for path in module.source_files}
    results.module.source_sha256 = provenance.source_sha256
    return None


def not_the_cards_copy(location: str, name: str) -> bool:
    """Whether a recorded run folder location of the run `name`, not on the Hub, names anything but its cards
    copy `./<name>` (`run_folder_location`): an absolute path of the machine that published it, one through
    `..`, or `runs/<name>`, relative to the folder publish ran in. A reader has none of them.

    Example:
        >>> not_the_cards_copy("runs/minilm-none-sst2-seed0", "minilm-none-sst2-seed0")
        True
        >>> not_the_cards_copy("./minilm-none-sst2-seed0", "minilm-none-sst2-seed0")
        False
    """
    return location != run_folder_location(name)


def readers_location(results: Results) -> None:
    """Makes the usage snippet of a run not on the Hub that loads it by another location than its cards copy
    load the copy, `./<name>` (`run_folder_location`), run in the folder that holds it; the rest of the
    snippet is built again from the recorded names by `card_usage_code`."""
    location = usage_location(results)
    if results.usage is None or results.repo_id is not None or location is None:
        return
    if not not_the_cards_copy(location, results.repo_name):
        return
    old, new = f"load_verified('{location}'", f"load_verified('{run_folder_location(results.repo_name)}'"
    results.usage.code = results.usage.code.replace(old, new, 1)


def current_plot_style(results: Results) -> None:
    """Records plot style 2 (`PLOT_STYLE`), which `write_plots` then draws: the style matplotlib 3.8 to 3.11
    draw alike, so a reader with any of them can check the copy's plots (see the module docstring)."""
    results.plot_style = PLOT_STYLE


def current_card_template(results: Results) -> None:
    """Records the current card template (`CARD_TEMPLATE`), which `render_card` then renders with."""
    results.card_template = CARD_TEMPLATE


def needs_rewriting(results: Results) -> list[str]:
    """What of the recorded run itself the re-render would change: an older schema, a usage snippet that loads
    the run by another location than its cards copy, plots not of plot style 2, a card of another template
    than the current one, a dense run's digest that changed. Empty when there is none."""
    needs = ["schema 2"] if results.schema_version == 2 else []
    location = usage_location(results)
    if results.repo_id is None and location is not None and not_the_cards_copy(location, results.repo_name):
        needs.append(f"its usage snippet loads {location}")
    if results.plot_style != PLOT_STYLE:
        drawn = "the first way" if results.plot_style is None else f"in plot style {results.plot_style}"
        needs.append(f"its plots are drawn {drawn}, not in plot style {PLOT_STYLE}")
    if results.card_template != CARD_TEMPLATE:
        template = 1 if results.card_template is None else results.card_template
        needs.append(f"its card is rendered with card template {template}, not {CARD_TEMPLATE}")
    for baseline in results.comparison.baselines if results.comparison is not None else []:
        if baseline.results_sha256 != sha256_file(CARDS / baseline.repo_name / RESULTS_FILE):
            needs.append(f"dense run {baseline.repo_name} was rendered again")
    return needs


def as_recorded(value: object, recorded: object) -> object:
    """`value`, a field of results.json as this attncard writes it, less every key at any depth that the
    `recorded` field lacks and that says nothing (null: `second_split`, a schema 3 run's `evaluation.official`
    or `comparison.mcc_difference`, added by later schemas), so a re-render leaves the recorded fields as they
    were."""
    if isinstance(value, dict) and isinstance(recorded, dict):
        return {
            key: as_recorded(item, recorded.get(key))
            for key, item in value.items()
            if key in recorded or item is not None
        }
    if isinstance(value, list) and isinstance(recorded, list) and len(value) == len(recorded):
        return [as_recorded(item, was) for item, was in zip(value, recorded, strict=True)]
    return value


def save_as_recorded(results: Results, folder: Path) -> None:
    """Writes results.json as `Results.save` does, less the null fields the run did not record
    (`as_recorded`: `second_split`, `card_template` of a run published before them)."""
    recorded = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
    text = json.dumps(as_recorded(results.to_dict(), recorded), indent=2, allow_nan=False) + "\n"
    (folder / RESULTS_FILE).write_text(text, encoding="utf-8")


def rerender(folder: Path) -> str:
    """Renders the cards copy `folder` again and says how; its module run's baselines must be rendered
    already. A run whose module now runs other code than it ran (`update_module_source`) keeps its recorded
    source; it is kept as published when nothing of its own needs rewriting (`needs_rewriting`), rendered
    again when the installed module renders its card and plots as published, and otherwise the script stops,
    and the run must be published again."""
    results = Results.load(folder)
    other_code = update_module_source(results)
    how = "rendered"
    if other_code is not None:
        needs = needs_rewriting(results)
        if not needs:
            return "kept as published (its module runs other code now)"
        # The check a download runs: the installed module draws this run's card and plots as published, so
        # rendering it again changes only what `needs` names.
        problems = card_problems(results, folder)
        if problems:
            sys.exit(f"{folder}: {other_code}, {needs[0]}, and {problems[0]}; publish the run again")
        how = "rendered, its recorded module source kept (its module runs other code now)"
    upgrade(results)
    for baseline in results.comparison.baselines if results.comparison is not None else []:
        baseline.results_sha256 = sha256_file(CARDS / baseline.repo_name / RESULTS_FILE)
    readers_location(results)
    current_plot_style(results)
    current_card_template(results)
    code = card_usage_code(results)
    if results.usage is not None:
        if code is None:
            sys.exit(f"{folder}: its usage snippet loads no location of its own; publish it again")
        results.usage.code = code
    absent = {name: digest for name, digest in results.manifest.items() if not (folder / name).is_file()}
    write_eval_results(results, folder)
    plots = write_plots(results, folder)
    (folder / CARD_FILE).unlink()
    results.manifest = dict(sorted({**absent, **build_manifest(folder)}.items()))
    (folder / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = dict(sorted({**absent, **build_manifest(folder)}.items()))
    save_as_recorded(results, folder)
    problems = card_problems(Results.load(folder), folder)
    if problems:
        sys.exit(f"{folder}: {problems[0]}")
    return how


if __name__ == "__main__":
    copies = sorted(path.parent for path in CARDS.glob("*/" + RESULTS_FILE))
    dense_first = sorted(copies, key=lambda folder: Results.load(folder).module.name != "none")
    for folder in dense_first:
        print(f"{rerender(folder)}: {folder.relative_to(ROOT)}")
    sys.exit(main(["summary", str(CARDS)]))
