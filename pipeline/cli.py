"""The command line: `publish --model roberta --module adaptive_span`, and `attncard <command>`.

`publish` runs the stages in order — data, model, train, evaluate, verify, render — and writes the run folder
`runs/<repo-name>/`; with `--push` it then pushes it to the Hub (`attncard push RUN_DIR` pushes one written
before). Bad input ends with one line on stderr saying what is wrong and what to do, and exit status 2;
nothing is written.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..modules import get_module, module_names
from .data import TASKS, check_data_dir, get_task
from .errors import AttncardError, UnknownNameError
from .models import MODEL_ALIASES, resolve_model_name
from .results import TrainConfig

EXIT_BAD_INPUT = 2
# How the recorded command names the GLUE folder a run read: a shell variable the reader sets, not a path.
GLUE_DIR_PLACEHOLDER = '"$GLUE_DIR"'


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, naming the fix, with exit status 2."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive finite number")
    return value


def _repo_id(text: str) -> str:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a Hub repo id; write it as ORG/NAME") from None
    if "/" not in text:
        raise argparse.ArgumentTypeError(f"'{text}' has no owner; write it as ORG/NAME")
    return text


def add_publish_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = TrainConfig()
    parser.add_argument(
        "--model",
        required=True,
        help=f"base model: an alias ({', '.join(MODEL_ALIASES)}), a Hub id (org/name) or a local folder; "
        "'minilm' is shipped with attncard and works offline",
    )
    parser.add_argument(
        "--module", required=True, help=f"attention module to install ({', '.join(module_names())})"
    )
    parser.add_argument(
        "--task", default="sst2", help=f"GLUE classification task ({', '.join(TASKS)}); default: sst2"
    )
    group = parser.add_argument_group("training")
    group.add_argument(
        "--steps", type=_positive_int, default=defaults.steps, help="optimizer steps (default: %(default)s)"
    )
    group.add_argument(
        "--batch-size",
        type=_positive_int,
        default=defaults.batch_size,
        help="training rows per step (default: %(default)s)",
    )
    group.add_argument(
        "--lr", type=_positive_float, default=defaults.lr, help="learning rate (default: %(default)s)"
    )
    group.add_argument(
        "--max-length",
        type=_positive_int,
        default=defaults.max_length,
        help="tokens per row, longer rows are truncated (default: %(default)s)",
    )
    group.add_argument("--seed", type=int, default=defaults.seed, help="random seed (default: %(default)s)")
    group = parser.add_argument_group("input and output")
    group.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder of GLUE TSV files (SST-2/dev.tsv, …); default: $GLUE_DIR, else the Hub",
    )
    group.add_argument(
        "--output",
        type=Path,
        default=Path("runs"),
        help="folder that receives the run folder <repo-name>/ (default: runs)",
    )
    group.add_argument(
        "--repo-id",
        type=_repo_id,
        default=None,
        help="Hub repository ORG/NAME; its NAME names the run folder (default name: <model>-<module>-<task>)",
    )
    group.add_argument(
        "--cards",
        type=Path,
        default=None,
        metavar="DIR",
        help="also copy the card, results.json and plots to DIR/<repo-name>/ for review (e.g. cards)",
    )
    group = parser.add_argument_group("pushing to the Hub")
    group.add_argument(
        "--push",
        action="store_true",
        help="push the run folder to the Hub repository --repo-id, in one commit, tagged "
        "run-<started_at>-<results.json sha256[:32]>; token: $HF_TOKEN, else `hf auth login`",
    )
    add_push_arguments(group)


def add_push_arguments(group: argparse._ActionsContainer) -> None:
    """The options of a push, shared by `publish --push` and `attncard push`."""
    group.add_argument(
        "--allow-fail",
        action="store_true",
        help="push a run whose status is FAIL (its card says so at the top); refused otherwise",
    )
    group.add_argument(
        "--hub-endpoint",
        default=None,
        metavar="URL",
        help="the Hub to push to (default: $HF_ENDPOINT, else https://huggingface.co)",
    )
    group.add_argument(
        "--hub-timeout",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="give up a Hub request (and retry it) after this long without progress (default: 60)",
    )
    group.add_argument(
        "--hub-deadline",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help="give up the whole push after this long, however slowly the Hub answers (default: 1800)",
    )
    group.add_argument(
        "--sign-key",
        type=Path,
        default=None,
        metavar="PEM",
        help="sign the run folder with this elliptic-curve private key before pushing (OpenSSF model "
        "signing, model.sig); downloaders check it with --require-key and the public key",
    )


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

    @property
    def repo_name(self) -> str:
        if self.repo_id:
            return self.repo_id.split("/")[-1]
        model = self.model if self.model in MODEL_ALIASES else resolve_model_name(self.model)[1]
        return f"{model.split('/')[-1].lower()}-{self.module}-{self.task}"

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
        - The training options in full, and `--repo-id` when given; never `--output`, `--cards` or
          `--push`, which say where this run was written, not what it is.

        Args:
            data_from_folder: whether the rows were read from a GLUE folder rather than the Hub.

        Example:
            >>> options.command(data_from_folder=True)
            'publish --model ./tiny-gpt2 --module none --task sst2 --steps 10 --batch-size 8 --lr 0.03 \
--max-length 128 --seed 0 --data-dir "$GLUE_DIR"'
        """
        model = self.model
        if model not in MODEL_ALIASES:
            source, model_id, _ = resolve_model_name(model)
            if Path(source).is_dir():
                model = f"./{model_id}"
        words = [
            "publish",
            "--model",
            model,
            "--module",
            self.module,
            "--task",
            self.task,
            "--steps",
            str(self.train.steps),
            "--batch-size",
            str(self.train.batch_size),
            "--lr",
            str(self.train.lr),
            "--max-length",
            str(self.train.max_length),
            "--seed",
            str(self.train.seed),
        ]
        command = shlex.join(words)
        if data_from_folder:
            command += f" --data-dir {GLUE_DIR_PLACEHOLDER}"  # unquoted by shlex: the shell expands it
        if self.repo_id:
            command += f" --repo-id {shlex.quote(self.repo_id)}"
        return command


