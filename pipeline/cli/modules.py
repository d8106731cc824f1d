"""`attncard modules`: the attention modules installed, what each supports, and the package it comes from."""

from __future__ import annotations

import argparse
import sys

from ...modules import get_module, module_names, module_provenance
from ..record.errors import ModulePluginError
from .common import run_command

DESCRIPTION = (
    "List the attention modules installed (built in, or added by packages through the entry-point group "
    "attncard.modules), what each supports, and the package and version it comes from."
)
HEADER = ("module", "causal", "bidirectional", "gqa", "package", "version")

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`attncard modules` takes no arguments."""


def run(args: argparse.Namespace) -> int:
    """Prints one row per module: its name, whether it works in causal and bidirectional models and with
    grouped-query attention, and the package and version it comes from. A package whose module cannot be
    loaded gets a warning line on stderr instead of a row.

    Example:
        $ attncard modules
        module           causal  bidirectional  gqa  package                  version
        …
        none             yes     yes            yes  attncard                 0.1.0
        sliding_window   yes     yes            yes  attncard-sliding-window  0.1.0
    """
    return run_command(_print_modules)


def _print_modules() -> None:
    rows = [HEADER]
    for name in module_names():
        try:
            module = get_module(name)
        except ModulePluginError as error:
            print(f"warning: {error}", file=sys.stderr)
            continue
        provenance = module_provenance(name)
        claims = module.claims
        flags = ["yes" if flag else "no" for flag in (claims.causal, claims.bidirectional, claims.gqa)]
        rows.append((name, *flags, provenance.package, provenance.version))
    widths = [max(len(row[column]) for row in rows) + 2 for column in range(len(HEADER))]
    for row in rows:
        print("".join(f"{cell:<{width}}" for cell, width in zip(row, widths, strict=True)).rstrip())
