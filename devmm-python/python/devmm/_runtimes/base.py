"""The runtime protocol's names where the seed keeps them
(``devmm._runtimes.base``): ``CopyKind``, ``DeviceRuntime`` and
``RuntimeUnavailableError``."""

import enum

from .._devmm import DeviceRuntime, RuntimeUnavailableError

__all__ = ["CopyKind", "DeviceRuntime", "RuntimeUnavailableError"]


class CopyKind(enum.IntEnum):
    """The direction of a :meth:`DeviceRuntime.memcpy`. The values are the
    ``cudaMemcpyKind`` / ``hipMemcpyKind`` codes, which the core checks
    (``devmm::CopyKind``); ``DEFAULT`` lets a GPU driver with unified
    addressing tell host from device memory itself."""

    HOST_TO_HOST = 0
    HOST_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    DEVICE_TO_DEVICE = 3
    DEFAULT = 4
