"""Host memory resources."""

from .._devmm import BytearrayMemoryResource, MallocMemoryResource

__all__ = ["BytearrayMemoryResource", "MallocMemoryResource"]
