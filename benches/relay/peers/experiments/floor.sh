#!/usr/bin/env bash
# Times relays per packet by hand, everything on CPU 0 (issue 16's floor
# measurement; see docs/performance.md). For each round and each relay named,
# in turn: socat receivers on 127.0.0.1:9101.., the relay listening on 9100,
# `forza-relay simulate --rate 360 --duration SECONDS` sending to it, and the
# relay's on-CPU time over its threads (/proc/PID/task/*/schedstat) divided by
# the packets sent. Prints one line per run; the median over rounds is the
# figure to read (this kind of machine varies by 10-15 % run to run).
#
# usage: floor.sh ROUNDS DESTINATIONS SECONDS
# needs: socat, cc, a release build (cargo build --release)
set -euo pipefail
cd "$(dirname "$0")"
rounds=$1 dests=$2 secs=$3
relay=../../../../target/release/forza-relay
out=$(mktemp -d)
cc -O2 -o "$out/c-relay" ../c_relay.c
cc -O2 -o "$out/floor" floor.c
ports=() tos=()
for i in $(seq 1 "$dests"); do
    ports+=("910$i")
    tos+=(--to "127.0.0.1:910$i")
done

# one NAME COMMAND...: one timed run.
one() {
    local name=$1
    shift
    local receivers=() port
    for port in "${ports[@]}"; do
        taskset -c 0 socat -u "UDP4-RECV:$port" /dev/null &
        receivers+=($!)
    done
    taskset -c 0 "$@" >"$out/$name.log" 2>&1 &
    local pid=$!
    sleep 1
    local before after
    before=$(awk '{s += $1} END {print s}' /proc/$pid/task/*/schedstat)
    taskset -c 0 "$relay" simulate --rate 360 --duration "$secs" --to 127.0.0.1:9100 >/dev/null 2>&1
    after=$(awk '{s += $1} END {print s}' /proc/$pid/task/*/schedstat)
    echo "$name, $dests dest: $(((after - before) / (secs * 360))) ns/packet (load $(cut -d' ' -f1 /proc/loadavg))"
    kill "$pid" "${receivers[@]}"
    wait "$pid" "${receivers[@]}" 2>/dev/null || true
}

for _ in $(seq 1 "$rounds"); do
    one "C relay" "$out/c-relay" 9100 4194304 "${ports[@]}"
    one "floor" "$out/floor" 9100 4194304 0 "${ports[@]}"
    one "floor, no timestamp, recvmsg" "$out/floor" 9100 4194304 6 "${ports[@]}"
    one "forza-relay" "$relay" run --listen 127.0.0.1:9100 "${tos[@]}" --stats-interval 0
done
rm -rf "$out"
