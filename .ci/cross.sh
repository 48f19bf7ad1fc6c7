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

# An Xvfb display for Wine (DISPLAY set; stop_display ends it): Windows'
# windows, such as the tray icon's, need a desktop. Start it before the
# prefix's wineserver: Wine makes the prefix's desktop once per wineserver, on
# the display its first program had (one made without a display keeps no
# windows at all).
start_display() {
    local n
    n=$((90 + RANDOM % 100))
    Xvfb ":$n" -nolisten tcp >/dev/null 2>&1 &
    xvfb_pid=$!
    for _ in $(seq 100); do [[ -S /tmp/.X11-unix/X$n ]] && break; sleep 0.1; done
    [[ -S /tmp/.X11-unix/X$n ]] || { echo "Xvfb :$n did not start" >&2; return 1; }
    export DISPLAY=:$n
}

stop_display() {
    [[ -n ${xvfb_pid:-} ]] && kill "$xvfb_pid" 2>/dev/null || true
}
