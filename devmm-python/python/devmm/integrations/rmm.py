"""rmm (or hipMM) allocating through a devmm resource.

``install(mr)`` makes rmm's per-device resource for ``mr.device`` a
``rmm.mr.CallbackMemoryResource`` over ``mr``, so everything that allocates
through rmm there (``rmm.DeviceBuffer``, cuDF and the rest of RAPIDS)
allocates through devmm, on the stream rmm passes. ``uninstall()`` puts
back the resource rmm had. A CUDA ``mr`` needs rmm, a ROCm one hipMM."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .._devmm import DeviceMemoryResource, DeviceType
from .._provided import is_provided, provide, withdraw
from ..mrs._rmm import rmm_module
from ._installer import Installer, refuse_cycle
from ._support import library_streams, stream_handle_of

__all__ = ["install"]

_PLATFORM = {DeviceType.CUDA: "cuda", DeviceType.ROCM: "rocm"}

def _rmm_module_for(platform: str) -> ModuleType:
    """The ``rmm`` module serving ``platform`` (``"cuda"``: rmm, ``"rocm"``:
    hipMM): where this module reaches for it (a test may stand another
    module in here)."""
    return rmm_module(platform)


def _is_devmm_bridge(resource: Any) -> bool:
    """Whether ``resource`` is an rmm resource that ``install`` made (and
    that is installed)."""
    return is_provided(resource)


def install(mr: DeviceMemoryResource) -> Installer:
    """Makes rmm's (or hipMM's) resource for ``mr.device`` allocate through
    ``mr``; returns the :class:`~devmm.integrations.Installer` that undoes it.

    Raises ``ValueError`` for a resource that allocates through rmm itself
    (a cycle) or that is not on a CUDA or ROCm device.

    Examples
    --------
    >>> import devmm.integrations.rmm
    >>> from devmm.mrs.cpu import MallocMemoryResource
    >>> devmm.integrations.rmm.install(MallocMemoryResource())
    Traceback (most recent call last):
        ...
    ValueError: rmm serves cuda/rocm devices (rmm CUDA ones, hipMM ROCm ones); ...

    With a CUDA device:

    >>> from devmm.mrs.cuda import CudaRuntimeMemoryResource
    >>> with devmm.integrations.rmm.install(CudaRuntimeMemoryResource("cuda:0")):  # doctest: +SKIP
    ...     buf = rmm.DeviceBuffer(size=1024)  # allocated by devmm
    """
    refuse_cycle("rmm", mr)  # hipMM too
    device = mr.device
    platform = _PLATFORM.get(device.type)
    if platform is None:
        raise ValueError(
            f"rmm serves cuda/rocm devices (rmm CUDA ones, hipMM ROCm ones); {mr!r} allocates on {device}"
        )
    rmm = _rmm_module_for(platform)

    # rmm's Stream speaks the CUDA stream protocol, hipMM's too, so the
    # handle is read here, not by the ROCm runtime, which refuses that
    # protocol; an older rmm's callbacks take no stream (the default one).
    stream_of = library_streams(device)

    def allocate(nbytes: int, stream: Any = None) -> int:
        return mr.allocate(nbytes, stream_of(stream_handle_of(stream)))

    def deallocate(ptr: int, nbytes: int, stream: Any = None) -> None:
        mr.deallocate(ptr, nbytes, stream_of(stream_handle_of(stream)))

    bridge = rmm.mr.CallbackMemoryResource(allocate, deallocate)
    previous = rmm.mr.get_per_device_resource(device.index)
    rmm.mr.set_per_device_resource(device.index, bridge)
    provide(bridge)

    def restore() -> None:
        rmm.mr.set_per_device_resource(device.index, previous)
        withdraw(bridge)

    return Installer(
        "rmm",
        restore,
        mr=mr,
        is_current=lambda: rmm.mr.get_per_device_resource(device.index) is bridge,
    )
