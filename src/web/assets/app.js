// forza-relay's page: renders /api/snapshot, then the Server-Sent Events of
// /api/events (car ≤30/s, counters and log 1/s). No inline handlers: the
// Content-Security-Policy allows only this file.
"use strict";

const token = document.querySelector('meta[name="forza-token"]').content;
const $ = (id) => document.getElementById(id);
const fixed = (v, digits) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
const rates = new Map(); // destination name → packets/s of the last 60 s
let previous = new Map(); // destination name → its counters a second ago
let track = []; // [x, z, km/h] of the last few minutes
const TRACK_POINTS = 5 * 60 * 30;
let editing = null; // the name of the destination the form changes; null: it adds

function setText(id, text) {
  const el = $(id);
  if (el.textContent !== String(text)) el.textContent = text;
}

let racing = false; // the newest car was racing, and the feed is live

function setRacing(on) {
  if (on !== racing) keepAwake(on);
  racing = on;
  document.body.classList.toggle("racing", on);
}

// Keeps the screen on while a race is shown (issue 30: a phone's screen
// slept mid-race). The Screen Wake Lock API where the browser has it, which
// is in a secure context only: this computer's page (127.0.0.1, localhost).
// Over plain http from a phone it is absent; there a playing video keeps the
// screen on in Chromium (Chrome on Android) and Firefox: a tiny muted one fed
// by a canvas, a MediaStream, which Blink exempts from its size rule and
// Gecko takes as it is. A video plays only after a tap, so the first tap on
// the page starts it. Safari keeps no screen on for a muted video: on an
// iPhone over the network it stays off (docs/web.md says so).
const awake = { want: false, lock: null, video: null, tapped: false };
const AWAKE = {
  "wake-lock": "The screen stays on while racing.",
  "video": "The screen stays on while racing.",
  "tap": "Tap the page to keep the screen on while racing.",
  "refused": "This browser does not let the page keep the screen on.",
  "off": "",
};

function showAwake(how) {
  document.body.dataset.awake = how;
  setText("awake", AWAKE[how]);
}

function awakeVideo() {
  if (awake.video) return awake.video;
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 2;
  const g = canvas.getContext("2d");
  const video = document.createElement("video");
  video.id = "awake-video";
  video.muted = true;
  video.playsInline = true;
  video.setAttribute("playsinline", "");
  video.setAttribute("aria-hidden", "true");
  video.srcObject = canvas.captureStream(1);
  // A frame now and then keeps the stream's track live.
  setInterval(() => { g.fillStyle = `rgb(0,0,${Date.now() % 2})`; g.fillRect(0, 0, 2, 2); }, 1000);
  document.body.appendChild(video);
  awake.video = video;
  return video;
}

async function keepAwake(on) {
  awake.want = on;
  if ("wakeLock" in navigator) {
    if (on && !awake.lock && document.visibilityState === "visible") {
      try {
        const lock = await navigator.wakeLock.request("screen");
        lock.addEventListener("release", () => { if (awake.lock === lock) awake.lock = null; });
        awake.lock = lock;
        if (!awake.want) { awake.lock = null; lock.release(); }
        showAwake(awake.want ? "wake-lock" : "off");
      } catch {
        showAwake("refused");
      }
    } else if (!on && awake.lock) {
      const lock = awake.lock;
      awake.lock = null;
      lock.release();
      showAwake("off");
    }
    return;
  }
  if (!awake.tapped) {
    showAwake(on ? "tap" : "off");
    return;
  }
  const video = awakeVideo();
  if (!on) {
    video.pause();
    showAwake("off");
    return;
  }
  try {
    await video.play();
    showAwake(awake.want ? "video" : "off");
  } catch {
    showAwake("refused");
  }
}

