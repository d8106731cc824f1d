"""What publish checks of a module before it trains: each finding is a one-line warning for the publisher,
saying what to do, never a refusal (the run would still be right, its card less useful).

- [`untraced_attention_warning`]: the module's attention function records no step of the tensor trace
  ([`trace_step`]), so the card's trace would show the projections and no attention row.
- [`package_index_warning`]: the module comes from a package whose installed version no package index
  lists, so the `pip install "<package>==<version>"` line the card gives its readers would fail.

One check refuses the run rather than warn, because the card's lint would refuse it after training:

- [`traced_text_problems`]: what the module writes into the card as it runs, its trace steps' texts and
  its FLOPs formula, holds a placeholder (`None`, `TODO`, …). The module's fixed texts (`spec.md`,
  `attention.py`, the configuration, the citation) are checked by
  `attncard.pipeline.checks.lint.card_text_problems`.

Example:
    >>> from attncard.modules import get_module, module_provenance
    >>> none = get_module("none")
    >>> model = none.apply(model, none.config_class())  # a BERT
    >>> untraced_attention_warning(none, model, batch) is None  # `none_attention` records its step
    True
    >>> package_index_warning(module_provenance("none")) is None  # built in: the card pins attncard's commit
    True
"""

from __future__ import annotations

import re
import subprocess
import sys

import torch
from packaging.version import InvalidVersion, Version
from torch import nn

from ..pipeline.record.errors import first_line
from ..pipeline.record.placeholders import line_placeholders
from . import BUILTIN_PACKAGE, UNKNOWN_VERSION, ModuleProvenance
from .base import AttentionModule
from .trace import PROJECTION_STAGES, record_trace

# Seconds each `pip index versions` may take; an index that answers later counts as unreachable.
INDEX_TIMEOUT = 20.0
# pip's own socket timeout and retries, and no prompt for credentials: offline, pip gives up in seconds, not
# after its default minutes of retrying.
PIP_INDEX_OPTIONS = ("--pre", "--timeout", "5", "--retries", "1", "--no-input", "--disable-pip-version-check")
_AVAILABLE = re.compile(r"^Available versions: (.*)$", re.MULTILINE)


def untraced_attention_warning(
    module: AttentionModule, model: nn.Module, inputs: dict[str, torch.Tensor]
) -> str | None:
    """The warning for a module whose attention function records no step of the tensor trace, else None.

    Runs one forward pass of `model` (with `module` installed, before training) on `inputs` through
    [`record_trace`], as evaluation records the card's trace after training. The pass runs in eval mode and
    leaves the random state and every submodule's training flag as they were, so that training draws and
    counts what it would have without the check. A pass that fails is reported, not raised: training (on
    its own device) says more.

    Args:
        module: the installed module.
        model: the model it is installed in, before training (peft-wrapped or not).
        inputs: a small tokenized batch, e.g. the first two evaluation rows; moved to the model's device.

    Returns:
        One line saying what is missing and how to record it ([`trace_step`]), or None when the function
        recorded a step of its own.

    Example:
        >>> import dataclasses
        >>> from transformers.integrations.sdpa_attention import sdpa_attention_forward
        >>> from attncard.modules import get_module
        >>> from attncard.modules.base import install_attention
        >>> untraced = dataclasses.replace(get_module("none"), name="untraced")
        >>> install_attention(model, "untraced", sdpa_attention_forward)  # a function that never traces
        >>> print(untraced_attention_warning(untraced, model, batch))
        the attention function of the module 'untraced' records no step of the tensor trace (a forward pass
        before training recorded q projection, k projection, v projection, output projection): the card's
        tensor trace will show no attention row; record one with attncard.modules.trace.trace_step(...
    """
    try:
        steps = _trace_leaving_no_mark(model, inputs)
    except Exception as error:  # a check before training must not stop a run that may work on its device
        return (
            f"the tensor trace of the module '{module.name}' could not be recorded before training "
            f"({type(error).__name__}: {first_line(error)}); whether the card's trace shows an attention row "
            "is known after the run"
        )
    if any(step.stage not in PROJECTION_STAGES for step in steps):
        return None
    recorded = ", ".join(step.stage for step in steps) or "nothing"
    return (
        f"the attention function of the module '{module.name}' records no step of the tensor trace (a "
        f"forward pass before training recorded {recorded}): the card's tensor trace will show no attention "
        'row; record one with attncard.modules.trace.trace_step(module, "attention", "<what it '
        'computes>", {"query": query, "key": key, "value": value}, {"output": output}) in the attention '
        f"function, after it computes the output (in {module.folder / 'attention.py'})"
    )


