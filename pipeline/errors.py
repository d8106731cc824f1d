"""Errors a user can act on.

Every error raised on bad input derives from [`AttncardError`]; its message is one line that says what
is wrong and what to do. The CLI prints that line and exits with status 2, without a traceback.
"""


class AttncardError(Exception):
    """Base class of the errors a user can fix: bad input, a missing file, a model that cannot be had."""


class UnknownNameError(AttncardError, ValueError):
    """An unknown model alias, module or task name was given.

    Example:
        >>> raise UnknownNameError("task", "sst3", ["cola", "sst2"])
        Traceback (most recent call last):
        ...
        pipeline.errors.UnknownNameError: unknown task 'sst3'; valid tasks: cola, sst2
    """

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.kind, self.name, self.valid = kind, name, list(valid)
        super().__init__(f"unknown {kind} '{name}'; valid {kind}s: {', '.join(valid)}")


class DataError(AttncardError):
    """A data set could not be read: missing file, missing column, unknown label, empty split."""


class ModelLoadError(AttncardError):
    """A model or tokenizer could not be loaded (offline, missing folder, unsupported architecture)."""


class ResultsError(AttncardError):
    """A results.json that cannot be read: invalid JSON, unknown schema version, missing fields."""
