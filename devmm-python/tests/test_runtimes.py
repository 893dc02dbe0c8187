"""Runtimes, streams and their sentinels."""

import ctypes
import pathlib
import subprocess

import pytest

import devmm


def test_sentinels_are_distinct_objects() -> None:
    sentinels = [devmm.DEFAULT, devmm.LEGACY_DEFAULT, devmm.PER_THREAD_DEFAULT]
    assert len({id(s) for s in sentinels}) == 3
    assert len(set(sentinels)) == 3
    assert repr(devmm.PER_THREAD_DEFAULT) == "devmm.PER_THREAD_DEFAULT"


def test_cpu_runtime_streams(cpu: devmm.Device) -> None:
    rt = devmm.runtime_for(cpu)
    assert rt.name == "cpu"
    assert rt.devices() == [cpu]
    assert rt.device_count() == 1
    assert rt.device_types == frozenset({devmm.DeviceType.CPU})
    free, total = rt.memory_info(cpu)
    assert 0 < free <= total
    for sentinel in (devmm.DEFAULT, devmm.LEGACY_DEFAULT, devmm.PER_THREAD_DEFAULT):
        s = rt.stream(cpu, sentinel)
        assert s.handle == 0 and s.device == cpu
    s = rt.default_stream(cpu)
    assert s == rt.create_stream(cpu) == rt.wrap_stream(cpu, 0)
    s.synchronize()
    s.wait(rt.default_stream(cpu))
    s.wait_raw(0)


def test_a_device_string_names_its_device_s_runtime(cpu: devmm.Device) -> None:
    assert devmm.runtime_for("cpu:0") is devmm.runtime_for(cpu)
    try:
        rocm = devmm.runtime_for("rocm:1")
    except devmm.RuntimeUnavailableError as e:
        assert 'runtime "rocm" is unavailable' in str(e)  # not "no runtime named rocm:1"
    else:
        assert rocm is devmm.runtime_for(devmm.DeviceType.ROCM)


def test_runtime_queries_return_tuples() -> None:
    names, runtimes = devmm.runtime_names(), devmm.available_runtimes()
    assert isinstance(names, tuple) and isinstance(runtimes, tuple)
    assert names[0] == "cpu" and runtimes[0] is devmm.runtime_for("cpu")


def test_runtimes_take_weak_references() -> None:
    # As the seed's plain Python runtime objects do.
    import weakref

    runtime = devmm.runtime_for("cpu")
    assert weakref.ref(runtime)() is runtime


def test_the_seed_runtime_protocol_on_the_cpu(cpu: devmm.Device) -> None:
    from devmm.mrs.cpu import MallocMemoryResource

    rt = devmm.runtime_for(cpu)
    assert rt.device_count(devmm.DeviceType.CPU) == 1
    assert rt.device_count(devmm.DeviceType.CUDA) == 0
    mr = rt.default_memory_resource(cpu)
    assert isinstance(mr, MallocMemoryResource) and mr.device == cpu
    assert rt.default_memory_resource(cpu) is not mr  # a new one each call
    stream = rt.default_stream(cpu)
    assert rt.make_stream_wait(0, stream) is None
    with rt.activate_device(cpu) as active:
        assert active is None
    with pytest.raises(ValueError, match="only cpu:0"):
        with rt.activate_device(devmm.Device.from_string("cuda:0")):
            pass


def test_cpu_make_stream_wait_ignores_the_consumer_handle(cpu: devmm.Device) -> None:
    # As the seed's CPU runtime: host work is done when a call returns, so
    # no consumer stream has anything to wait for, whatever its handle.
    rt = devmm.runtime_for(cpu)
    producer = rt.default_stream(cpu)
    for handle in (0, 1, 2, 7, 2**63):
        assert rt.make_stream_wait(handle, producer) is None
    with pytest.raises(ValueError, match="consumer_handle"):
        rt.make_stream_wait(-1, producer)
    with pytest.raises(TypeError, match="producer"):
        rt.make_stream_wait(0, "stream")


