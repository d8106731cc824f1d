"""`make test-floors`: checks that this environment holds the floor of every range in pyproject.toml.

uv's lowest-direct resolution installs the lowest release each range allows, unless another requirement rules
it out; then the floor written in pyproject.toml is not the one tested, and this says which to raise. torch is
left out: the floors environment keeps the locked torch.

Usage: python tests/scripts/check_floors.py gpu,demo,dev   (the extras installed beside the dependencies)
"""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
KEPT_AS_LOCKED = {"torch"}


def floor_problems(extras: list[str]) -> list[str]:
    """One line per direct dependency installed at another version than its floor."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    problems = []
    for requirement in map(Requirement, lines):
        if requirement.name in KEPT_AS_LOCKED or (requirement.marker and not requirement.marker.evaluate()):
            continue
        floors = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if len(floors) != 1:
            problems.append(f"{requirement}: no single floor (>=) to test")
            continue
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{requirement.name}: not installed; install the floors again (make test-floors)")
            continue
        if Version(installed) != Version(floors[0]):
            problems.append(
                f"{requirement.name}: {installed} installed, not its floor {floors[0]}, which the other "
                f"requirements rule out; raise the floor in pyproject.toml to {installed}"
            )
    return problems


if __name__ == "__main__":
    extras = sys.argv[1].split(",") if len(sys.argv) > 1 else []
    problems = floor_problems([extra for extra in extras if extra])
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    sys.exit(1 if problems else 0)
