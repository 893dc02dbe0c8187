"""rmm (RAPIDS, CUDA) and hipMM (ROCm) resources as devmm resources.

hipMM's Python package is a port that keeps RAPIDS' names, so both install
a module called ``rmm``. Which platform it serves is read from the
distribution that installed it (``rmm-cu12``, ``rmm-cu13``: CUDA; a name
with ``hip`` in it: ROCm); for a module no distribution installed (a
test's stand-in), from its resource classes (``Cuda*``: rmm, ``Hip*``:
hipMM); ``DEVMM_RUNTIME=cuda|rocm`` decides when neither tells (design
§4.2)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
from types import ModuleType
from typing import Any

from .._core.device import Device
from .._devmm import (
    DEVMM_RUNTIME,
    DeviceType,
    RuntimeUnavailableError,
    Stream,
    StreamSentinel,
    runtime_for,
)
from .._provided import is_provided
from ._checked import CheckedResource
from ._streams import resolve_stream

__all__ = [
    "HipmmMemoryResource",
    "RmmMemoryResource",
    "marker_platform",
    "rmm_module",
    "rmm_platform",
    "stream_class",
]

#: rmm and hipMM guarantee 256-byte alignment, like cudaMalloc.
_ALIGNMENT = 256
_PLATFORM_DEVICE = {"cuda": DeviceType.CUDA, "rocm": DeviceType.ROCM}
_LIBRARY = {"cuda": "rmm", "rocm": "hipmm"}
_SEAM_MODULE = {"cuda": "devmm.mrs.cuda", "rocm": "devmm.mrs.rocm"}


def rmm_platform(distributions: list[str], override: str | None = None) -> str | None:
    """The platform (``"cuda"`` or ``"rocm"``) of an ``rmm`` module installed
    by ``distributions``, ``override`` (the ``DEVMM_RUNTIME`` value) when
    their names do not tell, ``None`` when neither does.

    >>> rmm_platform(["rmm-cu13"]), rmm_platform(["hipmm"]), rmm_platform(["x"], "rocm")
    ('cuda', 'rocm', 'rocm')
    """
    names = [d.lower() for d in distributions]
    if any("hip" in n for n in names):
        return "rocm"
    if any(n == "rmm" or n.startswith("rmm-") or n.startswith("rmm_") for n in names):
        return "cuda"
    return override if override in _PLATFORM_DEVICE else None


#: Resource classes only one platform's ``rmm.mr`` has.
_MARKERS = {
    "cuda": ("CudaMemoryResource", "CudaAsyncMemoryResource"),
    "rocm": ("HipMemoryResource", "HipAsyncMemoryResource"),
}


def marker_platform(rmm: Any) -> str | None:
    """The platform whose resource classes ``rmm.mr`` has (rmm's ``Cuda*``,
    hipMM's ``Hip*``); ``None`` when it has neither's or both's.

    >>> from types import SimpleNamespace
    >>> marker_platform(SimpleNamespace(mr=SimpleNamespace(HipMemoryResource=object)))
    'rocm'
    """
    mr = getattr(rmm, "mr", None)
    found = [p for p, names in _MARKERS.items() if any(hasattr(mr, n) for n in names)]
    return found[0] if len(found) == 1 else None


def rmm_module(platform: str) -> ModuleType:
    """The ``rmm`` module, checked to target ``platform``; raises
    :class:`devmm.RuntimeUnavailableError` when it is absent or serves the
    other platform."""
    wanted = _LIBRARY[platform]
    try:
        rmm = importlib.import_module("rmm")
    except ImportError as e:
        raise RuntimeUnavailableError(
            f"rmm is not importable ({e}), so no rmm module targeting {platform} is importable; "
            f"devmm's {wanted} bridge needs the {wanted} Python package: install it"
        ) from e
    location = getattr(rmm, "__file__", None)
    # A module standing in for rmm (a test's) has no file and no
    # distribution: the resource classes it carries tell, as the seed reads.
    marked = marker_platform(rmm) if location is None else None
    distributions = [] if location is None else importlib.metadata.packages_distributions().get("rmm", [])
    found = marked or rmm_platform(distributions, os.environ.get(DEVMM_RUNTIME))
    if found != platform:
        raise RuntimeUnavailableError(
            f"no rmm module targeting {platform} is importable: the rmm module at {location or repr(rmm)} "
            f"(installed by {distributions or 'no known distribution'}) serves "
            f"{found or 'an unknown platform'}, not {platform}, so it is not {wanted}; install "
            f"{wanted}, or set {DEVMM_RUNTIME}={platform} if its distribution is misnamed"
        )
    return rmm


def stream_class(platform: str) -> Any:
    """The ``Stream`` class of the ``rmm`` module serving ``platform``."""
    return rmm_module(platform).pylibrmm.stream.Stream


class _StreamProtocol:
    """A raw stream handle in the CUDA stream protocol rmm's ``Stream`` takes."""

    def __init__(self, handle: int) -> None:
        self._handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self._handle)


