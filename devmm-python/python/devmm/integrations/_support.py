"""The seed's shared plumbing of the provide arrows at its module path
(``devmm.integrations._support``): ``Installer`` (it is
``devmm.integrations.Installer``), the cycle guard ``ensure_no_cycle``, and
the shims for a library's stream handles, ``ForeignHandleStream`` and
``stream_handle_of`` (the one reader of them: the rmm arrow's too)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._core.device import Device
from .._devmm import RuntimeUnavailableError, Stream, runtime_for
from ._installer import Installer, refuse_cycle

__all__ = ["Installer"]

#: A native stream handle is a ``cudaStream_t`` / ``hipStream_t``: a pointer.
_HANDLE_LIMIT = 2**64


def ensure_no_cycle(mr: Any, forbidden: type, library: str) -> None:
    """Raises ``ValueError`` when installing ``mr`` into ``library`` would
    make the library allocate through itself: a resource in its chain
    (followed through ``upstream``) is a ``forbidden`` instance, or says it
    allocates through ``library`` (``consumes``; ``"rmm"`` covers hipMM),
    devmm's one rule (``refuse_cycle``)."""
    refuse_cycle(library.lower(), mr, forbidden)


class ForeignHandleStream(Stream):
    """A library's native stream handle on ``device`` as a devmm ``Stream``,
    for the resource calls of a provide arrow: ``handle`` is the handle as
    given (an int in ``[0, 2**64)``: ``TypeError`` for another type,
    ``ValueError`` out of range), and ordering goes to the stream the
    device's runtime wraps it in (looked up on use, so a device no runtime
    serves fails then, with ``RuntimeUnavailableError``; the runtime
    refuses a handle that is no stream of its own then, too)."""

    def __init__(self, device: Device, handle: int) -> None:
        if not isinstance(handle, int) or isinstance(handle, bool):
            raise TypeError(f"a stream handle is an int, got {type(handle).__name__!r}")
        if not 0 <= handle < _HANDLE_LIMIT:
            raise ValueError(f"stream handles are ints in [0, 2**64), got {handle}")
        self.device = device
        self._handle = handle

    @property
    def handle(self) -> int:
        return self._handle

    def synchronize(self) -> None:
        self._native().synchronize()

    def wait_raw(self, other_handle: int) -> None:
        self._native().wait_raw(other_handle)

    def _native(self) -> Stream:
        return runtime_for(self.device).wrap_stream(self.device, self._handle)


def library_streams(device: Device) -> Callable[[int], Stream]:
    """How a bridge on ``device`` turns its library's native stream handles
    into the devmm streams it allocates on, decided once, when the bridge
    is made: the runtime's own wrap where the device's runtime loads (it
    knows a per-thread default stream's thread, so a free from another
    thread is ordered after the owner's work, and it compares by device and
    handle), else a :class:`ForeignHandleStream`, which needs the runtime
    only for what needs one, so a resource written in Python serves the
    library without a GPU runtime."""
    try:
        runtime = runtime_for(device)
    except RuntimeUnavailableError:
        return functools.partial(ForeignHandleStream, device)
    return functools.partial(runtime.wrap_stream, device)


def stream_handle_of(obj: object) -> int:
    """The native handle of a library's stream object: ``None`` is the
    default stream (0), an int is itself, a devmm ``Stream`` gives its
    ``handle`` (its ``__cuda_stream__`` serves CUDA streams only), an
    object whose ``__cuda_stream__`` is not ``None`` gives the handle that
    protocol returns (rmm's and hipMM's streams); else the first int among
    the attributes ``handle`` (Numba), ``ptr`` (CuPy) and ``value`` (rmm).
    ``TypeError`` for anything else, and for a handle that is not an int."""
    if obj is None:
        return 0
    if isinstance(obj, int):
        return obj
    if isinstance(obj, Stream):
        return _int_handle(obj.handle, "handle")
    protocol = getattr(obj, "__cuda_stream__", None)
    if protocol is not None:
        return _int_handle(protocol()[1], "__cuda_stream__")
    for attribute in ("handle", "ptr", "value"):
        value = getattr(obj, attribute, None)
        if isinstance(value, int):
            return value
    raise TypeError(
        f"cannot read a stream handle from {type(obj).__name__!r}: expected None, an int, "
        "an object with __cuda_stream__, or one with an int handle, ptr or value attribute"
    )


def _int_handle(handle: object, source: str) -> int:
    if isinstance(handle, int):
        return handle
    raise TypeError(f"{source} must give an int stream handle, got {handle!r}")
