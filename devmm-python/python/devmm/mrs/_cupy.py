"""A CuPy allocator as a devmm resource."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any, Callable

from .._core.device import Device
from .._devmm import (
    DeviceType,
    RuntimeUnavailableError,
    Stream,
    StreamSentinel,
)
from .._provided import is_provided
from ._checked import CheckedResource
from ._streams import resolve_stream

__all__ = ["CupyAllocatorMemoryResource", "cupy_module", "find_cupy", "import_cupy"]

#: CuPy's pool and ``cudaMalloc`` both hand out 256-byte aligned blocks.
_ALIGNMENT = 256


def import_cupy() -> ModuleType:
    """CuPy, or :class:`devmm.RuntimeUnavailableError` naming what is missing."""
    try:
        return importlib.import_module("cupy")
    except ImportError as e:
        raise RuntimeUnavailableError(
            f"cupy is not importable ({e}); devmm's CuPy bridge needs it: install cupy"
        ) from e


#: Where the resources find CuPy: ``devmm.mrs.cuda`` points it at its
#: ``_cupy_module``, the seam where a test may stand another module in (as
#: the seed's tests do), so that this module never imports that one.
find_cupy: Callable[[], ModuleType] = import_cupy


def cupy_module() -> ModuleType:
    """CuPy, through :data:`find_cupy`."""
    return find_cupy()


class CupyAllocatorMemoryResource(CheckedResource):
    """Allocates through a CuPy allocator, a callable ``f(nbytes) ->
    cupy.cuda.MemoryPointer``: ``allocator``, or CuPy's current allocator
    (its memory pool unless set otherwise) at each allocation. It runs with
    ``device`` current and the devmm stream as CuPy's current stream, so a
    pool caches by the right stream; the ``MemoryPointer`` is held until
    ``deallocate``.

    ``CupyAllocatorMemoryResource(allocator=None, device=None)``: ``device``
    is a CUDA ``Device`` or string (``"cuda:0"`` when ``None``). CuPy is
    imported at the first allocation.

    Raises
    ------
    ValueError
        ``device`` is not a CUDA device, or ``allocator`` is devmm's own
        CuPy allocator (a cycle).
    RuntimeUnavailableError
        At the first allocation, where CuPy is not importable.

    Examples
    --------
    >>> from devmm.mrs.cuda import CupyAllocatorMemoryResource
    >>> CupyAllocatorMemoryResource(device="cpu")
    Traceback (most recent call last):
        ...
    ValueError: CupyAllocatorMemoryResource requires a cuda device: CuPy allocates on CUDA devices, not cpu:0; pass a cuda device
    >>> mr = CupyAllocatorMemoryResource(device="cuda:0")
    >>> mr.device, mr.allocator
    (Device(type=<DeviceType.CUDA: 2>, index=0), None)
    >>> ptr = mr.allocate(1024, None)  # needs CuPy and a GPU  # doctest: +SKIP
    >>> mr.deallocate(ptr, 1024, None)  # doctest: +SKIP
    """

    consumes = "cupy"
    # CuPy's pointers are real device memory: devmm's copies may use them.
    dereferenceable = True

    def __init__(
        self,
        allocator: Callable[[int], Any] | None = None,
        device: Device | str | None = None,
    ) -> None:
        if device is None:
            device = Device(DeviceType.CUDA, 0)
        elif isinstance(device, str):
            device = Device.from_string(device)
        if device.type is not DeviceType.CUDA:
            raise ValueError(
                f"CupyAllocatorMemoryResource requires a cuda device: CuPy allocates on CUDA "
                f"devices, not {device}; pass a cuda device"
            )
        self.device = device
        self._allocator = allocator
        # CuPy is imported at the first allocation, as the seed's resource
        # does; devmm's allocator can be CuPy's current one only once CuPy
        # is imported, so a cycle is found here if there is one now.
        if allocator is not None:
            self._check_not_devmm(allocator)
        elif sys.modules.get("cupy") is not None:
            self._allocate_through(cupy_module().cuda)
        self._live: dict[int, Any] = {}

    def _allocate_through(self, cuda: ModuleType) -> Callable[[int], Any]:
        """What an allocation calls: the allocator given (checked when the
        resource was made), else CuPy's own entry point, ``cupy.cuda.alloc``,
        which calls CuPy's current allocator; refused (a cycle) where that
        allocator is devmm's."""
        if self._allocator is not None:
            return self._allocator
        self._check_not_devmm(cuda.get_allocator())
        alloc: Callable[[int], Any] = cuda.alloc
        return alloc

    def _check_not_devmm(self, allocator: Callable[[int], Any]) -> None:
        if is_provided(allocator):
            raise ValueError(
                "CuPy's allocator is devmm's own (devmm.integrations.cupy.install is active); "
                "allocating through it from devmm is a cycle (consume and provide for one "
                "library at once); pass another allocator"
            )

    @property
    def allocator(self) -> Callable[[int], Any] | None:
        """The allocator given, or ``None`` for CuPy's current one."""
        return self._allocator

    @property
    def stream_ordered(self) -> bool:
        return True

    def guaranteed_alignment(self) -> int:
        """256: CuPy's allocations start on 256-byte boundaries.

        Examples
        --------
        >>> from devmm.mrs.cuda import CupyAllocatorMemoryResource
        >>> CupyAllocatorMemoryResource(device="cuda:0").guaranteed_alignment()
        256
        """
        return _ALIGNMENT

    def _allocate(self, nbytes: int, stream: Stream | StreamSentinel | None) -> int:
        cuda = cupy_module().cuda
        stream = resolve_stream(self.device, stream)
        allocate = self._allocate_through(cuda)
        # The stream is made once the device is current, so it is that
        # device's (ExternalStream's device_id defaults to it).
        with cuda.Device(self.device.index), cuda.ExternalStream(stream.handle):
            pointer = allocate(nbytes)
        self._live[int(pointer.ptr)] = (pointer, nbytes, stream)
        return int(pointer.ptr)

    def _deallocate(self, ptr: int, nbytes: int, stream: Stream | StreamSentinel | None) -> None:
        held = self._live.get(ptr)
        if held is None or held[1] != nbytes:
            raise ValueError(
                f"CupyAllocatorMemoryResource on {self.device} did not hand out {nbytes} bytes "
                f"at {ptr:#x}; nothing was freed"
            )
        # Dropping the last reference returns the block to CuPy, whose pool
        # keeps it for the next allocation on the stream it was allocated
        # on: that stream first waits for the work queued on the one the
        # free names.
        allocated_on, freed_on = held[2], resolve_stream(self.device, stream)
        if freed_on != allocated_on:
            allocated_on.wait(freed_on)
        del self._live[ptr]

    def _debug_live_count(self) -> int:
        return len(self._live)

    def __repr__(self) -> str:
        return f"CupyAllocatorMemoryResource(allocator={self._allocator!r}, device={self.device})"
