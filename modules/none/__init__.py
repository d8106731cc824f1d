"""`none`: the identity module. The model keeps its own attention; only LoRA and the head are trained."""

from ..base import AttentionModule, Claims, imported_on_call
from .config import NoneConfig

# attention.py imports torch: the function imports it when first called, so that this folder (and `MODULE`,
# which the registry and the card read) imports without torch.
MODULE = AttentionModule(
    name=__name__.rpartition(".")[2],  # the folder's name
    config_class=NoneConfig,
    function=imported_on_call(f"{__name__}.attention", "none_attention"),
    claims=Claims(changes_attention=False),  # the model's own attention, registered only for the trace
)

# How the module contract (`attncard.testing`, tests/modules/test_module_contract.py) runs it: `config`
# changes attention on rows of 4 to 50 tokens; `dense_config` computes the model's own attention.
CONTRACT_CASE = dict(dense_config={})