// A lock is let go when the page is hidden; it is taken again on return.
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible" && awake.want && !awake.lock) keepAwake(true);
});
document.addEventListener("pointerdown", () => {
  if (awake.tapped) return;
  awake.tapped = true;
  if (!("wakeLock" in navigator)) {
    // Played once inside the tap, so that later plays are allowed.
    const video = awakeVideo();
    video.play().then(() => { if (!awake.want) video.pause(); }).catch(() => {});
    if (awake.want) keepAwake(true);
  }
}, { capture: true });

function renderCar(car) {
  if (!car) return;
  setRacing(Boolean(car.racing));
  setText("speed-kmh", fixed(car.speed_kmh, 0));
  setText("speed-mph", fixed(car.speed_mph, 0));
  setText("gear", car.gear ?? "–");
  setText("rpm", fixed(car.rpm, 0));
  setText("redline", fixed(car.redline_rpm, 0));
  $("rpm-bar").value = car.rev_fraction ?? 0;
  $("throttle").value = car.throttle_pct ?? 0;
  $("brake").value = car.brake_pct ?? 0;
  $("clutch").value = car.clutch_pct ?? 0;
  setText("steer", fixed(car.steer, 2));
  car.tyres.forEach((t, i) => setText(`tyre-${i}`, `${fixed(t.temp_c, 0)} °C, slip ${fixed(t.slip, 2)}`)); // FL, FR, RL, RR
  setText("lap", car.lap ?? "–");
  setText("current-lap", car.current_lap ?? "–");
  setText("last-lap", car.last_lap ?? "–");
  setText("best-lap", car.best_lap ?? "–");
  setText("live-delta", signed(car.live_delta_s));
  renderLaps(car.laps ?? []);
  if (car.x !== null && car.z !== null) {
    track.push([car.x, car.z, car.speed_kmh ?? 0]);
    if (track.length > TRACK_POINTS) track = track.slice(-TRACK_POINTS);
  }
}

// The races `[record] races` kept (issue 34), newest first, as the page opened.
function renderRaces(races) {
  $("races-section").hidden = races.length === 0;
  $("races").replaceChildren(...races.map((r) => {
    const li = document.createElement("li");
    li.textContent = `${r.path} (${Math.round((r.bytes ?? 0) / 1024)} KB)`;
    return li;
  }));
}

// "+1.234" / "-0.500": a delta as a racer reads it; "–" when there is none.
function signed(s) {
  if (s === null || s === undefined) return "–";
  return (s > 0 ? "+" : "") + s.toFixed(3);
}

// m:ss.mmm, as the game shows a lap.
function lapTime(s) {
  if (s === null || s === undefined) return "–";
  const m = Math.floor(s / 60);
  const rest = (s - 60 * m).toFixed(3).padStart(6, "0");
  return `${m}:${rest}`;
}

// The session's laps (issue 34): one row a lap, the best marked.
function renderLaps(laps) {
  const table = $("lap-table");
  table.hidden = laps.length === 0;
  const body = table.tBodies[0];
  const rows = laps.map((l) => {
    const tr = document.createElement("tr");
    if (l.best) tr.className = "best";
    const cells = [
      (l.best ? "★ " : "") + l.lap,
      lapTime(l.lap_time_s),
      signed(l.delta_to_best_s),
      ...l.splits_s.map((s, i) => s === null ? "–"
        : `${s.toFixed(3)}${l.split_deltas_s[i] === null ? "" : ` (${signed(l.split_deltas_s[i])})`}`),
    ];
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = c;
      tr.append(td);
    }
    return tr;
  });
  body.replaceChildren(...rows);
}

