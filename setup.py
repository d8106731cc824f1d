"""The packages of the wheel, found rather than listed: every folder with an `__init__.py` under the folders
pyproject.toml's [tool.setuptools.package-dir] maps (`modules/none` is `attncard.modules.none`), so that a
new module folder, or a new package of the pipeline, is packaged with no edit here or there. Everything else
about the build is in pyproject.toml."""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

PYPROJECT = tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text(encoding="utf-8"))
FOLDERS = PYPROJECT["tool"]["setuptools"]["package-dir"]  # {"attncard.modules": "modules", ...}

packages = list(FOLDERS)
for package, folder in FOLDERS.items():
    packages += [f"{package}.{inside}" for inside in find_packages(folder)]

setup(packages=packages)
