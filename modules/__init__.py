"""The attention modules, one folder each, and the registry the pipeline asks for them by name.

Example:
    >>> from modules import get_module, module_names
    >>> module_names()
    ['adaptive_span', 'adaptive_sparse', 'none', 'span_expanded', 'svd_lowrank']
    >>> get_module("none").bidirectional
    True
"""

from ..pipeline.errors import UnknownModuleError
from .adaptive_span import MODULE as ADAPTIVE_SPAN
from .adaptive_sparse import MODULE as ADAPTIVE_SPARSE
from .base import AttentionModule
from .none import MODULE as NONE
from .span_expanded import MODULE as SPAN_EXPANDED
from .svd_lowrank import MODULE as SVD_LOWRANK

REGISTRY: dict[str, AttentionModule] = {
    module.name: module for module in (NONE, ADAPTIVE_SPAN, SPAN_EXPANDED, ADAPTIVE_SPARSE, SVD_LOWRANK)
}


def module_names() -> list[str]:
    return sorted(REGISTRY)


def get_module(name: str) -> AttentionModule:
    """The module registered under `name`; raises [`UnknownModuleError`] listing the valid names."""
    if name not in REGISTRY:
        raise UnknownModuleError(name, module_names())
    return REGISTRY[name]


__all__ = ["REGISTRY", "AttentionModule", "get_module", "module_names"]
