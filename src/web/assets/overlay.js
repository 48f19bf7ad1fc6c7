// forza-relay's overlay for OBS: the newest frame from /api/stream, 30 a
// second. Options in the URL: ?units=mph, ?show=speed,gear,rpm,pedals,g,lap
// (which parts, in that order of the page; delta and laps, the live delta
// to the best lap and the session's last laps, only when asked), ?scale=1.5
// (size). No inline
// script or style: the Content-Security-Policy allows only this file.
"use strict";

const $ = (id) => document.getElementById(id);
const options = new URLSearchParams(location.search);
const mph = (options.get("units") ?? "").toLowerCase() === "mph";
const PARTS = ["speed", "gear", "rpm", "pedals", "g", "lap"];
const shown = (options.get("show") ?? PARTS.join(",")).split(",").map((p) => p.trim().toLowerCase());
// Laps shown by the laps part: the newest.
const LAPS_SHOWN = 5;
const scale = Number(options.get("scale"));
// The g-meter's edge, in g.
const G_EDGE = 2;

for (const part of document.querySelectorAll(".part")) {
  part.hidden = !shown.includes(part.dataset.part);
}
if (scale > 0 && scale <= 10) document.documentElement.style.setProperty("--scale", String(scale));
$("unit").textContent = mph ? "mph" : "km/h";

function setText(id, text) {
  const el = $(id);
  if (el.textContent !== text) el.textContent = text;
}

const number = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);

// Seconds as m:ss.mmm; "–" for none (0: no lap yet).
function lapTime(s) {
  s = number(s);
  if (s === null || s <= 0) return "–";
  const m = Math.floor(s / 60);
  const rest = (s - m * 60).toFixed(3).padStart(6, "0");
  return `${m}:${rest}`;
}

// The session's laps, from the frames as they come (issue 34): a lap ends
// when LapNumber steps by one, its time the game's LastLap; each lap's way
// (time into the lap at each distance into it) is kept, the best lap's for
// the live delta.
const session = { laps: [], number: null, start: null, way: [], best: null };

function follow(f) {
  const n = f.LapNumber, into = number(f.CurrentLap), distance = number(f.DistanceTraveled);
  if (f.IsRaceOn !== 1 || typeof n !== "number" || into === null || distance === null) return;
  if (session.number !== null && n !== session.number) {
    const time = number(f.LastLap);
    if (n === session.number + 1 && time !== null && time > 0) {
      const before = session.best?.time ?? null;
      session.laps.push({ lap: n, time, delta: before === null ? null : time - before });
      if (before === null || time < before) session.best = { time, way: session.way };
    }
    session.way = [];
    session.start = null;
  }
  session.number = n;
  if (session.start === null) session.start = distance;
  session.way.push([distance - session.start, into]);
}

// The time into the best lap at `d` metres into it, between two points of its way.
function bestAt(d) {
  const way = session.best?.way ?? [];
  for (let i = 1; i < way.length; i++) {
    const [d1, t1] = way[i], [d0, t0] = way[i - 1];
    if (d1 >= d && d1 > d0) return t0 + (t1 - t0) * (d - d0) / (d1 - d0);
  }
  return null;
}

function renderSession() {
  const last = session.way[session.way.length - 1];
  const at = last ? bestAt(last[0]) : null;
  const delta = at === null ? null : last[1] - at;
  setText("delta", delta === null ? "–" : `${delta > 0 ? "+" : ""}${delta.toFixed(3)}`);
  const body = $("laps");
  // Made again only when a lap is added.
  if (body.dataset.count === String(session.laps.length)) return;
  body.dataset.count = String(session.laps.length);
  const rows = session.laps.slice(-LAPS_SHOWN).map((l) => {
    const tr = document.createElement("tr");
    const best = l.time === session.best?.time;
    for (const text of [`${best ? "★ " : ""}${l.lap}`, lapTime(l.time),
      l.delta === null ? "" : `${l.delta > 0 ? "+" : ""}${l.delta.toFixed(3)}`]) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  });
  body.replaceChildren(...rows);
}

function render(f) {
  const speed = number(mph ? f.speed_mph : f.speed_kmh);
  setText("speed", speed === null ? "–" : speed.toFixed(0));
  setText("gear", f.gear_label ?? "–");
  const rev = number(f.rev_fraction) ?? 0;
  $("rpm-fill").style.width = `${Math.min(Math.max(rev, 0), 1) * 100}%`;
  $("rpm-fill").classList.toggle("high", rev >= 0.9);
  const rpm = number(f.CurrentEngineRpm);
  setText("rpm", rpm === null ? "– rpm" : `${rpm.toFixed(0)} rpm`);
  $("throttle").style.height = `${number(f.throttle_pct) ?? 0}%`;
  $("brake").style.height = `${number(f.brake_pct) ?? 0}%`;
  const lat = number(f.g_lat), long = number(f.g_long);
  const edge = (v) => Math.max(-1, Math.min(1, (v ?? 0) / G_EDGE)) * 2.1; // em from the centre
  // The dot goes where the driver is pushed: back under acceleration.
  $("g-dot").style.transform = `translate(${edge(lat)}em, ${edge(long)}em)`;
  // Unknown (a format without acceleration, a NaN sent) reads as a dash, not 0.
  const g = (v) => (v === null ? "–" : v.toFixed(2));
  setText("g-text", `lat ${g(lat)} g, long ${g(long)} g`);
  setText("lap-number", f.LapNumber === null || f.LapNumber === undefined ? "–" : String(f.LapNumber + 1));
  setText("lap-current", lapTime(f.CurrentLap));
  setText("lap-last", lapTime(f.LastLap));
  setText("lap-best", lapTime(f.BestLap));
  follow(f);
  renderSession();
}

const FIELDS = "speed_kmh,speed_mph,gear_label,rev_fraction,CurrentEngineRpm,throttle_pct,brake_pct," +
  "g_lat,g_long,LapNumber,CurrentLap,LastLap,BestLap,IsRaceOn,DistanceTraveled";
// From another computer the overlay is opened with ?token=…: its stream
// needs it too (no cookie keeps it).
const token = options.get("token");
const stream = new EventSource(`/api/stream?hz=30&fields=${FIELDS}${token ? `&token=${encodeURIComponent(token)}` : ""}`);
stream.addEventListener("message", (e) => render(JSON.parse(e.data)));
