"""devmm: one interface for allocating, freeing and describing memory on
CPU, CUDA and ROCm, handing every allocation out as a zero-copy DLPack
tensor. The implementation is the Rust crate ``devmm``; this package is its
Python face (``devmm._devmm``)."""

from ._core.device import Device
from ._core.dtypes import DType
from ._devmm import (
    DEFAULT,
    DEVMM_RUNTIME,
    LEGACY_DEFAULT,
    PER_THREAD_DEFAULT,
    Aligned,
    CallbackMemoryResource,
    ColMajor,
    DeviceBuffer,
    DeviceMemoryResource,
    DeviceOptimal,
    DeviceRuntime,
    DeviceType,
    FailureCallbackAdaptor,
    Layout,
    LayoutPolicy,
    LimitingAdaptor,
    LoggingAdaptor,
    OutOfMemoryHook,
    Permuted,
    RowMajor,
    RuntimeUnavailableError,
    StatisticsAdaptor,
    Stream,
    StreamError,
    StreamSentinel,
    Tensor,
    TraceAdaptor,
    TrackingAdaptor,
    __version__,
    StreamPool,
    copy_device_to_ptr,
    copy_host_to_ptr,
    copy_ptr_to_host,
    foreign_memory,
    from_dlpack,
    default_device,
    empty,
    empty_like,
    get_current_memory_resource,
    on_out_of_memory,
    set_current_memory_resource,
    using_memory_resource,
)
from . import _runtimes, mrs, statistics
from ._core import layout as _layout_surface  # gives the native policies their dataclass surface
from ._stream_flags import StreamFlags
from ._out_of_memory import OutOfMemoryError
from ._tracking import LiveAllocation
from ._runtimes import available_runtimes, runtime_for, runtime_names
from ._runtimes.base import CopyKind

# The devmm.runtimes entry points join discovery now, so that a
# DEVMM_RUNTIME naming no runtime fails the import, not the first allocation.
_runtimes.discover()

__all__ = [
    "DEFAULT",
    "DEVMM_RUNTIME",
    "LEGACY_DEFAULT",
    "PER_THREAD_DEFAULT",
    "Aligned",
    "CallbackMemoryResource",
    "ColMajor",
    "CopyKind",
    "Device",
    "DeviceBuffer",
    "DeviceMemoryResource",
    "DeviceOptimal",
    "DeviceRuntime",
    "DeviceType",
    "DType",
    "FailureCallbackAdaptor",
    "Layout",
    "LayoutPolicy",
    "LimitingAdaptor",
    "LiveAllocation",
    "LoggingAdaptor",
    "OutOfMemoryError",
    "OutOfMemoryHook",
    "Permuted",
    "RowMajor",
    "RuntimeUnavailableError",
    "StatisticsAdaptor",
    "Stream",
    "StreamError",
    "StreamSentinel",
    "Tensor",
    "TraceAdaptor",
    "TrackingAdaptor",
    "__version__",
    "StreamFlags",
    "StreamPool",
    "copy_device_to_ptr",
    "copy_host_to_ptr",
    "copy_ptr_to_host",
    "foreign_memory",
    "from_dlpack",
    "available_runtimes",
    "default_device",
    "empty",
    "empty_like",
    "get_current_memory_resource",
    "mrs",
    "on_out_of_memory",
    "runtime_for",
    "runtime_names",
    "set_current_memory_resource",
    "statistics",
    "using_memory_resource",
]
