"""Renders every cards copy under cards/ again from its results.json, after a deliberate change to the card's
template or plots (`make golden` runs it), then writes the leaderboard again (`attncard summary cards`).

Only what attncard builds from the recorded figures changes: the card, the plots, the `.eval_results` entry,
the usage snippet's text (rebuilt from the run's recorded location and first row, as every check rebuilds it)
and the manifest of those files. The measured figures, predictions.csv and the weights' sha256 (the copies do
not hold the weights) stay as recorded. A module run's `comparison.baselines[].results_sha256` is set to the
dense run's new results.json, so the dense runs go first. Review `git diff cards` before committing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from attncard.pipeline.cli import main
from attncard.pipeline.integrity import card_problems
from attncard.pipeline.render import card_usage_code, render_card, write_eval_results, write_plots
from attncard.pipeline.results import CARD_FILE, RESULTS_FILE, Results, build_manifest, sha256_file

CARDS = Path(__file__).resolve().parent.parent / "cards"


def rerender(folder: Path) -> None:
    """Renders the cards copy `folder` again; its module run's baselines must be rendered already."""
    results = Results.load(folder)
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
        print(f"rendered {folder.relative_to(CARDS.parent)} again")
    sys.exit(main(["summary", str(CARDS)]))
