"""DeviceBuffer: ownership, freeing, copies."""

import gc

import pytest

import devmm
import devmm.testing
from devmm.mrs.cpu import BytearrayMemoryResource


def test_buffer_fields(stats: devmm.StatisticsAdaptor, stream: devmm.Stream) -> None:
    buf = devmm.DeviceBuffer(64, mr=stats, stream=stream)
    assert (buf.size, buf.nbytes, buf.closed, buf.live_exports) == (64, 64, False, 0)
    assert buf.ptr % 64 == 0
    assert buf.mr is stats and buf.stream == stream
    assert buf.device == devmm.Device.from_string("cpu")
    assert stats.current_bytes == 64
    assert repr(buf).startswith("DeviceBuffer(ptr=0x") and repr(buf).endswith("nbytes=64, device=cpu:0, closed=False)")
    buf.free()
    buf.free(stream)
    assert buf.closed and stats.current_bytes == 0
    assert stats.deallocations == 1


def test_context_manager_frees(stats: devmm.StatisticsAdaptor) -> None:
    with devmm.DeviceBuffer(100, mr=stats) as buf:
        assert stats.current_bytes == 100
    assert buf.closed and stats.current_bytes == 0


def test_dropping_the_last_reference_frees(stats: devmm.StatisticsAdaptor) -> None:
    buf = devmm.DeviceBuffer(100, mr=stats)
    assert stats.current_bytes == 100
    del buf
    gc.collect()
    assert stats.current_bytes == 0


def test_buffers_keep_their_resource_alive() -> None:
    mr = BytearrayMemoryResource()
    buf = devmm.DeviceBuffer(32, mr=devmm.StatisticsAdaptor(mr))
    gc.collect()
    upstream = buf.mr.upstream  # type: ignore[attr-defined]
    assert upstream is mr and mr._debug_live_count() == 1
    buf.free()
    assert mr._debug_live_count() == 0


def test_copies_round_trip_and_check_bounds() -> None:
    buf = devmm.DeviceBuffer(8)
    buf.copy_from_host(b"abcdefgh")
    assert buf.copy_to_host().tobytes() == b"abcdefgh"
    assert buf.copy_to_host(nbytes=3).tobytes() == b"abc"
    with pytest.raises(ValueError, match="does not fit"):
        buf.copy_from_host(b"123456789")
    buf.free()
    with pytest.raises(ValueError, match="closed"):
        buf.copy_to_host()


def test_copy_to_host_checks_the_size_before_allocating() -> None:
    buf = devmm.DeviceBuffer(8)
    # Would abort the process if the bytes were allocated first.
    with pytest.raises(ValueError, match="does not fit"):
        buf.copy_to_host(nbytes=2**62)
    with pytest.raises(ValueError, match="does not fit"):
        buf.copy_to_host(nbytes=9)
    assert buf.copy_to_host(nbytes=0).tobytes() == b""
    buf.free()


