"""``CudaRuntime`` at the seed's module path (``devmm._runtimes.cuda``)."""

from .base import _PlatformRuntimeType

__all__ = ["CudaRuntime"]


class CudaRuntime(metaclass=_PlatformRuntimeType):
    """NVIDIA's runtime over libcudart: ``CudaRuntime()`` is
    ``devmm.runtime_for("cuda")`` (``RuntimeUnavailableError`` where CUDA
    cannot run) and ``isinstance(rt, CudaRuntime)`` is true of it alone."""

    name = "cuda"
