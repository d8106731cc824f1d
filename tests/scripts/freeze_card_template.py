"""Opens the next card template version in one command (`make freeze-template`): the released versions' files
stay as they are, and new wording goes into a new file that the runs published from then on record.

    .venv/bin/python tests/scripts/freeze_card_template.py          # opens version N + 1
    (edit templates/model_card_t<N + 1>.md.j2)
    .venv/bin/python tests/scripts/freeze_card_template.py --pin    # pins the edited files' sha256
    make golden                                                     # the golden card in the new wording

Opening version N + 1, it

1. copies the newest version's card of the current results schema to `templates/model_card_t<N + 1>.md.j2`;
2. registers version N + 1 in pipeline/card/render.py's `CARD_TEMPLATE_FILES`: the newest version's files,
   the new card wherever the newest version named the copied one;
3. makes it the version publish records: `CARD_TEMPLATE` and `CARD_TEMPLATES` in pipeline/record/results.py;
4. pins the sha256 of each of its files in tests/verify/test_older_runs.py's `RELEASED_TEMPLATE_SHA256`;
5. records it in tests/support/fixtures/tiny_results.json, the run `make golden` renders.

`--pin` pins the newest version's files again after they were edited, and refuses once a run in cards/ records
that version: it is released then, and its files never change.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import shutil
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RENDER = Path("pipeline/card/render.py")
RESULTS = Path("pipeline/record/results.py")
PINS = Path("tests/verify/test_older_runs.py")
GOLDEN_RESULTS = Path("tests/support/fixtures/tiny_results.json")
TEMPLATES = Path("templates")
CARDS = Path("cards")


class FreezeError(Exception):
    """A step cannot be taken; the message says what to do."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _assignment(source: str, name: str) -> ast.expr:
    """The value of the module-level `name = ...` of a Python source."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return node.value
    raise FreezeError(f"no `{name} = ...` at the top level; was it renamed? update this script")


def _block(source: str, name: str) -> tuple[int, int]:
    """The character span of the module-level `name = {...}` block, its closing brace alone on a line."""
    start = re.search(rf"^{name} = {{\n", source, re.MULTILINE)
    if start is None:
        raise FreezeError(f"no `{name} = {{` block; update this script")
    end = source.index("\n}\n", start.end()) + 3
    return start.start(), end


def template_files(root: Path) -> dict[int, dict]:
    """render.py's `CARD_TEMPLATE_FILES` as data: version -> {"cards": {schema: file}, "license": file}."""
    value = _assignment((root / RENDER).read_text(encoding="utf-8"), "CARD_TEMPLATE_FILES")
    return {
        ast.literal_eval(key): {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}
        for key, call in zip(value.keys, value.values, strict=True)
    }


def released_pins(root: Path) -> dict[int, dict[str, str]]:
    """test_older_runs.py's `RELEASED_TEMPLATE_SHA256`: version -> {file: sha256}."""
    source = (root / PINS).read_text(encoding="utf-8")
    return ast.literal_eval(_assignment(source, "RELEASED_TEMPLATE_SHA256"))


def schema_version(root: Path) -> int:
    return ast.literal_eval(_assignment((root / RESULTS).read_text(encoding="utf-8"), "SCHEMA_VERSION"))


def _pin(root: Path, version: int, files: dict) -> None:
    """Writes the sha256 of `version`'s files into `RELEASED_TEMPLATE_SHA256`, replacing its entry if any."""
    path = root / PINS
    source = path.read_text(encoding="utf-8")
    start, end = _block(source, "RELEASED_TEMPLATE_SHA256")
    block = source[start:end]
    block = re.sub(rf"^    {version}: {{\n.*?^    }},\n", "", block, flags=re.MULTILINE | re.DOTALL)
    names = [*dict.fromkeys(files["cards"].values()), files["license"]]
    entry = f"    {version}: {{\n"
    entry += "".join(f'        "{name}": "{_sha256(root / TEMPLATES / name)}",\n' for name in names)
    entry += "    },\n"
    block = block[: -len("}\n")] + entry + "}\n"
    path.write_text(source[:start] + block + source[end:], encoding="utf-8")