function drawMap() {
  const canvas = $("map");
  const g = canvas.getContext("2d");
  g.clearRect(0, 0, canvas.width, canvas.height);
  if (track.length < 2) return;
  let [minX, maxX, minZ, maxZ] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const [x, z] of track) {
    minX = Math.min(minX, x); maxX = Math.max(maxX, x);
    minZ = Math.min(minZ, z); maxZ = Math.max(maxZ, z);
  }
  const pad = 12;
  const scale = Math.min((canvas.width - 2 * pad) / Math.max(maxX - minX, 1),
                         (canvas.height - 2 * pad) / Math.max(maxZ - minZ, 1));
  const px = (x) => pad + (x - minX) * scale;
  const pz = (z) => canvas.height - pad - (z - minZ) * scale;
  g.lineWidth = 2;
  for (let i = 1; i < track.length; i++) {
    const hue = Math.max(0, 240 - Math.min(track[i][2], 300) * 0.8); // blue slow, red fast
    g.strokeStyle = `hsl(${hue} 90% 50%)`;
    g.beginPath();
    g.moveTo(px(track[i - 1][0]), pz(track[i - 1][1]));
    g.lineTo(px(track[i][0]), pz(track[i][1]));
    g.stroke();
  }
  const [x, z] = track[track.length - 1];
  g.fillStyle = "#fff";
  g.strokeStyle = "#000";
  g.beginPath();
  g.arc(px(x), pz(z), 5, 0, 2 * Math.PI);
  g.fill();
  g.stroke();
}

// A destination's state, in words: the relay's status, and while nothing is
// sent because the game is in a menu, that.
const STATES = { ok: "sending", refused: "refused (nothing listening)", failing: "send errors", idle: "idle" };
// An MQTT destination's states: its broker, not a socket.
const BROKER_STATES = { ...STATES, failing: "broker unavailable" };

function stateOf(d, before) {
  if (d.status === "idle" && before && (d.drops?.not_racing ?? 0) > (before.drops?.not_racing ?? 0)) return "not-racing";
  return d.status ?? "idle";
}

function sparkline(canvas, values) {
  const g = canvas.getContext("2d");
  g.clearRect(0, 0, canvas.width, canvas.height);
  const max = Math.max(1, ...values);
  g.strokeStyle = "#2da44e";
  g.beginPath();
  values.forEach((v, i) => {
    const x = (i / 59) * canvas.width;
    const y = canvas.height - (v / max) * (canvas.height - 2) - 1;
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  });
  g.stroke();
}

function cell(row, text, label, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (label) td.dataset.label = label;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function filtersOf(d) {
  const filters = [];
  if (d.only_race_on) filters.push("only race on");
  if (d.max_rate) filters.push(`≤ ${d.max_rate} Hz`);
  if (d.max_age_ms !== null && d.max_age_ms !== undefined) filters.push(`≤ ${d.max_age_ms} ms old`);
  if (d.hold_ms) filters.push(`holds ${d.hold_ms / 1000} s through blanks`);
  return filters.join(", ") || "–";
}

// One destination as a row of the table (a card on a phone), from one object:
// name, addr (as written), output, only_race_on, max_rate, max_age_ms, status
// and its counters.
function destinationRow(d, before, history) {
  const tr = document.createElement("tr");
  tr.dataset.name = d.name;
  const state = stateOf(d, before);
  const dot = document.createElement("span");
  dot.className = `dot ${state}`;
  const states = d.topic === undefined ? STATES : BROKER_STATES;
  dot.title = state === "not-racing" ? "not racing (the game is in a menu)" : states[state] ?? state;
  cell(tr, "", null, "dot-cell").appendChild(dot);
  cell(tr, d.name, null, "name");
  cell(tr, d.topic === undefined ? d.addr : `${d.addr} → ${d.topic}`, "Address");
  cell(tr, d.fields?.length ? `${d.output}: ${d.fields.join(", ")}` : d.output, "Format");
  cell(tr, filtersOf(d), "Filters");
  cell(tr, fixed(d.packets_per_sec, 1), "Packets/s", "rate");
  const spark = document.createElement("canvas");
  spark.width = 120; spark.height = 24;
  cell(tr, "", null, "spark").appendChild(spark);
  sparkline(spark, history);
  cell(tr, d.sent, "Sent");
  const drops = Object.entries(d.drops ?? {}).filter(([, n]) => n > 0).map(([k, n]) => `${k.replaceAll("_", " ")} ${n}`);
  cell(tr, drops.join(", ") || "0", "Drops");
  // The newest error while it is one (issue 23): a tool that listens again
  // clears it; the run's totals stay in the Drops column and the summary.
  // A broker says why it can't be reached (issue 30), as the log said it.
  const problem = (state === "refused" || state === "failing") && (d.broker_problem || d.problems);
  cell(tr, problem || "–", "Newest error", problem ? "error-text" : "");
  const actions = cell(tr, "", null, "actions");
  for (const [kind, text] of [["edit", "Edit"], ["remove", "Remove"]]) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = kind;
    button.dataset.name = d.name;
    button.textContent = text;
    actions.appendChild(button);
  }
  return tr;
}

