"""devmm.testing: the conformance suites and the recording resource."""

import ctypes
import re
from typing import Any

import pytest

import devmm
import devmm.testing
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource


def test_shipped_resources_conform() -> None:
    devmm.testing.mr_conformance(MallocMemoryResource)
    devmm.testing.mr_conformance(BytearrayMemoryResource)
    devmm.testing.mr_conformance(lambda: devmm.StatisticsAdaptor(MallocMemoryResource()))


class Aliasing(devmm.DeviceMemoryResource):
    """Broken on purpose: every allocation gets the same block."""

    def __init__(self) -> None:
        super().__init__()
        self.block = ctypes.create_string_buffer(1 << 16)

    def allocate(self, nbytes: int, stream: Any) -> int:
        return ctypes.addressof(self.block)

    def deallocate(self, ptr: int, nbytes: int, stream: Any) -> None:
        pass


def test_violations_raise_assertion_errors_naming_the_checks() -> None:
    with pytest.raises(AssertionError, match="FAILED"):
        devmm.testing.mr_conformance(Aliasing)


def test_factory_exceptions_surface() -> None:
    def factory() -> devmm.DeviceMemoryResource:
        raise RuntimeError("no resource today")

    with pytest.raises(AssertionError, match="no resource today"):
        devmm.testing.mr_conformance(factory)


def test_custom_data_access_hooks_are_used() -> None:
    writes: list[int] = []

    def write(ptr: int, data: bytes, stream: devmm.Stream) -> None:
        writes.append(len(data))
        ctypes.memmove(ptr, data, len(data))

    def read(ptr: int, nbytes: int, stream: devmm.Stream) -> bytes:
        return ctypes.string_at(ptr, nbytes)

    devmm.testing.mr_conformance(MallocMemoryResource, write=write, read=read)
    assert writes


def test_mr_conformance_takes_the_seed_signature() -> None:
    # mr_conformance(mr_factory, *, write=, read=, stream_factory=), as the seed names them.
    streams: list[devmm.Device] = []

    def stream_factory(device: devmm.Device) -> devmm.Stream:
        streams.append(device)
        return devmm.runtime_for(device).create_stream(device)

    def write(ptr: int, data: bytes, stream: devmm.Stream) -> None:
        ctypes.memmove(ptr, data, len(data))

    def read(ptr: int, nbytes: int, stream: devmm.Stream) -> bytes:
        return ctypes.string_at(ptr, nbytes)

    devmm.testing.mr_conformance(mr_factory=BytearrayMemoryResource, write=write, read=read, stream_factory=stream_factory)
    assert streams and all(d == devmm.Device.from_string("cpu") for d in streams)
    devmm.testing.mr_conformance(devmm.testing.RecordingMemoryResource, data_access=False)


def test_mr_conformance_takes_upstream_style_hooks() -> None:
    # The seed's hooks: write(ptr, data), read(ptr, nbytes), stream_factory().
    seen: dict[str, int] = {"write": 0, "read": 0, "stream": 0}

    def write(ptr: int, data: bytes) -> None:
        seen["write"] += 1
        ctypes.memmove(ptr, data, len(data))

    def read(ptr: int, nbytes: int) -> bytes:
        seen["read"] += 1
        return ctypes.string_at(ptr, nbytes)

    cpu = devmm.Device.from_string("cpu")

    def stream_factory() -> devmm.Stream:
        seen["stream"] += 1
        return devmm.runtime_for(cpu).default_stream(cpu)

    devmm.testing.mr_conformance(MallocMemoryResource, write=write, read=read, stream_factory=stream_factory)
    assert all(seen.values()), seen


