"""`attncard summary --hub ORG`: the leaderboard of every run an organisation pushed, read from a loopback Hub
through the real huggingface_hub client, every row verified.

A tiny study (the dense `none` and `svd_lowrank`, six seeds each: twelve runs, signed with a key) is swept and
pushed once for this module (two training steps: most runs FAIL, pushed with --allow-fail, as a leaderboard
shows them). Two are then forged on the Hub: one's predictions.csv edited in place (the
manifest no longer matches), another's results.json given a better accuracy, committed again and tagged as a
push would (a figure edited and resealed). The leaderboard lists those two below the table with their reason;
the other ten make the table, each with the checks it passed, and no weight file is ever fetched.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from attncard.pipeline.card.groups import read_cards
from attncard.pipeline.card.leaderboard_plot import leaderboard_points
from attncard.pipeline.cli import main
from attncard.pipeline.record.manifest import sha256_file
from attncard.pipeline.record.run_names import run_tag
from conftest import HUB_TOKEN, HUB_USER, commit_run_folder, quick_scaling, serve, write_sst2_folder
from hub_server import LoopbackHub
from run_folders import forge_predictions_on_hub
from signing_keys import make_key

# The module's fixture trains and pushes a sweep of 12 tiny runs (about a minute): `make test-all` runs it.
pytestmark = pytest.mark.slow

MODULE = "svd_lowrank"
SEEDS = tuple(range(6))
PREDICTIONS_FORGED = f"{HUB_USER}/bert-{MODULE}-sst2-seed1"  # predictions.csv edited in place
FIGURE_FORGED = f"{HUB_USER}/bert-{MODULE}-sst2-seed5"  # results.json's accuracy edited, committed, tagged


@dataclass
class Published:
    hub: LoopbackHub
    glue: Path
    public_key: Path
    root: Path


def _names(module: str) -> list[str]:
    return [f"bert-{module}-sst2-seed{seed}" for seed in SEEDS]


@pytest.fixture(scope="module")
def published(tiny_model_dir, tmp_path_factory) -> Iterator[Published]:
    """The twelve runs, pushed to a loopback Hub and signed, two of them forged afterwards."""
    root = tmp_path_factory.mktemp("hub-summary")
    glue = write_sst2_folder(root / "glue")
    private_key, public_key = make_key(root, "signer")
    matrix = root / "matrix.yaml"
    model = tiny_model_dir("bert")
    matrix.write_text(
        f"seeds: [{', '.join(map(str, SEEDS))}]\nruns:\n"
        f"  - {{model: '{model}', module: none, task: sst2, steps: 2}}\n"
        f"  - {{model: '{model}', module: {MODULE}, task: sst2, steps: 2}}\n",
        encoding="utf-8",
    )
    with pytest.MonkeyPatch.context() as monkeypatch:
        server = LoopbackHub(root / "hub", token=HUB_TOKEN, user=HUB_USER)
        for hub in serve(server, root, HUB_TOKEN, monkeypatch):
            argv = [
                *("sweep", str(matrix), "--batch-size", "4", "--data-dir", str(glue)),
                *("--output", str(root / "runs"), "--hub-org", HUB_USER, "--push"),
                *("--hub-endpoint", hub.endpoint, "--sign-key", str(private_key), "--allow-fail"),
            ]
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), quick_scaling():
                assert main(argv) == 0, err.getvalue()[-3000:]
            forge_predictions_on_hub(hub, PREDICTIONS_FORGED)
            _forge_figure(hub, FIGURE_FORGED, root)
            yield Published(hub, glue, public_key, root)


def _forge_figure(hub: LoopbackHub, repo_id: str, root: Path) -> None:
    """A better accuracy in results.json, committed on main and tagged as push tags a run: the tag agrees."""
    results = json.loads(hub.read_file(repo_id, "results.json"))
    results["metrics"]["accuracy"] = min(1.0, results["metrics"]["accuracy"] + 0.1)
    forged = root / "forged-results.json"
    forged.write_text(json.dumps(results, indent=2), encoding="utf-8")
    api = HfApi(endpoint=hub.endpoint, token=HUB_TOKEN)
    commit = api.create_commit(
        repo_id, [CommitOperationAdd("results.json", str(forged))], commit_message="better accuracy"
    ).oid
    api.create_tag(repo_id, tag=run_tag(results["started_at"], sha256_file(forged)), revision=commit)


def _summary(published: Published, output: Path, *options: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = [
        *("summary", "--hub", HUB_USER, "--output", str(output), "--data-dir", str(published.glue)),
        *("--hub-endpoint", published.hub.endpoint, *options),
    ]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _table(readme: str) -> dict[str, dict[str, str]]:
    """The rows of the leaderboard's table by module, each a mapping from header to cell."""
    lines = readme.split("## Every group", 1)[1].splitlines()
    rows = [line for line in lines if line.startswith("|")]
    headers = [cell.strip() for cell in rows[0].strip("|").split(" | ")]
    table = {}
    for row in rows[2:]:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
        table[cells[1]] = dict(zip(headers, cells, strict=True))
    return table


