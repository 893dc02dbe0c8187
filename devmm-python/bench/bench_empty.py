"""Side-by-side latency of devmm.empty against numpy.empty (not a test).

Run from the repository root after a release build of the package:

    .venv/bin/python devmm-python/bench/bench_empty.py

Each figure is the best of several rounds of a timeit loop, per call; the
cases take turns within each round.
"""

import argparse
import timeit

import numpy as np

import devmm


def devmm_empty_free() -> None:
    devmm.empty((2, 3), "float32", layout=devmm.RowMajor()).buffer.free()


def devmm_empty_free_from_dlpack() -> None:
    t = devmm.empty((2, 3), "float32", layout=devmm.RowMajor())
    np.from_dlpack(t)
    t.buffer.free()


def numpy_empty() -> None:
    np.empty((2, 3), dtype=np.float32)


CASES = [
    ("numpy.empty((2, 3), dtype=numpy.float32)", numpy_empty, None),
    ('devmm.empty((2, 3), "float32", layout=RowMajor()) + .buffer.free()', devmm_empty_free, 3.0),
    ("  the same + np.from_dlpack(t)", devmm_empty_free_from_dlpack, 10.0),
]


def best_seconds(cases, number: int, repeat: int) -> list[float]:
    """Per-call seconds of each case: the best of `repeat` rounds, the cases
    interleaved within each round so that load on the machine hits all of
    them alike."""
    best = [float("inf")] * len(cases)
    for _ in range(repeat):
        for i, (_, fn, _) in enumerate(cases):
            best[i] = min(best[i], timeit.timeit(fn, number=number) / number)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20_000, help="calls per timing")
    parser.add_argument("--repeat", type=int, default=25, help="rounds; the best is reported")
    args = parser.parse_args()
    seconds = best_seconds(CASES, args.number, args.repeat)
    results = [(name, s, target) for (name, _, target), s in zip(CASES, seconds)]
    baseline = results[0][1]
    print(f"{'operation':<70} {'per call':>10} {'vs numpy':>9} {'target':>7}")
    for name, seconds, target in results:
        ratio = seconds / baseline
        verdict = "" if target is None else f"{'<=' if ratio <= target else '> '}{target:.0f}x"
        print(f"{name:<70} {seconds * 1e6:>8.3f}us {ratio:>8.2f}x {verdict:>7}")


if __name__ == "__main__":
    main()
