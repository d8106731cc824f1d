"""`make demo` on a fresh machine. It checks that the GLUE data can be had before it builds `.venv`:
`pipeline/run/data_check.py`, run by the system Python with the standard library alone, refuses in one line,
exit status 2, a GLUE_DIR without the task's files, HF_HUB_OFFLINE without GLUE_DIR, and a Hub that cannot be
connected to. It builds `.venv` with the CPU torch of requirements.lock, which a plain pip finds only on
PyTorch's index.

Each `make` runs in a folder holding only the Makefile, the check and the files `install` reads, with the
Python of this test started isolated and without site-packages (`-I -S`): were the check to import anything
outside the standard library, or to let a refused run through to `install`, these tests would see it.
"""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from attncard.pipeline.run import data_check
from attncard.pipeline.run.data import find_task_folder
from attncard.pipeline.scoring.tasks import TASKS
from conftest import REPO_ROOT, write_sst2_folder

# As the Makefile's demo-data target.
SST2_FILES = ["train.tsv", "dev.tsv"]
STANDARD_LIBRARY_PYTHON = f"{sys.executable} -I -S"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A folder with the Makefile, the data check, pyproject.toml and an empty lock: enough for `make demo` to
    start building `.venv` if the check let it."""
    folder = tmp_path / "checkout"
    (folder / "pipeline" / "run").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "Makefile", folder / "Makefile")
    shutil.copy2(REPO_ROOT / "pyproject.toml", folder / "pyproject.toml")
    data_check_py = Path("pipeline") / "run" / "data_check.py"
    shutil.copy2(REPO_ROOT / data_check_py, folder / data_check_py)
    (folder / "requirements.lock").write_text("")
    return folder


def make(checkout: Path, target: str, **environ: str) -> subprocess.CompletedProcess:
    """`make TARGET` in `checkout`, GLUE_DIR, HF_HUB_OFFLINE and HF_ENDPOINT taken from `environ` alone."""
    # As from a user's shell: not a sub-make of the `make test-all` running this (MAKELEVEL would make it
    # `make[1]`, MAKEFLAGS would pass on the outer make's options).
    outside = ("GLUE_DIR", "HF_HUB_OFFLINE", "MAKELEVEL", "MAKEFLAGS", "MFLAGS")
    env = {key: value for key, value in os.environ.items() if key not in outside}
    env.pop("HF_ENDPOINT", None)
    env.update(environ)
    return subprocess.run(
        ["make", "--no-print-directory", target, f"PYTHON={STANDARD_LIBRARY_PYTHON}"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def error_lines(result: subprocess.CompletedProcess) -> list[str]:
    """stderr without make's own line naming the target that failed."""
    return [line for line in result.stderr.splitlines() if not line.startswith("make: ***")]


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def answering_hub() -> Iterator[tuple[str, list[str]]]:
    """`(endpoint, paths asked for)` of a loopback server that answers every GET 404, as a Hub that is up."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_error(404)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def test_make_demo_refuses_a_glue_dir_without_the_task_before_building_anything(checkout, tmp_path):
    empty = tmp_path / "glue"
    empty.mkdir()
    result = make(checkout, "demo", GLUE_DIR=str(empty))
    assert result.returncode == 2, result.stdout + result.stderr
    assert error_lines(result) == [
        f"error: GLUE_DIR={empty}: no folder 'SST-2' or 'sst2' for task sst2; set GLUE_DIR to a folder of "
        "the GLUE TSV files (SST-2/train.tsv, SST-2/dev.tsv), e.g. `make demo GLUE_DIR=/path/to/glue`, or "
        "unset GLUE_DIR to read nyu-mll/glue from the Hub"
    ]
    assert result.stdout == ""
    assert not (checkout / ".venv").exists()


def test_make_demo_offline_without_glue_dir_is_refused_at_once(checkout):
    started = time.monotonic()
    result = make(checkout, "demo", HF_HUB_OFFLINE="1")
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = error_lines(result)
    assert line.startswith("error: GLUE_DIR is not set and HF_HUB_OFFLINE is set: GLUE sst2 is read from ")
    assert "set GLUE_DIR to a folder of the GLUE TSV files (SST-2/train.tsv, SST-2/dev.tsv)" in line
    assert not (checkout / ".venv").exists()
    assert time.monotonic() - started < 10


def test_make_demo_with_no_hub_to_connect_to_is_refused(checkout):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    result = make(checkout, "demo", HF_ENDPOINT=endpoint)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = error_lines(result)
    assert line.startswith(f"error: GLUE_DIR is not set and the Hub ({endpoint}) cannot be reached: ")
    assert "connection refused" in line
    assert not (checkout / ".venv").exists()


@pytest.mark.parametrize("folder", ["SST-2", "sst2", "sst-2"])
def test_the_check_passes_a_glue_dir_in_each_layout_the_run_reads(checkout, tmp_path, folder):
    glue = write_sst2_folder(tmp_path / "glue")
    if folder != "SST-2":
        (glue / "SST-2").rename(glue / folder)
    # The run itself finds the same folder: the check shares pipeline/run/data.py's rule.
    assert find_task_folder(TASKS["sst2"], glue).name == folder
    result = make(checkout, "demo-data", GLUE_DIR=str(glue))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_the_demo_data_target_names_the_files_the_run_reads():
    spec = TASKS["sst2"]
    assert [spec.folder, spec.train_file, spec.validation_file] == ["SST-2", *SST2_FILES]
    assert (
        "pipeline/run/data_check.py --task sst2 --folder SST-2 --files train.tsv dev.tsv"
        in (REPO_ROOT / "Makefile").read_text()
    )


def test_a_missing_file_is_named(tmp_path):
    glue = write_sst2_folder(tmp_path / "glue")
    (glue / "SST-2" / "dev.tsv").unlink()
    problem = data_check.data_problem("sst2", "SST-2", SST2_FILES, {"GLUE_DIR": str(glue)})
    assert problem is not None and problem.startswith(f"GLUE_DIR={glue}: SST-2/ has no dev.tsv; set GLUE_DIR")
    file = tmp_path / "a-file"
    file.write_text("")
    problem = data_check.data_problem("sst2", "SST-2", SST2_FILES, {"GLUE_DIR": str(file)})
    assert problem is not None and problem.startswith(f"GLUE_DIR={file}: not a folder; ")


def test_an_empty_glue_dir_reads_the_hub_as_the_run_does(answering_hub):
    endpoint, asked = answering_hub
    environ = {"GLUE_DIR": "", "HF_ENDPOINT": endpoint}
    assert data_check.data_problem("sst2", "SST-2", SST2_FILES, environ) is None
    assert asked == ["/api/datasets/nyu-mll/glue"]


def test_a_hub_that_answers_at_all_passes_and_one_that_never_answers_does_not(answering_hub):
    endpoint, _ = answering_hub
    assert data_check.hub_problem(endpoint) is None  # 404: it is up, and the run says what it said
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        started = time.monotonic()
        problem = data_check.hub_problem(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.5)
    assert problem == "no answer within 0.5 s"
    assert time.monotonic() - started < 5
    assert data_check.hub_problem(f"http://127.0.0.1:{closed_port()}") == "connection refused"


@pytest.mark.parametrize("value", ["1", "true", "ON", "yes"])
def test_hf_hub_offline_is_read_as_huggingface_hub_reads_it(value):
    problem = data_check.data_problem("sst2", "SST-2", SST2_FILES, {"HF_HUB_OFFLINE": value})
    assert problem is not None and "HF_HUB_OFFLINE is set" in problem


def _install_commands(checkout: Path, **environ: str) -> str:
    """What `make install` would run in `checkout` on a fresh machine, pip's configuration files ignored and
    its index settings taken from `environ` alone."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, **environ)
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "install", f"PYTHON={sys.executable}"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_install_finds_the_locked_cpu_torch_on_pytorchs_index_unless_pip_has_indexes_of_its_own(checkout):
    """requirements.lock pins torch's CPU build, which PyPI does not have: a plain pip is pointed at PyTorch's
    index; a pip with a mirror or local wheels configured is left to them."""
    commands = _install_commands(checkout).splitlines()
    lock_install = [line for line in commands if "-r requirements.lock" in line]
    assert lock_install == [
        ".venv/bin/python -m pip install --quiet --require-hashes -r requirements.lock "
        "--extra-index-url https://download.pytorch.org/whl/cpu"
    ]
    for setting in ("PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_FIND_LINKS"):
        commands = _install_commands(checkout, **{setting: "file:///srv/wheels"})
        assert "-r requirements.lock" in commands and "download.pytorch.org" not in commands, setting
