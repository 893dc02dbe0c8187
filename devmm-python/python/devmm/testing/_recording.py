"""The recording resource at the seed's module path
(``devmm.testing._recording``); the same objects as
``devmm.testing.RecordingMemoryResource`` and ``RecordingMisuseError``."""

from .._devmm import RecordingMemoryResource, RecordingMisuseError

__all__ = ["RecordingMemoryResource", "RecordingMisuseError"]