def test_copy_from_host_takes_any_bytes_like_object() -> None:
    import array

    import numpy as np

    buf = devmm.DeviceBuffer(8)
    buf.copy_from_host(bytearray(b"12345678"))
    assert buf.copy_to_host().tobytes() == b"12345678"
    buf.copy_from_host(memoryview(b"abcdefgh")[2:6])
    assert buf.copy_to_host().tobytes() == b"cdef5678"
    buf.copy_from_host(np.array([1, 2], dtype=np.int32))
    assert buf.copy_to_host().tobytes() == np.array([1, 2], dtype=np.int32).tobytes()
    buf.copy_from_host(array.array("h", [7]))
    assert buf.copy_to_host(nbytes=2).tobytes() == array.array("h", [7]).tobytes()
    with pytest.raises(TypeError):
        buf.copy_from_host("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        buf.copy_from_host([1, 2, 3])  # type: ignore[arg-type]
    buf.free()


def test_zero_byte_buffers_are_null(stats: devmm.StatisticsAdaptor) -> None:
    buf = devmm.DeviceBuffer(0, mr=stats)
    assert buf.ptr == 0 and buf.size == 0
    buf.free()
    assert buf.closed


def test_default_resource_and_device_arguments() -> None:
    buf = devmm.DeviceBuffer(16, device="cpu", stream=devmm.DEFAULT)
    assert buf.mr is devmm.get_current_memory_resource("cpu")
    buf.free()
    with pytest.raises(TypeError, match="stream sentinel"):
        devmm.DeviceBuffer(16, stream=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        devmm.DeviceBuffer(16, mr=object())  # type: ignore[arg-type]


def test_limits_surface_as_memory_error(stream: devmm.Stream) -> None:
    limited = devmm.LimitingAdaptor(BytearrayMemoryResource(), limit_bytes=10)
    with pytest.raises(MemoryError):
        devmm.DeviceBuffer(11, mr=limited, stream=stream)
    assert limited.used_bytes == 0


def test_copies_refuse_the_recording_double_whose_addresses_are_fake() -> None:
    for mr in (devmm.testing.RecordingMemoryResource(), devmm.StatisticsAdaptor(devmm.testing.RecordingMemoryResource())):
        buf = devmm.DeviceBuffer(8, mr=mr)
        with pytest.raises(ValueError, match="RecordingMemoryResource.* does not declare its pointers dereferenceable"):
            buf.copy_from_host(b"abcdefgh")
        with pytest.raises(ValueError, match="RecordingMemoryResource.* does not declare its pointers dereferenceable"):
            buf.copy_to_host()
        buf.free()


def test_device_and_stream_must_match_the_resource() -> None:
    from devmm.mrs.cpu import MallocMemoryResource

    with pytest.raises(ValueError, match="allocates on cpu:0"):
        devmm.DeviceBuffer(8, device="cuda:0", mr=MallocMemoryResource())
    cpu_stream = devmm.runtime_for(devmm.Device.from_string("cpu")).default_stream(devmm.Device.from_string("cpu"))
    gpu = devmm.testing.RecordingMemoryResource("cuda:0")
    with pytest.raises(ValueError, match="stream device cpu:0 does not match the memory's device cuda:0"):
        devmm.DeviceBuffer(8, mr=gpu, stream=cpu_stream)
    with pytest.raises(ValueError, match="stream device cpu:0 does not match"):
        gpu.allocate(8, cpu_stream)
    with pytest.raises(ValueError, match="stream device cpu:0 does not match"):
        devmm.empty((2,), "float32", mr=gpu, stream=cpu_stream)
    assert gpu.live == {}


def test_buffer_takes_the_seeds_nbytes_and_a_positional_copy_stream(stream: devmm.Stream) -> None:
    buf = devmm.DeviceBuffer(nbytes=8, mr=BytearrayMemoryResource(), stream=stream)
    assert (buf.nbytes, buf.size) == (8, 8)
    assert devmm.DeviceBuffer(size=5).nbytes == 5  # rmm's spelling
    with pytest.raises(TypeError, match="nbytes"):
        devmm.DeviceBuffer(4, size=4)
    buf.copy_from_host(b"abcdefgh", stream)
    assert bytes(buf) == b"abcdefgh"
    assert repr(buf) == f"DeviceBuffer(ptr={buf.ptr:#x}, nbytes=8, device=cpu:0, closed=False)"


def test_entering_a_freed_buffer_is_a_use_after_free() -> None:
    buf = devmm.DeviceBuffer(8)
    buf.free()
    with pytest.raises(ValueError, match="freed"):
        with buf:
            pass


def test_copy_from_host_refuses_a_source_that_is_not_c_contiguous() -> None:
    import numpy as np

    buf = devmm.DeviceBuffer(24)
    with pytest.raises(ValueError, match="C-contiguous"):
        buf.copy_from_host(np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)))
    with pytest.raises(ValueError, match="C-contiguous"):
        buf.copy_from_host(memoryview(b"abcdef")[::2])
    buf.copy_from_host(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert bytes(buf) == np.arange(6, dtype=np.int32).tobytes()


def test_a_buffer_s_stream_is_the_stream_object_it_was_given(stream: devmm.Stream) -> None:
    # The seed's buffer keeps the stream it is given as an attribute.
    from devmm._core.stream import CpuStream

    assert devmm.DeviceBuffer(16, stream=stream).stream is stream
    t = devmm.empty((2,), "float32", stream=stream)
    assert t.buffer.stream is stream and t.to_read_only().buffer.stream is stream
    assert devmm.empty_like(t, stream=stream).buffer.stream is stream
    assert devmm.DeviceBuffer.to_device(b"ab", stream=stream).stream is stream
    mine = CpuStream()
    assert devmm.DeviceBuffer(16, stream=mine).stream is mine
    # A stream made for the buffer is made once; a sentinel is resolved.
    plain = devmm.DeviceBuffer(16)
    assert plain.stream is plain.stream and plain.stream == stream
    named = devmm.DeviceBuffer(16, stream=devmm.DEFAULT)
    assert isinstance(named.stream, devmm.Stream) and named.stream == stream


def test_a_buffer_in_a_reference_cycle_is_collected_and_freed_once() -> None:
    from devmm.testing import RecordingMemoryResource

    recording = RecordingMemoryResource()
    stream = devmm.runtime_for("cpu").default_stream("cpu")
    buffer = devmm.DeviceBuffer(64, mr=recording, stream=stream)
    buffer.cycle = buffer  # a plain attribute, as on the seed's buffer
    buffer.note = "kept"
    assert buffer.note == "kept" and sorted(vars(buffer)) == ["cycle", "note"]
    del buffer
    gc.collect()
    assert [call[0] for call in recording.calls] == ["allocate", "deallocate"]


def test_a_buffers_own_attributes_cannot_be_replaced() -> None:
    buffer = devmm.DeviceBuffer(8)
    for own in ("ptr", "free"):
        with pytest.raises(AttributeError, match=f"attribute '{own}' of 'devmm.DeviceBuffer' objects is not writable"):
            setattr(buffer, own, 0)
        with pytest.raises(AttributeError, match=f"attribute '{own}' of 'devmm.DeviceBuffer' objects is not writable"):
            delattr(buffer, own)
    with pytest.raises(AttributeError, match="object has no attribute 'missing'"):
        buffer.missing
    with pytest.raises(AttributeError, match="object has no attribute 'missing'"):
        del buffer.missing
    assert getattr(buffer, "missing", None) is None and not hasattr(buffer, "missing")
    # The metaclass's names are not the buffer's: set like any other.
    buffer.mro = 3
    buffer.__dict__ = {"note": "replaced"}
    assert vars(buffer) == {"note": "replaced"} and buffer.note == "replaced"
    buffer.free()
