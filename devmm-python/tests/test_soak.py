"""Soak: 8 threads, a fixed number of operations each, mixing every CPU
resource, adaptor, export, consumer and free path (and misuse, which must
be refused), then every counter exact and nothing live."""

import contextvars
import random
import threading
from collections import Counter
from typing import Any, Callable

import numpy as np

import devmm
import devmm.integrations.numpy
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource, NumpyHandlerMemoryResource

THREADS = 8
OPS = 250


class PyResource(devmm.DeviceMemoryResource):
    """A Python-defined resource, over a checked one."""

    dereferenceable = True

    def __init__(self) -> None:
        super().__init__()
        self.inner = BytearrayMemoryResource()

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        return self.inner.allocate(nbytes, stream)

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        self.inner.deallocate(ptr, nbytes, stream)


def leaves() -> dict[str, devmm.DeviceMemoryResource]:
    heap = BytearrayMemoryResource(alignment=64)  # what the callback below promises
    return {
        "malloc": MallocMemoryResource(),
        "bytearray": BytearrayMemoryResource(alignment=256),
        "numpy": NumpyHandlerMemoryResource(),
        "callback": devmm.CallbackMemoryResource(
            lambda n, s: heap.allocate(n, s), lambda p, n, s: heap.deallocate(p, n, s), alignment=64
        ),
        "python": PyResource(),
    }


class Chains:
    """Each leaf under a StatisticsAdaptor, reached bare and through a
    limiting and a logging adaptor on top."""

    def __init__(self) -> None:
        self.leaves = leaves()
        self.stats = {name: devmm.StatisticsAdaptor(mr) for name, mr in self.leaves.items()}
        self.limits = {name: devmm.LimitingAdaptor(stats, limit_bytes=1 << 30) for name, stats in self.stats.items()}
        self.chains: list[tuple[str, devmm.DeviceMemoryResource]] = []
        for name in self.leaves:
            self.chains += [
                (name, self.stats[name]),
                (name, self.limits[name]),
                (name, devmm.LoggingAdaptor(self.limits[name])),
            ]


def worker(seed: int, chains: Chains, expected: Counter[tuple[str, str]], errors: list[BaseException]) -> None:
    rng = random.Random(seed)
    stream = devmm.runtime_for("cpu").default_stream(devmm.Device.from_string("cpu"))
    # Misuse goes to a resource of this thread's own: a double free on a
    # shared one could name a block another thread was just handed.
    own = devmm.StatisticsAdaptor(MallocMemoryResource())
    counted: Counter[tuple[str, str]] = Counter()

    def raw(name: str, mr: devmm.DeviceMemoryResource) -> None:
        n = rng.choice([0, 1, 64, 1000, 4096])
        p = mr.allocate(n, stream)
        counted[name, "bytes"] += n
        counted[name, "count"] += 1
        mr.deallocate(p, n, stream)

    def buffer(name: str, mr: devmm.DeviceMemoryResource) -> None:
        n = rng.choice([1, 100, 8192])
        buf = devmm.DeviceBuffer(n, mr=mr)
        counted[name, "bytes"] += n
        counted[name, "count"] += 1
        how = rng.randrange(3)
        if how == 0:
            buf.free()
            buf.free()
        elif how == 1:
            with buf:
                buf.copy_from_host(b"x" * n) if mr.dereferenceable else None
        else:
            del buf

    def export(name: str, mr: devmm.DeviceMemoryResource) -> None:
        shape = (rng.randrange(1, 5), rng.randrange(1, 7))
        t = devmm.empty(shape, rng.choice(["float32", "int16", "uint8"]), mr=mr)
        counted[name, "bytes"] += t.buffer.nbytes
        counted[name, "count"] += 1
        a = np.from_dlpack(t)
        a[...] = 3
        assert int(a.sum()) == 3 * a.size
        if rng.random() < 0.5:
            t.buffer.free()  # deferred: the array still holds the memory
            assert int(a.sum()) == 3 * a.size
        del t
        del a

    def misuse(_name: str, _mr: devmm.DeviceMemoryResource) -> None:
        p = own.allocate(64, stream)
        for bad in ((p + 8, 64), (p, 32), (0, 16)):
            try:
                own.deallocate(*bad, stream)
            except ValueError:
                pass
            else:
                raise AssertionError(f"deallocate{bad} was accepted")
        own.deallocate(p, 64, stream)
        try:
            own.deallocate(p, 64, stream)
        except ValueError:
            pass
        else:
            raise AssertionError("a double free was accepted")

    def numpy_arrays(_name: str, _mr: devmm.DeviceMemoryResource) -> None:
        a = np.arange(rng.randrange(1, 2000), dtype=np.float64)
        b = np.concatenate([a, a])
        assert b.size == 2 * a.size

    ops: list[Callable[[str, devmm.DeviceMemoryResource], None]] = [raw, buffer, export, misuse, numpy_arrays]
    try:
        for _ in range(OPS):
            name, mr = rng.choice(chains.chains)
            rng.choice(ops)(name, mr)
        assert (own.current_bytes, own.allocations, own.deallocations) == (0, own.deallocations, own.allocations)
        assert own._debug_live_count() == 0
    except BaseException as error:  # noqa: BLE001 - reported by the main thread
        errors.append(error)
    finally:
        with LOCK:
            expected.update(counted)