class _RmmFamilyResource(CheckedResource):
    """A devmm resource over an rmm-style ``DeviceMemoryResource`` (rmm or hipMM)."""

    _platform = "cuda"
    # rmm's pointers are real device memory: devmm's copies may use them.
    dereferenceable = True

    def __init__(self, inner: Any = None, device: Device | str | None = None) -> None:
        ty = _PLATFORM_DEVICE[self._platform]
        if device is None:
            device = Device(ty, 0)
        elif isinstance(device, str):
            device = Device.from_string(device)
        if device.type is not ty:
            raise ValueError(
                f"{type(self).__name__} serves {ty.name} devices, not {device}; "
                f"{'RmmMemoryResource' if ty is DeviceType.ROCM else 'HipmmMemoryResource'} "
                f"is the one for that platform"
            )
        # The module is imported when it is first needed (as the seed's
        # resource does): here only to read its resource for the device.
        self._rmm: ModuleType | None = None
        self._stream_type: Any = None
        if inner is None:
            inner = self._module().mr.get_per_device_resource(device.index)
        # The bridge devmm.integrations.rmm installed calls back into devmm.
        if is_provided(inner):
            raise ValueError(
                f"{_LIBRARY[self._platform]}'s resource for {device} is devmm's own "
                f"(devmm.integrations.rmm.install is active); wrapping it is a cycle "
                f"(consume and provide for one library at once)"
            )
        self.device = device
        self._inner = inner
        self._live: dict[int, int] = {}

    def _module(self) -> ModuleType:
        if self._rmm is None:
            self._rmm = rmm_module(self._platform)
        return self._rmm

    @property
    def consumes(self) -> str:
        """The library this resource allocates through."""
        return _LIBRARY[self._platform]

    @property
    def inner(self) -> Any:
        """The wrapped rmm resource, kept alive by this one."""
        return self._inner

    @property
    def stream_ordered(self) -> bool:
        return True

    def guaranteed_alignment(self) -> int:
        return _ALIGNMENT

    def _stream(self, stream: Stream | StreamSentinel | None) -> Any:
        """``stream`` as the library's ``Stream``, over its handle in the CUDA
        stream protocol (a ROCm stream of devmm's does not speak it)."""
        if self._stream_type is None:  # first: a missing rmm is what to fix first
            self._stream_type = self._stream_class()
        return self._stream_type(_StreamProtocol(resolve_stream(self.device, stream).handle))

    def _stream_class(self) -> Any:
        """The library's ``Stream`` class, asked once per resource through
        its platform module's seam (``devmm.mrs.cuda._rmm_stream_class``,
        ``devmm.mrs.rocm._rmm_stream_class``), where a test may stand
        another class in."""
        return importlib.import_module(_SEAM_MODULE[self._platform])._rmm_stream_class()

    def _current_device(self) -> Any:
        """A ``with`` block that makes the resource's device current: rmm's
        resources allocate on the current device (its per-device ones are
        undefined on another). Without devmm's runtime for it (a stand-in
        serving the device, ADR 0018) nothing here can make it current."""
        try:
            runtime = runtime_for(self.device)
        except RuntimeUnavailableError:
            return contextlib.nullcontext()
        return runtime.activate_device(self.device)

    def _allocate(self, nbytes: int, stream: Stream | StreamSentinel | None) -> int:
        on = self._stream(stream)  # first: a missing rmm is what to fix first
        with self._current_device():
            ptr = int(self._inner.allocate(nbytes, on))
        if ptr:
            self._live[ptr] = nbytes
        return ptr

    def _deallocate(self, ptr: int, nbytes: int, stream: Stream | StreamSentinel | None) -> None:
        if self._live.get(ptr) != nbytes:
            raise ValueError(
                f"{type(self).__name__} on {self.device} did not hand out {nbytes} bytes at "
                f"{ptr:#x} (live: {self._live.get(ptr)} bytes there); nothing was freed"
            )
        on = self._stream(stream)
        with self._current_device():
            self._inner.deallocate(ptr, nbytes, on)
        del self._live[ptr]

    def _debug_live_count(self) -> int:
        return len(self._live)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(inner={self._inner!r}, device={self.device})"


class RmmMemoryResource(_RmmFamilyResource):
    """Allocates through an rmm ``DeviceMemoryResource``: ``inner``, or
    rmm's per-device resource for ``device`` when it is made (so a pool or
    managed memory configured in rmm serves devmm). Stream-ordered on the
    stream passed; ``inner`` lives as long as this resource.

    ``RmmMemoryResource(inner=None, device=None)``: ``device`` is a CUDA
    ``Device`` or string (``"cuda:0"`` when ``None``).

    Raises
    ------
    ValueError
        ``device`` is not a CUDA device, or rmm's resource is devmm's own
        (``devmm.integrations.rmm`` installed: a cycle).
    RuntimeUnavailableError
        rmm is not importable (when ``inner`` is not given).

    Examples
    --------
    >>> from devmm.mrs.cuda import RmmMemoryResource
    >>> RmmMemoryResource(device="rocm:0")
    Traceback (most recent call last):
        ...
    ValueError: RmmMemoryResource serves CUDA devices, not rocm:0; HipmmMemoryResource is the one for that platform
    >>> mr = RmmMemoryResource(device="cuda:0")  # needs rmm  # doctest: +SKIP
    >>> mr.deallocate(mr.allocate(1024, None), 1024, None)  # needs a GPU  # doctest: +SKIP
    """

    _platform = "cuda"


class HipmmMemoryResource(_RmmFamilyResource):
    """The same as :class:`RmmMemoryResource` over hipMM, ROCm's port of
    rmm (which is imported as ``rmm`` too), on ROCm devices
    (``"rocm:0"`` when ``device`` is ``None``).

    Raises
    ------
    ValueError
        ``device`` is not a ROCm device, or hipMM's resource is devmm's own.
    RuntimeUnavailableError
        No ``rmm`` module targeting ROCm (hipMM) is importable.

    Examples
    --------
    >>> from devmm.mrs.rocm import HipmmMemoryResource
    >>> HipmmMemoryResource(device="cuda:0")
    Traceback (most recent call last):
        ...
    ValueError: HipmmMemoryResource serves ROCM devices, not cuda:0; RmmMemoryResource is the one for that platform
    >>> mr = HipmmMemoryResource(device="rocm:0")  # needs hipMM and a GPU  # doctest: +SKIP
    """

    _platform = "rocm"
