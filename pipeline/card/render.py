"""Stage 6 — render: the model card, from results.json alone, through one Jinja template: the one of the card
template version results.json records (`CARD_TEMPLATE_FILES`), so a published card renders again as it was.

The card is rendered from one object, its [`context.CardContext`] (built from `Results` by `card_context`):
the template sees its fields by name. The template is rendered with `StrictUndefined`, so a figure missing
from the context fails the render instead of leaving a gap. The parts have files of their own: the front
matter (`model_index`), the usage snippet and install lines (`snippet`), the number formats (`formats`), the
plots (`plots`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
from huggingface_hub import ModelCard

from ...modules import get_module
from ..record.results import Results
from .context import CardContext, card_context
from .formats import capitalize_first, cell, mb, num, pct, ratio, sci, seconds, speedup, tensor
from .snippet import card_usage_code, reproduce_commands, usage_location

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "templates"


@dataclass(frozen=True)
class CardTemplateFiles:
    """The files of one card template version (`Results.card_template`), in templates/: the card's, one per
    readable results.json schema, and the LICENSE file's.

    Example:
        >>> CARD_TEMPLATE_FILES[1].cards[4], CARD_TEMPLATE_FILES[1].license
        ('model_card.md.j2', 'license.txt.j2')
    """

    cards: dict[int, str]  # results.json schema version -> its card's template file
    license: str


# Each card template version attncard renders (results.CARD_TEMPLATES), and its files. A published card is
# rendered again from its results.json with the version it records, to verify it; so a released version's
# files never change (tests/verify/test_older_runs.py pins their sha256): new wording is a new version with
# new files, recorded by the runs published with it, and older runs keep rendering with theirs. Each version
# names a card for every readable schema (a frozen schema's card keeps its own file). The install lines are
# built per version (`snippet.install_commands`). The gap: the other text attncard builds in Python
# (context.py's `status_line`, `comparison_line`, `rows_seen` and BibTeX, snippet.py's `usage_where`,
# model_index.py's front matter and TASK_TITLES, the citations of data.py and record/citations.py) is not
# versioned; a change to its wording still changes every card that shows it.
#
# Version 2 (issue 44): the summary gives the headline speed and memory, the evidence (results, verification,
# efficiency, training, data) comes before the model's and the module's description, and the module's source
# and the model's printout are folded at the end; a stock load that scores the same says that they agree; the
# install lines are ones that work without a release on PyPI. Schemas 3 and 4 share its card; schema 2 keeps
# its frozen one.
CARD_TEMPLATE_FILES = {
    1: CardTemplateFiles(
        cards={2: "model_card_v2.md.j2", 3: "model_card_v3.md.j2", 4: "model_card.md.j2"},
        license="license.txt.j2",
    ),
    2: CardTemplateFiles(
        cards={2: "model_card_v2.md.j2", 3: "model_card_t2.md.j2", 4: "model_card_t2.md.j2"},
        license="license.txt.j2",
    ),
}

# The card's status line; a card holds exactly one, the verification's.
STATUS_LINE_RE = re.compile(r"^\*\*Status: ", re.MULTILINE)


def card_template_files(results: Results) -> CardTemplateFiles:
    """The template files the run's card and LICENSE render with: those of the card template version
    results.json records, version 1 for a run published before it was recorded.

    Example:
        >>> card_template_files(results).cards[results.schema_version]  # a run published now: template 2
        'model_card_t2.md.j2'
    """
    version = 1 if results.card_template is None else results.card_template
    if version not in CARD_TEMPLATE_FILES:  # results.json's own are checked on reading it
        rendered = ", ".join(map(str, CARD_TEMPLATE_FILES))
        raise ValueError(
            f"card_template is {version!r}; this attncard renders card templates {rendered}: "
            "upgrade attncard (pip install -U attncard)"
        )
    return CARD_TEMPLATE_FILES[version]


def template_environment(templates_dir: Path | None = None) -> jinja2.Environment:
    """The Jinja environment of the card: strict about undefined names, with the number formats it uses.

    Args:
        templates_dir: the folder of the templates; None for attncard's own (`TEMPLATES_DIR`), or a copy to
            try a new section in.

    Example:
        >>> template_environment().filters["pct"](0.875)
        '87.50%'
    """
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir or TEMPLATES_DIR),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # Markdown, not HTML
    )
    environment.filters.update(
        pct=pct,
        num=num,
        sci=sci,
        capitalize_first=capitalize_first,
        tensor=tensor,
        mb=mb,
        ratio=ratio,
        seconds=seconds,
        speedup=speedup,
        cell=cell,
    )
    return environment


def rendered_card_problems(results: Results, card: str) -> list[str]:
    r"""What attncard refuses in a card it renders or reads, before comparing the figures: results.json's
    usage snippet or command other than the ones attncard builds again for the run, a module citation, BibTeX
    or config help other than the installed module's, and a card without exactly one status line. Empty when
    there is none.

    Example:
        >>> rendered_card_problems(results, "**Status: PASS** — …\n**Status: PASS** — verified")
        ['the card has 2 status lines, not one']
    """
    problems = []
    if results.usage is not None:
        if usage_location(results) is None:
            problems.append("usage.code loads something other than the run's own repository or folder")
        elif card_usage_code(results) != results.usage.code:
            problems.append("usage.code is not the usage snippet attncard writes for this run")
    if results.command not in reproduce_commands(results):
        problems.append("command is not the command that reproduces this run from its recorded settings")
    # The module's citation, BibTeX and config help are the installed module's words, never a run's: with
    # the recorded source installed they are the same, so any other is an edit.
    module = get_module(results.module.name)
    installed = {
        "citation": module.paper.citation if module.paper else "",
        "bibtex": module.paper.bibtex if module.paper else "",
        "config_help": {field: help_text for field, _, help_text in module.config_fields()},
    }
    problems += [
        f"module.{field} is not the one of the module '{module.name}' installed here"
        for field, text in installed.items()
        if getattr(results.module, field) != text
    ]
    if (count := len(STATUS_LINE_RE.findall(card))) != 1:
        problems.append(f"the card has {count} status lines, not one")
    return problems


def render_license(results: Results) -> str | None:
    """The run's LICENSE file when its licence is `other` (the card's `license_link` points to it): which
    licence of the base model applies, and where it is published, as results.json records them; None for a
    licence the Hub names (`apache-2.0`), which needs no file.

    Example:
        >>> print(render_license(results).splitlines()[0])  # tiny-gpt2's folder declares no licence
        tiny-gpt2-none-sst2: licence
    """
    if results.model.license != "other":
        return None
    return template_environment().get_template(card_template_files(results).license).render(r=results)


def render_card(results: Results, plots: list[dict[str, str]] | None = None) -> str:
    """Renders the model card (README.md) of a run: its [`card_context`], through [`render_context`].

    Args:
        results: the run's results; `results.manifest` lists the files the card's file table shows.
        plots: the `{"file", "title"}` of each plot drawn for the run (`plots.write_plots`); None for none.

    Returns:
        The card as Markdown with YAML front matter.

    Raises:
        `jinja2.UndefinedError`: the template uses a figure the context does not have.
        `ValueError`: a figure in the metadata is not finite; results.json's usage snippet or command is not
            the one attncard writes for the run; the card would not have exactly one status line.

    Example:
        >>> card = render_card(Results.load("runs/tiny-gpt2-none-sst2"))
        >>> card.startswith("---"), "**Status: PASS_NO_COMPRESSION**" in card
        (True, True)
    """
    return render_context(card_context(results, plots))


def render_context(context: CardContext, environment: jinja2.Environment | None = None) -> str:
    """Renders a card context with the template of the card template version and schema its results record,
    then refuses the card as `render_card` does ([`rendered_card_problems`], front matter the Hub cannot
    parse).

    Args:
        context: what the card shows ([`card_context`]).
        environment: the templates to render with; None for attncard's own ([`template_environment`]).

    Example:
        >>> render_context(card_context(results)) == render_card(results)
        True
    """
    results = context.results
    environment = environment or template_environment()
    template = environment.get_template(card_template_files(results).cards[results.schema_version])
    text = template.render(context.template_variables())
    problems = rendered_card_problems(results, text)
    if problems:
        raise ValueError(problems[0])
    ModelCard(text)  # parses the front matter as the Hub will; raises on invalid YAML
    return text
