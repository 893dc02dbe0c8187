"""Recovering from running out: FailureCallbackAdaptor, OutOfMemoryError's
figures and on_out_of_memory hooks, on the CPU (the fake CUDA runtime's
out-of-memory is in test_gpu_fakes.py)."""

import logging
import pickle
import threading
from collections.abc import Iterator

import pytest

import devmm
from devmm.mrs.cpu import MallocMemoryResource


@pytest.fixture
def limiting() -> devmm.LimitingAdaptor:
    return devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=100)


@pytest.fixture
def failures() -> Iterator[list[BaseException]]:
    """The out-of-memory errors of this thread that the hooks saw (hooks are
    process-wide)."""
    me = threading.get_ident()
    seen: list[BaseException] = []

    def hook(error: BaseException) -> None:
        if threading.get_ident() == me:
            seen.append(error)

    handle = devmm.on_out_of_memory(hook)
    yield seen
    handle.remove()


def test_the_exception_is_a_memory_error_with_the_failures_figures(limiting: devmm.LimitingAdaptor) -> None:
    assert issubclass(devmm.OutOfMemoryError, MemoryError)
    held = devmm.DeviceBuffer(70, mr=limiting)
    with pytest.raises(devmm.OutOfMemoryError, match="would exceed the 100-byte limit") as caught:
        devmm.DeviceBuffer(40, mr=limiting)
    err = caught.value
    assert err.device == devmm.Device.from_string("cpu")
    assert err.nbytes == 40
    assert err.chain == "LimitingAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)"
    assert err.pool is None
    assert err.largest_fit == 30
    # Pickled (multiprocessing, Dask), it keeps its fields and its message.
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is devmm.OutOfMemoryError and str(again) == str(err)
    assert (again.device, again.nbytes, again.chain, again.pool, again.largest_fit) == (
        err.device, err.nbytes, err.chain, None, 30,
    )
    held.free()


def test_mr_allocate_and_empty_raise_it_too(limiting: devmm.LimitingAdaptor) -> None:
    with pytest.raises(devmm.OutOfMemoryError) as caught:
        limiting.allocate(101)
    assert (caught.value.nbytes, caught.value.largest_fit) == (101, 100)
    with pytest.raises(devmm.OutOfMemoryError) as caught:
        devmm.empty((32,), "float32", mr=limiting)
    assert caught.value.nbytes == 128


def test_a_callback_that_frees_a_held_buffer_lets_the_retry_succeed(limiting: devmm.LimitingAdaptor) -> None:
    held = [devmm.DeviceBuffer(80, mr=limiting)]
    calls: list[tuple[int, int]] = []

    def drop_cache(nbytes: int, attempt: int) -> bool:
        calls.append((nbytes, attempt))
        if not held:
            return False
        held.pop().free()
        return True

    mr = devmm.FailureCallbackAdaptor(limiting, drop_cache)
    assert mr.upstream is limiting
    buffer = devmm.DeviceBuffer(50, mr=mr)
    assert calls == [(50, 1)]
    assert limiting.used_bytes == 50
    buffer.free()
    assert limiting.used_bytes == 0


def test_a_callback_that_declines_reraises_the_original_error(
    limiting: devmm.LimitingAdaptor, failures: list[BaseException]
) -> None:
    held = devmm.DeviceBuffer(70, mr=limiting)
    calls: list[tuple[int, int]] = []

    def decline(nbytes: int, attempt: int) -> bool:
        calls.append((nbytes, attempt))
        return False

    mr = devmm.FailureCallbackAdaptor(limiting, decline)
    with pytest.raises(devmm.OutOfMemoryError) as caught:
        devmm.DeviceBuffer(40, mr=mr)
    assert calls == [(40, 1)]
    err = caught.value
    assert (err.nbytes, err.largest_fit, err.pool) == (40, 30, None)
    assert err.chain.startswith("FailureCallbackAdaptor -> LimitingAdaptor -> MallocMemoryResource")
    assert len(failures) == 1 and isinstance(failures[0], devmm.OutOfMemoryError)
    held.free()


def test_the_callback_is_asked_again_until_it_declines(limiting: devmm.LimitingAdaptor) -> None:
    attempts: list[int] = []

    def three_tries(nbytes: int, attempt: int) -> bool:
        attempts.append(attempt)
        return attempt < 3

    with pytest.raises(devmm.OutOfMemoryError):
        devmm.FailureCallbackAdaptor(limiting, three_tries).allocate(101)
    assert attempts == [1, 2, 3]


def test_a_callback_that_raises_propagates_with_the_oom_as_context(limiting: devmm.LimitingAdaptor) -> None:
    def broken(nbytes: int, attempt: int) -> bool:
        raise KeyError("cache")

    with pytest.raises(KeyError) as caught:
        devmm.DeviceBuffer(101, mr=devmm.FailureCallbackAdaptor(limiting, broken))
    context = caught.value.__context__
    assert isinstance(context, devmm.OutOfMemoryError) and context.nbytes == 101


