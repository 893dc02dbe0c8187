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
rec = devmm.testing.RecordingMemoryResource(guaranteed_alignment=512, stream_ordered=False)
calls: list[tuple[str, int | None, int, devmm.Stream]] = rec.calls
