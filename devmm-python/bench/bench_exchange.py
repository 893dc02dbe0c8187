"""DLPack exchange through the C exchange API against `__dlpack__`, both directions (not a test).

Run from the repository root:

    .venv/bin/python devmm-python/bench/bench_exchange.py               # callgrind counts

Each statement exchanges one small tensor and drops the result, so the
producer's deleter runs inside it. The two paths of a direction exchange
the same tensor between the same two libraries; only how the consumer
reaches the producer differs. For `__dlpack__`, the producer is wrapped in
a proxy whose instance attributes are the producer's own bound
`__dlpack__` and `__dlpack_device__` (no extra Python frame): its type has
no `__dlpack_c_exchange_api__`, so the consumer calls `__dlpack__`.

1. devmm consumes apache-tvm-ffi's tensor through tvm-ffi's table
   (`devmm.from_dlpack(w)`, `w` tvm-ffi's `DLTensorTestWrapper`);
2. the same through `__dlpack__` (`devmm.from_dlpack(proxy(w))`);
3. tvm-ffi consumes a devmm tensor through devmm's table
   (`tvm_ffi.from_dlpack(t)`);
4. the same through `__dlpack__` (`tvm_ffi.from_dlpack(proxy(t))`).

The harness (a release build, callgrind at two loop lengths less an empty
loop's count) is `bench_empty.py`'s.
"""

import argparse
import os
import sys

import bench_empty

SETUP = """
import numpy as np
import tvm_ffi
import devmm

class Proxy:
    '''The producer's own bound __dlpack__ and __dlpack_device__, on a type without a table.'''

    def __init__(self, producer):
        self.__dlpack__ = producer.__dlpack__
        self.__dlpack_device__ = producer.__dlpack_device__

t = devmm.empty((2, 3), "float32")
w = tvm_ffi.core.DLTensorTestWrapper(tvm_ffi.from_dlpack(np.zeros((2, 3), dtype=np.float32)))
pw, pt = Proxy(w), Proxy(t)
"""

CASES = [
    ("devmm.from_dlpack(tvm-ffi tensor), C exchange API", "devmm.from_dlpack(w)"),
    ("devmm.from_dlpack(tvm-ffi tensor), __dlpack__", "devmm.from_dlpack(pw)"),
    ("tvm_ffi.from_dlpack(devmm tensor), C exchange API", "tvm_ffi.from_dlpack(t)"),
    ("tvm_ffi.from_dlpack(devmm tensor), __dlpack__", "tvm_ffi.from_dlpack(pt)"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="use the installed build (refused if debug)")
    parser.add_argument("--calls", type=int, default=20_000, help="extra calls measured under callgrind")
    args = parser.parse_args()
    bench_empty.prepare(args.no_build)
    counts, loop = bench_empty.net_instructions([(SETUP, stmt) for _, stmt in CASES], args.calls)
    print(f"{'exchange + release':<56} {'instructions':>12} {'vs __dlpack__':>14}")
    for i, ((name, _), n) in enumerate(zip(CASES, counts)):
        ratio = "" if i % 2 else f"{n / counts[i + 1]:.2f}x"
        print(f"{name:<56} {n:>12,.0f} {ratio:>14}")
    print(f"(per call, an empty loop's {loop:.0f} instructions subtracted)")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