def test_copy_kind_is_the_seed_s_int_enum_where_the_seed_keeps_it() -> None:
    import enum

    from devmm._runtimes.base import CopyKind, DeviceRuntime, RuntimeUnavailableError

    assert devmm.CopyKind is CopyKind and issubclass(CopyKind, enum.IntEnum)
    assert DeviceRuntime is devmm.DeviceRuntime and RuntimeUnavailableError is devmm.RuntimeUnavailableError
    # The cudaMemcpyKind / hipMemcpyKind codes.
    assert [(k.name, int(k)) for k in CopyKind] == [
        ("HOST_TO_HOST", 0), ("HOST_TO_DEVICE", 1), ("DEVICE_TO_HOST", 2), ("DEVICE_TO_DEVICE", 3), ("DEFAULT", 4),
    ]


def _host_bytes(data: bytes) -> tuple[ctypes.Array[ctypes.c_char], int]:
    buf = ctypes.create_string_buffer(data, len(data))
    return buf, ctypes.addressof(buf)


def test_cpu_memcpy_copies_host_to_host_as_memmove(cpu: devmm.Device, stream: devmm.Stream) -> None:
    rt = devmm.runtime_for(cpu)
    (src, src_ptr), (dst, dst_ptr) = _host_bytes(b"devmm!"), _host_bytes(bytes(6))
    assert rt.memcpy(dst_ptr, src_ptr, 6, devmm.CopyKind.HOST_TO_HOST, stream) is None
    assert dst.raw == b"devmm!"
    # Overlapping ranges copy as memmove does; the kind may be its int code.
    rt.memcpy(dst_ptr + 1, dst_ptr, 5, 0, stream)
    assert dst.raw == b"ddevmm"
    # Zero bytes touch nothing, null addresses included.
    rt.memcpy(0, 0, 0, devmm.CopyKind.HOST_TO_HOST, stream)
    # A buffer's memory is host memory on the cpu.
    with devmm.DeviceBuffer(6, stream=stream) as buf:
        rt.memcpy(buf.ptr, src_ptr, 6, devmm.CopyKind.HOST_TO_HOST, stream)
        assert buf.copy_to_host(nbytes=6).tobytes() == b"devmm!"


@pytest.mark.parametrize("kind", [k for k in devmm.CopyKind if k is not devmm.CopyKind.HOST_TO_HOST])
def test_cpu_memcpy_copies_host_to_host_only(cpu: devmm.Device, stream: devmm.Stream, kind: devmm.CopyKind) -> None:
    rt = devmm.runtime_for(cpu)
    (src, src_ptr), (dst, dst_ptr) = _host_bytes(b"devmm!"), _host_bytes(bytes(6))
    # The seed's CPU runtime refuses every other kind, DEFAULT included.
    with pytest.raises(ValueError, match=f"host to host only, not {kind.name}"):
        rt.memcpy(dst_ptr, src_ptr, 6, kind, stream)
    assert dst.raw == bytes(6)


