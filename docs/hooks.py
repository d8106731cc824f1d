"""mkdocs hooks (`hooks:` in mkdocs.yml); no part of the package."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.pages import Page


def on_page_markdown(markdown: str, *, page: Page, **kwargs: Any) -> str:
    """A card's `<details>` blocks hold Markdown (tables, code), which the Hub renders. Python-Markdown
    renders Markdown inside an HTML block only where the block asks for it (`md_in_html`): the cards' blocks
    ask."""
    if page.file.src_uri.startswith("cards/"):
        return markdown.replace("<details>", '<details markdown="1">')
    return markdown
