"""attncard: honest, verified model cards for efficient-attention modules.

The folders of the project are packaged under this one import name (see pyproject.toml):
`attncard.pipeline` (one file per stage: data, models, train, evaluate, verify, render, publish, download),
`attncard.modules` (one folder per attention module, and the kernels) and `attncard.templates` (the card).

The public API is re-exported here. Its names load on first use, so that `import attncard` (or reading a
results.json with `attncard.pipeline.record.results`) does not import torch and every module up front.

Example:
    >>> from attncard import load_verified
    >>> verified = load_verified("loopback-user/tiny-gpt2-none-sst2", base_model="tiny-gpt2")
    >>> verified.results.verification.status
    <Status.PASS_NO_COMPRESSION: 'PASS_NO_COMPRESSION'>
"""

from __future__ import annotations

import importlib
import typing
from pathlib import Path

# name -> the module that defines it
_PUBLIC = {
    # downloading and checking published runs
    "load_verified": "attncard.pipeline.verify.download",
    "download_verified": "attncard.pipeline.verify.download",
    "reverify": "attncard.pipeline.verify.reverify",
    "predict": "attncard.pipeline.verify.download",
    "VerifiedModel": "attncard.pipeline.verify.download",
    # publishing
    "run_publish": "attncard.pipeline.publish.publish",
    "PublishOptions": "attncard.pipeline.publish.publish",
    "push_run_folder": "attncard.pipeline.publish.push",
    # the module registry
    "AttentionModule": "attncard.modules",
    "get_module": "attncard.modules",
    "module_names": "attncard.modules",
    # results and errors
    "Results": "attncard.pipeline.record.results",
    "Status": "attncard.pipeline.record.results",
    "AttncardError": "attncard.pipeline.record.errors",
}

__all__ = [
    "AttentionModule",
    "AttncardError",
    "PublishOptions",
    "Results",
    "Status",
    "VerifiedModel",
    "download_verified",
    "get_module",
    "load_verified",
    "module_names",
    "predict",
    "push_run_folder",
    "reverify",
    "run_publish",
]

if typing.TYPE_CHECKING:
    from attncard.modules import AttentionModule, get_module, module_names
    from attncard.pipeline.publish.publish import PublishOptions, run_publish
    from attncard.pipeline.publish.push import push_run_folder
    from attncard.pipeline.record.errors import AttncardError
    from attncard.pipeline.record.results import Results, Status
    from attncard.pipeline.verify.download import VerifiedModel, download_verified, load_verified, predict
    from attncard.pipeline.verify.reverify import reverify


# The folders of a source checkout that only an install packages under `attncard` (pyproject.toml).
_MAPPED_PACKAGES = ("attncard.pipeline", "attncard.modules", "attncard.templates")


def __getattr__(name: str) -> typing.Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'attncard' has no attribute '{name}'")
    try:
        module = importlib.import_module(_PUBLIC[name])
    except ModuleNotFoundError as error:
        if error.name not in _MAPPED_PACKAGES:
            raise
        # This file was imported from a checkout's attncard/ folder with no install that maps pipeline/ and
        # modules/ under it: Python was started in the checkout, whose folder comes before any install.
        checkout = Path(__file__).resolve().parent.parent
        raise ModuleNotFoundError(
            f"attncard was imported from {checkout}/attncard/, the folder of a source checkout, where "
            f"{error.name} is not (its folders are packaged under attncard only by an install); run Python "
            f"from another folder to use the installed attncard, or install this checkout: pip install -e "
            f"{checkout}",
            name=error.name,
        ) from error
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
