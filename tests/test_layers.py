"""Layers in one direction: import-linter's contracts in pyproject.toml hold, and they catch a violation.

import-linter builds its graph by walking the folder of `attncard`; the editable install maps
`attncard.pipeline` and `attncard.modules` to ./pipeline and ./modules, which it cannot follow, so the
contracts are checked on a non-editable install of this checkout (`installed_attncard`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(site: Path) -> subprocess.CompletedProcess:
    """`lint-imports` with the contracts of this checkout's pyproject.toml, on the attncard in `site`.

    It runs in `site`: import-linter puts its working folder first on `sys.path`, and the checkout's own
    `attncard/` folder would hide the installed one."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(REPO_ROOT / "pyproject.toml")],
        cwd=site,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_layer_contracts_hold(installed_attncard):
    result = lint_imports(installed_attncard)
    print(result.stdout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_an_import_up_the_layers_or_of_torch_in_the_schema_breaks_a_contract(installed_attncard, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(installed_attncard, site)
    pipeline = site / "attncard" / "pipeline"
    with (pipeline / "results.py").open("a") as results:
        results.write("\nfrom . import evaluate  # noqa\n")  # the schema reaching up to a stage
    with (pipeline / "errors.py").open("a") as errors:
        errors.write("\nimport torch  # noqa\n")
    result = lint_imports(site)
    assert result.returncode == 1, result.stdout[-3000:]
    assert "Contracts: 0 kept, 2 broken." in result.stdout
    assert "attncard.pipeline.results -> attncard.pipeline.evaluate" in result.stdout
    assert "attncard.pipeline.errors -> torch" in result.stdout
