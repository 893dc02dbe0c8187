"""The runtime protocol's names where the seed keeps them
(``devmm._runtimes.base``): ``CopyKind``, ``DeviceRuntime`` and
``RuntimeUnavailableError``; and the type of the seed's platform classes
(``cpu.CpuRuntime`` and the others)."""

from __future__ import annotations

import enum
from typing import Any

from .._devmm import DeviceRuntime, RuntimeUnavailableError, runtime_for

__all__ = ["CopyKind", "DeviceRuntime", "RuntimeUnavailableError"]


class CopyKind(enum.IntEnum):
    """The direction of a :meth:`DeviceRuntime.memcpy`. The values are the
    ``cudaMemcpyKind`` / ``hipMemcpyKind`` codes, which the core checks
    (``devmm::CopyKind``); ``DEFAULT`` lets a GPU driver with unified
    addressing tell host from device memory itself.

    Examples
    --------
    >>> import devmm
    >>> int(devmm.CopyKind.HOST_TO_DEVICE), devmm.CopyKind(2)
    (1, <CopyKind.DEVICE_TO_HOST: 2>)
    """

    HOST_TO_HOST = 0
    HOST_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    DEVICE_TO_DEVICE = 3
    DEFAULT = 4


class _PlatformRuntimeType(type):
    """The type of the seed's per-platform runtime classes. devmm's runtimes
    are all ``DeviceRuntime`` objects, one per platform, made by the core;
    such a class names one of them: calling it returns that runtime
    (``runtime_for(name)``: the same object each time, or
    ``RuntimeUnavailableError`` where its platform cannot run), and
    ``isinstance`` is true of it alone. Such a class cannot be subclassed
    (``TypeError``): what a subclass overrode would never run, since calling
    it returns the core's runtime all the same."""

    name: str

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> _PlatformRuntimeType:
        for base in bases:
            if isinstance(base, _PlatformRuntimeType):
                raise TypeError(
                    f"{base.__name__} cannot be subclassed: it names the core's one "
                    f"{base.name} runtime, which a subclass's overrides would not reach"
                )
        return super().__new__(mcs, name, bases, namespace)

    def __call__(cls, api: Any = None) -> DeviceRuntime:
        if api is not None:
            # The seed's GPU runtimes take a scripted driver table; devmm's
            # core calls the driver itself (its fake drivers are libraries).
            raise TypeError(
                f"{cls.__name__} takes no api: devmm's runtimes call the platform's "
                "driver library themselves (docs/adr/0016)"
            )
        return runtime_for(cls.name)

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, DeviceRuntime) and obj.name == cls.name