class HostBlocks(devmm.DeviceMemoryResource):
    """A plain Python host resource over ctypes buffers, as a seed user writes
    one: it declares nothing about host access."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: dict[int, Any] = {}

    def allocate(self, nbytes: int, stream: Any) -> int:
        if nbytes < 0:
            raise ValueError("nbytes must be non-negative")
        block = ctypes.create_string_buffer(max(nbytes, 1))
        self.blocks[ctypes.addressof(block)] = block
        return ctypes.addressof(block)

    def deallocate(self, ptr: int, nbytes: int, stream: Any) -> None:
        if self.blocks.pop(ptr, None) is None:
            raise ValueError(f"{ptr:#x} is not a live allocation")

    def _debug_live_count(self) -> int:
        return len(self.blocks)


def test_an_undeclared_python_host_resource_conforms_through_hooks() -> None:
    writes: list[int] = []

    def write(ptr: int, data: bytes) -> None:
        writes.append(len(data))
        ctypes.memmove(ptr, data, len(data))

    def read(ptr: int, nbytes: int) -> bytes:
        return ctypes.string_at(ptr, nbytes)

    # Given hooks, the suite uses them and needs no dereferenceable declaration.
    devmm.testing.mr_conformance(HostBlocks, write=write, read=read)
    assert writes


class FreesAnything(HostBlocks):
    """Accepts a double free and a pointer it never handed out."""

    def deallocate(self, ptr: int, nbytes: int, stream: Any) -> None:
        self.blocks.pop(ptr, None)


class RefusesWithKeyError(HostBlocks):
    """Refuses misuse, but not with the seed's ValueError."""

    def deallocate(self, ptr: int, nbytes: int, stream: Any) -> None:
        if self.blocks.pop(ptr, None) is None:
            raise KeyError(ptr)


class MissesDoubleFree(HostBlocks):
    """Refuses a pointer it never handed out, but takes a second free of one
    it did (it remembers the freed ones and ignores them)."""

    def __init__(self) -> None:
        super().__init__()
        self.freed: set[int] = set()

    def deallocate(self, ptr: int, nbytes: int, stream: Any) -> None:
        if ptr in self.freed:
            return
        super().deallocate(ptr, nbytes, stream)
        self.freed.add(ptr)


class MiscountsLiveBlocks(HostBlocks):
    def _debug_live_count(self) -> int:
        return 0


class CountsNothing(HostBlocks):
    _debug_live_count = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        (FreesAnything, "FAILED misuse_detection: foreign-free: deallocating a pointer never allocated was accepted"),
        (FreesAnything, "double-free: deallocating twice was accepted"),
        (MissesDoubleFree, "FAILED misuse_detection: double-free: deallocating twice was accepted"),
        (RefusesWithKeyError, "FAILED misuse_detection: foreign-free: deallocating a pointer never allocated returned"),
        (MiscountsLiveBlocks, "FAILED live_count: live_count"),
        (CountsNothing, r"FAILED live_count: required, but the resource does not track live allocations \(live_count\(\); Python: _debug_live_count\(\)\)"),
    ],
    ids=lambda v: getattr(v, "__name__", "says"),
)
def test_a_python_resource_is_checked_by_its_own_methods(broken: type[HostBlocks], says: str) -> None:
    # As the seed's suite: the contract is the object's, so devmm's ledger
    # in front of it (what keeps devmm's own calls safe) does not answer for
    # it. Misuse is its own ValueError; the count its own _debug_live_count().
    def write(ptr: int, data: bytes) -> None:
        ctypes.memmove(ptr, data, len(data))

    with pytest.raises(AssertionError, match=says):
        devmm.testing.mr_conformance(broken, write=write, read=ctypes.string_at)
    stream = devmm.runtime_for("cpu").default_stream("cpu")
    from devmm.testing import _conformance

    check = _conformance.check_bookkeeping if "live_count" in says else _conformance.check_double_free
    with pytest.raises(AssertionError, match=says):
        check(broken(), stream)


def test_mr_conformance_checks_negative_sizes_through_the_resources_allocate() -> None:
    # The core's sizes are unsigned: the binding adds the seed's check, and
    # asks it on a stream from the suite's stream_factory.
    from devmm._core.stream import CpuStream

    made: list[devmm.Stream] = []
    negative_on: list[Any] = []

    class TakesNegativeSizes(HostBlocks):
        """Takes a negative size as zero bytes instead of refusing it."""

        def allocate(self, nbytes: int, stream: Any) -> int:
            if nbytes < 0:
                negative_on.append(stream)
            return super().allocate(max(nbytes, 0), stream)

    def stream_factory(device: devmm.Device) -> devmm.Stream:
        made.append(CpuStream())
        return made[-1]

    def write(ptr: int, data: bytes) -> None:
        ctypes.memmove(ptr, data, len(data))

    with pytest.raises(AssertionError) as failed:
        devmm.testing.mr_conformance(TakesNegativeSizes, write=write, read=ctypes.string_at, stream_factory=stream_factory)
    message = str(failed.value)
    assert "; 1 failed;" in message, message
    assert "FAILED negative_size: a negative allocation size must raise ValueError, but nothing was raised" in message
    assert len(negative_on) == 1 and negative_on[0] is made[0]


