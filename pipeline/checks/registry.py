"""The checks of a run, in one ordered list: what `attncard download`, `attncard verify --predictions` and
`attncard summary --hub` run, each with the profile it needs.

A run reaches attncard as a hostile folder: fetched from the Hub by a download or a leaderboard, or handed
over as a local folder or its `cards/` copy. Every command reads it through the same [`CHECKS`], in their
order; a [`Profile`] says what a command has (the weights, torch, predictions.csv, a Hub revision, …), and
a command runs every check whose `needs` its profile has, in registry order ([`run_checks`]). Adding a check
is one entry in `CHECKS`: every command whose profile has its needs runs it, and only those. Its row goes in
docs/downloading.md's table and its name in tests/checks/test_checks.py's pinned order, which both tests hold
to this list.

Each check reads a [`CheckedRun`] (the folder, where it came from, what the caller asked of it) and records
what it read there (results.json, the module, predictions.csv, the recomputed figures, the signature) for
the checks after it; each refuses with one line (an [`AttncardError`]) or returns. The checks, in order
(D: download, P: verify --predictions, H: summary --hub):

    check                    needs               D P H  refuses
    run tag                  HUB                 x . x  a results.json other than the one the run tag names
    files                    -                   x x x  results.json unreadable or not the expected one,
                                                        pickle files, a file missing, changed or not in the
                                                        manifest, a file no run holds, remote code
    listed repository        LISTING             . . x  a card rendered for another repository than listed
    module                   TORCH               x . .  an attention module not installed here, or another
    adapter config           TORCH               x . .  an adapter_config.json publish does not write
    figures                  -                   x x x  results.json's figures against its own counts
    stock load record        TORCH               x . .  a stock-load record that contradicts the module
    predictions listed       PREDICTIONS         . x x  a run whose manifest lists no predictions.csv
    predictions              -                   x x x  a predictions.csv that contradicts results.json
    figures from predictions RECOMPUTE           . x x  (records the recomputed figures: a difference is a
                                                        MISMATCH, and no check after it runs)
    card                     -                   x x x  a card, plot, .eval_results/ entry or LICENSE that
                                                        results.json does not render
    signature                SIGNATURE           x . x  a signature missing, by another signer, or broken
    status                   WEIGHTS             x . .  a FAIL run, unless asked to load it anyway

`figures from predictions` does not refuse: it records a [`Reverification`], the answer of
`verify --predictions` (exit 1 when a figure differs), and a run whose figures differ is settled there. The
card check comes after it, so that such a MISMATCH keeps its output. A check that needs TORCH imports torch,
transformers or peft (the module, peft's `LoraConfig`); no profile without TORCH runs one, so
`verify --predictions` and `summary --hub` import none (tests/project/test_layers.py runs them with those
packages made to fail).

The checks are thin: each calls what does the work, grouped by what it reads: the files and the record's
figures ([`pipeline.checks.integrity`]), the module and `adapter_config.json`
([`pipeline.checks.module_and_adapter`]), predictions.csv ([`pipeline.checks.predictions`]) and the figures
recomputed from it ([`pipeline.checks.reverification`]).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...modules import AttentionModule
from ..hub.signing import SignatureReport, SignerOptions, verify_run_signature
from ..record.errors import FailedCheckpointError, IntegrityError
from ..record.manifest import PREDICTIONS_FILE, RESULTS_FILE, WEIGHTS_SUFFIX
from ..record.results import Results, Status
from ..record.text import SHA_PREFIX
from .card_render import OtherMatplotlibProblem, card_problems
from .figures import recorded_figure_problems, stock_load_problems
from .integrity import check_run_tag, read_checked_files, refuse_contradictions
from .module_and_adapter import lora_config, module_and_config
from .predictions import Predictions, read_predictions
from .reverification import Reverification, predictions_reverification

UNSIGNED = SignatureReport(signed=False, method=None, signer="", verified=False)


class Need(enum.Enum):
    """What a check needs of the command that runs it; a [`Profile`] lists what a command has."""

    HUB = "a Hub repository at a revision: its run tag names results.json"
    LISTING = "the run was listed as a repository of the organisation (summary --hub)"
    WEIGHTS = "the weights are fetched, to be loaded"
    TORCH = "torch, transformers and peft may be imported"
    PREDICTIONS = "the run must have predictions.csv"
    RECOMPUTE = "the figures are recomputed from predictions.csv and the task's data"
    SIGNATURE = "model.sig is checked, against a signer when one is required"


@dataclass(frozen=True)
class Profile:
    """What a command has: it runs every check of [`CHECKS`] whose needs are all in `has`, in order.

    Example:
        >>> [check.name for check in checks_of(VERIFY_PREDICTIONS)][:3]
        ['files', 'figures', 'predictions listed']
    """

    name: str
    has: frozenset[Need]


@dataclass
class CheckedRun:
    """A run folder under check: what the caller asked of it, then what the checks read there.

    Attributes:
        folder: the run folder (a Hub snapshot, a local folder, or a `cards/` copy).
        where: the run, for messages: `org/name@<commit>` or the folder.
        repo_id: the Hub repository (for a leaderboard, the one listed), or None for a local folder.
        revision: the revision asked for; a run tag is checked against results.json.
        expected_sha256: the sha256 results.json must have (at least its first 32 hex digits), or None.
        allow_failed: accept a run whose status is FAIL.
        signer: who model.sig must be signed by ([`SignerOptions`]); empty: reported, not required.
        data_dir: where the recorded task's data are read, for the figures from predictions.
        baselines: folders holding the dense runs a paired verdict names (None: the folder's parent).
        results: results.json, once the `files` check read it.
        module, module_config: the recorded attention module and its config (the `module` check).
        predictions, second_predictions: predictions.csv as read and checked (and MNLI's mismatched), None
            when the manifest lists none.
        reverification: the figures recomputed from predictions.csv, recorded against recomputed.
        signature: what model.sig says and whether it was verified.

    Example:
        >>> run = CheckedRun(Path("runs/tiny-gpt2-none-sst2"), "run", data_dir="glue")
        >>> run = run_checks(VERIFY_PREDICTIONS, run)
        >>> run.reverification.matches, run.results.repo_name
        (True, 'tiny-gpt2-none-sst2')
    """

    folder: Path
    where: str
    repo_id: str | None = None
    revision: str | None = None
    expected_sha256: str | None = None
    allow_failed: bool = False
    signer: SignerOptions = field(default_factory=SignerOptions)
    data_dir: str | os.PathLike | None = None
    baselines: list[str | os.PathLike] | None = None
    results: Results | None = None
    module: AttentionModule | None = None
    module_config: object = None
    predictions: Predictions | None = None
    second_predictions: Predictions | None = None
    reverification: Reverification | None = None
    signature: SignatureReport = UNSIGNED

    def read(self) -> Results:
        """results.json as the `files` check read it."""
        if self.results is None:  # a check placed before `files` in CHECKS: a bug of the registry
            raise RuntimeError(f"{self.where}: a check read results.json before the files check ran")
        return self.results

    @property
    def differs(self) -> bool:
        """Whether a figure recomputed from predictions.csv differs from the recorded one."""
        return self.reverification is not None and not self.reverification.matches


@dataclass(frozen=True)
class Check:
    """One check of [`CHECKS`]: `function(run, profile)` refuses the run with an [`AttncardError`] or returns,
    having recorded in `run` what it read; it runs in each profile that has every one of `needs`.

    Example:
        >>> CHECKS[0].name, [need.name for need in CHECKS[0].needs]
        ('run tag', ['HUB'])
    """

    name: str
    function: Callable[[CheckedRun, Profile], None]
    needs: frozenset[Need]
    doc: str


# ------------------------------------------------------------------------------------------------------------
# The checks, each a function of (run, profile)


def _run_tag(run: CheckedRun, profile: Profile) -> None:
    check_run_tag(run.folder, run.revision, run.where)


def _files(run: CheckedRun, profile: Profile) -> None:
    run.results = read_checked_files(
        run.folder,
        run.expected_sha256,
        run.where,
        hub=run.repo_id is not None,
        weights_optional=Need.WEIGHTS not in profile.has,  # a cards copy, a leaderboard's copy: no weights
    )


def _listed_repository(run: CheckedRun, profile: Profile) -> None:
    results = run.read()
    if results.repo_id != run.repo_id:
        raise IntegrityError(
            f"{run.where}: its card was rendered for {results.repo_id}, not for this repository: a copy of "
            "another run"
        )


def _module(run: CheckedRun, profile: Profile) -> None:
    run.module, run.module_config = module_and_config(run.read(), run.where)


def _adapter_config(run: CheckedRun, profile: Profile) -> None:
    results, module = run.read(), _checked_module(run)
    lora_config(
        run.folder, run.where, results.training.lora_target_modules, list(module.training.trainable_modules)
    )


def _figures(run: CheckedRun, profile: Profile) -> None:
    refuse_contradictions(recorded_figure_problems(run.read()), run.where)


def _stock_load_record(run: CheckedRun, profile: Profile) -> None:
    module = _checked_module(run)
    refuse_contradictions(stock_load_problems(run.read(), module.claims.changes_attention), run.where)


def _predictions_listed(run: CheckedRun, profile: Profile) -> None:
    if PREDICTIONS_FILE not in run.read().manifest:
        raise IntegrityError(
            f"{run.where}: the manifest in {RESULTS_FILE} lists no {PREDICTIONS_FILE} (the run was written "
            "before attncard recorded predictions); verify it with its model: attncard verify RUN"
        )


def _predictions(run: CheckedRun, profile: Profile) -> None:
    results = run.read()
    if PREDICTIONS_FILE in results.manifest:  # none in a run written before predictions were recorded
        run.predictions = read_predictions(run.folder, results, run.where)
    if results.second_split:  # MNLI's mismatched genres: predictions of their own
        run.second_predictions = read_predictions(run.folder, results, run.where, results.second_split)


def _figures_from_predictions(run: CheckedRun, profile: Profile) -> None:
    results, predictions = run.read(), run.predictions
    if predictions is None:  # `predictions listed` comes first in every profile that recomputes
        raise RuntimeError(f"{run.where}: the figures were recomputed before predictions.csv was read")
    baselines = [run.folder.parent] if run.baselines is None else run.baselines
    run.reverification = predictions_reverification(
        results, predictions, run.second_predictions, run.folder, run.where, run.data_dir, baselines
    )


def _card(run: CheckedRun, profile: Profile) -> None:
    results = run.read()
    problems = card_problems(results, run.folder)
    if problems and all(isinstance(problem, OtherMatplotlibProblem) for problem in problems):
        raise IntegrityError(f"{run.where}: {problems[0]}; until then, do not use this checkpoint")
    if problems:
        problems.sort(key=lambda problem: isinstance(problem, OtherMatplotlibProblem))  # a sure one first
        raise IntegrityError(
            f"{run.where}: the card does not show what {RESULTS_FILE} records: {problems[0]}; it was edited "
            "after publishing, or rendered by another attncard (the run names attncard "
            f"{results.environment.attncard_version}, commit {results.environment.git_commit[:SHA_PREFIX]}): "
            "do not use this checkpoint"
        )


def _signature(run: CheckedRun, profile: Profile) -> None:
    manifest = run.read().manifest
    # Without the weights, the signature must name the sha256 the signed results.json lists for them.
    absent = (
        None
        if Need.WEIGHTS in profile.has
        else {path: sha for path, sha in manifest.items() if path.endswith(WEIGHTS_SUFFIX)}
    )
    run.signature = verify_run_signature(
        run.folder,
        public_key=run.signer.get("require_key"),
        identity=run.signer.get("require_signer"),
        oidc_issuer=run.signer.get("signer_issuer"),
        absent=absent,
    )


def _status(run: CheckedRun, profile: Profile) -> None:
    # The recorded status agreed with the one recomputed from the counts (the `figures` check).
    verification = run.read().verification
    if verification.status == Status.FAIL and not run.allow_failed:
        raise FailedCheckpointError(
            f"{run.where}: the run's status is FAIL (accuracy {verification.accuracy:.4f} is below the "
            f"threshold {verification.threshold:.4f}, the majority-class baseline + 3 SE); pass "
            "allow_failed=True to load it anyway"
        )


def _checked_module(run: CheckedRun) -> AttentionModule:
    if run.module is None:  # `module` comes before the checks that read it, in every profile with TORCH
        raise RuntimeError(f"{run.where}: a check read the module before the module check ran")
    return run.module


def _check(name: str, function: Callable[[CheckedRun, Profile], None], needs: set[Need], doc: str) -> Check:
    return Check(name, function, frozenset(needs), doc)


# The registry: adding a check is one entry. Order matters: a check reads what those before it recorded.
CHECKS: list[Check] = [
    _check("run tag", _run_tag, {Need.HUB}, "results.json is the file the run tag asked for names"),
    _check(
        "files",
        _files,
        set(),
        "results.json (against an expected sha256) field by field, no pickle, every file against the "
        "manifest, only files a run holds, no remote code",
    ),
    _check(
        "listed repository",
        _listed_repository,
        {Need.LISTING},
        "the card was rendered for the repository listed",
    ),
    _check(
        "module",
        _module,
        {Need.TORCH},
        "the recorded attention module is installed, with the recorded source",
    ),
    _check(
        "adapter config",
        _adapter_config,
        {Need.TORCH},
        "adapter_config.json is the LoRA config publish writes",
    ),
    _check(
        "figures",
        _figures,
        set(),
        "results.json's verification and metrics agree with their recomputation from its counts",
    ),
    _check(
        "stock load record",
        _stock_load_record,
        {Need.TORCH},
        "the stock-load record (peft on the base model, its own attention) agrees with itself and the module",
    ),
    _check(
        "predictions listed",
        _predictions_listed,
        {Need.PREDICTIONS},
        "the manifest lists predictions.csv",
    ),
    _check(
        "predictions",
        _predictions,
        set(),
        "predictions.csv, when listed, read line by line and against results.json",
    ),
    _check(
        "figures from predictions",
        _figures_from_predictions,
        {Need.PREDICTIONS, Need.RECOMPUTE},
        "every quality figure and the paired verdict recomputed from predictions.csv and the task's data",
    ),
    _check(
        "card",
        _card,
        set(),
        "the card, plots, .eval_results/ entry and LICENSE are the ones results.json renders",
    ),
    _check(
        "signature",
        _signature,
        {Need.SIGNATURE},
        "model.sig verifies against the required signer, when one is required",
    ),
    _check("status", _status, {Need.WEIGHTS}, "a FAIL run is not loaded unless asked to"),
]

DOWNLOAD = Profile("download", frozenset({Need.HUB, Need.WEIGHTS, Need.TORCH, Need.SIGNATURE}))
VERIFY_PREDICTIONS = Profile("verify --predictions", frozenset({Need.PREDICTIONS, Need.RECOMPUTE}))
SUMMARY_HUB = Profile(
    "summary --hub",
    frozenset({Need.HUB, Need.LISTING, Need.PREDICTIONS, Need.RECOMPUTE, Need.SIGNATURE}),
)
PROFILES = (DOWNLOAD, VERIFY_PREDICTIONS, SUMMARY_HUB)


def checks_of(profile: Profile) -> list[Check]:
    """The checks `profile` runs: every check of [`CHECKS`] whose needs it has, in registry order.

    Example:
        >>> [check.name for check in checks_of(DOWNLOAD)]  # doctest: +NORMALIZE_WHITESPACE
        ['run tag', 'files', 'module', 'adapter config', 'figures', 'stock load record', 'predictions',
         'card', 'signature', 'status']
    """
    return [check for check in CHECKS if check.needs <= profile.has]


def run_checks(
    profile: Profile, run: CheckedRun, *, start: str | None = None, stop: str | None = None
) -> CheckedRun:
    """Runs the checks of `profile` on `run`, in order, and returns it with what they read.

    A run whose figures differ from their recomputation from predictions.csv is settled: the checks after
    `figures from predictions` do not run, and `run.reverification` says what differs.

    Args:
        profile: what the command has ([`DOWNLOAD`], [`VERIFY_PREDICTIONS`], [`SUMMARY_HUB`]).
        run: the run folder and what was asked of it.
        start: the name of the first check to run (default: the first); the checks before it ran already,
            on this `run`.
        stop: the name of the check to stop before (default: none), to run the rest later with `start`: a
            leaderboard checks every run alone, then each against the others' copies.

    Returns:
        `run`, with results, module, predictions, reverification and signature as the checks read them.

    Raises:
        [`AttncardError`]: the first check that refuses the run, in one line.
        ValueError: `start` or `stop` names no check of the profile.

    Example:
        >>> run = CheckedRun(Path("runs/tiny-gpt2-none-sst2"), "run")
        >>> run_checks(VERIFY_PREDICTIONS, run, stop="predictions").results.dataset.task
        'sst2'
    """
    checks = checks_of(profile)
    names = [check.name for check in checks]
    for name in (start, stop):
        if name is not None and name not in names:
            raise ValueError(f"{profile.name} runs no check named {name!r}; it runs {', '.join(names)}")
    first = names.index(start) if start is not None else 0
    last = names.index(stop) if stop is not None else len(names)
    for check in checks[first:last]:
        check.function(run, profile)
        if run.differs:  # the MISMATCH is the answer (verify --predictions exits 1); nothing after it runs
            break
    return run


__all__ = [
    "CHECKS",
    "DOWNLOAD",
    "PROFILES",
    "SUMMARY_HUB",
    "UNSIGNED",
    "VERIFY_PREDICTIONS",
    "Check",
    "CheckedRun",
    "Need",
    "Profile",
    "checks_of",
    "run_checks",
    # pipeline/cli/verify.py imports it from here; its home is pipeline.checks.reverification
]
