from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants
from huggingface_hub.utils import close_session

from attncard.modules import rescan_modules
from attncard.testing import session_tiny_models
from hub_server import LoopbackHub, client_settings

REPO_ROOT = Path(__file__).resolve().parent.parent
# What the tests read: recorded runs, plots, an older run (tests/support/fixtures/).
FIXTURES = REPO_ROOT / "tests" / "support" / "fixtures"
# Headless Chromium that lays a page out and reaches nothing (tests/card/test_card_html.py,
# test_docs_layout.py): each test adds its window size.
HEADLESS_CHROMIUM = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
HUB_TOKEN = "hf_loopback_test_token"  # the token the `hub` fixture's server accepts, unless overridden
HUB_USER = "loopback-user"  # the server's user: `whoami` answers it, and it owns the test repositories


# `make test` (a bare `pytest`) leaves out the tests marked slow or integration (see pyproject.toml); the
# summary lists them, so that nobody takes the fast loop for the whole suite.
LEFT_OUT_MARKERS = ("slow", "integration")
_LEFT_OUT: dict[str, str] = {}  # node id -> its markers among LEFT_OUT_MARKERS, "/"-joined


def pytest_deselected(items: list[pytest.Item]) -> None:
    for item in items:
        markers = "/".join(marker for marker in LEFT_OUT_MARKERS if any(item.iter_markers(marker)))
        if markers:
            _LEFT_OUT[item.nodeid] = markers
    workeroutput = getattr(items[0].config, "workeroutput", None) if items else None
    if workeroutput is not None:  # a pytest-xdist worker: the controller writes the summary
        workeroutput["left_out"] = dict(_LEFT_OUT)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist's controller, as each worker ends: what the worker left out."""
    _LEFT_OUT.update(getattr(node, "workeroutput", {}).get("left_out", {}))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not _LEFT_OUT or hasattr(config, "workeroutput"):
        return
    # One line per test function: its markers, and how many parametrized cases it has.
    cases = collections.Counter(nodeid.split("[")[0] for nodeid in _LEFT_OUT)
    markers = {nodeid.split("[")[0]: marked for nodeid, marked in _LEFT_OUT.items()}
    terminalreporter.section(f"{len(_LEFT_OUT)} tests not run here: `make test-all` runs them", sep="-")
    for test, count in cases.items():
        terminalreporter.line(f"{markers[test]:<16} {test}" + (f" ({count} cases)" if count > 1 else ""))


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
def tiny_model_dir(pytestconfig, tmp_path_factory) -> Callable[[str], Path]:
    """`tiny_model_dir(family)`: the folder of a tiny random model of that family, built once a session (the
    same folders `attncard.testing.ModuleContract` uses)."""
    return session_tiny_models(pytestconfig, tmp_path_factory).folder


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


# Publish times a module that changes attention against dense attention (pipeline/run/scaling.py): 61
# whole-model passes a side and one layer at N = 512 … 4096 with 9 passes a side, most of a tiny run's time. A
# test that does not check those tables publishes under `quick_scaling()`: the same measurement, each row
# recorded with its own passes, but 3 a side and the two shortest layer lengths. (test_publish's lint-clean
# run of every module keeps the full one and checks it.)
QUICK_SCALING_REPEATS = 3
QUICK_LAYER_LENGTHS = (512, 1024)


@contextlib.contextmanager
def quick_scaling() -> Iterator[None]:
    """Within it, publishing in this process measures the scaling tables with `QUICK_SCALING_REPEATS` and
    `QUICK_LAYER_LENGTHS`."""
    from attncard.pipeline.run import evaluate, scaling

    model_scaling = functools.partial(scaling.measure_model_scaling, repeats=QUICK_SCALING_REPEATS)
    layer_scaling = functools.partial(
        scaling.measure_layer_scaling, lengths=QUICK_LAYER_LENGTHS, repeats=QUICK_SCALING_REPEATS
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evaluate, "measure_model_scaling", model_scaling)
        patch.setattr(evaluate, "measure_layer_scaling", layer_scaling)
        yield


