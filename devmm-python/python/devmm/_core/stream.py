"""``Stream``, the sentinels and the CPU's ``CpuStream`` at the seed's
module path (``devmm._core.stream``).

``Stream``, ``StreamSentinel``, the sentinels and ``StreamError`` (the
``RuntimeError`` a failed stream hand-off raises) are the extension's.
``CpuStream`` is the seed's constructible CPU stream: a Python ``Stream``
over the CPU runtime's one stream, which orders nothing because host work
is done when a call returns."""

from __future__ import annotations

from .._devmm import DEFAULT, LEGACY_DEFAULT, PER_THREAD_DEFAULT, Stream, StreamError, StreamSentinel, runtime_for
from .device import Device, DeviceType

__all__ = ["DEFAULT", "LEGACY_DEFAULT", "PER_THREAD_DEFAULT", "CpuStream", "Stream", "StreamError", "StreamSentinel"]

_CPU = Device(DeviceType.CPU)


class CpuStream(Stream):
    """The CPU's stream on ``device`` (``cpu:0`` by default): handle 0,
    ``synchronize`` and ``wait_raw`` return at once. A device that is not
    the CPU is a ``ValueError``. Accepted wherever a stream is; it pickles
    by its device."""

    def __init__(self, device: Device = _CPU) -> None:
        if device.type is not DeviceType.CPU:
            raise ValueError(f"CpuStream is the CPU's stream, not one of {device}; pass a cpu device")
        self.device = device
        self._native = runtime_for(device).default_stream(device)

    @property
    def handle(self) -> int:
        return self._native.handle

    def synchronize(self) -> None:
        self._native.synchronize()

    def wait_raw(self, other_handle: int) -> None:
        self._native.wait_raw(other_handle)

    def __reduce__(self) -> tuple[type[CpuStream], tuple[Device]]:
        return (CpuStream, (self.device,))