class RefusesNegativeSizesWrongly(HostBlocks):
    def allocate(self, nbytes: int, stream: Any) -> int:
        if nbytes < 0:
            raise OverflowError("can't convert negative int to unsigned")
        return super().allocate(nbytes, stream)


def test_a_negative_size_refused_with_another_exception_fails_saying_which() -> None:
    def write(ptr: int, data: bytes) -> None:
        ctypes.memmove(ptr, data, len(data))

    says = "FAILED negative_size: allocate(-1, stream) must raise ValueError, but raised OverflowError: can't convert negative int to unsigned"
    with pytest.raises(AssertionError, match=re.escape(says)):
        devmm.testing.mr_conformance(RefusesNegativeSizesWrongly, write=write, read=ctypes.string_at)


class ZeroIsNull(HostBlocks):
    # Null for zero bytes, as devmm's own resources answer (its deallocate
    # never sees that null: devmm frees it, as in use).
    def allocate(self, nbytes: int, stream: Any) -> int:
        return 0 if nbytes == 0 else super().allocate(nbytes, stream)


def test_a_python_resource_answering_null_for_zero_bytes_conforms() -> None:
    def write(ptr: int, data: bytes) -> None:
        ctypes.memmove(ptr, data, len(data))

    devmm.testing.mr_conformance(ZeroIsNull, write=write, read=ctypes.string_at)


class RaisingCount(HostBlocks):
    def _debug_live_count(self) -> int:
        raise RuntimeError("the count is broken")


class CountsBytes(HostBlocks):
    def _debug_live_count(self) -> str:  # type: ignore[override]
        return "two"


def test_a_broken_count_hook_fails_saying_what_it_did() -> None:
    # Not "does not track": the hook's own exception, or what it answered.
    with pytest.raises(AssertionError, match="the factory failed: .*the count is broken"):
        devmm.testing.mr_conformance(RaisingCount, data_access=False)
    with pytest.raises(AssertionError, match=r"_debug_live_count\(\) must return an int .*got 'two'"):
        devmm.testing.mr_conformance(CountsBytes, data_access=False)


class RecordingSubclass(devmm.testing.RecordingMemoryResource):
    # Forwards to the recording base, whose misuse is a RecordingMisuseError.
    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        super().deallocate(ptr, nbytes, stream)


def test_a_subclass_refusing_through_its_recording_base_conforms() -> None:
    devmm.testing.mr_conformance(RecordingSubclass, data_access=False)


def test_recording_resource_logs_calls(stream: devmm.Stream) -> None:
    rec = devmm.testing.RecordingMemoryResource()
    buf = devmm.DeviceBuffer(64, mr=rec, stream=stream)
    assert rec.live == {256: 64}
    buf.free()
    assert rec.live == {}
    # The seed's log format: (name, ptr, nbytes, stream), the stream object passed.
    assert rec.calls == [("allocate", 256, 64, stream), ("deallocate", 256, 64, stream)]
    assert isinstance(rec.calls[0][3], devmm.Stream)
    with pytest.raises(devmm.testing.RecordingMisuseError, match="double-free"):
        rec.deallocate(256, 64, stream)
    # Refused calls are logged too: the log is what the code asked for.
    assert rec.calls[-1] == ("deallocate", 256, 64, stream)


