"""The conformance suites at the seed's module path
(``devmm.testing._conformance``): ``mr_conformance`` and
``dlpack_conformance`` (the same functions as ``devmm.testing``'s), and the
seed's per-check functions, each running the core's check of that part of
the contract (``devmm::testing::mr_conformance``) against one resource on
one stream. A check function returns when the check passes and raises
``AssertionError`` saying why otherwise, also when the check cannot run on
the resource (one that tracks no live allocations, say).

``host_write`` and ``host_read`` are the seed's default ``write`` and
``read``: copies on the host, by the CPU runtime."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from .._devmm import DeviceMemoryResource, Stream, _mr_checks, dlpack_conformance, mr_conformance, runtime_for
from .._runtimes.base import CopyKind

__all__ = ["dlpack_conformance", "mr_conformance"]

WriteFn = Callable[[int, bytes], None]
ReadFn = Callable[[int, int], bytes]


def host_write(ptr: int, data: bytes) -> None:
    """Writes ``data`` at the host address ``ptr``."""
    source = ctypes.create_string_buffer(bytes(data), len(data))
    _host_copy(ptr, ctypes.addressof(source), len(data))


def host_read(ptr: int, nbytes: int) -> bytes:
    """The ``nbytes`` bytes at the host address ``ptr``."""
    target = ctypes.create_string_buffer(nbytes)
    _host_copy(ctypes.addressof(target), ptr, nbytes)
    return target.raw


def _host_copy(dst: int, src: int, nbytes: int) -> None:
    cpu = runtime_for("cpu")
    cpu.memcpy(dst, src, nbytes, CopyKind.HOST_TO_HOST, cpu.default_stream("cpu"))


def live_count(mr: DeviceMemoryResource) -> int:
    """The allocations ``mr`` holds (its ``_debug_live_count()``);
    ``AssertionError`` for a resource without that hook or one that does not
    count them (``None``), and for a count that is not an int."""
    hook = getattr(mr, "_debug_live_count", None)
    if not callable(hook):
        raise AssertionError(f"{mr!r} does not expose the _debug_live_count() testing hook")
    count = hook()
    if count is None:
        raise AssertionError(f"{mr!r} does not track its live allocations (_debug_live_count() is None)")
    if not isinstance(count, int) or isinstance(count, bool):
        raise AssertionError(f"_debug_live_count() must return an int, got {count!r}")
    return count


def _ends_empty(mr: DeviceMemoryResource, what: str) -> None:
    """The seed's checks count absolutely: after them the resource holds
    nothing (the core's count from where it started)."""
    count = live_count(mr)
    if count != 0:
        raise AssertionError(f"{what}: _debug_live_count() is {count} after the check, not 0")


def _check(
    mr: DeviceMemoryResource,
    stream: Stream,
    *checks: str,
    write: WriteFn | None = None,
    read: ReadFn | None = None,
) -> None:
    """Runs the core's ``checks`` on ``mr`` and ``stream``; a check that
    cannot run is a failure here (the seed's checks have no skip)."""
    skipped = _mr_checks(lambda: mr, list(checks), write=write, read=read, stream_factory=lambda: stream)
    if skipped:
        raise AssertionError("could not check " + "; ".join(skipped))


def check_write_then_read(mr: DeviceMemoryResource, stream: Stream, write: WriteFn, read: ReadFn) -> None:
    """Bytes written to allocations read back exactly."""
    _check(mr, stream, "write_read_exact", write=write, read=read)


def check_no_aliasing(mr: DeviceMemoryResource, stream: Stream, write: WriteFn, read: ReadFn) -> None:
    """Live allocations do not overlap, and freeing one leaves the others."""
    _check(mr, stream, "no_aliasing", write=write, read=read)


def check_guaranteed_alignment(mr: DeviceMemoryResource, stream: Stream) -> None:
    """``guaranteed_alignment()`` is a power of two that every pointer meets."""
    _check(mr, stream, "alignment_promise", "alignment_honesty")


def check_bookkeeping(mr: DeviceMemoryResource, stream: Stream) -> None:
    """``_debug_live_count()`` counts each allocation and is 0 once they are
    freed (the resource must hold nothing before, as the seed's check)."""
    _check(mr, stream, "live_count")
    _ends_empty(mr, "bookkeeping must be empty after paired alloc/free")


def check_double_free(mr: DeviceMemoryResource, stream: Stream) -> None:
    """Misuse is refused with ``ValueError``: the core checks a double free
    together with an unknown pointer and a wrong size."""
    _check(mr, stream, "misuse_detection")


def check_foreign_free(mr: DeviceMemoryResource, stream: Stream) -> None:
    """Freeing a pointer the resource never returned is refused with
    ``ValueError`` and leaves its allocations intact: the core's misuse
    check, as ``check_double_free``; the resource holds nothing after."""
    _check(mr, stream, "misuse_detection")
    _ends_empty(mr, "a refused foreign free must leave the allocation freeable")


def check_zero_byte(mr: DeviceMemoryResource, stream: Stream) -> None:
    """Two zero-byte requests held at once give pointers meeting the
    alignment promise, distinct unless null, that free cleanly, leaving the
    resource holding nothing (the core's check; docs/adr/0016 items 5 and
    35)."""
    _check(mr, stream, "zero_byte")
    _ends_empty(mr, "zero-byte allocations must free cleanly")


def check_negative_size(mr: DeviceMemoryResource, stream: Stream) -> None:
    """A negative size is refused with ``ValueError``. Sizes are unsigned in
    the core, so this is the binding's argument conversion, checked on the
    resource's ``allocate``."""
    try:
        mr.allocate(-1, stream)
    except ValueError:
        return
    raise AssertionError("a negative allocation size must raise ValueError, but nothing was raised")
