"""Side-by-side cost of devmm.empty against numpy.empty and torch.empty (not a test).

Run from the repository root:

    .venv/bin/python devmm-python/bench/bench_empty.py                 # interleaved timings
    .venv/bin/python devmm-python/bench/bench_empty.py --instructions  # callgrind counts

It first builds and installs the package in release mode (`maturin develop
--release`, incremental after the first time), because the debug build
that `maturin develop` and `scripts/test.sh` give is 30-50x slower and
would measure nothing users run. `--no-build` skips that, and then the
script refuses to run on an extension that carries debug information (a
debug build).

Timings: each figure is the best of several rounds of a timeit loop, per
call; the cases take turns within each round, so load from other processes
hits them alike. Instructions: the script runs itself under `valgrind
--tool=callgrind` twice per case, with two loop lengths, and prints the
difference per call, less an empty loop's; unlike time, the count does not
move with the machine's load. `torch.empty` is measured where torch is
importable. `--only 2 4` measures only those cases (numbered from 1 as
listed, the baseline always kept). `bench_checked_calls.py` uses this
harness (`prepare`, `net_instructions`) for its own statements.
"""

import argparse
import os
import re
import site
import struct
import subprocess
import sys
import sysconfig
import tempfile
import timeit
from pathlib import Path

SETUP = "import numpy as np; import devmm"
# Imported only where a case uses it: under callgrind torch's import alone
# takes minutes.
TORCH_SETUP = SETUP + "; import torch"

# (name, statement, #16's targets as ratios to the baseline (numpy.empty):
# (instructions, time) or None, whether it needs torch). The first case is
# the baseline.
CASES = [
    ("numpy.empty((2, 3), dtype=numpy.float32)", "np.empty((2, 3), dtype=np.float32)", None, False),
    (
        'devmm.empty((2, 3), "float32", layout=RowMajor()) + .buffer.free()',
        'devmm.empty((2, 3), "float32", layout=devmm.RowMajor()).buffer.free()',
        (1.5, 2.0),
        False,
    ),
    (
        '  the same, .free() for .buffer.free()',
        'devmm.empty((2, 3), "float32", layout=devmm.RowMajor()).free()',
        None,
        False,
    ),
    (
        "  the same + np.from_dlpack(t)",
        't = devmm.empty((2, 3), "float32", layout=devmm.RowMajor()); np.from_dlpack(t); t.buffer.free()',
        (2.5, 3.5),
        False,
    ),
    (
        '  the same, .free() for .buffer.free()',
        't = devmm.empty((2, 3), "float32", layout=devmm.RowMajor()); np.from_dlpack(t); t.free()',
        None,
        False,
    ),
    ('devmm.empty((2, 3), "float32") (freed when dropped)', 'devmm.empty((2, 3), "float32")', None, False),
    (
        't = devmm.empty((2, 3), "float32"); t.free()',
        't = devmm.empty((2, 3), "float32"); t.free()',
        None,
        False,
    ),
    (
        "  the same + np.from_dlpack(t)",
        't = devmm.empty((2, 3), "float32"); np.from_dlpack(t); t.free()',
        None,
        False,
    ),
    ("torch.empty((2, 3), dtype=torch.float32)", "torch.empty((2, 3), dtype=torch.float32)", None, True),
]

ROOT = Path(__file__).resolve().parents[2]


