"""What a downloaded run folder must be before anything in it is loaded, and what its figures must agree on.

A run folder from a Hub, a mirror or a disk is hostile until checked. This module checks its files and what
they *say*, and imports no torch, transformers or peft: `attncard verify --predictions` runs without them.

- [`read_checked_files`]: results.json (against an expected sha256, when given) field by field, no pickle,
  every file against the manifest in results.json ([`check_files`]), and [`check_run_files`]: the folder
  holds only files a run folder defines (no `.py`, nothing a loader would pick up by name), and
  `config.json` / `tokenizer_config.json` name no remote code (`auto_map`) and a model family attncard
  loads. No code from a repository ever runs. ([`pipeline.verify.download`] checks `adapter_config.json` with
  peft's `LoraConfig` before it loads the weights.)
- [`recorded_figure_problems`]: the verification is recomputed from the recorded class counts, correct rows
  and parameter counts (p0, SE, threshold, p-value, Wilson interval, status, reasons), and the metrics from
  the recorded confusion matrix. A recorded figure is never taken on trust: the status gate uses the
  recomputed status.
- [`card_problems`]: the card and its plots are rendered again from results.json; any other README.md or
  plot is refused, so the card cannot show a figure results.json does not hold.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from ...modules.base import FAMILIES
from ..card.plots import (
    PLOT_RMS_BEYOND_ANY_RELEASE,
    PLOT_TILE,
    PLOT_TILE_RMS_TOLERANCE,
    draw_alike,
    plot_difference,
)
from ..card.render import (
    EVAL_RESULTS_DIR,
    LICENSE_FILE,
    eval_results_file,
    render_card,
    render_eval_results,
    render_license,
    rendered_card_problems,
    write_plots,
)
from ..record.errors import (
    DownloadError,
    IncompatibleRunError,
    IntegrityError,
    ResultsError,
    UnknownSchemaError,
    UnsafeFormatError,
)
from ..record.manifest import (
    CARD_FILE,
    MAX_CARD_BYTES,
    MAX_CONFIG_BYTES,
    MAX_PLOT_BYTES,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    SECOND_PREDICTIONS_FILE,
    SIGNATURE_FILE,
    WEIGHTS_SUFFIX,
    check_manifest,
    is_transport_path,
    sha256_file,
)
from ..record.results import OFFICIAL_METRIC_SCHEMA, Metrics, Results, SplitResult, Verification, training_log
from ..record.run_names import RUN_TAG_DIGEST_HEX, RUN_TAG_RE, run_tag
from ..record.text import SHA_PREFIX
from ..run.data import TASKS
from ..scoring.gate import all_finite, both_gates, verification_from_counts
from ..scoring.metrics import BOOTSTRAP_RESAMPLES, label_metrics
from ..scoring.paired import DEFAULT_CONFIDENCE, comparison_problems
from ..scoring.tolerances import difference_note, same_figure, tolerance_of

ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG_FILE = "adapter_config.json"
CONFIG_FILE = "config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# Every file a run folder may hold: what publish writes, nothing else. A loader picks up optional files by
# name (special_tokens_map.json, added_tokens.json, *.py through auto_map, …), so an unknown file is refused
# even when the manifest lists it.
RUN_FILES = frozenset(
    {
        ADAPTER_WEIGHTS_FILE,
        ADAPTER_CONFIG_FILE,
        CONFIG_FILE,
        CARD_FILE,
        RESULTS_FILE,
        SIGNATURE_FILE,
        LICENSE_FILE,
        # Checked by pipeline.checks.predictions; absent in runs written before it was recorded.
        PREDICTIONS_FILE,
        # The second evaluated split's predictions (MNLI's predictions_validation_mismatched.csv).
        *(
            SECOND_PREDICTIONS_FILE.format(split=spec.second_split)
            for spec in TASKS.values()
            if spec.second_split
        ),
        "tokenizer.json",
        TOKENIZER_CONFIG_FILE,
        "chat_template.jinja",
    }
)
# Plots at the top (scaling.png, spans.png, …) and the Hub's evaluation results, .eval_results/<task>.yaml.
RUN_FILE_PATTERNS = (re.compile(r"^[a-z0-9_]+\.png$"), re.compile(r"^\.eval_results/[a-z0-9_]+\.yaml$"))
# The files every run folder must list in its manifest: without them there is nothing to rebuild or check.
REQUIRED_FILES = (ADAPTER_WEIGHTS_FILE, ADAPTER_CONFIG_FILE, CONFIG_FILE, CARD_FILE)
# Pickle-based weight formats: torch.load on them can run arbitrary code. They are refused unopened.
UNSAFE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
# An expected results.json digest: its full sha256, or at least the 128 bits a run tag carries.
_EXPECTED_SHA256_RE = re.compile(rf"^[0-9a-f]{{{RUN_TAG_DIGEST_HEX},64}}$")
# Keys that make transformers import code named by the repository.
REMOTE_CODE_KEYS = ("auto_map", "custom_pipelines")
# More rows than any GLUE validation split has by far: a larger count is a forged record, not a run.
MAX_ROWS = 10_000_000


def check_run_files(folder: Path, names: list[str], where: str) -> None:
    """Refuses a run folder holding a file publish does not write, or configs that name remote code.

    Args:
        folder: the run folder.
        names: its files, as POSIX paths relative to it (the manifest's keys and results.json).
        where: the run, for messages.

    Raises:
        [`IntegrityError`]: an unknown file, or `auto_map`.
        [`IncompatibleRunError`]: a model type outside [`FAMILIES`].
    """
    unknown = sorted(
        name for name in names if name not in RUN_FILES and not any(p.match(name) for p in RUN_FILE_PATTERNS)
    )
    if unknown:
        code = [name for name in unknown if name.endswith(".py")]
        what = f"{code[0]} is Python code" if code else f"{unknown[0]} is not a file a run folder holds"
        raise IntegrityError(
            f"{where}: {what}; attncard runs no code from a repository and loads only the files publish "
            f"writes ({', '.join(sorted(RUN_FILES))}, plots, .eval_results): do not use this checkpoint"
        )
    for name in (CONFIG_FILE, TOKENIZER_CONFIG_FILE):
        path = folder / name
        if not path.is_file():
            continue
        config = read_json_object(path, where)
        remote = [key for key in REMOTE_CODE_KEYS if key in config]
        if remote:
            raise IntegrityError(
                f"{where}: {name} has '{remote[0]}', which makes transformers import code from the "
                "repository; attncard never runs repository code: do not use this checkpoint"
            )
    model_type = read_json_object(folder / CONFIG_FILE, where).get("model_type")
    if model_type not in FAMILIES:
        raise IncompatibleRunError(
            f"{where}: {CONFIG_FILE} has model_type {model_type!r}; attncard loads only the families "
            f"{', '.join(FAMILIES)}, with transformers' own code"
        )


def read_json_object(path: Path, where: str) -> dict[str, Any]:
    """A run's JSON config file as a dict, refused in one line ([`IntegrityError`]) when it is larger than
    any config attncard writes, not JSON, nested too deep or not an object."""
    with path.open("rb") as handle:
        raw = handle.read(MAX_CONFIG_BYTES + 1)
    if len(raw) > MAX_CONFIG_BYTES:
        raise IntegrityError(
            f"{where}: {path.name} is larger than {MAX_CONFIG_BYTES >> 20} MiB, which no config attncard "
            "writes is; do not use this checkpoint"
        )
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise IntegrityError(f"{where}: {path.name} is not valid JSON ({error})") from error
    except RecursionError:
        raise IntegrityError(
            f"{where}: {path.name} is nested deeper than any config attncard writes; do not use this "
            "checkpoint"
        ) from None
    if not isinstance(value, dict):
        raise IntegrityError(f"{where}: {path.name} should hold a JSON object")
    return value


def read_checked_files(
    folder: Path,
    expected_sha256: str | None,
    where: str,
    *,
    hub: bool = False,
    weights_optional: bool = False,
) -> Results:
    """The checks of a run folder's files that come before anything reads them, and its results.json: the
    results sha256 when one is expected, results.json field by field, no unsafe format, every file against
    the manifest (only the weights may be absent with `weights_optional`), and only files a run holds."""
    check_results_sha256(folder, expected_sha256, where)
    results = read_results(folder, where)
    check_safe_formats(folder, where)
    check_files(folder, results.manifest, where, hub, weights_optional=weights_optional)
    check_run_files(folder, [*results.manifest, RESULTS_FILE], where)
    return results


def check_run_tag(folder: Path, revision: str | None, where: str) -> None:
    """Refuses a results.json that differs from the one a run tag names.

    The manifest in results.json covers every other file, but nothing in the folder covers results.json
    itself. A push tags its commit `run-<started_at>-<sha256 of results.json>[:32]`
    ([`pipeline.publish.publish.push_tag`]), so when the revision asked for is such a tag, results.json must
    still be the file the tag was made for.
    """
    if revision is None or not RUN_TAG_RE.match(revision):
        return
    if not (folder / RESULTS_FILE).is_file():
        raise ResultsError(f"{where}: no {RESULTS_FILE}; this is not a run folder written by publish")
    actual = sha256_file(folder / RESULTS_FILE)
    if not revision.endswith(f"-{actual[:RUN_TAG_DIGEST_HEX]}"):
        raise IntegrityError(
            f"{where}: results.json (sha256 {actual[:RUN_TAG_DIGEST_HEX]}…) is not the file the tag "
            f"{revision} was made for: it changed after publishing; do not use this checkpoint"
        )
    expected = run_tag(read_results(folder, where).started_at, actual)
    if expected != revision:
        raise IntegrityError(
            f"{where}: results.json was started at another time than the tag {revision} says (its tag would "
            f"be {expected}); do not use this checkpoint"
        )


def refuse_contradictions(problems: list[str], where: str) -> None:
    """Raises [`IntegrityError`] naming the first of results.json's figures that disagree with their
    recomputation from its own counts (and how many more), when there are any."""
    if problems:
        raise IntegrityError(
            f"{where}: {RESULTS_FILE} contradicts itself: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            + "; its figures were edited after they were measured: do not use this checkpoint"
        )


def read_results(folder: Path, where: str | None = None) -> Results:
    """Reads a run folder's results.json, refusing an unknown schema version with [`UnknownSchemaError`]."""
    where = where or str(folder)
    path = Path(folder) / RESULTS_FILE
    if not path.is_file():
        raise ResultsError(f"{where}: no {RESULTS_FILE}; this is not a run folder written by publish")
    try:
        return Results.load(path)
    except UnknownSchemaError as error:
        raise UnknownSchemaError(f"{where}: {error}") from error
    except ResultsError as error:
        raise ResultsError(
            f"{where}: {error}: the file is malformed, do not use this checkpoint (if another attncard "
            "version wrote it, read it with that version)"
        ) from error


def check_safe_formats(folder: Path, where: str | None = None) -> None:
    """Refuses a run folder holding pickle files ([`UnsafeFormatError`]); nothing is opened."""
    where = where or str(folder)
    for path in sorted(Path(folder).rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.suffix.lower() in UNSAFE_SUFFIXES and not is_transport_path(relative):
            raise UnsafeFormatError(
                f"{where}: {relative} is a pickle file, which can run code when loaded; attncard loads only "
                f"safetensors and did not open it: ask the publisher for {ADAPTER_WEIGHTS_FILE} (peft's "
                "save_pretrained writes it by default)"
            )


def check_files(
    folder: Path,
    manifest: dict[str, str],
    where: str | None = None,
    hub: bool = False,
    weights_optional: bool = False,
) -> None:
    """Checks a run folder against its manifest, raising [`IntegrityError`] on the first difference.

    Every file listed must be there with its sha256; any other file is an error, except results.json and
    the transport's bookkeeping (the top `.gitattributes`, `.git/`, `.cache/huggingface/`). With
    `weights_optional`, a listed weight file (`*.safetensors`) may be absent, as in a `cards/` copy; every
    file that is there is still checked.

    Example:
        >>> import shutil
        >>> copy = Path("cards-copy")
        >>> weights = shutil.ignore_patterns("*.safetensors")
        >>> _ = shutil.copytree("runs/tiny-gpt2-none-sst2", copy, ignore=weights)
        >>> check_files(copy, read_results(copy).manifest, weights_optional=True)
        >>> check_files(copy, read_results(copy).manifest)
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.IntegrityError: cards-copy: adapter_model.safetensors is missing ...
    """
    where = where or str(folder)
    folder = Path(folder)
    missing_required = [name for name in REQUIRED_FILES if name not in manifest]
    if missing_required:
        raise IntegrityError(
            f"{where}: the manifest in {RESULTS_FILE} does not list {', '.join(missing_required)}; this is "
            "not a run folder written by publish"
        )
    differences = [
        difference
        for difference in check_manifest(folder, manifest, ignore_transport=True)
        if not (
            weights_optional and difference.kind == "missing" and difference.path.endswith(WEIGHTS_SUFFIX)
        )
    ]
    redownload = (
        "; if only your copy is damaged, download it again into a new cache_dir"
        if hub
        else "; get the run folder again from where it was published"
    )
    for difference in differences:
        name, expected = difference.path, (difference.expected or "")[:SHA_PREFIX]
        if difference.kind == "missing":
            raise IntegrityError(
                f"{where}: {name} is missing (the manifest expects sha256 {expected}…); the run is "
                f"incomplete{redownload}"
            )
        if difference.kind == "changed":
            raise IntegrityError(
                f"{where}: {name} has sha256 {difference.actual[:SHA_PREFIX]}… but the manifest expects "
                f"{expected}…: the file changed after publishing; do not use this checkpoint{redownload}"
            )
    extra = [difference.path for difference in differences]
    if extra:
        raise IntegrityError(
            f"{where}: {', '.join(extra)} {'is' if len(extra) == 1 else 'are'} not in the manifest of "
            f"{RESULTS_FILE}: files were added after publishing, and loaders may read them; remove "
            f"{'it' if len(extra) == 1 else 'them'} (or ask the publisher to) before loading"
        )


def check_expected_sha256(expected: str | None) -> None:
    """Refuses an expected results.json digest that is not 32 to 64 lowercase hex digits (no check when None).

    Example:
        >>> check_expected_sha256("3f1c2a9e")
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.DownloadError: expected sha256 '3f1c2a9e' is not 32 to 64 lowercase
        hex ...
    """
    if expected is not None and not _EXPECTED_SHA256_RE.match(expected):
        raise DownloadError(
            f"expected sha256 '{expected}' is not {RUN_TAG_DIGEST_HEX} to 64 lowercase hex digits; "
            "pass the sha256 of the run's results.json (cards/<run>/results.json, or its run tag's digest)"
        )


def check_results_sha256(folder: Path, expected: str | None, where: str) -> None:
    """Refuses a results.json whose sha256 does not start with `expected` (no check when None)."""
    if expected is None:
        return
    if not (folder / RESULTS_FILE).is_file():
        raise ResultsError(f"{where}: no {RESULTS_FILE}; this is not a run folder written by publish")
    actual = sha256_file(folder / RESULTS_FILE)
    if not actual.startswith(expected):
        raise IntegrityError(
            f"{where}: results.json has sha256 {actual[:RUN_TAG_DIGEST_HEX]}…, not the expected "
            f"{expected[:RUN_TAG_DIGEST_HEX]}…: it is another run, or was changed after publishing; do not "
            "use this checkpoint"
        )


# --- the figures --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Figure:
    """One figure of a run, as recorded and as recomputed.

    Attributes:
        name: where it is in results.json, e.g. `verification.p_value`, `metrics.per_class[0].f1`; it names
            the figure's tolerance in [`pipeline.scoring.tolerances.FIGURE_TOLERANCES`].
        recorded: the value results.json holds.
        recomputed: the value computed again.
    """

    name: str
    recorded: Any
    recomputed: Any

    @property
    def rel_tol(self) -> float:
        """How far, relatively, a recomputed float may be from the recorded one: 0, bit for bit, for every
        figure [`pipeline.scoring.tolerances.FIGURE_TOLERANCES`] does not name."""
        return tolerance_of(self.name).rtol

    def equal(self) -> bool:
        """Whether the two agree ([`pipeline.scoring.tolerances.same_figure`]): floats within what another
        honest environment can give, everything else exactly."""
        return same_figure(self.name, self.recorded, self.recomputed)

    def problem(self) -> str:
        """The figure as a problem message names it: recorded, recomputed, and for floats by how much they
        differ and whether another environment could give that."""
        note = difference_note(self.name, self.recorded, self.recomputed)
        return f"{self.name} is {self.recorded!r} but {self.recomputed!r} when recomputed" + (
            f" ({note})" if note else ""
        )


def figures(prefix: str, recorded: Any, recomputed: Any) -> list[Figure]:
    """Pairs every leaf of two records of the same type (dataclasses, lists, dicts), by its path. A field of
    a dataclass whose default is None and that is None on both sides is no figure (a record the run's
    schema or task does not have, such as the official metric before schema 4) and is left out.

    Example:
        >>> [f.name for f in figures("m", {"a": 1, "b": [2.0]}, {"a": 1, "b": [2.5]})]
        ['m.a', 'm.b[0]']
    """
    if dataclasses.is_dataclass(recorded) and dataclasses.is_dataclass(recomputed):
        return [
            pair
            for f in dataclasses.fields(recorded)
            if f.default is not None
            or getattr(recorded, f.name) is not None
            or getattr(recomputed, f.name) is not None
            for pair in figures(f"{prefix}.{f.name}", getattr(recorded, f.name), getattr(recomputed, f.name))
        ]
    if isinstance(recorded, list) and isinstance(recomputed, list) and len(recorded) == len(recomputed):
        return [
            pair
            for i, (old, new) in enumerate(zip(recorded, recomputed, strict=True))
            for pair in figures(f"{prefix}[{i}]", old, new)
        ]
    if isinstance(recorded, dict) and isinstance(recomputed, dict) and list(recorded) == list(recomputed):
        return [
            pair for key in recorded for pair in figures(f"{prefix}.{key}", recorded[key], recomputed[key])
        ]
    if hasattr(recorded, "value") and hasattr(recomputed, "value"):  # Status
        return [Figure(prefix, recorded.value, recomputed.value)]
    return [Figure(prefix, recorded, recomputed)]


def metrics_figures(recorded: Metrics, recomputed: Metrics, prefix: str = "metrics") -> list[Figure]:
    """Every quality figure of a run, recorded against recomputed ([`figures`]): bit for bit, but the loss
    within [`pipeline.scoring.metrics.LOSS_REL_TOL`] (it may have been recorded in float32), as
    [`pipeline.scoring.tolerances.FIGURE_TOLERANCES`] has it.

    Example:
        >>> [f.rel_tol for f in metrics_figures(results.metrics, results.metrics) if f.name == "metrics.loss"]
        [1e-06]
    """
    return figures(prefix, recorded, recomputed)


def evaluated_figures(
    record: Results | SplitResult, metrics: Metrics, verification: Verification
) -> list[Figure]:
    """An evaluated split's recorded metrics and verification (the run's, or its second split's, named
    `second_split.…`) against the same figures recomputed ([`metrics_figures`], [`figures`]).

    Example:
        >>> [f.name for f in evaluated_figures(results, results.metrics, results.verification)][:2]
        ['metrics.accuracy', 'metrics.f1_macro']
    """
    prefix = "second_split." if isinstance(record, SplitResult) else ""
    return [
        *metrics_figures(record.metrics, metrics, f"{prefix}metrics"),
        *figures(f"{prefix}verification", record.verification, verification),
    ]


def recomputed_verification(results: Results, split: SplitResult | None = None) -> Verification:
    """The verification computed again from results.json's class counts, correct rows and parameter counts:
    the run's (both gates, [`pipeline.scoring.gate.both_gates`], when its task has a second evaluated split),
    or, given `split`, that split's own.

    Raises:
        [`IntegrityError`]: the counts are impossible (labels that are not the task's, more correct rows
        than rows, no parameters).
    """
    labels = list(results.dataset.label_names)
    recorded, metrics = (split or results).verification, (split or results).metrics
    where = f"{'second_split.' if split else ''}verification"
    if list(recorded.class_counts) != labels:
        raise IntegrityError(
            f"{RESULTS_FILE}: {where}.class_counts names {list(recorded.class_counts)}, the labels are "
            f"{labels}"
        )
    parameters = results.parameters
    if parameters.after < 1 or parameters.before < 1:
        raise IntegrityError(
            f"{RESULTS_FILE}: parameters before/after {parameters.before}/{parameters.after}"
        )
    finite = all_finite(dataclasses.asdict(metrics)) and all_finite(dataclasses.asdict(results.efficiency))
    try:
        verification = verification_from_counts(
            [recorded.class_counts[name] for name in labels],
            recorded.correct,
            labels,
            parameters.before / parameters.after,
            finite,
        )
    except ValueError as error:
        raise IntegrityError(f"{RESULTS_FILE}: {where}: {error}") from None
    if split is not None or results.second_split is None:
        return verification
    second = results.second_split
    return both_gates(verification, recomputed_verification(results, second), second.split)


def official_metric_of(results: Results) -> tuple[str | None, int]:
    """The official metric a run must record, as [`pipeline.scoring.metrics.label_metrics`] takes it: its
    task's (`TaskSpec.official_metric` and `positive_label`) from schema 4 on, None in earlier schemas. The
    task's, never the one results.json names, so a run that names another metric is caught recomputing it.

    Example:
        >>> official_metric_of(Results.load("runs/tiny-gpt2-none-sst2"))
        ('accuracy', 1)
    """
    if results.schema_version < OFFICIAL_METRIC_SCHEMA:
        return None, 1
    if results.dataset.task not in TASKS:
        raise IntegrityError(
            f"{RESULTS_FILE}: dataset.task is {results.dataset.task!r}, which is no GLUE task this attncard "
            "knows"
        )
    spec = TASKS[results.dataset.task]
    return spec.official_metric, spec.positive_label


def metrics_from_confusion(results: Results, split: SplitResult | None = None) -> Metrics:
    """The label metrics computed again from the recorded confusion matrix (its rows are the true labels): the
    run's, or, given `split`, that evaluated split's.

    The loss and the predictions hash need the predictions themselves; they are carried over as recorded
    (`attncard verify` recomputes them from the model).
    """
    labels = list(results.dataset.label_names)
    recorded, verification = (split or results).metrics, (split or results).verification
    prefix = "second_split." if split else ""
    matrix = recorded.confusion_matrix
    size = len(labels)
    if len(matrix) != size or any(len(row) != size or min(row) < 0 for row in matrix):
        raise IntegrityError(
            f"{RESULTS_FILE}: {prefix}metrics.confusion_matrix is not a {size}×{size} table of counts"
        )
    total = sum(map(sum, matrix))
    if not 0 < total <= MAX_ROWS or total != verification.n:
        raise IntegrityError(
            f"{RESULTS_FILE}: {prefix}metrics.confusion_matrix counts {total} rows, {prefix}verification.n "
            f"is {verification.n}"
        )
    y_true = [t for t in range(size) for p in range(size) for _ in range(matrix[t][p])]
    y_pred = [p for t in range(size) for p in range(size) for _ in range(matrix[t][p])]
    metrics = label_metrics(y_true, y_pred, labels, *official_metric_of(results))
    return dataclasses.replace(metrics, loss=recorded.loss, predictions_sha256=recorded.predictions_sha256)


def recorded_figure_problems(results: Results) -> list[str]:
    """Every way results.json's verification and metrics disagree with the same figures recomputed from its
    counts; empty when they agree.

    Example:
        >>> recorded_figure_problems(Results.load("runs/tiny-gpt2-none-sst2"))
        []
    """
    recorded = results.verification
    problems = [
        figure.problem()
        for figure in [
            *figures("verification", recorded, recomputed_verification(results)),
            *figures("metrics", results.metrics, metrics_from_confusion(results)),
            Figure(
                "metrics.accuracy (against verification.accuracy)",
                results.metrics.accuracy,
                recorded.accuracy,
            ),
            Figure(
                "parameters.compression_factor",
                results.parameters.compression_factor,
                results.parameters.before / results.parameters.after,
            ),
            Figure("dataset.validation_rows", results.dataset.validation_rows, recorded.n),
            *figures("training.log", results.training.log, training_log(results.training.losses)),
            *_statistics_figures(results),
        ]
        if not figure.equal()
    ]
    problems += second_split_problems(results)
    # The paired verdict against the dense model is recomputed from its counts (pipeline.scoring.paired).
    problems += [f"comparison: {problem}" for problem in comparison_problems(results)]
    problems += mcc_difference_problems(results)
    # The status first: it is what a forger is after.
    return sorted(problems, key=lambda problem: not problem.startswith("verification.status "))


def second_split_problems(results: Results) -> list[str]:
    """Every way results.json's second evaluated split (MNLI's mismatched) disagrees with its task or with
    its own figures recomputed from its counts; empty when it agrees, or when the task has one split."""
    recorded = results.second_split
    expected = TASKS[results.dataset.task].second_split if results.dataset.task in TASKS else ""
    if results.schema_version < OFFICIAL_METRIC_SCHEMA:
        expected = ""  # schema 3 evaluated the first split alone
    if (recorded.split if recorded is not None else "") != expected:
        shown = recorded.split if recorded is not None else None
        return [
            f"second_split is {shown!r}, but the task {results.dataset.task} evaluates {expected or 'none'}"
        ]
    if recorded is None:
        return []
    return [
        figure.problem()
        for figure in [
            *figures(
                "second_split.verification", recorded.verification, recomputed_verification(results, recorded)
            ),
            *figures("second_split.metrics", recorded.metrics, metrics_from_confusion(results, recorded)),
            Figure(
                "second_split.metrics.accuracy (against its verification.accuracy)",
                recorded.metrics.accuracy,
                recorded.verification.accuracy,
            ),
        ]
        if not figure.equal()
    ]


def mcc_difference_problems(results: Results) -> list[str]:
    """Every way results.json's MCC difference (`comparison.mcc_difference`) is not what a CoLA run records:
    missing from a run whose official metric is MCC and that has a dense baseline, present in any other run,
    or resampled with another seed (the run's training seed), count (`BOOTSTRAP_RESAMPLES`) or confidence
    (`DEFAULT_CONFIDENCE`: publish has one of each). The figures themselves need both runs' predictions:
    `attncard verify --predictions` recomputes them.

    Example:
        >>> mcc_difference_problems(Results.load("runs/tiny-gpt2-none-sst2"))
        []
    """
    comparison, official = results.comparison, results.metrics.official
    recorded = comparison.mcc_difference if comparison is not None else None
    wanted = (
        comparison is not None
        and bool(comparison.baselines)
        and official is not None
        and official.name == "matthews_correlation"
    )
    if recorded is None:
        missing = "comparison.mcc_difference is missing: a run scored by MCC records it against its dense run"
        return [missing] if wanted else []
    if not wanted:
        return [
            "comparison.mcc_difference is recorded, but only a run scored by MCC with a dense run has one"
        ]
    expected = {
        "seed": results.training.hyperparameters.seed,
        "resamples": BOOTSTRAP_RESAMPLES,
        "confidence": DEFAULT_CONFIDENCE,
    }
    problems = [
        f"comparison.mcc_difference.{name} is {getattr(recorded, name)!r}, not {value!r}"
        for name, value in expected.items()
        if getattr(recorded, name) != value
    ]
    if not -2 <= recorded.ci_low <= recorded.ci_high <= 2 or not -2 <= recorded.difference <= 2:
        problems.append(
            f"comparison.mcc_difference is {recorded.difference!r} in [{recorded.ci_low!r}, "
            f"{recorded.ci_high!r}]: no difference of two correlations and its interval"
        )
    return problems


def _statistics_figures(results: Results) -> list[Figure]:
    """The dataset statistics against the figures they must agree with: rows of each split, and the evaluated
    split's rows per label against the verification's class counts."""
    statistics = results.dataset.statistics
    pairs = []
    splits = (("train", results.dataset.train_rows), (results.dataset.split, results.verification.n))
    for split, rows in splits:
        if split in statistics:
            pairs.append(Figure(f"dataset.statistics.{split}.rows", statistics[split].rows, rows))
    if results.dataset.split in statistics:
        pairs += figures(
            f"dataset.statistics.{results.dataset.split}.label_counts",
            statistics[results.dataset.split].label_counts,
            results.verification.class_counts,
        )
    return pairs


def stock_problems(results: Results, changes_attention: bool) -> list[str]:
    """Every way results.json's stock-loader record (`stock`) contradicts itself or the run's module; empty
    when it agrees, or when the run records none (written before it was measured).

    Args:
        results: the run.
        changes_attention: whether the run's module changes attention
            (`AttentionModule.claims.changes_attention`): only then is the stock model another model, and
            measured.

    Example:
        >>> results = Results.load("runs/tiny-gpt2-none-sst2")  # `none`: stock tools build the same model
        >>> stock_problems(results, changes_attention=False)
        []
        >>> stock_problems(results, changes_attention=True)
        ["stock.same_model is True but the module 'none' changes attention"]
    """
    stock = results.stock
    if stock is None:
        return []
    problems = []
    if stock.same_model == changes_attention:
        what = "changes attention" if changes_attention else "keeps the model's own attention"
        problems.append(
            f"stock.same_model is {stock.same_model!r} but the module '{results.module.name}' {what}"
        )
    measured = not stock.same_model and not stock.error
    if (stock.accuracy is not None) != measured or bool(stock.predictions_sha256) != measured:
        recorded = f"{stock.accuracy!r} with predictions_sha256 {stock.predictions_sha256[:SHA_PREFIX]!r}"
        expected = "a stock load that ran has both" if measured else "nothing was measured"
        problems.append(f"stock.accuracy is {recorded}, but {expected}")
    n = results.verification.n
    share = stock.accuracy
    if share is not None and not (0 <= share <= 1 and n > 0 and round(share * n) / n == share):
        problems.append(f"stock.accuracy is {stock.accuracy!r}, which is no share of {n} rows")
    if not 0 <= stock.ignored_weights <= stock.adapter_weights:
        problems.append(
            f"stock.ignored_weights is {stock.ignored_weights} of {stock.adapter_weights} adapter weights"
        )
    return problems


def card_problems(results: Results, folder: Path) -> list[str]:
    """Every way the run's card and plots differ from the ones results.json renders; empty when equal.

    publish renders the card from results.json before the card itself is in the manifest, so the card is
    rendered again from results.json with the manifest it had then (all files but the card).
    """
    with (folder / CARD_FILE).open("rb") as handle:
        shipped = handle.read(MAX_CARD_BYTES + 1).decode("utf-8", errors="replace")
    if len(shipped) > MAX_CARD_BYTES:
        return [f"{CARD_FILE} is larger than {MAX_CARD_BYTES >> 20} MiB, which no card attncard renders is"]
    # The usage snippet and the command are attncard's, built again from the recorded names; one status line.
    problems = rendered_card_problems(results, shipped)
    if problems:
        return problems
    problems = eval_results_problems(results, folder)
    with tempfile.TemporaryDirectory(prefix="attncard-card-") as scratch:
        plots = write_plots(results, Path(scratch))
        recorded = results.environment.packages.get("matplotlib")
        for plot in plots:
            drawn, shipped_plot = Path(scratch) / plot["file"], folder / plot["file"]
            if not _same_bytes(shipped_plot, drawn.read_bytes()):  # the same bytes: the fast path
                problem = _plot_problem(
                    plot["file"], shipped_plot, drawn.read_bytes(), recorded, results.plot_style
                )
                if problem is not None:
                    problems.append(problem)
    licence = render_license(results)
    shipped_licence = folder / LICENSE_FILE
    if licence is None and shipped_licence.exists():
        problems.append(
            f"{LICENSE_FILE} is there, but results.json names the licence '{results.model.license}'"
        )
    elif licence is not None and not _same_bytes(shipped_licence, licence.encode("utf-8")):
        problems.append(f"{LICENSE_FILE} is not the licence file results.json renders")
    as_rendered = dataclasses.replace(
        results, manifest={name: digest for name, digest in results.manifest.items() if name != CARD_FILE}
    )
    expected, actual = render_card(as_rendered, plots).splitlines(), shipped.splitlines()
    for number, (shown, rendered) in enumerate(zip(actual, expected, strict=False), start=1):
        if shown != rendered:
            problems.append(
                f"{CARD_FILE} line {number} reads {shown[:80]!r}, results.json renders {rendered[:80]!r}"
            )
            break
    else:
        if len(actual) != len(expected):
            problems.append(f"{CARD_FILE} has {len(actual)} lines, results.json renders {len(expected)}")
    return problems


def _same_bytes(path: Path, expected: bytes) -> bool:
    """Whether the file holds exactly `expected`, reading no more of it than that (a shipped file may be
    huge)."""
    if not path.is_file() or path.stat().st_size != len(expected):
        return False
    with path.open("rb") as handle:
        return handle.read(len(expected) + 1) == expected


class OtherMatplotlibProblem(str):
    """A card problem that another matplotlib can explain: a plot differs from the one drawn here beyond
    PLOT_TILE_RMS_TOLERANCE, but results.json names another matplotlib than this one, or none. It is still a
    problem (the plot is not checked), never proof that the plot was edited."""


def _plot_problem(
    name: str, shipped: Path, drawn: bytes, recorded: str | None, style: int | None = None
) -> str | None:
    """What is wrong with the shipped plot `name` that differs in bytes from the `drawn` one; None when it
    shows the same pixels within PLOT_TILE_RMS_TOLERANCE. `recorded` is the matplotlib results.json says drew
    it (None for a run published before attncard recorded it), `style` the plot style it records: where both
    releases draw that style alike (plots.PLOT_STYLE_RELEASES), no release explains a difference."""
    from importlib import metadata

    with shipped.open("rb") as handle:
        difference = plot_difference(handle.read(MAX_PLOT_BYTES + 1), drawn)
    if difference is None:
        return f"{name} is not the plot results.json draws (no PNG of its size as matplotlib writes it)"
    if difference.worst_tile_rms <= PLOT_TILE_RMS_TOLERANCE:
        return None
    mine = metadata.version("matplotlib")
    measured = (
        f"a {PLOT_TILE}-pixel tile of it is {difference.worst_tile_rms:.1f} RMS of 255 from the plot "
        f"matplotlib {mine} draws here (the whole image {difference.rms:.1f}; the tolerance is "
        f"{PLOT_TILE_RMS_TOLERANCE})"
    )
    if recorded == mine or difference.rms > PLOT_RMS_BEYOND_ANY_RELEASE or draw_alike(style, recorded, mine):
        return f"{name} is not the plot results.json draws: {measured}"
    drew, where = f"results.json says matplotlib {recorded} drew it", f"with matplotlib=={recorded}"
    if recorded is None:
        drew = "results.json does not say which matplotlib drew it (published before attncard recorded it)"
        where = "with the matplotlib the run was published with"
    return OtherMatplotlibProblem(
        f"{name} differs from the plot results.json draws: {measured}, and {drew}; another matplotlib "
        "release draws other pixels, so this one cannot tell whether the plot is results.json's: check it "
        f"{where}"
    )


def eval_results_problems(results: Results, folder: Path) -> list[str]:
    """Every way the run's `.eval_results/` differs from the one entry results.json renders (its accuracy is
    results.json's); empty when equal."""
    expected = eval_results_file(results)
    listed = sorted(name for name in results.manifest if name.startswith(f"{EVAL_RESULTS_DIR}/"))
    problems = [f"{name} is not the run's entry {expected}" for name in listed if name != expected]
    path = folder / expected
    if expected in listed and not _same_bytes(path, render_eval_results(results).encode("utf-8")):
        problems.append(
            f"{expected} is not the entry results.json renders (accuracy {results.metrics.accuracy})"
        )
    return problems


__all__ = [
    "RUN_FILES",
    "WEIGHTS_SUFFIX",
    "Figure",
    "OtherMatplotlibProblem",
    "card_problems",
    "check_expected_sha256",
    "check_files",
    "check_run_files",
    "check_run_tag",
    "check_safe_formats",
    "eval_results_problems",
    "evaluated_figures",
    "figures",
    "mcc_difference_problems",
    "metrics_figures",
    "metrics_from_confusion",
    "official_metric_of",
    "read_checked_files",
    "read_json_object",
    "read_results",
    "recomputed_verification",
    "recorded_figure_problems",
    "refuse_contradictions",
    "stock_problems",
]
