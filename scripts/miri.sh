#!/usr/bin/env bash
# Runs the core's unit tests (cargo test -p devmm --lib) under miri, so
# undefined behaviour in devmm's `unsafe` code (the DLPack export, the
# NEP-49 handler, the sharded counters' atomics, the buffer's release
# protocol) is caught when it is written. Installs the nightly toolchain's
# miri when it is missing.
#
# What does not run: tests marked `#[cfg_attr(miri, ignore = "...")]`
# (they call foreign functions such as dlopen, or touch the file system,
# which miri cannot), and the ledger's tests, which fill tables of
# thousands of entries (minutes each under miri) in code with no `unsafe`
# of its own. Bounded by DEVMM_MIRI_TIMEOUT seconds (default 600).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "installing miri for the nightly toolchain"
    rustup toolchain install nightly --profile minimal --component miri,rust-src
    rustup component add --toolchain nightly miri rust-src
fi
cargo +nightly miri setup >/dev/null
timeout "${DEVMM_MIRI_TIMEOUT:-600}" \
    cargo +nightly miri test -p devmm --lib --locked -- --skip ledger::
