"""Drives every public function, class and method of devmm with hostile
arguments (negative, huge, wrong type, NaN, None, subclasses, devmm's own
objects in the wrong place), with hypothesis.

It also builds reference cycles over resources whose ``deallocate`` raises
(each pointer must come back once) and replays traces with hundreds of
recorded threads and extreme times (issue 33).

Run by ``test_hostile_inputs.py`` in a subprocess: a signal, an abort or a
hang kills only this process, and the test reports it. Here, one of the
exceptions the seed names for bad input (``EXPECTED``) is the answer to a
bad call; any other exception (an ``OverflowError``, ``KeyError`` or
``AttributeError`` showing through the binding, a ``SystemError`` from a
C-API misuse) is recorded and fails the run at the end, with every label
that raised it; a ``PanicException`` or any other ``BaseException`` stops
it at once.

Prints ``hostile calls: N`` at the end; ``DEVMM_HOSTILE_EXAMPLES`` sets
the examples per target and ``DEVMM_HOSTILE_TIMEOUT`` the seconds after
which a run counts as hung.
"""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import inspect
import logging
import math
import os
import sys
from typing import Any, Callable

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import devmm
import devmm.integrations.numpy
import devmm.testing
from devmm.mrs.cpu import BytearrayMemoryResource, MallocMemoryResource, NumpyHandlerMemoryResource

EXAMPLES = int(os.environ.get("DEVMM_HOSTILE_EXAMPLES", "25"))
CALLS = 0

# The typed answers to a bad call: the seed's exceptions (NotImplementedError,
# the abstract base's answer, is a RuntimeError) and devmm's own.
EXPECTED: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    MemoryError,
    BufferError,
    RuntimeError,
    devmm.RuntimeUnavailableError,
    devmm.testing.RecordingMisuseError,
)
# Any other exception, by type, with the first calls that raised it.
UNEXPECTED: dict[str, list[str]] = {}


class SubInt(int):
    pass


class SubStr(str):
    pass


class BadIndex:
    def __index__(self) -> int:
        raise RuntimeError("no index")


class HugeIndex:
    def __index__(self) -> int:
        return 2**100


class LyingLen:
    def __len__(self) -> int:
        return -1

    def __iter__(self) -> Any:
        return iter([1, 2])


class PyResource(devmm.DeviceMemoryResource):
    """A Python-defined resource over a checked one, declared real."""

    dereferenceable = True

    def __init__(self) -> None:
        super().__init__()
        self.inner = BytearrayMemoryResource()

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        return self.inner.allocate(nbytes, stream)

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        self.inner.deallocate(ptr, nbytes, stream)


class LyingResource(devmm.DeviceMemoryResource):
    """A subclass whose probes answer with nonsense."""

    device = "banana"  # type: ignore[assignment]

    def guaranteed_alignment(self) -> int:
        return -3

    def allocate(self, nbytes: int, stream: Any = None) -> int:
        return -1

    def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
        raise ValueError("never")


cpu = devmm.Device.from_string("cpu")
f32 = devmm.DType.from_string("float32")
heap = BytearrayMemoryResource()
stream = devmm.runtime_for(cpu).default_stream(cpu)


def samples() -> list[Any]:
    """Valid devmm objects, for methods to be called on and as arguments."""
    recording = devmm.testing.RecordingMemoryResource()
    resources: list[Any] = [
        MallocMemoryResource(),
        BytearrayMemoryResource(alignment=128),
        NumpyHandlerMemoryResource(),
        recording,
        devmm.StatisticsAdaptor(MallocMemoryResource()),
        devmm.LimitingAdaptor(BytearrayMemoryResource(), 1 << 20),
        devmm.LoggingAdaptor(devmm.StatisticsAdaptor(recording)),
        devmm.CallbackMemoryResource(lambda n, s: heap.allocate(n), lambda p, n, s: heap.deallocate(p, n)),
        PyResource(),
        LyingResource(),
    ]
    policies: list[Any] = [
        devmm.RowMajor(),
        devmm.ColMajor(),
        devmm.Permuted((1, 0)),
        devmm.Aligned(devmm.RowMajor(), unit_stride_alignment=64, base_alignment=128),
        devmm.DeviceOptimal(),
    ]
    tensor = devmm.empty((2, 3), "float32")
    return [
        cpu,
        devmm.Device.from_string("cuda:1"),
        devmm.DeviceType.CPU,
        f32,
        devmm.DType.from_string("bfloat16"),
        stream,
        devmm.DEFAULT,
        devmm.PER_THREAD_DEFAULT,
        devmm.runtime_for("cpu"),
        devmm.RowMajor()((2, 3), f32, cpu),
        *policies,
        *resources,
        devmm.DeviceBuffer(64),
        devmm.DeviceBuffer(16, mr=recording),
        tensor,
        tensor.to_read_only(),
        devmm.empty((0,), "int8"),
        devmm.using_memory_resource(resources[1]),
    ]