def test_memcpy_refuses_bad_arguments_before_touching_memory(cpu: devmm.Device, stream: devmm.Stream) -> None:
    rt = devmm.runtime_for(cpu)
    (src, src_ptr), (dst, dst_ptr) = _host_bytes(b"devmm!"), _host_bytes(bytes(6))
    h2h = devmm.CopyKind.HOST_TO_HOST
    with pytest.raises(ValueError, match="nbytes must be a non-negative integer from 0"):
        rt.memcpy(dst_ptr, src_ptr, -1, h2h, stream)
    with pytest.raises(ValueError, match="dst must be a non-negative integer from 0"):
        rt.memcpy(-8, src_ptr, 6, h2h, stream)
    with pytest.raises(ValueError, match=r"kind must be a copy kind, 0 \(HOST_TO_HOST\) to 4 \(DEFAULT\), not 5"):
        rt.memcpy(dst_ptr, src_ptr, 6, 5, stream)
    with pytest.raises(TypeError):
        rt.memcpy(dst_ptr, src_ptr, 6, "HOST_TO_HOST", stream)
    with pytest.raises(TypeError, match="stream"):
        rt.memcpy(dst_ptr, src_ptr, 6, h2h, None)
    with pytest.raises(ValueError, match="src null"):
        rt.memcpy(dst_ptr, 0, 6, h2h, stream)
    with pytest.raises(ValueError, match="past the end of the address space"):
        rt.memcpy(2**64 - 4, src_ptr, 6, h2h, stream)
    with pytest.raises(ValueError, match="no allocation is larger than"):
        rt.memcpy(dst_ptr, src_ptr, 2**63, h2h, stream)
    assert dst.raw == bytes(6)


class _CudaStreamProtocol:
    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


def test_wrap_stream_takes_handles_protocol_objects_and_streams(cpu: devmm.Device) -> None:
    rt = devmm.runtime_for(cpu)
    stream = rt.default_stream(cpu)
    assert rt.wrap_stream(cpu, stream) is stream
    assert rt.wrap_stream(cpu, 0) == stream
    # The cpu reads the protocol as the seed's does: its one stream is handle 0.
    assert rt.wrap_stream(cpu, _CudaStreamProtocol(0)) == stream
    with pytest.raises(ValueError, match="single stream"):
        rt.wrap_stream(cpu, _CudaStreamProtocol(7))
    with pytest.raises(TypeError, match="expected an int stream handle, a sentinel, an object with __cuda_stream__, or a devmm.Stream, got str"):
        rt.wrap_stream(cpu, "default")


def test_cpu_streams_do_not_speak_the_cuda_stream_protocol(cpu: devmm.Device) -> None:
    with pytest.raises(AttributeError, match="not a CUDA stream"):
        devmm.runtime_for(cpu).default_stream(cpu).__cuda_stream__()


def test_cpu_wait_raw_is_a_no_op_for_any_handle(cpu: devmm.Device) -> None:
    s = devmm.runtime_for(cpu).default_stream(cpu)
    for handle in (0, 1, 2, 7, 2**63):
        assert s.wait_raw(handle) is None


def test_cpu_streams_refuse_foreign_handles(cpu: devmm.Device) -> None:
    rt = devmm.runtime_for(cpu)
    with pytest.raises(ValueError, match="single stream"):
        rt.wrap_stream(cpu, 5)
    with pytest.raises(ValueError, match="only cpu:0"):
        rt.default_stream(devmm.Device.from_string("cuda:0"))


def test_runtime_lookup_is_by_device_type_or_name(cpu: devmm.Device) -> None:
    rt = devmm.runtime_for("cpu")
    assert devmm.runtime_for(cpu) is rt
    assert devmm.runtime_for(devmm.DeviceType.CPU) is rt
    assert "cpu" in devmm.runtime_names()
    assert devmm.DEVMM_RUNTIME == "DEVMM_RUNTIME"


def test_runtime_for_takes_a_device_type_s_dlpack_code(cpu: devmm.Device) -> None:
    # As the seed's lookup, which compares the value with each runtime's
    # device types (IntEnum members equal their codes).
    assert devmm.runtime_for(1) is devmm.runtime_for(cpu)
    with pytest.raises(ValueError, match="99 is not a valid DeviceType"):
        devmm.runtime_for(99)
    for wrong in (True, 1.5, None):
        with pytest.raises(TypeError, match="a devmm.Device, a devmm.DeviceType, its DLPack code or a name"):
            devmm.runtime_for(wrong)  # type: ignore[arg-type]


def test_activate_device_refuses_a_device_of_another_runtime_when_called(cpu: devmm.Device) -> None:
    # The seed checks the device when activate_device is called, before any
    # `with` block is entered.
    rt = devmm.runtime_for(cpu)
    with pytest.raises(ValueError, match="only cpu:0"):
        rt.activate_device(devmm.Device.from_string("cuda:0"))


