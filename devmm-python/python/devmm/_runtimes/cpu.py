"""``CpuRuntime`` at the seed's module path (``devmm._runtimes.cpu``)."""

from .base import _PlatformRuntimeType

__all__ = ["CpuRuntime"]


class CpuRuntime(metaclass=_PlatformRuntimeType):
    """The host's runtime: ``CpuRuntime()`` is ``devmm.runtime_for("cpu")``
    and ``isinstance(rt, CpuRuntime)`` is true of it alone."""

    name = "cpu"
