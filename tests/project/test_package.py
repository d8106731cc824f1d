"""The one import name: `attncard`, its public API, and the folders packaged under it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest

import attncard
from conftest import PACKAGE_SOURCES, PIP_INSTALL, REPO_ROOT


def test_every_public_name_resolves_from_attncard():
    assert sorted(attncard.__all__) == sorted(attncard._PUBLIC)
    for name in attncard.__all__:
        assert getattr(attncard, name).__name__ == name
    assert attncard.get_module("none").name == "none"


def test_the_folders_are_packaged_under_attncard():
    import attncard.modules.none
    import attncard.pipeline.verify.download
    import attncard.templates

    assert attncard.pipeline.verify.download.load_verified is attncard.load_verified
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


def _packaged_files() -> dict[str, str]:
    """Every file of the four packaged folders, by its path in the wheel, with its path in the source tree:
    `pipeline/run/data.py` is `attncard/pipeline/run/data.py` ([tool.setuptools.package-dir]). Caches left
    out."""
    packaged = {}
    for folder in ("attncard", "pipeline", "modules", "templates"):
        installed = "attncard" if folder == "attncard" else f"attncard/{folder}"
        for path in sorted((REPO_ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                inside = path.relative_to(REPO_ROOT / folder).as_posix()
                packaged[f"{installed}/{inside}"] = f"{folder}/{inside}"
    return packaged


@pytest.mark.slow
def test_the_sdist_and_wheel_of_a_release_hold_every_file_and_install(tmp_path):
    """What .github/workflows/release.yml uploads to PyPI: `python -m build` makes the sdist, then the wheel
    from the sdist. The wheel holds every file of the four packaged folders (a new module folder that
    pyproject.toml does not list, a template or spec.md left out of package-data, would be missing); its
    metadata is what PyPI shows; installed outside the checkout, it imports and finds its templates and module
    specs."""
    source = tmp_path / "source"  # built from a copy: build writes build/ and *.egg-info beside the sources
    for name in PACKAGE_SOURCES:
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, source / name)
    dist = tmp_path / "dist"
    # --no-isolation: setuptools from this environment, offline; the workflow builds in an isolated one.
    build = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert sorted(path.name for path in dist.iterdir()) == [
        f"attncard-{version}-py3-none-any.whl",
        f"attncard-{version}.tar.gz",
    ]

    with zipfile.ZipFile(dist / f"attncard-{version}-py3-none-any.whl") as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(f"attncard-{version}.dist-info/METADATA").decode()
        entry_points = wheel.read(f"attncard-{version}.dist-info/entry_points.txt").decode()
    packaged = _packaged_files()
    missing = sorted(set(packaged) - names)
    assert not missing, f"not in the wheel: {missing}"
    assert "attncard/templates/model_card.md.j2" in names and "attncard/modules/none/spec.md" in names
    with tarfile.open(dist / f"attncard-{version}.tar.gz") as sdist:
        in_sdist = {name.removeprefix(f"attncard-{version}/") for name in sdist.getnames()}
    missing = sorted(set(packaged.values()) - in_sdist)
    assert not missing, f"not in the sdist: {missing}"

    headers = metadata.split("\n\n", 1)[0].splitlines()
    for header in (
        "Name: attncard",
        f"Version: {version}",
        "License-Expression: Apache-2.0",
        "Requires-Python: >=3.11",
        "Description-Content-Type: text/markdown",
        "Classifier: Intended Audience :: Science/Research",
        "Project-URL: Repository, https://github.com/attncard/attncard",
    ):
        assert header in headers, metadata[:3000]
    assert metadata.split("\n\n", 1)[1].startswith("# attncard\n")  # the README, PyPI's page
    assert "publish = attncard.pipeline.cli.publish:main" in entry_points
    assert "attncard = attncard.pipeline.cli:main" in entry_points

    site = tmp_path / "site"
    install = [*PIP_INSTALL, "--target", str(site), str(dist / f"attncard-{version}-py3-none-any.whl")]
    subprocess.run(install, check=True, capture_output=True)
    script = """
import importlib.resources, attncard, attncard.templates
print(attncard.__file__)
print(importlib.resources.files(attncard.templates).joinpath("model_card.md.j2").is_file())
print(" ".join(attncard.module_names()))
print((attncard.get_module("none").folder / "spec.md").is_file())
"""
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    location, template, modules, spec = done.stdout.splitlines()
    assert location.startswith(str(site)) and template == "True" and spec == "True"
    built_in = {"none", "adaptive_span", "adaptive_sparse", "span_expanded", "svd_lowrank"}
    assert built_in <= set(modules.split())


def _shell_lines(markdown: str) -> list[str]:
    """The lines of a page's ```bash blocks."""
    blocks = re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)
    return [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_install_lines_work_before_the_first_release(page):
    """No release is on PyPI yet: the pages install from the repository (pyproject's Repository URL), with
    torch's CPU or CUDA build from PyTorch's index first, never a bare `pip install attncard`."""
    lines = _shell_lines((REPO_ROOT / page).read_text(encoding="utf-8"))
    repository = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    installs = [line for line in lines if re.match(r"pip install\b", line)]
    assert [line for line in installs if re.fullmatch(r'pip install "?attncard(\[[a-z,]+\])?"?', line)] == []
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in installs
    assert "pip install torch --index-url https://download.pytorch.org/whl/cu128" in installs
    assert f'pip install "attncard[demo] @ git+{repository}"' in installs
    assert f'pip install "attncard[gpu,demo] @ git+{repository}"' in installs


def test_the_readme_starts_with_make_demo_and_make_test():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split("#", 1)[0].strip() for line in first_block.splitlines()] == ["make demo", "make test"]
