#!/usr/bin/env bash
# Checks that devmm reaches users the way they install software (issue 35):
#
# - crates: every crate users depend on (each workspace member without
#   `publish = false`) has the metadata crates.io shows, and packages and
#   verifies (`cargo package`, which builds each packaged crate against the
#   others' packages, as crates.io would serve them);
# - sdist: the Python sdist that maturin makes installs with `pip install`
#   (built from source) into a throwaway venv, and one call works;
# - wheel: a manylinux2014 wheel builds here without a container (maturin
#   with zig, from the ziglang package), `auditwheel show` finds it
#   consistent with manylinux2014 (manylinux_2_17) or older, its metadata
#   is complete, and it installs and works.
#
# Each check prints `==> passed: ...` (scripts/test.sh counts those lines);
# the first failure exits non-zero. The builds use the dev profile (the
# checks are about packaging, not speed) and the workspace's target
# directory, so the dependencies built by the other suites are reused.
#
# Usage: scripts/release-check.sh [crates|sdist|wheel]...  (default: all)
# Environment: DEVMM_VENV (default .venv) gets the pinned release tools
# (scripts/requirements-release.txt); PYTHON (default python3) makes the
# throwaway venv.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

step() { printf '\n==> %s\n' "$*"; }
passed() { echo "==> passed: $*"; }

venv="${DEVMM_VENV:-$root/.venv}"
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
target_dir="$(cargo metadata --format-version 1 --no-deps \
    | "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
work="$target_dir/release-check"

crates() {
    step "crates: metadata of the published crates"
    local names
    # Prints the publishable members, one a line, after checking that each
    # has what crates.io and docs.rs show.
    names="$(cargo metadata --format-version 1 --no-deps --locked | "$venv/bin/python" -c '
import json, sys
meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
missing = []
for p in meta["packages"]:
    if p["id"] not in members or p["publish"] == []:
        continue
    name = p["name"]
    for field in ("description", "license", "repository", "documentation", "readme",
                  "rust_version", "keywords", "categories"):
        if not p.get(field):
            missing.append(f"{name}: no {field}")
    if "example.invalid" in (p.get("repository") or ""):
        missing.append(f"{name}: repository is a placeholder")
    print(name)
if missing:
    sys.exit("\n".join(missing) + "\nadd them to the crates [package] sections")
')"
    passed "metadata of $(echo "$names" | tr '\n' ' ')"

    step "crates: cargo package (with verification) of $(echo "$names" | tr '\n' ' ')"
    local args=()
    for name in $names; do args+=(-p "$name"); done
    # --allow-dirty: check the tree as it is, committed or not.
    cargo package --locked --allow-dirty "${args[@]}"
    passed "cargo package ${args[*]}"
}

tools() {
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r scripts/requirements-release.txt
}

# A fresh venv at $1 with nothing but pip.
throwaway_venv() {
    rm -rf "$1"
    "${PYTHON:-python3}" -m venv "$1"
}

