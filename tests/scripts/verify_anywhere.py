"""`make test-anywhere`: attncard's checks of published runs, run in environments other than the lock's.

A researcher downloads and verifies our runs with the numpy, scipy, matplotlib and torch they already have,
anywhere in the ranges of pyproject.toml. This script builds such environments, each a venv under
`.venv-anywhere/<name>` (kept, and reused while its spec is the same), and in each one runs what a researcher
would:

1. `attncard verify --predictions` of every committed card (`cards/*/`, on the GLUE files of `--glue`,
   default $GLUE_DIR; skipped, and said so, where there are none) and `attncard lint cards`;
2. `attncard download` of a fresh tiny run, then `attncard verify --predictions` and `attncard verify` (the
   model evaluated again) of what it downloaded. The run is made once, here, in the lock's environment (the
   one running this script: `.venv`), by `publish` on a tiny random GPT-2 and a small SST-2 folder, and pushed
   to a loopback Hub (tests/support/hub_server.py) that this script serves for the environments' clients;
3. `attncard download` of a forged copy of that run, pushed under another repo id: its training-loss plot
   drawn again with one step's loss moved and resealed into the manifest (and the card), which every
   environment must refuse.

The environments (`--env`, repeatable):

- `floors`: numpy 1.26.4, scipy 1.11.4, matplotlib 3.8.4, pyarrow below 26 (pyarrow 26 fails to import
  beside numpy 1, though its metadata allows it) and pandas below 3 (which needs numpy 2), the rest as in
  requirements.lock;
- `newest`: the newest releases pyproject.toml's ranges allow, torch included, from the package indexes
  (no local wheel stands in), on the lock's Python;
- `py313`: the same on Python 3.13 (`--python313`);
- `matrix`: matplotlib 3.8.4, 3.9.4, 3.10.9 and the newest 3.11, and scipy 1.11.4, 1.13.1, 1.15.3 and the
  newest 1.17, each installed beside the lock. They are paired oldest with oldest (4 environments, not
  the 16 of every combination): each release is met once, which is what the ranges claim;
- `wheel`: attncard's wheel, built here, `pip install`ed into a fresh venv beside matplotlib 3.8.4 and
  scipy 1.11.4 (pyarrow below 26, the locked torch): the install must resolve, then `import attncard` and
  `attncard --help` run. No checks of runs there.

`--matplotlib X --scipy Y` adds one environment of those two beside the lock. "Beside the lock": the
lock's pins are constraints, less those of the packages named; a scipy older than 1.13 brings numpy 1.26.4,
pyarrow below 26 and pandas below 3 with it, a newer one the newest numpy it allows (1.13.1 caps numpy below
2.3, under the lock's). uv installs them, from PyPI and what pip is told of in the environment
(PIP_FIND_LINKS, PIP_EXTRA_INDEX_URL: the CPU torch of requirements.lock), but `newest` and `py313` take no
find-links; the `wheel` check uses pip, as a researcher would. A reused `newest` or `py313` holds the newest
releases of the day it was built: remove its folder to take later ones.

Each step prints one line, PASS, FAIL or SKIP with its seconds (the lines that say why below a FAIL); the
exit status is 1 when any step failed. A first build of `newest` or `py313` downloads a CUDA build of torch
from PyPI (several GB). On 2 cores each environment's checks take 3 to 5 minutes, most of it the committed
cards' `verify --predictions`.

Usage: .venv/bin/python tests/scripts/verify_anywhere.py --env floors --env newest [--python313 PATH] [--glue
DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
ANYWHERE = ROOT / ".venv-anywhere"
LOCK = ROOT / "requirements.lock"
CARDS = ROOT / "cards"
# uv installs the environments, as `make test-floors` does: pip takes minutes to resolve each on 2 cores.
UV = Path(sys.executable).parent / "uv"
SPEC_FILE = "anywhere-spec.json"  # in each environment: the spec it was built from, to reuse it

# scipy 1.11 and 1.12 are built for numpy 1. Beside it: pyarrow (from datasets) below 26, which fails to
# import with numpy 1 though its metadata does not say so, and pandas below 3, whose metadata does (numpy
# 2.0.2 or later); the lock's pins of both are released.
NUMPY_1 = ("numpy==1.26.4", "pyarrow<26", "pandas<3")
OLDEST_SCIPY_FOR_NUMPY_2 = Version("1.13")
FLOORS = {"numpy": "1.26.4", "scipy": "1.11.4", "matplotlib": "3.8.4"}
# A release, or a specifier: `~=3.11.0` is the newest 3.11.
MATRIX_MATPLOTLIB = ("3.8.4", "3.9.4", "3.10.9", "~=3.11.0")
MATRIX_SCIPY = ("1.11.4", "1.13.1", "1.15.3", "~=1.17.0")
NAMED = ("floors", "newest", "py313", "matrix", "wheel")

FRESH_REPO = "loopback-user/tiny-gpt2-none-sst2"  # the fresh run, as published
FORGED_REPO = "loopback-user/tiny-gpt2-none-sst2-forged"  # the same run, its loss plot redrawn and resealed
HUB_TOKEN = "hf_loopback_anywhere_token"
HUB_USER = "loopback-user"
LOSS_PLOT = "training_loss.png"
FORGED_STEP_DELTA = 0.05  # how far the forged plot moves one step's loss (tests/card/test_plot_compare.py's)


@dataclasses.dataclass(frozen=True)
class Spec:
    """One environment to build.

    Attributes:
        name: its folder under `.venv-anywhere/`.
        python: the interpreter its venv is made from.
        requirements: the requirement lines pip installs beside attncard (editable, from this checkout).
        beside_lock: the lock's pins constrain everything else.
        indexes_only: no local wheel (this machine's CPU torch) stands in for the indexes' newest.
    """

    name: str
    python: str
    requirements: tuple[str, ...] = ()
    beside_lock: bool = False
    indexes_only: bool = False


def release_requirement(name: str, release: str) -> str:
    """`matplotlib==3.8.4` from `3.8.4`; a specifier (`~=3.11.0`) is kept as it is."""
    return f"{name}{release}" if release[0] in "~<>=!" else f"{name}=={release}"


def needs_numpy_1(scipy: str) -> bool:
    """Whether this scipy release (or specifier) is one built for numpy 1 only."""
    requirement = Requirement(release_requirement("scipy", scipy))
    pinned = [Version(s.version) for s in requirement.specifier if s.operator == "=="]
    return bool(pinned) and pinned[0] < OLDEST_SCIPY_FOR_NUMPY_2


def beside_lock(name: str, python: str, matplotlib: str, scipy: str) -> Spec:
    """The lock with this matplotlib and scipy, and the numpy that scipy allows (numpy 1, pyarrow below 26 and
    pandas below 3 for a scipy built for numpy 1)."""
    requirements = [release_requirement("matplotlib", matplotlib), release_requirement("scipy", scipy)]
    # Each scipy caps the numpy it was built for (1.13.1: below 2.3), under the lock's at times: numpy is
    # released from the lock's pins, to the newest that scipy and the rest allow.
    requirements += NUMPY_1 if needs_numpy_1(scipy) else ("numpy",)
    return Spec(name, python, tuple(requirements), beside_lock=True)


def matrix_pairs() -> list[tuple[str, str]]:
    """The matrix's (matplotlib, scipy) pairs: oldest with oldest, each listed release once."""
    return list(zip(MATRIX_MATPLOTLIB, MATRIX_SCIPY, strict=True))


def pair_name(matplotlib: str, scipy: str) -> str:
    """The folder name of one pair: `mpl3.8.4-scipy1.11.4`, `mpl3.11-scipy1.17` for the newest of a series."""
    return f"mpl{matplotlib.lstrip('~=').removesuffix('.0')}-scipy{scipy.lstrip('~=').removesuffix('.0')}"


def specs(names: list[str], lock_python: str, python313: str, pairs: list[tuple[str, str]]) -> list[Spec]:
    """The specs of the named environments (`wheel` has none: it is built fresh) and of the extra pairs."""
    chosen: list[Spec] = []
    for name in names:
        if name == "floors":
            floors = tuple(
                f"{package}=={release}" for package, release in FLOORS.items() if package != "numpy"
            )
            chosen.append(Spec("floors", lock_python, (*floors, *NUMPY_1), beside_lock=True))
        elif name == "newest":
            chosen.append(Spec("newest", lock_python, indexes_only=True))
        elif name == "py313":
            chosen.append(Spec("py313", python313, indexes_only=True))
        elif name == "matrix":
            chosen += [beside_lock(pair_name(*pair), lock_python, *pair) for pair in matrix_pairs()]
    chosen += [beside_lock(pair_name(*pair), lock_python, *pair) for pair in pairs]
    return chosen


def lock_pins(lock_text: str) -> dict[str, str]:
    """`{canonical name: "name==version"}` of every package requirements.lock pins (its hashes left out)."""
    pins = {}
    for line in lock_text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if match:
            pins[canonicalize_name(match[1])] = f"{match[1]}=={match[2]}"
    return pins


def constraint_lines(spec: Spec, lock_text: str) -> list[str]:
    """The pip constraints of `spec`: the lock's pins less those of the packages its requirements name."""
    if not spec.beside_lock:
        return []
    named = {canonicalize_name(Requirement(line).name) for line in spec.requirements}
    return [pin for name, pin in lock_pins(lock_text).items() if name not in named]


@dataclasses.dataclass
class Step:
    """One line of the report."""

    environment: str
    name: str
    outcome: str  # PASS, FAIL or SKIP
    seconds: float
    detail: str = ""

    def line(self) -> str:
        head = f"{self.outcome} {self.environment}: {self.name} ({self.seconds:.0f} s)"
        if self.outcome == "PASS" or not self.detail:
            return head + (f"  {self.detail}" if self.outcome == "PASS" and self.detail else "")
        return head + "\n" + "\n".join(f"    {line}" for line in self.detail.splitlines())


@dataclasses.dataclass
class Report:
    """The steps run so far, printed as they end."""

    steps: list[Step] = dataclasses.field(default_factory=list)

    def add(self, step: Step) -> Step:
        self.steps.append(step)
        print(step.line(), flush=True)
        return step

    def exit_code(self) -> int:
        return 1 if any(step.outcome == "FAIL" for step in self.steps) else 0


def tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, str]:
    """`(exit status, stdout and stderr together)` of a command."""
    try:
        done = subprocess.run(
            command,
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
    except FileNotFoundError:  # an interpreter that is not there (--python313): a failed step, not a crash
        return 127, f"{command[0]}: not found"
    return done.returncode, done.stdout


def install_command(spec: Spec, python: Path, constraints: Path, environ: dict[str, str]) -> list[str]:
    """uv's install of `spec` into the venv of `python`: its requirements and attncard (editable), the lock's
    constraints when beside it. Where packages come from is what pip is told in `environ`: PIP_FIND_LINKS
    (this machine's CPU torch; not for `indexes_only`) and PIP_EXTRA_INDEX_URL (PyTorch's CPU index in
    GitHub's CI), each release taken from whichever offers the best, as pip does."""
    command = [str(UV), "pip", "install", "--quiet", "--python", str(python), "--index-strategy"]
    command.append("unsafe-best-match")
    if spec.beside_lock:
        command += ["--constraint", str(constraints)]
    if not spec.indexes_only:
        for link in environ.get("PIP_FIND_LINKS", "").split():
            command += ["--find-links", link]
    for index in environ.get("PIP_EXTRA_INDEX_URL", "").split():
        command += ["--extra-index-url", index]
    return [*command, *spec.requirements, "--editable", str(ROOT)]


def spec_record(spec: Spec, lock_text: str) -> dict[str, object]:
    """What an environment was built from: the same record means it can be reused as it is."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    dependencies = pyproject[pyproject.index("dependencies = [") : pyproject.index("[project.urls]")]
    record = {
        **dataclasses.asdict(spec),
        "constraints": hashlib.sha256("\n".join(constraint_lines(spec, lock_text)).encode()).hexdigest(),
        "dependencies": hashlib.sha256(dependencies.encode()).hexdigest(),
    }
    return json.loads(json.dumps(record))  # as it reads back from SPEC_FILE: the tuples become lists


def reusable(folder: Path, record: dict[str, object]) -> bool:
    """Whether `folder` holds an environment built from `record`."""
    spec_path = folder / SPEC_FILE
    return spec_path.is_file() and json.loads(spec_path.read_text(encoding="utf-8")) == record


def build(spec: Spec, lock_text: str, report: Report) -> Path | None:
    """The environment of `spec`, built (or reused); its folder, or None when it could not be built."""
    folder = ANYWHERE / spec.name
    record = spec_record(spec, lock_text)
    start = time.monotonic()
    if reusable(folder, record):
        report.add(Step(spec.name, "build", "PASS", time.monotonic() - start, "(reused)"))
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    status, output = run([spec.python, "-m", "venv", str(folder)])
    if status == 0:
        constraints = folder / "constraints.txt"
        constraints.write_text("\n".join(constraint_lines(spec, lock_text)) + "\n", encoding="utf-8")
        status, output = run(install_command(spec, folder / "bin" / "python", constraints, dict(os.environ)))
    if status != 0:
        report.add(Step(spec.name, "build", "FAIL", time.monotonic() - start, tail(output)))
        return None
    (folder / SPEC_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    report.add(Step(spec.name, "build", "PASS", time.monotonic() - start))
    return folder


VERSIONS_SCRIPT = (
    "import sys; from importlib import metadata; "
    "names = ('numpy', 'scipy', 'matplotlib', 'torch', 'pyarrow', 'transformers'); "
    "print(f'python {sys.version.split()[0]}', *(f'{n} {metadata.version(n)}' for n in names), sep=', ')"
)


class FreshRunError(Exception):
    """The fresh run could not be published in the lock's environment: no environment can be checked."""


@dataclasses.dataclass(frozen=True)
class FreshRun:
    """The fresh tiny run on the loopback Hub, and what checking it needs."""

    glue: Path  # its small SST-2 folder
    base_model: Path  # the tiny GPT-2 it was trained on (results.json names it by path and weights sha256)
    hub_env: dict[str, str]  # the environment variables that point a client at the loopback Hub


def make_fresh_run(work: Path) -> tuple[Path, Path, Path]:
    """`(run folder, GLUE folder, base model)`: a tiny GPT-2 run published here, in the lock's environment,
    the way tests/conftest.py's `tiny_gpt2_run` makes one."""
    from attncard.testing import save_tiny_model
    from conftest import write_sst2_folder

    base_model = save_tiny_model("gpt2", work / "tiny-gpt2")
    glue = write_sst2_folder(work / "glue")
    publish = [str(Path(sys.executable).parent / "publish"), "--model", str(base_model), "--module", "none"]
    publish += ["--steps", "10", "--batch-size", "8", "--lr", "3e-2", "--data-dir", str(glue)]
    publish += ["--output", str(work / "runs"), "--repo-id", FRESH_REPO]
    status, output = run(publish)
    if status != 0:
        raise FreshRunError(f"publish of the fresh run failed:\n{tail(output)}")
    return work / "runs" / "tiny-gpt2-none-sst2", glue, base_model


def forge_loss_plot(run_dir: Path, forged_dir: Path) -> Path:
    """A copy of the run whose training-loss plot is drawn with one step's loss moved by FORGED_STEP_DELTA,
    resealed: the manifest and the card written again around it, as tests/card/test_plot_compare.py forges
    one."""
    from attncard.pipeline.card.plots import write_plots
    from attncard.pipeline.card.render import render_card
    from attncard.pipeline.record.manifest import CARD_FILE, build_manifest
    from attncard.pipeline.record.results import Results

    shutil.copytree(run_dir, forged_dir)
    results = Results.load(forged_dir)
    losses = list(results.training.losses)
    losses[len(losses) // 2] += FORGED_STEP_DELTA
    moved = dataclasses.replace(results, training=dataclasses.replace(results.training, losses=losses))
    drawn = forged_dir.parent / "forged-plots"
    drawn.mkdir()
    plots = write_plots(moved, drawn)
    shutil.copy2(drawn / LOSS_PLOT, forged_dir / LOSS_PLOT)
    results.manifest = {name: d for name, d in build_manifest(forged_dir).items() if name != CARD_FILE}
    (forged_dir / CARD_FILE).write_text(render_card(results, plots), encoding="utf-8")
    results.manifest = build_manifest(forged_dir)
    results.save(forged_dir)
    return forged_dir


@contextlib.contextmanager
def serve_fresh_run(work: Path) -> Iterator[FreshRun]:
    """Makes the fresh run and its forged copy, serves both from a loopback Hub for the block."""
    sys.path[:0] = [str(TESTS), str(TESTS / "support")]  # conftest, and the servers and helpers it imports
    from hub_server import LoopbackHub, client_settings

    run_dir, glue, base_model = make_fresh_run(work)
    forged_dir = forge_loss_plot(run_dir, work / "forged" / run_dir.name)
    hub = LoopbackHub(work / "hub", token=HUB_TOKEN, user=HUB_USER).start()
    hub_env, overrides = client_settings(hub, work / "hf_home", token=HUB_TOKEN)
    # This process pushes: its client, which read its settings at import, is pointed at the Hub as the tests'
    # `hub` fixture points it (the environments' clients get `hub_env`).
    from huggingface_hub import constants
    from huggingface_hub.utils import close_session

    from conftest import commit_run_folder

    for setting, value in overrides.items():
        setattr(constants, setting, value)
    close_session()
    try:
        commit_run_folder(hub.endpoint, FRESH_REPO, run_dir, token=HUB_TOKEN)
        commit_run_folder(hub.endpoint, FORGED_REPO, forged_dir, token=HUB_TOKEN)
        yield FreshRun(glue=glue, base_model=base_model, hub_env=hub_env)
    finally:
        hub.stop()


def timed(report: Report, environment: str, name: str, command: list[str], **kwargs) -> Step:
    """Runs `command` as one step that passes when it exits 0."""
    start = time.monotonic()
    status, output = run(command, **kwargs)
    outcome = "PASS" if status == 0 else "FAIL"
    return report.add(
        Step(environment, name, outcome, time.monotonic() - start, "" if status == 0 else tail(output))
    )


def check_cards(report: Report, name: str, attncard: str, glue: Path | None) -> None:
    """`verify --predictions` of every committed card, then `lint cards`."""
    if glue is None:
        report.add(
            Step(name, "verify --predictions cards/*", "SKIP", 0.0, "no GLUE files (--glue, $GLUE_DIR)")
        )
    else:
        start = time.monotonic()
        cards = sorted(path for path in CARDS.iterdir() if (path / "results.json").is_file())
        failed = []
        for card in cards:
            status, output = run([attncard, "verify", "--predictions", str(card), "--data-dir", str(glue)])
            if status != 0:
                failed.append(f"{card.name}: {tail(output, 2)}")
        outcome = "FAIL" if failed else "PASS"
        step_name = f"verify --predictions cards/* ({len(cards) - len(failed)} of {len(cards)})"
        report.add(Step(name, step_name, outcome, time.monotonic() - start, "\n".join(failed)))
    timed(report, name, "lint cards", [attncard, "lint", str(CARDS)])


def check_fresh_run(report: Report, name: str, attncard: str, fresh: FreshRun, work: Path) -> None:
    """Download the fresh run and verify it both ways; download the forged copy, which must be refused."""
    env = {**os.environ, **fresh.hub_env, "HF_HOME": str(work / "hf_home"), "HF_HUB_CACHE": str(work / "hub")}
    downloaded = work / "downloaded"
    endpoint = ["--hub-endpoint", fresh.hub_env["HF_ENDPOINT"]]
    step = timed(
        report,
        name,
        "download fresh run",
        [attncard, "download", FRESH_REPO, *endpoint, "--output", str(downloaded)],
        env=env,
    )
    if step.outcome == "PASS":
        data = ["--data-dir", str(fresh.glue)]
        timed(
            report,
            name,
            "verify --predictions fresh run",
            [attncard, "verify", "--predictions", str(downloaded), *data],
        )
        model = [*data, "--base-model", str(fresh.base_model)]
        timed(report, name, "verify fresh run (the model)", [attncard, "verify", str(downloaded), *model])
    start = time.monotonic()
    forged = work / "forged"
    status, output = run([attncard, "download", FORGED_REPO, *endpoint, "--output", str(forged)], env=env)
    # Refused, and for its plot: another refusal would not show that the plot was checked.
    refused = status != 0 and LOSS_PLOT in output and not forged.exists()
    detail = tail(output, 1) if refused else f"exit {status}, not refused for {LOSS_PLOT}:\n{tail(output)}"
    report.add(
        Step(
            name,
            "download forged plot refused",
            "PASS" if refused else "FAIL",
            time.monotonic() - start,
            detail,
        )
    )


def check_environment(
    report: Report, spec: Spec, lock_text: str, glue: Path | None, fresh: FreshRun, work: Path
) -> None:
    folder = build(spec, lock_text, report)
    if folder is None:
        return
    status, versions = run([str(folder / "bin" / "python"), "-c", VERSIONS_SCRIPT], cwd=work)
    report.add(Step(spec.name, "versions", "PASS" if status == 0 else "FAIL", 0.0, versions.strip()))
    attncard = str(folder / "bin" / "attncard")
    check_cards(report, spec.name, attncard, glue)
    own = work / spec.name
    own.mkdir()
    check_fresh_run(report, spec.name, attncard, fresh, own)


def check_wheel(report: Report, lock_python: str, lock_text: str, work: Path) -> None:
    """attncard's wheel installs beside matplotlib 3.8.4 and scipy 1.11.4 (numpy 1, pyarrow below 26, the
    locked torch) in a fresh venv, then imports and runs."""
    folder = ANYWHERE / "wheel"
    shutil.rmtree(folder, ignore_errors=True)
    wheels = work / "wheels"
    step = timed(
        report,
        "wheel",
        "build attncard's wheel",
        [
            lock_python,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(ROOT),
        ],
    )
    if step.outcome == "FAIL":
        return
    [wheel] = wheels.glob("attncard-*.whl")
    start = time.monotonic()
    status, output = run([lock_python, "-m", "venv", str(folder)])
    if status == 0:
        torch = lock_pins(lock_text)["torch"]
        beside = [release_requirement(n, FLOORS[n]) for n in ("matplotlib", "scipy")] + ["pyarrow<26", torch]
        status, output = run(
            [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel), *beside]
        )
    report.add(
        Step(
            "wheel",
            "pip install beside matplotlib 3.8.4, scipy 1.11.4",
            "PASS" if status == 0 else "FAIL",
            time.monotonic() - start,
            "" if status == 0 else tail(output),
        )
    )
    if status != 0:
        return
    # From another folder: in the checkout, its attncard/ folder would be imported instead of the wheel's.
    timed(
        report,
        "wheel",
        "import attncard",
        [str(folder / "bin" / "python"), "-c", "import attncard"],
        cwd=work,
    )
    timed(report, "wheel", "attncard --help", [str(folder / "bin" / "attncard"), "--help"], cwd=work)
    status, versions = run([str(folder / "bin" / "python"), "-c", VERSIONS_SCRIPT], cwd=work)
    report.add(Step("wheel", "versions", "PASS" if status == 0 else "FAIL", 0.0, versions.strip()))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--env", action="append", choices=NAMED, default=[], help="an environment (repeatable)"
    )
    parser.add_argument("--matplotlib", help="with --scipy: one more environment, these two beside the lock")
    parser.add_argument("--scipy", help="with --matplotlib")
    parser.add_argument(
        "--python313", default="python3.13", help="the Python 3.13 of py313 (default: python3.13)"
    )
    parser.add_argument(
        "--glue",
        type=Path,
        default=os.environ.get("GLUE_DIR") or None,
        help="the GLUE files (default: $GLUE_DIR)",
    )
    args = parser.parse_args(argv)
    if (args.matplotlib is None) != (args.scipy is None):
        parser.error("--matplotlib and --scipy go together")
    if not args.env and args.matplotlib is None:
        parser.error("name an environment: --env, or --matplotlib X --scipy Y")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    lock_text = LOCK.read_text(encoding="utf-8")
    pairs = [(args.matplotlib, args.scipy)] if args.matplotlib else []
    chosen = specs(args.env, sys.executable, args.python313, pairs)
    glue = args.glue.resolve() if args.glue and (args.glue / "sst2" / "dev.tsv").is_file() else None
    report = Report()
    ANYWHERE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="anywhere-") as temporary:
        work = Path(temporary)
        if chosen:
            start = time.monotonic()
            try:
                with serve_fresh_run(work / "fresh") as fresh:
                    report.add(
                        Step("lock", "fresh run published and pushed", "PASS", time.monotonic() - start)
                    )
                    for spec in chosen:
                        check_environment(report, spec, lock_text, glue, fresh, work)
            except FreshRunError as error:
                report.add(
                    Step(
                        "lock", "fresh run published and pushed", "FAIL", time.monotonic() - start, str(error)
                    )
                )
        if "wheel" in args.env:
            check_wheel(report, sys.executable, lock_text, work)
    failed = [f"{step.environment}: {step.name}" for step in report.steps if step.outcome == "FAIL"]
    print(f"{len(failed)} of {len(report.steps)} steps failed" + (": " + "; ".join(failed) if failed else ""))
    return report.exit_code()


if __name__ == "__main__":
    sys.exit(main())
