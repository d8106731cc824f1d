"""What a download loads, checked before it is loaded: the recorded attention module with its config, and
`adapter_config.json` as peft's `LoraConfig`. These are the checks of [`pipeline.checks.registry`] that need
TORCH: the module's folder imports torch, and [`lora_config`] imports peft inside it, so that no profile
without TORCH (`verify --predictions`, `summary --hub`) imports either.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from importlib import metadata
from pathlib import Path

from ...modules import BUILTIN_PACKAGE, AttentionModule, get_module, module_names, module_provenance
from ..card.snippet import install_line, module_install_lines
from ..record.errors import IncompatibleRunError, ModuleNotInstalledError, UnknownModuleError
from ..record.manifest import RESULTS_FILE, sha256_file
from ..record.results import Results
from ..record.text import SHA_PREFIX
from .integrity import ADAPTER_CONFIG_FILE, read_json_object

if typing.TYPE_CHECKING:  # peft is imported by the one check that needs it (TORCH), inside it
    from peft import LoraConfig

# adapter_config.json fields that publish sets; every other field must hold LoraConfig's default.
_LORA_FIELDS: dict[str, tuple[type, ...]] = {
    "peft_type": (str,),
    "task_type": (str,),
    "r": (int,),
    "lora_alpha": (int, float),
    "lora_dropout": (int, float),
    "target_modules": (list, str),  # a list, or peft's DUMMY_TARGET_MODULES when LoRA adapts nothing
    "modules_to_save": (list, type(None)),
    "fan_in_fan_out": (bool,),
    "base_model_name_or_path": (str, type(None)),
    "revision": (str, type(None)),
    "inference_mode": (bool,),
    "peft_version": (str,),
}


def lora_config(
    folder: Path, where: str, target_modules: list[str], trained_modules: list[str]
) -> LoraConfig:
    """The run's `adapter_config.json` as a [`peft.LoraConfig`], checked field by field.

    The fields publish sets are checked for their types and for agreeing with results.json (the LoRA
    targets, the module's trained submodules); every other field must hold LoraConfig's default, so no
    field can make peft import a module (`megatron_core`), pick a class (`auto_mapping`) or load anything
    else.

    Args:
        folder: the run folder.
        where: the run, for messages.
        target_modules: the LoRA targets results.json records.
        trained_modules: the module's trained submodules, which `modules_to_save` must list.

    Returns:
        The config, to pass to `PeftModel.from_pretrained(config=...)` instead of letting peft read the file.

    Raises:
        [`IncompatibleRunError`]: a field is unknown, of the wrong type, or not what publish writes.
    """
    # TORCH: peft imports torch; only the checks and loaders that need TORCH call this.
    from peft import LoraConfig
    from peft.utils.constants import DUMMY_TARGET_MODULES

    adapter = read_json_object(folder / ADAPTER_CONFIG_FILE, where)
    defaults = json.loads(json.dumps(LoraConfig().to_dict(), default=str))

    def refuse(detail: str) -> IncompatibleRunError:
        return IncompatibleRunError(
            f"{where}: {ADAPTER_CONFIG_FILE} {detail}; attncard loads only the LoRA config publish writes: "
            "do not use this checkpoint"
        )

    installed_peft = metadata.version("peft")
    newer_peft = _newer_peft(adapter.get("peft_version"), installed_peft)
    left_out = set()
    for key, value in adapter.items():
        if key in _LORA_FIELDS:
            if not isinstance(value, _LORA_FIELDS[key]) or (
                isinstance(value, bool) and bool not in _LORA_FIELDS[key]
            ):
                raise refuse(f"has {key} = {value!r}, of the wrong type")
        elif key not in defaults and newer_peft and value in (None, False):
            # A field of a later peft, off (null or false): this peft has nothing of it to leave out.
            left_out.add(key)
        elif key not in defaults or value != defaults[key]:
            if newer_peft:
                raise IncompatibleRunError(
                    f"{where}: {ADAPTER_CONFIG_FILE} was written by peft {newer_peft}, whose field "
                    f"'{key}' = {value!r} peft {installed_peft} here does not know or defaults "
                    f"otherwise; check the run with peft>={newer_peft} (pip install 'peft>={newer_peft}')"
                )
            if key not in defaults:
                raise refuse(f"has the unknown field '{key}'")
            raise refuse(f"sets '{key}' to {value!r} (publish leaves it at {defaults[key]!r})")
    if (adapter.get("peft_type"), adapter.get("task_type")) != ("LORA", "SEQ_CLS"):
        raise refuse(
            f"describes a {adapter.get('peft_type')!r}/{adapter.get('task_type')!r} adapter, not LORA for "
            "SEQ_CLS"
        )
    targets = adapter.get("target_modules") or []
    if targets == DUMMY_TARGET_MODULES and not target_modules:
        targets = []
    if (
        not isinstance(targets, list)
        or not all(isinstance(name, str) for name in targets)
        or sorted(targets) != sorted(target_modules)
    ):
        raise refuse(f"targets {targets!r}, but {RESULTS_FILE} records {target_modules!r}")
    saved = adapter.get("modules_to_save") or []
    if not all(isinstance(name, str) for name in saved):
        raise refuse(f"has modules_to_save = {saved!r}")
    unsaved = [name for name in trained_modules if name not in saved]
    if unsaved:
        raise refuse(f"does not save {', '.join(unsaved)}, the trained parameters of the module")
    if not 0 <= adapter.get("lora_dropout", 0) < 1 or adapter.get("r", 1) < 1:
        raise refuse(f"has r = {adapter.get('r')!r} and lora_dropout = {adapter.get('lora_dropout')!r}")
    return LoraConfig(
        **{key: value for key, value in adapter.items() if key != "peft_version" and key not in left_out}
    )


def _newer_peft(written_by: object, installed: str) -> str | None:
    """The peft release that wrote an adapter config (its `peft_version`) when it is later than the
    `installed` one: a field the installed peft does not know may then be that release's own, not an
    injection."""
    from packaging.version import InvalidVersion, Version

    if not isinstance(written_by, str):
        return None
    try:
        written = Version(written_by)
    except InvalidVersion:
        return None
    return str(written) if written > Version(installed) else None


def _module_install(results: Results) -> str:
    """The `pip install` command of the run's module package, as card template 2 gives it: from attncard's
    repository at the recorded commit for a package kept there, else by name and version."""
    command = next(line for line in module_install_lines(results) if not line.startswith("#"))
    return command.split("  # ")[0]


def module_and_config(results: Results, where: str) -> tuple[AttentionModule, object]:
    """The recorded attention module and its config, rebuilt from `results.module`.

    The module must be installed (attncard never installs a package) and its source must have the sha256
    results.json records, when it records one.

    Raises:
        [`ModuleNotInstalledError`]: the module comes from a package that is not installed; the message names
            the package and version.
        [`IncompatibleRunError`]: attncard has no such module, the installed one has other source, or its
            config class does not know a recorded field.
        [`ModulePluginError`]: the installed package providing the module is broken.
    """
    name, record = results.module.name, results.module
    plugin = record.package not in ("", BUILTIN_PACKAGE)
    try:
        module = get_module(name)
    except UnknownModuleError:
        if plugin:
            raise ModuleNotInstalledError(
                f"{where}: the run's attention module '{name}' comes from the package {record.package} "
                f"{record.package_version}, which is not installed here; install it "
                f"({_module_install(results)}, after checking that this package is the one you expect: the "
                "name comes from the run) and load the run again; attncard installs nothing"
            ) from None
        raise IncompatibleRunError(
            f"{where}: the run uses the attention module '{name}', which this attncard does not have "
            f"(it has {', '.join(module_names())}); install attncard {results.environment.attncard_version}"
        ) from None
    if record.source_sha256:
        installed = module_provenance(name)
        if installed.source_sha256 != record.source_sha256:
            install = _module_install(results) if plugin else install_line(results).split("  # ")[0]
            changed = [
                file
                for file in sorted({*record.source, *(path.name for path in module.source_files)})
                if record.source.get(file) != _file_sha256(module.folder / file)
            ]
            raise IncompatibleRunError(
                f"{where}: the attention module '{name}' installed here ({installed.package} "
                f"{installed.version}, source sha256 {installed.source_sha256[:SHA_PREFIX]}…) is not the one "
                f"the run was trained with ({record.package} {record.package_version}, source sha256 "
                f"{record.source_sha256[:SHA_PREFIX]}…"
                + (f"; {', '.join(changed)} differ" if changed else "")
                + f"); install the recorded one ({install}) and load the run again"
            )
    config_class = module.config_class
    hints = typing.get_type_hints(config_class)
    known = {f.name for f in dataclasses.fields(config_class)}
    recorded = dict(results.module.config)
    unknown = sorted(set(recorded) - known)
    if unknown:
        raise IncompatibleRunError(
            f"{where}: the run's '{name}' config has fields {unknown} that {config_class.__name__} of this "
            f"attncard does not know; install attncard {results.environment.attncard_version}"
        )
    values = {
        key: tuple(value) if isinstance(value, list) and typing.get_origin(hints[key]) is tuple else value
        for key, value in recorded.items()
    }
    return module, config_class(**values)


def _file_sha256(path: Path) -> str | None:
    """The sha256 of a file, or None when it is not there."""
    return sha256_file(path) if path.is_file() else None


__all__ = ["lora_config", "module_and_config"]