PIP_INSTALL = (sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation")

PLUGIN_SOURCE = REPO_ROOT / "examples" / "sliding_window"  # the example plugin, a package of its own
PLUGIN_IMPORT = "attncard_sliding_window"


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory) -> Path:
    """The example plugin, `pip install`ed without dependencies into a folder of its own (built from a copy,
    so that setuptools' build/ stays out of the checkout). Putting the folder on the path installs it."""
    root = tmp_path_factory.mktemp("plugin")
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    source = shutil.copytree(PLUGIN_SOURCE, root / "source", ignore=ignore)
    site = root / "site"
    subprocess.run([*PIP_INSTALL, "--target", str(site), str(source)], check=True, capture_output=True)
    return site


@contextlib.contextmanager
def plugin_installed(site: Path, import_name: str = PLUGIN_IMPORT) -> Iterator[None]:
    """The plugin in `site` (its package imported as `import_name`) installed in this process for the block,
    then gone as if it never was: off `sys.path`, out of `sys.modules`, the registry rescanned each time."""
    sys.path.insert(0, str(site))
    rescan_modules()
    try:
        yield
    finally:
        sys.path.remove(str(site))
        for name in [name for name in sys.modules if name.split(".")[0] == import_name]:
            del sys.modules[name]
        rescan_modules()


# What `pip install .` builds attncard from: its metadata and the folders packaged under `attncard`.
PACKAGE_SOURCES = ("pyproject.toml", "setup.py", "README.md", "attncard", "pipeline", "modules", "templates")


def install_attncard(target: Path) -> Path:
    """`pip install .` into `target` as a wheel, without dependencies (the test's own are used): no editable
    finder, every subpackage under `target/attncard/`. Returns `target`.

    It builds from a copy of the checkout's sources next to `target`: setuptools writes build/ and *.egg-info
    into the folder it builds, and test workers building the checkout itself at once would collide there."""
    source = target.parent / f"{target.name}-source"
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    for name in PACKAGE_SOURCES:
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, source / name, ignore=ignore)
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, source / name)
    subprocess.run([*PIP_INSTALL, "--target", str(target), str(source)], check=True, capture_output=True)
    return target


@pytest.fixture(scope="session")
def installed_attncard(tmp_path_factory) -> Path:
    """A non-editable install of this checkout, shared by the tests that need one; put it on PYTHONPATH."""
    return install_attncard(tmp_path_factory.mktemp("site"))


def write_sst2_folder(root: Path, train_repeats: int = 8, dev_repeats: int = 5) -> Path:
    """A small GLUE folder in the official layout (`SST-2/train.tsv`, `SST-2/dev.tsv`)."""
    folder = root / "SST-2"
    folder.mkdir(parents=True, exist_ok=True)
    for name, repeats in (("train.tsv", train_repeats), ("dev.tsv", dev_repeats)):
        lines = ["sentence\tlabel"] + [f"{text} \t{label}" for text, label in SST2_ROWS * repeats]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def write_study_files(
    root: Path, model: Path, module: str, seeds: tuple[int, ...], steps: int
) -> tuple[Path, Path]:
    """`(matrix, glue)` of the tiny study of the sweep's executors in `root`: one row of `module` (first, to
    show that the dense runs go first anyway) and one of `none`, with these seeds and steps; a small GLUE."""
    matrix = root / "matrix.yaml"
    matrix.write_text(
        f"seeds: [{', '.join(map(str, seeds))}]\n"
        "runs:\n"
        f"  - {{model: '{model}', module: {module}, task: sst2, steps: {steps}}}\n"
        f"  - {{model: '{model}', module: none, task: sst2, steps: {steps}}}\n",
        encoding="utf-8",
    )
    return matrix, write_sst2_folder(root / "glue")


def sweep_in_process(matrix: Path, glue: Path, runs: Path, *options: str) -> tuple[int, str, str]:
    """`attncard sweep` in this process, batches of 4: (exit status, stdout, stderr, the progress bar's
    carriage returns made line ends)."""
    from attncard.pipeline.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = [
        *("sweep", str(matrix), "--batch-size", "4", "--data-dir", str(glue), "--output", str(runs)),
        *options,
    ]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue().replace("\r", "\n")