LOCK = threading.Lock()


def test_eight_threads_end_with_exact_counters_and_nothing_live() -> None:
    chains = Chains()
    numpy_stats = devmm.StatisticsAdaptor(MallocMemoryResource())
    expected: Counter[tuple[str, str]] = Counter()
    errors: list[BaseException] = []
    with devmm.integrations.numpy.install(numpy_stats):
        # NumPy's handler is per context: each thread runs in a copy of this one.
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(worker, seed, chains, expected, errors))
            for seed in range(THREADS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    for name, stats in chains.stats.items():
        assert stats.current_bytes == 0, name
        assert stats.total_bytes == expected[name, "bytes"], name
        assert stats.allocations == stats.deallocations == expected[name, "count"], name
        assert stats.peak_bytes <= stats.total_bytes, name
        assert stats._debug_live_count() == 0, name
        assert chains.limits[name].used_bytes == 0, name
    assert sum(expected[name, "count"] for name in chains.leaves) > THREADS * OPS // 2
    # NumPy allocated through devmm from every thread, and gave all back
    # but the arrays alive outside the soak (none of the soak's).
    assert numpy_stats.allocations > THREADS
    assert numpy_stats.current_bytes == 0
    assert numpy_stats._debug_live_count() == 0


def test_a_chain_twenty_thousand_adaptors_deep_builds_and_drops() -> None:
    # In a subprocess: a stack overflow kills only it. Building asked each
    # new adaptor's device down the whole chain (quadratic), and dropping
    # let each Python object go from inside the one above it (one stack
    # frame group per link).
    import subprocess
    import sys

    script = """
import devmm
mr = devmm.mrs.cpu.MallocMemoryResource()
for i in range(20_000):
    mr = (devmm.StatisticsAdaptor, devmm.LoggingAdaptor, devmm.TrackingAdaptor)[i % 3](mr)
assert mr.device == devmm.Device("cpu")
del mr
print("dropped")
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout == "dropped\n", (run.returncode, run.stderr[-2000:])


def test_allocating_through_a_chain_too_deep_raises_recursion_error() -> None:
    # In a subprocess: a stack overflow kills only it. Each adaptor a call
    # goes through takes native stack; past the core's depth limit the
    # call is refused, as Python refuses a recursion too deep.
    import subprocess
    import sys

    script = """
import devmm
mr = devmm.mrs.cpu.MallocMemoryResource()
for i in range(20_000):
    mr = (devmm.StatisticsAdaptor, devmm.LimitingAdaptor)[i % 2](mr, *[2**40][: i % 2])
try:
    mr.allocate(64)
except RecursionError as e:
    assert "build a shorter chain" in str(e), e
    print("refused")
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout == "refused\n", (run.returncode, run.stderr[-2000:])
