"""Concrete memory resources by platform: ``devmm.mrs.cpu``, and
``devmm.mrs.cuda`` and ``devmm.mrs.rocm``, which import on any machine:
making one of their resources where the driver is absent raises
:class:`devmm.RuntimeUnavailableError` (an ``ImportError``)."""

from . import cpu

__all__ = ["cpu"]