def test_a_callback_that_returns_no_bool_is_a_type_error(limiting: devmm.LimitingAdaptor) -> None:
    mr = devmm.FailureCallbackAdaptor(limiting, lambda nbytes, attempt: None)
    with pytest.raises(TypeError, match="must return a bool .whether to retry., got NoneType") as caught:
        mr.allocate(101)
    assert isinstance(caught.value.__context__, devmm.OutOfMemoryError)
    with pytest.raises(TypeError, match="must be callable"):
        devmm.FailureCallbackAdaptor(limiting, 3)


def test_errors_other_than_out_of_memory_do_not_call_the_callback() -> None:
    calls: list[int] = []

    def refuse(nbytes: int, stream: object) -> int:
        raise ValueError("not this size")

    upstream = devmm.CallbackMemoryResource(refuse, lambda ptr, nbytes, stream: None)
    def retry(nbytes: int, attempt: int) -> bool:
        calls.append(nbytes)
        return True

    mr = devmm.FailureCallbackAdaptor(upstream, retry)
    with pytest.raises(ValueError, match="not this size"):
        mr.allocate(8)
    assert calls == []


def test_hooks_run_once_per_failure_and_stop_when_removed(
    limiting: devmm.LimitingAdaptor, failures: list[BaseException]
) -> None:
    stack = devmm.StatisticsAdaptor(devmm.FailureCallbackAdaptor(limiting, lambda nbytes, attempt: attempt < 2))
    with pytest.raises(devmm.OutOfMemoryError) as caught:
        devmm.DeviceBuffer(101, mr=stack)
    assert len(failures) == 1, "three layers and a retry: one failure, one call"
    seen = failures[0]
    assert isinstance(seen, devmm.OutOfMemoryError)
    assert (seen.nbytes, seen.chain, str(seen)) == (101, caught.value.chain, str(caught.value))
    with pytest.raises(MemoryError):
        stack.allocate(102)
    assert [e.nbytes for e in failures] == [101, 102]  # type: ignore[attr-defined]
    devmm.DeviceBuffer(8, mr=stack).free()
    assert len(failures) == 2, "a success runs no hook"

    me = threading.get_ident()
    extra: list[int] = []
    handle = devmm.on_out_of_memory(lambda e: extra.append(e.nbytes) if threading.get_ident() == me else None)
    assert handle.remove() is True
    assert handle.remove() is False
    with devmm.on_out_of_memory(lambda e: extra.append(e.nbytes) if threading.get_ident() == me else None):
        with pytest.raises(MemoryError):
            devmm.DeviceBuffer(103, mr=stack)
    with pytest.raises(MemoryError):
        devmm.DeviceBuffer(104, mr=stack)
    assert extra == [103]
    assert len(failures) == 4


def test_a_python_resource_nesting_a_devmm_allocation_runs_the_hooks_once(
    limiting: devmm.LimitingAdaptor, failures: list[BaseException]
) -> None:
    class Nested(devmm.DeviceMemoryResource):
        def allocate(self, nbytes: int, stream: object = None) -> int:
            return devmm.DeviceBuffer(nbytes, mr=limiting).ptr

        def deallocate(self, ptr: int, nbytes: int, stream: object = None) -> None:
            pass

    with pytest.raises(MemoryError):
        devmm.DeviceBuffer(101, mr=Nested())
    assert len(failures) == 1


def test_a_hook_that_raises_does_not_hide_the_error(
    limiting: devmm.LimitingAdaptor, failures: list[BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    me = threading.get_ident()

    def broken(error: BaseException) -> None:
        if threading.get_ident() == me:
            raise RuntimeError("the hook broke")

    after: list[int] = []

    def counting(error: devmm.OutOfMemoryError) -> None:
        if threading.get_ident() == me:
            after.append(error.nbytes)

    with devmm.on_out_of_memory(broken), devmm.on_out_of_memory(counting):
        with caplog.at_level(logging.WARNING, logger="devmm.out_of_memory"):
            with pytest.raises(devmm.OutOfMemoryError, match="101 bytes"):
                devmm.DeviceBuffer(101, mr=limiting)
    # The hooks before and after the broken one ran, and its failure is logged.
    assert len(failures) == 1 and after == [101]
    (record,) = [r for r in caplog.records if r.name == "devmm.out_of_memory"]
    assert "an out-of-memory hook failed" in record.getMessage()
    assert "RuntimeError('the hook broke')" in record.getMessage()


def test_on_out_of_memory_refuses_what_it_cannot_call() -> None:
    with pytest.raises(TypeError, match="takes a callable hook.error., got int"):
        devmm.on_out_of_memory(3)


def test_a_callback_that_refers_to_its_adaptor_is_collected(limiting: devmm.LimitingAdaptor) -> None:
    import gc
    import weakref

    def make() -> "weakref.ref[devmm.FailureCallbackAdaptor]":
        adaptor: devmm.FailureCallbackAdaptor | None = None

        def callback(nbytes: int, attempt: int) -> bool:
            return adaptor is not None and attempt < 2

        adaptor = devmm.FailureCallbackAdaptor(limiting, callback)
        return weakref.ref(adaptor)

    gone = make()
    gc.collect()
    assert gone() is None, "the adaptor and its callback are a cycle the collector frees"
