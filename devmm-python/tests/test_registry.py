"""The current-resource registry and its context-scoped overrides."""

import asyncio
import threading

import pytest

import devmm
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource


def test_default_is_the_runtimes_malloc_resource(cpu: devmm.Device) -> None:
    mr = devmm.get_current_memory_resource(cpu)
    assert isinstance(mr, MallocMemoryResource)
    assert devmm.get_current_memory_resource() is mr
    assert devmm.get_current_memory_resource("cpu") is mr


def test_set_current_returns_the_previous_and_is_process_wide(cpu: devmm.Device) -> None:
    original = devmm.get_current_memory_resource(cpu)
    mine = BytearrayMemoryResource()
    try:
        assert devmm.set_current_memory_resource(mine) is original
        assert devmm.get_current_memory_resource(cpu) is mine
        seen: list[object] = []
        worker = threading.Thread(target=lambda: seen.append(devmm.get_current_memory_resource(cpu)))
        worker.start()
        worker.join()
        assert seen == [mine]
        assert devmm.empty((4,), "uint8").buffer.mr is mine
    finally:
        assert devmm.set_current_memory_resource(original) is mine
    assert devmm.get_current_memory_resource(cpu) is original


def test_using_nests_and_restores(cpu: devmm.Device) -> None:
    outer, inner = BytearrayMemoryResource(), devmm.StatisticsAdaptor(MallocMemoryResource())
    before = devmm.get_current_memory_resource(cpu)
    with devmm.using_memory_resource(outer) as a:
        assert a is outer and devmm.get_current_memory_resource(cpu) is outer
        with devmm.using_memory_resource(inner) as b:
            assert b is inner
            t = devmm.empty((8,), "float32", layout=devmm.RowMajor())
            assert t.buffer.mr is inner and inner.current_bytes == 32
        assert devmm.get_current_memory_resource(cpu) is outer
    assert devmm.get_current_memory_resource(cpu) is before
    t.buffer.free()
    assert inner.current_bytes == 0


def test_overrides_are_per_thread(cpu: devmm.Device) -> None:
    mine = BytearrayMemoryResource()
    seen: list[object] = []
    with devmm.using_memory_resource(mine):
        worker = threading.Thread(target=lambda: seen.append(devmm.get_current_memory_resource(cpu)))
        worker.start()
        worker.join()
    assert seen and seen[0] is not mine


def test_overrides_follow_async_tasks(cpu: devmm.Device) -> None:
    a, b = BytearrayMemoryResource(), BytearrayMemoryResource()

    async def current_after(mr: devmm.DeviceMemoryResource, delay: float) -> object:
        with devmm.using_memory_resource(mr):
            await asyncio.sleep(delay)
            return devmm.get_current_memory_resource(cpu)

    async def main() -> list[object]:
        return list(await asyncio.gather(current_after(a, 0.02), current_after(b, 0.01)))

    assert asyncio.run(main()) == [a, b]


def test_one_using_object_entered_by_two_tasks_at_once(cpu: devmm.Device) -> None:
    shared_mr = BytearrayMemoryResource()
    shared = devmm.using_memory_resource(shared_mr)
    before = devmm.get_current_memory_resource(cpu)

    async def main() -> list[object]:
        a_entered, b_entered, a_exited = asyncio.Event(), asyncio.Event(), asyncio.Event()
        seen: list[object] = []

        async def first() -> None:
            with shared:
                a_entered.set()
                await b_entered.wait()
                seen.append(devmm.get_current_memory_resource(cpu))
            # A exits while B is still inside: each resets its own entry.
            seen.append(devmm.get_current_memory_resource(cpu))
            a_exited.set()

        async def second() -> None:
            await a_entered.wait()
            with shared:
                b_entered.set()
                await a_exited.wait()
                seen.append(devmm.get_current_memory_resource(cpu))
            seen.append(devmm.get_current_memory_resource(cpu))

        await asyncio.gather(first(), second())
        return seen

    assert asyncio.run(main()) == [shared_mr, before, shared_mr, before]
    assert devmm.get_current_memory_resource(cpu) is before


def test_one_using_object_entered_by_two_threads(cpu: devmm.Device) -> None:
    shared_mr = BytearrayMemoryResource()
    shared = devmm.using_memory_resource(shared_mr)
    a_entered, b_entered, a_exited = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        try:
            with shared:
                a_entered.set()
                assert b_entered.wait(timeout=10)
                assert devmm.get_current_memory_resource(cpu) is shared_mr
            # The first in exits first, while the second is still inside.
            assert devmm.get_current_memory_resource(cpu) is not shared_mr
        except BaseException as e:  # reported below, on the main thread
            errors.append(e)
        finally:
            a_entered.set()
            a_exited.set()

    def second() -> None:
        try:
            assert a_entered.wait(timeout=10)
            with shared:
                b_entered.set()
                assert a_exited.wait(timeout=10)
                assert devmm.get_current_memory_resource(cpu) is shared_mr
            assert devmm.get_current_memory_resource(cpu) is not shared_mr
        except BaseException as e:
            errors.append(e)
        finally:
            b_entered.set()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_block_exited_out_of_order_ends_and_says_so(cpu: devmm.Device) -> None:
    # The core's one exit rule (devmm::exit_override, which a Rust guard's
    # drop follows too): the block ends wherever it is, the blocks entered
    # after it stay in force, and ending out of order is a RuntimeError.
    first, second = BytearrayMemoryResource(), MallocMemoryResource()
    outer = devmm.using_memory_resource(first)
    inner = devmm.using_memory_resource(second)
    before = devmm.get_current_memory_resource(cpu)
    outer.__enter__()
    inner.__enter__()
    with pytest.raises(RuntimeError, match="not the innermost in this context: it ended"):
        outer.__exit__(None, None, None)
    assert devmm.get_current_memory_resource(cpu) is second
    inner.__exit__(None, None, None)
    assert devmm.get_current_memory_resource(cpu) is before
    with pytest.raises(RuntimeError, match="no override of .* is in force in this context"):
        outer.__exit__(None, None, None)


def test_push_statistics_keeps_its_scopes_in_the_one_chain(cpu: devmm.Device) -> None:
    from devmm.statistics import pop_statistics, push_statistics

    # A pushed scope is an override like a block's: a block entered after it
    # sees it, and popping it leaves the block in force.
    push_statistics(cpu)
    pushed = devmm.get_current_memory_resource(cpu)
    assert isinstance(pushed, devmm.StatisticsAdaptor)
    mine = MallocMemoryResource()
    with devmm.using_memory_resource(mine):
        devmm.DeviceBuffer(16, mr=pushed).free()
        popped = pop_statistics(cpu)
        assert popped is not None and popped.total_bytes == 16
        assert devmm.get_current_memory_resource(cpu) is mine
    assert devmm.get_current_memory_resource(cpu) is not pushed
    assert pop_statistics(cpu) is None


def test_overrides_only_apply_to_their_device(cpu: devmm.Device) -> None:
    host = devmm.CallbackMemoryResource(lambda n, s: 0, lambda p, n, s: None, "cuda_host:0")
    with devmm.using_memory_resource(host):
        assert devmm.get_current_memory_resource(cpu) is not host
        assert devmm.get_current_memory_resource("cuda_host:0") is host
