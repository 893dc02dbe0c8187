#!/usr/bin/env bash
# The GPU smoke run: runs what scripts/gpu-bundle.sh built (in .gpu-bundle/,
# or $GPU_BUNDLE) against the real CUDA runtime of this machine, with no
# build and no network, in well under six minutes, and prints a summary
# table. With $OUT set, the report goes to $OUT/gpu-smoke.json and the step
# logs to $OUT/gpu-smoke-logs/.
#
#   scripts/gpu-smoke.sh              # on the GPU machine
#   scripts/gpu-smoke.sh --rehearse   # here: the fake CUDA runtime stands in
#
# Steps (each with its own timeout):
#   info             devmm info: devices, name, compute capability, memory, pools
#   rust-discovery   the Rust GPU suites, libcudart found by discovery
#   rust-override    the same with DEVMM_CUDART_PATH naming it
#   rust-preloaded   the same with torch's libcudart already loaded (LD_PRELOAD):
#                    devmm must take that copy
#   wheel            the devmm wheel installed into a temporary target dir
#   py-conformance   devmm's conformance suites after `import torch`
#   last-error       a handled out-of-memory leaves cudaGetLastError clean
#   torch cupy jax numba
#                    DLPack round trips on non-default streams, with
#                    torch.cuda._sleep around the export and the release
#   sanitizer        compute-sanitizer --tool memcheck over the Rust suite
#
# In a rehearsal, discovery is pointed at the fake through CUDA_HOME (a
# `lib64/libcudart.so.13` that is the fake), the Rust suites run their
# hardware path over it (DEVMM_GPU_SMOKE=cuda), and the steps that need
# torch, CuPy, JAX, numba-cuda or compute-sanitizer are skipped when those
# are missing; on a GPU machine a missing one is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${GPU_BUNDLE:-$PWD/.gpu-bundle}
rehearse=0
[[ ${1:-} == --rehearse ]] && rehearse=1
python=${PYTHON:-python3}
budget=${DEVMM_SMOKE_BUDGET_S:-330}
started=$(date +%s)
work=$(mktemp -d)
logs=${OUT:+$OUT/gpu-smoke-logs}
logs=${logs:-$work/logs}
mkdir -p "$logs"
trap 'rm -rf "$work"' EXIT

if [[ ! -x $bundle/bin/gpu_runtimes ]]; then
    echo "error: no bundle at $bundle; run scripts/gpu-bundle.sh first (on a machine with Rust)" >&2
    exit 2
fi

names=() statuses=() seconds=() details=()
failed=0

# run NAME TIMEOUT SKIP_OK COMMAND...: runs a step, records its outcome. A
# command exiting 3 was skipped (a tool it needs is missing); that counts as
# a failure unless SKIP_OK is 1.
run() {
    local name=$1 limit=$2 skip_ok=$3
    shift 3
    local log="$logs/$name.log" status detail t0=$SECONDS code
    local left=$((budget - ($(date +%s) - started)))
    if ((left < 10)); then
        status=failed detail="not run: the ${budget}s budget is spent"
    else
        ((limit > left)) && limit=$left
        timeout --kill-after=5 "$limit" "$@" >"$log" 2>&1
        code=$?
        case $code in
            0) status=passed ;;
            3) status=skipped ;;
            124 | 137) status=failed detail="timed out after ${limit}s" ;;
            *) status=failed ;;
        esac
        if [[ -z ${detail:-} ]]; then
            # The last JSON line a Python check printed, else the test summary.
            detail=$(grep -o '"detail": "[^"]*"' "$log" | tail -1 | cut -d'"' -f4)
            [[ -z $detail ]] && detail=$(grep -E '^test result:' "$log" | awk '{p+=$4; f+=$6} END {if (NR) printf "%d passed, %d failed", p, f}')
            [[ -z $detail && $status == failed ]] && detail="exit $code: $(tail -1 "$log")"
        fi
        if [[ $status == skipped && $skip_ok != 1 ]]; then
            status=failed detail="needed here: $detail"
        fi
    fi
    [[ $status == failed ]] && failed=1
    names+=("$name") statuses+=("$status") seconds+=($((SECONDS - t0))) details+=("${detail:-}")
    printf '%-16s %-8s %4ss  %s\n' "$name" "$status" "$((SECONDS - t0))" "${detail:-}"
    [[ $status == failed ]] && tail -15 "$log" | sed 's/^/    | /'
    return 0
}


export DEVMM_TEST_FAKES_DIR=$bundle/fakes
export DEVMM_HIP_PATH=/nonexistent/libamdhip64.so
unset DEVMM_CUDART_PATH DEVMM_RUNTIME
if ((rehearse)); then
    mkdir -p "$work/cuda/lib64"
    ln -s "$bundle/fakes/libfake_cudart.so" "$work/cuda/lib64/libcudart.so.13"
    export CUDA_HOME=$work/cuda CUDA_PATH=$work/cuda
    skip_tools=1
else
    skip_tools=0
fi

echo "== devmm GPU smoke ($( ((rehearse)) && echo "rehearsal over the fake CUDA runtime" || echo "real driver"))"
sed -n 1p "$bundle/MANIFEST" | sed 's/^/   bundle: /'
command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | sed 's/^/   gpu: /'
echo "   python: $("$python" --version 2>&1)"
echo

