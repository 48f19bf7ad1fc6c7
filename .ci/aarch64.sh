#!/usr/bin/env bash
# The Raspberry Pi build (aarch64-unknown-linux-musl: a static binary for a
# 64-bit OS on a Pi 3, 4, 5 or Zero 2 W), cross-built with Debian's aarch64
# linker and its whole test suite run under qemu-user. Called by .ci/run.
#
# Rust's musl targets link statically against the musl and C start files that
# rustup ships (crt-static is the default there), so Debian's glibc cross gcc
# only has to drive the linker: no musl cross toolchain is needed.
#
# Tests skipped, and why:
#   - the two that read this computer's LAN addresses with `ip` and move a
#     relay into its own network namespace with `unshare`: under qemu-user the
#     emulated program runs in the host's namespaces, so a namespace test would
#     test the host, and netlink answers are not emulated for every socket.
#     (Listed below once a run has shown them; every other test runs.)
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-musl
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
missing=()
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
if ((${#missing[@]})); then
    if [[ ! -e /tmp/.forza-relay-apt-updated ]]; then
        apt-get update && touch /tmp/.forza-relay-apt-updated
    fi
    for package in "${missing[@]}"; do
        DEBIAN_FRONTEND=noninteractive apt-get install -y "$package"
    done
fi

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER=qemu-aarch64

skip=()
args=()
for name in "${skip[@]}"; do args+=(--skip "$name"); done

cargo build --locked --target "$target" --tests
out="target/$target/debug"
file "$out/forza-relay" 2>/dev/null || true
qemu-aarch64 "$out/forza-relay" --version
qemu-aarch64 "$out/forza-relay" demo --seconds 2

echo "aarch64: skipping ${#skip[@]} tests${skip[*]:+: ${skip[*]}}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --locked --target "$target" --tests -- "${args[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk -v skipped="${#skip[@]}" '/^test result:/ { p += $4; f += $6 }
    END { printf "aarch64 (qemu): %d passed, %d failed, %d skipped\n", p, f, skipped }' "$log"
exit "$status"
