#!/usr/bin/env bash
# Shared by .ci/windows.sh, .ci/aarch64.sh and .ci/dist.sh (sourced, not run).

# Installs each Debian package named whose command is missing: pairs of
# COMMAND PACKAGE; apt-get update once per machine boot.
install_missing() {
    local missing=()
    while (($#)); do
        command -v "$1" >/dev/null || missing+=("$2")
        shift 2
    done
    ((${#missing[@]})) || return 0
    install_packages "${missing[@]}"
}

# Installs the Debian packages named; apt-get update once per machine boot.
install_packages() {
    if [[ ! -e /tmp/.forza-relay-apt-updated ]]; then
        apt-get update && touch /tmp/.forza-relay-apt-updated
    fi
    local package
    for package in "$@"; do
        DEBIAN_FRONTEND=noninteractive apt-get install -y "$package"
    done
}

# Runs the test suite for TARGET (its runner set by the caller) skipping the
# tests named after LABEL and TARGET, then prints "LABEL: N passed, N failed,
# N skipped". Returns cargo's status.
run_cross_tests() {
    local label=$1 target=$2
    shift 2
    local args=() name
    for name in "$@"; do args+=(--skip "$name"); done
    echo "$label: skipping $# tests${*:+: $*}"
    local log status
    log=$(mktemp)
    set +e
    cargo test --locked --no-fail-fast --target "$target" --tests -- "${args[@]}" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    set -e
    awk -v label="$label" -v skipped="$#" '/^test result:/ { p += $4; f += $6 }
        END { printf "%s: %d passed, %d failed, %d skipped\n", label, p, f, skipped }' "$log"
    rm -f "$log"
    return "$status"
}
