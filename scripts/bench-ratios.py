#!/usr/bin/env python3
"""Criterion's medians from the last `cargo bench -p devmm --bench allocation`
as a Markdown table of ratios to each group's baseline: the raw call devmm
wraps (posix_memalign+free, or the driver symbol called directly).

Usage: python3 scripts/bench-ratios.py [TARGET_DIR]   (default: $CARGO_TARGET_DIR or target)
"""
import json
import os
import sys
from pathlib import Path

BASELINES = ("posix_memalign+free", "cudaGetDeviceCount (direct)")


def main() -> int:
    target = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CARGO_TARGET_DIR", "target"))
    root = target / "criterion"
    groups: dict[str, dict[str, float]] = {}
    for bench in sorted(root.glob("**/new/benchmark.json")):
        meta = json.loads(bench.read_text())
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        name = meta.get("function_id") or meta.get("value_str")
        groups.setdefault(meta["group_id"], {})[name] = estimates["median"]["point_estimate"]
    if not groups:
        print(f"no criterion results under {root}; run cargo bench -p devmm --bench allocation first", file=sys.stderr)
        return 1
    print("| group | workload | median | × baseline |")
    print("| --- | --- | ---: | ---: |")
    for group, figures in groups.items():
        baseline = next((b for b in BASELINES if b in figures), None)
        base = figures.get(baseline)
        for name in sorted(figures, key=lambda n: (n != baseline, n)):
            ratio = f"{figures[name] / base:.2f}" if base else "n/a"
            print(f"| {group} | {name} | {figures[name]:.1f} ns | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
