"""Managed memory hints over the fake CUDA runtime and HIP libraries:
`devmm.prefetch`, `devmm.advise` and `devmm.PrefetchAdaptor`, read back
through the fake's `*MemRangeGetAttribute` (the fake records the last
prefetch location and the advice per managed allocation)."""

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest

PLATFORMS = {
    "cuda": dict(
        env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", module="cuda", prefix="cuda",
        device="cuda", managed_device="cuda_managed", managed_mr="CudaManagedMemoryResource",
        device_mr="CudaRuntimeMemoryResource",
    ),
    "rocm": dict(
        env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", module="rocm", prefix="hip",
        device="rocm", managed_device="rocm", managed_mr="HipManagedMemoryResource",
        device_mr="HipRuntimeMemoryResource",
    ),
}

SCRIPT = textwrap.dedent(
    """
    import ctypes, sys
    import devmm
    import devmm.mrs.{module} as mrs

    fake = ctypes.CDLL(sys.argv[1])
    get = fake.{prefix}MemRangeGetAttribute
    get.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    READ_MOSTLY, PREFERRED, ACCESSED_BY, LAST_PREFETCH = 1, 2, 3, 4

    def attribute(buf, which, slots=1):
        values = (ctypes.c_int * slots)()
        assert get(values, 4 * slots, which, buf.ptr, buf.nbytes) == 0
        return list(values)

    managed = mrs.{managed_mr}("{managed_device}:0")
    buf = devmm.DeviceBuffer(4096, mr=devmm.StatisticsAdaptor(managed))
    devmm.prefetch(buf, "cpu")
    assert attribute(buf, LAST_PREFETCH) == [-1]
    devmm.prefetch(buf, devmm.Device.from_string("{device}:1"), stream=devmm.DEFAULT)
    assert attribute(buf, LAST_PREFETCH) == [1]

    devmm.advise(buf, devmm.Advice.SET_READ_MOSTLY, "{device}:0")
    devmm.advise(buf, "set_preferred_location", "cpu")
    devmm.advise(buf, 5, "{device}:1")  # set_accessed_by, by its code
    assert attribute(buf, READ_MOSTLY) == [1]
    assert attribute(buf, PREFERRED) == [-1]
    assert attribute(buf, ACCESSED_BY, 2) == [1, -2]
    devmm.advise(buf, "unset_read_mostly", "{device}:0")  # by name
    assert attribute(buf, READ_MOSTLY) == [0]

    for bad in ["read_fast", 0, 7]:
        try:
            devmm.advise(buf, bad, "cpu")
        except ValueError as e:
            assert "unknown memory advice" in str(e) and "set_read_mostly" in str(e), e
        else:
            raise AssertionError(f"advice {{bad!r}} was accepted")
    try:
        devmm.advise(buf, 1.5, "cpu")
    except TypeError:
        pass
    else:
        raise AssertionError("a float advice was accepted")
    try:
        devmm.prefetch(buf, "{device}:7")
    except RuntimeError as e:
        assert "{prefix}MemPrefetchAsync" in str(e) and "InvalidDevice" in str(e), e
    else:
        raise AssertionError("an absent device was accepted")
    buf.free()

    device_memory = devmm.DeviceBuffer(256, mr=mrs.{device_mr}())
    for call in (lambda: devmm.prefetch(device_memory, "cpu"),
                 lambda: devmm.advise(device_memory, "set_read_mostly", "cpu")):
        try:
            call()
        except ValueError as e:
            assert "needs managed memory" in str(e) and "{device_mr}" in str(e), e
            assert "{managed_mr}" in str(e), e
        else:
            raise AssertionError("device memory was prefetched or advised")
    device_memory.free()

    adaptor = devmm.PrefetchAdaptor(managed)
    assert adaptor.upstream is managed
    assert repr(adaptor).startswith("PrefetchAdaptor(upstream=")
    with devmm.DeviceBuffer(8192, mr=adaptor) as prefetched:
        assert attribute(prefetched, LAST_PREFETCH) == [0]
    try:
        devmm.PrefetchAdaptor(mrs.{device_mr}())
    except ValueError as e:
        assert "{device_mr}" in str(e), e
    else:
        raise AssertionError("a PrefetchAdaptor over device memory was made")
    print("ok")
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_prefetch_advise_and_the_prefetch_adaptor(platform: str, fake_library: Callable[[str], str]) -> None:
    p = PLATFORMS[platform]
    library = fake_library(str(p["env"]))
    env = dict(os.environ, **{str(p["path_var"]): library})
    env.pop("DEVMM_RUNTIME", None)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(**p), library], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_prefetching_host_memory_names_its_resource() -> None:
    import devmm

    buf = devmm.DeviceBuffer(64, mr=devmm.mrs.cpu.MallocMemoryResource())
    with pytest.raises(ValueError, match="prefetching needs managed memory.*MallocMemoryResource"):
        devmm.prefetch(buf, "cpu")
    with pytest.raises(ValueError, match="unknown memory advice 9"):
        devmm.advise(buf, 9, "cpu")
    buf.free()


def test_advice_names_match_the_enum() -> None:
    import devmm

    assert [a.value for a in devmm.Advice] == list(range(1, 7))
    buf = devmm.DeviceBuffer(64, mr=devmm.mrs.cpu.MallocMemoryResource())
    for advice in devmm.Advice:
        # Each name parses (the refusal is about the memory, not the advice).
        with pytest.raises(ValueError, match="advising needs managed memory"):
            devmm.advise(buf, advice.name.lower(), "cpu")
        with pytest.raises(ValueError, match="advising needs managed memory"):
            devmm.advise(buf, advice, "cpu")
    buf.free()
