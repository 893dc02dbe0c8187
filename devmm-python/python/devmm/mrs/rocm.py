"""ROCm memory resources: device (``hipMallocAsync`` / ``hipMalloc``),
pinned host and managed memory, through HIP, which devmm loads at run time
(``DEVMM_HIP_PATH`` names the library explicitly); and hipMM's resources
as devmm resources (:class:`HipmmMemoryResource`).

Importing this module raises :class:`devmm.RuntimeUnavailableError` (an
``ImportError``) when the HIP library is not present. A library without a
driver behind it imports; its resources raise the reason."""

from .._devmm import require_runtime as _require_runtime

_require_runtime("rocm")

from .._devmm import (  # noqa: E402  (only once the runtime is known to be there)
    HipManagedMemoryResource,
    HipPinnedMemoryResource,
    HipRuntimeMemoryResource,
)
from ._rmm import HipmmMemoryResource  # noqa: E402

__all__ = [
    "HipManagedMemoryResource",
    "HipPinnedMemoryResource",
    "HipRuntimeMemoryResource",
    "HipmmMemoryResource",
]