def test_a_python_stream_comes_back_as_the_object_passed() -> None:
    # A stream written in Python (CpuStream, the mixin's default) reaches
    # the recording's log, a Python resource's methods and the buffer as
    # the caller's very object, as the seed's verbatim log keeps it.
    from devmm._core.stream import CpuStream

    stream, seen = CpuStream(), []

    class Sees(HostBlocks):
        def allocate(self, nbytes: int, stream: Any) -> int:
            seen.append(stream)
            return super().allocate(nbytes, stream)

    rec = devmm.testing.RecordingMemoryResource()
    ptr = rec.allocate(64, stream)
    assert rec.calls == [("allocate", ptr, 64, stream)] and rec.calls[0][3] is stream
    buf = devmm.DeviceBuffer(16, mr=Sees(), stream=stream)
    assert seen == [stream] and seen[0] is stream
    buf.free()
    devmm.DeviceBuffer(16, mr=rec, stream=stream).free()
    assert [call[3] is stream for call in rec.calls] == [True, True, True]



def test_recording_call_log_is_live_and_clears(stream: devmm.Stream) -> None:
    rec = devmm.testing.RecordingMemoryResource()
    calls = rec.calls
    ptr = rec.allocate(64, stream)
    # A view, as the seed's list attribute: it sees calls made after it was read.
    assert len(calls) == 1 and calls[0] == ("allocate", ptr, 64, stream)
    assert list(calls) == calls[:] == [("allocate", ptr, 64, stream)]
    assert ("allocate", ptr, 64, stream) in calls
    calls.clear()
    assert rec.calls == [] and len(rec.calls) == 0
    # Clearing forgets the log, not the allocation.
    assert rec.live == {ptr: 64}
    rec.deallocate(ptr, 64, stream)
    assert rec.calls == [("deallocate", ptr, 64, stream)]
    assert repr(rec.calls) == repr([("deallocate", ptr, 64, stream)])
    with pytest.raises(IndexError):
        rec.calls[1]

def test_recording_misuse_is_an_assertion_error(stream: devmm.Stream) -> None:
    rec = devmm.testing.RecordingMemoryResource()
    assert issubclass(devmm.testing.RecordingMisuseError, AssertionError)
    ptr = rec.allocate(32, stream)
    with pytest.raises(devmm.testing.RecordingMisuseError, match="allocated with 32"):
        rec.deallocate(ptr, 16, stream)
    with pytest.raises(devmm.testing.RecordingMisuseError, match="never allocated|unknown"):
        rec.deallocate(ptr + 4096, 32, stream)
    rec.deallocate(ptr, 32, stream)
    assert rec.live == {}


def test_recording_misuse_through_a_buffer_or_an_adaptor_is_a_recording_misuse_error(
    stream: devmm.Stream,
) -> None:
    # The seed's buffer frees through the resource's deallocate, so the
    # recording double's own error reaches the caller, whoever called it.
    rec = devmm.testing.RecordingMemoryResource()
    buf = devmm.DeviceBuffer(64, mr=rec, stream=stream)
    rec.deallocate(buf.ptr, 64, stream)
    with pytest.raises(devmm.testing.RecordingMisuseError, match="double-free"):
        buf.free()
    t = devmm.empty((8,), "uint8", layout=devmm.RowMajor(), mr=rec)
    rec.deallocate(t.buffer.ptr, 8, stream)
    with pytest.raises(devmm.testing.RecordingMisuseError, match="double-free"):
        t.buffer.free(stream)
    stats = devmm.StatisticsAdaptor(rec)
    with pytest.raises(devmm.testing.RecordingMisuseError, match="foreign-free"):
        stats.deallocate(0x10, 8, stream)
    # Other resources' misuse stays a ValueError.
    malloc = MallocMemoryResource()
    buf = devmm.DeviceBuffer(64, mr=malloc, stream=stream)
    malloc.deallocate(buf.ptr, 64, stream)
    with pytest.raises(ValueError, match="double-free") as raised:
        buf.free()
    assert not isinstance(raised.value, devmm.testing.RecordingMisuseError)


def test_recording_resource_alignment_stream_ordering_and_device() -> None:
    rec = devmm.testing.RecordingMemoryResource("cuda:0", guaranteed_alignment=1024)
    assert rec.device == devmm.Device.from_string("cuda:0")
    assert rec.guaranteed_alignment() == 1024
    assert rec.stream_ordered  # the seed's default
    assert not devmm.testing.RecordingMemoryResource(stream_ordered=False).stream_ordered
    with pytest.raises(ValueError, match="power of two"):
        devmm.testing.RecordingMemoryResource(guaranteed_alignment=48)


