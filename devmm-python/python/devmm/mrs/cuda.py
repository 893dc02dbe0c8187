"""CUDA memory resources: device (``cudaMallocAsync`` / ``cudaMalloc``),
device memory from a pool of its own (:class:`CudaAsyncMemoryResource`,
with the pool's figures), pinned host and managed memory, through the CUDA runtime devmm loads at run
time (``DEVMM_CUDART_PATH`` names the library explicitly); and the
allocators of rmm (:class:`RmmMemoryResource`) and CuPy
(:class:`CupyAllocatorMemoryResource`) as devmm resources, which import
their library when made.

Importing this module never fails, on a machine without the library or
without a driver too: making a resource there raises
:class:`devmm.RuntimeUnavailableError` (an ``ImportError``) with the reason."""

from types import ModuleType as _ModuleType
from typing import Any as _Any

from .._devmm import (
    CudaAsyncMemoryResource,
    CudaManagedMemoryResource,
    CudaPinnedMemoryResource,
    CudaRuntimeMemoryResource,
)
from . import _cupy, _rmm
from ._cupy import CupyAllocatorMemoryResource
from ._rmm import RmmMemoryResource

__all__ = [
    "CudaAsyncMemoryResource",
    "CudaManagedMemoryResource",
    "CudaPinnedMemoryResource",
    "CudaRuntimeMemoryResource",
    "CupyAllocatorMemoryResource",
    "RmmMemoryResource",
]


def _cupy_module() -> _ModuleType:
    """CuPy, imported when a CuPy resource or bridge first needs it: the seam
    where a test may stand another module in."""
    return _cupy.import_cupy()


# The resources reach the seam through this module's global, read at each
# call, so a stand-in assigned to it is the one they find.
_cupy.find_cupy = lambda: _cupy_module()


def _rmm_stream_class() -> _Any:
    """rmm's ``Stream`` class, what :class:`RmmMemoryResource` hands rmm
    devmm's streams as: the seam where a test may stand another class in."""
    return _rmm.stream_class("cuda")
