"""The Space folder `attncard space --output DIR` writes, for a Gradio Space on the Hub:

    app.py            runs `attncard space ... --serve` on the Space's host and port, with these options
    requirements.txt  attncard (at the commit that wrote the folder, when it has one) and gradio's range
    README.md         the Space's metadata (sdk: gradio, its version, app_file): huggingface_hub's SpaceCard
    cards/            with --cards: the copies (no weights), checked again when the Space starts

Nothing in the folder decides what a run shows: the Space checks every run when it starts and on its
schedule, as `attncard space` does here.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from huggingface_hub import SpaceCard, SpaceCardData

from ..record.environment import attncard_repository, git_commit
from ..record.errors import DownloadError
from ..record.manifest import RESULTS_FILE, WEIGHTS_SUFFIX

APP_FILE = "app.py"
REQUIREMENTS_FILE = "requirements.txt"
SPACE_CARD_FILE = "README.md"
SPACE_CARDS = "cards"
# The oldest gradio the page was written and tested with (pyproject's `space` extra states the same floor).
GRADIO_FLOOR = "6.31.0"
SPACE_PORT = 7860  # where a Gradio Space's app must listen


def write_space_folder(
    output: str | os.PathLike,
    *,
    title: str,
    serve_args: Sequence[str],
    cards_dir: str | os.PathLike | None = None,
) -> Path:
    """Writes a Gradio Space folder that serves the leaderboard page (see the module doc).

    Args:
        output: a new (or empty) folder.
        title: the page's and the Space's title.
        serve_args: the arguments of `attncard space` that say what the Space checks (the organisation, or
            `--cards cards`, and the signer or key required); app.py adds `--serve` and the Space's host and
            port.
        cards_dir: a cards folder to copy into the Space, as `cards/` (its copies without weights).

    Returns:
        The folder.

    Raises:
        [`DownloadError`]: `output` holds files already.

    Example:
        >>> from huggingface_hub import SpaceCard
        >>> folder = write_space_folder("space", title="attncard leaderboard", serve_args=["attncard"])
        >>> sorted(path.name for path in folder.iterdir())
        ['README.md', 'app.py', 'requirements.txt']
        >>> card = SpaceCard.load(folder / "README.md")
        >>> card.data.sdk, card.data.app_file
        ('gradio', 'app.py')
    """
    output = Path(output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise DownloadError(
            f"{output}: not a new folder; pass a new (or empty) folder for the Space, e.g. --output space-new"
        )
    output.mkdir(parents=True, exist_ok=True)
    args = ["space", *serve_args, "--serve", "--host", "0.0.0.0", "--port", str(SPACE_PORT)]
    (output / APP_FILE).write_text(
        '"""The attncard leaderboard page, as `attncard space --output` wrote it: every run is checked when\n'
        'the Space starts and again on its schedule, and only runs that pass are shown."""\n\n'
        "import sys\n\n"
        "from attncard.pipeline.cli import main\n\n"
        'if __name__ == "__main__":\n'
        f"    sys.exit(main({args!r}))\n",
        encoding="utf-8",
    )
    (output / REQUIREMENTS_FILE).write_text(
        f"{_attncard_requirement()}\ngradio>={GRADIO_FLOOR}\n", encoding="utf-8"
    )
    card = SpaceCard.from_template(
        SpaceCardData(
            title=title[:60],
            sdk="gradio",
            sdk_version=importlib.metadata.version("gradio"),
            app_file=APP_FILE,
            license="apache-2.0",
            tags=["attncard", "leaderboard"],
            short_description="Efficient-attention runs, each verified from its predictions",
        ),
        template_str="---\n{{ card_data }}\n---\n\n{{ body }}\n",
        body=(
            f"# {title}\n\nThe leaderboard of attncard runs, served by `attncard space`: each run is "
            "fetched and checked before it is shown (its files against its manifest and run tag, every "
            "quality figure and the paired verdict recomputed from its predictions, its card rendered again, "
            "its signature when one is required); a run that fails a check is listed under Refused "
            "with the reason."
        ),
    )
    card.save(output / SPACE_CARD_FILE)
    if cards_dir is not None:
        for results in sorted(Path(cards_dir).glob(f"*/{RESULTS_FILE}")):
            shutil.copytree(
                results.parent,
                output / SPACE_CARDS / results.parent.name,
                ignore=shutil.ignore_patterns(f"*{WEIGHTS_SUFFIX}"),
            )
    return output


def _attncard_requirement() -> str:
    """attncard at the commit of its repository that writes the folder, so that the Space checks as this one
    does; its release range where no commit is known."""
    repository = attncard_repository()
    commit = git_commit(Path(__file__).resolve().parents[2])
    if repository and commit != "unknown":
        line = f"attncard @ git+{repository}@{commit.removesuffix('+dirty')}"
        return line + (
            "  # written with uncommitted changes on top of it" if commit.endswith("+dirty") else ""
        )
    return f"attncard>={importlib.metadata.version('attncard')}"


__all__ = ["APP_FILE", "GRADIO_FLOOR", "REQUIREMENTS_FILE", "SPACE_CARD_FILE", "write_space_folder"]
