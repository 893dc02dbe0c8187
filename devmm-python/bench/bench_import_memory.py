"""Issue 34's Python rows, each beside its anchor in one run (not a test):
instructions to take another framework's tensor (`devmm.from_dlpack` of a
NumPy array against `np.from_dlpack` of it), and memory per live tensor
(`devmm.empty((2, 3), "float32")` against `np.empty`).

Run from the repository root:

    .venv/bin/python devmm-python/bench/bench_import_memory.py

It uses `bench_empty.py`'s harness: a release build first (`--no-build`
skips it and refuses a debug build), then each statement under `valgrind
--tool=callgrind` at two loop lengths, printed per call less an empty
loop's. Memory: a child process per kind keeps `--live` tensors alive and
reports the growth of its resident set per tensor (every byte the tensor
holds, Python objects and Rust heap alike, with the allocators' own
overhead), the list that holds them subtracted.
"""

import argparse
import os
import subprocess
import sys

import bench_empty

ARRAY = "import numpy as np; import devmm; a = np.empty((2, 3), dtype=np.float32)"
IMPORTS = {
    "np.from_dlpack(a)  (the anchor)": "np.from_dlpack(a)",
    "devmm.from_dlpack(a)": "devmm.from_dlpack(a)",
}
LIVE = {
    "np.empty((2, 3), dtype=np.float32)  (the anchor)": "np.empty((2, 3), dtype=np.float32)",
    'devmm.empty((2, 3), "float32")': 'devmm.empty((2, 3), "float32")',
    '  the same, layout=devmm.RowMajor()': 'devmm.empty((2, 3), "float32", layout=devmm.RowMajor())',
}


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_child(statement: str, live: int) -> None:
    """Prints the resident growth per live object made by `statement`."""
    import numpy as np  # noqa: F401 - the statements' namespace

    import devmm  # noqa: F401

    namespace = {"np": np, "devmm": devmm}
    make = eval(f"lambda: {statement}", namespace)  # noqa: S307 - the benchmark's fixed statements
    # Warm every cache and free list first, and size the list up front so
    # its growth is not counted.
    warm = [make() for _ in range(1_000)]
    del warm
    held: list[object] = [None] * live
    before = resident_bytes()
    for i in range(live):
        held[i] = make()
    after = resident_bytes()
    print((after - before) / live)
    sys.stdout.flush()
    os._exit(0)


def bytes_per_live(statement: str, live: int) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--memory-child", statement, str(live)],
        check=True, capture_output=True, text=True,
    ).stdout
    return float(out)


def table(title: str, unit: str, names: dict[str, str], values: list[float]) -> None:
    """One row per name, each beside the first (the anchor)."""
    print(f"{title:<55} {unit:>14} {'vs anchor':>10}")
    for name, value in zip(names, values):
        print(f"{name:<55} {value:>14,.0f} {value / values[0]:>9.2f}x")


def main() -> None:
    if sys.argv[1:2] == ["--memory-child"]:
        memory_child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="use the installed build (refused if debug)")
    parser.add_argument("--calls", type=int, default=20_000, help="extra calls measured under callgrind")
    parser.add_argument("--live", type=int, default=200_000, help="tensors kept alive for the memory figure")
    parser.add_argument("--skip-instructions", action="store_true", help="only the memory figures")
    args = parser.parse_args()
    bench_empty.prepare(args.no_build)
    if not args.skip_instructions:
        counts, loop = bench_empty.net_instructions([(ARRAY, stmt) for stmt in IMPORTS.values()], args.calls)
        table("import a NumPy (2, 3) float32 array", "instructions", IMPORTS, counts)
        print(f"(per call, an empty loop's {loop:.0f} instructions subtracted)")
    sizes = [bytes_per_live(stmt, args.live) for stmt in LIVE.values()]
    table("live tensor", "bytes each", LIVE, sizes)
    print(f"(resident growth over {args.live:,} live objects, per object)")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
