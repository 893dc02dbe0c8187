"""The current-resource registry's functions at the seed's module path
(``devmm._core.registry``); they are the extension's, the same objects as
``devmm.get_current_memory_resource`` and the rest."""

from .._devmm import get_current_memory_resource, set_current_memory_resource, using_memory_resource

__all__ = ["get_current_memory_resource", "set_current_memory_resource", "using_memory_resource"]
