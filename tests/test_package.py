"""The one import name: `attncard`, its public API, and the folders packaged under it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

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
    # pytest too: only `attncard.testing` (the module contract as tests) imports it.
    code = "import sys, attncard; print('torch' in sys.modules, 'pytest' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["False", "False"], result.stderr[-2000:]


@pytest.mark.slow
def test_a_non_editable_install_publishes_renders_and_loads_back(
    tmp_path, tiny_model_dir, small_glue, installed_attncard
):
    """`pip install .` as a wheel (no editable finder, no source tree on the path): the packaged templates and
    module specs are found, a tiny run is published with its card, and loads back verified."""
    target = installed_attncard
    assert (target / "attncard" / "templates" / "model_card.md.j2").is_file()
    assert (target / "attncard" / "modules" / "none" / "spec.md").is_file()
    assert (target / "attncard" / "modules" / "kernels" / "top_k_attention.cpp").is_file()  # built when used
    base = str(tiny_model_dir("gpt2"))
    script = f"""
import attncard, attncard.pipeline.cli as cli
assert attncard.__file__.startswith({str(target)!r}), attncard.__file__
argv = ["--model", {base!r}, "--module", "none", "--steps", "2", "--data-dir", {str(small_glue)!r}]
assert cli.publish_main([*argv, "--output", "runs"]) == 0
verified = attncard.load_verified("runs/gpt2-none-sst2", allow_failed=True, base_model={base!r})
card = open("runs/gpt2-none-sst2/README.md").read()
print(verified.results.verification.status.value, "from attncard import load_verified" in card)
"""
    env = {**os.environ, "PYTHONPATH": str(target), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-1] == "True"
