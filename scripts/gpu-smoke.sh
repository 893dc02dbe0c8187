#!/usr/bin/env bash
# The GPU smoke run: runs what scripts/gpu-bundle.sh built (in .gpu-bundle/,
# or $GPU_BUNDLE) against the real CUDA runtime of this machine, with no
# build and no network, in well under six minutes, and prints a summary
# table. With $OUT set, the report goes to $OUT/gpu-smoke.json and the step
# logs, one file a step, to $OUT/gpu-smoke-logs.tgz (the device tool brings
# back at most 8 files).
#
#   scripts/gpu-smoke.sh              # on the GPU machine
#   scripts/gpu-smoke.sh --rehearse   # here: the fake CUDA runtime stands in
#
# Steps (each with its own timeout; "#N" is the defect of issue 29 a step
# checks on hardware, named in the JSON report's "checks" and "issue_29"):
#   info             devmm info: devices, name, compute capability, memory,
#                    pools; every runtime's availability and reason (#7)
#   cudart-wheel     the libcudart pip installed into $PYTHON is found from
#                    that interpreter's prefix alone (#7)
#   rust-discovery   the Rust GPU suites, libcudart found by discovery
#   per-thread capture default-pool
#                    the bundled gpu_semantics tests whose names contain
#                    per_thread (#1), capture (#5), pool (#6; fake only:
#                    those tests read the fake's call log, so on hardware
#                    the step is skipped)
#   fork own-pool    the gpu_runtimes tests cuda::a_child_forked (#4) and
#                    cuda::own_pool (#6, issue 30's figures: 3 x 64 MiB,
#                    the middle one freed). Adding a test with such a name
#                    is enough; no test matching is a failure on hardware
#                    and a skip in a rehearsal
#   prefetch         the gpu_runtimes test cuda::managed_memory_prefetch
#                    (issue 30: prefetch and advice on managed memory)
#   ipc-rust legacy-ipc
#                    the gpu_runtimes tests cuda::ipc_round_trip_with_another
#                    _process (an IPC pool's buffer) and cuda::ipc_handle_round
#                    _trip_with_another_process (cudaMalloc memory through
#                    cudaIpcGetMemHandle): a child process maps the buffer,
#                    reads the parent's bytes and writes its own (issue 30)
#   semantics-other  the rest of gpu_semantics
#   rust-override    the Rust suites with DEVMM_CUDART_PATH naming libcudart
#   rust-preloaded   the same with pip's libcudart (torch's) already loaded
#                    (LD_PRELOAD): devmm must take that copy
#   wheel            the devmm wheel installed into a temporary target dir
#   py-conformance   devmm's conformance suites after `import torch`
#   last-error       a handled out-of-memory leaves cudaGetLastError clean
#   ipc              issue 30: a buffer of a CudaAsyncMemoryResource with
#                    enable_ipc=True, mapped by a process started with spawn;
#                    both read and write the same bytes
#   torch cupy jax numba
#                    DLPack round trips on non-default streams, with
#                    torch.cuda._sleep around the export and the release
#   bridge-torch bridge-cupy bridge-numba bridge-rmm
#                    scripts/gpu-smoke-bridges.py, one bridge a step;
#                    bridge-numba: pinned arrays (#2), IPC refused (#3)
#   bridge-torch-pool
#                    a torch.cuda.use_mem_pool block over devmm after
#                    PyTorch started CUDA; its tensors freed after the
#                    block go back through devmm's statistics (issue 30)
#   sanitizer        compute-sanitizer --tool memcheck over the Rust suite,
#                    right after the Rust steps (the application process
#                    only, without the fork and IPC tests, whose children
#                    it would follow); "skipped" where the machine's kernel
#                    has no sanitizer support (gVisor: "Device not
#                    supported", error 999)
#
# The binaries and the wheel look for libcudart in the interpreter's
# prefix too (VIRTUAL_ENV is set to it: discovery searches its
# site-packages/nvidia/*/lib), so a pip-installed CUDA runtime is found.
# A framework or tool that is not installed is "skipped" with "not
# installed: NAME", never a failure; one that is installed but broken fails.
#
# In a rehearsal, discovery is pointed at the fake through CUDA_HOME (a
# `lib64/libcudart.so.13` that is the fake), the Rust suites run their
# hardware path over it (DEVMM_GPU_SMOKE=cuda), and the framework steps
# only report whether their framework is installed.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${GPU_BUNDLE:-$PWD/.gpu-bundle}
rehearse=0
[[ ${1:-} == --rehearse ]] && rehearse=1
python=${PYTHON:-python3}
budget=${DEVMM_SMOKE_BUDGET_S:-330}
started=$(date +%s)
work=$(mktemp -d)
logs=$work/logs
mkdir -p "$logs"
# The device tool brings back at most 8 files: the step logs travel as one
# archive, made on every exit.
finish() {
    [[ -n ${OUT:-} ]] && tar czf "$OUT/gpu-smoke-logs.tgz" -C "$work" logs
    rm -rf "$work"
}
trap finish EXIT