// Redrawn every second. A destination's row and its buttons stay the same
// elements from one drawing to the next, only their cells are new: a click
// that spans a redraw (the press before it, the release after) still lands.
function renderDestinations(list) {
  const body = document.querySelector("#destinations tbody");
  const shown = new Map([...body.children].map((tr) => [tr.dataset.name, tr]));
  const rows = [];
  const now = new Map();
  for (const d of list) {
    now.set(d.name, d);
    const history = rates.get(d.name) ?? new Array(60).fill(0);
    history.push(d.packets_per_sec ?? 0);
    while (history.length > 60) history.shift();
    rates.set(d.name, history);
    const fresh = destinationRow(d, previous.get(d.name), history);
    const row = shown.get(d.name);
    if (row) {
      const actions = row.querySelector("td.actions");
      fresh.querySelector("td.actions").remove();
      row.className = fresh.className;
      row.replaceChildren(...fresh.children, actions);
      rows.push(row);
    } else {
      rows.push(fresh);
    }
  }
  const same = rows.length === body.children.length && rows.every((r, i) => body.children[i] === r);
  if (!same) body.replaceChildren(...rows);
  previous = now;
}

// The event stream is open (true), failed (false), or not yet either (null:
// the page says "connecting…" as it loads, not "no connection").
let connected = null;

// The dot beside the title, and its words: what the game's feed does.
function renderFeed(input, elapsed) {
  let state = "live", words = "receiving";
  const silent = input?.silent_s ?? (input?.never && elapsed >= 2 ? Math.floor(elapsed) : null);
  if (connected === null) {
    state = "idle"; words = "connecting…";
  } else if (!connected) {
    state = "error"; words = "no connection to forza-relay (trying again)";
  } else if (input?.never && silent !== null) {
    state = "idle"; words = `nothing received yet (${silent} s)`;
  } else if (silent !== null && silent >= 2) {
    state = "idle"; words = `nothing for ${silent} s`;
  } else if (input?.not_racing) {
    state = "not-racing"; words = "not racing (menu or paused)";
  } else if (!input || input.never) {
    state = "idle"; words = "waiting for the game";
  }
  $("connection").className = `dot ${state}`;
  setText("feed-state", words);
}

let lastCounters = null;

