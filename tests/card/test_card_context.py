"""The card is rendered from one object (issue 45): `card_context` collects what the card shows from
results.json into a `CardContext`, and the template sees its fields by name. A new section is a field of the
context, built where the context is built, and a block of the template that prints it; nothing else changes.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import jinja2
import jinja2.meta
import pytest

from attncard.pipeline.card.context import CardContext, card_context
from attncard.pipeline.card.render import (
    CARD_TEMPLATE_FILES,
    TEMPLATES_DIR,
    card_template_files,
    render_card,
    render_context,
    template_environment,
)
from attncard.pipeline.record.results import Results
from conftest import FIXTURES

RESULTS = FIXTURES / "tiny_results.json"  # a run of `none`, card template 2
# The section the test adds, and the heading it goes before.
SECTION = "## Tokens seen\n\n{{ tokens_seen }}\n\n"
BEFORE = "## Reproduce\n"


@dataclasses.dataclass(frozen=True)
class ContextWithTokensSeen(CardContext):
    """A contributor's new field: how many tokens training saw at most, as the new section says it."""

    tokens_seen: str


def with_tokens_seen(results: Results) -> ContextWithTokensSeen:
    """The context of the card with the new field, built as `card_context` would build it."""
    context = card_context(results)
    config = results.training.hyperparameters
    most = config.steps * config.batch_size * config.max_length
    fields = {field.name: getattr(context, field.name) for field in dataclasses.fields(context)}
    return ContextWithTokensSeen(**fields, tokens_seen=f"At most {most:,} tokens ({results.repo_name}).")


def templates_with_section(tmp_path: Path, results: Results) -> Path:
    """A copy of attncard's templates whose card for `results` has the new section before `BEFORE`."""
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, templates)
    card = templates / card_template_files(results).cards[results.schema_version]
    text = card.read_text(encoding="utf-8")
    assert text.count(BEFORE) == 1, f"pick another heading of {card.name} to add the section before"
    card.write_text(text.replace(BEFORE, SECTION + BEFORE), encoding="utf-8")
    return templates


def test_a_section_added_to_the_template_and_the_context_renders_in_place(tmp_path: Path):
    results = Results.load(RESULTS)
    templates = templates_with_section(tmp_path, results)
    card = render_context(with_tokens_seen(results), template_environment(templates))
    config = results.training.hyperparameters
    section = f"## Tokens seen\n\nAt most {config.steps * config.batch_size * config.max_length:,} tokens"
    assert section in card
    # Everything else is the card as attncard renders it.
    assert card == render_card(results).replace(
        BEFORE, SECTION.replace("{{ tokens_seen }}", with_tokens_seen(results).tokens_seen) + BEFORE
    )


def test_a_section_whose_field_the_context_lacks_is_refused(tmp_path: Path):
    results = Results.load(RESULTS)
    templates = templates_with_section(tmp_path, results)
    with pytest.raises(jinja2.UndefinedError, match="tokens_seen"):
        render_context(card_context(results), template_environment(templates))


def test_render_card_is_its_context_rendered():
    results = Results.load(RESULTS)
    assert render_context(card_context(results)) == render_card(results)


@pytest.mark.parametrize(
    "name", sorted({name for files in CARD_TEMPLATE_FILES.values() for name in files.cards.values()})
)
def test_every_name_a_released_card_template_reads_is_a_field_of_the_context(name: str):
    """The context is the whole interface of the card templates: each name a released one reads (`r` is
    the results) is a field of `CardContext`, and nothing else is passed to them."""
    environment = template_environment()
    tree = environment.parse((TEMPLATES_DIR / name).read_text(encoding="utf-8"))
    # Names the template sets itself (`{% set %}`, loop variables, macro arguments) are not read from outside.
    assigned = {
        target.name
        for node in tree.find_all((jinja2.nodes.Assign, jinja2.nodes.AssignBlock, jinja2.nodes.For))
        for target in (node.target, *node.target.find_all(jinja2.nodes.Name))
        if isinstance(target, jinja2.nodes.Name)
    } | {arg.name for macro in tree.find_all(jinja2.nodes.Macro) for arg in macro.args}
    read = jinja2.meta.find_undeclared_variables(tree) - assigned
    fields = {field.name for field in dataclasses.fields(CardContext)} - {"results"} | {"r"}
    assert read <= fields, sorted(read - fields)
    assert {"r", "front_matter", "status_line"} <= read  # the check reads the template's names at all