SAMPLES = samples()

hostile = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 7, 64, 2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, -0.0, math.inf, np.float64("nan"), np.int64(-1), np.uint64(2**64 - 1)]),
    st.none(),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(
        ["cpu", "cpu:0", "cpu:1", "cuda:0", "cuda:-1", "rocm:99999999999", "banana", "float32", "int8", "x" * 300]
    ),
    st.binary(max_size=16),
    st.builds(SubInt, st.integers(-(2**65), 2**65)),
    st.builds(SubStr, st.sampled_from(["cpu", "float32", "cuda:0", "?"])),
    st.sampled_from([BadIndex(), HugeIndex(), LyingLen(), object(), type, Exception("x")]),
    st.lists(st.integers(min_value=-(2**65), max_value=2**65), max_size=5),
    st.lists(st.integers(min_value=0, max_value=8), max_size=4).map(tuple),
    st.sampled_from([bytearray(b"abc"), memoryview(b"0123456789abcdef"), np.zeros(3), np.ones((2, 2), np.int32)]),
    st.sampled_from([lambda *a, **k: 2**70, lambda *a, **k: None, lambda *a, **k: -1, print]),
    st.sampled_from(SAMPLES),
)


def check_outcome(
    label: str, call: Callable[[], Any], also: tuple[type[BaseException], ...] = ()
) -> None:
    """Runs one call; the expected typed errors (and `also`) are fine, any
    other exception is recorded as a failure."""
    global CALLS
    CALLS += 1
    try:
        result = call()
    except EXPECTED + also:
        return
    except Exception as error:
        seen = UNEXPECTED.setdefault(type(error).__name__, [])
        if len(seen) < 20:
            seen.append(f"{label}: {error!r}")
        return
    # Installers change NumPy's global allocator: undo at once.
    if isinstance(result, devmm.integrations.Installer):
        result.uninstall()


def parameters(target: Callable[..., Any]) -> list[str]:
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"]


# The conformance checks answer a failing resource or producer (a hostile factory) with
# AssertionError, their documented result: it fails the caller's test.
CONFORMANCE = {devmm.testing.mr_conformance, devmm.testing.dlpack_conformance}


# `empty_like` reads `obj.shape` and `obj.dtype` as the seed does: an object
# without them is that attribute's AttributeError.
ATTRIBUTE_READERS = {devmm.empty_like}


def drive(label: str, target: Callable[..., Any]) -> None:
    also: tuple[type[BaseException], ...] = (AssertionError,) if target in CONFORMANCE else ()
    if target in ATTRIBUTE_READERS:
        also = (AttributeError,)
    names = parameters(target)
    kwargs_strategy = st.dictionaries(st.sampled_from(names), hostile, max_size=3) if names else st.just({})

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(args=st.lists(hostile, max_size=4), kwargs=kwargs_strategy)
    def run(args: list[Any], kwargs: dict[str, Any]) -> None:
        # Never declare made-up pointers real: that is the caller's promise.
        kwargs.pop("dereferenceable", None)
        check_outcome(label, lambda: target(*args, **kwargs), also)

    run()


PUBLIC_DUNDERS = {"__dlpack__", "__dlpack_device__", "__enter__", "__exit__", "__repr__", "__eq__", "__hash__", "__call__"}


def targets() -> list[tuple[str, Callable[..., Any]]]:
    found: list[tuple[str, Callable[..., Any]]] = []
    modules = [devmm, devmm.mrs.cpu, devmm.testing, devmm.integrations.numpy]
    for module in modules:
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if callable(obj) and not isinstance(obj, (devmm.StreamSentinel,)):
                found.append((f"{module.__name__}.{name}", obj))

    for sample in SAMPLES:
        for name in dir(sample):
            if name.startswith("_") and name not in PUBLIC_DUNDERS and name != "_debug_live_count":
                continue
            if isinstance(sample, int) and hasattr(int, name) and name not in PUBLIC_DUNDERS:
                continue  # DeviceType (an IntEnum) inherits int's methods: Python's, not devmm's
            try:
                attr = getattr(sample, name)
            except AttributeError:
                # A getter with no answer on this device (`__cuda_array_interface__` of host
                # memory, so `hasattr` is False): AttributeError is its protocol. Any other
                # exception from a getter stops the run.
                continue
            if callable(attr):
                found.append((f"{type(sample).__name__}.{name}", attr))
    return found


def drive_setters() -> None:
    """Assigning hostile values to every attribute of every sample."""
    values = [None, -1, 2**64, math.nan, "banana", "cuda:0", object(), SubStr("cpu")]
    for sample in SAMPLES:
        for name in dir(sample):
            if name.startswith("_"):
                continue
            for value in values:
                # A read-only attribute refuses any assignment with an AttributeError (a frozen
                # Device's FrozenInstanceError is one): that is the answer, not a leak.
                check_outcome(
                    f"{type(sample).__name__}.{name} = {value!r}",
                    lambda: setattr(sample, name, value),
                    also=(AttributeError,),
                )


