"""CUDA memory resources: device (``cudaMallocAsync`` / ``cudaMalloc``),
pinned host and managed memory, through the CUDA runtime devmm loads at run
time (``DEVMM_CUDART_PATH`` names the library explicitly); and the
allocators of rmm (:class:`RmmMemoryResource`) and CuPy
(:class:`CupyAllocatorMemoryResource`) as devmm resources, which import
their library when made.

Importing this module raises :class:`devmm.RuntimeUnavailableError` (an
``ImportError``) when the CUDA runtime library is not present. A library
without a driver behind it imports; its resources raise the reason."""

from .._devmm import require_runtime as _require_runtime

_require_runtime("cuda")

from .._devmm import (  # noqa: E402  (only once the runtime is known to be there)
    CudaManagedMemoryResource,
    CudaPinnedMemoryResource,
    CudaRuntimeMemoryResource,
)
from ._cupy import CupyAllocatorMemoryResource  # noqa: E402
from ._rmm import RmmMemoryResource  # noqa: E402

__all__ = [
    "CudaManagedMemoryResource",
    "CudaPinnedMemoryResource",
    "CudaRuntimeMemoryResource",
    "CupyAllocatorMemoryResource",
    "RmmMemoryResource",
]
