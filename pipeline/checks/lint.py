"""`attncard lint DIR`: checks a run folder before it is pushed, and says what is wrong with it, line by line.

A run folder (see `pipeline.publish.publish`) must hold a card that shows only figures recorded in
results.json, files that every loader reads, and nothing that changed after results.json took their sha256.
The checks:

1. **Placeholders** in README.md (front matter and body), as whole words:
    - the value words `None`, `nan`, `NaN`, `inf`, `Infinity`, case-sensitive: they are how Python, numpy
      and JSON print a missing or broken figure, while the lowercase `none` is a real name (the attention
      module `none`). They are allowed inside fenced code blocks tagged as Python (```python, ```py,
      ```python3, ```pycon, ```ipython), where `if x is None` is code, not a missing figure; nowhere else,
      not in inline code and not in a ```bash block, where `--model None` would be a broken command.
    - the marker words `TODO`, `TBD`, `FIXME`, `N/A`, `Pending`, `placeholder`, `lorem`, `coming soon`,
      case-insensitive, and `XXX`, uppercase only; these are flagged everywhere, code blocks included.
    - unrendered Jinja, `{{` or `{%`, everywhere.
   These rules live in `line_placeholders` (pipeline/record/placeholders.py), which the checks of a module's
   texts before training read too ([`card_text_problems`], with [`markdown_problems`] for its spec.md), so
   that what the card's lint would refuse in a module's texts stops a run before it trains.
2. **Files that do not parse**: the card's front matter (`yaml.safe_load` must give a mapping,
   huggingface_hub's `ModelCard` and `metadata_load` must read it, and it must have a `model-index`);
   `config.json` (strict JSON, whose `model_type` is a family attncard loads); `adapter_config.json` (a
   strict JSON object); results.json (strict JSON, then `Results.load`); every `.eval_results/*.yaml` or
   `*.yml` (YAML holding a list or a mapping). Strict JSON rejects `NaN` and `Infinity`. Front matter
   the Hub refuses or computes itself: a `base_model` that is not a Hub repository `ORG/NAME` (a path),
   a model-index metric with `verified`, a model-index dataset `revision` that is not a git commit sha;
   no `license`, or `license: other` without a `license_name` and a `license_link` that is a URL or a file
   of the run folder. Text the card quotes as recorded (the data's sample rows, the model's printout) is
   not searched for placeholders: a sentence may say "pending".
3. **Table figures not traceable to results.json**. Every Markdown table of the card body (a `|` row
   followed by a `|---|` delimiter row; tables inside code blocks are not tables) is read row by row.
   Skipped: the first cell of a row (its label: "Wilson 95% interval" names a figure, it is not one) and
   every cell under a descriptive header (`DESCRIPTIVE_HEADERS`). In the other cells, code spans and values
   recorded as strings in results.json (package versions, device names) are removed first; the rest is split
   into words at spaces and at `( ) [ ] / – — = ×`, and punctuation around a word is dropped. A word with a
   digit is then:
    - a figure if it is a number (`20`, `43,456`, `-0.5`, `0.7065`, `79.13%`, `5.627e-01`, `1e-05`); it must
      equal one rendering of a numeric leaf of results.json (see `renderings`);
    - an identifier if it holds a letter or `_` (`gpt2`, `qwen3`, `sst2`, `fp32`, `v2`, `SST-2`, `H200`), and
      is skipped;
    - otherwise unreadable (`5.25.0` where no package has that version) and reported.
   The numeric leaves are every int and float of results.json (booleans excluded) and the length of every
   list. The model-index metric values in the front matter must also equal results.json's exactly: the
   official metric (`metrics.official.value`, from schema 4 on), `metrics.accuracy` and `metrics.f1_macro`.
4. **Missing files**: the target of every Markdown link or image `[..](path)`, `![..](path)`, reference
   definition `[id]: path` and HTML `<img src="path">` in the card body must exist in the run folder (URLs
   with a scheme, `#anchors` and site-absolute `/paths` are not files of the folder; links inside code are
   not links).
5. **Manifest**: `check_manifest(run_dir, results.manifest)`: files missing, changed, or not listed.

A **cards copy** (`publish --cards`, `attncard sweep --cards`: the run folder without its weights) is checked
the same way, except that weight files (`*.safetensors`) listed in the manifest may be absent; every other
file must be there and match, and nothing unlisted may be (`lint_run_folder(folder, cards_copy=True)`). A
folder whose manifest lists weights of which none is there is taken for a cards copy ([`is_cards_copy`]).

A **cards folder** with its leaderboard (`attncard summary`, see `pipeline.card.leaderboard`) is checked by
[`lint_leaderboard`]: README.md and leaderboard.png must be what the cards copies' results.json files render
now (each line or table cell that differs is one finding), and each cards copy must pass as above.
[`lint_folder`] tells the three kinds apart, as `attncard lint DIR` does.

Example:
    >>> card = Path("runs/tiny-gpt2-none-sst2/README.md")
    >>> with card.open("a") as text:
    ...     print("Results on the test split: TBD", file=text)
    >>> for finding in lint_run_folder("runs/tiny-gpt2-none-sst2"):
    ...     print(finding)
    README.md: sha256 differs from results.json's manifest
    README.md:...: placeholder 'TBD'
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
import tempfile
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import ModelCard, parse_eval_result_entries
from huggingface_hub.errors import HFValidationError
from huggingface_hub.repocard import REGEX_YAML_BLOCK, metadata_load
from huggingface_hub.utils import validate_repo_id

from ...modules.base import FAMILIES, AttentionModule
from ..card.plots import PLOT_TILE, PLOT_TILE_RMS_TOLERANCE, plot_difference
from ..card.render import model_index_results, template_environment
from ..record.errors import AttncardError, NonFiniteNumberError, ResultsError, first_line
from ..record.json_strict import loads_strict
from ..record.manifest import MAX_PLOT_BYTES, MAX_RESULTS_BYTES, RESULTS_FILE, WEIGHTS_SUFFIX, check_manifest
from ..record.placeholders import PYTHON_FENCES, line_placeholders
from ..record.results import Results
from ..record.text import COMMIT_RE
from ..scoring.paired import comparison_problems

CARD_FILE = "README.md"
CONFIG_FILE = "config.json"
ADAPTER_CONFIG_FILE = "adapter_config.json"
EVAL_RESULTS_DIR = ".eval_results"

# Table columns that describe rather than measure: their cells may hold any number ("Dropout on 2 of the 4
# layers"). Compared without case, `*` or backticks.
DESCRIPTIVE_HEADERS = frozenset({"meaning", "description", "help", "file", "package", "field"})
# The card's fixed-decimal formats (`num(d)`) that a figure may be written in.
# `.eval_results` notes are a setup label ("no-tools", "chain-of-thought"), not a sentence.
MAX_EVAL_NOTES = 40
FIXED_DECIMALS = (1, 2, 4)  # the card's num() precisions


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_DELIMITER_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_CELL_SEPARATOR = re.compile(r"(?<!\\)\|")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_WORD_SEPARATORS = re.compile(r"[\s()\[\]{}/–—=×<>]+")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?%?")

_LINK_TEXT = r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]"
_INLINE_LINK = re.compile(_LINK_TEXT + r"\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
_REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HTML_IMAGE = re.compile(r"<img\b[^>]*?\bsrc\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

# `check_manifest`'s differences, said in terms of the file that holds the manifest.
_MANIFEST_MESSAGES = {
    "missing": "missing, but listed in results.json's manifest",
    "changed": "sha256 differs from results.json's manifest",
    "unlisted": "not in results.json's manifest",
}

_JSON_STRING_OR_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


@dataclass(frozen=True)
class Finding:
    """One problem of a run folder, at a file and, where it has one, a line.

    Args:
        path: the file, relative to the run folder, in POSIX form (`README.md`, `.eval_results/x.yaml`).
        line: its 1-based line, or `None` when the problem is the file as a whole.
        message: what is wrong, on one line.

    Example:
        >>> print(Finding("README.md", 12, "placeholder 'TBD'"))
        README.md:12: placeholder 'TBD'
        >>> print(Finding("tokenizer.json", None, "sha256 differs from results.json's manifest"))
        tokenizer.json: sha256 differs from results.json's manifest
    """

    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


@dataclass
class _Card:
    """README.md split into its front matter and body, with the line numbers of both."""

    lines: list[str]  # every line of the file, without line endings; line n is lines[n - 1]
    front_matter: str | None  # the YAML between the `---` lines; None when there is no such block
    front_matter_line: int  # line number of the first YAML line
    body_line: int  # line number of the first body line
    metadata: dict[str, Any] | None = None  # the parsed front matter, once it parsed


def lint_run_folder(run_dir: str | Path, *, cards_copy: bool = False) -> list[Finding]:
    """Checks a run folder: placeholders, unparseable files, untraceable figures, missing files, manifest.

    Bad content is reported, never raised: a file that does not parse is one finding, and the checks that
    need it are skipped (a results.json that does not load leaves no figures or manifest to check against).

    Args:
        run_dir: the run folder written by `publish`, e.g. `runs/minilm-none-sst2`.
        cards_copy: `run_dir` is a cards copy of one: the weight files its manifest lists (`*.safetensors`)
            may be absent, and links to them are not followed; every other check is the same.

    Returns:
        The findings, sorted by file and line; empty when the folder is clean.

    Raises:
        `AttncardError`: `run_dir` is not a folder, or has no results.json.

    Example:
        >>> lint_run_folder("runs/tiny-gpt2-none-sst2")
        []
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AttncardError(f"{run_dir}: not a folder; give the run folder written by publish (runs/<name>)")
    if not (run_dir / RESULTS_FILE).is_file():
        raise AttncardError(f"{run_dir}: has no {RESULTS_FILE}; is this a run folder written by publish?")

    findings: list[Finding] = []
    results, results_data, results_findings = _check_results(run_dir)
    findings += results_findings
    card, card_findings = _read_card(run_dir)
    findings += card_findings
    if card is not None:
        findings += _check_front_matter(run_dir, card)
        findings += _check_placeholders(card, _quoted_texts(results) if results is not None else [])
        findings += _check_links(run_dir, card, cards_copy)
        if results is not None and results_data is not None:
            findings += _check_model_index(card, results)
            findings += _check_table_figures(card, results_data)
        findings += _check_hub_metadata(card)
        findings += _check_license(run_dir, card)
    findings += _check_config(run_dir)
    findings += _check_adapter_config(run_dir)
    findings += _check_eval_results(run_dir)
    if results is not None:
        findings += _check_manifest(run_dir, results, cards_copy)
    return sorted(findings, key=lambda f: (f.path, f.line or 0))