def options_from_args(args: argparse.Namespace) -> PublishOptions:
    """Checks every input before any work starts, so a typo costs nothing and nothing is written.

    Checked: the module, task and model names (a model folder must hold a config and weights), the data
    folder (`--data-dir`, else `GLUE_DIR`: a folder holding the task's folder), the folders written
    (`--output` and `--cards`: see [`check_output_folder`]), and with `--push` what a push needs.

    Raises:
        [`AttncardError`]: the first input found wrong; its message names the option and what to do.
    """
    if args.module not in module_names():
        raise UnknownNameError("module", args.module, module_names())
    spec = get_task(args.task)
    resolve_model_name(args.model)
    data_dir = args.data_dir or os.environ.get("GLUE_DIR") or None
    if data_dir is not None:
        check_data_dir(spec, data_dir)
    if args.push:
        check_push_setup(args.repo_id, args.hub_endpoint, args.sign_key)
    else:
        given = [
            name
            for name in ("allow_fail", "hub_endpoint", "hub_timeout", "hub_deadline", "sign_key")
            if getattr(args, name)
        ]
        if given:
            option = "--" + given[0].replace("_", "-")
            raise AttncardError(f"{option} only applies with --push; add --push, or drop {option}")
    options = PublishOptions(
        model=args.model,
        module=args.module,
        task=args.task,
        train=TrainConfig(
            steps=args.steps,
            batch_size=args.batch_size,
            lr=args.lr,
            max_length=args.max_length,
            seed=args.seed,
        ),
        data_dir=args.data_dir,
        output=args.output,
        repo_id=args.repo_id,
        push=args.push,
        cards=args.cards,
        allow_fail=args.allow_fail,
        hub_endpoint=args.hub_endpoint,
        hub_timeout=args.hub_timeout,
        hub_deadline=args.hub_deadline,
        sign_key=args.sign_key,
    )
    check_output_folder(options.output, options.run_dir, "--output")
    if options.cards is not None:
        cards_dir = options.cards / options.repo_name
        check_output_folder(options.cards, cards_dir, "--cards")
        run_dir, cards_dir = options.run_dir.resolve(), cards_dir.resolve()
        if run_dir == cards_dir or run_dir in cards_dir.parents or cards_dir in run_dir.parents:
            raise AttncardError(
                f"--cards {options.cards} would copy the card to {cards_dir}, which overlaps the run folder "
                f"{run_dir}; pass --cards and --output that are different folders"
            )
    return options


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
        >>> check_output_folder(Path("notes.txt/runs"), Path("notes.txt/runs/minilm-none-sst2"), "--output")
        Traceback (most recent call last):
        ...
        pipeline.errors.AttncardError: --output notes.txt/runs: notes.txt is not a folder; ...
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


def check_push_setup(repo_id: str | None, endpoint: str | None = None, sign_key: Path | None = None) -> None:
    """Fails fast, before any training, when a push could not happen: no repository, no token, offline, an
    endpoint the token may not go to (plain http off this machine), a signing key that cannot sign."""
    from huggingface_hub import constants, get_token

    from .hub_io import hub_endpoint
    from .signing import check_private_key

    if not repo_id:
        raise AttncardError(
            "--push needs --repo-id ORG/NAME: the repository to push to, which the card's usage snippet "
            "loads from"
        )
    if not get_token():
        raise AttncardError(
            f"--push needs a Hub token with write access to {repo_id.split('/')[0]}: set HF_TOKEN, or run "
            "`hf auth login`"
        )
    if constants.is_offline_mode():
        raise AttncardError("HF_HUB_OFFLINE is set: --push needs the network; unset it, or drop --push")
    hub_endpoint(endpoint)
    if sign_key is not None:
        check_private_key(sign_key)


