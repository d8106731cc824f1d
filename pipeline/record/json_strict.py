"""Strict JSON for results.json: parsing that refuses what `allow_nan=False` never writes, and the typed
rebuilding of the schema's dataclasses from what was parsed, every leaf checked against its annotation.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from enum import Enum

from .errors import NonFiniteNumberError, ResultsError

# No field holds an integer that large (64 bits); a larger one is an edit meant to overflow a float.
MAX_INT = 2**63 - 1


def loads_strict(text: str) -> typing.Any:
    """Parses strict JSON: raises [`NonFiniteNumberError`] on NaN or an infinity (a broken run, not a
    number), `ValueError` on a number too large for a float (Python would read `1e999` as infinity) or a key
    given twice in one object (readers differ on which one counts), `json.JSONDecodeError` on anything else
    that is not JSON, `ValueError` on JSON nested too deep for Python to read.

    Example:
        >>> loads_strict('{"loss": NaN}')
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.NonFiniteNumberError: NaN is not a number
        >>> loads_strict('{"metrics": {}, "metrics": {}}')
        Traceback (most recent call last):
        ...
        ValueError: the key 'metrics' appears twice in one object; readers differ on which one counts
    """
    try:
        return json.loads(
            text, parse_constant=_reject_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
        )
    except RecursionError:
        # A file nested thousands of levels deep exhausts Python's stack, not a figure of any run.
        raise ValueError("nested deeper than any JSON attncard writes") from None


def _reject_constant(name: str):
    raise NonFiniteNumberError(name)


def _finite_float(literal: str) -> float:
    # json reads `1e999` as float("1e999"), infinity: what `allow_nan=False` never writes.
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal[:40]} is too large for a number and reads as infinity")
    return value


def _unique_keys(pairs: list[tuple[str, typing.Any]]) -> dict[str, typing.Any]:
    # json keeps the last of two equal keys, other readers the first: one file, two runs.
    data = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(
                f"the key {key[:40]!r} appears twice in one object; readers differ on which one counts"
            )
        data[key] = value
    return data


def json_default(value):
    """What `json.dumps` writes for the values it does not know: an enum's value.

    Example:
        >>> json.dumps({"status": Enum("Status", {"PASS": "PASS"}).PASS}, default=json_default)
        '{"status": "PASS"}'
    """
    if isinstance(value, Enum):
        return value.value
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def build(kind, value, where: str):
    """Rebuilds `value` as type `kind`, recursing through dataclasses, lists, dicts and enums.

    Every leaf is checked against its annotation: a hash given as a number, a name given as a list or a
    count given as text is a [`ResultsError`] naming the field, never a value that breaks a later stage.

    Example:
        >>> build(list[int], [1, "2"], "counts")
        Traceback (most recent call last):
        ...
        attncard.pipeline.record.errors.ResultsError: results.json: counts[1] should be a whole number, ...
    """
    origin = typing.get_origin(kind)
    if kind is typing.Any:
        return value
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise ResultsError(f"results.json: {where} should be an object, not {json_kind(value)}")
        hints = typing.get_type_hints(kind)
        names = {f.name for f in dataclasses.fields(kind)}
        missing = [f.name for f in dataclasses.fields(kind) if f.name not in value and _required(f)]
        unknown = sorted(set(value) - names)
        if missing or unknown:
            raise ResultsError(f"results.json: {where} is missing {missing} / has unknown fields {unknown}")
        return kind(**{name: build(hints[name], item, f"{where}.{name}") for name, item in value.items()})
    if origin is list:
        (item_kind,) = typing.get_args(kind)
        if not isinstance(value, list):
            raise ResultsError(f"results.json: {where} should be a list, not {json_kind(value)}")
        return [build(item_kind, item, f"{where}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        key_kind, item_kind = typing.get_args(kind)
        if not isinstance(value, dict):
            raise ResultsError(f"results.json: {where} should be an object, not {json_kind(value)}")
        return {
            build(key_kind, key, f"{where} key"): build(item_kind, item, f"{where}.{key}")
            for key, item in value.items()
        }
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return build(option, value, where)
            except ResultsError as error:
                errors.append(error)
        raise errors[0]
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(value)
        except ValueError as error:
            raise ResultsError(f"results.json: {where} has unknown value {value!r}") from error
    is_integer = isinstance(value, int) and not isinstance(value, bool)
    if kind in (float, int) and is_integer and abs(value) > MAX_INT:
        # Not str(value): Python refuses to print an integer of more than 4300 digits.
        bits = value.bit_length()
        raise ResultsError(f"results.json: {where} is a {bits}-bit number, too large for any figure of a run")
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif kind in (str, bool):
        if isinstance(value, kind):
            return value
    else:
        raise ResultsError(f"results.json: {where} has a type this attncard cannot check ({kind!r})")
    raise ResultsError(f"results.json: {where} should be {_KIND_NAMES[kind]}, not {json_kind(value)}")


_KIND_NAMES = {float: "a number", int: "a whole number", str: "a string", bool: "true or false"}


def json_kind(value) -> str:
    """What a JSON value is, for messages: `a list`, `the number 3`, …

    Example:
        >>> json_kind([1]), json_kind(3), json_kind(None)
        ('a list', 'the number 3', 'null')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return "a list" if isinstance(value, list) else "an object"


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


__all__ = [
    "MAX_INT",
    "build",
    "json_default",
    "json_kind",
    "loads_strict",
]
