"""CuPy allocating through a devmm resource.

``install(mr)`` sets CuPy's allocator (``cupy.cuda.set_allocator``) to one
that allocates a :class:`devmm.DeviceBuffer` from ``mr`` on CuPy's current
stream and hands it to CuPy as ``UnownedMemory``: CuPy's arrays keep the
buffer, and CuPy's stream object, alive and free the buffer (on that
stream) when the last one goes.
``uninstall()`` puts back the allocator CuPy had."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .._devmm import DeviceBuffer, DeviceMemoryResource, DeviceType
from .._provided import provided_class
from ..mrs._cupy import import_cupy
from ._installer import Installer, refuse_cycle
from ._support import library_streams, stream_handle_of

__all__ = ["install"]


class _OnStream:
    """What CuPy's ``UnownedMemory`` keeps alive for one allocation: the
    devmm buffer and the CuPy stream object it is ordered on. CuPy destroys
    a stream it made once the object is collected, and the buffer's free is
    queued on that stream, so the buffer is freed first, here, while the
    stream is still held (rmm's CuPy allocator keeps the stream the same
    way)."""

    __slots__ = ("buffer", "stream")

    def __init__(self, buffer: DeviceBuffer, stream: object) -> None:
        self.buffer = buffer
        self.stream = stream

    def __del__(self) -> None:
        self.buffer.free()


@provided_class
class _DevmmCupyAllocator:
    """A CuPy allocator over a devmm resource: ``allocator(nbytes)`` returns
    a ``cupy.cuda.MemoryPointer`` owning a devmm buffer on CuPy's current
    device and stream, which must be the resource's device."""

    def __init__(self, cupy: ModuleType, mr: DeviceMemoryResource) -> None:
        self.mr = mr
        self._cupy = cupy
        self._stream = library_streams(mr.device)

    def __call__(self, nbytes: int) -> Any:
        cuda = self._cupy.cuda
        device = self.mr.device
        current = cuda.runtime.getDevice()
        if current != device.index:
            raise ValueError(
                f"CuPy asked for {nbytes} bytes on CUDA device {current}, but its devmm "
                f"allocator serves {device} ({self.mr!r}); install one for that device"
            )
        current = cuda.get_current_stream()
        buffer = DeviceBuffer(nbytes, mr=self.mr, stream=self._stream(stream_handle_of(current)))
        memory = cuda.UnownedMemory(buffer.ptr, nbytes, _OnStream(buffer, current), device.index)
        return cuda.MemoryPointer(memory, 0)

    def __repr__(self) -> str:
        # The class is private: the repr names the public call that made it.
        return f"<CuPy allocator from devmm.integrations.cupy.install({self.mr!r})>"


def _cupy_module() -> ModuleType:
    """CuPy, imported when first installed into: where this module reaches
    for it (a test may stand another module in here)."""
    return import_cupy()


def _is_devmm_allocator(allocator: Any) -> bool:
    """Whether ``allocator`` is devmm's (so CuPy would allocate through devmm)."""
    return isinstance(allocator, _DevmmCupyAllocator)


def install(mr: DeviceMemoryResource) -> Installer:
    """Makes CuPy allocate through ``mr`` (on a CUDA device); returns the
    :class:`~devmm.integrations.Installer` that undoes it.

    Raises ``ValueError`` for a resource that allocates through CuPy itself
    (a cycle) or that is not on a CUDA device, and
    ``RuntimeUnavailableError`` where CuPy is not importable.

    Examples
    --------
    >>> import devmm.integrations.cupy
    >>> from devmm.mrs.cpu import MallocMemoryResource
    >>> devmm.integrations.cupy.install(MallocMemoryResource())
    Traceback (most recent call last):
        ...
    ValueError: CuPy allocates CUDA memory, so the installed resource must live on a cuda device; ...

    With a CUDA device:

    >>> from devmm.mrs.cuda import CudaRuntimeMemoryResource
    >>> with devmm.integrations.cupy.install(CudaRuntimeMemoryResource("cuda:0")):  # doctest: +SKIP
    ...     x = cupy.zeros(1000)  # allocated by devmm
    """
    refuse_cycle("cupy", mr)
    if mr.device.type is not DeviceType.CUDA:
        raise ValueError(
            f"CuPy allocates CUDA memory, so the installed resource must live on a cuda device; "
            f"{mr!r} allocates on {mr.device}"
        )
    cupy = _cupy_module()
    allocator = _DevmmCupyAllocator(cupy, mr)
    cuda = cupy.cuda
    previous = cuda.get_allocator()
    cuda.set_allocator(allocator)
    return Installer(
        "CuPy",
        lambda: cuda.set_allocator(previous),
        mr=mr,
        is_current=lambda: cuda.get_allocator() is allocator,
    )
