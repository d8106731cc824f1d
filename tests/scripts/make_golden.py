"""Regenerates tests/support/fixtures/tiny_card.md from tests/support/fixtures/tiny_results.json (`make
golden`).

Run it after a deliberate change to a filter or a module's spec or source, and review the diff of the golden
card before committing it: tests/card/test_card_golden.py only compares. The card renders with the card
template version tiny_results.json records (2), as recorded: a released template's files never change
(tests/verify/test_older_runs.py), and tiny_card_t1.md, the card of template 1, is frozen. New wording is a
new version in pipeline/card/render.py's CARD_TEMPLATE_FILES; to see it in the golden card, set
tiny_results.json's `card_template` to it, then run this.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / folder) for folder in ("", "support")]

from golden import GOLDEN, golden_card  # noqa: E402 (tests/ and tests/support/ first: conftest, the card)

if __name__ == "__main__":
    GOLDEN.write_text(golden_card(), encoding="utf-8")
    print(f"wrote {GOLDEN}; review it with `git diff {GOLDEN}`")
