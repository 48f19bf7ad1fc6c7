#!/usr/bin/env bash
# The Raspberry Pi build (aarch64-unknown-linux-musl: a static binary for a
# 64-bit OS on a Pi 3, 4, 5 or Zero 2 W), cross-built with Debian's aarch64
# linker and its whole test suite run under qemu-user. Called by .ci/run.
#
# Rust's musl targets link statically against the musl and C start files that
# rustup ships (crt-static is the default there), so Debian's glibc cross gcc
# only has to drive the linker: no musl cross toolchain is needed.
#
# Tests that start forza-relay start it through qemu (FORZA_RELAY_TEST_RUNNER
# below); the few skipped are named below, each with why.
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-musl
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
source .ci/cross.sh
install_missing aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu qemu-aarch64 qemu-user

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER=qemu-aarch64
# Tests start forza-relay through qemu too (tests/common/bin.rs): CI does not
# register qemu with the kernel's binfmt_misc, a setting of the whole machine.
export FORZA_RELAY_TEST_RUNNER=qemu-aarch64

skip=(
    # the page in the x86_64 chromium: the same page on every platform, and
    # the native run covers it
    the_page_in_chromium_shows_the_car_and_adds_and_removes_a_destination
    on_a_phone_nothing_scrolls_sideways_and_the_car_comes_first_while_racing
    served_to_the_network_the_page_shows_a_qr_code_of_its_address_with_the_token
    start_at_login_on_the_page_writes_and_removes_the_login_entry
    the_page_adds_an_mqtt_destination_and_never_shows_its_password
    the_overlay_is_transparent_and_shows_the_speed_sent
    issue30_the_page_keeps_the_screen_on_while_a_race_is_shown
    the_page_shows_the_lap_table_after_a_simulated_lap_and_goes_dark_when_asked
    the_overlay_shows_the_delta_and_the_laps_when_asked
    # full-screen views on a pseudo-terminal: qemu-user does not emulate a
    # terminal call crossterm makes ("Function not implemented"); the native
    # run covers them
    issue13_run_watch_prints_the_summaries_of_while_the_screen_was_up
    issue17_watch_on_a_terminal_stopped_by_sigterm_restores_it
    issue17_watch_whose_terminal_is_closed_stops_instead_of_spinning
    # ages frames by the kernel's receive time, SO_TIMESTAMPNS, which qemu-user
    # does not emulate (the relay then ages them from when it reads them)
    binary_sends_no_stale_frame_after_a_stall_to_a_destination_with_max_age
)

cargo build --locked --target "$target" --tests
out="target/$target/debug"
file "$out/forza-relay" 2>/dev/null || true
qemu-aarch64 "$out/forza-relay" --version
qemu-aarch64 "$out/forza-relay" demo --seconds 2

run_cross_tests "aarch64 (qemu)" "$target" "${skip[@]}"
