"""Typical use of the package, type-checked by `mypy --strict` in
scripts/test-python.sh: the shipped stubs must make it pass. (Not a pytest
module; its name does not start with test_.)"""

import numpy as np
import devmm
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
