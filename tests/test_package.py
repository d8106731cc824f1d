"""The one import name: `attncard`, its public API, and the folders packaged under it."""

from __future__ import annotations

import subprocess
import sys

import attncard


def test_every_public_name_resolves_from_attncard():
    assert sorted(attncard.__all__) == sorted(attncard._PUBLIC)
    for name in attncard.__all__:
        assert getattr(attncard, name).__name__ == name
    assert attncard.get_module("none").name == "none"


def test_the_folders_are_packaged_under_attncard():
    import attncard.modules.none
    import attncard.pipeline.download
    import attncard.templates

    assert attncard.pipeline.download.load_verified is attncard.load_verified
    assert attncard.modules.none.__name__ == "attncard.modules.none"
    assert (attncard.modules.none.MODULE.folder / "spec.md").is_file()


def test_importing_attncard_loads_nothing_heavy():
    code = "import sys, attncard; print('torch' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
    )
