"""Concrete memory resources by platform: ``devmm.mrs.cpu`` always;
``devmm.mrs.cuda`` and ``devmm.mrs.rocm`` raise
:class:`devmm.RuntimeUnavailableError` (an ``ImportError``) on import where
their driver is absent."""

from . import cpu

__all__ = ["cpu"]