@pytest.mark.parametrize(("alignment", "expected"), [(1, [1, 4, 7]), (64, [64, 128, 192]), (256, [256, 512, 768])])
def test_recording_pointers_start_at_the_alignment(stream: devmm.Stream, alignment: int, expected: list[int]) -> None:
    # The seed's cursor: the first fake address is the alignment, each next
    # one the end of the last rounded up to it.
    rec = devmm.testing.RecordingMemoryResource(guaranteed_alignment=alignment)
    assert [rec.allocate(3, stream) for _ in expected] == expected


def test_negative_and_oversized_sizes_are_value_errors_naming_nbytes(stream: devmm.Stream) -> None:
    from devmm.mrs.cpu import MallocMemoryResource

    for mr in (devmm.testing.RecordingMemoryResource(), MallocMemoryResource()):
        for bad in (-1, 2**64):
            with pytest.raises(ValueError, match="nbytes must be a non-negative integer from 0"):
                mr.allocate(bad, stream)
            with pytest.raises(ValueError, match="nbytes must be a non-negative integer from 0"):
                mr.deallocate(256, bad, stream)


def test_recording_misuse_names_the_seeds_kind(stream: devmm.Stream) -> None:
    # The seed's words for the three misuses: double-free, foreign-free, size-mismatch.
    rec = devmm.testing.RecordingMemoryResource()
    ptr = rec.allocate(32, stream)
    with pytest.raises(devmm.testing.RecordingMisuseError, match="size-mismatch"):
        rec.deallocate(ptr, 16, stream)
    with pytest.raises(devmm.testing.RecordingMisuseError, match="foreign-free"):
        rec.deallocate(ptr + 4096, 32, stream)
    rec.deallocate(ptr, 32, stream)
    with pytest.raises(devmm.testing.RecordingMisuseError, match="double-free"):
        rec.deallocate(ptr, 32, stream)


def test_mr_conformance_refuses_to_touch_memory_that_is_not_there() -> None:
    # Fake pointers are never dereferenced (a crash before): the byte checks fail, named,
    # and say how to run the rest.
    with pytest.raises(AssertionError, match="write_read_exact.*dereferenceable.*data_access=False"):
        devmm.testing.mr_conformance(devmm.testing.RecordingMemoryResource)


def test_mr_conformance_asks_a_factory_taking_alignment_for_every_alignment() -> None:
    # As the seed: a factory accepting `alignment=` is swept over 1..4096.
    asked: list[int] = []

    def factory(*, alignment: int = 64) -> devmm.DeviceMemoryResource:
        asked.append(alignment)
        return MallocMemoryResource(alignment=alignment)

    devmm.testing.mr_conformance(factory)
    assert {1, 2, 256, 4096} <= set(asked)

    def deaf(*, alignment: int = 64) -> devmm.DeviceMemoryResource:
        return MallocMemoryResource(alignment=8)

    with pytest.raises(AssertionError, match="requested_alignment: alignment [0-9]+ was requested"):
        devmm.testing.mr_conformance(deaf)
    devmm.testing.mr_conformance(MallocMemoryResource)  # the class takes alignment= too


def test_recording_resource_repr_is_the_seeds() -> None:
    assert repr(devmm.testing.RecordingMemoryResource("cuda:1")) == "RecordingMemoryResource(device=cuda:1)"

    class Mine(devmm.testing.RecordingMemoryResource):
        pass

    assert repr(Mine()) == "Mine(device=cpu:0)"


def test_a_recordings_calls_read_as_a_sequence() -> None:
    import collections.abc

    recording = devmm.testing.RecordingMemoryResource()
    stream = devmm.runtime_for("cpu").default_stream("cpu")
    ptr = recording.allocate(64, stream)
    recording.deallocate(ptr, 64, stream)
    calls = recording.calls
    assert isinstance(calls, collections.abc.Sequence)
    first, second = ("allocate", ptr, 64, stream), ("deallocate", ptr, 64, stream)
    assert calls.copy() == [first, second] and type(calls.copy()) is list
    assert list(reversed(calls)) == [second, first]
    assert (calls.count(first), calls.index(second), calls[-1]) == (1, 1, second)
    with pytest.raises(ValueError):
        calls.index(("free", ptr, 64, stream))
