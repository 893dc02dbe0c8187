"""Pools of a resource's own (``CudaAsyncMemoryResource``,
``HipAsyncMemoryResource``) and the default pool left alone, against the
repository's fake CUDA runtime and HIP libraries, whose pools keep the
driver's rules (reserve in 2 MiB chunks, release down to the threshold at
synchronization, trim, maximum size). scripts/test-python.sh names the
fakes in DEVMM_TEST_FAKE_CUDART / DEVMM_TEST_FAKE_HIP; a run without them
fails (conftest's ``fake_library``), never skips."""

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest

SCRIPT = textwrap.dedent(
    """
    import ctypes, gc
    import devmm
    import devmm.mrs.{module} as mrs
    from devmm.statistics import PoolStatistics

    fake = ctypes.CDLL({library!r})
    fake.fake_call_count.restype = ctypes.c_uint64
    fake.fake_live_pools.restype = ctypes.c_uint64
    MIB = 1 << 20
    gpu = devmm.Device.from_string("{device}:0")
    rt = devmm.runtime_for(gpu)
    stream = rt.create_stream(gpu)

    # Issue 29, defect 6: the default pool, shared with every library in the
    # process, keeps its settings when devmm allocates from it.
    with devmm.DeviceBuffer(1 << 20, device=gpu, stream=stream):
        pass
    assert fake.fake_call_count(b"{prefix}MemPoolSetAttribute") == 0
    assert fake.fake_call_count(b"{prefix}DeviceGetDefaultMemPool") == 0

    # Issue 30's check: three 64 MiB blocks, the middle one freed.
    mr = mrs.{pool_mr}()
    assert mr.device == gpu and mr.stream_ordered and mr.guaranteed_alignment() == 256
    assert repr(mr) == "{pool_mr}(device={device}:0)", repr(mr)
    blocks = [devmm.DeviceBuffer(64 * MIB, mr=mr, stream=stream) for _ in range(3)]
    blocks[1].free()
    stream.synchronize()
    s = mr.pool_statistics()
    assert isinstance(s, PoolStatistics), s
    assert s.used_bytes == 128 * MIB and s.reserved_bytes >= 192 * MIB, s
    assert s.used_high_bytes == 192 * MIB and s.reserved_high_bytes >= s.reserved_bytes, s
    assert s.fragmentation_bytes == s.reserved_bytes - 128 * MIB, s
    for block in (blocks[0], blocks[2]):
        block.free()
    stream.synchronize()
    s = mr.pool_statistics()
    assert s.used_bytes == 0 and s.reserved_bytes >= 192 * MIB, s
    mr.trim(0)
    assert mr.pool_statistics().reserved_bytes == 0
    mr.reset_pool_high_water()
    s = mr.pool_statistics()
    assert s.used_high_bytes == 0 and s.reserved_high_bytes == s.reserved_bytes, s

    # Behind an adaptor and as the current resource it works as any other,
    # and the pool goes when the last buffer and the resource do.
    stats = devmm.StatisticsAdaptor(mr)
    with devmm.using_memory_resource(stats):
        t = devmm.empty((1024,), "float32", device=gpu, stream=stream)
    assert stats.current_bytes == 4096 and mr.pool_statistics().used_bytes == 4096
    assert fake.fake_live_pools() == 1
    del mr, stats, blocks, block
    gc.collect()
    assert fake.fake_live_pools() == 1, "the tensor keeps its resource"
    t.buffer.free()
    del t
    gc.collect()
    stream.synchronize()
    assert fake.fake_live_pools() == 0

    # Its own settings.
    primed = mrs.{pool_mr}(
        "{device}:0", initial_pool_size=8 * MIB, release_threshold=16 * MIB, max_pool_size=32 * MIB
    )
    assert repr(primed) == (
        "{pool_mr}(device={device}:0, initial_pool_size=8388608, "
        "release_threshold=16777216, max_pool_size=33554432)"
    ), repr(primed)
    rt.default_stream(gpu).synchronize()
    s = primed.pool_statistics()
    assert s.reserved_bytes >= 8 * MIB and s.used_bytes == 0, s
    held = devmm.DeviceBuffer(16 * MIB, mr=primed, stream=stream)
    try:
        devmm.DeviceBuffer(40 * MIB, mr=primed, stream=stream)
    except devmm.OutOfMemoryError as e:
        assert "max_pool_size 33554432" in str(e) and "{pool_mr}" in str(e), e
        # The pool's figures travel with the error, not only in its text.
        assert isinstance(e.pool, PoolStatistics), e.pool
        assert e.pool == primed.pool_statistics(), (e.pool, primed.pool_statistics())
        assert e.pool.used_bytes == 16 * MIB and e.pool.reserved_bytes >= 16 * MIB, e.pool
    else:
        raise AssertionError("past max_pool_size must be out of memory")
    # HIP checks the limit against the reserved high-water mark, which its
    # reset makes 0: a bounded ROCm pool's marks are not reset.
    if "{device}" == "rocm":
        try:
            primed.reset_pool_high_water()
        except ValueError as e:
            assert "max_pool_size" in str(e) and "{pool_mr}" in str(e), e
        else:
            raise AssertionError("a bounded HIP pool's marks must not be reset")
    else:
        primed.reset_pool_high_water()
        s = primed.pool_statistics()
        assert s.used_high_bytes == s.used_bytes == 16 * MIB, s
    held.free()
    ipc = mrs.{pool_mr}(enable_ipc=True, peer_access=["{device}:1"])
    assert "enable_ipc=True" in repr(ipc)
    assert fake.fake_call_count(b"{prefix}MemPoolSetAccess") == 1

    # Bad input: typed errors naming the argument, before any pool is made.
    made = fake.fake_call_count(b"{prefix}MemPoolCreate")
    refusals = [
        (dict(initial_pool_size=-1), "initial_pool_size"),
        (dict(release_threshold=-1), "release_threshold"),
        (dict(max_pool_size=-(1 << 70)), "max_pool_size"),
        (dict(initial_pool_size=8 * MIB, max_pool_size=4 * MIB), "is above max_pool_size"),
        (dict(max_pool_size=0), "max_pool_size=0"),
        (dict(peer_access=["{device}:0"]), "peer_access"),
    ]
    for kwargs, says in refusals:
        try:
            mrs.{pool_mr}(**kwargs)
        except ValueError as e:
            assert says in str(e), (kwargs, e)
        else:
            raise AssertionError(f"{{kwargs}} must be refused")
    assert fake.fake_call_count(b"{prefix}MemPoolCreate") == made
    try:
        primed.trim(-1)
    except ValueError as e:
        assert "keep_bytes" in str(e), e
    else:
        raise AssertionError("a negative keep_bytes must be refused")
    try:
        mrs.{pool_mr}("cpu")
    except ValueError as e:
        assert "{pool_mr}" in str(e), e
    else:
        raise AssertionError("a cpu device must be refused")
    print("ok")
    """
)

