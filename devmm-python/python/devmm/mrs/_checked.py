"""What a resource written in Python checks before it calls its library,
as devmm's native resources check it."""

from __future__ import annotations

from .._devmm import DeviceMemoryResource, Stream, StreamSentinel, _check_nbytes, _frees_nothing

__all__ = ["CheckedResource"]


class CheckedResource(DeviceMemoryResource):
    """A devmm resource over a library's allocator: ``allocate`` and
    ``deallocate`` check ``nbytes`` as native resources do (``ValueError``
    naming it), answer 0 bytes with the null pointer and freeing it with
    nothing (a null pointer with a size is a ``ValueError``: the core's
    rule for null), and hand the rest to ``_allocate`` and ``_deallocate``,
    which the library's resource defines."""

    def allocate(self, nbytes: int, stream: Stream | StreamSentinel | None = None) -> int:
        if _check_nbytes(nbytes) == 0:
            return 0
        return self._allocate(nbytes, stream)

    def deallocate(self, ptr: int, nbytes: int, stream: Stream | StreamSentinel | None = None) -> None:
        # The core's rule: only a 0-byte allocation may be null.
        if not _frees_nothing(self, ptr, nbytes):
            self._deallocate(ptr, nbytes, stream)

    def _allocate(self, nbytes: int, stream: Stream | StreamSentinel | None) -> int:
        raise NotImplementedError(f"{type(self).__name__} defines no _allocate")

    def _deallocate(self, ptr: int, nbytes: int, stream: Stream | StreamSentinel | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} defines no _deallocate")
