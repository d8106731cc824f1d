"""The lint of one run folder (or its cards copy) before it is pushed: what is wrong with it, line by line.

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
   texts before training read too ([`pipeline.checks.lint.card_text_problems`], with
   [`pipeline.checks.markdown.markdown_problems`] for its spec.md), so that what the card's lint would refuse
   in a module's texts stops a run before it trains.
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

A cards folder with its leaderboard is linted by [`pipeline.checks.lint.lint_leaderboard`], each of its cards
copies by this module; [`pipeline.checks.lint.lint_folder`] tells the three kinds apart, as `attncard lint
DIR` does. The card's Markdown (its lines, code blocks, tables and links) is read by
[`pipeline.checks.markdown`].

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
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import ModelCard, parse_eval_result_entries
from huggingface_hub.errors import HFValidationError
from huggingface_hub.repocard import REGEX_YAML_BLOCK, metadata_load
from huggingface_hub.utils import validate_repo_id

from ...modules.base import FAMILIES
from ..card.eval_results import EVAL_RESULTS_DIR
from ..card.model_index import model_index_results
from ..card.render import template_environment
from ..record.errors import AttncardError, NonFiniteNumberError, ResultsError, first_line
from ..record.json_strict import loads_strict
from ..record.manifest import CARD_FILE, MAX_RESULTS_BYTES, RESULTS_FILE, check_manifest, is_weights
from ..record.placeholders import line_placeholders
from ..record.results import Results
from ..record.text import COMMIT_RE
from ..scoring.paired import comparison_problems
from .integrity import ADAPTER_CONFIG_FILE, CONFIG_FILE
from .markdown import (
    DESCRIPTIVE_HEADERS,
    CardText,
    card_lines,
    cell_words,
    link_targets,
    local_target,
    plain,
    tables,
)

FIXED_DECIMALS = (1, 2, 4)  # the card's num() precisions
# The card's fixed-decimal formats (`num(d)`) that a figure may be written in.
# `.eval_results` notes are a setup label ("no-tools", "chain-of-thought"), not a sentence.
MAX_EVAL_NOTES = 40

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
    weights = [path for path in manifest if isinstance(path, str) and is_weights(path)]
    return bool(weights) and not any((folder / path).exists() for path in weights)


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
        findings += [Finding(name, None, problem) for problem in hub_eval_results_problems(data)]
    return findings


def hub_eval_results_problems(data: list) -> list[str]:
    """What the Hub would not show of a `.eval_results/*.yaml` list (hub-docs `eval-results.md`).

    Every entry must parse with huggingface_hub's `parse_eval_result_entries` (dataset `id` and `task_id`, a
    `value`, a `source` only with its `url`), and hold a numeric value, a dataset `revision` only as a commit
    sha, and `notes` as a short setup label (`MAX_EVAL_NOTES` characters at most), not a sentence.

    Example:
        >>> hub_eval_results_problems([{"dataset": {"id": "nyu-mll/glue", "task_id": "sst2"}, "value": 0.9}])
        []
        >>> hub_eval_results_problems([{"dataset": {"id": "nyu-mll/glue"}, "value": 0.9}])
        ["entry 1 does not parse: 'task_id'"]
    """
    problems = []
    for number, item in enumerate(data, start=1):
        try:
            (entry,) = parse_eval_result_entries([item])
        except (KeyError, TypeError, ValueError) as error:
            problems.append(f"entry {number} does not parse: {first_line(error)}")
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
        if not (cards_copy and difference.kind == "missing" and is_weights(difference.path))
    ]


# --- the card ----------------------------------------------------------------------------------------------


def _read_card(run_dir: Path) -> tuple[CardText | None, list[Finding]]:
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
        card = CardText(lines, None, front_matter_line=1, body_line=1)
        return card, [Finding(CARD_FILE, 1, "no YAML front matter: the card must start with a --- block")]
    card = CardText(
        lines,
        match.group(2),
        front_matter_line=text.count("\n", 0, match.start(2)) + 1,
        body_line=text.count("\n", 0, match.end()) + 1,
    )
    return card, []


def _check_front_matter(run_dir: Path, card: CardText) -> list[Finding]:
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
        message = f"huggingface_hub cannot read the front matter: {first_line(error)}"
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


def _check_placeholders(card: CardText, quoted: list[str] | None = None) -> list[Finding]:
    """Placeholder words and unrendered Jinja, in the front matter and the body (rules in the module doc);
    `quoted` texts (see [`_quoted_texts`]) are skipped where a line holds them whole."""
    findings = []
    for number, line, fence in card_lines(card, front_matter=True):
        for text in quoted or []:
            if text in line:
                line = line.replace(text, " ")
        findings += [Finding(CARD_FILE, number, message) for message in line_placeholders(line, fence)]
    return findings


def _check_model_index(card: CardText, results: Results) -> list[Finding]:
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


def _check_hub_metadata(card: CardText) -> list[Finding]:
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


def _check_license(run_dir: Path, card: CardText) -> list[Finding]:
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
    elif (path := local_target(link)) is not None and not (run_dir / path).is_file():
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


def _check_table_figures(card: CardText, results_data: dict[str, Any]) -> list[Finding]:
    """Every figure in a table cell must be a rendering of a numeric leaf of results.json (rules in the
    module doc)."""
    numbers, strings = _leaves(results_data)
    strings += [_card_filters()["cell"](text) for text in strings]  # as a table cell shows a quoted text
    traceable = set().union(*(renderings(value) for value in numbers))
    # Longest first, so that a version string is removed whole before a shorter one inside it.
    recorded = sorted({s for s in strings if any(ch.isdigit() for ch in s)}, key=len, reverse=True)
    findings = []
    for heading, headers, rows in tables(card):
        descriptive = [plain(header).lower() in DESCRIPTIVE_HEADERS for header in headers]
        for number, cells in rows:
            label = cells[0] if cells else ""
            for index, cell in enumerate(cells[1:], start=1):
                if index < len(descriptive) and descriptive[index]:
                    continue
                where = f"in table '{heading}', row '{plain(label)}', cell '{cell}'"
                for kind, word in cell_words(cell, recorded):
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


def _check_links(run_dir: Path, card: CardText, cards_copy: bool = False) -> list[Finding]:
    """Every relative link or image target of the card body must be a file or folder of the run folder; in a
    cards copy, a weight file need not be."""
    root = run_dir.resolve()
    findings = []
    for number, target in link_targets(card):
        path = local_target(target)
        if path is None:
            continue
        resolved = (root / path).resolve()
        if not resolved.is_relative_to(root):
            findings.append(Finding(CARD_FILE, number, f"link target {target!r} is outside the run folder"))
        elif not resolved.exists() and not (cards_copy and is_weights(path)):
            findings.append(Finding(CARD_FILE, number, f"link target {target!r} is not in the run folder"))
    return findings


# --- helpers -----------------------------------------------------------------------------------------------


def _yaml_problem(error: yaml.YAMLError, first_line: int = 1) -> tuple[int | None, str]:
    """The line (in the file, given the line where the YAML starts) and a one-line message of a YAML error."""
    mark = getattr(error, "problem_mark", None)
    line = first_line + mark.line if mark is not None else None
    parts = [getattr(error, "context", None), getattr(error, "problem", None)]
    message = ", ".join(part for part in parts if part) or first_line(error)
    return line, message


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@functools.cache
def _card_filters() -> dict[str, Any]:
    """The filters of the card's Jinja environment (pct, num, sci among them), built once."""
    return dict(template_environment().filters)


__all__ = [
    "FIXED_DECIMALS",
    "Finding",
    "hub_eval_results_problems",
    "is_cards_copy",
    "lint_run_folder",
    "renderings",
]
