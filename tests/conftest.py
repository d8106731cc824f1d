from __future__ import annotations

import os
from pathlib import Path

import pytest

from tiny_models import save_tiny_model

REPO_ROOT = Path(__file__).resolve().parent.parent


def glue_dir() -> Path | None:
    """The offline GLUE files: $GLUE_DIR, else the copy kept beside the project."""
    candidate = Path(os.environ.get("GLUE_DIR") or REPO_ROOT.parent / "shared" / "data" / "glue")
    return candidate.resolve() if (candidate / "sst2" / "dev.tsv").is_file() else None


@pytest.fixture(scope="session")
def glue() -> Path:
    folder = glue_dir()
    if folder is None:
        pytest.skip("the offline GLUE files are not here; set GLUE_DIR to a folder holding sst2/dev.tsv")
    return folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """`tiny_model_dir(family)`: the folder of a tiny random model of that family, built once a session."""
    root = tmp_path_factory.mktemp("tiny-models")
    built: dict[str, Path] = {}

    def get(family: str) -> Path:
        if family not in built:
            built[family] = save_tiny_model(family, root / family)
        return built[family]

    return get


SST2_ROWS = [
    ("a gorgeous , witty , seductive movie .", 1),
    ("the story is bogus and its characters tissue-thin .", 0),
    ('"a deep and meaningful film .', 1),
    ("it 's a cookie-cutter movie , a cut-and-paste job .", 0),
    ("a masterpiece four years in the making .", 1),
    ("the effort is sincere and the results are honest , but the film is so bleak .", 0),
    ("one of the greatest family-oriented , fantasy-adventure movies ever .", 1),
    ("an ugly , pointless , stupid movie .", 0),
]


def write_sst2_folder(root: Path, train_repeats: int = 8, dev_repeats: int = 5) -> Path:
    """A small GLUE folder in the official layout (`SST-2/train.tsv`, `SST-2/dev.tsv`)."""
    folder = root / "SST-2"
    folder.mkdir(parents=True, exist_ok=True)
    for name, repeats in (("train.tsv", train_repeats), ("dev.tsv", dev_repeats)):
        lines = ["sentence\tlabel"] + [f"{text} \t{label}" for text, label in SST2_ROWS * repeats]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def small_glue(tmp_path) -> Path:
    return write_sst2_folder(tmp_path / "glue")
