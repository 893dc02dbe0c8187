#!/usr/bin/env bash
# Builds, here, everything scripts/gpu-smoke.sh needs on a GPU machine that
# has no Rust toolchain and no network, into the ignored folder .gpu-bundle/:
#
#   bin/      the Rust GPU suites (gpu_runtimes, gpu_discovery, gpu_semantics)
#             and the devmm command, release builds, stripped
#   fakes/    the fake driver libraries (the fake-only tests, the rehearsal)
#   wheel/    the devmm Python package, a CPython abi3 wheel for 3.11 and
#             later (pyo3's abi3-py311, requires-python >=3.11), so 3.12 too
#   smoke/    the Python smoke scripts (scripts/gpu_smoke/*.py and
#             scripts/gpu-smoke-bridges.py)
#   MANIFEST  what was built, from which commit
#
#   scripts/gpu-bundle.sh            # into .gpu-bundle/
#   GPU_BUNDLE=/tmp/b scripts/gpu-bundle.sh
#   GPU_BUNDLE_PROFILE=debug scripts/gpu-bundle.sh   # fast, for the rehearsal
#                                    # in scripts/test.sh (reuses its builds)
#
# Cargo builds into CARGO_TARGET_DIR when it is set (as cargo does), else
# target/; the files are taken from there.
#
# Then copy the folder (or the repository with it) to the GPU machine and
# run scripts/gpu-smoke.sh there (README, "GPU smoke run": the device tool
# carries it as `.gpu-bundle`, which git ignores). The bundle targets x86-64
# Linux with the glibc of this machine or newer; a release bundle is about
# 13 MiB (measured), well under the 64 MiB the device tool carries.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bundle=${GPU_BUNDLE:-$root/.gpu-bundle}
suites=(gpu_runtimes gpu_discovery gpu_semantics)
profile=${GPU_BUNDLE_PROFILE:-release}
case $profile in
    release) release=(--release) ;;
    debug) release=() ;;
    *) echo "error: GPU_BUNDLE_PROFILE=$profile; use release or debug" >&2; exit 2 ;;
esac
fakes=(fake-cudart fake-cudart-sync fake-cudart-minimal fake-hip fake-hip-sync)

step() { printf '\n==> %s\n' "$*"; }

# Where cargo puts its builds: CARGO_TARGET_DIR (relative to the workspace
# root, as cargo reads it) or target/, as cargo metadata reports it.
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
echo "cargo's target directory: $target_dir"

rm -rf "$bundle"
mkdir -p "$bundle"/{bin,fakes,wheel,smoke}

step "Rust GPU suites and the devmm command ($profile)"
args=()
for suite in "${suites[@]}"; do args+=(--test "$suite"); done
# The JSON messages name each test executable cargo built.
cargo test "${release[@]}" --locked -p devmm "${args[@]}" --no-run --message-format=json-render-diagnostics \
    | python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["target"]["kind"] == ["test"]:
        print(msg["target"]["name"], msg["executable"])
' | while read -r name exe; do
    cp "$exe" "$bundle/bin/$name"
done
cargo build "${release[@]}" --locked -p devmm-cli
cp "$target_dir/$profile/devmm" "$bundle/bin/devmm"
for suite in "${suites[@]}"; do
    [[ -x $bundle/bin/$suite ]] || { echo "error: cargo did not build the $suite suite" >&2; exit 1; }
done

step "fake driver libraries"
fake_args=()
for fake in "${fakes[@]}"; do fake_args+=(-p "$fake"); done
cargo build "${release[@]}" --locked "${fake_args[@]}"
for fake in "${fakes[@]}"; do
    cp "$target_dir/$profile/lib${fake//-/_}.so" "$bundle/fakes/"
done
if [[ $profile == release ]]; then
    # Small enough to carry to the GPU machine; symbols stay for backtraces.
    strip --strip-debug "$bundle"/bin/* "$bundle"/fakes/*.so
fi

step "Python wheel (abi3)"
venv="${DEVMM_VENV:-$root/.venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.16,<2"
(cd devmm-python && "$venv/bin/maturin" build "${release[@]}" --locked --quiet --out "$bundle/wheel")
ls "$bundle"/wheel/devmm-*-abi3-*.whl >/dev/null

step "smoke scripts"
cp scripts/gpu_smoke/*.py scripts/gpu-smoke-bridges.py "$bundle/smoke/"

{
    echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -1)"
    (cd "$bundle" && find . -type f ! -name MANIFEST -printf '%P %s\n' | sort)
} >"$bundle/MANIFEST"
du -sh "$bundle"
# The device tool carries the working tree and the bundle within 64 MiB
# together; the tree is about 5 MiB.
size=$(du -sm "$bundle" | cut -f1)
if [[ $profile == release ]] && ((size > 56)); then
    echo "error: the bundle is ${size} MiB; the device tool carries at most 64 MiB with the tree (keep it under 56)" >&2
    exit 1
fi
echo "bundle ready: $bundle (run scripts/gpu-smoke.sh on the GPU machine)"