def test_the_listing_answers_author_and_tag_as_the_hub_does(published: Published) -> None:
    api = HfApi(endpoint=published.hub.endpoint, token=HUB_TOKEN)
    listed = sorted(model.id for model in api.list_models(author=HUB_USER, filter="attncard"))
    assert listed == sorted(f"{HUB_USER}/{name}" for name in [*_names("none"), *_names(MODULE)])
    assert list(api.list_models(author="someone-else", filter="attncard")) == []
    assert list(api.list_models(author=HUB_USER, filter="not-a-tag")) == []


def test_the_leaderboard_holds_the_verified_runs_and_lists_the_forged_ones_refused(
    published: Published, tmp_path: Path
) -> None:
    published.hub.clear_requests()
    code, out, err = _summary(published, tmp_path / "leaderboard")
    assert code == 1, err  # the leaderboard is written, and the job that reads a forged run fails
    assert "10 runs verified, 2 refused" in out, err
    readme = (tmp_path / "leaderboard" / "README.md").read_text(encoding="utf-8")
    assert (tmp_path / "leaderboard" / "leaderboard.png").is_file()
    table = _table(readme)
    assert set(table) == {"none", MODULE}
    assert table["none"]["Seeds"] == "0, 1, 2, 3, 4, 5"
    assert table[MODULE]["Seeds"] == "0, 2, 3, 4"
    assert table["none"]["Checks passed"] == "run tag, manifest, card, figures from predictions.csv"
    assert table[MODULE]["Checks passed"] == (
        "run tag, manifest, card, figures from predictions.csv, paired verdict from both runs' predictions"
    )
    # The same answer as `attncard summary` gives (issue 44): two steps leave the dense runs at chance, and a
    # module compared with them keeps nothing; the plot marks the point.
    answer = next(line for line in readme.splitlines() if line.startswith(f"| {MODULE} |")).split(" | ")[1]
    assert table["none"]["Status"] == "FAIL: seeds 0, 1, 2, 3, 4, 5"
    assert answer.startswith("no answer: the dense runs of seeds 0, 2, 3, 4 FAIL (50.00%, below the "), answer
    [point] = leaderboard_points(read_cards(tmp_path / "leaderboard"))
    assert point.fails
    refused = readme.split("## Refused", 1)[1].split("\n![", 1)[0]
    assert f"`{PREDICTIONS_FORGED}`" in refused and "predictions.csv" in refused
    assert f"`{FIGURE_FORGED}`" in refused and "contradicts itself" in refused
    assert str(tmp_path) not in readme  # no path of this machine
    assert f"refused {PREDICTIONS_FORGED}" in err and f"refused {FIGURE_FORGED}" in err
    # The verified runs' cards copies are there, the refused ones not; no weights were fetched.
    copies = sorted(path.name for path in (tmp_path / "leaderboard").iterdir() if path.is_dir())
    assert len(copies) == 10 and FIGURE_FORGED.split("/")[1] not in copies
    assert not list((tmp_path / "leaderboard").rglob("*.safetensors"))
    fetched = [record.path for record in published.hub.requests if record.route == "resolve"]
    assert fetched and not [path for path in fetched if path.endswith(".safetensors")]