def open_next_version(root: Path) -> int:
    """Steps 1-5 of the module doc; returns the new version."""
    versions = template_files(root)
    newest = max(versions)
    if sorted(versions) != list(range(1, newest + 1)):
        raise FreezeError(f"CARD_TEMPLATE_FILES has versions {sorted(versions)}, not 1 to {newest}")
    version = newest + 1
    copied = versions[newest]["cards"][schema_version(root)]
    name = f"model_card_t{version}.md.j2"
    if (root / TEMPLATES / name).exists():
        raise FreezeError(f"templates/{name} exists already; remove it, or pin it with --pin")
    # 1. The new card, a copy of the newest version's.
    shutil.copyfile(root / TEMPLATES / copied, root / TEMPLATES / name)
    # 2. Its files in render.py.
    cards = {schema: name if file == copied else file for schema, file in versions[newest]["cards"].items()}
    files = {"cards": cards, "license": versions[newest]["license"]}
    render = root / RENDER
    source = render.read_text(encoding="utf-8")
    _, end = _block(source, "CARD_TEMPLATE_FILES")
    mapping = ", ".join(f'{schema}: "{file}"' for schema, file in cards.items())
    entry = (
        f"    {version}: CardTemplateFiles(\n        cards={{{mapping}}},\n"
        f'        license="{files["license"]}",\n    ),\n'
    )
    render.write_text(source[: end - len("}\n")] + entry + source[end - len("}\n") :], encoding="utf-8")
    # 3. The version publish records.
    results = root / RESULTS
    source = results.read_text(encoding="utf-8")
    bump = f"CARD_TEMPLATE = {version}"
    source, bumped = re.subn(r"^CARD_TEMPLATE = \d+$", bump, source, flags=re.MULTILINE)
    released = ", ".join(str(v) for v in range(1, version))
    listing = f"CARD_TEMPLATES = ({released}, CARD_TEMPLATE)"
    source, listed = re.subn(r"^CARD_TEMPLATES = \(.*\)$", listing, source, flags=re.MULTILINE)
    if (bumped, listed) != (1, 1):
        raise FreezeError(f"{RESULTS}: no `CARD_TEMPLATE =` and `CARD_TEMPLATES = (` lines; fix the script")
    results.write_text(source, encoding="utf-8")
    # 4. Its pins.
    _pin(root, version, files)
    # 5. The golden run records it.
    golden = root / GOLDEN_RESULTS
    text, count = re.subn(
        r'^  "card_template": \d+,?$',
        lambda m: re.sub(r"\d+", str(version), m[0]),
        golden.read_text(encoding="utf-8"),
        flags=re.MULTILINE,
    )
    if count != 1:
        raise FreezeError(f"{GOLDEN_RESULTS} records no card_template; update this script")
    golden.write_text(text, encoding="utf-8")
    return version


def pin_newest(root: Path) -> int:
    """Pins the newest version's files again (`--pin`); refused once a run in cards/ records it."""
    versions = template_files(root)
    newest = max(versions)
    recording = sorted(
        path.parent.name
        for path in (root / CARDS).glob("*/results.json")
        if re.search(rf'^  "card_template": {newest},?$', path.read_text(encoding="utf-8"), re.MULTILINE)
    )
    if recording:
        raise FreezeError(
            f"card template {newest} is released: {CARDS}/{recording[0]} records it, and its files never "
            "change; open the next version instead (run this without --pin)"
        )
    _pin(root, newest, versions[newest])
    return newest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pin", action="store_true", help="pin the newest version's files again (edited)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the repository (default: this one)")
    args = parser.parse_args(argv)
    try:
        if args.pin:
            version = pin_newest(args.root)
            print(f"pinned the files of card template {version} in {PINS}")
        else:
            version = open_next_version(args.root)
            print(
                f"opened card template {version}: edit {TEMPLATES}/model_card_t{version}.md.j2, then run "
                "this with --pin and `make golden`, and review the diff"
            )
    except FreezeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
