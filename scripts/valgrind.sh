#!/usr/bin/env bash
# Runs devmm's DLPack export, deleter and memory-resource tests under
# valgrind memcheck. Fails on any invalid read or write, any use of
# uninitialised memory, and any definitely-lost block.
#
#   scripts/valgrind.sh            # PROPTEST_CASES defaults to 16 here
#
# Needs: valgrind (apt-get install valgrind). Logs: $CARGO_TARGET_DIR/valgrind/.
set -euo pipefail
cd "$(dirname "$0")/.."

export PROPTEST_CASES="${PROPTEST_CASES:-16}"
target_dir="${CARGO_TARGET_DIR:-target}"
log_dir="$target_dir/valgrind"
mkdir -p "$log_dir"

command -v valgrind >/dev/null || {
    echo "valgrind is not installed: apt-get install -y valgrind" >&2
    exit 2
}

# The DLPack export, import, received-tensor and deleter tests, the typed host views, the
# binary with a devmm global allocator, the resource conformance suites,
# the resource, adaptor and buffer tests, the GPU runtimes over the fake
# drivers, the logging, tracing, tracking and statistics adaptors, the 8-thread
# soak, and the library's unit tests.
suites=(dlpack_export dlpack_import dlpack_received host_view global_alloc conformance cpu_resources adaptors logging_adaptor buffer gpu_runtimes trace tracking statistics soak)
build_log="$log_dir/build.log"
cargo test -p devmm --no-run --lib "${suites[@]/#/--test=}" 2>&1 | tee "$build_log" >&2
mapfile -t binaries < <(sed -n 's/^ *Executable .* (\(.*\))$/\1/p' "$build_log")
if [ "${#binaries[@]}" -ne $((${#suites[@]} + 1)) ]; then
    echo "expected $((${#suites[@]} + 1)) test binaries, found ${#binaries[@]}: ${binaries[*]}" >&2
    exit 2
fi

status=0
for binary in "${binaries[@]}"; do
    name="$(basename "$binary")"
    log="$log_dir/$name.log"
    echo "== valgrind $name (PROPTEST_CASES=$PROPTEST_CASES)"
    if valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite --track-origins=yes --suppressions=scripts/valgrind.supp \
        --log-file="$log" \
        "$binary" --test-threads=2 -q; then
        :
    else
        status=1
        echo "!! $name failed under valgrind; see $log" >&2
    fi
    grep -E "ERROR SUMMARY|definitely lost|Invalid (read|write)|suppressed:" "$log" | sed "s/^==[0-9]*== /   /" || true
done
exit "$status"
