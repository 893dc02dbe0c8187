"""``DeviceBuffer`` at the seed's module path (``devmm._core.buffer``); it is
the extension's."""

from .._devmm import DeviceBuffer

__all__ = ["DeviceBuffer"]