def run_publish(options: PublishOptions) -> Path:
    """Runs every stage for one (model, module, task) and writes the run folder. Returns its path."""
    import transformers

    from .data import load_task
    from .evaluate import evaluate
    from .models import load_model
    from .publish import collect_results, copy_to_cards, write_run_folder
    from .results import ModuleRecord, sha256_file, utc_now
    from .train import train
    from .verify import verify

    transformers.logging.set_verbosity_error()  # the head is new by design; its load report is noise here
    # Library noise: peft asks transformers a deprecated question; GPT-2's Conv1D is handled by peft itself.
    warnings.filterwarnings(
        "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
    )
    warnings.filterwarnings("ignore", message="fan_in_fan_out is set to False", category=UserWarning)
    started_at = utc_now()
    module = get_module(options.module)
    module_config = module.config_class()

    data = load_task(options.task, options.data_dir)
    print(
        f"data: {data.spec.name}, {len(data.train)} training rows, {len(data.validation)} validation rows "
        f"({data.source.dataset_id}, {data.source.revision})",
        file=sys.stderr,
    )
    transformers.set_seed(options.train.seed)  # the classification head is initialised while loading
    loaded = load_model(options.model, data.spec.label_names)
    module.apply(loaded.model, module_config)
    print(f"model: {loaded.model_id} ({loaded.family}), module: {module.name}", file=sys.stderr)

    trained = train(loaded, data, options.train, module, module_config)
    evaluation = evaluate(trained, data)
    verification = verify(evaluation, data.spec.label_names)
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
            citation=module.citation,
            source={path.name: sha256_file(path) for path in module.source_files},
            stats=evaluation.module_stats,
            trace=evaluation.trace,
        ),
        evaluation=evaluation,
        verification=verification,
    )
    run_dir = write_run_folder(evaluation, results, options.run_dir)
    if options.cards is not None:
        copy_to_cards(run_dir, options.cards)
    print(
        f"{verification.status.value}: accuracy {verification.accuracy:.4f} on {verification.n} rows, "
        f"threshold {verification.threshold:.4f}; wrote {run_dir}/",
        file=sys.stderr,
    )
    if options.push:
        if options.repo_id is None:
            raise AttncardError(
                "--push needs --repo-id ORG/NAME, which the card names; re-run publish with it"
            )
        push(
            run_dir,
            options.repo_id,
            options.allow_fail,
            options.hub_endpoint,
            options.hub_timeout,
            options.hub_deadline,
            options.sign_key,
        )
    return run_dir


def push(
    run_dir: Path,
    repo_id: str,
    allow_fail: bool,
    endpoint: str | None,
    timeout: float | None,
    deadline: float | None = None,
    sign_key: Path | None = None,
) -> None:
    """Pushes a run folder with `pipeline.publish.push_run_folder`, saying on stderr what it does; signs it
    first with `sign_key` (once the folder is known to be pushable, so a refused folder is left unsigned)."""
    from .publish import PUSH_DEADLINE_S, PUSH_TIMEOUT_S, check_pushable, push_run_folder
    from .signing import sign_run_folder

    if sign_key is not None:
        check_pushable(run_dir, repo_id, allow_fail)
        signature = sign_run_folder(run_dir, sign_key)
        print(f"signed {run_dir}/ with {sign_key}: {signature}", file=sys.stderr)

    publish_logger = logging.getLogger(f"{__package__}.publish")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("push: %(message)s"))
    level = publish_logger.level
    publish_logger.addHandler(handler)
    publish_logger.setLevel(logging.INFO)
    try:
        result = push_run_folder(
            run_dir,
            repo_id,
            endpoint=endpoint,
            allow_fail=allow_fail,
            timeout=timeout if timeout is not None else PUSH_TIMEOUT_S,
            deadline=deadline if deadline is not None else PUSH_DEADLINE_S,
        )
    finally:
        publish_logger.removeHandler(handler)
        publish_logger.setLevel(level)
    commit = "new commit" if result.created_commit else "unchanged, no commit"
    tag = "tagged" if result.created_tag else "tag already there"
    print(
        f"pushed {run_dir}/ to {result.repo_id}@{result.commit[:12]} ({commit}), {tag} {result.tag}: "
        f"{result.url}",
        file=sys.stderr,
    )


