"""Device runtimes at the seed's module paths: the protocol's names
(``base``), the platform classes (``cpu.CpuRuntime``, ``cuda.CudaRuntime``,
``rocm.HipRuntime``) and discovery with its ``devmm.runtimes`` entry points
(``_discovery``, whose functions this package re-exports for ``devmm``)."""

from ._discovery import GROUP, REQUIRED, available_runtimes, discover, runtime_for, runtime_names

__all__ = ["GROUP", "REQUIRED", "available_runtimes", "discover", "runtime_for", "runtime_names"]