def is_cards_copy(folder: str | Path) -> bool:
    """Whether a folder is a cards copy of a run: its results.json's manifest lists weight files
    (`*.safetensors`) and none of them is there. False when results.json does not parse (the lint says why).

    Example:
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> is_cards_copy("runs/tiny-gpt2-none-sst2")
        False
        >>> is_cards_copy(copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards")))
        True
    """
    folder = Path(folder)
    try:
        manifest = loads_strict((folder / RESULTS_FILE).read_text(encoding="utf-8")).get("manifest")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False
    if not isinstance(manifest, dict):
        return False
    weights = [path for path in manifest if isinstance(path, str) and _is_weights(path)]
    return bool(weights) and not any((folder / path).exists() for path in weights)


def _is_weights(path: str) -> bool:
    return path.endswith(WEIGHTS_SUFFIX)


def renderings(value: int | float) -> set[str]:
    """Every way the card may print a number: the texts a table figure is compared with.

    The card's own Jinja filters are used, so the lint follows the template's formats: `pct` (100·x, two
    decimals, `%`), `num(d)` for d in `FIXED_DECIMALS` (1, 2 and 4), `sci` (three digits), plus `str()` and,
    for integers, the integer with and without thousands separators.

    Args:
        value: a numeric leaf of results.json.

    Returns:
        The set of its renderings.

    Example:
        >>> sorted(renderings(0.5))
        ['0.5', '0.50', '0.5000', '5.000e-01', '50.00%']
    """
    filters = _card_filters()
    texts = {str(value), filters["pct"](value), filters["sci"](value)}
    texts |= {filters["num"](value, digits) for digits in FIXED_DECIMALS}
    if isinstance(value, int):
        texts.add(f"{value:,}")
    return texts


# --- results.json and the other JSON files -----------------------------------------------------------------


