"""ROCm memory resources: device (``hipMallocAsync`` / ``hipMalloc``),
device memory from a pool of its own (:class:`HipAsyncMemoryResource`,
with the pool's figures), pinned host and managed memory, through HIP, which devmm loads at run time
(``DEVMM_HIP_PATH`` names the library explicitly); and hipMM's resources
as devmm resources (:class:`HipmmMemoryResource`).

Importing this module never fails, on a machine without the library or
without a driver too: making a resource there raises
:class:`devmm.RuntimeUnavailableError` (an ``ImportError``) with the reason."""

from typing import Any as _Any

from .._devmm import (
    HipAsyncMemoryResource,
    HipManagedMemoryResource,
    HipPinnedMemoryResource,
    HipRuntimeMemoryResource,
)
from . import _rmm
from ._rmm import HipmmMemoryResource

__all__ = [
    "HipAsyncMemoryResource",
    "HipManagedMemoryResource",
    "HipPinnedMemoryResource",
    "HipRuntimeMemoryResource",
    "HipmmMemoryResource",
]


def _rmm_stream_class() -> _Any:
    """hipMM's ``Stream`` class, what :class:`HipmmMemoryResource` hands
    hipMM devmm's streams as: the seam where a test may stand another class
    in."""
    return _rmm.stream_class("rocm")
