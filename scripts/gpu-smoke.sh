#!/usr/bin/env bash
# Runs devmm's runtime, resource and stream suites against the real GPU
# driver of this machine, then prints a summary. One command, building
# included; well under ten minutes on a machine with a GPU:
#
#   scripts/gpu-smoke.sh            # CUDA (and ROCm too, when HIP is found)
#   scripts/gpu-smoke.sh cuda       # one platform
#
# The suites are devmm/tests/gpu_runtimes.rs (runtime, streams, copies,
# resources, the mr_conformance contract) and devmm/tests/gpu_discovery.rs
# (registry, buffers, dlpack_conformance, a DLPack stream handoff). On CI
# they run against the fake drivers from tests/; with
# DEVMM_GPU_SMOKE=<platform> their tests for that platform run against the
# real library (found by its usual names, or by DEVMM_CUDART_PATH /
# DEVMM_HIP_PATH), leaving out the call-log checks and saying which
# fake-only tests were skipped.
set -uo pipefail

cd "$(dirname "$0")/.."
platforms=("$@")
log_dir=$(mktemp -d)
started=$(date +%s)

find_library() { # NAME GLOB... : the first match of the globs, or ldconfig's
    local name=$1; shift
    local found
    for pattern in "$@"; do
        for found in $pattern; do
            [[ -e $found ]] && { echo "$found"; return 0; }
        done
    done
    found=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 ~ "^"n {print $NF; exit}')
    [[ -n $found ]] && echo "$found"
}

if [[ -z ${DEVMM_CUDART_PATH:-} ]]; then
    cudart=$(find_library libcudart.so \
        "${CUDA_HOME:-/usr/local/cuda}/lib64/libcudart.so*" \
        "/usr/local/cuda/lib64/libcudart.so*" \
        "/usr/local/lib/python3*/dist-packages/nvidia/cuda_runtime/lib/libcudart.so*" \
        "/usr/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so*")
    [[ -n $cudart ]] && export DEVMM_CUDART_PATH=$cudart
fi
if [[ -z ${DEVMM_HIP_PATH:-} ]]; then
    hip=$(find_library libamdhip64.so "${ROCM_PATH:-/opt/rocm}/lib/libamdhip64.so*")
    [[ -n $hip ]] && export DEVMM_HIP_PATH=$hip
fi
if [[ ${#platforms[@]} -eq 0 ]]; then
    platforms=(cuda)
    [[ -n ${DEVMM_HIP_PATH:-} ]] && platforms+=(rocm)
fi

echo "== devmm GPU smoke: ${platforms[*]}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | sed 's/^/   gpu: /'
command -v rocm-smi >/dev/null && rocm-smi --showproductname 2>/dev/null | grep -i 'card' | sed 's/^/   gpu: /'
echo "   libcudart: ${DEVMM_CUDART_PATH:-(by name: libcudart.so, .so.12, .so.11.0)}"
echo "   libamdhip64: ${DEVMM_HIP_PATH:-(by name: libamdhip64.so, .so.6, .so.5)}"

echo "== build"
if ! timeout 420 cargo test -p devmm --test gpu_runtimes --test gpu_discovery --no-run >"$log_dir/build.log" 2>&1; then
    tail -40 "$log_dir/build.log"
    echo "SUMMARY: build failed (log: $log_dir/build.log)"
    exit 1
fi

status=0
summary=()
for platform in "${platforms[@]}"; do
    echo "== $platform against the real driver"
    DEVMM_GPU_SMOKE=$platform timeout 300 cargo test -p devmm --test gpu_runtimes --test gpu_discovery -- \
        --test-threads=1 --nocapture "$platform" >"$log_dir/$platform.log" 2>&1
    code=$?
    grep -E '^test |skipped on hardware|panicked|FAILED' "$log_dir/$platform.log" | sed 's/^/   /'
    passed=$(grep -E '^test result:' "$log_dir/$platform.log" | awk '{p += $4} END {print p + 0}')
    failed=$(grep -E '^test result:' "$log_dir/$platform.log" | awk '{f += $6} END {print f + 0}')
    skipped=$(grep -c 'skipped on hardware' "$log_dir/$platform.log")
    [[ $code -ne 0 ]] && status=1
    summary+=("$platform: $passed passed, $failed failed (exit $code), $skipped fake-only test(s) skipped")
done

echo "== cudarc interop (compiles)"
if timeout 300 cargo test -q -p devmm --features cudarc --doc interop >"$log_dir/cudarc.log" 2>&1; then
    summary+=("cudarc: builds and its examples compile")
else
    status=1
    summary+=("cudarc: FAILED (log: $log_dir/cudarc.log)")
fi

echo
echo "SUMMARY ($(( $(date +%s) - started ))s, logs in $log_dir)"
for line in "${summary[@]}"; do echo "  $line"; done
[[ $status -eq 0 ]] && echo "  PASS" || echo "  FAIL"
exit $status