# 1. devmm info, and the library discovery found.
run info 30 0 bash -c '"$1/bin/devmm" info && "$1/bin/devmm" info --json >"$2/info.json" &&
    DEVMM_SMOKE_INFO="$2/info.json" "$3" "$1/smoke/interop.py" info' _ "$bundle" "$work" "$python"
cudart=$("$python" -c '
import json, sys
rts = {r["name"]: r for r in json.load(open(sys.argv[1]))["runtimes"]}
print(rts["cuda"]["library"] if rts.get("cuda", {}).get("available") else "")
' "$work/info.json" 2>/dev/null)
echo "   libcudart by discovery: ${cudart:-(none)}"
[[ -n ${OUT:-} && -f $work/info.json ]] && cp "$work/info.json" "$OUT/devmm-info.json"

suites() { # the Rust GPU suites on CUDA, hardware path
    local b=$1
    DEVMM_GPU_SMOKE=cuda "$b/bin/gpu_runtimes" --test-threads=1 cuda &&
        DEVMM_GPU_SMOKE=cuda "$b/bin/gpu_discovery" --test-threads=1
}
export -f suites

# 2-4. The Rust suites three ways.
run rust-discovery 120 0 bash -c 'suites "$1"' _ "$bundle"
if [[ -n $cudart ]]; then
    run rust-override 120 0 env DEVMM_CUDART_PATH="$cudart" bash -c 'suites "$1"' _ "$bundle"
else
    run rust-override 1 0 false
fi
if ((rehearse)); then
    preload=$work/cuda/lib64/libcudart.so.13
    run rust-preloaded 120 0 env -u CUDA_HOME -u CUDA_PATH LD_PRELOAD="$preload" bash -c 'suites "$1"' _ "$bundle"
else
    preload=$("$python" -c '
import glob, os, torch
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
hits = sorted(glob.glob(os.path.join(lib, "libcudart.so*"))) or sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "*", "lib", "libcudart.so*")))
print(hits[0] if hits else "")' 2>/dev/null)
    if [[ -n $preload ]]; then
        run rust-preloaded 120 0 env LD_PRELOAD="$preload" bash -c 'suites "$1"' _ "$bundle"
    else
        run rust-preloaded 1 0 bash -c 'echo "{\"detail\": \"torch ships no libcudart of its own here\"}"; exit 3'
    fi
fi

# 5. The wheel, into a temporary target dir.
site=$work/site
run wheel 90 0 "$python" -m pip install --quiet --no-deps --no-index --disable-pip-version-check \
    --target "$site" "$bundle"/wheel/devmm-*.whl
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
smoke=$bundle/smoke/interop.py

# 6-11. Python checks.
# The frameworks reach the GPU through their own driver stack, which the
# fake runtime cannot stand in for: the rehearsal runs devmm's side only,
# even where torch and the others are installed (the test venv has them).
if ((rehearse)); then
    run py-conformance 120 0 "$python" "$smoke" conformance_without_torch
else
    run py-conformance 120 0 "$python" "$smoke" conformance
fi
run last-error 60 0 env DEVMM_SMOKE_CUDART="${cudart:-libcudart.so}" "$python" "$smoke" last_error
for lib in torch cupy jax numba; do
    if ((rehearse)); then
        run "$lib" 5 1 bash -c 'echo "{\"detail\": \"hardware only: $1 needs a real driver\"}"; exit 3' _ "$lib"
        continue
    fi
    # numba-cuda may have no DLPack import: its skip is reported, not fatal.
    ok=0
    [[ $lib == numba ]] && ok=1
    run "$lib" 120 "$ok" "$python" "$smoke" "$lib"
done

# 12. compute-sanitizer memcheck over the Rust runtime suite.
if command -v compute-sanitizer >/dev/null; then
    run sanitizer 150 0 env DEVMM_GPU_SMOKE=cuda compute-sanitizer --tool memcheck --error-exitcode 1 \
        "$bundle/bin/gpu_runtimes" --test-threads=1 cuda
else
    run sanitizer 1 "$skip_tools" bash -c 'echo "{\"detail\": \"compute-sanitizer is not installed\"}"; exit 3'
fi

total=$(($(date +%s) - started))
echo
echo "SUMMARY ($total s, $( ((rehearse)) && echo rehearsal || echo hardware))"
printf '  %-16s %-8s %6s  %s\n' STEP STATUS TIME DETAIL
for i in "${!names[@]}"; do
    printf '  %-16s %-8s %5ss  %s\n' "${names[$i]}" "${statuses[$i]}" "${seconds[$i]}" "${details[$i]}"
done
echo "  $( ((failed)) && echo FAIL || echo PASS)"

if [[ -n ${OUT:-} ]]; then
    {
        for i in "${!names[@]}"; do
            printf '%s\t%s\t%s\t%s\n' "${names[$i]}" "${statuses[$i]}" "${seconds[$i]}" "${details[$i]}"
        done
    } | "$python" -c '
import json, sys
steps = [dict(zip(("name", "status", "seconds", "detail"), line.rstrip("\n").split("\t"))) for line in sys.stdin]
for s in steps:
    s["seconds"] = int(s["seconds"])
rehearsal, total, failed = sys.argv[1] == "1", int(sys.argv[2]), sys.argv[3] == "1"
json.dump({"rehearsal": rehearsal, "seconds": total, "passed": not failed, "steps": steps}, sys.stdout, indent=2)
' "$rehearse" "$total" "$failed" >"$OUT/gpu-smoke.json"
    echo "  report: $OUT/gpu-smoke.json"
fi
exit $failed
