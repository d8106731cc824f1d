"""`attncard modules`: the attention modules installed, and what each supports."""

from __future__ import annotations

import argparse

from ...modules import get_module, module_names
from .common import run_command

DESCRIPTION = "List the attention modules installed (built in, or added by packages) and what each supports."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`attncard modules` takes no arguments."""


def run(args: argparse.Namespace) -> int:
    """Prints one row per module: its name and whether it works in causal and bidirectional models and with
    grouped-query attention.

    Example:
        $ attncard modules
        module          causal  bidirectional  gqa
        adaptive_span   yes     yes            yes
        …
    """
    return run_command(_print_modules)


def _print_modules() -> None:
    print(f"{'module':<16}{'causal':<8}{'bidirectional':<15}{'gqa':<5}")
    for name in module_names():
        module = get_module(name)
        flags = [module.causal, module.bidirectional, module.gqa]
        print(
            f"{name:<16}"
            + "".join(f"{'yes' if f else 'no':<{w}}" for f, w in zip(flags, (8, 15, 5), strict=True))
        )