def _trace_leaving_no_mark(model: nn.Module, inputs: dict[str, torch.Tensor]) -> list:
    """[`record_trace`] in eval mode, the random state and every submodule's training flag restored: dropout
    draws nothing, and a module counting its training passes counts none."""
    modes = {submodule: submodule.training for submodule in model.modules()}
    parameter = next(model.parameters())
    cuda = [parameter.device.index or 0] if parameter.device.type == "cuda" else []
    model.eval()
    try:
        with torch.random.fork_rng(devices=cuda):
            return record_trace(model, {name: tensor.to(parameter.device) for name, tensor in inputs.items()})
    finally:
        for submodule, training in modes.items():
            submodule.training = training


def traced_text_problems(
    module: AttentionModule, model: nn.Module, inputs: dict[str, torch.Tensor]
) -> list[str]:
    """What the card's lint would refuse in the texts a module writes as it runs, found before training: the
    stage, operation and tensor names of each step its attention function records ([`trace_step`]), which
    the card's tensor trace prints, and the formula of its FLOPs (`measurement.flops`), which the card
    prints after "Counted:". The rules are the lint's own (`line_placeholders`,
    pipeline/record/placeholders.py): no `None`, `nan`, `TODO`, `TBD`, `N/A`, … and no `{{`; a text built from
    a config value of None says `None`.

    Runs one forward pass through [`record_trace`], leaving the model as [`untraced_attention_warning`]
    does, and the FLOPs hook at the inputs' length. A pass or hook that fails is not reported here: training
    and measuring say more.

    Args:
        module: the installed module.
        model: the model it is installed in, before training (peft-wrapped or not).
        inputs: a small tokenized batch, e.g. the first two evaluation rows; moved to the model's device.

    Returns:
        One line per problem, naming the text and what to do; empty when the lint would pass them.

    Example:
        >>> import dataclasses
        >>> from attncard.modules import get_module
        >>> from attncard.modules.base import Measurement, dense_flops
        >>> def flops(model, n):
        ...     return dense_flops(model, n)[0], f"the dense count at temperature {None}"
        >>> sigmoid = dataclasses.replace(get_module("none"), name="sigmoid", measurement=Measurement(flops))
        >>> model = sigmoid.apply(model, sigmoid.config_class())  # a BERT
        >>> traced_text_problems(sigmoid, model, batch)
        ["the FLOPs formula 'the dense count at temperature None' holds placeholder 'None', which the card's
        lint refuses; write the formula without it (a config value of None prints as None: say what it
        stands for)"]
    """
    advice = "a config value of None prints as None: say what it stands for"
    problems = []
    try:
        steps = _trace_leaving_no_mark(model, inputs)
    except Exception:  # a check before training must not stop a run that may work on its device
        steps = []
    for step in steps:
        if step.stage in PROJECTION_STAGES:
            continue  # attncard's own rows
        texts = [("stage", step.stage), ("operation", step.op)]
        texts += [("tensor name", name) for name in (*step.inputs, *step.outputs)]
        problems += [
            f"the {what} {text!r} of the trace step '{step.stage}' holds {message}, which the card's lint "
            f"refuses in the tensor trace; write it without ({advice}; in {module.folder / 'attention.py'})"
            for what, text in texts
            for message in line_placeholders(text)
        ]
    try:
        _, formula = module.measurement.flops(model, int(inputs["input_ids"].shape[-1]))
    except Exception:  # the measurement after training says more
        return problems
    problems += [
        f"the FLOPs formula {formula!r} holds {message}, which the card's lint refuses; write the formula "
        f"without it ({advice})"
        for message in line_placeholders(formula)
    ]
    return problems


