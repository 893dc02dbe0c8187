"""CUDA memory resources: device (``cudaMallocAsync`` / ``cudaMalloc``),
pinned host and managed memory, through the CUDA runtime devmm loads at run
time (``DEVMM_CUDART_PATH`` names the library explicitly); and the
allocators of rmm (:class:`RmmMemoryResource`) and CuPy
(:class:`CupyAllocatorMemoryResource`) as devmm resources, which import
their library when made.

Importing this module never fails, on a machine without the library or
without a driver too: making a resource there raises
:class:`devmm.RuntimeUnavailableError` (an ``ImportError``) with the reason."""

from .._devmm import (
    CudaManagedMemoryResource,
    CudaPinnedMemoryResource,
    CudaRuntimeMemoryResource,
)
from ._cupy import CupyAllocatorMemoryResource
from ._rmm import RmmMemoryResource

__all__ = [
    "CudaManagedMemoryResource",
    "CudaPinnedMemoryResource",
    "CudaRuntimeMemoryResource",
    "CupyAllocatorMemoryResource",
    "RmmMemoryResource",
]