function renderCounters(c) {
  if (!c) return;
  lastCounters = c;
  const input = c.input ?? {};
  renderFeed(input, c.elapsed_s);
  const problem = c.config?.error;
  $("config-banner").hidden = typeof problem !== "string";
  setText("config-banner", typeof problem === "string" ? `The configuration file was not applied: ${problem}` : "");
  setText("in-listen", c.listen ?? "–");
  setText("in-rate", fixed(input.packets_per_sec, 0));
  setText("in-format", input.format ? `${input.format}${input.format_guessed ? " (guessed)" : ""}` : "–");
  setText("in-sender", input.sender ?? "–");
  setText("in-received", input.received ?? "–");
  const banner = $("banner");
  const silent = input.silent_s ?? (input.never && c.elapsed_s >= 2 ? Math.floor(c.elapsed_s) : null);
  if (silent !== null && silent >= 2) {
    const port = String(c.listen ?? "").split(":").pop();
    banner.textContent = `Nothing has arrived for ${silent} s. In the game's HUD/Gameplay settings: ` +
      `Data Out on, Data Out IP Address this PC's address (127.0.0.1 when the game runs here), ` +
      `Data Out IP Port ${port}. A firewall may block it too (forza-relay doctor says more).`;
    banner.hidden = false;
  } else {
    banner.hidden = true;
  }
  // IsRaceOn = 0 in the latest packet: a menu, a pause, the end of a race.
  const notRacing = Boolean(input.not_racing);
  if (notRacing || (silent !== null && silent >= 2)) setRacing(false);
  const seen = $("speed-kmh").textContent !== "–";
  setText("car-state", !notRacing ? ""
    : seen ? "Not racing (menu or paused): the last racing values, dimmed."
    : "Not racing (menu or paused): the car shows once a race starts.");
  $("car-state").hidden = !notRacing;
  $("car").classList.toggle("dim", notRacing);
  $("not-saved").hidden = c.saved !== false;
  renderDestinations(c.destinations ?? []);
  const r = c.recording;
  setText("recording", r
    ? `${r.path}: ${r.packets} packets, ${(r.bytes / 1024).toFixed(0)} KiB, ${r.seconds} s`
    : "not recording");
  setText("record", r ? "Stop recording" : "Start recording");
  // Once stopped, where the file went (issue 30).
  const last = c.last_recording;
  setText("last-recording", last && !r
    ? `Last recording: ${last.path} (${last.packets} packets, ${(last.bytes / 1024).toFixed(0)} KiB, ${last.seconds} s)`
    : "");
  $("last-recording").hidden = !(last && !r);
}

function renderLog(log) {
  if (!log) return;
  const pre = $("log");
  const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.textContent = log.lines.join("\n");
  if (atEnd) pre.scrollTop = pre.scrollHeight;
}

// Every request carries the token (no cookie keeps it: issue 30).
const get = (path) => fetch(path, { headers: { "X-Forza-Token": token } });

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Forza-Token": token },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  try { return JSON.parse(text); } catch { return { ok: false, error: text }; }
}

// The form's fields by their labels: an error starting "Address: …" marks it.
const FIELDS = { "Name": "dest-name", "Address": "dest-addr", "Format": "dest-format",
  "Only race on": "dest-race", "Max rate": "dest-rate", "Max age": "dest-age", "Hold": "dest-hold",
  "Fields": "dest-fields", "Topic": "dest-topic", "Username": "dest-username",
  "Password": "dest-password", "Password variable": "dest-password-env", "CA file": "dest-ca" };

const isBroker = (addr) => /^\s*mqtts?:\/\//i.test(addr);

// The form shows the keys that apply: fields for json and influx, the
// broker's for an mqtt:// address (which publishes json or influx only).
function showKeys() {
  const broker = isBroker($("dest-addr").value);
  const format = $("dest-format");
  if (broker && !["json", "influx"].includes(format.value)) format.value = "json";
  for (const option of format.options) option.disabled = broker && !["json", "influx"].includes(option.value);
  const text = ["json", "influx"].includes(format.value);
  for (const e of document.querySelectorAll("#add-form .text-only")) e.hidden = !text;
  for (const e of document.querySelectorAll("#add-form .mqtt")) e.hidden = !broker;
}

function showResult(result) {
  const out = $("form-result");
  out.textContent = result.ok ? result.message : result.error;
  out.className = result.ok ? "" : "error-text";
  for (const id of Object.values(FIELDS)) $(id).classList.remove("invalid");
  const field = !result.ok && FIELDS[String(result.error ?? "").split(":")[0]];
  if (field) {
    $(field).classList.add("invalid");
    $(field).focus();
  }
}

