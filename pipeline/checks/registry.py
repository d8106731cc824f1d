"""The checks of a run, in one ordered list: what `attncard download`, `attncard verify --predictions` and
`attncard summary --hub` run, each with the profile it needs.

A run reaches attncard as a hostile folder: fetched from the Hub by a download or a leaderboard, or handed
over as a local folder or its `cards/` copy. Every command reads it through the same [`CHECKS`], in their
order; a [`Profile`] says what a command has (the weights, torch, predictions.csv, a Hub revision, …), and
a command runs every check whose `needs` its profile has, in registry order ([`run_checks`]). Adding a check
is one entry in `CHECKS`: every command whose profile has its needs runs it, and only those.

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
    stock record             TORCH               x . .  a stock-loader record that contradicts the module
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

The recomputation from predictions.csv lives here too ([`Reverification`], [`comparison_figures`],
[`recorded_validation`]); [`pipeline.verify.reverify`] compares a model evaluated again against the same
[`Reverification`].
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ...modules import BUILTIN_PACKAGE, AttentionModule, get_module, module_names, module_provenance
from ..card.render import install_line, module_install_lines
from ..hub.signing import SignatureReport, SignerOptions, verify_run_signature
from ..record.errors import (
    DataError,
    FailedCheckpointError,
    IncompatibleRunError,
    IntegrityError,
    ModuleNotInstalledError,
    UnknownModuleError,
)
from ..record.manifest import (
    PREDICTIONS_FILE,
    RESULTS_FILE,
    SECOND_PREDICTIONS_FILE,
    WEIGHTS_SUFFIX,
    sha256_file,
)
from ..record.results import Metrics, Results, SplitResult, Status, Verification
from ..record.text import COMMIT_RE, SHA_PREFIX
from ..run.data import HUB_DATASET_ID, DataSource, ValidationSplit, load_validation, sample_rows
from ..scoring.metrics import mcc_difference, predictions_sha256
from ..scoring.paired import paired_comparison
from ..scoring.tolerances import difference_note
from .integrity import (
    ADAPTER_CONFIG_FILE,
    Figure,
    OtherMatplotlibProblem,
    card_problems,
    check_run_tag,
    evaluated_figures,
    figures,
    read_checked_files,
    read_json_object,
    read_results,
    recorded_figure_problems,
    refuse_contradictions,
    stock_problems,
)
from .predictions import Predictions, baseline_predictions, prediction_figures, read_predictions, recompute

if typing.TYPE_CHECKING:  # peft is imported by the one check that needs it (TORCH), inside it
    from peft import LoraConfig

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


def _stock_record(run: CheckedRun, profile: Profile) -> None:
    module = _checked_module(run)
    refuse_contradictions(stock_problems(run.read(), module.claims.changes_attention), run.where)


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
            "allow_failed=True (CLI: --allow-fail) to load it anyway"
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
        "stock record",
        _stock_record,
        {Need.TORCH},
        "the stock-loader record agrees with itself and the module",
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
        ['run tag', 'files', 'module', 'adapter config', 'figures', 'stock record', 'predictions', 'card',
         'signature', 'status']
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


# ------------------------------------------------------------------------------------------------------------
# The module and the adapter config (TORCH: the module's folder imports torch, LoraConfig peft)

# adapter_config.json fields that publish sets; every other field must hold LoraConfig's default.
_LORA_FIELDS: dict[str, tuple[type, ...]] = {
    "peft_type": (str,),
    "task_type": (str,),
    "r": (int,),
    "lora_alpha": (int, float),
    "lora_dropout": (int, float),
    "target_modules": (list, str),  # a list, or peft's DUMMY_TARGET_MODULES when LoRA adapts nothing
    "modules_to_save": (list, type(None)),
    "fan_in_fan_out": (bool,),
    "base_model_name_or_path": (str, type(None)),
    "revision": (str, type(None)),
    "inference_mode": (bool,),
    "peft_version": (str,),
}


def lora_config(
    folder: Path, where: str, target_modules: list[str], trained_modules: list[str]
) -> LoraConfig:
    """The run's `adapter_config.json` as a [`peft.LoraConfig`], checked field by field.

    The fields publish sets are checked for their types and for agreeing with results.json (the LoRA
    targets, the module's trained submodules); every other field must hold LoraConfig's default, so no
    field can make peft import a module (`megatron_core`), pick a class (`auto_mapping`) or load anything
    else.

    Args:
        folder: the run folder.
        where: the run, for messages.
        target_modules: the LoRA targets results.json records.
        trained_modules: the module's trained submodules, which `modules_to_save` must list.

    Returns:
        The config, to pass to `PeftModel.from_pretrained(config=...)` instead of letting peft read the file.

    Raises:
        [`IncompatibleRunError`]: a field is unknown, of the wrong type, or not what publish writes.
    """
    # TORCH: peft imports torch; only the checks and loaders that need TORCH call this.
    from peft import LoraConfig
    from peft.utils.constants import DUMMY_TARGET_MODULES

    adapter = read_json_object(folder / ADAPTER_CONFIG_FILE, where)
    defaults = json.loads(json.dumps(LoraConfig().to_dict(), default=str))

    def refuse(detail: str) -> IncompatibleRunError:
        return IncompatibleRunError(
            f"{where}: {ADAPTER_CONFIG_FILE} {detail}; attncard loads only the LoRA config publish writes: "
            "do not use this checkpoint"
        )

    installed_peft = metadata.version("peft")
    newer_peft = _newer_peft(adapter.get("peft_version"), installed_peft)
    left_out = set()
    for key, value in adapter.items():
        if key in _LORA_FIELDS:
            if not isinstance(value, _LORA_FIELDS[key]) or (
                isinstance(value, bool) and bool not in _LORA_FIELDS[key]
            ):
                raise refuse(f"has {key} = {value!r}, of the wrong type")
        elif key not in defaults and newer_peft and value in (None, False):
            # A field of a later peft, off (null or false): this peft has nothing of it to leave out.
            left_out.add(key)
        elif key not in defaults or value != defaults[key]:
            if newer_peft:
                raise IncompatibleRunError(
                    f"{where}: {ADAPTER_CONFIG_FILE} was written by peft {newer_peft}, whose field "
                    f"'{key}' = {value!r} peft {installed_peft} here does not know or defaults "
                    f"otherwise; check the run with peft>={newer_peft} (pip install 'peft>={newer_peft}')"
                )
            if key not in defaults:
                raise refuse(f"has the unknown field '{key}'")
            raise refuse(f"sets '{key}' to {value!r} (publish leaves it at {defaults[key]!r})")
    if (adapter.get("peft_type"), adapter.get("task_type")) != ("LORA", "SEQ_CLS"):
        raise refuse(
            f"describes a {adapter.get('peft_type')!r}/{adapter.get('task_type')!r} adapter, not LORA for "
            "SEQ_CLS"
        )
    targets = adapter.get("target_modules") or []
    if targets == DUMMY_TARGET_MODULES and not target_modules:
        targets = []
    if (
        not isinstance(targets, list)
        or not all(isinstance(name, str) for name in targets)
        or sorted(targets) != sorted(target_modules)
    ):
        raise refuse(f"targets {targets!r}, but {RESULTS_FILE} records {target_modules!r}")
    saved = adapter.get("modules_to_save") or []
    if not all(isinstance(name, str) for name in saved):
        raise refuse(f"has modules_to_save = {saved!r}")
    unsaved = [name for name in trained_modules if name not in saved]
    if unsaved:
        raise refuse(f"does not save {', '.join(unsaved)}, the trained parameters of the module")
    if not 0 <= adapter.get("lora_dropout", 0) < 1 or adapter.get("r", 1) < 1:
        raise refuse(f"has r = {adapter.get('r')!r} and lora_dropout = {adapter.get('lora_dropout')!r}")
    return LoraConfig(
        **{key: value for key, value in adapter.items() if key != "peft_version" and key not in left_out}
    )


def _newer_peft(written_by: object, installed: str) -> str | None:
    """The peft release that wrote an adapter config (its `peft_version`) when it is later than the
    `installed` one: a field the installed peft does not know may then be that release's own, not an
    injection."""
    from packaging.version import InvalidVersion, Version

    if not isinstance(written_by, str):
        return None
    try:
        written = Version(written_by)
    except InvalidVersion:
        return None
    return str(written) if written > Version(installed) else None


def _module_install(results: Results) -> str:
    """The `pip install` command of the run's module package, as card template 2 gives it: from attncard's
    repository at the recorded commit for a package kept there, else by name and version."""
    command = next(line for line in module_install_lines(results) if not line.startswith("#"))
    return command.split("  # ")[0]


def module_and_config(results: Results, where: str) -> tuple[AttentionModule, object]:
    """The recorded attention module and its config, rebuilt from `results.module`.

    The module must be installed (attncard never installs a package) and its source must have the sha256
    results.json records, when it records one.

    Raises:
        [`ModuleNotInstalledError`]: the module comes from a package that is not installed; the message names
            the package and version.
        [`IncompatibleRunError`]: attncard has no such module, the installed one has other source, or its
            config class does not know a recorded field.
        [`ModulePluginError`]: the installed package providing the module is broken.
    """
    name, record = results.module.name, results.module
    plugin = record.package not in ("", BUILTIN_PACKAGE)
    try:
        module = get_module(name)
    except UnknownModuleError:
        if plugin:
            raise ModuleNotInstalledError(
                f"{where}: the run's attention module '{name}' comes from the package {record.package} "
                f"{record.package_version}, which is not installed here; install it "
                f"({_module_install(results)}, after checking that this package is the one you expect: the "
                "name comes from the run) and load the run again; attncard installs nothing"
            ) from None
        raise IncompatibleRunError(
            f"{where}: the run uses the attention module '{name}', which this attncard does not have "
            f"(it has {', '.join(module_names())}); install attncard {results.environment.attncard_version}"
        ) from None
    if record.source_sha256:
        installed = module_provenance(name)
        if installed.source_sha256 != record.source_sha256:
            install = _module_install(results) if plugin else install_line(results).split("  # ")[0]
            changed = [
                file
                for file in sorted({*record.source, *(path.name for path in module.source_files)})
                if record.source.get(file) != _file_sha256(module.folder / file)
            ]
            raise IncompatibleRunError(
                f"{where}: the attention module '{name}' installed here ({installed.package} "
                f"{installed.version}, source sha256 {installed.source_sha256[:SHA_PREFIX]}…) is not the one "
                f"the run was trained with ({record.package} {record.package_version}, source sha256 "
                f"{record.source_sha256[:SHA_PREFIX]}…"
                + (f"; {', '.join(changed)} differ" if changed else "")
                + f"); install the recorded one ({install}) and load the run again"
            )
    config_class = module.config_class
    hints = typing.get_type_hints(config_class)
    known = {f.name for f in dataclasses.fields(config_class)}
    recorded = dict(results.module.config)
    unknown = sorted(set(recorded) - known)
    if unknown:
        raise IncompatibleRunError(
            f"{where}: the run's '{name}' config has fields {unknown} that {config_class.__name__} of this "
            f"attncard does not know; install attncard {results.environment.attncard_version}"
        )
    values = {
        key: tuple(value) if isinstance(value, list) and typing.get_origin(hints[key]) is tuple else value
        for key, value in recorded.items()
    }
    return module, config_class(**values)


def _file_sha256(path: Path) -> str | None:
    """The sha256 of a file, or None when it is not there."""
    return sha256_file(path) if path.is_file() else None


# ------------------------------------------------------------------------------------------------------------
# The figures recomputed from predictions.csv (verify --predictions, summary --hub; reverify compares a model
# evaluated again against the same Reverification)


@dataclass
class Reverification:
    """A run's recorded figures against the same figures recomputed from its files.

    Attributes:
        source: the run, as `org/name@<commit>` or its folder.
        repo_id: the Hub repository, or `None` for a local folder.
        revision: the commit sha evaluated, or `None` for a local folder.
        recorded_accuracy, recomputed_accuracy: on the task's validation split.
        recorded_status, recomputed_status: the verification status.
        recorded_predictions_sha256, recomputed_predictions_sha256: sha256 of the predicted label ids,
            int64 little-endian, in split order (as [`pipeline.run.evaluate.evaluate`] hashes them).
        recorded_compression_factor, recomputed_compression_factor: parameters before / after (LoRA merged).
        recorded_data_revision, data_revision: `results.dataset.revision` and that of the data evaluated now
            (`sha256:<hex>` of the validation file, or the Hub commit of nyu-mll/glue).
        recorded_rows, rows: rows of the evaluated split.
        threshold: the recomputed majority share + 3 SE the accuracy is held against.
        reasons: the reasons for the recomputed status, as [`pipeline.scoring.gate.decide_status`] gives them.
        figures: every figure the card shows that can be recomputed (metrics, per-class scores, confusion
            matrix, verification, the accuracy with stock attention), recorded against recomputed.
        problems: one sentence per difference; empty when everything matches.
        matches: every figure equal.
        note: when the run was evaluated on another device than this check (a GPU), a sentence saying that
            float rounding may differ; empty otherwise.
    """

    source: str
    repo_id: str | None
    revision: str | None
    recorded_accuracy: float
    recomputed_accuracy: float
    recorded_status: Status
    recomputed_status: Status
    recorded_predictions_sha256: str
    recomputed_predictions_sha256: str
    recorded_compression_factor: float
    recomputed_compression_factor: float
    recorded_data_revision: str
    data_revision: str
    recorded_rows: int
    rows: int
    threshold: float
    reasons: list[str] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    matches: bool = False
    note: str = ""

    @property
    def data_matches(self) -> bool:
        return self.recorded_data_revision == self.data_revision and self.recorded_rows == self.rows


def reverification(
    results: Results,
    metrics: Metrics,
    verification: Verification,
    data: DataSource,
    rows: int,
    *,
    source: str,
    repo_id: str | None,
    revision: str | None,
    compared: list[Figure],
    note: str = "",
) -> Reverification:
    """The check of a run's recorded figures against those recomputed now (`metrics` and `verification`, on
    the `rows` of the validation split from `data`), each of `compared` told equal or not ([`settled`])."""
    check = Reverification(
        source=source,
        repo_id=repo_id,
        revision=revision,
        recorded_accuracy=results.metrics.accuracy,
        recomputed_accuracy=metrics.accuracy,
        recorded_status=results.verification.status,
        recomputed_status=verification.status,
        recorded_predictions_sha256=results.metrics.predictions_sha256,
        recomputed_predictions_sha256=metrics.predictions_sha256,
        recorded_compression_factor=results.parameters.compression_factor,
        recomputed_compression_factor=verification.compression_factor,
        recorded_data_revision=results.dataset.revision,
        data_revision=data.revision,
        recorded_rows=results.verification.n,
        rows=rows,
        threshold=verification.threshold,
        reasons=verification.reasons,
        figures=compared,
        note=note,
    )
    return settled(check)


def settled(check: Reverification) -> Reverification:
    """`check` with `problems` (each figure that differs, recomputed then recorded) and `matches` set."""
    check.problems = [
        f"{figure.name} {shown(figure.recomputed)} recomputed, {shown(figure.recorded)} recorded"
        + (f" ({note})" if (note := difference_note(figure.name, figure.recorded, figure.recomputed)) else "")
        for figure in check.figures
        if not figure.equal()
    ]
    check.matches = not check.problems
    return check


def shown(value: object) -> str:
    """A figure as messages show it: hashes shortened, floats in full."""
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value):
        return f"{value[:SHA_PREFIX]}…"
    return repr(value) if isinstance(value, float) else str(value)


def predictions_reverification(
    results: Results,
    predictions: Predictions,
    second_predictions: Predictions | None,
    folder: Path,
    where: str,
    data_dir: str | os.PathLike | None,
    baselines: list[str | os.PathLike],
) -> Reverification:
    """Every quality figure of a checked run recomputed from its predictions.csv and the recorded task's data,
    and its paired verdict from its dense baselines' predictions.csv (see
    [`pipeline.verify.reverify_predictions.reverify_predictions`]).

    Args:
        results: the run's results.json, checked.
        predictions, second_predictions: its predictions.csv as read and checked (and its second split's, or
            None for a task with one).
        folder: the run folder.
        where: the run, for messages.
        data_dir: a folder of GLUE TSV files (default: `GLUE_DIR`, else the recorded Hub dataset).
        baselines: folders holding the dense runs the paired verdict names.

    Returns:
        A [`Reverification`]: every figure recorded against recomputed.

    Raises:
        [`DataError`]: the task's data cannot be had or are not the recorded data.
        [`IntegrityError`]: a dense baseline the verdict names is missing or not the recorded one.
    """
    split = recorded_validation(results, data_dir, where)
    metrics, verification = recompute(predictions, results)
    label_check = _gold_label_figure(predictions, split.labels, PREDICTIONS_FILE)
    samples = sample_rows(split.rows, split.spec, count=len(results.dataset.samples))
    second_figures = []
    if (second := results.second_split) is not None and second_predictions is not None:
        second_data = recorded_validation(results, data_dir, where, second=True)  # its own rows and gate
        recorded_file = results.dataset.files.get(second.split, {}).get("sha256")
        second_figures = [
            _gold_label_figure(
                second_predictions, second_data.labels, SECOND_PREDICTIONS_FILE.format(split=second.split)
            ),
            *prediction_figures(second_predictions, results, second),
        ]
        if second_data.source.files:  # a GLUE folder: its file must be the one evaluated
            read = second_data.source.files[second.split]["sha256"]
            second_figures.append(Figure(f"dataset.files.{second.split}.sha256", recorded_file, read))
    return reverification(
        results,
        metrics,
        verification,
        split.source,
        len(split.rows),
        source=where,
        repo_id=None,
        revision=None,
        compared=[
            label_check,
            *evaluated_figures(results, metrics, verification),
            Figure("dataset.revision", results.dataset.revision, split.source.revision),
            *figures("dataset.samples", results.dataset.samples, samples),
            *comparison_figures(results, predictions, baselines),
            *second_figures,
        ],
    )


def _gold_label_figure(predictions: Predictions, labels: list[int], file: str) -> Figure:
    """The file's gold labels against the data's (their hashes, as the predictions are hashed), the first row
    where they differ named."""
    pairs = zip(predictions.labels, labels, strict=True)
    differing = [row for row, (written, read) in enumerate(pairs) if written != read]
    return Figure(
        f"{file} gold labels" + (f" (first differing: row {differing[0]})" if differing else ""),
        predictions_sha256(predictions.labels),
        predictions_sha256(labels),
    )


def comparison_figures(
    results: Results, predictions: Predictions, folders: list[str | os.PathLike]
) -> list[Figure]:
    """The run's paired verdict recomputed from its predictions and its dense baselines' predictions.csv.

    Each baseline the verdict names is looked for by its folder name in `folders`; its results.json must
    have the recorded sha256, and its predictions.csv must check against it. With several baselines (pooled
    seeds) their predictions are compared in the recorded order, each against this run's rows. A run scored
    by MCC (CoLA) also has its MCC difference and bootstrap interval recomputed, with the run's seed.

    Raises:
        [`IntegrityError`]: a named baseline is missing, is not the recorded one, or its predictions do not
            check.
    """
    recorded = results.comparison
    if recorded is None or not recorded.baselines:
        return []
    module_predictions, dense_predictions, labels = [], [], []
    for baseline in recorded.baselines:
        candidates = [Path(os.fspath(root)) / baseline.repo_name for root in folders]
        found = [candidate for candidate in candidates if (candidate / RESULTS_FILE).is_file()]
        if not found:
            raise IntegrityError(
                f"the dense baseline {baseline.repo_name} of the paired verdict is not in "
                f"{', '.join(str(root) for root in folders)}; put its run folder or cards copy there, or "
                "pass --baseline DIR"
            )
        if sha256_file(found[0] / RESULTS_FILE) != baseline.results_sha256:
            raise IntegrityError(
                f"{found[0]}: its {RESULTS_FILE} is not the one the paired verdict names (sha256 "
                f"{baseline.results_sha256[:SHA_PREFIX]}…)"
            )
        dense = baseline_predictions(found[0], read_results(found[0], str(found[0])))
        labels += predictions.labels
        module_predictions += predictions.predictions
        dense_predictions += dense.predictions
    recomputed = paired_comparison(
        labels,
        module_predictions,
        dense_predictions,
        baselines=recorded.baselines,
        margin=recorded.margin,
        confidence=recorded.confidence,
    )
    if results.metrics.official is not None and results.metrics.official.name == "matthews_correlation":
        recomputed.mcc_difference = mcc_difference(
            labels,
            module_predictions,
            dense_predictions,
            len(results.dataset.label_names),
            seed=results.training.hyperparameters.seed,
            confidence=recorded.confidence,
        )
    return figures("comparison", recorded, recomputed)


def recorded_data_dir(
    results: Results, data_dir: str | os.PathLike | None, where: str
) -> str | os.PathLike | None:
    """Where the recorded task's data are read from, never the repository: `data_dir`, else `GLUE_DIR`, else
    (None) the Hub's nyu-mll/glue at the recorded commit.

    Raises:
        [`DataError`]: neither is given and the run was evaluated on GLUE TSV files.
    """
    record = results.dataset
    data_dir = data_dir or os.environ.get("GLUE_DIR") or None
    if data_dir or (record.dataset_id == HUB_DATASET_ID and COMMIT_RE.fullmatch(record.revision)):
        return data_dir
    raise DataError(
        f"{where}: the run was evaluated on GLUE TSV files ({record.task}, validation "
        f"{record.revision[: 7 + SHA_PREFIX]}…); pass --data-dir (data_dir=) or set GLUE_DIR to a folder "
        "with the same files"
    )


def check_recorded_data(
    results: Results, revision: str, rows: int, where: str, split: SplitResult | None = None
) -> None:
    """Refuses data other than those the run was evaluated on: another validation file or commit
    (`revision`), or another number of `rows` ([`DataError`]) than the run's evaluated split (given `split`,
    its second evaluated split) has."""
    record = results.dataset
    expected = (split or results).verification.n
    if revision != record.revision or rows != expected:
        raise DataError(
            f"{where}: the {record.task} {split.split if split else 'validation'} data here "
            f"({revision[: 7 + SHA_PREFIX]}…, {rows} rows) are not the data the run was evaluated on "
            f"({record.revision[: 7 + SHA_PREFIX]}…, {expected} rows); pass --data-dir with the same GLUE "
            "files"
        )


def recorded_validation(
    results: Results, data_dir: str | os.PathLike | None, where: str, second: bool = False
) -> ValidationSplit:
    """The evaluated split of the recorded task ([`recorded_data_dir`]), or with `second` its second evaluated
    split (MNLI's mismatched), when it is the recorded one ([`check_recorded_data`])."""
    data_dir = recorded_data_dir(results, data_dir, where)
    split = load_validation(results.dataset.task, data_dir, revision=results.dataset.revision, second=second)
    recorded_split = results.second_split if second else None
    check_recorded_data(results, split.source.revision, len(split.rows), where, recorded_split)
    return split


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
    "Reverification",
    "check_recorded_data",
    "checks_of",
    "comparison_figures",
    "lora_config",
    "module_and_config",
    "predictions_reverification",
    "recorded_data_dir",
    "recorded_validation",
    "reverification",
    "run_checks",
    "settled",
    "shown",
]
