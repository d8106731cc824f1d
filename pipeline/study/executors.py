"""The registry of sweep executors: the ways `attncard sweep --executor NAME` runs the runs of a sweep, each
one entry (a [`SweepExecutor`]: its name, its help, its own options and the function that runs the runs),
looked up by name, as transformers' `AttentionInterface` looks up an attention function.

The command line's registry, with the executors attncard has (local, ray, slurm), is
`pipeline.cli.sweep.EXECUTORS`; `--executor`'s choices and help, the executors' options and the refusal of an
option given with another executor all come from it. This module imports nothing of the stages: `--help`
answers without torch, Ray or submitit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .plan import RunOutcome, SweepRun, SweepSettings


@dataclass(frozen=True)
class ExecutorOption:
    """One command-line option of one or more executors, `--<name> VALUE`: given with another executor, it is
    refused before anything runs.

    Attributes:
        flag: the option, e.g. `--address`; the run function finds its value under `dest` (`address`).
        help: what it does, after the `with --executor <names>: ` that `attncard sweep --help` puts before it.
        metavar: how the help names its value, e.g. `ADDR`.
        type: what turns the text into the value (argparse's `type`); its ArgumentTypeError is the message.
        default: the value the run function gets when the option is not given.
    """

    flag: str
    help: str
    metavar: str
    type: Callable[[str], Any] = str
    default: Any = None

    @property
    def dest(self) -> str:
        """Its name in `args` and in the options the run function gets: `--time-limit` → `time_limit`."""
        return self.flag.removeprefix("--").replace("-", "_")


class RunExecutor(Protocol):
    """The function of an executor that runs the runs of a sweep: it imports its stage (torch, Ray, ...) when
    called, not before, so that `--help` and bad arguments answer without it."""

    def __call__(
        self, runs: list[SweepRun], settings: SweepSettings, options: dict[str, Any]
    ) -> Iterable[RunOutcome]:
        """Runs `runs` (from `plan_sweep`, checked by `check_sweep`) with `settings` and the executor's
        own `options` by `dest` (each given value, else its default), giving a `RunOutcome` per run as each
        is done, in any order. It may raise `AttncardError` before the first run (one line on stderr, exit
        status 2)."""
        ...


@dataclass(frozen=True)
class SweepExecutor:
    """One way to run the runs of a sweep, `attncard sweep --executor <name>`.

    Attributes:
        name: what `--executor` takes.
        help: its part of `--executor`'s help, after `<name>: `.
        run: the function that runs the runs ([`RunExecutor`]).
        options: its own options; one of several executors (`--retries`) is the same `ExecutorOption` in each.
    """

    name: str
    help: str
    run: RunExecutor
    options: tuple[ExecutorOption, ...] = ()


class SweepExecutors(Mapping[str, SweepExecutor]):
    """The executors `attncard sweep` knows, by name, in the order they were registered (that of
    `--executor`'s choices and help, and of the options in `attncard sweep --help`).

    Example:
        >>> executors = SweepExecutors()
        >>> executors.register(SweepExecutor("inline", "each run in this process", run=lambda r, s, o: []))
        >>> list(executors), executors.options()
        (['inline'], {})
    """

    def __init__(self) -> None:
        self._executors: dict[str, SweepExecutor] = {}

    def register(self, executor: SweepExecutor) -> None:
        """Adds an executor; `--executor <its name>` takes it from then on.

        Raises:
            ValueError: its name is taken, or one of its options is another executor's under the same flag
                but not the same `ExecutorOption` (share the object, or name the option otherwise).
        """
        if executor.name in self._executors:
            raise ValueError(f"an executor named {executor.name!r} is registered already; pick another name")
        for option in executor.options:
            shared = self.options().get(option.flag)
            if shared is not None and shared[0] != option:
                raise ValueError(
                    f"{option.flag} of executor {executor.name!r} differs from that of "
                    f"{', '.join(shared[1])}; give both the same ExecutorOption, or another flag"
                )
        self._executors[executor.name] = executor

    def unregister(self, name: str) -> None:
        """Removes the executor `name` (a test's, once it is done)."""
        del self._executors[name]

    def options(self) -> dict[str, tuple[ExecutorOption, list[str]]]:
        """Each executor option once, by flag, in the order of registration: the option, and the names of the
        executors that take it."""
        options: dict[str, tuple[ExecutorOption, list[str]]] = {}
        for executor in self._executors.values():
            for option in executor.options:
                options.setdefault(option.flag, (option, []))[1].append(executor.name)
        return options

    def __getitem__(self, name: str) -> SweepExecutor:
        return self._executors[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._executors)

    def __len__(self) -> int:
        return len(self._executors)


__all__ = ["ExecutorOption", "RunExecutor", "SweepExecutor", "SweepExecutors"]
