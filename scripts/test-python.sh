#!/usr/bin/env bash
# Builds the devmm Python package into a fresh virtual environment and runs
# its tests: pytest (with the seed's examples and docs/python.md as
# doctests, and the GPU paths against the repository's fake drivers), the
# framework bridges' tests (devmm-python/tests-bridges), then mypy's
# stubtest of the generated stubs against the built module. Exits non-zero
# on the first failure.
#
# Environment: PYTHON (default python3) makes the venv; DEVMM_VENV (default
# .venv at the repository root) is reused when it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
venv="${DEVMM_VENV:-$root/.venv}"

step() { printf '\n==> %s\n' "$*"; }

step "virtual environment at $venv"
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "maturin>=1.16,<2" numpy pytest mypy \
    -r scripts/requirements-test.txt
# The frameworks the bridges are tested against (torch is the big one: see
# the file).
"$venv/bin/python" -m pip install --quiet -r scripts/requirements-bridges.txt

step "build and install the package (maturin develop)"
(
    cd devmm-python
    VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --locked --quiet
)

step "fake CUDA runtime and HIP libraries for the GPU paths"
cargo build --locked --quiet -p fake-cudart -p fake-hip
target_dir="$(cargo metadata --format-version 1 --no-deps \
    | "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
export DEVMM_TEST_FAKE_CUDART="$target_dir/debug/libfake_cudart.so"
export DEVMM_TEST_FAKE_HIP="$target_dir/debug/libfake_hip.so"

step "PyTorch's memory viewer, from the torch wheel (for the snapshot test)"
# torch/cuda/_memory_viz.py is pure Python and imports only the standard
# library, so PyTorch's own viewer runs without torch's native libraries or
# its CUDA dependencies. pip downloads the smallest wheel of a pinned
# release (macOS arm64, 81 MB, against about 900 MB for Linux's CUDA build;
# the file is the same in every wheel) and only that one file is kept.
viz="$venv/torch-memory-viz/_memory_viz.py"
if [ ! -f "$viz" ]; then
    wheels="$(mktemp -d)"
    "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: --platform macosx_11_0_arm64 --python-version 3.12 \
        "torch==2.11.0" -d "$wheels"
    mkdir -p "$(dirname "$viz")"
    "$venv/bin/python" - "$wheels" "$viz" <<'PY'
import pathlib, sys, zipfile
(wheel,) = pathlib.Path(sys.argv[1]).glob("torch-*.whl")
with zipfile.ZipFile(wheel) as z:
    pathlib.Path(sys.argv[2]).write_bytes(z.read("torch/cuda/_memory_viz.py"))
PY
    rm -rf "$wheels"
fi
export DEVMM_TEST_TORCH_MEMORY_VIZ="$viz"

step "pytest (API tests, seed examples and docs/python.md as doctests)"
"$venv/bin/python" -m pytest -q devmm-python/tests

step "pytest: the framework bridges (torch, cupy, numba, rmm, dask) over the fake CUDA runtime"
# A session of its own: it points devmm's runtimes at the fakes, which the
# suite above must not see. A framework missing from the venv fails its
# test module's collection: none is skipped.
"$venv/bin/python" -m pytest -q devmm-python/tests-bridges

step "stubtest: the generated stubs against the built module"
# From outside the source tree, so mypy sees only the installed package.
(
    cd "$(mktemp -d)"
    "$venv/bin/python" -m mypy.stubtest devmm \
        --allowlist "$root/devmm-python/stubtest-allowlist.txt" \
        --ignore-unused-allowlist
)

step "mypy --strict on typical use of the package (the stubs are usable)"
"$venv/bin/python" -m mypy --strict devmm-python/tests/typing_usage.py

step "Python package: all checks passed"
