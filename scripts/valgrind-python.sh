#!/usr/bin/env bash
# Runs the Python DLPack lifetime, NEP-49 and free/retry tests under
# valgrind memcheck, in one interpreter with CPython's allocator replaced
# by malloc (PYTHONMALLOC=malloc) so memcheck sees every block. Fails on
# any invalid read or write, any use of uninitialised memory and any
# definitely-lost block that scripts/valgrind-python.supp does not name.
#
#   scripts/valgrind-python.sh        # needs .venv with devmm built into it
#
# Bounded: DEVMM_VALGRIND_PYTHON_TIMEOUT seconds (default 900). Log:
# target/valgrind/python.log.
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${DEVMM_VENV:-$PWD/.venv}"
log_dir="${CARGO_TARGET_DIR:-target}/valgrind"
mkdir -p "$log_dir"
log="$log_dir/python.log"

command -v valgrind >/dev/null || {
    echo "valgrind is not installed: apt-get install -y valgrind" >&2
    exit 2
}

status=0
PYTHONMALLOC=malloc timeout "${DEVMM_VALGRIND_PYTHON_TIMEOUT:-900}" \
    valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite --num-callers=40 \
    --suppressions=scripts/valgrind-python.supp --log-file="$log" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    devmm-python/tests/test_dlpack.py \
    devmm-python/tests/test_numpy_integration.py \
    "devmm-python/tests/test_misuse.py::test_a_failed_free_leaves_the_buffer_live_for_a_retry" \
    "devmm-python/tests/test_misuse.py::test_a_resource_holding_its_own_buffer_is_collected" \
    "devmm-python/tests/test_misuse.py::test_a_callback_resource_whose_closure_holds_it_is_collected" \
    "devmm-python/tests/test_misuse.py::test_a_collected_cycle_gives_its_memory_back_through_the_whole_resource" \
    "devmm-python/tests/test_misuse.py::test_a_tensor_collected_while_its_buffer_object_lives_leaves_the_memory_to_it" \
    "devmm-python/tests/test_misuse.py::test_a_python_resource_goes_with_its_last_reference_once_its_memory_is_back" \
    "devmm-python/tests/test_misuse.py::test_numpy_handler_resource_never_hands_one_block_out_twice" \
    || status=$?
grep -E "ERROR SUMMARY|definitely lost|Invalid (read|write)|suppressed:" "$log" | sed "s/^==[0-9]*== /   /" || true
if [ "$status" -ne 0 ]; then
    echo "!! the Python tests failed under valgrind (status $status); see $log" >&2
fi
exit "$status"
