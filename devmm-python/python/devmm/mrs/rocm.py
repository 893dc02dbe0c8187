"""ROCm memory resources: device (``hipMallocAsync`` / ``hipMalloc``),
pinned host and managed memory, through HIP, which devmm loads at run time
(``DEVMM_HIP_PATH`` names the library explicitly); and hipMM's resources
as devmm resources (:class:`HipmmMemoryResource`).

Importing this module never fails, on a machine without the library or
without a driver too: making a resource there raises
:class:`devmm.RuntimeUnavailableError` (an ``ImportError``) with the reason."""

from .._devmm import (
    HipManagedMemoryResource,
    HipPinnedMemoryResource,
    HipRuntimeMemoryResource,
)
from ._rmm import HipmmMemoryResource

__all__ = [
    "HipManagedMemoryResource",
    "HipPinnedMemoryResource",
    "HipRuntimeMemoryResource",
    "HipmmMemoryResource",
]
