#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: sets up what the tests
# need (idempotent), then the Rust checks and suites, then the Python package.
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings

step "Rust tests (unit, integration, doc)"
cargo test --workspace --locked