// What the form sends for a destination. The password goes only when one
// is typed (empty: the destination keeps its own); it is never shown back.
function formFields() {
  const age = $("dest-age").value.trim();
  const hold = $("dest-hold").value.trim();
  const rate = $("dest-rate").value.trim();
  const broker = isBroker($("dest-addr").value);
  const text = ["json", "influx"].includes($("dest-format").value);
  const mqtt = (id) => (broker ? $(id).value : "");
  return {
    name: $("dest-name").value,
    addr: $("dest-addr").value,
    format: $("dest-format").value,
    only_race_on: $("dest-race").checked,
    max_rate: rate === "" ? null : Number(rate),
    max_age_ms: age === "" ? null : Number(age),
    hold_s: hold === "" ? null : Number(hold),
    fields: text ? $("dest-fields").value : "",
    topic: mqtt("dest-topic"),
    username: mqtt("dest-username"),
    password: mqtt("dest-password"),
    password_env: mqtt("dest-password-env"),
    ca_file: mqtt("dest-ca"),
  };
}

// A destination removed, kept so that Undo adds it back as it was.
let removed = null;
let undoTimer = null;

function offerUndo(d) {
  removed = d;
  // The password never comes to this page, and a password variable or a CA
  // file is the configuration file's to name, never the page's (issue 30).
  const lost = d.password_set || d.password_env || d.ca_file
    ? " Undo adds it back without its password, password variable or CA file (those are the configuration file's)." : "";
  setText("undo-text", `Removed ${d.name} (${d.addr}).${lost}`);
  $("undo-bar").hidden = false;
  clearTimeout(undoTimer);
  undoTimer = setTimeout(() => { $("undo-bar").hidden = true; removed = null; }, 30000);
}

// The form adds a destination, or (after an Edit button) changes the one
// named `editing`, through the same request with action "change".
function editDestination(d) {
  editing = d ? d.name : null;
  setText("form-title", d ? `Change destination ${d.name}` : "Add a destination");
  setText("add", d ? "Save" : "Add");
  $("cancel-edit").hidden = !d;
  if (d) {
    $("preset").value = "";
    $("dest-name").value = d.name;
    $("dest-addr").value = d.addr;
    $("dest-format").value = d.output;
    $("dest-race").checked = Boolean(d.only_race_on);
    $("dest-rate").value = d.max_rate ?? "";
    $("dest-age").value = d.max_age_ms ?? "";
    $("dest-hold").value = d.hold_ms ? Math.round(d.hold_ms / 1000) : "";
    $("dest-fields").value = (d.fields ?? []).join(", ");
    $("dest-topic").value = d.topic ?? "";
    $("dest-username").value = d.username ?? "";
    $("dest-password").value = "";
    $("dest-password").placeholder = d.password_set ? "unchanged" : "";
    $("dest-password-env").value = d.password_env ?? "";
    $("dest-ca").value = d.ca_file ?? "";
    $("dest-addr").focus();
  } else {
    $("add-form").reset();
    $("dest-password").placeholder = "";
  }
  showKeys();
}

// "Start at login": what `forza-relay autostart status` says, and a checkbox
// that turns it on or off through the same code.
function renderAutostart(a) {
  const box = $("autostart");
  if (!a.ok) {
    setText("autostart-state", a.error);
    $("autostart-state").className = "small error-text";
    box.disabled = !a.can;
    return;
  }
  box.checked = Boolean(a.on);
  box.disabled = !a.can && !a.on;
  $("autostart-state").className = "small";
  setText("autostart-state", a.can || a.on ? a.said.join("\n")
    : "Start at login runs a configuration file; this relay has none (it was started with --to).");
}

