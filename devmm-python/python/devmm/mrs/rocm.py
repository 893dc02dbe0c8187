"""ROCM memory resources.

Importing this module raises :class:`devmm.RuntimeUnavailableError` (an
``ImportError``) when the rocm runtime's driver library is not present."""

from .._devmm import require_runtime as _require_runtime

_require_runtime("rocm")

__all__: list[str] = []
