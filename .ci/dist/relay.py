#!/usr/bin/env python3
"""Runs a released forza-relay.exe under Wine the way a user starts it, and checks
that it relays (called by .ci/dist.sh, with WINEPREFIX set).

  relay.py zip EXE CONFIG      the unzipped program, started with no arguments
                               (a double-click) from another folder: it must
                               find the forza-relay.toml beside it
  relay.py shortcut LNK EXE CONFIG
                               the installed program, started through its
                               Start-menu shortcut: it must find the user's
                               configuration CONFIG from the shortcut's folder

CONFIG is edited first, as a user would: [listen] and every [[destination]] on
loopback test ports (receivers this script holds), the page on its own port.
Then `EXE simulate` drives; every frame is counted at the receivers and must
match what the relay says it received and sent; the page must answer. The
relay is stopped with taskkill at the end.
"""

import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

# Datagram lengths of the formats the example configuration sends.
LENGTHS = {"same": 324, "fh6": 324, "fh5": 324, "fh4": 324, "sled": 232}
DEADLINE = 60.0


def fail(message):
    print(f"relay check: FAILED: {message}", flush=True)
    sys.exit(1)


class Receiver:
    """A tool on a loopback port: counts datagrams, and their lengths."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.count = 0
        self.lengths = set()
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            self.count += 1
            self.lengths.add(len(data))


def edit(path, listen, web, receivers):
    """Points the configuration at the test ports; returns each destination's
    (name, format) in file order."""
    text = open(path, encoding="utf-8", newline="").read()
    lines = text.splitlines(keepends=True)
    section = None
    destinations = []
    web_seen = False
    for i, line in enumerate(lines):
        header = re.match(r"^\s*(\[\[?[A-Za-z_.]+\]\]?)\s*(#.*)?$", line)
        if header:
            section = header.group(1)
            if section == "[[destination]]":
                destinations.append({"name": None, "format": "same", "line": None})
            web_seen |= section == "[web]"
            continue
        key = re.match(r'^(\s*)(addr|name|format)(\s*=\s*)"([^"]*)"(.*)$', line, re.S)
        if not key:
            continue
        indent, name, eq, value, rest = key.groups()
        if section == "[listen]" and name == "addr":
            lines[i] = f'{indent}addr{eq}"127.0.0.1:{listen}"{rest}'
        elif section == "[web]" and name == "addr":
            lines[i] = f'{indent}addr{eq}"127.0.0.1:{web}"{rest}'
        elif section == "[[destination]]" and name == "addr":
            destinations[-1]["line"] = i
        elif section == "[[destination]]":
            destinations[-1][name] = value
    if len(destinations) != len(receivers):
        fail(f"{path} has {len(destinations)} destinations, {len(receivers)} receivers were made")
    for d, r in zip(destinations, receivers):
        if d["line"] is None:
            fail(f"destination {d['name']} in {path} has no addr")
        lines[d["line"]] = re.sub(r'"[^"]*"', f'"127.0.0.1:{r.port}"', lines[d["line"]], count=1)
    text = "".join(lines)
    if not web_seen:
        text += f'\n[web]\naddr = "127.0.0.1:{web}"\n'
    open(path, "w", encoding="utf-8", newline="").write(text)
    return [(d["name"], d["format"]) for d in destinations]


def count_destinations(path):
    text = open(path, encoding="utf-8").read()
    return len(re.findall(r"^\s*\[\[destination\]\]", text, re.M))


def free_port():
    """A port outside Linux's ephemeral range (32768-60999) that is free for UDP
    and TCP on loopback now. Only for the shortcut's relay, which can neither be
    handed a bound socket nor tell this script which port it took: no port-0
    bind elsewhere can be given it meanwhile."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        try:
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                with socket.socket(socket.AF_INET, kind) as s:
                    s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    fail("no free port in 20000-32000")


def get(url):
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read()


