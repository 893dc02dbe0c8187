"""The conformance suites and the recording resource devmm tests itself
with, for authors of third-party resources and runtimes.

- ``mr_conformance(factory)`` runs the memory-resource contract against
  fresh resources from ``factory`` and raises ``AssertionError`` naming each
  failed check.
- ``dlpack_conformance(device)`` runs the DLPack producer contract for
  tensors on ``device`` without dereferencing device memory.
- ``RecordingMemoryResource`` is an allocator double with deterministic
  fake pointers, a verbatim call log and misuse detection
  (``RecordingMisuseError``, an ``AssertionError``)."""

from collections.abc import Sequence as _Sequence

from .._devmm import RecordedCalls as _RecordedCalls
from .._devmm import RecordingMemoryResource, RecordingMisuseError, dlpack_conformance, mr_conformance

__all__ = ["RecordingMemoryResource", "RecordingMisuseError", "dlpack_conformance", "mr_conformance"]

# A recording's `calls` reads as the seed's list does: a sequence.
_Sequence.register(_RecordedCalls)