# One call of the installed package, in the venv at $1: an allocation
# through the core, described as the seed says.
smoke_call() {
    (cd "$work" && "$1/bin/python" -c '
import devmm
t = devmm.empty((2, 3), "float32")
assert (t.shape, str(t.dtype), t.__dlpack_device__()) == ((2, 3), "float32", (1, 0)), t
print("devmm", devmm.__file__, "empty((2, 3), float32):", t.shape, t.dtype)
')
}

sdist() {
    tools
    step "sdist: maturin sdist, then pip install from source into a throwaway venv"
    rm -rf "$work/sdist"
    (cd devmm-python && "$venv/bin/maturin" sdist --out "$work/sdist")
    local archive
    archive="$(ls "$work"/sdist/devmm-*.tar.gz)"
    # pip builds an sdist by unpacking it and building the folder; here the
    # folder has a fixed path, so cargo reuses its builds from one run to
    # the next. The build is pip's own (isolated, with the maturin that
    # pyproject.toml asks for); the dev profile keeps it short.
    tar -xzf "$archive" -C "$work/sdist"
    throwaway_venv "$work/sdist-venv"
    CARGO_TARGET_DIR="$target_dir" MATURIN_PEP517_ARGS="--profile dev" \
        "$work/sdist-venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "${archive%.tar.gz}"
    smoke_call "$work/sdist-venv"
    passed "pip install $(basename "$archive") (built from source) and one call"
}

wheel() {
    tools
    step "wheel: manylinux2014 with maturin --zig (no container)"
    rm -rf "$work/wheel"
    (
        cd devmm-python
        PATH="$venv/bin:$PATH" "$venv/bin/maturin" build --zig --compatibility manylinux2014 \
            --profile dev --locked --out "$work/wheel"
    )
    local whl
    whl="$(ls "$work"/wheel/devmm-*.whl)"
    passed "maturin build --zig --compatibility manylinux2014: $(basename "$whl")"

    step "wheel: auditwheel show"
    (cd "$work" && "$venv/bin/auditwheel" show "$whl") | tee "$work/auditwheel-show.txt"
    # auditwheel names the oldest policy the wheel is consistent with, in
    # PEP 600's spelling: manylinux2014 is manylinux_2_17.
    "$venv/bin/python" - "$work/auditwheel-show.txt" "$whl" <<'EOF'
import re, sys
text = " ".join(open(sys.argv[1]).read().split())
found = re.search(r'consistent with the following platform tag: "manylinux_2_(\d+)_x86_64"', text)
if not found:
    sys.exit("auditwheel show names no manylinux_2_N_x86_64 platform tag for the wheel")
if int(found.group(1)) > 17:
    sys.exit(f"the wheel needs glibc 2.{found.group(1)}: it is not manylinux2014 (manylinux_2_17)")
if "manylinux2014_x86_64" not in sys.argv[2]:
    sys.exit(f"the wheel's file name does not carry the manylinux2014 tag: {sys.argv[2]}")
EOF
    passed "auditwheel show: consistent with manylinux_2_17 (manylinux2014)"

    step "wheel: metadata (readme, project URLs, licence, classifiers, Python floor)"
    "$venv/bin/python" - "$whl" <<'EOF'
import email, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as whl:
    name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
    meta = email.message_from_bytes(whl.read(name))
    licences = [n for n in whl.namelist() if "/licenses/" in n]
wanted = {
    "Requires-Python": ">=3.11",
    "License-Expression": "BSD-3-Clause",
    "Description-Content-Type": "text/markdown; charset=UTF-8; variant=GFM",
}
problems = [f"{k}: {meta.get(k)!r}, expected {v!r}" for k, v in wanted.items() if meta.get(k) != v]
if not meta.get_all("Project-URL"):
    problems.append("no Project-URL")
if not any(c.startswith("Programming Language :: Python :: 3.11") for c in meta.get_all("Classifier") or []):
    problems.append("no classifiers")
if not meta.get_all("License-File") or not licences:
    problems.append("no licence file in the wheel")
if "pip install devmm" not in (meta.get_payload() or ""):
    problems.append("no readme as the long description")
if problems:
    sys.exit("wheel metadata:\n  " + "\n  ".join(problems))
EOF
    passed "wheel metadata"

    step "wheel: pip install into a throwaway venv and one call"
    throwaway_venv "$work/wheel-venv"
    "$work/wheel-venv/bin/python" -m pip install --quiet --disable-pip-version-check "$whl"
    smoke_call "$work/wheel-venv"
    passed "pip install $(basename "$whl") and one call"
}

parts=("$@")
[ "${#parts[@]}" -gt 0 ] || parts=(crates sdist wheel)
for part in "${parts[@]}"; do
    case $part in
        crates | sdist | wheel) "$part" ;;
        *)
            echo "unknown part: $part (expected crates, sdist or wheel)" >&2
            exit 2
            ;;
    esac
done