if [[ ! -x $bundle/bin/gpu_runtimes ]]; then
    echo "error: no bundle at $bundle; run scripts/gpu-bundle.sh first (on a machine with Rust)" >&2
    exit 2
fi
if ! pyprefix=$("$python" -c 'import sys; assert sys.version_info >= (3, 11), sys.version; print(sys.prefix)'); then
    echo "error: PYTHON=$python does not run, or is older than 3.11 (the wheel's floor)" >&2
    exit 2
fi

# What each step checks on hardware, by issue 29's defect numbers (#N).
declare -A checks=(
    [info]="#7: every runtime's availability, with the reason (discovery's attempts) when unavailable"
    [cudart-wheel]="#7: the libcudart pip installed into this Python is found from its prefix"
    [per-thread]="#1: per-thread default stream: hand-off and release across threads"
    [fork]="#4: fork() after the runtime started"
    [capture]="#5: stream capture (graphs)"
    [default-pool]="#6: the device's default memory pool left as the driver set it up"
    [own-pool]="#6: devmm's own memory pools and their figures"
    [prefetch]="issue 30: managed memory prefetched to a device and the host, and advised"
    [ipc-rust]="issue 30: an IPC pool's buffer mapped by a child process (Rust)"
    [legacy-ipc]="issue 30: cudaMalloc memory shared through cudaIpcGetMemHandle with a child process"
    [bridge-torch-pool]="issue 30: a torch.cuda.use_mem_pool block over devmm, its tensors freed through devmm after it"
    [bridge-numba]="#2 #3: numba.cuda.pinned_array over devmm's pinned memory; get_ipc_handle refused on cudaMallocAsync memory"
)

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
            detail=$("$python" -c '
import json, sys
for line in reversed(open(sys.argv[1], errors="replace").read().splitlines()):
    try:
        report = json.loads(line)
    except ValueError:
        continue
    if isinstance(report, dict) and "detail" in report:
        print(str(report["detail"]).replace("\n", " ").replace("\t", " "))
        break
' "$log")
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

# skip DETAIL: a step's command that reports a skip.
skip() {
    printf '{"detail": "%s"}\n' "$1"
    exit 3
}
export -f skip

export DEVMM_TEST_FAKES_DIR=$bundle/fakes
export DEVMM_HIP_PATH=/nonexistent/libamdhip64.so
unset DEVMM_CUDART_PATH DEVMM_RUNTIME
# Discovery searches the site-packages of $VIRTUAL_ENV: the interpreter's
# prefix, so the libcudart pip installed there is found (by the Rust
# binaries and by the wheel alike), whether or not a venv is active.
export VIRTUAL_ENV=$pyprefix
numba_env=()
if ((rehearse)); then
    mkdir -p "$work/cuda/lib64"
    ln -s "$bundle/fakes/libfake_cudart.so" "$work/cuda/lib64/libcudart.so.13"
    export CUDA_HOME=$work/cuda CUDA_PATH=$work/cuda DEVMM_SMOKE_REHEARSAL=1
else
    unset DEVMM_SMOKE_REHEARSAL
    # Numba compiles kernels with libNVVM, which it finds through CUDA_HOME
    # when no pip wheel ships it; only Numba's steps get it.
    [[ -z ${CUDA_HOME:-} && -d /usr/local/cuda/nvvm ]] && numba_env=(CUDA_HOME=/usr/local/cuda)
fi
export DEVMM_SMOKE_DEVMM=$bundle/bin/devmm
smoke=$bundle/smoke/interop.py

echo "== devmm GPU smoke ($( ((rehearse)) && echo "rehearsal over the fake CUDA runtime" || echo "real driver"))"
sed -n 1p "$bundle/MANIFEST" | sed 's/^/   bundle: /'
command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader | sed 's/^/   gpu: /'
echo "   python: $("$python" --version 2>&1) at $pyprefix"
# 4.4.0 is gVisor's kernel, where compute-sanitizer and CUDA IPC may not work.
echo "   kernel: $(uname -r)"
# The libcudart files pip put into this Python (nvidia-cuda-runtime, torch's).
pip_cudart=$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import interop; print("\n".join(interop.pip_libcudart()))' "$bundle/smoke")
echo "   libcudart from pip: ${pip_cudart:-(none)}"
echo

# 1. devmm info, and the library discovery found.
run info 30 0 bash -c '"$1/bin/devmm" info && "$1/bin/devmm" info --json >"$2/info.json" &&
    DEVMM_SMOKE_INFO="$2/info.json" "$3" "$4" info' _ "$bundle" "$work" "$python" "$smoke"
cudart=$("$python" -c '
import json, sys
rts = {r["name"]: r for r in json.load(open(sys.argv[1]))["runtimes"]}
print(rts["cuda"]["library"] if rts.get("cuda", {}).get("available") else "")
' "$work/info.json" 2>/dev/null)
echo "   libcudart by discovery: ${cudart:-(none)}"
[[ -n ${OUT:-} && -f $work/info.json ]] && cp "$work/info.json" "$OUT/devmm-info.json"
run cudart-wheel 30 1 "$python" "$smoke" cudart_wheel

suites() { # the Rust GPU suites on CUDA, hardware path
    local b=$1
    DEVMM_GPU_SMOKE=cuda "$b/bin/gpu_runtimes" --test-threads=1 cuda &&
        DEVMM_GPU_SMOKE=cuda "$b/bin/gpu_discovery" --test-threads=1
}
export -f suites

# picked BUNDLE REHEARSE SUITE ARGS...: the tests of the bundled SUITE
# (gpu_semantics, gpu_runtimes) that ARGS select (a name filter, or --skip
# filters). None selected: a failure on hardware, where each named defect
# must be checked; a skip in a rehearsal.
picked() {
    local b=$1 rehearsal=$2 suite=$3 out code
    shift 3
    out=$(DEVMM_GPU_SMOKE=cuda "$b/bin/$suite" --test-threads=1 "$@" 2>&1)
    code=$?
    printf '%s\n' "$out"
    if ((code == 0)) && grep -q '^running 0 tests' <<<"$out"; then
        ((rehearsal)) && skip "no tests matched: $suite $*"
        printf '{"detail": "no tests matched: %s %s"}\n' "$suite" "$*"
        exit 1
    fi
    exit $code
}
export -f picked

# 2. The Rust suites, libcudart by discovery; the defects of issue 29, by
# test name.
run rust-discovery 120 0 bash -c 'suites "$1"' _ "$bundle"
steps=(per-thread capture default-pool fork own-pool prefetch ipc-rust legacy-ipc)
suite_of=(gpu_semantics gpu_semantics gpu_semantics gpu_runtimes gpu_runtimes gpu_runtimes gpu_runtimes
    gpu_runtimes)
filters=(per_thread capture pool cuda::a_child_forked cuda::own_pool cuda::managed_memory_prefetch
    cuda::ipc_round_trip_with_another_process cuda::ipc_handle_round_trip_with_another_process)
skips=()
for i in "${!steps[@]}"; do
    if [[ ${steps[$i]} == default-pool ]] && ((!rehearse)); then
        # Its tests read the fake's call log: they would pass on hardware
        # without touching the GPU. devmm's table has no call that reads or
        # sets the default pool (no cudaDeviceGetDefaultMemPool).
        run default-pool 1 1 bash -c 'skip "fake only: its tests read the fake driver'"'"'s call log"'
    else
        run "${steps[$i]}" 60 "$rehearse" bash -c 'picked "$@"' _ "$bundle" "$rehearse" \
            "${suite_of[$i]}" "${filters[$i]}"
    fi
    [[ ${suite_of[$i]} == gpu_semantics ]] && skips+=(--skip "${filters[$i]}")
done
run semantics-other 60 0 bash -c 'picked "$@"' _ "$bundle" "$rehearse" gpu_semantics "${skips[@]}"

# compute-sanitizer memcheck over the Rust runtime suite, while the budget
# is fresh. The suite provokes API errors on purpose (out of memory,
# invalid handles) and checks every status itself, so API errors are not
# reported (--report-api-errors no); memcheck's own findings (invalid or
# misaligned accesses, hardware exceptions) still exit 1, as does a failed
# test. Only the test process is watched: the fork and IPC tests, whose
# children it would follow, have steps of their own. A machine whose kernel
# the tool does not support (gVisor) is a skip, not devmm's failure.
sanitizer=$(command -v compute-sanitizer)
for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    [[ -z $sanitizer && -n $root && -x $root/bin/compute-sanitizer ]] && sanitizer=$root/bin/compute-sanitizer
done
if [[ -n $sanitizer ]]; then
    # The tool's output goes to the step's log as it comes (tee), so a run
    # the step's time limit ends still leaves it there.
    run sanitizer 120 1 bash -c 'DEVMM_GPU_SMOKE=cuda "$1" --tool memcheck --report-api-errors no \
        --target-processes application-only --error-exitcode 1 "$2/bin/gpu_runtimes" --test-threads=1 cuda \
        --skip a_child_forked --skip ipc_ 2>&1 | tee "$3"
        code=${PIPESTATUS[0]}
        out=$(cat "$3")
        if ((code != 0)) && { grep -q "Device not supported" <<<"$out" ||
            { [[ $(uname -r) == 4.4.0* ]] && grep -qE "error 999|cudaErrorUnknown" <<<"$out"; }; }; then
            skip "the tool does not support this machine (kernel $(uname -r), gVisor)"
        fi
        printf "{\"detail\": \"%s\"}\n" "$(grep -o "ERROR SUMMARY: [^\"]*" <<<"$out" | tail -1)"
        exit $code' _ "$sanitizer" "$bundle" "$work/sanitizer.out"
else
    run sanitizer 1 1 bash -c 'skip "not installed: compute-sanitizer (CUDA toolkit)"'
fi

# 3. The Rust suites with the library named, and preloaded.
if [[ -n $cudart ]]; then
    run rust-override 120 0 env DEVMM_CUDART_PATH="$cudart" bash -c 'suites "$1"' _ "$bundle"
else
    run rust-override 1 0 bash -c 'skip "discovery found no usable libcudart (see info)"'
fi
if ((rehearse)); then
    preload=$work/cuda/lib64/libcudart.so.13
    run rust-preloaded 120 0 env -u CUDA_HOME -u CUDA_PATH LD_PRELOAD="$preload" bash -c 'suites "$1"' _ "$bundle"
elif [[ -n $pip_cudart ]]; then
    # torch's libcudart is pip's (nvidia-cuda-runtime): the first found.
    preload=$(head -1 <<<"$pip_cudart")
    run rust-preloaded 120 0 env LD_PRELOAD="$preload" bash -c 'suites "$1"' _ "$bundle"
else
    run rust-preloaded 1 1 bash -c 'skip "not installed: no libcudart from pip (torch, nvidia-cuda-runtime) to preload"'
fi

# 4. The wheel, into a temporary target dir.
site=$work/site
run wheel 90 0 "$python" -m pip install --quiet --no-deps --no-index --disable-pip-version-check \
    --target "$site" "$bundle"/wheel/devmm-*.whl
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}

# 5. Python checks.
# The frameworks reach the GPU through their own driver stack, which the
# fake runtime cannot stand in for: the rehearsal runs devmm's side only,
# and the framework steps only say whether each framework is installed.
if ((rehearse)); then
    run py-conformance 120 0 "$python" "$smoke" conformance_without_torch
else
    run py-conformance 120 0 "$python" "$smoke" conformance
fi
run last-error 60 0 env DEVMM_SMOKE_CUDART="${cudart:-libcudart.so}" "$python" "$smoke" last_error
# Issue 30: a buffer shared with a second process started with spawn.
run ipc 120 0 "$python" "$smoke" ipc
for lib in torch cupy jax numba; do
    extra=()
    [[ $lib == numba ]] && extra=("${numba_env[@]}")
    run "$lib" 120 1 env "${extra[@]}" "$python" "$smoke" "$lib"
done
for bridge in torch cupy numba rmm; do
    extra=()
    [[ $bridge == numba ]] && extra=("${numba_env[@]}")
    run "bridge-$bridge" 120 1 env "${extra[@]}" "$python" "$bundle/smoke/gpu-smoke-bridges.py" --one "$bridge"
done
run bridge-torch-pool 120 1 "$python" "$bundle/smoke/gpu-smoke-bridges.py" --one torch-pool

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
            printf '%s\t%s\t%s\t%s\t%s\n' "${names[$i]}" "${statuses[$i]}" "${seconds[$i]}" "${details[$i]}" "${checks[${names[$i]}]:-}"
        done
    } | "$python" -c '
import json, re, sys
steps = [dict(zip(("name", "status", "seconds", "detail", "checks"), line.rstrip("\n").split("\t"))) for line in sys.stdin]
issue_29 = {}
for s in steps:
    s["seconds"] = int(s["seconds"])
    for defect in re.findall(r"#(\d+)", s["checks"].split(":")[0]):
        issue_29.setdefault(defect, []).append(s["name"])
rehearsal, total, failed = sys.argv[1] == "1", int(sys.argv[2]), sys.argv[3] == "1"
report = {"rehearsal": rehearsal, "seconds": total, "passed": not failed, "steps": steps,
          "issue_29": dict(sorted(issue_29.items(), key=lambda kv: int(kv[0])))}
json.dump(report, sys.stdout, indent=2)
' "$rehearse" "$total" "$failed" >"$OUT/gpu-smoke.json"
    echo "  report: $OUT/gpu-smoke.json"
fi
exit $failed