def _read_strict_json(run_dir: Path, name: str) -> tuple[Any, list[Finding]]:
    """Parses a JSON file of the run folder, rejecting NaN and infinities.

    Args:
        run_dir: the run folder.
        name: the file, relative to it.

    Returns:
        `(data, [])`, or `(None, [finding])` when the file is missing or not strict JSON.
    """
    path = run_dir / name
    if not path.is_file():
        return None, [Finding(name, None, "missing")]
    if path.stat().st_size > MAX_RESULTS_BYTES:
        return None, [Finding(name, None, f"larger than {MAX_RESULTS_BYTES >> 20} MiB, more than any run's")]
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        return None, [Finding(name, None, f"not UTF-8 text ({error.reason} at byte {error.start})")]
    try:
        return loads_strict(text), []
    except NonFiniteNumberError as error:
        return None, [Finding(name, _constant_line(text), f"not strict JSON: {error.name} is not a number")]
    except json.JSONDecodeError as error:
        return None, [Finding(name, error.lineno, f"not valid JSON: {error.msg} (column {error.colno})")]
    except ValueError as error:  # nested too deep to read
        return None, [Finding(name, None, f"not valid JSON: {error}")]


def _constant_line(text: str) -> int | None:
    """The line of the first NaN or Infinity token of a JSON text (not one inside a string)."""
    for match in _JSON_STRING_OR_CONSTANT.finditer(text):
        if match.group(1):
            return text.count("\n", 0, match.start()) + 1
    return None


def _check_results(run_dir: Path) -> tuple[Results | None, dict[str, Any] | None, list[Finding]]:
    """results.json must be strict JSON that `Results.load` accepts (known schema version, known fields).

    Returns:
        `(results, data, findings)`: the loaded results and the raw JSON, or `None`s with one finding.
    """
    data, findings = _read_strict_json(run_dir, RESULTS_FILE)
    skipped = "; the card's figures and the manifest were not checked"
    if findings:
        return None, None, [dataclasses.replace(f, message=f.message + skipped) for f in findings]
    try:
        results = Results.load(run_dir)
    except ResultsError as error:
        # The finding already names the file; the error's own message starts with it too.
        message = str(error).removeprefix(f"{RESULTS_FILE}: ").removeprefix(f"{RESULTS_FILE} ")
        return None, None, [Finding(RESULTS_FILE, None, f"{message}{skipped}")]
    # The card shows the paired verdict: its figures must be the ones its counts give.
    problems = comparison_problems(results)
    findings = [Finding(RESULTS_FILE, None, f"comparison: {problem}") for problem in problems]
    return results, data, findings


def _check_config(run_dir: Path) -> list[Finding]:
    """config.json must be a strict JSON object whose `model_type` is one of [`FAMILIES`], as a download
    requires (read without transformers: lint imports no torch)."""
    data, findings = _read_strict_json(run_dir, CONFIG_FILE)
    if findings:
        return findings
    if not isinstance(data, dict):
        return [Finding(CONFIG_FILE, None, f"must be a JSON object, not {type(data).__name__}")]
    model_type = data.get("model_type")
    if model_type not in FAMILIES:
        return [
            Finding(
                CONFIG_FILE,
                None,
                f"model_type {model_type!r} is not a model family attncard loads ({', '.join(FAMILIES)})",
            )
        ]
    return []


def _check_adapter_config(run_dir: Path) -> list[Finding]:
    """adapter_config.json must be a strict JSON object."""
    data, findings = _read_strict_json(run_dir, ADAPTER_CONFIG_FILE)
    if findings:
        return findings
    if not isinstance(data, dict):
        return [Finding(ADAPTER_CONFIG_FILE, None, f"must be a JSON object, not {type(data).__name__}")]
    return []


def _check_eval_results(run_dir: Path) -> list[Finding]:
    """Every `.eval_results/*.yaml` (or `.yml`) must be YAML holding a list or a mapping."""
    folder = run_dir / EVAL_RESULTS_DIR
    if not folder.is_dir():
        return []
    findings = []
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        name = path.relative_to(run_dir).as_posix()
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as error:
            findings.append(Finding(name, None, f"not UTF-8 text ({error.reason} at byte {error.start})"))
            continue
        except yaml.YAMLError as error:
            line, message = _yaml_problem(error)
            findings.append(Finding(name, line, f"not valid YAML: {message}"))
            continue
        if not isinstance(data, list):
            findings.append(Finding(name, None, f"must hold a list of results, not {type(data).__name__}"))
            continue
        findings += [Finding(name, None, problem) for problem in eval_results_problems(data)]
    return findings


def eval_results_problems(data: list) -> list[str]:
    """What the Hub would not show of a `.eval_results/*.yaml` list (hub-docs `eval-results.md`).

    Every entry must parse with huggingface_hub's `parse_eval_result_entries` (dataset `id` and `task_id`, a
    `value`, a `source` only with its `url`), and hold a numeric value, a dataset `revision` only as a commit
    sha, and `notes` as a short setup label (`MAX_EVAL_NOTES` characters at most), not a sentence.

    Example:
        >>> eval_results_problems([{"dataset": {"id": "nyu-mll/glue", "task_id": "sst2"}, "value": 0.9}])
        []
        >>> eval_results_problems([{"dataset": {"id": "nyu-mll/glue"}, "value": 0.9}])
        ["entry 1 does not parse: 'task_id'"]
    """
    problems = []
    for number, item in enumerate(data, start=1):
        try:
            (entry,) = parse_eval_result_entries([item])
        except (KeyError, TypeError, ValueError) as error:
            problems.append(f"entry {number} does not parse: {_one_line(error)}")
            continue
        if not _is_number(entry.value):
            problems.append(f"entry {number}: value {entry.value!r} is not a number")
        if entry.dataset_revision is not None and not COMMIT_RE.fullmatch(str(entry.dataset_revision)):
            revision = entry.dataset_revision
            problems.append(f"entry {number}: dataset revision {revision!r} is not a commit sha")
        if entry.notes is not None and len(entry.notes) > MAX_EVAL_NOTES:
            problems.append(f"entry {number}: notes of {len(entry.notes)} characters, not a short label")
    return problems


def _check_manifest(run_dir: Path, results: Results, cards_copy: bool = False) -> list[Finding]:
    """Every file of the folder must be listed in results.json's manifest with its current sha256; in a cards
    copy, the weight files may be missing."""
    return [
        Finding(difference.path, None, _MANIFEST_MESSAGES[difference.kind])
        for difference in check_manifest(run_dir, results.manifest)
        if not (cards_copy and difference.kind == "missing" and _is_weights(difference.path))
    ]


