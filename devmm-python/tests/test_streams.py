"""Streams: the sentinels, the Python stream base, stream flags and pools."""

import copy
import enum
import pickle

import pytest

import devmm


def test_stream_flags_are_an_int_enum_as_rmms() -> None:
    # rmm's CudaStreamFlags is an IntEnum: iterable, an int, constructible from its value.
    flags = devmm.StreamFlags
    assert issubclass(flags, enum.IntEnum)
    assert list(flags) == [flags.SYNC_DEFAULT, flags.NON_BLOCKING]
    assert flags(1) is flags.NON_BLOCKING and flags.NON_BLOCKING == 1
    assert pickle.loads(pickle.dumps(flags.NON_BLOCKING)) is flags.NON_BLOCKING
    with pytest.raises(ValueError):
        flags(2)
    # A pool takes the enum or its plain int value, and refuses any other int.
    assert devmm.StreamPool(2, 1).get_pool_size() == 2
    assert devmm.StreamPool(2, flags.SYNC_DEFAULT).get_pool_size() == 2
    with pytest.raises(ValueError, match="flags"):
        devmm.StreamPool(2, 7)


def test_sentinels_are_singletons() -> None:
    for sentinel in (devmm.DEFAULT, devmm.LEGACY_DEFAULT, devmm.PER_THREAD_DEFAULT):
        assert copy.copy(sentinel) is sentinel and copy.deepcopy(sentinel) is sentinel
        assert pickle.loads(pickle.dumps(sentinel)) is sentinel
        assert not isinstance(sentinel, devmm.Stream)
    assert repr(devmm.PER_THREAD_DEFAULT) == "devmm.PER_THREAD_DEFAULT"
    assert devmm.DEFAULT is not devmm.LEGACY_DEFAULT


def test_streams_are_hashable_consistently_with_equality(cpu: devmm.Device) -> None:
    # As the seed's Stream (an abc.ABC): usable as dict keys and in sets.
    runtime = devmm.runtime_for(cpu)
    a, b = runtime.default_stream(cpu), runtime.default_stream(cpu)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1

    class Mine(devmm.Stream):
        @property
        def handle(self) -> int:
            return 0

        def synchronize(self) -> None:
            pass

        def wait_raw(self, other_handle: int) -> None:
            pass

    mine, other = Mine(), Mine()
    assert {mine: 1, other: 2}[mine] == 1 and mine != other


def test_the_seed_s_core_module_paths_name_the_package_s_classes() -> None:
    from devmm._core import buffer, stream, tensor

    assert (tensor.Tensor, tensor.empty, tensor.empty_like) == (devmm.Tensor, devmm.empty, devmm.empty_like)
    assert buffer.DeviceBuffer is devmm.DeviceBuffer
    assert (stream.Stream, stream.StreamSentinel) == (devmm.Stream, devmm.StreamSentinel)
    assert (stream.DEFAULT, stream.LEGACY_DEFAULT, stream.PER_THREAD_DEFAULT) == (
        devmm.DEFAULT, devmm.LEGACY_DEFAULT, devmm.PER_THREAD_DEFAULT)


def test_cpu_stream_is_the_seed_s_constructible_cpu_stream() -> None:
    from devmm._core.stream import CpuStream
    from devmm.mrs.cpu import MallocMemoryResource

    s = CpuStream()
    assert isinstance(s, devmm.Stream) and s.device == devmm.Device("cpu") and s.handle == 0
    assert s.synchronize() is None and s.wait_raw(0) is None
    assert CpuStream(devmm.Device("cpu", 0)).device == devmm.Device("cpu")
    with pytest.raises(ValueError, match="cuda:0"):
        CpuStream(devmm.Device("cuda"))
    back = pickle.loads(pickle.dumps(s))
    assert type(back) is CpuStream and back.device == s.device
    # Accepted wherever a stream is.
    mr = MallocMemoryResource()
    mr.deallocate(mr.allocate(64, s), 64, s)
    buf = devmm.DeviceBuffer(64, mr=mr, stream=s)
    assert buf.stream.handle == 0 and buf.stream.device == s.device
    buf.free(s)
    assert buf.closed
    t = devmm.empty((2,), "float32", stream=s)
    assert memoryview(t).shape == (2,)


def test_a_python_cuda_stream_speaks_the_protocol_without_a_cuda_runtime() -> None:
    # Its repr and __cuda_stream__ read only its device and handle (design
    # §3.2): neither loads the CUDA runtime, which this interpreter lacks.
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import devmm
        from devmm.integrations._support import ForeignHandleStream

        cuda = devmm.Device.from_string("cuda:0")

        class Handed(devmm.Stream):
            def __init__(self):
                self.device = cuda

            @property
            def handle(self):
                return 0x50

            def synchronize(self):
                pass

            def wait_raw(self, other_handle):
                pass

        for stream in (Handed(), ForeignHandleStream(cuda, 0x50)):
            print(repr(stream), stream.__cuda_stream__())
        try:
            devmm.runtime_for(cuda)
        except devmm.RuntimeUnavailableError:
            print("no cuda runtime")
        """
    )
    # A library that is not there: no CUDA runtime, even where one is installed.
    env = {k: v for k, v in os.environ.items() if k != "DEVMM_RUNTIME"}
    env["DEVMM_CUDART_PATH"] = "/nonexistent/libcudart.so"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Handed(device=cuda:0, handle=0x50) (0, 80)",
        "ForeignHandleStream(device=cuda:0, handle=0x50) (0, 80)",
        "no cuda runtime",
    ]


def test_a_resource_is_handed_the_cpu_stream_its_caller_passed() -> None:
    # The seed's CPU runtime has one stream object; adaptors forward
    # (nbytes, stream) exactly, so the resource sees that very object.
    from devmm.testing import RecordingMemoryResource

    runtime = devmm.runtime_for("cpu")
    stream = runtime.default_stream("cpu")
    assert stream is runtime.create_stream("cpu") is runtime.wrap_stream("cpu", 0)
    assert stream is runtime.stream("cpu", devmm.DEFAULT)
    recording = RecordingMemoryResource()
    adapted = devmm.LoggingAdaptor(devmm.StatisticsAdaptor(recording))
    adapted.deallocate(adapted.allocate(16, stream), 16, stream)
    assert all(call[3] is stream for call in recording.calls)
    with devmm.DeviceBuffer(8) as buffer:
        assert buffer.stream is stream
