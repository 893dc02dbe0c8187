"""``HipRuntime`` at the seed's module path (``devmm._runtimes.rocm``)."""

from .base import _PlatformRuntimeType

__all__ = ["HipRuntime"]


class HipRuntime(metaclass=_PlatformRuntimeType):
    """AMD's runtime over libamdhip64: ``HipRuntime()`` is
    ``devmm.runtime_for("rocm")`` (``RuntimeUnavailableError`` where ROCm
    cannot run) and ``isinstance(rt, HipRuntime)`` is true of it alone."""

    name = "rocm"