def wine(*args, **kwargs):
    return subprocess.run(["wine", *args], capture_output=True, text=True, timeout=120, **kwargs)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "zip" and len(sys.argv) == 4:
        lnk, exe, config = None, sys.argv[2], sys.argv[3]
    elif mode == "shortcut" and len(sys.argv) == 5:
        lnk, exe, config = sys.argv[2], sys.argv[3], sys.argv[4]
    else:
        fail(__doc__)
    exe, config = os.path.abspath(exe), os.path.abspath(config)
    receivers = [Receiver() for _ in range(count_destinations(config))]
    output = []
    if mode == "zip":
        # Port 0: the relay says in its log which ports it took.
        destinations = edit(config, 0, 0, receivers)
        # Started from another folder, with no argument: the file beside the
        # program is the one it must read. FORZA_RELAY_OPENER names no program,
        # so the page is not opened in a browser of this machine (the log says
        # it tried).
        scratch = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(config))), "elsewhere")
        os.makedirs(scratch, exist_ok=True)
        relay = subprocess.Popen(
            ["wine", exe], cwd=scratch, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
        )
        threading.Thread(target=lambda: output.extend(relay.stdout), daemon=True).start()
        started = time.monotonic()
        listen = web = None
        while (listen is None or web is None) and time.monotonic() - started < DEADLINE:
            text = "".join(output)
            m = re.search(r"listen on 127\.0\.0\.1:(\d+) \((.*?)\)", text)
            listen = int(m.group(1)) if m else None
            w = re.search(r"web page on http://127\.0\.0\.1:(\d+)/", text)
            web = int(w.group(1)) if w else None
            if relay.poll() is not None:
                break
            time.sleep(0.1)
        text = "".join(output)
        if listen is None or web is None:
            fail(f"the relay did not say where it listens:\n{text}")
        print(text, end="", flush=True)
        if not m.group(2).lower().endswith(r"\zip\forza-relay.toml"):
            fail(f"it read {m.group(2)}, not the forza-relay.toml beside it")
        if "opening http://127.0.0.1:" not in text:
            fail("started with no arguments, it did not open the page")
    else:
        listen, web = free_port(), free_port()
        destinations = edit(config, listen, web, receivers)
        # As Explorer starts it: the shortcut's target, arguments and folder.
        # (Its output goes to a console of its own, so none is read here: the
        # relay would hold a pipe open after `start` ends.)
        launched = subprocess.run(["wine", "start", "/unix", lnk], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        if launched.returncode != 0:
            fail(f"wine start {lnk}: exit code {launched.returncode}")
        started = time.monotonic()
        while True:
            try:
                get(f"http://127.0.0.1:{web}/api/snapshot")
                break
            except OSError:
                if time.monotonic() - started > DEADLINE:
                    fail(f"nothing answers on the page's port {web}, which only {config} names")
                time.sleep(0.2)
    print(f"relay check: listening on {listen}, page on {web}; destinations "
          + ", ".join(f"{n} ({f}) -> {r.port}" for (n, f), r in zip(destinations, receivers)), flush=True)

    # A 3-second drive at 30 frames a second: below every max_rate of the example.
    sim = wine(exe, "simulate", "--to", f"127.0.0.1:{listen}", "--rate", "30", "--duration", "3")
    sent = re.search(r"sent (\d+) packets", sim.stdout + sim.stderr)
    if sim.returncode != 0 or not sent:
        fail(f"simulate: {sim.returncode}\n{sim.stdout}{sim.stderr}")
    frames = int(sent.group(1))
    print(f"relay check: simulate sent {frames} frames", flush=True)

    # Wait for the relay's own word that every frame went its way.
    started = time.monotonic()
    while True:
        snapshot = json.loads(get(f"http://127.0.0.1:{web}/api/snapshot")[1])["counters"]
        routed = [d["sent"] + sum(d["drops"].values()) for d in snapshot["destinations"]]
        delivered = all(r.count == d["sent"] for r, d in zip(receivers, snapshot["destinations"]))
        if snapshot["input"]["received"] == frames and all(n == frames for n in routed) and delivered:
            break
        if time.monotonic() - started > DEADLINE:
            fail(f"after {DEADLINE:.0f}s: {json.dumps(snapshot)[:3000]}\n"
                 f"receivers: {[r.count for r in receivers]}")
        time.sleep(0.2)

    status, page = get(f"http://127.0.0.1:{web}/")
    if status != 200 or b"forza-relay" not in page:
        fail(f"GET / answered {status}, {len(page)} bytes")
    print(f"relay check: GET http://127.0.0.1:{web}/ answered {status} ({len(page)} bytes)")

    for (name, fmt), r, d in zip(destinations, receivers, snapshot["destinations"]):
        drops = {k: v for k, v in d["drops"].items() if v}
        print(f"relay check: {name} ({fmt}): {r.count} of {frames} frames counted at the "
              f"receiver, lengths {sorted(r.lengths)}, the relay's drops {drops or 'none'}")
        if r.count == 0 or r.lengths != {LENGTHS.get(fmt, -1)}:
            fail(f"{name}: {r.count} frames of lengths {sorted(r.lengths)}")
        # Only the example's own filters may hold a frame back: a menu frame from
        # an only_race_on destination, and a frame older than its max_age.
        allowed = {"not_racing", "stale"}
        if set(drops) - allowed or (not d["only_race_on"] and "not_racing" in drops):
            fail(f"{name}: dropped {drops}")
        if not d["only_race_on"] and d["max_age_ms"] is None and r.count != frames:
            fail(f"{name}, which filters nothing, got {r.count} of {frames}")

    for r in receivers:
        r.stop = True
    stopped = wine("taskkill", "/F", "/IM", "forza-relay.exe")
    if stopped.returncode != 0:
        fail(f"taskkill: {stopped.stdout}{stopped.stderr}")
    print(f"relay check ({mode}): passed", flush=True)


if __name__ == "__main__":
    main()
