"""The stream a Python-defined resource was asked to work on."""

from __future__ import annotations

from .._core.device import Device
from .._devmm import Stream, StreamSentinel, runtime_for

__all__ = ["resolve_stream"]



def resolve_stream(device: Device, stream: Stream | StreamSentinel | None) -> Stream:
    """``stream`` itself, the sentinel's stream on ``device``, or the
    device's default stream for ``None`` (what native resources do)."""
    if stream is None:
        return runtime_for(device).default_stream(device)
    if isinstance(stream, StreamSentinel):
        return runtime_for(device).stream(device, stream)
    return stream
