"""Runtimes, streams and their sentinels."""

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
    assert rt.device_types == [devmm.DeviceType.CPU]
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


def test_cpu_streams_do_not_speak_the_cuda_stream_protocol(cpu: devmm.Device) -> None:
    with pytest.raises(AttributeError, match="not a CUDA stream"):
        devmm.runtime_for(cpu).default_stream(cpu).__cuda_stream__()


def test_cpu_wait_raw_is_a_no_op_for_any_handle(cpu: devmm.Device) -> None:
    s = devmm.runtime_for(cpu).default_stream(cpu)
    for handle in (0, 1, 2, 7, 2**63):
        assert s.wait_raw(handle) is None


def test_cpu_streams_refuse_foreign_handles(cpu: devmm.Device) -> None:
    rt = devmm.runtime_for(cpu)
    with pytest.raises(ValueError, match="one stream"):
        rt.wrap_stream(cpu, 5)
    with pytest.raises(ValueError, match="only cpu:0"):
        rt.default_stream(devmm.Device.from_string("cuda:0"))


def test_runtime_lookup_is_by_device_type_or_name(cpu: devmm.Device) -> None:
    rt = devmm.runtime_for("cpu")
    assert devmm.runtime_for(cpu) is rt
    assert devmm.runtime_for(devmm.DeviceType.CPU) is rt
    assert "cpu" in devmm.runtime_names()
    assert devmm.DEVMM_RUNTIME == "DEVMM_RUNTIME"


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
    assert done.stdout.strip() == "cpu:0 ['cpu']"