PLATFORMS = {
    "cuda": dict(
        env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", module="cuda", device="cuda",
        prefix="cuda", pool_mr="CudaAsyncMemoryResource",
    ),
    "rocm": dict(
        env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", module="rocm", device="rocm",
        prefix="hip", pool_mr="HipAsyncMemoryResource",
    ),
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_own_pools_and_their_figures(platform: str, fake_library: Callable[[str], str]) -> None:
    p = PLATFORMS[platform]
    library = fake_library(p["env"])
    env = dict(os.environ, **{p["path_var"]: library})
    script = SCRIPT.format(library=library, **p)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


INFO_SCRIPT = textwrap.dedent(
    """
    import sys
    import devmm
    import devmm.mrs.{module} as mrs
    from devmm.__main__ import main

    MIB = 1 << 20
    gpu = devmm.Device.from_string("{device}:0")
    stream = devmm.runtime_for(gpu).create_stream(gpu)
    mr = devmm.StatisticsAdaptor(mrs.{pool_mr}())
    devmm.set_current_memory_resource(mr)
    blocks = [devmm.DeviceBuffer(64 * MIB, device=gpu, stream=stream) for _ in range(3)]
    blocks[1].free()
    stream.synchronize()
    sys.argv = ["devmm", "info"] + sys.argv[1:]
    sys.exit(main())
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_devmm_info_shows_the_current_resources_pool(platform: str, fake_library: Callable[[str], str]) -> None:
    import json

    p = PLATFORMS[platform]
    env = dict(os.environ, **{p["path_var"]: fake_library(p["env"])})
    script = INFO_SCRIPT.format(**p)
    run = [sys.executable, "-c", script]
    done = subprocess.run([*run, "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    devices = {d["device"]: d for d in json.loads(done.stdout)["devices"]}
    pool = devices[f"{p['device']}:0"]["pool"]
    assert pool["used_bytes"] == 128 << 20 and pool["reserved_bytes"] >= 192 << 20, pool
    assert pool["fragmentation_bytes"] == pool["reserved_bytes"] - (128 << 20), pool
    assert pool["used_high_bytes"] == 192 << 20, pool
    assert pool["resource"].startswith(f"{p['pool_mr']}(device={p['device']}:0"), pool
    assert "pool" not in devices[f"{p['device']}:1"], "device 1's resource has no pool of its own"
    text = subprocess.run(run, env=env, capture_output=True, text=True, timeout=300)
    assert text.returncode == 0, text.stderr
    pools = text.stdout.split("\nPools\n", 1)[1]
    row = next(line for line in pools.splitlines() if line.startswith(f"{p['device']}:0"))
    assert "128 MiB" in row and p["pool_mr"] in row, pools


PROFILER_SCRIPT = textwrap.dedent(
    """
    import devmm
    import devmm.mrs.{module} as mrs
    from devmm.statistics import PoolStatistics, ProfilerRecords, profiler

    MIB = 1 << 20
    gpu = devmm.Device.from_string("{device}:0")
    stream = devmm.runtime_for(gpu).create_stream(gpu)
    mr = mrs.{pool_mr}()
    records = ProfilerRecords()
    with devmm.using_memory_resource(mr):
        with profiler(records=records, name="three blocks", device=gpu):
            blocks = [devmm.DeviceBuffer(64 * MIB, device=gpu, stream=stream) for _ in range(3)]
            blocks[1].free()
            stream.synchronize()
    # Host memory has no pool: its run adds none.
    with profiler(records=records, name="host", device="cpu"):
        devmm.DeviceBuffer(64, device="cpu")
    # The figures when the run ended, not now.
    for block in (blocks[0], blocks[2]):
        block.free()
    stream.synchronize()
    name = "{pool_mr}(device={device}:0, alignment=256)"
    assert list(records.pools) == [name], records.pools
    s = records.pools[name]
    assert isinstance(s, PoolStatistics), s
    assert s.used_bytes == 128 * MIB and s.used_high_bytes == 192 * MIB, s
    assert s.reserved_bytes >= 192 * MIB and s.fragmentation_bytes == s.reserved_bytes - 128 * MIB, s
    assert mr.pool_statistics().used_bytes == 0
    assert records.add_pool(devmm.StatisticsAdaptor(mr)) and records.pools[name].used_bytes == 0
    assert not records.add_pool(devmm.mrs.cpu.MallocMemoryResource())
    print(records.report(), end="")
    """
)


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_the_profilers_report_shows_each_pools_figures(platform: str, fake_library: Callable[[str], str]) -> None:
    p = PLATFORMS[platform]
    env = dict(os.environ, **{p["path_var"]: fake_library(p["env"])})
    done = subprocess.run(
        [sys.executable, "-c", PROFILER_SCRIPT.format(**p)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    names, pools = done.stdout.split("\nMemory Pools\n============\n\n")
    assert "three blocks" in names and "host" in names, done.stdout
    header, row = pools.splitlines()
    assert header.split() == ["Pool", "reserved", "bytes", "reserved", "high", "used", "bytes", "used", "high", "fragmentation"]
    name = f"{p['pool_mr']}(device={p['device']}:0, alignment=256)"
    assert row.startswith(name + "  "), row
    reserved, reserved_high, used, used_high, fragmentation = map(int, row[len(name):].split())
    # The last figures recorded: after the final add_pool, nothing is used.
    assert used == 0 and used_high == 192 << 20 and fragmentation == reserved, row
    assert reserved >= 192 << 20 and reserved_high >= reserved, row


def test_the_observability_pages_pool_report_is_what_its_program_prints(fake_library: Callable[[str], str]) -> None:
    import pathlib
    import re

    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    section = page.split("\n## A pool's figures\n", 1)[1]
    found = re.search(r"```python\n(.*?)```\n\n```text\n(.*?)```", section, re.DOTALL)
    assert found, "docs/observability.md lost its profiled pool example"
    program, printed = found.groups()
    env = dict(os.environ, DEVMM_CUDART_PATH=fake_library("DEVMM_TEST_FAKE_CUDART"))
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed + "\n", done.stdout
