"""The attention modules, and the registry the pipeline asks for them by name.

A module is built in (one folder each under `modules/`) or comes from an installed package, which registers
it in the entry-point group `attncard.modules` of its `pyproject.toml`:

    [project.entry-points."attncard.modules"]
    sliding_window = "attncard_sliding_window:MODULE"

The entry point's name must be the module's `name`, and it must load an [`AttentionModule`] that keeps the
module contract ([`contract_problems`]). The installed packages' metadata is read once, on the first lookup;
a package is imported only when its module is first asked for. One package cannot break attncard:

- a package that registers the name of a built-in module, or a name results.json cannot hold, is skipped
  with a warning (logger `attncard.modules`) naming the package;
- a package that does not import, breaks the contract, or registers a name another package registers too,
  raises [`ModulePluginError`] when, and only when, that module is asked for.

[`rescan_modules`] reads the installed packages again. Every module has a [`ModuleProvenance`]: the package
and version it comes from (`attncard` for the built-in ones) and the sha256 of its source, which results.json
and the card record, and which loading a published run checks.

Example:
    >>> from attncard.modules import get_module, module_names, module_provenance
    >>> module_names()
    ['adaptive_span', 'adaptive_sparse', 'none', 'span_expanded', 'svd_lowrank']
    >>> get_module("none").claims.bidirectional
    True
    >>> module_provenance("none").package
    'attncard'
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import logging
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..pipeline.record.errors import ModulePluginError, UnknownModuleError, first_line
from ..pipeline.record.manifest import sha256_file
from .base import AttentionModule, Claims, Measurement, Paper, Training

ENTRY_POINT_GROUP = "attncard.modules"
BUILTIN_PACKAGE = "attncard"  # the package the built-in modules come from
UNKNOWN_VERSION = "unknown"  # the version of a package whose metadata is not installed
# A module name results.json accepts (`module.name`): it is also part of the attention function's name.
MODULE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

# The built-in modules: each folder here holding a spec.md, named as its module (a new folder, a new module).
# A folder is imported (and with it torch) only when its module is first asked for: `module_names()` and
# `publish --help` import none.
BUILTIN_MODULE_NAMES = tuple(sorted(spec.parent.name for spec in Path(__file__).parent.glob("*/spec.md")))

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModuleProvenance:
    """Where an installed module comes from, as results.json records it beside the module's name.

    Attributes:
        package: the distribution that provides it: `attncard` for a built-in module, else the package that
            registers it (`attncard-sliding-window`).
        version: that distribution's version; "unknown" when its metadata is not installed (attncard run from
            a source tree).
        source_sha256: [`source_sha256`] of the module's folder.

    Example:
        >>> module_provenance("sliding_window")  # with examples/sliding_window installed
        ModuleProvenance(package='attncard-sliding-window', version='0.1.0', source_sha256='...')
    """

    package: str
    version: str
    source_sha256: str


@dataclass(frozen=True)
class _Registration:
    """A module name and the package it comes from, read from metadata before anything is imported."""

    package: str
    version: str
    entry_point: metadata.EntryPoint | None = None  # None for a built-in module
    problem: str | None = None  # why the module cannot be used, told when it is asked for


@functools.cache
def _registrations() -> dict[str, _Registration]:
    """Every module name, built in or registered by an installed package; read until [`rescan_modules`]."""
    found = {name: _Registration(BUILTIN_PACKAGE, _version(BUILTIN_PACKAGE)) for name in BUILTIN_MODULE_NAMES}
    plugins: dict[str, list[_Registration]] = {}
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = entry_point.dist
        package = dist.name if dist is not None else f"the package providing {entry_point.value}"
        version = dist.version if dist is not None else UNKNOWN_VERSION
        if entry_point.name in BUILTIN_MODULE_NAMES:
            logger.warning(
                f"the package {package} {version} registers an attention module '{entry_point.name}', the "
                f"name of a built-in module; it is ignored: rename its entry point in {package}"
            )
        elif not MODULE_NAME_RE.match(entry_point.name):
            logger.warning(
                f"the package {package} {version} registers an attention module '{entry_point.name}', which "
                "is not a lowercase name of letters, digits and _; it is ignored: rename its entry point"
            )
        else:
            plugins.setdefault(entry_point.name, []).append(_Registration(package, version, entry_point))
    for name, registrations in plugins.items():
        found[name] = registrations[0]
        if len(registrations) > 1:
            packages = " and ".join(f"{r.package} {r.version}" for r in registrations)
            found[name] = dataclasses.replace(
                registrations[0],
                problem=f"the attention module '{name}' is registered by {packages}; uninstall all but one",
            )
    return found


_plugins: dict[str, AttentionModule] = {}  # the modules of packages loaded so far, by name


def _builtin_module(name: str) -> AttentionModule:
    """The built-in module `name`, importing its folder the first time (Python keeps it imported)."""
    return importlib.import_module(f"{__name__}.{name}").MODULE


def __getattr__(name: str) -> object:
    """`BUILTIN_MODULES`, the built-in modules by name, imported when it is first read."""
    if name == "BUILTIN_MODULES":
        modules = {module_name: _builtin_module(module_name) for module_name in BUILTIN_MODULE_NAMES}
        globals()[name] = modules
        return modules
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return UNKNOWN_VERSION


def rescan_modules() -> None:
    """Reads the installed packages' entry points again, for a process that installed or removed a package
    providing modules after its first lookup. Modules already imported stay imported.

    Example:
        >>> "sliding_window" in module_names()
        False
        >>> import sys  # after `pip install --target plugins examples/sliding_window`:
        >>> sys.path.append("plugins")
        >>> rescan_modules()
        >>> "sliding_window" in module_names()
        True
    """
    importlib.invalidate_caches()
    _registrations.cache_clear()
    _plugins.clear()


def module_names() -> list[str]:
    """The names of every module, built in or registered by an installed package, sorted. A package's module
    is listed without being imported: [`get_module`] may still refuse it."""
    return sorted(_registrations())


def get_module(name: str) -> AttentionModule:
    """The module registered under `name`, importing its package the first time it is asked for.

    Args:
        name: a module name, as `publish --module` takes it.

    Returns:
        The [`AttentionModule`].

    Raises:
        [`UnknownModuleError`]: no module has this name; the message lists those that do.
        [`ModulePluginError`]: the package registering it does not import, breaks the module contract, or
            shares the name with another package.

    Example:
        >>> get_module("none").name
        'none'
    """
    registration = _registrations().get(name)
    if registration is None:
        raise UnknownModuleError(name, module_names())
    if registration.entry_point is None:
        return _builtin_module(name)
    if name not in _plugins:
        _plugins[name] = _load_plugin(name, registration)
    return _plugins[name]


def _load_plugin(name: str, registration: _Registration) -> AttentionModule:
    if registration.problem is not None:
        raise ModulePluginError(registration.problem)
    where = f"the attention module '{name}' of the package {registration.package} {registration.version}"
    try:
        module = registration.entry_point.load()
    except Exception as error:  # a broken package must not take attncard down: it is named, not raised
        raise ModulePluginError(
            f"{where} does not import ({type(error).__name__}: {first_line(error)}); reinstall "
            f"{registration.package}, or uninstall it"
        ) from error
    problems = contract_problems(module)
    if isinstance(module, AttentionModule) and module.name != name:
        problems.append(f"its entry point is named '{name}' but the module is named {module.name!r}")
    if problems:
        raise ModulePluginError(
            f"{where} breaks the module contract: {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            + f"; fix {registration.package}, or uninstall it"
        )
    return module


def contract_problems(module: object) -> list[str]:
    """What keeps `module` from being used by the pipeline; empty when it keeps the module contract.

    The contract: an [`AttentionModule`] whose name is a lowercase name results.json accepts, whose
    `config_class` is a dataclass each of whose fields has a default and `metadata={"help": ...}` (the card's
    configuration table), whose `function` and `apply` are callable, whose `folder` holds `spec.md` and
    `attention.py` (both printed in the card), and whose groups are a [`Claims`], a [`Paper`] (or None), a
    [`Training`] and a [`Measurement`].

    Args:
        module: what an entry point loaded (or any module, to test it).

    Returns:
        One sentence per problem.

    Example:
        >>> contract_problems(get_module("none"))
        []
        >>> contract_problems("sliding_window")
        ['it is a str, not an attncard.modules.AttentionModule (its entry point must load one, e.g. MODULE)']
    """
    if not isinstance(module, AttentionModule):
        return [
            f"it is a {type(module).__name__}, not an attncard.modules.AttentionModule (its entry point must "
            "load one, e.g. MODULE)"
        ]
    problems = []
    if not isinstance(module.name, str) or not MODULE_NAME_RE.match(module.name):
        problems.append(f"its name {module.name!r} is not a lowercase name of letters, digits and _")
    if not callable(module.function):
        problems.append(
            "its function is not callable; give the attention function, (module, query, key, value, "
            "attention_mask, *, scaling, dropout, **kwargs) -> (output, None)"
        )
    if not callable(module.apply):
        problems.append("its apply is not callable; give apply(model, config) -> model, or leave it out")
    if module.prepare is not None and not callable(module.prepare):
        problems.append("its prepare is not callable; give prepare(model, config), or leave it out")
    for group, kind in (("claims", Claims), ("training", Training), ("measurement", Measurement)):
        if not isinstance(getattr(module, group), kind):
            problems.append(
                f"its {group} is a {type(getattr(module, group)).__name__}, not a {kind.__name__}; give "
                f"{group}={kind.__name__}(...), or leave it out"
            )
    if module.paper is not None and not isinstance(module.paper, Paper):
        problems.append(
            f"its paper is a {type(module.paper).__name__}, not a Paper; give paper=Paper(citation, bibtex)"
        )
    if not (isinstance(module.config_class, type) and dataclasses.is_dataclass(module.config_class)):
        problems.append(f"its config_class {module.config_class!r} is not a dataclass")
    else:
        for field in dataclasses.fields(module.config_class):
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                problems.append(f"the config field '{field.name}' has no default")
            help_text = field.metadata.get("help")
            if not isinstance(help_text, str) or not help_text.strip():
                problems.append(f"the config field '{field.name}' has no metadata={{'help': ...}}")
    folder = Path(module.folder) if isinstance(module.folder, str | Path) else None
    for file in ("spec.md", "attention.py"):
        if folder is None or not (folder / file).is_file():
            problems.append(
                f"its folder {module.folder} has no {file}; put the attention function in attention.py "
                "beside spec.md, or give folder=<the folder holding both>"
            )
    return problems


def source_files(module: AttentionModule) -> list[Path]:
    """The files [`source_sha256`] covers: the `*.py` files of the module's folder and its `spec.md`, in
    name order."""
    files = {*module.source_files, Path(module.folder) / "spec.md"}
    return sorted((path for path in files if path.is_file()), key=lambda path: path.name)


def source_sha256(module: AttentionModule) -> str:
    """The sha256 of a module's source: of the `sha256sum` listing of [`source_files`], one line
    `<sha256>  <file name>` each, in name order. In the module's folder it is the output of
    `sha256sum $(LC_ALL=C ls *.py spec.md) | sha256sum`.

    Args:
        module: any module, built in or from a package.

    Returns:
        64 lowercase hex digits.

    Example:
        >>> len(source_sha256(get_module("none")))
        64
    """
    listing = "".join(f"{sha256_file(path)}  {path.name}\n" for path in source_files(module))
    return hashlib.sha256(listing.encode("utf-8")).hexdigest()


def module_provenance(name: str) -> ModuleProvenance:
    """Where the module `name` comes from: its package, that package's version, and [`source_sha256`].

    Args:
        name: a module name.

    Returns:
        The [`ModuleProvenance`]; the source is hashed on each call (the files may have changed).

    Raises:
        The errors of [`get_module`].

    Example:
        >>> module_provenance("none")
        ModuleProvenance(package='attncard', version='0.1.0', source_sha256='...')
    """
    module = get_module(name)
    registration = _registrations()[name]
    return ModuleProvenance(registration.package, registration.version, source_sha256(module))


__all__ = [
    "BUILTIN_MODULES",
    "BUILTIN_PACKAGE",
    "ENTRY_POINT_GROUP",
    "AttentionModule",
    "Claims",
    "Measurement",
    "ModuleProvenance",
    "Paper",
    "Training",
    "contract_problems",
    "get_module",
    "module_names",
    "module_provenance",
    "rescan_modules",
    "source_files",
    "source_sha256",
]
