"""`none`: the identity module. The model keeps its own attention; only LoRA and the head are trained."""

from ..base import AttentionModule, Claims, imported_on_call
from .config import NoneConfig

# attention.py imports torch: the function imports it when first called, so that this folder (and `MODULE`,
# which the registry and the card read) imports without torch.
MODULE = AttentionModule(
    name="none",
    config_class=NoneConfig,
    function=imported_on_call(f"{__name__}.attention", "none_attention"),
    claims=Claims(changes_attention=False),  # the model's own attention, registered only for the trace
)
