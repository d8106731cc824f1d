"""Every `>>>` example in the package's docstrings runs here, and must print what it shows.

Each module of the package is one test: its examples run with `doctest` (ELLIPSIS, NORMALIZE_WHITESPACE)
in a workspace of their own, the current folder while they run, so that they can name its files as a
reader would name theirs:

- `runs/tiny-gpt2-none-sst2/`: a real run folder (the session's `tiny_gpt2_run`), its card rendered for the
  repository `loopback-user/tiny-gpt2-none-sst2`;
- `glue/`: the small GLUE folder that run was trained and evaluated on (`glue/SST-2/{train,dev}.tsv`);
- `tiny-gpt2/`: the tiny GPT-2 folder it was trained from (its `base_model`);
- `signing-key.pem`, `signing-key.pub`: a P-256 key pair, the same in every session;
- `plugins/`: the example plugin `examples/sliding_window`, installed there (not on `sys.path`). An example
  that says it runs "with examples/sliding_window installed" runs with `plugins/` on `sys.path`.

An example that names a repository of `loopback-user/` (e.g. `loopback-user/tiny-gpt2-none-sst2`, or the
Space `loopback-user/leaderboard`) runs against a loopback Hub (see tests/support/hub_server.py), with
huggingface_hub pointed at it and `HF_TOKEN` set: it holds the run folder committed to
`loopback-user/tiny-gpt2-none-sst2`'s `main` and tagged `v1`, except for the examples of
`attncard.pipeline.publish.push`, which push it themselves. Everything else runs offline.

Examples may also use, without building them, the objects `Names` lists: `results`, `data`, `evaluation`,
`trained`, `loaded`, `model`, `tokenizer`, `batch`, `load_base`, `minilm`. Each docstring (a module's, a
class's, a function's) gets a fresh copy of the workspace, a fresh Hub and fresh objects, so its examples
cannot depend on those of another.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import doctest
import functools
import importlib
import io
import pkgutil
import re
import shutil
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import transformers
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from huggingface_hub import HfApi

from attncard.modules import get_module, rescan_modules
from attncard.pipeline.record.results import Results, TrainConfig
from attncard.pipeline.run.data import load_task
from attncard.pipeline.run.evaluate import EvalResult, evaluate
from attncard.pipeline.run.models import load_model
from attncard.pipeline.run.train import train
from conftest import HUB_TOKEN, HUB_USER, REPO_ROOT, TINY_GPT2_REPO, commit_run_folder, serve
from hub_server import LoopbackHub
from tiny_models import load_with_padded_batch

# huggingface_hub 2.4.0 itself uploads LFS parts with httpx2's deprecated `data=<file>`.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>' to upload raw bytes:DeprecationWarning")

PACKAGES = ("attncard", "attncard.pipeline", "attncard.pipeline.cli", "attncard.modules")
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
RUN_NAME = TINY_GPT2_REPO.split("/")[1]
# The modules whose examples push the run themselves: their Hub starts empty.
EMPTY_HUB_MODULES = ("attncard.pipeline.publish.push",)
# The example plugin, and what an example says to have it installed while it runs.
PLUGIN_SOURCE = REPO_ROOT / "examples" / "sliding_window"
PLUGIN_MARK = "examples/sliding_window installed"
# A private P-256 scalar: the signing examples show the fingerprint of its public key.
SIGNING_KEY_SCALAR = 0x5EED_A77C_A12D


def _raise(name: str) -> None:
    raise ImportError(f"cannot import {name}")


def package_modules() -> list[str]:
    """The names of every module of the package, subpackages included."""
    names = set(PACKAGES)
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for info in pkgutil.walk_packages(package.__path__, f"{package_name}.", onerror=_raise):
            names.add(info.name)
    return sorted(names)


MODULES = package_modules()
# The examples that train or publish a tiny run, or render every module's card, run in `make test-all`: the
# fast loop stays within its three minutes.
SLOW_MODULES = {
    "attncard.modules.checks",
    "attncard.pipeline.publish.publish",
    "attncard.pipeline.run.scaling",
    "attncard.pipeline.space.app",  # imports Gradio
    "attncard.pipeline.space.source",
    "attncard.pipeline.study.hub_leaderboard",
    "attncard.pipeline.verify.download",
    "attncard.testing",
}


def doctests_of(module: types.ModuleType) -> list[doctest.DocTest]:
    """The docstrings of `module` (and of its classes, functions, methods) that hold examples."""
    return [test for test in doctest.DocTestFinder().find(module) if test.examples]


# ------------------------------------------------------------------------------------------------------------
# The workspace


def write_signing_key(folder: Path) -> None:
    """`signing-key.pem` (private, unencrypted) and `signing-key.pub` in `folder`: the same pair each time."""
    key = ec.derive_private_key(SIGNING_KEY_SCALAR, ec.SECP256R1())
    (folder / "signing-key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (folder / "signing-key.pub").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def install_plugin(site: Path) -> None:
    """The example plugin in `site` as `pip install --target site examples/sliding_window` installs it, for
    importlib: the package, and a dist-info folder with its name, version and entry point."""
    shutil.copytree(
        PLUGIN_SOURCE / "attncard_sliding_window",
        site / "attncard_sliding_window",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    info = site / "attncard_sliding_window-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: attncard-sliding-window\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[attncard.modules]\nsliding_window = attncard_sliding_window:MODULE\n"
    )
    (info / "top_level.txt").write_text("attncard_sliding_window\n")


@pytest.fixture(scope="session")
def workspace(tiny_gpt2_run, gpt2_base, tmp_path_factory) -> Path:
    """The folder each docstring's examples get a copy of (see the module's docstring)."""
    run_dir, glue = tiny_gpt2_run
    root = tmp_path_factory.mktemp("doctest-workspace")
    shutil.copytree(run_dir, root / "runs" / RUN_NAME)
    shutil.copytree(glue, root / "glue")
    shutil.copytree(gpt2_base, root / "tiny-gpt2")
    write_signing_key(root)
    install_plugin(root / "plugins")
    return root


def names_read(source: str) -> set[str]:
    """The variables a piece of Python code reads."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }


