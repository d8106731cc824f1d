"""The module contract (`attncard.testing`), from one table, over every built-in module and the example
plugin `examples/sliding_window` (installed with pip, as `tests/modules/test_plugins.py` installs it): dense
attention where the module claims it, training through peft and loading back, the tensor trace, causal,
padded and grouped-query attention on the tiny models of every family.

A module's own tests (`tests/test_<module>.py`) test what only it does; what every module must do is here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from attncard.modules import BUILTIN_MODULE_NAMES, Measurement, get_module
from attncard.modules.base import dense_flops
from attncard.testing import ContractCase, ModuleContract, builtin_cases, check_card_texts
from conftest import plugin_installed

# Modules of other packages in the table, installed for their tests (the `plugin_site` fixture).
PLUGINS = ("sliding_window",)

# Each built-in module's case is beside it (its folder's `contract.toml`); `config`: how the
# plugin runs in the checks, small enough to change attention on rows of 4 to 50 tokens; `dense_config`: where
# it claims the model's own attention.
CASES = [
    *builtin_cases(),
    ContractCase("sliding_window", config={"window": 2}, dense_config={"window": 512}),
]


def test_the_table_holds_every_module():
    assert sorted(case.name for case in CASES) == sorted([*BUILTIN_MODULE_NAMES, *PLUGINS])


class TestModuleContract(ModuleContract):
    cases = CASES

    @pytest.fixture(autouse=True)
    def plugin_of_the_case(self, case: ContractCase, request: pytest.FixtureRequest) -> Iterator[None]:
        """The plugin installed while a test of its module runs (and pip run only when one does)."""
        if case.name not in PLUGINS:
            yield
            return
        with plugin_installed(request.getfixturevalue("plugin_site")):
            yield


@dataclasses.dataclass
class SigmoidConfig:
    temperature: float | None = dataclasses.field(
        default=None, metadata={"help": "divides q·kᵀ; None: the layer's own scaling"}
    )


def test_the_contract_fails_a_module_whose_texts_the_card_lint_refuses(tiny_model_dir):
    """The issue's module: a config default of None, its help saying "None: …". It kept every other check of
    the contract, and publish refused its card after training; the contract now fails it."""
    module = dataclasses.replace(get_module("none"), name="sigmoid", config_class=SigmoidConfig)
    with pytest.raises(AssertionError) as failed:
        check_card_texts(ContractCase(module), tiny_model_dir("gpt2"))
    assert str(failed.value).startswith(
        "sigmoid breaks the module contract:\nthe help of the config field 'temperature' holds placeholder "
        "'None', which the card's lint refuses in the configuration table"
    )


def test_the_contract_fails_a_module_that_prints_none_as_it_runs(tiny_model_dir):
    def flops(model, n):
        return dense_flops(model, n)[0], f"the dense count at temperature {None}"

    module = dataclasses.replace(get_module("none"), name="sigmoid", measurement=Measurement(flops=flops))
    with pytest.raises(AssertionError) as failed:
        check_card_texts(ContractCase(module), tiny_model_dir("gpt2"))
    assert str(failed.value).startswith(
        "sigmoid on the tiny gpt2: the card's lint would refuse what the module writes as it runs:\n"
        "the FLOPs formula 'the dense count at temperature None' holds placeholder 'None'"
    )