def test_wrap_stream_takes_a_sentinel(cpu: devmm.Device) -> None:
    # The seed's GPU runtimes map a sentinel to their own handle; every
    # runtime here does.
    rt = devmm.runtime_for(cpu)
    for sentinel in (devmm.DEFAULT, devmm.LEGACY_DEFAULT, devmm.PER_THREAD_DEFAULT):
        assert rt.wrap_stream(cpu, sentinel) == rt.stream(cpu, sentinel)


def test_missing_runtimes_raise_an_import_error() -> None:
    with pytest.raises(devmm.RuntimeUnavailableError, match="tpu"):
        devmm.runtime_for("tpu")
    assert issubclass(devmm.RuntimeUnavailableError, ImportError)


def test_gpu_resource_modules_import_and_their_resources_say_why_they_cannot_work() -> None:
    # Here (CI, no GPU) ROCm has no library, and CUDA at most torch's
    # libcudart without a driver: importing never fails, making a resource
    # raises the reason. Where a runtime does run, its resources are made.
    import devmm.mrs.cuda
    import devmm.mrs.rocm

    for module, make in (
        (devmm.mrs.cuda, devmm.mrs.cuda.CudaRuntimeMemoryResource),
        (devmm.mrs.rocm, devmm.mrs.rocm.HipRuntimeMemoryResource),
    ):
        name = module.__name__.rsplit(".", 1)[1]
        try:
            devmm.runtime_for(name)
        except devmm.RuntimeUnavailableError as unavailable:
            with pytest.raises(devmm.RuntimeUnavailableError) as raised:
                make()
            assert name in str(raised.value) and str(raised.value) == str(unavailable)
        else:
            assert make().device.type == getattr(devmm.DeviceType, name.upper())


def test_available_runtimes_loads_what_runtime_names_lists_and_can_run() -> None:
    runtimes = devmm.available_runtimes()
    names = devmm.runtime_names()
    assert [rt.name for rt in runtimes] == [n for n in names if n in {rt.name for rt in runtimes}]
    assert all(rt is devmm.runtime_for(rt.name) for rt in runtimes)
    assert devmm.runtime_for("cpu") in runtimes
    # A listed runtime left out is one whose loading says why it cannot run.
    for name in set(names) - {rt.name for rt in runtimes}:
        with pytest.raises(devmm.RuntimeUnavailableError):
            devmm.runtime_for(name)