def test_a_required_key_is_checked_without_the_weights(published: Published, tmp_path: Path) -> None:
    code, out, err = _summary(published, tmp_path / "signed", "--require-key", str(published.public_key))
    assert code == 1, err
    assert "10 runs verified, 2 refused" in out, err
    table = _table((tmp_path / "signed" / "README.md").read_text(encoding="utf-8"))
    assert "signed by key sha256:" in table["none"]["Checks passed"]
    _, other = make_key(tmp_path, "other")
    code, out, err = _summary(published, tmp_path / "other", "--require-key", str(other))
    assert code == 1 and "0 runs verified, 12 refused" in out
    assert "as its signer" in err


def test_an_organisation_with_nothing_refused_exits_0(published: Published, tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = [
        *("summary", "--hub", "someone-else", "--output", str(tmp_path / "empty")),
        *("--hub-endpoint", published.hub.endpoint),
    ]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code == 0 and "0 runs verified, 0 refused" in out.getvalue(), err.getvalue()


def test_the_output_must_be_a_new_folder_and_a_cards_folder_excludes_hub(
    published: Published, tmp_path: Path
) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "note.txt").write_text("mine", encoding="utf-8")
    code, _, err = _summary(published, tmp_path / "used")
    assert code == 2 and "not a new folder" in err and err.count("\n") == 1
    assert main(["summary", str(tmp_path), "--hub", HUB_USER]) == 2
    assert main(["summary", str(tmp_path), "--require-key", "key.pub"]) == 2
    shutil.rmtree(tmp_path / "used")


def test_a_fetch_without_weights_never_serves_one_that_wants_them(
    hub: LoopbackHub, tiny_gpt2_run, fresh_cache
) -> None:
    from attncard.pipeline.hub.fetch import fetch_run

    run_dir, _ = tiny_gpt2_run
    repo_id = f"{HUB_USER}/{run_dir.name}"
    commit_run_folder(hub.endpoint, repo_id, run_dir)
    cache = fresh_cache()
    light = fetch_run(repo_id, without_weights=True, cache_dir=cache)
    assert (light.folder / "results.json").is_file() and not list(light.folder.glob("*.safetensors"))
    assert not [r.path for r in hub.requests if r.route == "resolve" and r.path.endswith(".safetensors")]
    full = fetch_run(repo_id, cache_dir=cache)
    assert full.folder == light.folder and list(full.folder.glob("*.safetensors"))
    hub.clear_requests()
    # A complete fetch serves a later one without weights, and the weights stay.
    assert fetch_run(repo_id, without_weights=True, cache_dir=cache).folder == full.folder
    assert hub.request_count("resolve") == 0 and list(full.folder.glob("*.safetensors"))


@pytest.mark.parametrize(
    "listed",
    ["someone-else/bert-none-sst2-seed0", f"{HUB_USER}/../etc", f"{HUB_USER}/.hidden", 7, f"{HUB_USER}"],
)
def test_a_listing_that_names_what_is_not_a_run_of_the_organisation_is_refused(listed: object) -> None:
    from attncard.pipeline.record.errors import DownloadError
    from attncard.pipeline.study.hub_leaderboard import _listed_id

    with pytest.raises(DownloadError, match="cannot be trusted"):
        _listed_id(listed, HUB_USER, "http://127.0.0.1:1")
    assert _listed_id(f"{HUB_USER}/bert-none-sst2-seed0", HUB_USER, "h") == f"{HUB_USER}/bert-none-sst2-seed0"