class Names:
    """The objects examples may use without building them, each built when a docstring's examples read its
    name: afresh for each docstring, except `evaluation` and `trained`, which take seconds and are only read.

    - `results`: the workspace run's [`Results`].
    - `data`: the workspace's SST-2 rows, `load_task("sst2", "glue")`.
    - `evaluation`, `trained`: an [`EvalResult`] of `tiny-gpt2/` trained as the workspace run was (the `none`
      module, 10 steps, batch 8, lr 0.03, seed 0) and evaluated on `data`, and its [`TrainResult`].
    - `loaded`, `model`, `tokenizer`: a tiny BERT classifier (random weights, 2 layers of 4 heads of 8,
      hidden size 32, labels negative/positive) as [`load_model`] returns it, in eval mode with no module
      installed, its model and its tokenizer.
    - `batch`: three sentences of different lengths, tokenized for `model` (right-padded).
    - `load_base`: loads that tiny BERT classifier again, as a module's `dense_reference` is given it.
    - `minilm`: the MiniLM classifier publish trains by default (`load_model("minilm", ...)`), in eval mode.
    """

    LABELS = ("negative", "positive")

    def __init__(self, tiny_model_dir: Callable[[str], Path], base_model: Path, glue: Path) -> None:
        self._tiny_model_dir, self._base_model, self._glue = tiny_model_dir, base_model, glue

    def build(self, test: doctest.DocTest) -> dict[str, object]:
        """The objects `test`'s examples read."""
        read = set().union(*(names_read(example.source) for example in test.examples))
        names: dict[str, object] = {}
        if read & {"loaded", "model", "tokenizer", "batch"}:
            loaded, names["batch"] = load_with_padded_batch(self._tiny_model_dir("bert"))
            names.update(loaded=loaded, model=loaded.model, tokenizer=loaded.tokenizer)
        if "load_base" in read:
            names["load_base"] = self._load_base
        if "minilm" in read:
            names["minilm"] = load_model("minilm", self.LABELS).model.eval()
        if "results" in read:
            names["results"] = Results.load(Path("runs") / RUN_NAME)
        if "data" in read:
            names["data"] = load_task("sst2", "glue")
        if "evaluation" in read:
            names["evaluation"] = self._evaluation()
        if "trained" in read:
            names["trained"] = self._evaluation().trained
        return names

    def _load_base(self) -> torch.nn.Module:
        return load_model(str(self._tiny_model_dir("bert")), self.LABELS).model.eval()

    @functools.cache  # noqa: B019 (one instance a session)
    def _evaluation(self) -> EvalResult:
        data = load_task("sst2", self._glue)
        transformers.set_seed(0)
        loaded = load_model(str(self._base_model), data.spec.label_names)
        module = get_module("none")
        config = module.config_class()
        module.apply(loaded.model, config)
        trained = train(loaded, data, TrainConfig(steps=10, batch_size=8, lr=3e-2), module, config)
        return evaluate(trained, data)


@pytest.fixture(scope="session")
def names(tiny_model_dir, tiny_gpt2_run, gpt2_base) -> Names:
    return Names(tiny_model_dir, gpt2_base, tiny_gpt2_run[1])