# --- the card ----------------------------------------------------------------------------------------------


def _read_card(run_dir: Path) -> tuple[_Card | None, list[Finding]]:
    """Reads README.md and finds its front matter block the way huggingface_hub does."""
    path = run_dir / CARD_FILE
    if not path.is_file():
        return None, [Finding(CARD_FILE, None, "missing")]
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        return None, [Finding(CARD_FILE, None, f"not UTF-8 text ({error.reason} at byte {error.start})")]
    lines = [line.rstrip("\r") for line in text.split("\n")]
    match = REGEX_YAML_BLOCK.search(text)
    if match is None:
        card = _Card(lines, None, front_matter_line=1, body_line=1)
        return card, [Finding(CARD_FILE, 1, "no YAML front matter: the card must start with a --- block")]
    card = _Card(
        lines,
        match.group(2),
        front_matter_line=text.count("\n", 0, match.start(2)) + 1,
        body_line=text.count("\n", 0, match.end()) + 1,
    )
    return card, []


def _check_front_matter(run_dir: Path, card: _Card) -> list[Finding]:
    """The front matter must be a YAML mapping that huggingface_hub reads, with a model-index.

    Sets `card.metadata` when it parses.
    """
    if card.front_matter is None:
        return []
    try:
        metadata = yaml.safe_load(card.front_matter)
    except yaml.YAMLError as error:
        line, message = _yaml_problem(error, first_line=card.front_matter_line)
        return [Finding(CARD_FILE, line, f"front matter is not valid YAML: {message}")]
    if not isinstance(metadata, dict):
        return [Finding(CARD_FILE, card.front_matter_line, "front matter must be a YAML mapping")]
    try:
        ModelCard("\n".join(card.lines))
        metadata_load(run_dir / CARD_FILE)
    except (ValueError, TypeError, yaml.YAMLError) as error:
        message = f"huggingface_hub cannot read the front matter: {_one_line(error)}"
        return [Finding(CARD_FILE, card.front_matter_line, message)]
    card.metadata = metadata
    if "model-index" not in metadata:
        return [Finding(CARD_FILE, card.front_matter_line, "front matter has no model-index")]
    return []


def _quoted_texts(results: Results) -> list[str]:
    """What the card quotes as recorded, not as a figure: the sample rows of the data as their table cells
    show them, and the lines of the model's printout. A sentence of the data may say "pending" or start
    with "None"; that is the data, not a missing figure. Longest first, so that no shorter one cuts a
    longer one apart."""
    cell = _card_filters()["cell"]
    texts = [cell(text) for sample in results.dataset.samples for text in sample.texts.values()]
    texts += results.model.printout.splitlines()
    return sorted({text.strip() for text in texts if text.strip()}, key=len, reverse=True)


def _check_placeholders(card: _Card, quoted: list[str] | None = None) -> list[Finding]:
    """Placeholder words and unrendered Jinja, in the front matter and the body (rules in the module doc);
    `quoted` texts (see [`_quoted_texts`]) are skipped where a line holds them whole."""
    findings = []
    for number, line, fence in _card_lines(card, front_matter=True):
        for text in quoted or []:
            if text in line:
                line = line.replace(text, " ")
        findings += [Finding(CARD_FILE, number, message) for message in line_placeholders(line, fence)]
    return findings


def markdown_problems(text: str) -> list[tuple[int, str]]:
    """What the lint refuses in Markdown the card prints as it is, such as a module's `spec.md`:
    placeholders and unrendered Jinja ([`line_placeholders`], code blocks as the card has them), links and
    images to files (the run folder holds none of the module's), and figures in table cells, which the
    card's lint must find in results.json (a text written before the run cannot know them; a column headed
    by one of `DESCRIPTIVE_HEADERS` may hold any).

    Args:
        text: the Markdown.

    Returns:
        `(line, message)` for each problem, line 1-based in `text`; empty when the card's lint would pass it.

    Example:
        >>> spec = ["sigmoid(q·kᵀ). TODO: causal", "", "| Case | Passes |", "|---|---|", "| decoder | 2 |"]
        >>> for line, message in markdown_problems("\\n".join(spec)):
        ...     print(line, message)
        1 placeholder 'TODO'
        5 figure 2 in table row 'decoder', which the card's lint must find in results.json
    """
    card = _Card(text.split("\n"), None, front_matter_line=1, body_line=1)
    problems = [
        (number, message)
        for number, line, fence in _card_lines(card, front_matter=False)
        for message in line_placeholders(line, fence)
    ]
    problems += [
        (number, f"link to the file {target!r}, which is not in the run folder; link a URL instead")
        for number, target in _link_targets(card)
        if _local_target(target) is not None
    ]
    for _, headers, rows in _tables(card):
        descriptive = [_plain(header).lower() in DESCRIPTIVE_HEADERS for header in headers]
        for number, cells in rows:
            label = _plain(cells[0]) if cells else ""
            for index, cell in enumerate(cells[1:], start=1):
                if index < len(descriptive) and descriptive[index]:
                    continue
                for kind, word in _cell_words(cell, []):
                    what = "figure" if kind == "number" else "unreadable figure"
                    where = f"in table row '{label}', which the card's lint must find in results.json"
                    problems.append((number, f"{what} {word} {where}"))
    return sorted(problems, key=lambda problem: problem[0])


def _check_model_index(card: _Card, results: Results) -> list[Finding]:
    """The model-index metrics of each evaluated split (`render.model_index_results`: the official metric,
    accuracy, F1) must equal results.json's, exactly; each must be there."""
    if card.metadata is None or card.front_matter is None or "model-index" not in card.metadata:
        return []  # already reported by the front matter check
    expected = {
        (split, metric.type): (metric.field, metric.value)
        for split, metrics in model_index_results(results)
        for metric in metrics
    }
    shown_split = len({split for split, _ in expected}) > 1
    seen = set()
    findings = []
    for split, metric_type, node in _model_index_metrics(yaml.compose(card.front_matter)):
        if (split, metric_type) not in expected:
            continue
        seen.add((split, metric_type))
        field_name, value = expected[(split, metric_type)]
        line = card.front_matter_line + node.start_mark.line
        recorded = yaml.safe_load(yaml.serialize(node))
        if not _is_number(recorded) or recorded != value:
            named = f"{metric_type} of {split}" if shown_split else metric_type
            message = f"model-index {named} is {recorded!r}; results.json {field_name} is {value!r}"
            findings.append(Finding(CARD_FILE, line, message))
    for split, metric_type in sorted(expected.keys() - seen):
        named = f"{metric_type} metric of {split}" if shown_split else f"{metric_type} metric"
        findings.append(Finding(CARD_FILE, card.front_matter_line, f"model-index has no {named}"))
    return findings