def package_index_warning(provenance: ModuleProvenance, timeout: float = INDEX_TIMEOUT) -> str | None:
    """The warning for a module whose package, at its installed version, no package index lists, else None.

    A card of a module from another package tells its readers to `pip install "<package>==<version>"`. This
    asks `pip index versions <package>` (this Python's pip, its configuration, `PIP_INDEX_URL` and the other
    `PIP_*` variables as they are set) whether that version is there. When pip finds neither the package nor
    pip itself, or cannot run, or takes longer than `timeout`, the index is taken as unreachable and the
    line returned says the check was skipped.

    Args:
        provenance: the module's [`ModuleProvenance`]; a built-in module (the card pins attncard's commit)
            and a package of unknown version are not checked.
        timeout: seconds each `pip index versions` may take.

    Returns:
        One line: the version is not listed, and what to do; or the check was skipped, and why. None when
        the version is listed, or nothing is to be checked.

    Example:
        >>> from attncard.modules import module_provenance
        >>> provenance = module_provenance("sliding_window")  # with examples/sliding_window installed
        >>> warning = package_index_warning(provenance)  # it is on no index (or none is reachable here)
        >>> 'pip install "attncard-sliding-window==0.1.0"' in warning
        True
    """
    package, version = provenance.package, provenance.version
    if package == BUILTIN_PACKAGE or version == UNKNOWN_VERSION:
        return None
    install = f'`pip install "{package}=={version}"`'
    versions, why = indexed_versions(package, timeout)
    if versions is None:
        return (
            f"could not check that readers can {install} as the card tells them: {why}; run `pip index "
            f"versions {package}` where the package index can be reached"
        )
    if any(_same_version(listed, version) for listed in versions):
        return None
    found = f"lists only {', '.join(versions[:5])}{', …' if len(versions) > 5 else ''}" if versions else why
    return (
        f"{package} {version} is on no package index pip reaches here (`pip index versions {package}` "
        f"{found}): the card tells readers to {install}, which will fail for them; upload {package} "
        f"{version} to PyPI (or the index your readers use) before you push the card, or give readers the "
        "URL to install it from"
    )


def indexed_versions(package: str, timeout: float = INDEX_TIMEOUT) -> tuple[list[str] | None, str]:
    """`(versions, why)`: the versions of `package` that `pip index versions` lists, pre-releases included,
    newest first, or None when no package index could be asked; `why` says why the list is empty or None.

    pip answers "No matching distribution" both for a package its index lacks and for an index it cannot
    reach; asking for pip itself tells the two apart (every index pip installs from has pip).

    Example:
        >>> versions, why = indexed_versions("attncard-sliding-window")  # a package on no index
        >>> versions in ([], None)  # [] where an index answers, None where none is reachable
        True
    """
    listed, why = _pip_index_versions(package, timeout)
    if listed is None or listed:
        return listed, why
    probe, probe_why = _pip_index_versions("pip", timeout)
    if probe is None:
        return None, probe_why
    if not probe:
        return None, f"pip finds neither {package} nor pip itself on its package index (offline?)"
    return [], "finds no version of it"


def _pip_index_versions(package: str, timeout: float) -> tuple[list[str] | None, str]:
    """`pip index versions <package>`: the versions listed ([] when pip finds none), or None when pip did not
    answer; and why."""
    command = [sys.executable, "-m", "pip", "index", "versions", package, *PIP_INDEX_OPTIONS]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, f"`pip index versions {package}` took over {timeout:g} s"
    except OSError as error:
        return None, f"pip could not run ({first_line(error)})"
    match = _AVAILABLE.search(result.stdout)
    if result.returncode == 0 and match:
        return [version.strip() for version in match.group(1).split(",") if version.strip()], ""
    if "No matching distribution" in result.stderr:
        return [], f"finds no version of {package}"
    lines = result.stderr.strip().splitlines()
    return None, f"pip could not list the versions of {package} ({lines[-1] if lines else 'no output'})"


def _same_version(listed: str, version: str) -> bool:
    try:
        return Version(listed) == Version(version)
    except InvalidVersion:
        return listed == version


__all__ = ["indexed_versions", "package_index_warning", "traced_text_problems", "untraced_attention_warning"]
