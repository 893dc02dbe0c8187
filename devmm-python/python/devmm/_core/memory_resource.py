"""The resource classes at the seed's module path
(``devmm._core.memory_resource``); they are the extension's, the same
objects as ``devmm.DeviceMemoryResource`` and the rest."""

from .._devmm import (
    CallbackMemoryResource,
    DeviceMemoryResource,
    LimitingAdaptor,
    LoggingAdaptor,
    StatisticsAdaptor,
)

__all__ = [
    "CallbackMemoryResource",
    "DeviceMemoryResource",
    "LimitingAdaptor",
    "LoggingAdaptor",
    "StatisticsAdaptor",
]