def check_same_predictions(matrix: Path, glue: Path, tmp_path: Path, name: str, *executor: str) -> None:
    """Run `name` of the matrix with the local executor and with `executor` (its options): the same
    predictions.csv, byte for byte (every logit), both trained on the run's own torch threads (its `cpus`),
    whatever the sweep's process and the worker would have used."""
    from attncard.pipeline.record.manifest import PREDICTIONS_FILE
    from attncard.pipeline.record.results import Results

    with quick_scaling():
        code, _, err = sweep_in_process(matrix, glue, tmp_path / "local", "--only", name)
    assert code == 0, err[-3000:]
    code, _, err = sweep_in_process(matrix, glue, tmp_path / "other", "--only", name, *executor)
    assert code == 0, err[-3000:]
    folders = [tmp_path / runs / name for runs in ("local", "other")]
    digests = [hashlib.sha256((folder / PREDICTIONS_FILE).read_bytes()).hexdigest() for folder in folders]
    assert digests[0] == digests[1], digests
    threads = [Results.load(folder).efficiency.torch_threads for folder in folders]
    assert threads == [1, 1], threads  # the matrix's runs ask for the default 1 CPU


@pytest.fixture
def small_glue(tmp_path) -> Path:
    return write_sst2_folder(tmp_path / "glue")


TINY_GPT2_REPO = f"{HUB_USER}/tiny-gpt2-none-sst2"  # the repo id the tiny GPT-2 run's card is rendered for


@pytest.fixture(scope="session")
def tiny_gpt2_run(tiny_model_dir, tmp_path_factory) -> tuple[Path, Path]:
    """`(run folder, GLUE folder)`: a tiny GPT-2 run that clears the baseline (10 steps memorise 8 rows),
    its card rendered for `TINY_GPT2_REPO`. Built once a session; copy it before changing it."""
    from attncard.pipeline.cli import publish_main
    from attncard.pipeline.record.results import Results, Status

    root = tmp_path_factory.mktemp("tiny-gpt2-run")
    glue = write_sst2_folder(root / "glue")
    argv = [
        *("--model", str(tiny_model_dir("gpt2")), "--module", "none"),
        *("--steps", "10", "--batch-size", "8", "--lr", "3e-2"),
        *("--data-dir", str(glue), "--output", str(root / "runs"), "--repo-id", TINY_GPT2_REPO),
    ]
    assert publish_main(argv) == 0
    run_dir = root / "runs" / "tiny-gpt2-none-sst2"
    assert Results.load(run_dir).verification.status == Status.PASS_NO_COMPRESSION
    return run_dir, glue


