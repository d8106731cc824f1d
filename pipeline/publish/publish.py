"""Stage 7 — publish: the run folder, holding exactly what is pushed to the Hub.

    runs/<repo-name>/
        adapter_model.safetensors, adapter_config.json   the LoRA adapter and trained head (PEFT format)
        config.json                                      the base model's transformers config, with labels
        tokenizer files                                  as `save_pretrained` writes them
        README.md                                        the model card
        LICENSE                                          when the licence is `other`: which terms apply
        training_loss.png, scaling.png, …                the card's plots
        .eval_results/<task>.yaml                        the Hub's evaluation results
        results.json                                     every figure, and the sha256 of every other file

The folder is assembled under a temporary name next to its destination and renamed into place only when
complete: a failed run leaves nothing half-written.

[`run_publish`] runs every stage for one (model, module, task) and writes the run folder; with `push` set it
then pushes it (`pipeline.publish.push`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import logging
import os
import shutil
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path, PurePosixPath

import torch
import transformers

from ...modules import BUILTIN_PACKAGE, ModuleProvenance, contract_problems, get_module, module_provenance
from ...modules.checks import package_index_warning, traced_text_problems, untraced_attention_warning
from ..card.eval_results import write_eval_results
from ..card.model_index import LICENSE_FILE
from ..card.plots import write_plots
from ..card.render import render_card, render_license
from ..card.snippet import REPOSITORY_PLUGINS, run_folder_location, usage_snippet
from ..checks.lint import card_text_problems, lint_run_folder
from ..checks.predictions import baseline_predictions, write_predictions
from ..record.comparison import Comparison
from ..record.environment import EnvironmentRecord
from ..record.errors import AttncardError, BaselineError, CardLintError, first_line
from ..record.manifest import (
    CARD_FILE,
    PREDICTIONS_FILE,
    RESULTS_FILE,
    SECOND_PREDICTIONS_FILE,
    WEIGHTS_SUFFIX,
    build_manifest,
    is_transport_path,
    sha256_file,
)
from ..record.results import (
    CARD_TEMPLATE,
    PLOT_STYLE,
    SCHEMA_VERSION,
    DatasetRecord,
    ModelRecord,
    ModuleRecord,
    Results,
    SplitResult,
    TrainConfig,
    TrainingRecord,
    UsageRecord,
    Verification,
    training_log,
    utc_now,
)
from ..record.run_names import default_repo_name, reproduce_command
from ..run.data import TaskData, load_task, sample_rows, task_statistics
from ..run.evaluate import EvalResult, evaluate
from ..run.models import MODEL_ALIASES, load_model, resolve_model_name, tokenize
from ..run.scaling import max_positions
from ..run.train import train
from ..scoring.gate import both_gates, verify, verify_second
from ..scoring.metrics import get_official_metric, mcc_difference
from ..scoring.paired import (
    DEFAULT_MARGIN,
    DENSE_MODULE,
    baseline_name,
    baseline_record,
    no_baseline,
    paired_comparison,
    setup_differences,
)
from .push import sign_and_push

logger = logging.getLogger(__name__)
FINAL_LOSS_STEPS = 20  # the final training loss reported is the mean over this many last steps


def collect_results(
    *,
    repo_name: str,
    repo_id: str | None,
    command: str,
    started_at: str,
    data: TaskData,
    module: ModuleRecord,
    evaluation: EvalResult,
    verification: Verification,
    environment: EnvironmentRecord,
    second_split: SplitResult | None = None,
) -> Results:
    """Gathers what the stages measured into one [`Results`] (its manifest is filled in by the writer)."""
    trained = evaluation.trained
    loaded = trained.loaded
    return Results(
        schema_version=SCHEMA_VERSION,
        repo_name=repo_name,
        command=command,
        started_at=started_at,
        finished_at=utc_now(),
        model=ModelRecord(
            name=loaded.name,
            model_id=loaded.model_id,
            revision=loaded.revision,
            family=loaded.family,
            license=loaded.license,
            license_name=loaded.license_name,
            license_link=loaded.license_link,
            **model_dimensions(loaded.model.config),
            printout=repr(trained.model),
        ),
        module=module,
        dataset=DatasetRecord(
            task=data.spec.name,
            dataset_id=data.source.dataset_id,
            config=data.source.config,
            revision=data.source.revision,
            split=data.spec.validation_split,
            label_names=list(data.spec.label_names),
            train_rows=len(data.train),
            validation_rows=len(data.validation),
            files=data.source.files,
            statistics=task_statistics(data, loaded.tokenizer, trained.config.max_length),
            samples=sample_rows(data.validation, data.spec),
        ),
        training=TrainingRecord(
            hyperparameters=trained.config,
            lora_target_modules=trained.target_modules,
            losses=trained.losses,
            final_loss=sum(trained.losses[-FINAL_LOSS_STEPS:]) / len(trained.losses[-FINAL_LOSS_STEPS:]),
            final_loss_steps=len(trained.losses[-FINAL_LOSS_STEPS:]),
            seconds=trained.seconds,
            device=trained.device,
            penalties=trained.penalties,
            mixed_precision=trained.mixed_precision,
            log=training_log(trained.losses),
        ),
        metrics=evaluation.metrics,
        efficiency=evaluation.efficiency,
        parameters=evaluation.parameters,
        verification=verification,
        environment=environment,
        repo_id=repo_id,
        stock=evaluation.stock,
        second_split=second_split,
        plot_style=PLOT_STYLE,  # its plots drawn the same by matplotlib 3.8 to 3.11
        card_template=CARD_TEMPLATE,  # its card rendered again with this version's templates by every check
    )


def model_dimensions(config) -> dict[str, int | None]:
    """The sizes of a transformers config that the card's model details show, by their common names
    (transformers maps each family's own, `n_layer` or `dim`, to them)."""
    return {
        "max_position_embeddings": getattr(config, "max_position_embeddings", None),
        "num_layers": config.num_hidden_layers,
        "hidden_size": config.hidden_size,
        "num_heads": config.num_attention_heads,
        "vocab_size": config.vocab_size,
    }


def run_usage_snippet(code: str) -> str:
    """Runs a usage snippet and returns what it printed; an exception propagates, failing the render."""
    output = io.StringIO()
    with contextlib.redirect_stdout(output), torch.no_grad():
        exec(compile(code, "<model card usage snippet>", "exec"), {"__name__": "__usage__"})
    return output.getvalue()


def write_card_and_results(
    folder: Path, results: Results, plots: list[dict[str, str]], files: dict[str, str]
) -> None:
    """Renders the card of `results` into `folder` and saves its results.json. The card's file table lists
    `files` (the sha256 of every other file of the folder, `build_manifest`'s); results.json's manifest is
    those and the card's.
    """
    card = folder / CARD_FILE
    card.write_text(render_card(dataclasses.replace(results, manifest=files), plots), encoding="utf-8")
    manifest = {**files, CARD_FILE: sha256_file(card)}
    # In the order `build_manifest` lists a folder: by path, part by part.
    ordered = dict(sorted(manifest.items(), key=lambda entry: PurePosixPath(entry[0])))
    dataclasses.replace(results, manifest=ordered).save(folder)


def write_run_folder(
    evaluation: EvalResult, results: Results, run_dir: str | os.PathLike, overwrite: bool = True
) -> Path:
    """Writes the run folder: adapter, config, tokenizer, predictions.csv, model card and results.json, all or
    nothing.

    Args:
        evaluation: holds the trained model and tokenizer to save.
        results: the run's figures; the folder's results.json is these with its `manifest` and `usage`.
        run_dir: the folder to write, e.g. `runs/minilm-none-sst2`.
        overwrite: replace a run already in `run_dir`; when False, a run found there (one that appeared
            while this one trained: publish checks before it trains) is kept and nothing is written.

    Returns:
        The run folder.

    Example:
        >>> write_run_folder(evaluation, results, "runs/tiny-gpt2-none-sst2")
        PosixPath('runs/tiny-gpt2-none-sst2')
    """
    run_dir = Path(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    partial = run_dir.parent / f".{run_dir.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        trained = evaluation.trained
        # save_embedding_layers=False: peft would otherwise fetch the base config from the Hub to check
        # whether the vocabulary changed; it cannot have, nothing here resizes embeddings.
        trained.model.save_pretrained(partial, save_embedding_layers=False)
        base_model = trained.model.get_base_model()
        config = copy.deepcopy(base_model.config)
        config.architectures = [type(base_model).__name__]  # the checkpoint may name its bare encoder
        config.save_pretrained(partial)
        trained.loaded.tokenizer.save_pretrained(partial)
        # peft writes a boilerplate README.md of its own; ours replaces it.
        (partial / CARD_FILE).unlink(missing_ok=True)

        if evaluation.logits is None:
            raise ValueError("the evaluation holds no logits; publish needs them for predictions.csv")
        # Every row's labels and logits, covered by the manifest: the quality figures, without the weights.
        write_predictions(partial / PREDICTIONS_FILE, evaluation.labels, evaluation.logits.numpy())
        if (second := evaluation.second) is not None:
            name = SECOND_PREDICTIONS_FILE.format(split=second.split)
            write_predictions(partial / name, second.labels, second.logits.numpy())
        write_eval_results(results, partial)
        licence = render_license(results)
        if licence is not None:
            (partial / LICENSE_FILE).write_text(licence, encoding="utf-8")
        plots = write_plots(results, partial)
        # Every file but the card and results.json, hashed once: the weights are most of the bytes.
        files = build_manifest(partial)
        # The usage snippet runs on the folder as it will be published, weights, manifest and a card included:
        # the loader renders the card again from results.json and refuses any other, so the card it finds is
        # the one results.json renders before the snippet's output is in it. The published card shows the
        # same code pointed at the Hub repository, or at the run folder by the path publish was given.
        write_card_and_results(partial, results, plots, files)
        example = [evaluation.example[column] for column in evaluation.example]
        location = results.repo_id or run_folder_location(run_dir.name)  # never a local path
        # A base model from a local folder is recorded by name only: the snippet run here is given the folder.
        output = run_usage_snippet(
            usage_snippet(results, partial.as_posix(), example, base_model=evaluation.trained.loaded.source)
        )
        usage = UsageRecord(code=usage_snippet(results, location, example), output=output)
        write_card_and_results(partial, dataclasses.replace(results, usage=usage), plots, files)
        findings = lint_run_folder(partial)
        if findings:
            raise CardLintError(
                f"the card failed lint with {len(findings)} finding(s), first: {findings[0]}; nothing was "
                "written — fix the template or the module's texts, then run publish again"
            )

        if not overwrite:
            check_no_run_there(run_dir)
        if run_dir.exists():
            replaced = run_dir.parent / f".{run_dir.name}.replaced-{os.getpid()}"
            run_dir.rename(replaced)
            partial.rename(run_dir)
            shutil.rmtree(replaced)
        else:
            partial.rename(run_dir)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return run_dir


def copy_to_cards(run_dir: Path, cards_dir: Path) -> Path:
    """Copies every file of a run folder but its weights (`*.safetensors`) to `cards_dir/<repo-name>/`, so the
    run can be reviewed in a pull request and checked there without its weights (`attncard verify
    --predictions`); the weights stay out of git.

    Example:
        >>> copy = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> sorted(path.name for path in copy.iterdir())[:4], list(copy.glob("*.safetensors"))
        (['.eval_results', 'LICENSE', 'README.md', 'adapter_config.json'], [])
    """
    run_dir = Path(run_dir)
    destination = Path(cards_dir) / run_dir.name
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir(parents=True)
    for path in sorted(run_dir.rglob("*")):
        relative = path.relative_to(run_dir)
        if path.is_file() and path.suffix != WEIGHTS_SUFFIX and not is_transport_path(relative.as_posix()):
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination / relative)
    return destination


# --- one run, every stage --------------------------------------------------------------------------------


@dataclass
class PublishOptions:
    model: str
    module: str
    task: str
    train: TrainConfig
    data_dir: Path | None
    output: Path
    repo_id: str | None
    push: bool
    cards: Path | None = None
    allow_fail: bool = False
    hub_endpoint: str | None = None
    hub_timeout: float | None = None
    hub_deadline: float | None = None
    sign_key: Path | None = None
    # The run folder's name without a Hub repository (the sweep's `<model>-<module>-<task>-seed<k>`).
    name: str | None = None
    # The dense run the paired verdict compares with; None: looked for among the folders of `output`.
    baseline: Path | None = None
    margin: float = DEFAULT_MARGIN  # the verdict's non-inferiority margin, in accuracy
    # Replace a run already in `run_dir`. The command line sets it from `--overwrite` (off unless given); a
    # sweep trains a run again only when its folder holds another run or fails its checks, and replaces it.
    overwrite: bool = True

    @property
    def repo_name(self) -> str:
        if self.repo_id:
            return self.repo_id.split("/")[-1]
        if self.name:
            return self.name
        model = self.model if self.model in MODEL_ALIASES else resolve_model_name(self.model)[1]
        return default_repo_name(model, self.module, self.task)

    @property
    def run_dir(self) -> Path:
        return self.output / self.repo_name

    def command(self, data_from_folder: bool) -> str:
        """The command that reproduces this run, as results.json records it and the card shows it.

        It names nothing of the publisher's disk, so a reader can run it on theirs:

        - `--model`: an alias or Hub id as given; a local model folder as `./<folder name>` (the name
          results.json records as the model id, whose weights its revision names by sha256), to be run
          beside a copy of that folder; the `./` keeps a folder named like an alias (`gpt2`) a folder.
        - `--data-dir "$GLUE_DIR"` when the rows were read from a GLUE folder (`--data-dir` or
          `GLUE_DIR`): the reader sets `GLUE_DIR` to their copy, whose files results.json names by
          path within it and sha256. Left out when the rows came from the Hub.
        - The training options in full, and `--repo-id` or `--name` when given; never `--output`, `--cards` or
          `--push`, which say where this run was written, not what it is.

        Args:
            data_from_folder: whether the rows were read from a GLUE folder rather than the Hub.

        Example:
            >>> options = PublishOptions(
            ...     model="tiny-gpt2", module="none", task="sst2",
            ...     train=TrainConfig(steps=10, batch_size=8, lr=3e-2),
            ...     data_dir=Path("glue"), output=Path("runs"), repo_id=None, push=False,
            ... )
            >>> options.command(data_from_folder=True)
            'publish --model ./tiny-gpt2 --module none --task sst2 --steps 10 --batch-size 8 --lr 0.03
             --max-length 128 --seed 0 --data-dir "$GLUE_DIR"'
        """
        model = self.model
        if model not in MODEL_ALIASES:
            source, model_id = resolve_model_name(model)
            if Path(source).is_dir():
                model = f"./{model_id}"
        return reproduce_command(
            model, self.module, self.task, self.train, data_from_folder, repo_id=self.repo_id, name=self.name
        )


def _nearest_existing(path: Path) -> Path:
    """`path` itself if something is there (a broken link too), else its nearest ancestor that exists."""
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def check_output_folder(folder: Path, destination: Path, option: str) -> None:
    """Fails when publish could not write `destination`, a folder inside `folder` (given as `option`).

    `folder` is created if missing: its nearest existing ancestor (or itself) must be a folder this process
    may write in. `destination` is replaced if there: it must not be a file.

    Raises:
        [`AttncardError`]: what stands in the way, naming the option and the path.

    Example:
        >>> _ = Path("notes.txt").write_text("a file, not a folder")
        >>> check_output_folder(Path("notes.txt/runs"), Path("notes.txt/runs/tiny-gpt2-none-sst2"), "-o")
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.AttncardError: -o notes.txt/runs: notes.txt is not a folder; ...
    """
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise AttncardError(
            f"{option} {folder}: {existing} is not a folder; pass a folder, or a path where one can be "
            "created"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise AttncardError(
            f"{option} {folder}: {existing} is not writable by this user; pass a folder you can write in"
        )
    if os.path.lexists(destination) and not destination.is_dir():
        raise AttncardError(
            f"{option} {folder}: {destination} is there and is not a folder, so it cannot be replaced; "
            f"remove it, or pass another {option}"
        )


def check_no_run_there(run_dir: Path) -> None:
    """Fails when `run_dir` already holds files, so that publish never replaces a run unasked (`--overwrite`
    asks). An empty folder, or none, passes.

    Raises:
        [`AttncardError`]: the folder and the run it holds (its `started_at`), and the two ways on.

    Example:
        >>> check_no_run_there(Path("runs/tiny-gpt2-none-sst2"))
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.AttncardError: runs/tiny-gpt2-none-sst2 already holds a run
        (results.json ...
    """
    if not run_dir.is_dir() or not any(run_dir.iterdir()):
        return
    try:
        recorded = json.loads((run_dir / RESULTS_FILE).read_text(encoding="utf-8"))
        held = f"a run (results.json of {recorded['started_at']})"
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        held = f"files but no readable {RESULTS_FILE}"
    raise AttncardError(
        f"{run_dir} already holds {held}; pass --overwrite to replace it, or --output another folder"
    )


def check_run_folders(output: Path, cards: Path | None, name: str, overwrite: bool = True) -> None:
    """Fails when publish could not write the run folder `output/name`, or its cards copy `cards/name`, or
    when the two overlap (see [`check_output_folder`]), or, unless `overwrite`, when the run folder already
    holds a run (see [`check_no_run_there`]; a sweep's resume checks with `overwrite` left on, since it keeps
    the runs it finds).

    Raises:
        [`AttncardError`]: what stands in the way, naming the option.
    """
    check_output_folder(output, output / name, "--output")
    if not overwrite:
        check_no_run_there(output / name)
    if cards is None:
        return
    check_output_folder(cards, cards / name, "--cards")
    run_dir, cards_dir = (output / name).resolve(), (cards / name).resolve()
    if run_dir == cards_dir or run_dir in cards_dir.parents or cards_dir in run_dir.parents:
        raise AttncardError(
            f"--cards {cards} would copy the card to {cards_dir}, which overlaps the run folder {run_dir}; "
            "pass --cards and --output that are different folders"
        )


def check_max_length(name: str, max_length: int, config) -> None:
    """Fails when rows of `max_length` tokens are longer than the model `name` takes: the positions of its
    `config` ([`max_positions`], RoBERTa's less those below its first). A `config` of None, or one that names
    no limit, passes: loading the model says what is wrong with it.

    Raises:
        [`AttncardError`]: the length asked for, the model's, and the longest that works.

    Example:
        >>> from transformers import BertConfig
        >>> check_max_length("minilm", 1024, BertConfig(max_position_embeddings=512))
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.AttncardError: --max-length 1024 is more than minilm's 512 positions;
        ...
    """
    if config is None or getattr(config, "max_position_embeddings", None) is None:
        return
    positions = max_positions(config)
    if max_length > positions:
        raise AttncardError(
            f"--max-length {max_length} is more than {name}'s {positions} positions; use --max-length "
            f"{positions} or less"
        )


def training_differences(run: TrainConfig, baseline: TrainConfig) -> str:
    """The training settings in which a baseline differs from a run, each named once with both values.

    Example:
        >>> training_differences(TrainConfig(steps=40, lr=1e-3), TrainConfig(steps=30))
        'steps 40 here, 30 in the baseline; lr 0.001 here, 0.0002 in the baseline'
    """
    return "; ".join(
        f"{setting.name.replace('_', ' ')} {getattr(run, setting.name)} here, "
        f"{getattr(baseline, setting.name)} in the baseline"
        for setting in fields(TrainConfig)
        if getattr(run, setting.name) != getattr(baseline, setting.name)
    )


def baseline_candidate(options: PublishOptions) -> Path | None:
    """The dense run a module run will be compared with, as far as it can be told before training: the
    `--baseline` folder, which must be a run of `none` on the same task with the same training settings, or
    else the first such folder in `options.output` (the one named like the run with `none` for the module
    first). Its files are checked as a download checks them, so a broken baseline stops the run before it
    trains. The full setup (base model revision, data) is compared after training ([`dense_comparison`]).

    Args:
        options: the run's options.

    Returns:
        The baseline's folder; None for a run of `none` itself, or when `output` holds no candidate.

    Raises:
        [`BaselineError`]: the `--baseline` folder is not a dense run of this setup, or its files do not
            check.

    Example:
        >>> options = PublishOptions(
        ...     model="tiny-gpt2", module="sliding_window", task="sst2",
        ...     train=TrainConfig(steps=2, batch_size=8), data_dir=Path("glue"), output=Path("runs"),
        ...     repo_id=None, push=False,
        ... )
        >>> baseline_candidate(options)  # runs/tiny-gpt2-none-sst2 was trained with other settings
        >>> import dataclasses
        >>> same = Results.load("runs/tiny-gpt2-none-sst2").training.hyperparameters
        >>> baseline_candidate(dataclasses.replace(options, train=same))
        PosixPath('runs/tiny-gpt2-none-sst2')
    """
    if options.module == DENSE_MODULE:
        return None
    if options.baseline is not None:
        folders, explicit = [Path(options.baseline)], True
    else:
        output = Path(options.output)
        folders = sorted(p for p in output.iterdir() if p.is_dir()) if output.is_dir() else []
        named = output / baseline_name(options.repo_name, options.module)
        folders.sort(key=lambda folder: folder != named)
        explicit = False
    for folder in folders:
        try:
            recorded = Results.load(folder)
        except AttncardError as error:
            if explicit:
                raise BaselineError(
                    f"--baseline {folder}: {first_line(error)}; give a run folder of `none`"
                ) from None
            continue
        differences = []
        if recorded.module.name != DENSE_MODULE:
            differences.append(f"its module is '{recorded.module.name}', not '{DENSE_MODULE}'")
        if recorded.dataset.task != options.task:
            differences.append(f"its task is '{recorded.dataset.task}', not '{options.task}'")
        if recorded.training.hyperparameters != options.train:
            settings = training_differences(options.train, recorded.training.hyperparameters)
            differences.append(f"it was trained with other settings ({settings})")
        if differences:
            if explicit:
                raise BaselineError(
                    f"--baseline {folder} is not the dense baseline of this run: {differences[0]}; train "
                    f"`none` with the same settings first, or leave --baseline out"
                )
            continue
        try:
            baseline_predictions(folder, recorded)
        except AttncardError as error:
            raise BaselineError(
                f"the dense baseline {folder} does not check: {first_line(error)}; publish it again, or give "
                "another one with --baseline"
            ) from None
        return folder
    return None


def dense_comparison(
    results: Results, evaluation: EvalResult, candidate: Path | None, margin: float, explicit: bool
) -> Comparison | None:
    """The paired verdict of a trained module run against its dense baseline (see `pipeline.scoring.paired`):
    None for a run of `none`, [`no_baseline`] when no candidate was found or the candidate turns out to be of
    another setup (another base model revision or data; refused when it was named with `--baseline`).

    Raises:
        [`BaselineError`]: a `--baseline` of another setup, or predictions of other rows.
    """
    if results.module.name == DENSE_MODULE:
        return None
    if candidate is None:
        return no_baseline(margin)
    baseline = Results.load(candidate)
    differences = setup_differences(results, baseline)
    if differences:
        if explicit:
            raise BaselineError(
                f"--baseline {candidate} is not the dense baseline of this run: {differences[0]}"
            )
        return no_baseline(margin)
    predictions = baseline_predictions(candidate, baseline)
    if predictions.labels != evaluation.labels:
        raise BaselineError(
            f"the dense baseline {candidate} was evaluated on other rows (its gold labels differ from this "
            "run's); publish it again on the same data"
        )
    comparison = paired_comparison(
        evaluation.labels,
        evaluation.predictions,
        predictions.predictions,
        baselines=[baseline_record(candidate, baseline)],
        margin=margin,
    )
    official = evaluation.metrics.official
    if official is not None and get_official_metric(official.name).records_mcc_difference:
        # CoLA: the difference of the official metric too, with a paired bootstrap interval over the rows.
        comparison.mcc_difference = mcc_difference(
            evaluation.labels,
            evaluation.predictions,
            predictions.predictions,
            len(results.dataset.label_names),
            seed=results.training.hyperparameters.seed,
            confidence=comparison.confidence,
        )
    return comparison


def run_publish(options: PublishOptions) -> Path:
    """Runs every stage for one (model, module, task) and writes the run folder; pushes it when
    `options.push`. Progress goes to this module's logger (the command line prints it on stderr).

    Args:
        options: what to run; check them first with the command line's input checks, or build them by hand.

    Returns:
        The run folder.

    Raises:
        [`AttncardError`]: bad input found late (a model that cannot be loaded, data that cannot be read) or a
            push that failed; nothing half-written is left.

    Example:
        >>> options = PublishOptions(
        ...     model="tiny-gpt2", module="none", task="sst2", train=TrainConfig(steps=2, batch_size=8),
        ...     data_dir=Path("glue"), output=Path("new-runs"), repo_id=None, push=False,
        ... )
        >>> run_publish(options)
        PosixPath('new-runs/tiny-gpt2-none-sst2')
    """
    transformers.logging.set_verbosity_error()  # the head is new by design; its load report is noise here
    # Library noise: peft asks transformers a deprecated question; GPT-2's Conv1D is handled by peft itself.
    warnings.filterwarnings(
        "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
    )
    warnings.filterwarnings("ignore", message="fan_in_fan_out is set to False", category=UserWarning)
    if not options.overwrite:  # before anything: a run there is kept unless replacing it was asked for
        check_no_run_there(options.run_dir)
    started_at = utc_now()
    # What runs is what is there now: the commit and the module's source are recorded as the run starts, so
    # that a commit made while it trains is not claimed for it.
    environment = EnvironmentRecord.capture()
    module = get_module(options.module)
    # A plugin's contract was checked as it loaded; a built-in module's (its texts may be edited) is now.
    provenance = module_provenance(module.name)
    _refuse_before_training(module.name, provenance, contract_problems(module) or card_text_problems(module))
    module_source = {path.name: sha256_file(path) for path in module.source_files}
    module_config = module.config_class()
    # Warnings about the card, given before training, when acting on them costs nothing: the install line (a
    # package kept in attncard's repository is installed from there, on no index).
    index_warning = None if provenance.package in REPOSITORY_PLUGINS else package_index_warning(provenance)
    if index_warning is not None:
        logger.warning(index_warning)

    data = load_task(options.task, options.data_dir)
    logger.info(
        f"data: {data.spec.name}, {len(data.train)} training rows, {len(data.validation)} validation rows "
        f"({data.source.dataset_id}, {data.source.revision})"
    )
    baseline = baseline_candidate(options)  # checked before training: a broken baseline stops the run here
    transformers.set_seed(options.train.seed)  # the classification head is initialised while loading
    loaded = load_model(options.model, data.spec.label_names)
    # The command line checked a model on this machine already; a Hub model's config is known from here.
    check_max_length(options.model, options.train.max_length, loaded.model.config)
    module.apply(loaded.model, module_config)
    logger.info(f"model: {loaded.model_id} ({loaded.family}), module: {module.name}")
    # … and the tensor trace, recorded on the two rows evaluation will record it on.
    rows = tokenize(loaded.tokenizer, data.validation[:2], data.spec.text_columns, options.train.max_length)
    if (warning := untraced_attention_warning(module, loaded.model, dict(rows))) is not None:
        logger.warning(warning)
    _refuse_before_training(module.name, provenance, traced_text_problems(module, loaded.model, dict(rows)))

    trained = train(loaded, data, options.train, module, module_config)
    evaluation = evaluate(trained, data)
    verification = verify(evaluation, data.spec.label_names)
    second_split = None
    if evaluation.second is not None:  # MNLI: the mismatched genres have a gate of their own
        second_verification = verify_second(evaluation, data.spec.label_names)
        second_split = SplitResult(evaluation.second.split, evaluation.second.metrics, second_verification)
        verification = both_gates(verification, second_verification, evaluation.second.split)
    if module_provenance(module.name).source_sha256 != provenance.source_sha256:
        # The card shows the module's source as it is now: it must be the source that ran.
        raise AttncardError(
            f"the source of the module {module.name} changed while the run trained; nothing was written: "
            "publish again once it is final"
        )
    results = collect_results(
        repo_name=options.repo_name,
        repo_id=options.repo_id,
        command=options.command(data_from_folder=bool(data.source.files)),
        started_at=started_at,
        data=data,
        module=ModuleRecord(
            name=module.name,
            config=_config_dict(module_config),
            config_help={name: help_text for name, _, help_text in module.config_fields()},
            citation=module.paper.citation if module.paper else "",
            bibtex=module.paper.bibtex if module.paper else "",
            source=module_source,
            package=provenance.package,
            package_version=provenance.version,
            source_sha256=provenance.source_sha256,
            stats=evaluation.module_stats,
            trace=evaluation.trace,
        ),
        evaluation=evaluation,
        verification=verification,
        environment=environment,
        second_split=second_split,
    )
    results.comparison = dense_comparison(
        results, evaluation, baseline, options.margin, explicit=options.baseline is not None
    )
    run_dir = write_run_folder(evaluation, results, options.run_dir, overwrite=options.overwrite)
    if options.cards is not None:
        copy_to_cards(run_dir, options.cards)
    logger.info(
        f"{verification.status.value}: accuracy {verification.accuracy:.4f} on {verification.n} rows, "
        f"threshold {verification.threshold:.4f}; wrote {run_dir}/"
    )
    if options.push:
        if options.repo_id is None:
            raise AttncardError(
                "--push needs --repo-id ORG/NAME, which the card names; re-run publish with it"
            )
        sign_and_push(
            run_dir,
            options.repo_id,
            options.allow_fail,
            options.hub_endpoint,
            options.hub_timeout,
            options.hub_deadline,
            options.sign_key,
        )
    return run_dir


def _refuse_before_training(module_name: str, provenance: ModuleProvenance, problems: list[str]) -> None:
    """Stops the run before it trains when the module has problems that the card's lint would refuse after
    training (`contract_problems`, `card_text_problems`, `traced_text_problems`): the first one, how many
    more, and, for a module of another package, the package to fix."""
    if not problems:
        return
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    if provenance.package == BUILTIN_PACKAGE:
        raise AttncardError(
            f"the module '{module_name}': {problems[0]}{more}; nothing was trained or written"
        )
    raise AttncardError(
        f"the attention module '{module_name}' of the package {provenance.package} {provenance.version}: "
        f"{problems[0]}{more}; fix {provenance.package}, or uninstall it; nothing was trained or written"
    )


def _config_dict(config) -> dict:
    """The module's config as results.json holds it (tuples become lists): the card is rendered from this
    record and rendered again from results.json by every download, so both must be the same."""
    return json.loads(json.dumps(asdict(config)))
