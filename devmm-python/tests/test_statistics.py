"""devmm.statistics: enable/get, push/pop, scopes nested within and across
threads and asyncio tasks, and the profiler."""

from __future__ import annotations

import asyncio
import threading

import pytest

import devmm
from devmm import statistics as st


def buffer(n: int) -> devmm.DeviceBuffer:
    return devmm.DeviceBuffer(n, device="cpu")


def test_enable_wraps_the_current_resource_once() -> None:
    before = devmm.get_current_memory_resource("cpu")
    try:
        stats = st.enable_statistics("cpu")
        assert st.enable_statistics("cpu") is stats
        assert stats.upstream is before
        keep = buffer(100)
        got = st.get_statistics("cpu")
        assert got is not None
        assert (got.current_bytes, got.current_count, got.total_count) == (100, 1, 1)
        del keep
        assert st.get_statistics("cpu") == stats.statistics
    finally:
        devmm.set_current_memory_resource(before)
    assert st.get_statistics("cpu") is None


def test_push_and_pop_nest() -> None:
    assert st.pop_statistics("cpu") is None
    st.push_statistics("cpu")
    a = buffer(100)
    st.push_statistics("cpu")
    b = buffer(50)
    del b
    inner = st.pop_statistics("cpu")
    assert inner is not None
    assert (inner.current_bytes, inner.peak_bytes, inner.total_bytes) == (0, 50, 50)
    outer = st.pop_statistics("cpu")
    assert outer is not None
    assert (outer.current_bytes, outer.peak_bytes, outer.total_bytes) == (100, 150, 150)
    assert st.get_statistics("cpu") is None
    del a


def test_scopes_nest_and_stay_in_their_thread() -> None:
    barrier = threading.Barrier(4)
    results: dict[int, tuple[int, int, int, int]] = {}

    def work(t: int) -> None:
        with st.statistics("cpu") as outer:
            mine = buffer(t * 1000)
            barrier.wait()
            with st.statistics("cpu") as inner:
                nested = buffer(t)
                barrier.wait()
                seen = st.get_statistics("cpu")
                assert seen is not None
                del nested
            results[t] = (seen.current_bytes, inner.peak_bytes, outer.current_bytes, outer.peak_bytes)
            del mine

    threads = [threading.Thread(target=work, args=(t,)) for t in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for t in range(1, 5):
        assert results[t] == (t, t, t * 1000, t * 1001)


def test_scopes_nest_and_stay_in_their_asyncio_task() -> None:
    async def work(t: int) -> tuple[int, int, int]:
        with st.statistics("cpu") as outer:
            mine = buffer(t * 100)
            await asyncio.sleep(0)
            st.push_statistics("cpu")
            nested = buffer(t)
            await asyncio.sleep(0)
            inner = st.pop_statistics("cpu")
            assert inner is not None
            del nested, mine
            return inner.total_bytes, outer.total_bytes, outer.peak_bytes

    async def main() -> list[tuple[int, int, int]]:
        return await asyncio.gather(*(work(t) for t in range(1, 4)))

    assert asyncio.run(main()) == [(t, t * 101, t * 101) for t in range(1, 4)]


def test_the_profiler_counts_calls_peaks_and_totals_per_name() -> None:
    records = st.ProfilerRecords()

    @st.profiler(records=records)
    def step(n: int) -> None:
        a, b = buffer(n), buffer(n)
        del a, b

    for n in (10, 30, 20):
        step(n)
    with st.profiler(records=records, name="load"):
        del_me = buffer(1000)
        del del_me

    name = f"{__name__}.test_the_profiler_counts_calls_peaks_and_totals_per_name.<locals>.step"
    record = records.records[name]
    assert (record.num_calls, record.memory_total, record.memory_peak) == (3, 120, 60)
    assert records.records["load"].memory_peak == 1000
    by_peak = records.report()
    assert by_peak.index("load") < by_peak.index("step")
    by_calls = records.report(ordered_by="num_calls")
    assert by_calls.index("step") < by_calls.index("load")
    with pytest.raises(ValueError, match="num_calls, memory_peak or memory_total"):
        records.report(ordered_by="size")
    with pytest.raises(ValueError, match="needs a name"):
        with st.profiler():
            pass


def test_the_profiler_wraps_coroutines_and_fills_the_default_records() -> None:
    @st.profiler(name="async step")
    async def step() -> int:
        b = buffer(64)
        await asyncio.sleep(0)
        return b.size

    assert asyncio.run(step()) == 64
    assert st.default_profiler_records.records["async step"].memory_total >= 64


def test_counters_and_records_are_frozen_dataclasses_as_rmms() -> None:
    import dataclasses

    stats = devmm.StatisticsAdaptor(devmm.get_current_memory_resource("cpu"))
    keep = devmm.DeviceBuffer(64, mr=stats)
    snapshot = stats.statistics
    assert dataclasses.is_dataclass(snapshot) and isinstance(snapshot, st.Statistics)
    assert dataclasses.asdict(snapshot) == {
        "current_bytes": 64, "peak_bytes": 64, "total_bytes": 64, "allocations": 1, "deallocations": 0,
    }
    assert (snapshot.current_count, snapshot.total_count) == (1, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.current_bytes = 0  # type: ignore[misc]
    assert hash(snapshot) == hash(st.Statistics(64, 64, 64, 1, 0))
    del keep
    records = st.ProfilerRecords()
    records.add("load", snapshot)
    record = records.records["load"]
    assert dataclasses.is_dataclass(record) and record == st.MemoryRecord(num_calls=1, memory_total=64, memory_peak=64)
    with pytest.raises(TypeError):
        records.add("load", (64, 64, 64, 1, 0))  # type: ignore[arg-type]


def test_current_count_never_goes_negative() -> None:
    # Counters read back from elsewhere may show more frees than allocations.
    assert st.Statistics(0, 0, 0, 0, 5).current_count == 0
    assert st.Statistics(0, 0, 0, 7, 5).current_count == 2