async function start() {
  $("preset").addEventListener("change", (e) => {
    if (!e.target.value) return;
    const p = JSON.parse(e.target.value);
    $("dest-name").value = p.id;
    $("dest-addr").value = p.addr;
    $("dest-format").value = p.format;
    showKeys();
  });
  $("dest-addr").addEventListener("input", showKeys);
  $("dest-format").addEventListener("change", showKeys);
  $("add-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    // Until the relay answers, the last answer is not this one's.
    showResult({ ok: true, message: "Applying…" });
    const result = await post("/api/destinations", {
      action: editing === null ? "add" : "change",
      was: editing ?? undefined,
      ...formFields(),
    });
    showResult(result);
    if (result.ok && editing !== null) editDestination(null);
  });
  $("cancel-edit").addEventListener("click", () => editDestination(null));
  $("destinations").addEventListener("click", async (e) => {
    const button = e.target.closest("button.remove, button.edit");
    if (!button) return;
    if (button.classList.contains("edit")) {
      const d = previous.get(button.dataset.name);
      if (d) editDestination(d);
      return;
    }
    const d = previous.get(button.dataset.name);
    const result = await post("/api/destinations", { action: "remove", name: button.dataset.name });
    showResult(result);
    if (result.ok && d) offerUndo(d);
  });
  $("undo").addEventListener("click", async () => {
    if (!removed) return;
    const d = removed;
    const result = await post("/api/destinations", {
      action: "add", name: d.name, addr: d.addr, format: d.output,
      only_race_on: Boolean(d.only_race_on), max_rate: d.max_rate ?? null,
      max_age_ms: d.max_age_ms ?? null, hold_s: d.hold_ms ? Math.round(d.hold_ms / 1000) : null,
      fields: d.fields ?? [],
      topic: d.topic ?? "", username: d.username ?? "",
    });
    showResult(result);
    if (result.ok) { $("undo-bar").hidden = true; removed = null; }
  });
  $("autostart").addEventListener("change", async (e) => {
    const box = e.target;
    box.disabled = true;
    const result = await post("/api/autostart", { action: box.checked ? "on" : "off" });
    if (result.ok) {
      renderAutostart(result);
      return;
    }
    renderAutostart(await (await get("/api/autostart")).json());
    setText("autostart-state", result.error);
    $("autostart-state").className = "small error-text";
  });
  $("new-token").addEventListener("click", async () => {
    const result = await post("/api/token", {});
    if (result.ok) location.replace(`/?token=${result.token}`);
    else showResult(result);
  });
  $("record").addEventListener("click", async () => {
    const recording = $("record").textContent.startsWith("Stop");
    const result = await post("/api/recording", { action: recording ? "stop" : "start" });
    if (!result.ok) showResult(result);
  });

  // Every control listens before anything is shown: none can be used
  // before its handler is there.
  get("/api/autostart").then((r) => r.json()).then(renderAutostart).catch(() => {});
  const snapshot = await (await get("/api/snapshot")).json();
  for (const p of snapshot.presets ?? []) {
    const option = document.createElement("option");
    option.value = JSON.stringify(p);
    option.textContent = `${p.name} (${p.addr}, ${p.format})`;
    $("preset").appendChild(option);
  }
  if (snapshot.phone) {
    $("phone-qr").src = `${snapshot.phone.qr}?token=${token}`;
    $("phone-url").textContent = snapshot.phone.url;
    $("phone-url").href = snapshot.phone.url;
    $("phone-section").hidden = false;
  }
  renderCar(snapshot.car);
  renderRaces(snapshot.races ?? []);
  renderCounters(snapshot.counters);
  renderLog(snapshot.log);

  const events = new EventSource(`/api/events?token=${token}`);
  events.addEventListener("open", () => { connected = true; renderFeed(lastCounters?.input, lastCounters?.elapsed_s ?? 0); });
  events.addEventListener("error", () => { connected = false; renderFeed(null, 0); });
  events.addEventListener("car", (e) => renderCar(JSON.parse(e.data)));
  events.addEventListener("counters", (e) => renderCounters(JSON.parse(e.data)));
  events.addEventListener("log", (e) => renderLog(JSON.parse(e.data)));
  const frame = () => { drawMap(); requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
}

start();
