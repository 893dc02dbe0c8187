"""Typical use of the package, type-checked by `mypy --strict` in
scripts/test-python.sh: the shipped stubs must make it pass. (Not a pytest
module; its name does not start with test_.)"""

import numpy as np
import devmm
import devmm.testing
from devmm.mrs.cpu import MallocMemoryResource

t = devmm.empty((2, 3), "float32", layout=devmm.RowMajor())
shape: tuple[int, ...] = t.shape
stats = devmm.StatisticsAdaptor(MallocMemoryResource())
with devmm.using_memory_resource(stats) as active:
    b = devmm.DeviceBuffer(64, mr=active)
n: int = stats.current_bytes + b.size
a = np.from_dlpack(t)
imported: devmm.Tensor = devmm.from_dlpack(a)
db = devmm.DeviceBuffer.to_device(b"abc")
host = db.copy_to_host()
devmm.copy_ptr_to_host(db.ptr, bytearray(3))
pool = devmm.StreamPool(4, devmm.StreamFlags.NON_BLOCKING)
default: bool = pool.get_stream().is_default()
interface: dict[str, object] = t.__array_interface__
live: int = devmm.foreign_memory()["live_bytes"]
with devmm.Device("cpu") as entered:
    index: int = entered.index

from devmm import statistics as st

with st.statistics("cpu") as scope:
    c = devmm.DeviceBuffer(8, device="cpu")
counted: int = scope.statistics.peak_bytes
current: st.Statistics | None = st.get_statistics()
records = st.ProfilerRecords()


@st.profiler(records=records)
def load(n: int) -> devmm.DeviceBuffer:
    return devmm.DeviceBuffer(n, device="cpu")


kept: devmm.DeviceBuffer = load(16)
table: str = records.report(ordered_by="memory_total")
tracked = devmm.TrackingAdaptor(MallocMemoryResource(), depth=8)
sites: list[tuple[str | None, int | None, str]] = [leak.frames[0] for leak in tracked.leaks()]
snapshot: bytes = tracked.torch_snapshot()
traced = devmm.TraceAdaptor(tracked, "/dev/null", format="jsonl", call_sites=4)
traced.flush()

# Every dtype spelling the functions accept type-checks.
for spelling in ("float32", np.float32, np.dtype("float32"), devmm.DType(2, 32), devmm.DType.from_any("f4")):
    devmm.empty((2,), spelling)
layout: devmm.Layout = devmm.Layout((2, 3), (3, 1), np.float32)
layout.validate((2, 3), 4)
contiguous: bool = layout.is_contiguous
view = devmm.Tensor(t.buffer, "float32", (2, 3), layout, offset=0)
offset: int = view.offset
like = devmm.empty_like(a, dtype=np.int16, layout=devmm.ColMajor())
perm: tuple[int, ...] = devmm.Permuted((1, 0)).permutation
bounds: tuple[int, int] = (devmm.DeviceOptimal().base_alignment, devmm.RowMajor().unit_stride_alignment)
padded: devmm.LayoutPolicy = devmm.Aligned(devmm.ColMajor())
resolved: devmm.Layout = padded((2, 3), "float32", "cpu")
rec = devmm.testing.RecordingMemoryResource(guaranteed_alignment=512, stream_ordered=False)
calls = rec.calls
called: int = len(calls)
same_log: bool = calls == [("allocate", 256, 64, devmm.DEFAULT)]
calls.clear()


class HostStream(devmm.Stream):
    """A stream written in Python (the seed's Stream subclassing)."""

    @property
    def handle(self) -> int:
        return 0

    def synchronize(self) -> None:
        pass

    def wait_raw(self, other_handle: int) -> None:
        pass


own = HostStream()
own.device = devmm.Device.from_string("cpu")
on_own = devmm.empty((2,), np.float32, stream=own)
for dtype in ("float32", np.float32, np.dtype("int8"), devmm.DType.from_string("bfloat16")):
    devmm.empty((1,), dtype)
names: tuple[str, ...] = devmm.runtime_names()
cpu_runtime = devmm.runtime_for("cpu")
copy_kind: int = devmm.CopyKind.HOST_TO_HOST  # an IntEnum, as the seed's


