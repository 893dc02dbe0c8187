"""The current-resource registry and its context-scoped overrides."""

import asyncio
import threading

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
            t = devmm.empty((8,), "float32")
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


def test_overrides_only_apply_to_their_device(cpu: devmm.Device) -> None:
    host = devmm.CallbackMemoryResource(lambda n, s: 0, lambda p, n, s: None, "cuda_host:0")
    with devmm.using_memory_resource(host):
        assert devmm.get_current_memory_resource(cpu) is not host
        assert devmm.get_current_memory_resource("cuda_host:0") is host
