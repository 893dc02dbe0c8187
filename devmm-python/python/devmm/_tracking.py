"""What a ``TrackingAdaptor`` reports of each live allocation."""

from __future__ import annotations

import dataclasses

__all__ = ["LiveAllocation"]


@dataclasses.dataclass(frozen=True)
class LiveAllocation:
    """One allocation made through a ``TrackingAdaptor`` and not yet freed,
    as ``TrackingAdaptor.leaks()`` lists them (``frames`` is left out of the
    repr).

    Examples
    --------
    >>> import devmm
    >>> from devmm.mrs.cpu import MallocMemoryResource
    >>> tracking = devmm.TrackingAdaptor(MallocMemoryResource())
    >>> buf = devmm.DeviceBuffer(64, mr=tracking)
    >>> (leak,) = tracking.leaks()
    >>> leak.ptr == buf.ptr, leak.nbytes, leak.stream
    (True, 64, 0)
    >>> buf.free()
    >>> tracking.leaks()
    []
    """

    ptr: int
    """Its address."""
    nbytes: int
    """Bytes asked for."""
    stream: int
    """The stream's native handle."""
    time: float
    """When it was made, in seconds since the Unix epoch."""
    thread: int
    """The allocating thread's id (the OS thread id on Linux)."""
    thread_name: str | None
    """The allocating thread's name, if it had one."""
    frames: tuple[tuple[str | None, int | None, str], ...] = dataclasses.field(repr=False)
    """The call site as ``(file, line, function)`` triples, innermost first:
    the Python stack for allocations made from Python."""
