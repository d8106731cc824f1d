"""The Hub token on a cluster (issue 42, item 1): the driver writes it to a file only this user can read, in a
folder of its own under `--output` (a file system every node sees), removed when the sweep ends; the workers
get the file's path in their environment, never the token, and a run reads it and has it as `HF_TOKEN` while
it runs. `sbatch` and a Ray instance the sweep starts are started without the token in their environment.
(The sweeps on a real Ray cluster and a real Slurm cluster: tests/study/test_sweep_ray.py and
test_sweep_slurm.py; the environment `sbatch` sees: tests/study/test_sweep_slurm_parameters.py.)"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from huggingface_hub import get_token

from attncard.pipeline.record.errors import AttncardError
from attncard.pipeline.study import cluster
from attncard.pipeline.study.cluster import run_on_worker
from attncard.pipeline.study.plan import RunOutcome, SweepRun, SweepSettings

TOKEN = "hf_not_a_real_token_0123456789"


@pytest.fixture(autouse=True)
def no_token(monkeypatch) -> None:
    """No token in this process's environment unless a test sets one."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "ATTNCARD_HF_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("variable", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"])
def test_the_token_file_is_the_users_alone_only_its_path_is_in_the_environment_and_it_is_removed(
    tmp_path, monkeypatch, variable
):
    from attncard.pipeline.study.cluster import TOKEN_FILE_VARIABLE, hub_token_file

    monkeypatch.setenv(variable, TOKEN)
    previous = os.umask(0o000)  # whatever the umask, the modes below
    try:
        with hub_token_file(tmp_path / "runs") as environment:
            assert list(environment) == [TOKEN_FILE_VARIABLE]
            path = Path(environment[TOKEN_FILE_VARIABLE])
            assert path.is_absolute() and TOKEN not in str(path)
            assert path.read_text(encoding="utf-8") == TOKEN
            assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
            assert path.parent.parent == (tmp_path / "runs").resolve()
    finally:
        os.umask(previous)
    assert not path.parent.exists()
    assert os.environ[variable] == TOKEN  # the driver's own environment is left as it was


def test_the_token_file_is_removed_when_the_sweep_ends_by_an_error(tmp_path, monkeypatch):
    from attncard.pipeline.study.cluster import hub_token_file

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with pytest.raises(KeyboardInterrupt), hub_token_file(tmp_path) as environment:
        raise KeyboardInterrupt
    assert not Path(next(iter(environment.values()))).parent.exists()
    assert list(tmp_path.iterdir()) == []


def test_without_a_token_there_is_no_file(tmp_path):
    from attncard.pipeline.study.cluster import hub_token_file

    with hub_token_file(tmp_path) as environment:
        assert environment == {} and list(tmp_path.iterdir()) == []


def test_what_the_cluster_is_started_with_lacks_the_token_and_names_its_file(monkeypatch):
    from attncard.pipeline.study.cluster import TOKEN_FILE_VARIABLE, cluster_environment

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", TOKEN)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
    with cluster_environment({TOKEN_FILE_VARIABLE: "/shared/runs/.attncard-token-x/token"}):
        assert TOKEN not in os.environ.values()
        assert os.environ[TOKEN_FILE_VARIABLE] == "/shared/runs/.attncard-token-x/token"
        assert os.environ["HF_ENDPOINT"] == "http://127.0.0.1:1"
    assert os.environ["HF_TOKEN"] == os.environ["HUGGING_FACE_HUB_TOKEN"] == TOKEN
    assert TOKEN_FILE_VARIABLE not in os.environ


def test_the_ray_tasks_environment_lacks_the_token_and_names_its_file(monkeypatch):
    from attncard.pipeline.study.cluster import TOKEN_FILE_VARIABLE
    from attncard.pipeline.study.sweep_ray import task_environment

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", TOKEN)
    monkeypatch.setenv("HF_TOKEN_PATH", "/home/me/.cache/huggingface/token")  # a path: forwarded
    monkeypatch.setenv("GLUE_DIR", "/shared/glue")
    environment = task_environment({TOKEN_FILE_VARIABLE: "/shared/runs/.attncard-token-x/token"})
    assert TOKEN not in environment.values() and "HF_TOKEN" not in environment
    assert environment["GLUE_DIR"] == "/shared/glue"
    assert environment["HF_TOKEN_PATH"] == "/home/me/.cache/huggingface/token"
    assert environment[TOKEN_FILE_VARIABLE] == "/shared/runs/.attncard-token-x/token"


def _run() -> SweepRun:
    return SweepRun("m", "m", "none", "sst2", steps=2, seed=0, name="m-none-sst2-seed0")


def test_a_worker_has_the_token_from_its_file_while_the_run_runs(tmp_path, monkeypatch):
    from attncard.pipeline.study.cluster import TOKEN_FILE_VARIABLE, hub_token_file

    seen: list[str | None] = []

    def run_sweep(runs, settings):
        seen.append(get_token())  # as huggingface_hub finds it when the run pushes
        yield RunOutcome(run=runs[0], state="ran")

    monkeypatch.setattr(cluster, "run_sweep", run_sweep)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with hub_token_file(tmp_path / "runs") as environment:
        monkeypatch.delenv("HF_TOKEN")  # a worker's environment: the file's path, not the token
        monkeypatch.setenv(TOKEN_FILE_VARIABLE, environment[TOKEN_FILE_VARIABLE])
        monkeypatch.chdir(tmp_path)
        outcome = run_on_worker(_run(), SweepSettings(output=Path("runs")), str(tmp_path))
    assert outcome.state == "ran" and seen == [TOKEN]
    assert "HF_TOKEN" not in os.environ  # only while the run runs
    log = (tmp_path / "runs" / "m-none-sst2-seed0.sweep.log").read_text(encoding="utf-8")
    assert TOKEN not in log


def test_a_worker_that_cannot_read_the_token_file_says_so_in_one_line(tmp_path, monkeypatch):
    from attncard.pipeline.study.cluster import TOKEN_FILE_VARIABLE

    monkeypatch.setattr(cluster, "run_sweep", lambda runs, settings: pytest.fail("the run started"))
    monkeypatch.setenv(TOKEN_FILE_VARIABLE, str(tmp_path / "gone" / "token"))
    with pytest.raises(AttncardError) as raised:
        run_on_worker(_run(), SweepSettings(output=tmp_path / "runs"), str(tmp_path))
    message = str(raised.value)
    assert message.startswith(f"the Hub token's file {tmp_path / 'gone' / 'token'} cannot be read on "), (
        message
    )
    assert "\n" not in message and "shared file system" in message, message