class TorchLikeDType:
    """Structurally a `torch.dtype` (the stubs' `_TorchDType` protocol): the
    stubs name torch's dtypes without depending on torch."""

    itemsize: int = 4
    is_floating_point: bool = True
    is_complex: bool = False
    is_signed: bool = True


def torch_like_dtypes() -> None:
    # Type-checked, never called: at run time only a real `torch.dtype`
    # passes (devmm reads its type's module and name).
    torch_like = TorchLikeDType()
    from_torch: devmm.DType = devmm.DType.from_any(torch_like)
    devmm.empty((2,), from_torch)
    devmm.empty((2,), torch_like)
    devmm.empty_like(t, dtype=torch_like)
    # The union is not `Any`: an object with none of those attributes is
    # refused (`--strict` reports the ignore if it ever stops being needed).
    devmm.empty((2,), object())  # type: ignore[arg-type]


def value_dataclasses() -> None:
    # Device and DType are dataclasses to the type checker too.
    import dataclasses

    from devmm._core import dtypes

    moved: devmm.Device = dataclasses.replace(devmm.Device.from_string("cuda:1"), index=0)
    kind: devmm.DeviceType = moved.type
    index: int = moved.index
    wide: devmm.DType = dataclasses.replace(dtypes.float32, lanes=4)
    fields: tuple[int, int, int, int] = (wide.code, wide.bits, wide.lanes, wide.itemsize)
    name: str = wide.name
    devmm.empty((2,), dtypes.bfloat16, device=moved)
    print(kind, index, fields, name)


def policy_dataclasses() -> None:
    # The native layout policies are dataclasses to the type checker too:
    # replace, fields, asdict, astuple and positional match patterns.
    import dataclasses

    padded = devmm.Aligned(devmm.RowMajor())
    wider: devmm.Aligned = dataclasses.replace(padded, unit_stride_alignment=64)
    names: list[str] = [field.name for field in dataclasses.fields(padded)]
    parameters: dict[str, object] = dataclasses.asdict(devmm.Permuted((1, 0)))
    stateless: tuple[object, ...] = dataclasses.astuple(devmm.RowMajor())
    policy: devmm.LayoutPolicy = wider
    match policy:
        case devmm.Aligned(inner, unit, base):
            pitch: int = unit + base
            print(inner, pitch)
        case devmm.Permuted(order):
            first: int = order[0]
            print(first)
        case devmm.RowMajor() | devmm.ColMajor() | devmm.DeviceOptimal():
            pass
    print(names, parameters, stateless)


class KindAndSize:
    """Structurally a NumPy-like dtype (the stubs' `_NumpyLikeDType`)."""

    kind: str = "f"
    itemsize: int = 4


devmm.empty((2,), KindAndSize())
from_kind: devmm.DType = devmm.DType.from_any(KindAndSize())


class CountingMalloc(MallocMemoryResource):
    """A shipped resource class, subclassed as the seed's plain classes are."""

    def __init__(self, *, alignment: int = 64) -> None:
        super().__init__(alignment=alignment)
        self.sizes: list[int] = []

    def allocate(self, nbytes: int, stream: devmm.Stream | devmm.StreamSentinel | None = None) -> int:
        self.sizes.append(nbytes)
        return super().allocate(nbytes, stream)


subclassed: devmm.Tensor = devmm.empty((2,), "uint8", mr=CountingMalloc(alignment=128))

from devmm._runtimes.cpu import CpuRuntime

# Calling a platform class returns the core's runtime, a DeviceRuntime.
host_mr: devmm.DeviceMemoryResource = CpuRuntime().default_memory_resource(devmm.Device.from_string("cpu"))


# Running out: the callback's and the hook's shapes, and the error's fields.
def drop_nothing(nbytes: int, attempt: int) -> bool:
    return attempt < 2


recovering: devmm.DeviceMemoryResource = devmm.FailureCallbackAdaptor(MallocMemoryResource(), drop_nothing)


def report(error: BaseException) -> None:
    if isinstance(error, devmm.OutOfMemoryError):
        device: devmm.Device = error.device
        sizes: tuple[int, int | None] = (error.nbytes, error.largest_fit)
        pool: st.PoolStatistics | None = error.pool
        print(device, sizes, error.chain, pool.fragmentation_bytes if pool else None)


with devmm.on_out_of_memory(report) as registered:
    still: bool = registered.remove()
