"""The seed's shared plumbing of the provide arrows at its module path
(``devmm.integrations._support``): ``Installer`` (it is
``devmm.integrations.Installer``), the cycle guard ``ensure_no_cycle``, and
the shims for a library's stream handles, ``ForeignHandleStream`` and
``stream_handle_of``."""

from __future__ import annotations

from typing import Any

from .._core.device import Device
from .._devmm import Stream, runtime_for
from ._installer import Installer, refuse_cycle
from .rmm import _stream_handle

__all__ = ["Installer"]


def ensure_no_cycle(mr: Any, forbidden: type, library: str) -> None:
    """Raises ``ValueError`` when installing ``mr`` into ``library`` would
    make the library allocate through itself. The rule is devmm's one
    (``refuse_cycle``): a resource names the library it allocates through
    (``consumes``), so every class allocating through ``library`` is
    refused, ``forbidden`` among them (it is taken for the seed's
    signature, and not consulted)."""
    refuse_cycle(library.lower(), mr)


class ForeignHandleStream(Stream):
    """A library's native stream handle on ``device`` as a devmm ``Stream``,
    for the resource calls of a provide arrow: ``handle`` is the handle as
    given, and ordering goes to the stream the device's runtime wraps it in
    (looked up on use, so a device no runtime serves fails then, with
    ``RuntimeUnavailableError``). The runtime checks the handle on use."""

    def __init__(self, device: Device, handle: int) -> None:
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


def stream_handle_of(obj: object) -> int:
    """The native handle of a library's stream object: ``None`` is the
    default stream (0), an int is itself, an object speaking the CUDA stream
    protocol gives its handle (as the rmm arrow reads them); else the first
    int among the attributes ``handle`` (devmm, Numba), ``ptr`` (CuPy) and
    ``value`` (rmm). ``TypeError`` for anything else."""
    if obj is None or isinstance(obj, int) or hasattr(obj, "__cuda_stream__"):
        return _stream_handle(obj)
    for attribute in ("handle", "ptr", "value"):
        value = getattr(obj, attribute, None)
        if isinstance(value, int):
            return value
    raise TypeError(
        f"cannot read a stream handle from {type(obj).__name__!r}: expected None, an int, "
        "an object with __cuda_stream__, or one with an int handle, ptr or value attribute"
    )
