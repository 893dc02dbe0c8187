#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: sets up what the tests
# need (idempotent), then the Rust checks and suites, then the Python package.
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# Snapshots (insta, trybuild) are compared, never rewritten, by the suite.
export INSTA_UPDATE=no
unset TRYBUILD

step "set-up: .venv with the test tools (scripts/requirements-test.txt)"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt
export PATH="$PWD/.venv/bin:$PATH"

step "set-up: headless Chromium for the browser test of devmm plot (Debian's chromium)"
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

step "set-up: Debian's HIP runtime without an AMD kernel driver, for devmm info's ROCm test"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
    && ! ldconfig -p | grep 'libamdhip64\.so\.5 ' >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libamdhip64-5 >/dev/null
fi

step "format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The optional interop features, together (cudarc, dlpark, allocator-api2).
cargo clippy -p devmm --features cudarc,dlpark,allocator-api2 --all-targets --locked -- -D warnings

step "Rust tests (unit, integration, doc)"
cargo test --workspace --locked
# The cudarc interop compiles both directions (cudarc loads CUDA lazily).
cargo test -p devmm --features cudarc --doc --locked interop
# dlpark both ways, Vec through allocator-api2 (tests and the module docs).
cargo test -p devmm --features dlpark,allocator-api2 --locked --test interop_features
cargo test -p devmm --features dlpark,allocator-api2 --doc --locked interop
# ROCm over Debian's HIP runtime is unavailable, with its reason (prints
# why it is skipped where the package could not be installed).
cargo test -p devmm-cli --locked --test debian_hip -- --nocapture
# The benchmarks build in the test profile and run each workload once
# (the figures come from `cargo bench`, never from tests).
cargo test -p devmm --benches --locked

step "miri: the core's unit tests, for undefined behaviour in unsafe code (nightly; a few minutes)"
bash scripts/miri.sh

step "DLPack export, deleter and resource tests under valgrind memcheck"
bash scripts/valgrind.sh

step "fuzz: every parser and validator for a short fixed time (cargo-fuzz, nightly)"
bash scripts/fuzz.sh

step "Python package: build into .venv, pytest, seed examples, docs/python.md, stubtest"
bash scripts/test-python.sh

step "Python DLPack lifetime, NEP-49 and free/retry tests under valgrind memcheck"
bash scripts/valgrind-python.sh

step "GPU smoke run rehearsed over the fake CUDA runtime (debug bundle, about a minute)"
GPU_BUNDLE="$PWD/target/gpu-bundle-rehearsal" GPU_BUNDLE_PROFILE=debug bash scripts/gpu-bundle.sh
GPU_BUNDLE="$PWD/target/gpu-bundle-rehearsal" PYTHON="$PWD/.venv/bin/python" bash scripts/gpu-smoke.sh --rehearse