@contextlib.contextmanager
def loopback_hub(folder: Path, seeded: bool) -> Iterator[LoopbackHub]:
    """A loopback Hub with this process's client pointed at it; holding the workspace run (tag `v1`) when
    `seeded`."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        serving = serve(
            LoopbackHub(folder / "hub", token=HUB_TOKEN, user=HUB_USER), folder, HUB_TOKEN, monkeypatch
        )
        hub = next(serving)
        try:
            if seeded:
                commit = commit_run_folder(hub.endpoint, TINY_GPT2_REPO, Path("runs") / RUN_NAME)
                HfApi(endpoint=hub.endpoint, token=HUB_TOKEN).create_tag(
                    TINY_GPT2_REPO, tag="v1", revision=commit
                )
            yield hub
        finally:
            next(serving, None)  # stops the server, and checks it met no internal error


@contextlib.contextmanager
def isolated(folder: Path, plugin: bool) -> Iterator[None]:
    """Runs the block with `plugins/` (the example plugin) on `sys.path` when `plugin`, and undoes what the
    block did to `sys.path`, to `sys.modules` (modules imported from `folder`) and to the module registry."""
    path, modules = list(sys.path), set(sys.modules)
    if plugin:
        sys.path.insert(0, str(folder / "plugins"))
        rescan_modules()
    try:
        yield
    finally:
        imported = [
            name
            for name in set(sys.modules) - modules
            if Path(getattr(sys.modules[name], "__file__", None) or "/").resolve().is_relative_to(folder)
        ]
        for name in imported:
            del sys.modules[name]
        if sys.path != path or imported:
            sys.path[:] = path
            rescan_modules()


# ------------------------------------------------------------------------------------------------------------
# The tests


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_MODULES else name for name in MODULES]
)
def test_examples_run(
    name: str, workspace: Path, names: Names, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    report = io.StringIO()
    for index, test in enumerate(doctests_of(module)):
        folder = shutil.copytree(workspace, tmp_path / str(index) / "workspace").resolve()
        monkeypatch.chdir(folder)
        source = "\n".join(example.source for example in test.examples)
        hub = loopback_hub(folder.parent, name not in EMPTY_HUB_MODULES)
        with (
            hub if f"{HUB_USER}/" in source else contextlib.nullcontext(),
            isolated(folder, PLUGIN_MARK in source),
        ):
            test.globs.update(names.build(test))
            runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()


EXAMPLE_LINE = re.compile(r"^\s*>>>(?: |$)")
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def docstring_owners(tree: ast.AST, qualname: str, owners: dict[int, str]) -> dict[int, str]:
    """`owners` with, for each line of a docstring in `tree`, the qualified name of what it documents."""
    body = getattr(tree, "body", None)
    if isinstance(tree, DOCUMENTED) and body and isinstance(body[0], ast.Expr):
        value = body[0].value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            owners.update(dict.fromkeys(range(value.lineno, value.end_lineno + 1), qualname))
    for child in ast.iter_child_nodes(tree):
        named = isinstance(child, DOCUMENTED) and not isinstance(child, ast.Module)
        docstring_owners(child, f"{qualname}.{child.name}" if named else qualname, owners)
    return owners


def test_every_example_is_collected() -> None:
    """A `>>>` line that no doctest runs (in a string that is not a docstring, in a nested function, in a file
    no module of the package is) must not be: each one must be an example of a docstring the finder collects,
    which holds as many examples as `>>>` lines."""
    examples: dict[str, int] = {}  # qualified name -> examples collected there
    files: dict[Path, str] = {}  # file -> module name
    for name in MODULES:
        module = importlib.import_module(name)
        files[Path(module.__file__).resolve()] = name
        examples.update((test.name, len(test.examples)) for test in doctests_of(module))
    folders = {path.parent for path in files}
    problems = []
    for path in sorted(file for folder in folders for file in folder.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path not in files:
            problems += (
                [f"{path}: not a module of the package, yet it holds examples"] if ">>>" in text else []
            )
            continue
        owners = docstring_owners(ast.parse(text), files[path], {})
        counted: collections.Counter[str] = collections.Counter()
        for number, line in enumerate(text.splitlines(), start=1):
            if EXAMPLE_LINE.match(line):
                owner = owners.get(number)
                counted[owner] += 1
                if owner not in examples:
                    problems.append(f"{path}:{number}: not in a docstring doctest collects: {line.strip()}")
        problems += [
            f"{path}: {owner} holds {count} `>>>` lines but doctest finds {examples[owner]} examples there"
            for owner, count in counted.items()
            if owner in examples and examples[owner] != count
        ]
    assert not problems, "examples no doctest runs:\n" + "\n".join(problems)
