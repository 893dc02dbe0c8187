"""``MemoryResourceConformance``: the memory-resource contract of
``devmm.testing.mr_conformance`` as a pytest mixin, one test per check.

A test class inherits it and implements ``make_mr(*, alignment=None)``
(and ``make_stream()`` for a resource off the CPU); each inherited
``test_*`` method runs the named checks of the core's suite
(``devmm::testing::mr_conformance``) against fresh resources from
``make_mr`` on streams from ``make_stream``, so each part of the contract
passes, fails or is skipped as its own test. A check the resource makes no
cannot check (the byte checks, for a class that sets ``data_access =
False``) is a pytest skip saying why.

The suite reads and writes the memory with the device runtime's copies, so
a Python resource declares its pointers real memory
(``dereferenceable = True``). pytest is a test-time tool, not a dependency
of devmm: this module imports only where pytest is installed, and
``devmm.testing`` does not import it."""

from __future__ import annotations

import pytest

from .._core.stream import CpuStream
from .._devmm import DeviceMemoryResource, Stream, _mr_checks

__all__ = ["MemoryResourceConformance"]


class MemoryResourceConformance:
    """Inherit in a pytest test class and implement ``make_mr`` to run the
    memory-resource contract against a resource, one test per check."""

    #: ``False`` for a resource whose pointers are not memory (a
    #: ``RecordingMemoryResource``): the byte checks are then skipped and
    #: aliasing is checked on the address ranges.
    data_access: bool = True

    def make_mr(self, *, alignment: int | None = None) -> DeviceMemoryResource:
        """A fresh resource under test; ``alignment=None`` means its default
        alignment, an integer one it must deliver."""
        raise NotImplementedError("a MemoryResourceConformance subclass implements make_mr(*, alignment=None)")

    def make_stream(self) -> Stream:
        """The stream the checks allocate on: the CPU's by default."""
        return CpuStream()

    def _run(self, *checks: str) -> None:
        # The rule is the core's: this only selects its checks by name.
        skipped = _mr_checks(
            self.make_mr, list(checks), stream_factory=self.make_stream, data_access=self.data_access
        )
        # A check that cannot run on this resource (its pointers are not
        # memory the host may touch: `data_access = False`) is a skip that
        # carries the core's reason, never a pass (upstream's mixin takes
        # host memory only). devmm's own suite asserts the skip and its reason
        # (test_mr_conformance_mixin.py), so no CI run shows one.
        if len(skipped) == len(checks):
            pytest.skip("; ".join(skipped))

    def test_write_then_read_is_byte_exact(self) -> None:
        self._run("write_read_exact")

    def test_live_allocations_do_not_alias(self) -> None:
        self._run("no_aliasing")

    def test_guaranteed_alignment_is_honest(self) -> None:
        self._run("alignment_promise", "alignment_honesty")

    def test_requested_alignment_is_delivered(self) -> None:
        # make_mr(alignment=...) for each power of two from 1 to 4096 but 2048.
        self._run("requested_alignment")

    def test_bookkeeping_is_empty_after_alloc_free_pairs(self) -> None:
        self._run("live_count")

    def test_double_free_raises(self) -> None:
        # The core checks double, unknown-pointer and wrong-size frees together.
        self._run("misuse_detection")

    def test_freeing_an_unknown_pointer_raises(self) -> None:
        self._run("misuse_detection")

    def test_zero_byte_allocation_round_trips(self) -> None:
        self._run("zero_byte")

    def test_negative_allocation_size_is_rejected(self) -> None:
        # A negative size never reaches a resource through the core (sizes
        # are unsigned), so it is refused where Python passes one: the
        # resource's own allocate. The core's check is that an impossible
        # size is an error, not a pointer.
        with pytest.raises(ValueError):
            self.make_mr().allocate(-1, self.make_stream())
        self._run("failures_are_errors")

    def test_concurrent_use_is_safe(self) -> None:
        self._run("concurrent_use")
