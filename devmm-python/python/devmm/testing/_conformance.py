"""The conformance suites' entry points at the seed's module path
(``devmm.testing._conformance``); the same functions as
``devmm.testing.mr_conformance`` and ``dlpack_conformance``."""

from .._devmm import dlpack_conformance, mr_conformance

__all__ = ["dlpack_conformance", "mr_conformance"]