@pytest.mark.parametrize("value", ["bogus", "CUDA", "cpu,cuda"])
def test_an_unknown_devmm_runtime_fails_the_import(value: str) -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, DEVMM_RUNTIME=value)
    done = subprocess.run([sys.executable, "-c", "import devmm"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "RuntimeUnavailableError" in done.stderr
    assert f"DEVMM_RUNTIME={value!r}".replace("'", '"') in done.stderr
    assert "registered: cpu, cuda, rocm" in done.stderr


def test_devmm_runtime_cpu_imports_and_selects_the_cpu() -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, DEVMM_RUNTIME="cpu")
    script = "import devmm; print(devmm.default_device(), devmm.runtime_names())"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cpu:0 ('cpu',)"


def test_devmm_runtime_set_after_import_is_heard_at_each_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEVMM_RUNTIME", "bogus")
    with pytest.raises(devmm.RuntimeUnavailableError, match='DEVMM_RUNTIME="bogus" names no registered'):
        devmm.runtime_names()
    with pytest.raises(devmm.RuntimeUnavailableError, match="bogus"):
        devmm.available_runtimes()
    with pytest.raises(devmm.RuntimeUnavailableError, match='DEVMM_RUNTIME="bogus" names no registered'):
        devmm.empty((2,), "float32")  # the default device follows what discovery last read
    monkeypatch.setenv("DEVMM_RUNTIME", "cpu")
    assert devmm.runtime_names() == ("cpu",)
    assert devmm.empty((2,), "float32").device == devmm.Device.from_string("cpu")
    monkeypatch.delenv("DEVMM_RUNTIME")
    assert "cpu" in devmm.runtime_names()


def test_devmm_runtime_forces_its_runtime_without_probing() -> None:
    import os
    import subprocess
    import sys

    # As the seed's: the runtime DEVMM_RUNTIME names is listed even where its
    # library is missing (the probe is skipped), and loading it then says why.
    env = dict(os.environ, DEVMM_RUNTIME="rocm", DEVMM_HIP_PATH="/nonexistent/libamdhip64.so")
    script = (
        "import devmm\n"
        "print(devmm.runtime_names(), [rt.name for rt in devmm.available_runtimes()])\n"
        "try:\n    devmm.runtime_for('rocm')\n"
        "except devmm.RuntimeUnavailableError as e:\n    print('nonexistent' in str(e))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["('cpu', 'rocm') ['cpu']", "True"]


class RecordingStream(devmm.Stream):
    """A stream written in Python, as the seed's `Stream(abc.ABC)` allows."""

    def __init__(self, device: devmm.Device) -> None:
        self.device = device
        self.calls: list[object] = []

    @property
    def handle(self) -> int:
        return 0

    def synchronize(self) -> None:
        self.calls.append("synchronize")

    def wait_raw(self, other_handle: int) -> None:
        self.calls.append(("wait_raw", other_handle))


def test_the_stream_base_and_incomplete_subclasses_cannot_be_instantiated() -> None:
    with pytest.raises(TypeError, match="abstract methods handle, synchronize, wait_raw"):
        devmm.Stream()

    class NoWait(devmm.Stream):
        @property
        def handle(self) -> int:
            return 0

        def synchronize(self) -> None:
            pass

    with pytest.raises(TypeError, match="Can't instantiate abstract class NoWait with abstract methods wait_raw"):
        NoWait()


def test_a_python_stream_is_accepted_wherever_a_stream_is(cpu: devmm.Device) -> None:
    import numpy as np

    import devmm.testing

    s = RecordingStream(cpu)
    assert isinstance(s, devmm.Stream) and s.device == cpu
    t = devmm.empty((4,), "float32", stream=s)
    assert t.buffer.stream.handle == 0 and t.buffer.stream.device == cpu
    assert np.from_dlpack(t).shape == (4,)
    assert t.__dlpack__(stream=None) is not None

    recording = devmm.testing.RecordingMemoryResource()
    buf = devmm.DeviceBuffer(16, mr=recording, stream=s)
    assert recording.calls[0][0] == "allocate" and recording.calls[0][3].handle == 0
    # A copy on a default stream (handle 0 is the CPU's) is finished on it
    # before returning: devmm asks the Python stream to synchronize.
    host = devmm.DeviceBuffer(4, stream=s)
    s.calls.clear()
    host.copy_from_host(b"abcd", stream=s)
    assert s.calls == ["synchronize"]
    assert bytes(host.copy_to_host(stream=s)) == b"abcd"
    devmm.copy_host_to_ptr(b"wxyz", host.ptr, stream=s)
    assert bytes(host.copy_to_host()) == b"wxyz"
    # Ordering another stream after it reads its handle; ordering it after
    # another calls its wait_raw with that stream's handle.
    s.calls.clear()
    devmm.runtime_for(cpu).default_stream(cpu).wait(s)
    assert s.calls == []
    s.wait(devmm.runtime_for(cpu).default_stream(cpu))
    assert s.calls == [("wait_raw", 0)]
    assert s.is_default() and not s.owned
    with pytest.raises(AttributeError, match="not a CUDA stream"):
        s.__cuda_stream__()
    buf.free(stream=s)
    assert recording.calls[-1][0] == "deallocate"
    host.free()


def test_a_python_stream_s_exception_reaches_the_caller_unchanged(cpu: devmm.Device) -> None:
    class Failing(RecordingStream):
        def synchronize(self) -> None:
            raise KeyError("the stream is broken")

    s = Failing(cpu)
    buf = devmm.DeviceBuffer(4, stream=s)
    with pytest.raises(KeyError, match="the stream is broken"):
        buf.copy_from_host(b"abcd", stream=s)
    buf.free()


def test_a_python_stream_must_report_a_device_and_a_handle(cpu: devmm.Device) -> None:
    class BadHandle(RecordingStream):
        @property
        def handle(self) -> int:
            return -1

    with pytest.raises(ValueError, match="handle"):
        devmm.empty((1,), "float32", stream=BadHandle(cpu))
    with pytest.raises(TypeError, match="device"):
        RecordingStream(cpu).device = 3  # type: ignore[assignment]
    other = RecordingStream(cpu)
    other.device = devmm.Device.from_string("cuda:0")
    # The device it reports is the one checked against the memory's.
    with pytest.raises(ValueError, match="stream device cuda:0 does not match the memory's device cpu:0"):
        devmm.empty((1,), "float32", device=cpu, stream=other)


def test_a_stream_of_another_device_is_refused_by_the_cores_check(cpu: devmm.Device) -> None:
    # wrap_stream and the allocation paths refuse it with one message, the
    # core's Stream::check_device (issue 32: no second copy in the binding).
    other = RecordingStream(devmm.Device.from_string("cuda:0"))
    said = "stream device cuda:0 does not match the memory's device cpu:0; pass a stream of cpu:0"
    with pytest.raises(ValueError) as wrapped:
        devmm.runtime_for(cpu).wrap_stream(cpu, other)
    with pytest.raises(ValueError) as allocated:
        devmm.empty((1,), "float32", device=cpu, stream=other)
    assert str(wrapped.value) == str(allocated.value) == said


THIRD_PARTY = '''
import devmm
from devmm.mrs.cpu import MallocMemoryResource

LOADS = []


class Runtime:
    """A third-party runtime over the host: the protocol's required part."""

    name = "{name}"
    device_types = (devmm.DeviceType.CPU,)

    def __init__(self):
        LOADS.append(self)

    def device_count(self):
        return 1

    def default_memory_resource(self, device):
        return MallocMemoryResource()

    def default_stream(self, device):
        return devmm.runtime_for("cpu").default_stream(device)
'''


def installed_runtime(tmp_path: pathlib.Path, name: str, value: str, module: str = THIRD_PARTY) -> dict[str, str]:
    """A real installed distribution on the path of a child interpreter: a
    package and its dist-info with a devmm.runtimes entry point."""
    import os

    package = tmp_path / f"{name}_rt"
    package.mkdir()
    (package / "__init__.py").write_text(module.format(name=name))
    info = tmp_path / f"{name}_rt-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-rt\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[devmm.runtimes]\n{name} = {value}\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    env.pop("DEVMM_RUNTIME", None)
    return env


def run_python(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)


def test_an_entry_point_runtime_is_listed_after_devmm_s_loaded_once_and_available(tmp_path: pathlib.Path) -> None:
    env = installed_runtime(tmp_path, "hostly", "hostly_rt:Runtime")
    script = """
import sys
import devmm
names = devmm.runtime_names()
assert names[-1] == "hostly" and names.index("cpu") < names.index("hostly"), names
assert "hostly_rt" not in sys.modules  # listing imports nothing
rt = devmm.runtime_for("hostly")
import hostly_rt
assert type(rt) is hostly_rt.Runtime and rt.name == "hostly"
assert devmm.runtime_for("hostly") is rt and len(hostly_rt.LOADS) == 1
runtimes = devmm.available_runtimes()
assert runtimes[-1] is rt and devmm.runtime_for("cpu") in runtimes
assert devmm.runtime_for(devmm.Device.from_string("cpu")).name == "cpu"  # devices stay devmm's
print(type(rt.default_memory_resource(devmm.Device.from_string("cpu"))).__name__)
"""
    done = run_python(script, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "MallocMemoryResource"


def test_devmm_runtime_may_select_an_entry_point_runtime(tmp_path: pathlib.Path) -> None:
    env = installed_runtime(tmp_path, "hostly", "hostly_rt:Runtime")
    env["DEVMM_RUNTIME"] = "hostly"
    done = run_python("import devmm; print(devmm.runtime_names(), devmm.default_device())", env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "('cpu', 'hostly') cpu:0"
    env["DEVMM_RUNTIME"] = "nosuch"
    done = run_python("import devmm", env)
    assert done.returncode != 0
    assert 'DEVMM_RUNTIME="nosuch" names no registered device runtime (registered: cpu, cuda, rocm, hostly)' in done.stderr


def test_a_broken_entry_point_runtime_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    env = installed_runtime(tmp_path, "broken", "broken_rt:Missing")
    script = """
import devmm
assert "broken" in devmm.runtime_names()
try:
    devmm.runtime_for("broken")
except devmm.RuntimeUnavailableError as err:
    assert "'broken_rt:Missing'" in str(err) and "AttributeError" in str(err), err
else:
    raise AssertionError("loaded")
assert "broken" not in [rt.name for rt in devmm.available_runtimes()]
"""
    done = run_python(script, env)
    assert done.returncode == 0, done.stderr


def test_an_entry_point_runtime_lacking_the_protocol_is_a_type_error(tmp_path: pathlib.Path) -> None:
    env = installed_runtime(tmp_path, "partial", "partial_rt:Runtime", module="class Runtime:\n    name = '{name}'\n")
    script = """
import devmm
try:
    devmm.runtime_for("partial")
except TypeError as err:
    assert "lacks device_types, device_count, default_memory_resource, default_stream" in str(err), err
else:
    raise AssertionError("loaded")
"""
    done = run_python(script, env)
    assert done.returncode == 0, done.stderr


MISREGISTERED = """
class Runtime:
    name = {named!r}
    device_types = {types}
    def device_count(self): return 1
    def default_memory_resource(self, device): raise NotImplementedError
    def default_stream(self, device): raise NotImplementedError
"""


@pytest.mark.parametrize(
    ("named", "types", "said"),
    [
        ("serveless", "()", 'runtime "serveless" registers no device types; list at least its primary one'),
        ("other", "(__import__('devmm').DeviceType.CPU,)", 'the runtime registered as "serveless" is named "other"'),
    ],
)
def test_an_entry_point_runtime_is_checked_by_the_cores_rule(tmp_path: pathlib.Path, named: str, types: str, said: str) -> None:
    # The core's check_runtime_plugin, which register_runtime applies to a
    # Rust registration: the same rule and the same exception (ValueError).
    module = MISREGISTERED.format(named=named, types=types).replace("{", "{{").replace("}", "}}")
    env = installed_runtime(tmp_path, "serveless", "serveless_rt:Runtime", module=module)
    script = f"""
import devmm
try:
    devmm.runtime_for("serveless")
except ValueError as err:
    assert {said!r} in str(err), err
else:
    raise AssertionError("loaded")
"""
    done = run_python(script, env)
    assert done.returncode == 0, done.stderr


def test_an_entry_point_may_not_take_a_built_in_runtime_s_name(tmp_path: pathlib.Path) -> None:
    env = installed_runtime(tmp_path, "cuda", "cuda_rt:Runtime")
    done = run_python("import devmm, sys; assert 'cuda_rt' not in sys.modules", env)
    assert done.returncode == 0, done.stderr
    assert "ignoring the devmm.runtimes entry point 'cuda_rt:Runtime'" in done.stderr
    assert 'a runtime named "cuda" is already registered in devmm' in done.stderr