def _check_hub_metadata(card: _Card) -> list[Finding]:
    """What the Hub refuses, or computes itself, in the front matter (hub-docs `modelcard.md`):

    - `base_model` must name Hub repositories, `ORG/NAME`: the Hub refuses a README whose base model is a
      path (`"base_model" with value "/…" is not valid`), so a push would fail at its very end;
    - a model-index metric must not set `verified`: the Hub computes it;
    - a model-index dataset `revision` must be a git commit sha of the dataset (40 hex digits).
    """
    if card.metadata is None or card.front_matter is None:
        return []  # already reported by the front matter check
    root = yaml.compose(card.front_matter)
    findings = []

    def finding(node: yaml.Node, message: str) -> None:
        findings.append(Finding(CARD_FILE, card.front_matter_line + node.start_mark.line, message))

    base_model = _mapping_get(root, "base_model")
    for node in _sequence(base_model) if isinstance(base_model, yaml.SequenceNode) else [base_model]:
        if node is not None and not (isinstance(node, yaml.ScalarNode) and _is_hub_repo_id(node.value)):
            shown = node.value if isinstance(node, yaml.ScalarNode) else "a nested value"
            finding(node, f"base_model {shown!r} is not a Hub repository ORG/NAME; the Hub refuses the card")
    for model in _sequence(_mapping_get(root, "model-index")):
        for result in _sequence(_mapping_get(model, "results")):
            revision = _mapping_get(_mapping_get(result, "dataset"), "revision")
            if revision is not None and not (
                isinstance(revision, yaml.ScalarNode) and COMMIT_RE.fullmatch(revision.value)
            ):
                shown = revision.value if isinstance(revision, yaml.ScalarNode) else "a nested value"
                finding(revision, f"model-index dataset revision {shown!r} is not a git commit sha")
            for metric in _sequence(_mapping_get(result, "metrics")):
                if (verified := _mapping_get(metric, "verified")) is not None:
                    finding(verified, "model-index metric sets 'verified', which the Hub computes")
    return findings


def _check_license(run_dir: Path, card: _Card) -> list[Finding]:
    """The licence as the Hub's spec wants it: `license` set; with `license: other`, a `license_name` (an id
    of the licence) and a `license_link`, which, when it names a file rather than a URL, must be a file of
    the run folder (the Hub links it from the model page)."""
    if card.metadata is None or card.front_matter is None:
        return []  # already reported by the front matter check
    where = card.front_matter_line
    license_id = card.metadata.get("license")
    if not isinstance(license_id, str) or not license_id:
        message = "front matter has no license; the Hub shows no licence for the model"
        return [Finding(CARD_FILE, where, message)]
    if license_id != "other":
        return []
    findings = []
    if not isinstance(card.metadata.get("license_name"), str) or not card.metadata["license_name"]:
        message = "license 'other' needs a license_name (an id of the licence)"
        findings.append(Finding(CARD_FILE, where, message))
    link = card.metadata.get("license_link")
    if not isinstance(link, str) or not link:
        findings.append(Finding(CARD_FILE, where, "license 'other' needs a license_link (LICENSE, or a URL)"))
    elif (path := _local_target(link)) is not None and not (run_dir / path).is_file():
        findings.append(Finding(CARD_FILE, where, f"license_link {link!r} is not a file of the run folder"))
    return findings


def _is_hub_repo_id(text: str) -> bool:
    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return "/" in text


def _model_index_metrics(root: yaml.Node) -> Iterator[tuple[str, str, yaml.Node]]:
    """Yields `(dataset split, type, value node)` for every metric of the model-index, with the nodes' line
    marks."""
    for model in _sequence(_mapping_get(root, "model-index")):
        for result in _sequence(_mapping_get(model, "results")):
            split = _mapping_get(_mapping_get(result, "dataset"), "split")
            split_name = split.value if isinstance(split, yaml.ScalarNode) else ""
            for metric in _sequence(_mapping_get(result, "metrics")):
                metric_type = _mapping_get(metric, "type")
                value = _mapping_get(metric, "value")
                if isinstance(metric_type, yaml.ScalarNode) and value is not None:
                    yield split_name, metric_type.value, value


def _mapping_get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value_node
    return None


def _sequence(node: yaml.Node | None) -> list[yaml.Node]:
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _check_table_figures(card: _Card, results_data: dict[str, Any]) -> list[Finding]:
    """Every figure in a table cell must be a rendering of a numeric leaf of results.json (rules in the
    module doc)."""
    numbers, strings = _leaves(results_data)
    strings += [_card_filters()["cell"](text) for text in strings]  # as a table cell shows a quoted text
    traceable = set().union(*(renderings(value) for value in numbers))
    # Longest first, so that a version string is removed whole before a shorter one inside it.
    recorded = sorted({s for s in strings if any(ch.isdigit() for ch in s)}, key=len, reverse=True)
    findings = []
    for heading, headers, rows in _tables(card):
        descriptive = [_plain(header).lower() in DESCRIPTIVE_HEADERS for header in headers]
        for number, cells in rows:
            label = cells[0] if cells else ""
            for index, cell in enumerate(cells[1:], start=1):
                if index < len(descriptive) and descriptive[index]:
                    continue
                where = f"in table '{heading}', row '{_plain(label)}', cell '{cell}'"
                for kind, word in _cell_words(cell, recorded):
                    if kind == "number" and word not in traceable:
                        message = f"figure {word} {where}, is not a figure of results.json"
                    elif kind == "unreadable":
                        message = (
                            f"{word!r} {where}, is neither a number nor a value recorded in results.json"
                        )
                    else:
                        continue
                    findings.append(Finding(CARD_FILE, number, message))
    return findings


def _leaves(data: Any) -> tuple[list[int | float], list[str]]:
    """The numeric leaves of parsed JSON (with the length of every list), and its string leaves."""
    numbers: list[int | float] = []
    strings: list[str] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            numbers.append(len(item))
            stack.extend(item)
        elif isinstance(item, str):
            strings.append(item)
        elif _is_number(item):
            numbers.append(item)
    return numbers, strings


