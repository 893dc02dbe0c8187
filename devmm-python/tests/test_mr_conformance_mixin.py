"""devmm.testing._mr_conformance: the seed's pytest mixin over the core's
memory-resource checks, one test per check."""

import ctypes
from typing import Any

import pytest

import devmm
import devmm.testing
from devmm.mrs.cpu import MallocMemoryResource
from devmm.testing._mr_conformance import MemoryResourceConformance

# The seed's test names, each inherited by a subclass.
SEED_TESTS = {
    "test_write_then_read_is_byte_exact",
    "test_live_allocations_do_not_alias",
    "test_guaranteed_alignment_is_honest",
    "test_requested_alignment_is_delivered",
    "test_bookkeeping_is_empty_after_alloc_free_pairs",
    "test_double_free_raises",
    "test_freeing_an_unknown_pointer_raises",
    "test_zero_byte_allocation_round_trips",
    "test_negative_allocation_size_is_rejected",
}


class TestMallocConforms(MemoryResourceConformance):
    def make_mr(self, *, alignment: int | None = None) -> devmm.DeviceMemoryResource:
        return MallocMemoryResource() if alignment is None else MallocMemoryResource(alignment=alignment)


class TestStatisticsOverMallocConforms(MemoryResourceConformance):
    def make_mr(self, *, alignment: int | None = None) -> devmm.DeviceMemoryResource:
        upstream = MallocMemoryResource() if alignment is None else MallocMemoryResource(alignment=alignment)
        return devmm.StatisticsAdaptor(upstream)

    def make_stream(self) -> devmm.Stream:
        self.streams_made = getattr(self, "streams_made", 0) + 1
        return super().make_stream()


class Overlapping(devmm.DeviceMemoryResource):
    """Broken on purpose: each allocation starts 8 bytes after the last,
    whatever its size, so live allocations overlap."""

    dereferenceable = True

    def __init__(self) -> None:
        super().__init__()
        self.block = ctypes.create_string_buffer(1 << 20)
        self.count = 0

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        self.count += 1
        return ctypes.addressof(self.block) + 8 * self.count

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        pass


class OverlappingConformance(MemoryResourceConformance):
    # Not collected (no Test prefix): the test below calls its methods.
    def make_mr(self, *, alignment: int | None = None) -> devmm.DeviceMemoryResource:
        return Overlapping()


def test_the_mixin_has_the_seeds_tests() -> None:
    assert SEED_TESTS <= {name for name in dir(MemoryResourceConformance) if name.startswith("test_")}
    assert SEED_TESTS <= set(dir(TestMallocConforms))


def test_a_broken_resource_fails_the_check_it_breaks_only() -> None:
    suite = OverlappingConformance()
    with pytest.raises(AssertionError, match="no_aliasing"):
        suite.test_live_allocations_do_not_alias()
    # The contracts it keeps still pass.
    suite.test_guaranteed_alignment_is_honest()
    # Its deallocate accepts anything: the misuse test fails too, since the
    # contract is the object's own, not devmm's ledger's.
    with pytest.raises(AssertionError, match="double-free: deallocating twice was accepted"):
        suite.test_double_free_raises()


def test_a_resource_that_takes_a_negative_size_fails() -> None:
    # Overlapping.allocate hands out a pointer for any size, -1 included.
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        OverlappingConformance().test_negative_allocation_size_is_rejected()


class RecordingConformance(MemoryResourceConformance):
    # Fake pointers: the byte checks are skips, the rest run on addresses.
    # Not collected (the skip would show in every run): the tests below
    # call its methods.
    data_access = False

    def make_mr(self, *, alignment: int | None = None) -> devmm.DeviceMemoryResource:
        if alignment is None:
            return devmm.testing.RecordingMemoryResource()
        return devmm.testing.RecordingMemoryResource(guaranteed_alignment=alignment)


def test_a_check_that_cannot_run_is_a_skip() -> None:
    with pytest.raises(pytest.skip.Exception, match="write_read_exact: data access is off"):
        RecordingConformance().test_write_then_read_is_byte_exact()


def test_the_recording_resource_passes_every_check_on_addresses() -> None:
    suite = RecordingConformance()
    skipped = set()
    for name in sorted(n for n in dir(suite) if n.startswith("test_")):
        try:
            getattr(suite, name)()
        except pytest.skip.Exception:
            skipped.add(name)
    assert skipped == {"test_write_then_read_is_byte_exact"}


def test_the_checks_run_on_make_stream() -> None:
    suite = TestStatisticsOverMallocConforms()
    suite.test_zero_byte_allocation_round_trips()
    assert suite.streams_made >= 1


def test_make_mr_is_required() -> None:
    with pytest.raises(AssertionError, match="make_mr"):
        MemoryResourceConformance().test_zero_byte_allocation_round_trips()


def test_an_unknown_check_name_fails() -> None:
    from devmm._devmm import _mr_checks

    with pytest.raises(AssertionError, match="no check is named zero_bytes"):
        _mr_checks(MallocMemoryResource, ["zero_bytes"])
