"""Instructions per allocate/deallocate pair called from Python (not a
test): what the ledger every Python-made resource sits behind costs,
next to the call itself.

Run from the repository root:

    .venv/bin/python devmm-python/bench/bench_checked_calls.py

It uses `bench_empty.py`'s harness: a release build first (`--no-build`
skips it and refuses a debug build), then each case under `valgrind
--tool=callgrind` at two loop lengths, printed per pair less an empty
loop's. The Rust side of the same comparison (`Checked(Malloc)` against
`MallocMemoryResource`) is `cargo bench -p devmm --bench instructions`.
"""

import argparse
import os
import sys

import bench_empty

STREAM = 'stream = devmm.runtime_for("cpu").default_stream(devmm.Device.from_string("cpu"))'
PAIR = "deallocate(allocate(64, stream), 64, stream)"

CASES = {
    "MallocMemoryResource().allocate(64) + deallocate": "devmm.mrs.cpu.MallocMemoryResource()",
    "StatisticsAdaptor(MallocMemoryResource())": "devmm.StatisticsAdaptor(devmm.mrs.cpu.MallocMemoryResource())",
}


def setup(mr: str) -> str:
    return f"import devmm; import devmm.mrs.cpu; mr = {mr}; {STREAM}; allocate, deallocate = mr.allocate, mr.deallocate"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="use the installed build (refused if debug)")
    parser.add_argument("--pairs", type=int, default=20_000, help="extra pairs measured under callgrind")
    args = parser.parse_args()
    bench_empty.prepare(args.no_build)
    counts, loop = bench_empty.net_instructions([(setup(mr), PAIR) for mr in CASES.values()], args.pairs)
    print(f"{'pair from Python':<55} {'instructions / pair':>20}")
    for name, per_pair in zip(CASES, counts):
        print(f"{name:<55} {per_pair:>20.0f}")
    print(f"(an empty loop's {loop:.0f} instructions subtracted)")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
