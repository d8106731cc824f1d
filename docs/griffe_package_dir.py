"""A griffe extension that reads attncard's sources as setuptools packages them, for mkdocstrings.

`[tool.setuptools.package-dir]` in pyproject.toml packages the folders `pipeline/`, `modules/` and
`templates/` as `attncard.pipeline`, `attncard.modules` and `attncard.templates`, while `attncard/` holds only
`__init__.py`. griffe finds a package's submodules in its folder, so it would not find `attncard.modules`,
statically or by importing it. When griffe has loaded `attncard`, this extension visits each folder that
table maps below it, as the subpackage setuptools makes of it, so that `::: attncard.modules.base` documents
`modules/base.py` under its import name and cross-references resolve.

mkdocs.yml loads it from this file (`extensions:` of the python handler); it is no part of the package.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import griffe

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


class PackageDir(griffe.Extension):
    """Adds the folders `[tool.setuptools.package-dir]` maps below a loaded package as its subpackages."""

    def __init__(self) -> None:
        super().__init__()
        table = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
        self.folders = {name: PYPROJECT.parent / folder for name, folder in table.items()}

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for name, folder in self.folders.items():
            parent, _, child = name.rpartition(".")
            if parent == pkg.path and child not in pkg.members:
                pkg.set_member(child, _visit_folder(child, folder, pkg, loader))


def _visit_folder(
    name: str, folder: Path, parent: griffe.Module, loader: griffe.GriffeLoader
) -> griffe.Module:
    """The package in `folder`, named `name` below `parent`, with its modules and subpackages."""
    package = _visit_file(name, folder / "__init__.py", parent, loader)
    for path in sorted(folder.iterdir()):
        if path.suffix == ".py" and path.name != "__init__.py":
            package.set_member(path.stem, _visit_file(path.stem, path, package, loader))
        elif (path / "__init__.py").is_file():
            package.set_member(path.name, _visit_folder(path.name, path, package, loader))
    return package


def _visit_file(name: str, path: Path, parent: griffe.Module, loader: griffe.GriffeLoader) -> griffe.Module:
    code = path.read_text(encoding="utf-8-sig")
    loader.lines_collection[path] = code.splitlines(keepends=False)  # for "show source"
    return griffe.visit(
        name,
        filepath=path,
        code=code,
        parent=parent,
        extensions=loader.extensions,
        docstring_parser=loader.docstring_parser,
        docstring_options=loader.docstring_options,
        lines_collection=loader.lines_collection,
        modules_collection=loader.modules_collection,
    )
