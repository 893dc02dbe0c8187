"""CUDA memory resources.

Importing this module raises :class:`devmm.RuntimeUnavailableError` (an
``ImportError``) when the cuda runtime's driver library is not present."""

from .._devmm import require_runtime as _require_runtime

_require_runtime("cuda")

__all__: list[str] = []