def _cell_words(cell: str, recorded: list[str]) -> Iterator[tuple[str, str]]:
    """Yields `("number", word)` and `("unreadable", word)` for the digit-bearing words of a table cell."""
    text = _CODE_SPAN.sub(" ", cell)
    for value in recorded:
        if value in text:
            text = re.sub(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\d)", " ", text)
    for raw in _WORD_SEPARATORS.split(text):
        word = raw.lstrip("*_\"'").rstrip("*_\"',;:.!?")
        if not any(ch.isdigit() for ch in word):
            continue
        if _NUMBER.fullmatch(word):
            yield "number", word
        elif not any(ch.isalpha() or ch == "_" for ch in word):
            yield "unreadable", word


def _tables(card: _Card) -> Iterator[tuple[str, list[str], list[tuple[int, list[str]]]]]:
    """Yields `(heading, header cells, [(line number, cells), ...])` for every table of the card body."""
    lines = list(_card_lines(card, front_matter=False))
    heading = ""
    index = 0
    while index < len(lines):
        _, line, fence = lines[index]
        if fence is not None:
            index += 1
            continue
        match = _HEADING.match(line)
        if match:
            heading = match.group(2)
        is_table = (
            line.lstrip().startswith("|")
            and index + 1 < len(lines)
            and lines[index + 1][2] is None
            and _DELIMITER_ROW.match(lines[index + 1][1])
        )
        if not is_table:
            index += 1
            continue
        headers = _split_row(line)
        rows = []
        index += 2
        while index < len(lines) and lines[index][2] is None and lines[index][1].lstrip().startswith("|"):
            rows.append((lines[index][0], _split_row(lines[index][1])))
            index += 1
        yield heading, headers, rows


def _split_row(line: str) -> list[str]:
    text = line.strip()
    text = text.removeprefix("|")
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return [cell.strip() for cell in _CELL_SEPARATOR.split(text)]


def _check_links(run_dir: Path, card: _Card, cards_copy: bool = False) -> list[Finding]:
    """Every relative link or image target of the card body must be a file or folder of the run folder; in a
    cards copy, a weight file need not be."""
    root = run_dir.resolve()
    findings = []
    for number, target in _link_targets(card):
        path = _local_target(target)
        if path is None:
            continue
        resolved = (root / path).resolve()
        if not resolved.is_relative_to(root):
            findings.append(Finding(CARD_FILE, number, f"link target {target!r} is outside the run folder"))
        elif not resolved.exists() and not (cards_copy and _is_weights(path)):
            findings.append(Finding(CARD_FILE, number, f"link target {target!r} is not in the run folder"))
    return findings


def _link_targets(card: _Card) -> Iterator[tuple[int, str]]:
    """`(line, target)` of every link, reference definition and HTML image of the card body, outside code."""
    for number, line, fence in _card_lines(card, front_matter=False):
        if fence is not None:
            continue
        text = _CODE_SPAN.sub(" ", line)
        for pattern in (_INLINE_LINK, _REFERENCE_DEFINITION, _HTML_IMAGE):
            yield from ((number, m.group(1)) for m in pattern.finditer(text))


def _local_target(target: str) -> str | None:
    """The file path a link target names in the run folder; None for URLs, anchors and site paths."""
    target = target.strip().removeprefix("<").removesuffix(">")
    if not target or target.startswith(("#", "/")) or _URL_SCHEME.match(target):
        return None
    path = urllib.parse.unquote(re.split(r"[?#]", target, maxsplit=1)[0])
    return path or None


# --- a cards folder and its leaderboard ---------------------------------------------------------------------


def lint_leaderboard(cards_dir: str | Path) -> list[Finding]:
    """Checks a cards folder with its leaderboard: every figure of README.md and the plot must be what the
    cards copies' results.json files render now, and every cards copy must pass [`lint_run_folder`] as one.

    The leaderboard is rendered again from the cards (`pipeline.card.leaderboard`) and compared line by line:
    a table row that differs is one finding per cell that differs, naming its column; any other line that
    differs, is missing or is extra is one finding. leaderboard.png must have the bytes the cards draw.

    Args:
        cards_dir: the cards folder, e.g. `cards`.

    Returns:
        The findings, paths relative to `cards_dir` (`README.md`, `<copy>/results.json`), sorted; empty when
        the leaderboard and every copy are clean.

    Raises:
        `AttncardError`: `cards_dir` is not a folder, or holds no cards copy.

    Example:
        >>> from attncard.pipeline.publish.publish import copy_to_cards
        >>> from attncard.pipeline.card.leaderboard import write_summary
        >>> _ = copy_to_cards(Path("runs/tiny-gpt2-none-sst2"), Path("cards"))
        >>> readme, _ = write_summary("cards")
        >>> lint_leaderboard("cards")
        []
        >>> _ = readme.write_text(readme.read_text().replace("| 10 | 0 |", "| 20 | 0 |"))
        >>> for finding in lint_leaderboard("cards"):
        ...     print(finding)
        README.md:12: column 'Steps' of row 'gpt2, none, sst2' reads '20', the cards give '10'
    """
    # Imported here: the summary imports the statistics of the paired verdict, which lint needs nowhere else.
    from ..card.leaderboard import (
        LEADERBOARD_FILE,
        LEADERBOARD_PLOT,
        draw_leaderboard,
        read_cards,
        render_leaderboard,
    )

    cards_dir = Path(cards_dir)
    if not cards_dir.is_dir():
        raise AttncardError(f"{cards_dir}: not a folder; give a cards folder (attncard summary writes one)")
    copies = sorted(path.parent for path in cards_dir.glob(f"*/{RESULTS_FILE}"))
    if not copies:
        raise AttncardError(
            f"{cards_dir}: no cards copy (*/{RESULTS_FILE}) in it; give a run folder, a cards copy, or a "
            "cards folder"
        )
    findings: list[Finding] = []
    for copy in copies:
        findings += [
            dataclasses.replace(finding, path=f"{copy.name}/{finding.path}")
            for finding in lint_run_folder(copy, cards_copy=True)
        ]
    try:
        groups = read_cards(cards_dir)
        rendered = render_leaderboard(groups)
    except AttncardError as error:  # a copy that does not load, two copies of a seed, seeds that do not pool
        message = f"cannot be rendered again from the cards: {_one_line(error)}"
        return sorted([*findings, Finding(LEADERBOARD_FILE, None, message)], key=_finding_order)
    findings += _compare_leaderboard(cards_dir / LEADERBOARD_FILE, rendered)
    plot = cards_dir / LEADERBOARD_PLOT
    with tempfile.TemporaryDirectory(prefix="attncard-leaderboard-") as scratch:
        drawn = draw_leaderboard(groups, Path(scratch) / LEADERBOARD_PLOT).read_bytes()
    redo = f"write it again with `attncard summary {cards_dir}`"
    if not plot.is_file():
        findings.append(Finding(LEADERBOARD_PLOT, None, f"missing; {redo}"))
    elif (problem := _leaderboard_plot_problem(plot, drawn)) is not None:
        findings.append(Finding(LEADERBOARD_PLOT, None, f"{problem}; {redo}"))
    return sorted(findings, key=_finding_order)


