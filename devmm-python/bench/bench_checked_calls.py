"""Instructions per allocate/deallocate pair called from Python (not a
test): what the ledger every Python-made resource sits behind costs,
next to the call itself.

Run under callgrind from the repository root, after a release build of
the package (``maturin develop --release``):

    .venv/bin/python devmm-python/bench/bench_checked_calls.py

It runs itself under ``valgrind --tool=callgrind`` twice per case, with 0
and with ``--pairs`` pairs, and prints the difference per pair. The Rust
side of the same comparison (``Checked(Malloc)`` against
``MallocMemoryResource``) is ``cargo bench -p devmm --bench instructions``.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

CASES = {
    "MallocMemoryResource().allocate(64) + deallocate": "devmm.mrs.cpu.MallocMemoryResource()",
    "StatisticsAdaptor(MallocMemoryResource())": "devmm.StatisticsAdaptor(devmm.mrs.cpu.MallocMemoryResource())",
}


def child(setup: str, pairs: int) -> None:
    import devmm
    import devmm.mrs.cpu

    mr = eval(setup)  # noqa: S307 - the fixed expressions above
    stream = devmm.runtime_for("cpu").default_stream(devmm.Device.from_string("cpu"))
    allocate, deallocate = mr.allocate, mr.deallocate
    deallocate(allocate(64, stream), 64, stream)
    for _ in range(pairs):
        deallocate(allocate(64, stream), 64, stream)


def instructions(setup: str, pairs: int) -> int:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.out",
             sys.executable, __file__, "--child", setup, str(pairs)],
            check=True, capture_output=True,
        )
        with open(f"{out}/cg.out") as f:
            summary = re.search(r"^summary: (\d+)", f.read(), re.M)
    assert summary, "callgrind wrote no summary"
    return int(summary.group(1))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{'pair from Python':<55} {'instructions / pair':>20}")
    for name, setup in CASES.items():
        per_pair = (instructions(setup, args.pairs) - instructions(setup, 0)) / args.pairs
        print(f"{name:<55} {per_pair:>20.0f}")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
