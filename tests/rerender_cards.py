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
- a run not on the Hub whose usage snippet loads it by a path outside the cards folder (an absolute path of
  the machine that published it, or one through `..`) loads its cards copy instead, `./<name>`, as publish
  now writes it, and the card says to run it in the folder that holds the copy (`readers_location`); a
  relative `runs/<name>` names no machine and stays, as does a Hub id;
- `plot_style` stays as recorded: the copies are drawn the first way, as published (moving a run to plot
  style 2 redraws its plots, which publish does, not this script); so does `card_template`: a copy renders
  with the card template version it records (1 when it records none), never a newer one;
- a module whose source changed since the run is recorded with its new source only when every Python file
  parses to the same code as at the run's recorded commit (comments and docstrings aside: what ran is what
  is installed) and its other files (spec.md) are text; otherwise the run is not rendered by the installed
  module: it is kept as published when nothing of its own needs rewriting (`needs_rewriting`), and else the
  script stops, and the run must be published again.

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
from attncard.pipeline.cli import main
from attncard.pipeline.integrity import card_problems
from attncard.pipeline.render import (
    card_usage_code,
    render_card,
    run_folder_location,
    usage_location,
    write_eval_results,
    write_plots,
)
from attncard.pipeline.results import (
    CARD_FILE,
    READABLE_SCHEMA_VERSIONS,
    RESULTS_FILE,
    Parameters,
    Results,
    build_manifest,
    sha256_file,
)

ROOT = Path(__file__).resolve().parent.parent
CARDS = ROOT / "cards"
Read = Callable[[str], str | None]  # a repository path -> the file's text, at a commit or installed


def upgrade(results: Results) -> None:
    """Writes a schema 2 run in schema 3: schema 2's one layer count was the layers with LoRA plus, for a
    module that changes attention, every attention layer (`pipeline/train.py` of schema 2), so it splits
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


def outside_cards(location: str) -> bool:
    """Whether a recorded run folder location names a place outside the cards folder, of the machine that
    published the run: an absolute path or one through `..`.

    Example:
        >>> outside_cards("/work/runs/minilm-none-mrpc-seed0"), outside_cards("./minilm-none-mrpc-seed0")
        (True, False)
    """
    path = PurePosixPath(location)
    return path.is_absolute() or ".." in path.parts


def readers_location(results: Results) -> None:
    """Makes the usage snippet of a run not on the Hub that loads it from outside the cards folder load its
    cards copy, `./<name>` (`run_folder_location`), run in the folder that holds it; the rest of the snippet
    is built again from the recorded names by `card_usage_code`."""
    location = usage_location(results)
    if results.usage is None or results.repo_id is not None or location is None:
        return
    if not outside_cards(location):
        return
    old, new = f"load_verified('{location}'", f"load_verified('{run_folder_location(results.repo_name)}'"
    results.usage.code = results.usage.code.replace(old, new, 1)


def needs_rewriting(results: Results) -> list[str]:
    """What of the recorded run itself the re-render would change: an older schema, a usage snippet that loads
    the run from outside the cards folder, a dense run's digest that changed. Empty when there is none."""
    needs = ["schema 2"] if results.schema_version == 2 else []
    location = usage_location(results)
    if results.repo_id is None and location is not None and outside_cards(location):
        needs.append(f"its usage snippet loads {location}")
    for baseline in results.comparison.baselines if results.comparison is not None else []:
        if baseline.results_sha256 != sha256_file(CARDS / baseline.repo_name / RESULTS_FILE):
            needs.append(f"dense run {baseline.repo_name} was rendered again")
    return needs


def save_as_recorded(results: Results, folder: Path) -> None:
    """Writes results.json as `Results.save` does, less the fields this attncard added that the run did not
    record and that say nothing (null: `second_split`, `plot_style`, `card_template` of a run published before
    them), so a re-render leaves the recorded fields as they were."""
    recorded = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))
    data = {key: value for key, value in results.to_dict().items() if key in recorded or value is not None}
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    (folder / RESULTS_FILE).write_text(text, encoding="utf-8")


def rerender(folder: Path) -> bool:
    """Renders the cards copy `folder` again; its module run's baselines must be rendered already. A run whose
    module now runs other code than it ran (`update_module_source`) is not rendered by the installed module:
    it is kept as published (False) when nothing of its own needs rewriting (`needs_rewriting`); otherwise
    the script stops, and the run must be published again."""
    results = Results.load(folder)
    other_code = update_module_source(results)
    if other_code is not None:
        needs = needs_rewriting(results)
        if needs:
            sys.exit(f"{folder}: {other_code}, and {needs[0]}; publish the run again")
        return False
    upgrade(results)
    for baseline in results.comparison.baselines if results.comparison is not None else []:
        baseline.results_sha256 = sha256_file(CARDS / baseline.repo_name / RESULTS_FILE)
    readers_location(results)
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
    return True


if __name__ == "__main__":
    copies = sorted(path.parent for path in CARDS.glob("*/" + RESULTS_FILE))
    dense_first = sorted(copies, key=lambda folder: Results.load(folder).module.name != "none")
    for folder in dense_first:
        rendered = rerender(folder)
        print(
            f"{'rendered' if rendered else 'kept as published (its module runs other code now)'}: "
            f"{folder.relative_to(ROOT)}"
        )
    sys.exit(main(["summary", str(CARDS)]))