def _leaderboard_plot_problem(plot: Path, drawn: bytes) -> str | None:
    """What is wrong with the leaderboard's plot beside the one the cards draw here; None when it is that
    plot: the same bytes, or pixels within `PLOT_TILE_RMS_TOLERANCE` (another matplotlib patch release, as in
    `card_problems`). Only the check is tolerant: `attncard summary` writes the bytes its matplotlib draws."""
    from importlib import metadata

    with plot.open("rb") as handle:
        shipped = handle.read(MAX_PLOT_BYTES + 1)
    if shipped == drawn:
        return None
    difference = plot_difference(shipped, drawn)
    if difference is None:  # no PNG of its size as matplotlib writes it
        return "is not the plot the cards draw"
    if difference.worst_tile_rms <= PLOT_TILE_RMS_TOLERANCE:
        return None
    # The leaderboard records no matplotlib; redrawing it is always right, so the finding stays one.
    mine = metadata.version("matplotlib")
    return (
        f"is not the plot the cards draw with matplotlib {mine} (a {PLOT_TILE}-pixel tile of it is "
        f"{difference.worst_tile_rms:.1f} RMS of 255 from it, the tolerance {PLOT_TILE_RMS_TOLERANCE}; "
        "another matplotlib release may draw other pixels)"
    )


def _finding_order(finding: Finding) -> tuple[str, int]:
    return finding.path, finding.line or 0


def _compare_leaderboard(path: Path, rendered: str) -> list[Finding]:
    """Each difference between the leaderboard file and the one the cards render."""
    from ..card.leaderboard import COLUMNS

    name = path.name
    if not path.is_file():
        return [Finding(name, None, f"missing; write it with `attncard summary {path.parent}`")]
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        return [Finding(name, None, f"not UTF-8 text ({error.reason} at byte {error.start})")]
    if text == rendered:
        return []
    shown, expected = text.splitlines(), rendered.splitlines()
    findings = []
    opcodes = difflib.SequenceMatcher(a=shown, b=expected, autojunk=False).get_opcodes()
    for tag, start, end, expected_start, expected_end in opcodes:
        if tag == "equal":
            continue
        paired = min(end - start, expected_end - expected_start) if tag == "replace" else 0
        for offset in range(paired):
            findings += _line_differences(
                name, start + offset + 1, shown[start + offset], expected[expected_start + offset], COLUMNS
            )
        for number in range(start + paired, end):
            message = f"line {_clip(shown[number])} is not in the leaderboard the cards render"
            findings.append(Finding(name, number + 1, message))
        for line in expected[expected_start + paired : expected_end]:
            message = f"missing line {_clip(line)}, which the cards render here"
            findings.append(Finding(name, start + paired + 1, message))
    if not findings:  # the same lines: the line endings or the end of the file differ
        findings.append(
            Finding(name, None, "differs from the leaderboard the cards render in its line endings")
        )
    return findings


def _line_differences(
    name: str, number: int, shown: str, rendered: str, columns: tuple[tuple[str, str], ...]
) -> list[Finding]:
    """The findings of one line that differs: one per table cell when both are table rows of as many cells."""
    shown_cells, rendered_cells = _split_row(shown), _split_row(rendered)
    is_row = shown.lstrip().startswith("|") and rendered.lstrip().startswith("|")
    if not is_row or len(shown_cells) != len(rendered_cells) or len(rendered_cells) != len(columns):
        return [Finding(name, number, f"reads {_clip(shown)}, the cards render {_clip(rendered)}")]
    label = ", ".join(rendered_cells[:3])  # model, module, task
    return [
        Finding(
            name, number, f"column '{header}' of row '{label}' reads '{cell}', the cards give '{expected}'"
        )
        for (header, _), cell, expected in zip(columns, shown_cells, rendered_cells, strict=True)
        if cell != expected
    ]


def _clip(line: str, width: int = 80) -> str:
    return repr(line if len(line) <= width else line[: width - 1] + "…")


def lint_folder(folder: str | Path) -> tuple[str, list[Finding]]:
    """Checks whatever `attncard lint DIR` is given: a run folder, a cards copy, or a cards folder with its
    leaderboard (a folder without results.json whose subfolders hold cards copies).

    Returns:
        `(kind, findings)`, kind one of `run folder`, `cards copy`, `cards folder`.

    Raises:
        `AttncardError`: `folder` is not a folder, or none of the three.

    Example:
        >>> lint_folder("runs/tiny-gpt2-none-sst2")
        ('run folder', [])
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise AttncardError(f"{folder}: not a folder; give a run folder, a cards copy or a cards folder")
    if (folder / RESULTS_FILE).is_file():
        if is_cards_copy(folder):
            return "cards copy", lint_run_folder(folder, cards_copy=True)
        return "run folder", lint_run_folder(folder)
    if any(folder.glob(f"*/{RESULTS_FILE}")):
        return "cards folder", lint_leaderboard(folder)
    raise AttncardError(
        f"{folder}: has no {RESULTS_FILE}, and no subfolder has one; give a run folder written by publish, a "
        "cards copy of one, or a cards folder (attncard summary)"
    )


# --- helpers -----------------------------------------------------------------------------------------------


def _card_lines(card: _Card, front_matter: bool) -> Iterator[tuple[int, str, str | None]]:
    """Yields `(line number, line, fence)` over the body (and the front matter if asked), where `fence` is
    None outside fenced code blocks and the block's lowercased info string ("" if none) inside, fence lines
    included."""
    if front_matter and card.front_matter is not None:
        for number in range(card.front_matter_line, card.body_line):
            yield number, card.lines[number - 1], None
    opening: str | None = None
    fence: str | None = None
    for number in range(card.body_line, len(card.lines) + 1):
        line = card.lines[number - 1]
        match = _FENCE.match(line)
        if opening is None and match:
            opening, fence = match.group(1), match.group(2).lower()
            yield number, line, fence
        elif opening is not None and match and match.group(1).startswith(opening) and not match.group(2):
            yield number, line, fence
            opening = fence = None
        else:
            yield number, line, fence


def _yaml_problem(error: yaml.YAMLError, first_line: int = 1) -> tuple[int | None, str]:
    """The line (in the file, given the line where the YAML starts) and a one-line message of a YAML error."""
    mark = getattr(error, "problem_mark", None)
    line = first_line + mark.line if mark is not None else None
    parts = [getattr(error, "context", None), getattr(error, "problem", None)]
    message = ", ".join(part for part in parts if part) or _one_line(error)
    return line, message


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _plain(text: str) -> str:
    return text.strip().strip("*`_").strip()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@functools.cache
def _card_filters() -> dict[str, Any]:
    """The filters of the card's Jinja environment (pct, num, sci among them), built once."""
    return dict(template_environment().filters)



