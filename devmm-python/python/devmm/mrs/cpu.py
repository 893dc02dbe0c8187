"""Host memory resources."""

from .._devmm import BytearrayMemoryResource, MallocMemoryResource, NumpyHandlerMemoryResource

__all__ = ["BytearrayMemoryResource", "MallocMemoryResource", "NumpyHandlerMemoryResource"]