PUSH_DESCRIPTION = (
    "Push a run folder written by publish to a Hub model repository: one commit holding every file (and "
    "deleting the repository's other files), or none when the Hub already holds exactly these files; then "
    "tag it run-<started_at>-<results.json sha256[:32]>. Refused when `attncard lint` finds anything, when "
    "the card was rendered for another repository, and when the status is FAIL (unless --allow-fail). "
    "Token: $HF_TOKEN, else `hf auth login`."
)


def add_push_command_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `attncard push RUN_DIR --repo-id ORG/NAME [--allow-fail] [--hub-endpoint URL]`."""
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run folder, e.g. runs/<repo-name>")
    parser.add_argument(
        "--repo-id",
        type=_repo_id,
        required=True,
        help="the Hub repository ORG/NAME the card was rendered for (publish --repo-id)",
    )
    add_push_arguments(parser)


def _config_dict(config) -> dict:
    """The module's config as results.json holds it (tuples become lists): the card is rendered from this
    record and rendered again from results.json by every download, so both must be the same."""
    import json
    from dataclasses import asdict

    return json.loads(json.dumps(asdict(config)))


def build_publish_parser(prog: str = "publish") -> OneLineParser:
    parser = OneLineParser(
        prog=prog,
        description=(
            "Fine-tune a model with LoRA and an attention module on a GLUE task, evaluate it on the full "
            "validation split, verify it against the majority-class baseline, and write the run folder "
            "runs/<repo-name>/ (adapter weights, config, tokenizer, results.json and the model card)."
        ),
        epilog="example: publish --model minilm --module none --task sst2 --steps 200",
    )
    add_publish_arguments(parser)
    return parser


def _run(action) -> int:
    try:
        action()
    except AttncardError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted; nothing was written", file=sys.stderr)
        return 130
    return 0


def publish_main(argv: list[str] | None = None) -> int:
    """The `publish` console script."""
    args = build_publish_parser().parse_args(argv)
    return _run(lambda: run_publish(options_from_args(args)))


def _print_modules() -> None:
    print(f"{'module':<16}{'causal':<8}{'bidirectional':<15}{'gqa':<5}")
    for name in module_names():
        module = get_module(name)
        flags = [module.causal, module.bidirectional, module.gqa]
        print(
            f"{name:<16}"
            + "".join(f"{'yes' if f else 'no':<{w}}" for f, w in zip(flags, (8, 15, 5), strict=True))
        )


def main(argv: list[str] | None = None) -> int:
    """The `attncard` console script: `attncard publish …`, `attncard modules`, `attncard bench attention`."""
    parser = OneLineParser(
        prog="attncard", description="Verified model cards for efficient-attention modules."
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    publish_parser = commands.add_parser("publish", help="train, evaluate, verify and write a run folder")
    add_publish_arguments(publish_parser)
    commands.add_parser("modules", help="list the attention modules and what they support")
    download = commands.add_parser(
        "download", help="download a published run, check every file, refuse FAIL", add_help=False
    )
    download.add_argument("options", nargs=argparse.REMAINDER)
    verify = commands.add_parser(
        "verify", help="re-evaluate a published run and compare with its card", add_help=False
    )
    verify.add_argument("options", nargs=argparse.REMAINDER)
    lint = commands.add_parser("lint", help="check a run folder's card, files and manifest", add_help=False)
    lint.add_argument("options", nargs=argparse.REMAINDER)
    push_parser = commands.add_parser(
        "push",
        help="push a run folder to the Hub: one commit, tagged; refused on lint findings or FAIL",
        description=PUSH_DESCRIPTION,
        epilog="example: attncard push runs/minilm-none-sst2 --repo-id attncard/minilm-none-sst2",
    )
    add_push_command_arguments(push_parser)
    bench = commands.add_parser(
        "bench", help="benchmarks: `attncard bench attention [--json FILE]` (see its --help)", add_help=False
    )
    bench.add_argument("benchmark", choices=["attention"])
    bench.add_argument("options", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "modules":
        return _run(_print_modules)
    if args.command == "download":
        from .download import main_download

        return main_download(args.options)
    if args.command == "verify":
        from .download import main_verify

        return main_verify(args.options)
    if args.command == "lint":
        from .lint import main as lint_main

        return lint_main(args.options)
    if args.command == "push":
        return _run(
            lambda: push(
                args.run_dir,
                args.repo_id,
                args.allow_fail,
                args.hub_endpoint,
                args.hub_timeout,
                args.hub_deadline,
                args.sign_key,
            )
        )
    if args.command == "bench":
        from ..modules.kernels import bench as attention_bench

        return attention_bench.main(args.options)
    return _run(lambda: run_publish(options_from_args(args)))


if __name__ == "__main__":
    sys.exit(main())
