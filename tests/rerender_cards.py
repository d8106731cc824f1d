"""Renders every cards copy under cards/ again from its results.json, after a deliberate change to the card's
template, its plots, the results.json schema or the comments of a module's source (`make golden` runs it),
then writes the leaderboard again (`attncard summary cards`).

Only what attncard builds from the recorded figures changes: the card, the plots, the `.eval_results` entry,
the usage snippet's text (rebuilt from the run's recorded location and first row, as every check rebuilds it)
and the manifest of those files. The measured figures, predictions.csv and the weights' sha256 (the copies do
not hold the weights) stay as recorded. A module run's `comparison.baselines[].results_sha256` is set to the
dense run's new results.json, so the dense runs go first. Besides:

- a results.json of an older schema is written in the current one (`upgrade`), from what it recorded;
- a module whose source changed since the run is recorded with its new source only when every Python file
  parses to the same code as at the run's recorded commit (comments and docstrings aside: what ran is what
  is installed) and its other files (spec.md) are text; otherwise the script stops, and the run must be
  published again.

Review `git diff cards` before committing.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from attncard.modules import get_module, module_provenance
from attncard.pipeline.cli import main
from attncard.pipeline.integrity import card_problems
from attncard.pipeline.render import card_usage_code, render_card, write_eval_results, write_plots
from attncard.pipeline.results import (
    CARD_FILE,
    RESULTS_FILE,
    SCHEMA_VERSION,
    Parameters,
    Results,
    build_manifest,
    sha256_file,
)

ROOT = Path(__file__).resolve().parent.parent
CARDS = ROOT / "cards"
Read = Callable[[str], str | None]  # a repository path -> the file's text, at a commit or installed


def upgrade(results: Results) -> None:
    """Writes a schema 2 run in the current schema: schema 2's one layer count was the layers with LoRA plus,
    for a module that changes attention, every attention layer (`pipeline/train.py` of schema 2), so it
    splits into the two counts schema 3 records."""
    if results.schema_version == SCHEMA_VERSION:
        return
    assert results.schema_version == 2, results.schema_version
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
    results.schema_version = SCHEMA_VERSION


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


def update_module_source(results: Results, folder: Path) -> None:
    """Records the installed source of the run's module when only comments, docstrings, the place of a module
    it imports or its spec changed since the run's recorded commit; stops the script otherwise."""
    provenance = module_provenance(results.module.name)
    if provenance.source_sha256 == results.module.source_sha256:
        return
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
            sys.exit(f"{folder}: {relative} runs other code than at {commit[:12]}; publish the run again")
    results.module.source = {path.name: sha256_file(path) for path in module.source_files}
    results.module.source_sha256 = provenance.source_sha256


def rerender(folder: Path) -> None:
    """Renders the cards copy `folder` again; its module run's baselines must be rendered already."""
    results = Results.load(folder)
    upgrade(results)
    update_module_source(results, folder)
    for baseline in results.comparison.baselines if results.comparison is not None else []:
        baseline.results_sha256 = sha256_file(CARDS / baseline.repo_name / RESULTS_FILE)
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
    results.save(folder)
    problems = card_problems(Results.load(folder), folder)
    if problems:
        sys.exit(f"{folder}: {problems[0]}")


if __name__ == "__main__":
    copies = sorted(path.parent for path in CARDS.glob("*/" + RESULTS_FILE))
    dense_first = sorted(copies, key=lambda folder: Results.load(folder).module.name != "none")
    for folder in dense_first:
        rerender(folder)
        print(f"rendered {folder.relative_to(ROOT)} again")
    sys.exit(main(["summary", str(CARDS)]))