def card_text_problems(module: AttentionModule) -> list[str]:
    """What the card's lint would refuse in the texts a module puts in the card,
    found before anything trains: a card that fails its lint is refused at the end of the run, after
    training, with nothing written.

    The card prints, as the module gives them: `spec.md` (Markdown), `attention.py` (in a Python code
    block), the configuration table (each field's name, its default as results.json records it, and its
    help), and the paper's citation and BibTeX. In them the lint refuses ([`line_placeholders`]) the
    marker words `TODO`, `TBD`, `FIXME`, `N/A`, `Pending`, `placeholder`, `lorem`, `coming soon` and `XXX`,
    and unrendered Jinja (`{{`, `{%`), everywhere; the value words `None`, `nan`, `NaN`, `inf`, `Infinity`
    everywhere but in Python code; in `spec.md` also links to files and figures in table cells
    ([`markdown_problems`]). A default must be strict JSON (results.json holds it): a number, a string, a
    bool, or a list or mapping of them; a default of `None` is allowed and shown as "not set", but not one
    inside a list or mapping, which the card would show as `None`.

    Args:
        module: a module whose config class is a dataclass of defaults and whose folder holds `spec.md` and
            `attention.py` (what `attncard.modules.contract_problems` checks first).

    Returns:
        One line per problem, naming the text and what to write instead; empty when the card's lint would
        pass them.

    Example:
        >>> import dataclasses
        >>> @dataclasses.dataclass
        ... class SigmoidConfig:
        ...     temperature: float | None = dataclasses.field(
        ...         default=None, metadata={"help": "divides q·kᵀ; None: the layer's own scaling"}
        ...     )
        >>> from attncard.modules import get_module
        >>> sigmoid = dataclasses.replace(get_module("none"), name="sigmoid", config_class=SigmoidConfig)
        >>> card_text_problems(sigmoid)
        ["the help of the config field 'temperature' holds placeholder 'None', which the card's lint refuses
        in the configuration table; say it in words (`not set`, `unset`, `the layer's own`)"]
    """
    problems = []
    for line, message in markdown_problems(module.spec):
        problems.append(
            f"its spec.md, line {line}: {message}; the card prints spec.md as it is, so write it out "
            "(no placeholder, no link to a file, figures in prose)"
        )
    source = (Path(module.folder) / "attention.py").read_text(encoding="utf-8")
    for number, line in enumerate(source.splitlines(), start=1):
        problems += [
            f"its attention.py, line {number}: {message}, which the card's lint refuses in the Python block "
            "that prints the file; remove it (None and nan are allowed there)"
            for message in line_placeholders(line, fence="python")
        ]
    problems += _config_text_problems(module.config_class)
    if module.paper is not None:
        problems += [
            f"its paper's citation holds {message}, which the card's lint refuses; write the citation out"
            for message in line_placeholders(module.paper.citation)
        ]
        problems += [
            f"its paper's BibTeX, line {number}: {message}, which the card's lint refuses; complete the entry"
            for number, line in enumerate(module.paper.bibtex.splitlines(), start=1)
            for message in line_placeholders(line, fence="bibtex")
        ]
    return problems


def _config_text_problems(config_class: type) -> list[str]:
    """[`card_text_problems`] of the configuration table: each field's name, default and help."""
    problems = []
    try:
        config = config_class()
    except Exception as error:  # publish builds the same config before training: say why it cannot
        return [f"its config_class() fails ({type(error).__name__}: {first_line(error)}); fix its defaults"]
    for field in dataclasses.fields(config_class):
        value = getattr(config, field.name)
        try:
            # As publish records it in results.json, which is strict JSON (no NaN, no infinity).
            recorded = json.loads(json.dumps(dataclasses.asdict(config)[field.name], allow_nan=False))
        except (TypeError, ValueError):
            problems.append(
                f"the config field '{field.name}' defaults to {value!r}, which results.json cannot hold "
                "(strict JSON); give a number, a string, a bool, None, or a list or mapping of them"
            )
            continue
        shown = "not set" if recorded is None else str(recorded)  # as the card's template shows it
        problems += [
            f"the config field '{field.name}' defaults to {value!r}, which the card's configuration table "
            f"shows as {shown!r}: {message}, which the card's lint refuses; give a default without it (a "
            "default of None itself is shown as 'not set')"
            for message in line_placeholders(shown)
        ]
        problems += [
            f"the config field named '{field.name}' is {message} in the card's configuration table, which "
            "the card's lint refuses; rename the field"
            for message in line_placeholders(field.name)
        ]
        problems += [
            f"the help of the config field '{field.name}' holds {message}, which the card's lint refuses in "
            "the configuration table; say it in words (`not set`, `unset`, `the layer's own`)"
            for message in line_placeholders(field.metadata["help"])
        ]
    return problems


__all__ = [
    "DESCRIPTIVE_HEADERS",
    "FIXED_DECIMALS",
    "PYTHON_FENCES",
    "WEIGHTS_SUFFIX",
    "Finding",
    "card_text_problems",
    "is_cards_copy",
    "line_placeholders",
    "lint_folder",
    "lint_leaderboard",
    "lint_run_folder",
    "markdown_problems",
    "renderings",
]
