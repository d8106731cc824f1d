"""A folder named `attncard` where Python starts hides the installed attncard from it: the commands say so.

Each test runs the installed `attncard` command and `python -c` in a folder of its own, as a user would, and
holds the command's warning to what Python started there actually imports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import attncard

ATTNCARD = Path(sys.executable).with_name("attncard")  # the console script of this environment
RUNNING = Path(attncard.__file__).resolve()
NAMESPACE_WARNING = (
    "warning: ./attncard is a folder without __init__.py that Python started in this folder imports in place "
    "of the installed attncard (an editable install is found after it), so `from attncard import "
    "load_verified` there fails with \"cannot import name 'load_verified' from 'attncard' (unknown "
    'location)"; run Python from another folder, or rename that folder\n'
)


def _editable() -> bool:
    """Whether attncard is installed editable here (`make install`): its code is imported from outside this
    environment's site-packages. (Not its metadata: from the checkout, a build's attncard.egg-info beside
    pyproject.toml is found before the environment's dist-info.)"""
    return not RUNNING.is_relative_to(Path(sysconfig.get_paths()["purelib"]).resolve())


def _run(folder: Path, *command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(command), cwd=folder, capture_output=True, text=True, env=env or dict(os.environ), check=False
    )


def test_no_folder_no_warning(tmp_path):
    completed = _run(tmp_path, str(ATTNCARD), "modules")
    assert completed.returncode == 0 and completed.stderr == "", completed.stderr


def test_a_folder_without_init_that_hides_the_editable_install_is_warned_of(tmp_path):
    (tmp_path / "attncard").mkdir()  # e.g. the clone itself, seen from the folder it was cloned into
    command = _run(tmp_path, str(ATTNCARD), "modules")
    python = _run(tmp_path, sys.executable, "-c", "from attncard import load_verified")
    assert command.returncode == 0, command.stderr
    if _editable():
        assert python.stderr.endswith(
            "ImportError: cannot import name 'load_verified' from 'attncard' (unknown location)\n"
        ), python.stderr
        assert command.stderr == NAMESPACE_WARNING
    else:  # an install from a wheel, a regular package, wins over the namespace portion
        assert python.returncode == 0, python.stderr
        assert command.stderr == ""


def test_a_folder_with_init_is_warned_of_by_name(tmp_path):
    (tmp_path / "attncard").mkdir()
    (tmp_path / "attncard" / "__init__.py").write_text("")
    command = _run(tmp_path, str(ATTNCARD), "modules")
    python = _run(tmp_path, sys.executable, "-c", "import attncard; print(attncard.__file__)")
    imported = tmp_path / "attncard" / "__init__.py"
    assert python.stdout == f"{imported}\n", python.stderr
    assert command.returncode == 0
    assert command.stderr == (
        f"warning: Python started in this folder imports {imported} in place of the attncard running this "
        f"command ({RUNNING}); run Python from another folder, or rename that folder\n"
    )


def test_the_checkout_itself_is_not_warned_of(tmp_path):
    """In the folder of the checkout the editable install maps, `attncard/` is the package running."""
    completed = _run(RUNNING.parent.parent, str(ATTNCARD), "modules")
    assert completed.returncode == 0 and completed.stderr == "", completed.stderr


def test_a_checkout_without_an_install_names_what_is_missing(tmp_path):
    """Python started at the root of a checkout imports its attncard/, whose pipeline/ only an install maps
    under it: `-S` leaves out site-packages and its editable finder, as a wheel install elsewhere would."""
    shutil.copytree(RUNNING.parent, tmp_path / "attncard", ignore=shutil.ignore_patterns("__pycache__"))
    python = _run(tmp_path, sys.executable, "-S", "-c", "from attncard import load_verified")
    assert python.stderr.splitlines()[-1] == (
        f"ModuleNotFoundError: attncard was imported from {tmp_path}/attncard/, the folder of a source "
        "checkout, where attncard.pipeline is not (its folders are packaged under attncard only by an "
        "install); run Python from another folder to use the installed attncard, or install this checkout: "
        f"pip install -e {tmp_path}"
    )


@pytest.mark.slow  # builds and installs attncard as a wheel (session fixture)
def test_a_wheel_install_is_not_hidden_by_a_folder_without_init(tmp_path, installed_attncard):
    (tmp_path / "attncard").mkdir()
    env = {**os.environ, "PYTHONPATH": str(installed_attncard)}
    command = _run(tmp_path, str(ATTNCARD), "modules", env=env)
    python = _run(tmp_path, sys.executable, "-c", "import attncard; print(attncard.__file__)", env=env)
    assert python.stdout == f"{installed_attncard / 'attncard' / '__init__.py'}\n", python.stderr
    assert command.returncode == 0 and command.stderr == "", command.stderr
