#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: sets up what the tests
# need (idempotent), then the Rust checks and suites, then the Python package.
# Exits non-zero on the first failure. Each suite's output also goes to
# target/test-logs/; the run ends with one line per suite, the total
# `N passed, M failed`, and fails if it changed anything git sees.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# Snapshots (insta, trybuild) are compared, never rewritten, by the suite.
export INSTA_UPDATE=no
unset TRYBUILD

logs="$PWD/target/test-logs"
rm -rf "$logs"
mkdir -p "$logs"
# What git sees before the run; the last suite checks that it is unchanged
# (on a clean clone: `git status --porcelain` empty).
git_state() { git status --porcelain --untracked-files=all && git diff HEAD | sha256sum; }
git_before="$(git_state)"

suite_names=() suite_passed=() suite_failed=() suite_skipped=()

# count KIND LOG: prints "PASSED FAILED SKIPPED" read from a suite's output.
# cargo: libtest's `test result:` lines; python: pytest's closing lines and
# mypy's `Success:`; fuzz: a line per target; smoke: the rehearsal's table;
# checks: a `==> passed:` line per command (see `check`).
count() {
    case $1 in
        # A test run with --nocapture that prints `skipped: why` (debian_hip)
        # passed in libtest's eyes; it counts as skipped here.
        cargo)
            awk '/^test result: /{p+=$4; f+=$6; s+=$8} /(^|\.\.\. )skipped: /{p--; s++}
                 END {print p+0, f+0, s+0}' "$2"
            ;;
        python)
            {
                grep -E ' in [0-9.]+s' "$2" | grep -v '^test result:' \
                    | grep -oE '(^|[ =,])[0-9]+ (passed|failed|skipped|errors?)' || true
                grep -E '^Success: no issues found' "$2" | sed 's/.*/1 passed/' || true
            } | awk '$2=="passed"{p+=$1} $2=="failed"||$2~/^error/{f+=$1} $2=="skipped"{s+=$1}
                     END {print p+0, f+0, s+0}'
            ;;
        fuzz) awk '/^fuzz [^ :]+: .*crashes: 0$/{p++} END {print p+0, 0, 0}' "$2" ;;
        smoke)
            awk '/^SUMMARY \(/{t=1; next} t && $2=="passed"{p++} t && $2=="failed"{f++}
                 t && $2=="skipped"{s++} END {print p+0, f+0, s+0}' "$2"
            ;;
        checks) awk '/^==> passed: /{p++} END {print p+0, 0, 0}' "$2" ;;
    esac
}

# check COMMAND...: runs a command whose success is the whole result.
check() {
    "$@"
    echo "==> passed: $*"
}

# suite NAME KIND COMMAND...: runs a suite with its output shown and kept in
# target/test-logs, and records its counts. A failing suite ends the run.
suite() {
    local name=$1 kind=$2 status passed failed skipped
    shift 2
    local log
    log="$logs/$(printf '%02d' $((${#suite_names[@]} + 1)))-${name%%:*}.log"
    step "$name"
    set +e
    (
        set -e
        "$@"
    ) 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    set -e
    read -r passed failed skipped < <(count "$kind" "$log")
    if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
        failed=1 # failed before any count could be read (a build, a crash)
    elif [ "$status" -eq 0 ] && [ "$passed" -eq 0 ]; then
        echo "!! $name: no passed test could be read from its output ($log)" >&2
        status=1 failed=1
    fi
    suite_names+=("${name%%:*}") suite_passed+=("$passed") suite_failed+=("$failed")
    suite_skipped+=("$skipped")
    [ "$status" -eq 0 ] || exit "$status"
}

# One line per suite run, then the total, alone on its line.
summary() {
    local status=$? i total_passed=0 total_failed=0
    trap - EXIT
    printf '\n==> summary (logs in %s)\n' "$logs"
    for i in "${!suite_names[@]}"; do
        printf '%-12s %6d passed, %d failed, %d skipped\n' "${suite_names[$i]}" \
            "${suite_passed[$i]}" "${suite_failed[$i]}" "${suite_skipped[$i]}"
        total_passed=$((total_passed + suite_passed[i]))
        total_failed=$((total_failed + suite_failed[i]))
    done
    if [ "$status" -ne 0 ] && [ "$total_failed" -eq 0 ]; then
        echo "set-up       failed (exit $status), before the suites"
        total_failed=1
    fi
    echo "$total_passed passed, $total_failed failed"
    exit "$status"
}
trap summary EXIT

