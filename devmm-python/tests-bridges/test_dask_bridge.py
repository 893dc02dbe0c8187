"""devmm.integrations.dask on a real distributed.LocalCluster with two
worker processes (one thread each): every worker builds its own stack,
allocations in tasks are accounted per worker (NumPy's too, installed in
the task), and removing the plugin restores every worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from distributed import Client, LocalCluster

import devmm
from devmm.integrations.dask import DevmmWorkerPlugin, cluster_statistics
from devmm.mrs.cpu import MallocMemoryResource


def counted_malloc() -> devmm.StatisticsAdaptor:
    return devmm.StatisticsAdaptor(MallocMemoryResource())


def allocate_on_worker(nbytes: int) -> int:
    # Through the worker's current resource, as any devmm code there would.
    devmm.empty((nbytes,), "uint8", layout=devmm.RowMajor()).buffer.free()
    return nbytes


def current_resource() -> str:
    return repr(devmm.get_current_memory_resource(devmm.Device.from_string("cpu")))


def numpy_array(n: int) -> int:
    import numpy as np

    import devmm.integrations.numpy

    stack = devmm.get_current_memory_resource(devmm.Device.from_string("cpu"))
    with devmm.integrations.numpy.install(stack):
        return int(np.ones(n, dtype=np.uint8).sum())


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, Client(cluster, timeout="60s") as client:
        yield client


def test_each_worker_accounts_its_own_tasks(client: Client) -> None:
    workers = sorted(client.scheduler_info()["workers"])
    assert len(workers) == 2
    before = client.run(current_resource)
    client.register_plugin(DevmmWorkerPlugin(counted_malloc), name="devmm")
    try:
        first, second = workers
        client.gather([client.submit(allocate_on_worker, 1000, workers=[first], pure=False)])
        client.gather(
            [client.submit(allocate_on_worker, n, workers=[second], pure=False) for n in (300, 500)]
        )
        table = cluster_statistics(client)
        assert sorted(table) == workers
        assert table[first]["total_bytes"] == 1000 and table[first]["allocations"] == 1
        assert table[second]["total_bytes"] == 800 and table[second]["allocations"] == 2
        assert table[second]["peak_bytes"] == 500
        assert all(row["current_bytes"] == 0 for row in table.values())
    finally:
        client.unregister_worker_plugin("devmm")
    # Every worker is back on the resource it had.
    assert client.run(current_resource) == before
    with pytest.raises(ValueError, match="no devmm plugin"):
        cluster_statistics(client)


def test_numpy_in_a_task_allocates_through_the_worker_stack(client: Client) -> None:
    client.register_plugin(DevmmWorkerPlugin(counted_malloc), name="devmm-np")
    try:
        worker = sorted(client.scheduler_info()["workers"])[0]
        assert client.submit(numpy_array, 4096, workers=[worker], pure=False).result() == 4096
        table = cluster_statistics(client, name="devmm-np")
        assert table[worker]["total_bytes"] >= 4096
    finally:
        client.unregister_worker_plugin("devmm-np")


def test_a_factory_written_in_the_script_itself_reaches_every_worker(client: Client) -> None:
    # The natural plugin: a lambda in the user's own script. cloudpickle sends
    # it by value and the classes it names by reference, so each class must
    # be where its __module__ says (MallocMemoryResource in devmm.mrs.cpu).
    plugin = DevmmWorkerPlugin(lambda: devmm.StatisticsAdaptor(MallocMemoryResource()))
    client.register_plugin(plugin, name="devmm-lambda")
    try:
        workers = sorted(client.scheduler_info()["workers"])
        client.gather([client.submit(allocate_on_worker, 256, workers=[w], pure=False) for w in workers])
        table = cluster_statistics(client, name="devmm-lambda")
        assert sorted(table) == workers
        assert all(row["total_bytes"] == 256 and row["current_bytes"] == 0 for row in table.values())
    finally:
        client.unregister_worker_plugin("devmm-lambda")


def test_a_worker_wide_numpy_arrow_is_refused() -> None:
    # A plugin cannot reach the contexts Dask runs tasks in (NEP 49).
    with pytest.raises(ValueError, match="per contextvars context"):
        DevmmWorkerPlugin(counted_malloc, arrows=("numpy",))


def test_unknown_arrows_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown arrows"):
        DevmmWorkerPlugin(counted_malloc, arrows=("jax",))


def counted_cuda() -> devmm.StatisticsAdaptor:
    from devmm.mrs.cuda import CudaRuntimeMemoryResource

    return devmm.StatisticsAdaptor(CudaRuntimeMemoryResource())


def cupy_allocates_through_devmm() -> bool:
    import cupy

    from devmm.integrations.cupy import _is_devmm_allocator

    return _is_devmm_allocator(cupy.cuda.get_allocator())


def test_the_cupy_arrow_is_installed_and_removed_on_every_worker(client: Client) -> None:
    # The workers inherit the fake CUDA runtime from this process's environment.
    assert not any(client.run(cupy_allocates_through_devmm).values())
    client.register_plugin(DevmmWorkerPlugin(counted_cuda, arrows=("cupy",)), name="devmm-cupy")
    try:
        assert all(client.run(cupy_allocates_through_devmm).values())
        assert all(row["allocations"] == 0 for row in cluster_statistics(client, "devmm-cupy").values())
    finally:
        client.unregister_worker_plugin("devmm-cupy")
    assert not any(client.run(cupy_allocates_through_devmm).values())