HOSTILE_SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


def drive_collected_failing_resources() -> None:
    """Reference cycles of buffers and tensors over a Python resource whose
    `deallocate` raises (a driver that freed, then reported an earlier
    error), some after an explicit `free()` that failed: the collector
    gives each pointer back exactly once, and never after a failed free."""
    global CALLS
    logger = logging.getLogger("devmm")

    @HOSTILE_SETTINGS
    @given(
        kinds=st.lists(st.sampled_from(["buffer", "tensor"]), min_size=1, max_size=4),
        fail=st.booleans(),
        freed_first=st.booleans(),
    )
    def run(kinds: list[str], fail: bool, freed_first: bool) -> None:
        global CALLS
        addresses = iter(range(0x10000, 0x10000 + 0x100 * len(kinds), 0x100))
        given_back: list[int] = []

        class Failing(devmm.DeviceMemoryResource):
            def allocate(self, nbytes: int, stream: Any = None) -> int:
                return next(addresses)

            def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
                given_back.append(ptr)
                if fail:
                    raise RuntimeError("freed, then an earlier asynchronous error")

        mr = Failing()
        held = [devmm.DeviceBuffer(16, mr=mr) if k == "buffer" else devmm.empty((4,), "float32", mr=mr) for k in kinds]
        made = sorted(h.ptr if isinstance(h, devmm.DeviceBuffer) else h.data_ptr for h in held)
        for buffer in [h if isinstance(h, devmm.DeviceBuffer) else h.buffer for h in held] if freed_first else []:
            try:
                buffer.free()
            except RuntimeError:
                assert fail
        buffer = None  # the cycle alone holds the buffers now
        mr.held = held  # type: ignore[attr-defined]  # the cycle: mr -> held -> buffers -> mr
        del mr, held
        gc.collect()
        CALLS += 1
        assert sorted(given_back) == made, (kinds, fail, given_back, made)

    level = logger.level
    logger.setLevel(logging.CRITICAL)  # every failed free is logged: expected here
    try:
        run()
    finally:
        logger.setLevel(level)


def drive_trace_replays() -> None:
    """`devmm replay` of traces with many recorded threads (ids up to
    2**64 - 1) and extreme times (a CSV passing midnight on every line,
    JSON times at both ends of 64 bits): a report or a refusal, exit 0, 1
    or 2, never a panic or an overflow."""
    import tempfile

    from devmm._devmm import _cli_main

    @HOSTILE_SETTINGS
    @given(
        threads=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=400),
        csv=st.booleans(),
        times=st.lists(st.sampled_from(["23:59:59.999999", "00:00:00.0", "12:00:00.5", "00:00:60.999999999"]), min_size=1),
        json_times=st.lists(st.sampled_from([0, 1, 2**63, 2**64 - 1]), min_size=1),
    )
    def run(threads: list[int], csv: bool, times: list[str], json_times: list[int]) -> None:
        global CALLS
        lines = ["Thread,Time,Action,Pointer,Size,Stream"] if csv else []
        events = [(t, "allocate", 0x1000 * (k + 1)) for k, t in enumerate(threads)]
        # Each freed by the next thread: frees wait on other threads.
        events += [(threads[(k + 1) % len(threads)], "free", 0x1000 * (k + 1)) for k in range(len(threads))]
        for k, (thread, action, ptr) in enumerate(events):
            if csv:
                lines.append(f"{thread},{times[k % len(times)]},{action},{ptr:#x},64,0")
            else:
                time_ns = json_times[k % len(json_times)]
                lines.append(
                    f'{{"thread":{thread},"time_ns":{time_ns},"action":"{action}","ptr":{ptr},"size":64,"stream":0}}'
                )
        with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        stdout = os.dup(1)
        try:
            with open(os.devnull, "w") as quiet:
                os.dup2(quiet.fileno(), 1)
                code = _cli_main(["devmm", "replay", f.name, "--json"])
        finally:
            os.dup2(stdout, 1)
            os.close(stdout)
            os.unlink(f.name)
        CALLS += 1
        assert code in (0, 1, 2), code

    run()


def main() -> int:
    faulthandler.enable()
    # A hang prints every thread's stack before the parent's timeout hits.
    faulthandler.dump_traceback_later(int(os.environ.get("DEVMM_HOSTILE_TIMEOUT", "240")), exit=True)
    all_targets = targets()
    for label, target in all_targets:
        drive(label, target)
    drive_setters()
    drive_collected_failing_resources()
    drive_trace_replays()
    del SAMPLES[:]
    gc.collect()
    print(f"hostile targets: {len(all_targets)}")
    print(f"hostile calls: {CALLS}")
    for name, seen in UNEXPECTED.items():
        print(f"unexpected {name}:")
        for line in seen:
            print(f"  {line}")
    sys.stdout.flush()
    return 1 if UNEXPECTED else 0


if __name__ == "__main__":
    sys.exit(main())
