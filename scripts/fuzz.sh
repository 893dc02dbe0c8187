#!/usr/bin/env bash
# Runs every libFuzzer target in fuzz/ (cargo-fuzz, nightly toolchain) for
# a short fixed time each, starting from the corpus kept in
# fuzz/corpus/TARGET. New inputs go to target/fuzz-corpus/TARGET, so a run
# leaves the repository clean; a crash fails the run and leaves its input
# under fuzz/artifacts/TARGET.
#
#   scripts/fuzz.sh                     # DEVMM_FUZZ_SECONDS=12 per target
#   DEVMM_FUZZ_SECONDS=300 scripts/fuzz.sh layout_resolve
#
# Needs the nightly toolchain (rustup toolchain install nightly) and
# cargo-fuzz. Where cargo-fuzz is missing this script installs it under the
# clone, in target/tools (a few minutes), never in the user's cargo bin. The
# fuzz builds go to target/fuzz; fuzz/Cargo.lock is checked, never
# rewritten (a stale one fails the run: `cd fuzz && cargo update --workspace`).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
seconds="${DEVMM_FUZZ_SECONDS:-12}"
tools="$root/target/tools"
export PATH="$tools/bin:$PATH"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz into $tools"
    cargo install --locked --root "$tools" cargo-fuzz --version 0.13.2
fi

cd fuzz
# cargo-fuzz has no --locked of its own: resolve with --locked first, so a
# lock that would need rewriting fails here instead of being rewritten.
cargo +nightly metadata --locked --format-version 1 >/dev/null
# Optimised, with debug assertions (and so overflow checks) on.
cargo +nightly fuzz build --target-dir "$root/target/fuzz" 2>&1 | tail -1
mapfile -t targets < <(if [ "$#" -gt 0 ]; then printf '%s\n' "$@"; else cargo +nightly fuzz list; fi)
total_runs=0
for target in "${targets[@]}"; do
    scratch="$root/target/fuzz-corpus/$target"
    log="$root/target/fuzz-corpus/$target.log"
    mkdir -p "$scratch" "corpus/$target"
    if ! cargo +nightly fuzz run --target-dir "$root/target/fuzz" "$target" "$scratch" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
        tail -40 "$log" >&2
        echo "!! fuzz target $target failed; the input is under fuzz/artifacts/$target" >&2
        exit 1
    fi
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    total_runs=$((total_runs + ${runs:-0}))
    echo "fuzz $target: ${runs:-0} inputs in ${seconds}s, crashes: 0"
done
echo "fuzz: ${#targets[@]} targets, $total_runs inputs, $((${#targets[@]} * seconds))s, crashes: 0"