def commit_run_folder(endpoint: str, repo_id: str, run_dir: Path, token: str = HUB_TOKEN) -> str:
    """Creates `repo_id` and commits every file of `run_dir` to it in one commit; returns the commit."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi(endpoint=endpoint, token=token)
    api.create_repo(repo_id)
    operations = [
        CommitOperationAdd(path_in_repo=path.relative_to(run_dir).as_posix(), path_or_fileobj=str(path))
        for path in sorted(run_dir.rglob("*"))
        if path.is_file()
    ]
    return api.create_commit(repo_id, operations, commit_message=f"Publish {run_dir.name}").oid


MINILM_REPO = f"{HUB_USER}/minilm-none-sst2"  # the repo id the real MiniLM run is pushed to
# Files over this many bytes go to LFS on the Hub `minilm_sst2_run` pushes to, as test_olah_interop's Hubs
# store them (olah then serves both kinds).
LFS_THRESHOLD = 4096


@pytest.fixture(scope="session")
def minilm_sst2_run(glue, tmp_path_factory) -> tuple[Path, Path]:
    """`(run folder, Hub folder)`: MiniLM with `none`, trained on the real SST-2 by `publish --push` to a
    `LoopbackHub` that stores files over 4 KB in LFS (as `MINILM_REPO`), once a session.

    Training and evaluating the real model is the slowest thing in the suite, so the tests that need such a
    run share this one (60 steps at lr 1e-3 clear the majority baseline). The Hub folder holds what the push
    committed: serve a copy of it with `LoopbackHub` to see or extend that history. Copy the run before
    changing it.
    """
    from attncard.pipeline.cli import publish_main

    root = tmp_path_factory.mktemp("minilm-sst2")
    server = LoopbackHub(root / "hub", token=HUB_TOKEN, user=HUB_USER, lfs_threshold=LFS_THRESHOLD)
    argv = [
        *("--model", "minilm", "--module", "none", "--task", "sst2", "--steps", "60", "--lr", "1e-3"),
        *("--data-dir", str(glue), "--output", str(root / "runs")),
        *("--push", "--repo-id", MINILM_REPO),
    ]
    # The client is pointed at the server only while publishing (the `hub` fixture's setup, undone after).
    with pytest.MonkeyPatch.context() as monkeypatch:
        server.start()
        point_client_at(server, root / "hf_home", HUB_TOKEN, monkeypatch)
        try:
            assert publish_main([*argv, "--hub-endpoint", server.endpoint]) == 0
        finally:
            server.stop()
            close_session()
    close_session()
    assert server.internal_errors == [], "\n".join(server.internal_errors)
    # Only the push spoke to the server: publishing read nothing from the Hub, so the run is the one an
    # offline publish (HF_HUB_OFFLINE=1, as the suite runs) makes.
    reads = {"resolve", "repo_info", "tree", "paths_info", "refs", "commits", "unknown"}
    elsewhere = [r.path for r in server.requests if r.route in reads and MINILM_REPO not in r.path]
    assert elsewhere == [], elsewhere
    return root / "runs" / "minilm-none-sst2", server.root


@pytest.fixture(scope="session")
def gpt2_base(tiny_model_dir) -> Path:
    """The tiny GPT-2 folder `tiny_gpt2_run` was trained on: results.json records it by name and weights
    sha256 only, so loading the run needs it passed as `base_model=`."""
    return tiny_model_dir("gpt2")


@pytest.fixture
def fresh_cache(tmp_path: Path) -> Callable[[], Path]:
    """A new cache folder on each call: the huggingface_hub cache would otherwise mask server changes."""
    count = iter(range(1000))
    return lambda: tmp_path / f"cache-{next(count)}"


@pytest.fixture
def hub_token() -> str:
    """The token the `hub` fixture's server accepts and the client sends (as HF_TOKEN). A test module
    overrides this fixture to use a token of its own."""
    return HUB_TOKEN


def point_client_at(server: LoopbackHub, hf_home: Path, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Points this process's huggingface_hub client at `server`, with `token` as HF_TOKEN, until
    `monkeypatch` is undone.

    huggingface_hub 2.4.0 reads its environment at import time, so the environment variables (which
    subprocesses inherit) are backed by patches of `huggingface_hub.constants`. This also undoes a global
    HF_HUB_OFFLINE=1 (as CI sets it). The shared HTTP client is rebuilt with this environment (proxy
    settings); close it again once `monkeypatch` is undone.
    """
    env, overrides = client_settings(server, hf_home, token=token)
    for name in (
        "HF_OIDC_RESOURCE",
        "HUGGING_FACE_HUB_TOKEN",
        "TRANSFORMERS_OFFLINE",
        "HUGGINGFACE_CO_STAGING",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for name, value in overrides.items():
        monkeypatch.setattr(constants, name, value)
    close_session()


def serve(
    server: LoopbackHub, tmp_path: Path, token: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LoopbackHub]:
    """The body of a Hub fixture: starts `server` (a `LoopbackHub` or a subclass), points this process's
    huggingface_hub client at it with `token` (see `point_client_at`), yields it, stops it, and requires that
    it ended the test without internal errors."""
    server.start()
    point_client_at(server, tmp_path / "hf_home", token, monkeypatch)
    try:
        yield server
    finally:
        server.stop()
        close_session()
    assert server.internal_errors == [], "\n".join(server.internal_errors)


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub_token: str) -> Iterator[LoopbackHub]:
    """A running `LoopbackHub` (see tests/support/hub_server.py), with this process's huggingface_hub client
    pointed at it and `HF_TOKEN` set to `hub_token` (see `serve`)."""
    yield from serve(
        LoopbackHub(tmp_path / "hub", token=hub_token, user=HUB_USER), tmp_path, hub_token, monkeypatch
    )