step "set-up: .venv with the test tools (scripts/requirements-test.txt)"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt
# CUDA 12's headers and library, apart from the venv (see the file); again
# only when the file changed.
if ! cmp -s scripts/requirements-cuda12.txt .venv/cuda-12/requirements.txt; then
    rm -rf .venv/cuda-12
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
        --target .venv/cuda-12 -r scripts/requirements-cuda12.txt
    cp scripts/requirements-cuda12.txt .venv/cuda-12/requirements.txt
fi
export PATH="$PWD/.venv/bin:$PATH"

step "set-up: Debian packages only root can install (chromium, valgrind; libamdhip64-5 optional)"
# Chromium runs the browser test of devmm plot, valgrind the memcheck
# suites: without them (and not root to install them) the run stops here.
root=0
[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && root=1
missing=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
    || command -v google-chrome >/dev/null 2>&1 || missing+=(chromium)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
# Debian's HIP runtime, without an AMD kernel driver, for devmm info's ROCm
# test: without it that test reports ROCm's reason as skipped.
hip=1
ldconfig -p | grep 'libamdhip64\.so\.5 ' >/dev/null || hip=0
if [ "${#missing[@]}" -gt 0 ] || { [ "$hip" = 0 ] && [ "$root" = 1 ]; }; then
    if [ "$root" = 1 ]; then
        apt-get update -qq
        [ "${#missing[@]}" -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libamdhip64-5 >/dev/null 2>&1 \
            || echo "libamdhip64-5 is not available here: the ROCm test reports why it is skipped"
    else
        echo "!! needed, and only root can install it: ${missing[*]}" >&2
        echo "   sudo apt-get install -y ${missing[*]} libamdhip64-5   # then run scripts/test.sh again" >&2
        exit 1
    fi
elif [ "$hip" = 0 ]; then
    echo "not root: libamdhip64-5 stays uninstalled and the ROCm test reports why it is skipped"
fi

step "set-up: the nightly toolchain (miri, cargo-fuzz), through rustup"
command -v rustup >/dev/null 2>&1 || {
    echo "!! rustup is needed for the nightly toolchain of miri and cargo-fuzz: https://rustup.rs" >&2
    exit 1
}

lints() {
    check cargo fmt --all --check
    check cargo clippy --workspace --all-targets --locked -- -D warnings
    # The optional interop features, together (cudarc, dlpark, allocator-api2).
    check cargo clippy -p devmm --features cudarc,dlpark,allocator-api2 --all-targets --locked -- -D warnings
    # Every intra-doc link resolves, and none points at a private item.
    check env RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
}
suite "lints: format and clippy" checks lints

rust_tests() {
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
}
suite "rust: Rust tests (unit, integration, doc)" cargo rust_tests

suite "miri: the core's unit tests, for undefined behaviour in unsafe code (nightly; a few minutes)" \
    cargo bash scripts/miri.sh

suite "valgrind: DLPack export, deleter and resource tests under valgrind memcheck" \
    cargo bash scripts/valgrind.sh

suite "fuzz: every parser and validator for a short fixed time (cargo-fuzz, nightly)" \
    fuzz bash scripts/fuzz.sh

suite "python: build into .venv, pytest, seed examples, docs/python.md, stubtest, mypy" \
    python bash scripts/test-python.sh

suite "valgrind-py: Python DLPack lifetime, NEP-49 and free/retry tests under valgrind memcheck" \
    python bash scripts/valgrind-python.sh

suite "release: crates package and verify; sdist builds with pip; manylinux2014 wheel (auditwheel)" \
    checks bash scripts/release-check.sh

rehearsal() {
    GPU_BUNDLE="$PWD/target/gpu-bundle-rehearsal" GPU_BUNDLE_PROFILE=debug bash scripts/gpu-bundle.sh
    GPU_BUNDLE="$PWD/target/gpu-bundle-rehearsal" PYTHON="$PWD/.venv/bin/python" bash scripts/gpu-smoke.sh --rehearse
}
suite "gpu-smoke: GPU smoke run rehearsed over the fake CUDA runtime (debug bundle, about a minute)" \
    smoke rehearsal

unchanged() {
    if [ "$(git_state)" != "$git_before" ]; then
        echo "!! the run changed what git sees; git status --porcelain:" >&2
        git status --porcelain --untracked-files=all >&2
        return 1
    fi
    echo "==> passed: git status --porcelain is $([ -z "$(git status --porcelain)" ] && echo empty || echo 'as before the run')"
}
suite "clean: the run left the clone as it found it (git status --porcelain)" checks unchanged