def has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def build_release() -> None:
    """`maturin develop --release` into the running interpreter's venv."""
    venv = Path(sys.prefix)
    env = dict(os.environ, VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    print("building the release extension (maturin develop --release) ...", file=sys.stderr, flush=True)
    subprocess.run(
        [str(venv / "bin" / "maturin"), "develop", "--release", "--locked", "--quiet"],
        cwd=ROOT / "devmm-python",
        env=env,
        check=True,
    )
    # A first install adds a .pth file that this already running
    # interpreter has not read: read it, so the import below finds devmm.
    site.addsitedir(sysconfig.get_paths()["purelib"])


def elf_sections(path: Path) -> set[str]:
    """The section names of a 64-bit little-endian ELF file."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit(f"{path} is not a 64-bit little-endian ELF file; cannot tell its build")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def header(i: int) -> tuple[int, int]:
        name, = struct.unpack_from("<I", data, shoff + i * shentsize)
        offset, = struct.unpack_from("<Q", data, shoff + i * shentsize + 0x18)
        return name, offset

    _, strtab = header(shstrndx)
    names = set()
    for i in range(shnum):
        name, _ = header(i)
        end = data.index(b"\0", strtab + name)
        names.add(data[strtab + name : end].decode())
    return names


def refuse_debug_build() -> None:
    """Exits unless the imported extension is a release build (a debug
    build carries DWARF sections; the release profile strips them)."""
    import devmm._devmm as ext

    if ".debug_info" in elf_sections(Path(ext.__file__)):
        raise SystemExit(
            f"{ext.__file__} is a debug build (it has .debug_info), 30-50x slower than release: "
            "run without --no-build, or `maturin develop --release` first"
        )


def setup_for(statement: str) -> str:
    return TORCH_SETUP if "torch" in statement else SETUP


def best_seconds(statements: list[str], number: int, repeat: int) -> list[float]:
    """Per-call seconds of each statement: the best of `repeat` rounds, the
    statements interleaved within each round."""
    timers = [timeit.Timer(stmt, setup=setup_for(stmt)) for stmt in statements]
    best = [float("inf")] * len(timers)
    for _ in range(repeat):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(number=number) / number)
    return best


def child(setup: str, statement: str, calls: int) -> None:
    """The measured process: `setup`, a warm-up, then `calls` runs of
    `statement` inside a function (locals, as user code has them)."""
    namespace: dict[str, object] = {}
    exec(setup, namespace)  # noqa: S102 - the benchmarks' fixed statements
    exec(f"def run(n):\n    for _ in range(n):\n        {statement}\n", namespace)  # noqa: S102
    run = namespace["run"]
    run(1_000)  # type: ignore[operator]
    run(calls)  # type: ignore[operator]
    sys.stdout.flush()
    os._exit(0)


def instructions(setup: str, statement: str, calls: int) -> int:
    """Instructions callgrind counts for a whole child process."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.out",
             sys.executable, __file__, "--child", setup, statement, str(calls)],
            check=True, capture_output=True,
            # One BLAS thread: NumPy's spinning pool would add noise. One
            # hash seed: the two runs' start-ups, which the difference is
            # meant to cancel, then hash (and probe) alike; with a random
            # seed each, they differed by enough to move a per-call figure
            # by a hundred instructions from one run to the next.
            env=dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0"),
        )
        summary = re.search(r"^summary: (\d+)", Path(f"{out}/cg.out").read_text(), re.M)
    assert summary, "callgrind wrote no summary"
    return int(summary.group(1))


def per_call_instructions(setup: str, statement: str, calls: int) -> float:
    """Instructions per run of `statement`: the difference between `calls`
    and `2 * calls` runs, so start-up and `setup` cancel out."""
    return (instructions(setup, statement, 2 * calls) - instructions(setup, statement, calls)) / calls


def net_instructions(cases: list[tuple[str, str]], calls: int) -> tuple[list[float], float]:
    """Per-call instructions of each `(setup, statement)`, less an empty
    loop's, and the empty loop's."""
    loop = per_call_instructions("", "pass", calls)
    return [per_call_instructions(setup, stmt, calls) - loop for setup, stmt in cases], loop


def prepare(no_build: bool) -> None:
    """Builds and installs the release extension (unless `no_build`) and
    refuses a debug one: every benchmark here measures what users run."""
    if not no_build:
        build_release()
    refuse_debug_build()


def report(rows: list[tuple[str, float, float | None]], unit: str, scale: float, fmt: str) -> None:
    baseline = rows[0][1]
    print(f"{'operation':<70} {unit:>12} {'vs numpy':>9} {'target':>7}")
    for name, value, target in rows:
        ratio = value / baseline
        verdict = "" if target is None else f"{'<=' if ratio <= target else '> '}{target:g}x"
        print(f"{name:<70} {value * scale:>12{fmt}} {ratio:>8.2f}x {verdict:>7}")


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true", help="use the installed build (refused if debug)")
    parser.add_argument("--instructions", action="store_true", help="callgrind instruction counts, not time")
    parser.add_argument("--number", type=int, default=20_000, help="calls per timing round")
    parser.add_argument("--repeat", type=int, default=25, help="timing rounds; the best is reported")
    parser.add_argument("--calls", type=int, default=20_000, help="extra calls measured under callgrind")
    parser.add_argument("--only", type=int, nargs="+", metavar="N", help="only these cases (1-based; the baseline is always kept)")
    args = parser.parse_args()
    prepare(args.no_build)
    cases = [c for i, c in enumerate(CASES) if i == 0 or args.only is None or i + 1 in args.only]
    cases = [c for c in cases if not c[3] or has_torch()]
    if args.instructions:
        counts, loop = net_instructions([(setup_for(stmt), stmt) for _, stmt, _, _ in cases], args.calls)
        rows = [(name, n, targets and targets[0]) for (name, _, targets, _), n in zip(cases, counts)]
        report(rows, "instructions", 1, ",.0f")
        print(f"(per call, an empty loop's {loop:.0f} instructions subtracted)")
    else:
        seconds = best_seconds([stmt for _, stmt, _, _ in cases], args.number, args.repeat)
        rows = [(name, s, targets and targets[1]) for (name, _, targets, _), s in zip(cases, seconds)]
        report(rows, "per call us", 1e6, ".3f")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
