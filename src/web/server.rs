//! The page's HTTP side: every request is checked before anything else
//! happens, then served from the embedded assets, the feed's latest updates,
//! or turned into a change.
//!
//! The checks, in order (issue 14's security rules):
//! 1. at most [`MAX_HEADER_BYTES`] of headers (431), a body of at most
//!    [`MAX_BODY`] (413), GET or POST only (405); a request tiny_http could not
//!    parse has already had its 400;
//! 2. the `Host` is this computer's name for the page (`localhost`,
//!    `127.0.0.1`, `[::1]`, the bound address, or any IP literal when bound
//!    to every interface), with the page's port: a DNS-rebinding page's own
//!    host name is refused (403);
//! 3. served beyond this computer, the session token: `?token=` (which sets a
//!    cookie) or the cookie (401 without it);
//! 4. a change (POST) carries a same-origin `Origin` and the token in
//!    `X-Forza-Token`, which only the page itself has read (403).

use std::io::{Read as _, Write as _};
use std::net::IpAddr;
use std::sync::Arc;

use log::{info, warn};
use serde::Deserialize;
use serde_json::{json, Value};
use tiny_http::{Header, Method, Request, Response};

use super::feed::{self, PageRecording};
use super::{edit, lock, Client, Shared, MAX_BODY, MAX_CLIENTS, MAX_HEADER_BYTES};
use crate::stats::Snapshot;
use crate::watch::model::DestinationRates;

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");
const ICON: &str = include_str!("assets/icon.svg");

/// Only the page's own scripts, styles and connections; no frames, no forms
/// elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; \
                   frame-ancestors 'none'";
/// The cookie that keeps the token on a non-loopback page.
const COOKIE: &str = "forza_relay_token";
/// How often an event stream with nothing to say writes a comment, to find out
/// that its page is gone.
const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// Takes requests until the web page stops.
pub fn serve(shared: &Arc<Shared>, server: &tiny_http::Server) {
    for request in server.incoming_requests() {
        if shared.stopping() {
            break;
        }
        handle(shared, request);
    }
}

/// A refusal: its status and why, in words.
struct Refused(u16, String);

fn header<'a>(request: &'a Request, name: &'static str) -> Option<&'a str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

fn with_headers<R: std::io::Read>(mut response: Response<R>, content_type: &str) -> Response<R> {
    let mut add = |name: &str, value: &str| {
        if let Ok(h) = Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(h);
        }
    };
    add("Content-Type", content_type);
    add("Content-Security-Policy", CSP);
    add("X-Content-Type-Options", "nosniff");
    add("Referrer-Policy", "no-referrer");
    add("Cache-Control", "no-store");
    response
}

fn text(status: u16, body: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    with_headers(
        Response::from_string(body).with_status_code(status),
        "text/plain; charset=utf-8",
    )
}

fn json_response(status: u16, body: &Value) -> Response<std::io::Cursor<Vec<u8>>> {
    with_headers(
        Response::from_string(body.to_string()).with_status_code(status),
        "application/json",
    )
}

/// The query's value of `key` (tokens are hex: no decoding needed).
fn query<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    let (_, q) = url.split_once('?')?;
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

fn cookie<'a>(request: &'a Request, name: &'static str) -> Option<&'a str> {
    header(request, "Cookie")?
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Whether `host` (a `Host` header) names this page.
fn host_allowed(shared: &Shared, host: &str) -> bool {
    let port = shared.addr.port();
    let (name, host_port) = match host.rsplit_once(':') {
        Some((n, p)) if !p.contains(']') => (n, p.parse::<u16>().ok()),
        _ => (host, Some(80)),
    };
    if host_port != Some(port) {
        return false;
    }
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let ip = name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>();
    match ip {
        Ok(ip) if ip.is_loopback() || ip == shared.addr.ip() => true,
        // Bound to every interface: any of this computer's addresses, which a
        // phone types as digits; a host name is what DNS rebinding needs.
        Ok(_) => shared.addr.ip().is_unspecified(),
        Err(_) => false,
    }
}

/// The checks of the module doc; `Ok` with whether the token came in the URL
/// (then the response sets the cookie).
fn check(shared: &Shared, request: &Request) -> Result<bool, Refused> {
    let header_bytes: usize = request
        .headers()
        .iter()
        .map(|h| h.field.as_str().as_str().len() + h.value.as_str().len() + 4)
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return Err(Refused(
            431,
            format!("headers over {MAX_HEADER_BYTES} bytes"),
        ));
    }
    if request.body_length().is_some_and(|n| n > MAX_BODY) {
        return Err(Refused(413, format!("a body over {MAX_BODY} bytes")));
    }
    if !matches!(request.method(), Method::Get | Method::Post) {
        return Err(Refused(
            405,
            format!("method {} not allowed", request.method()),
        ));
    }
    let Some(host) = header(request, "Host") else {
        return Err(Refused(400, "a request without a Host header".to_owned()));
    };
    if !host_allowed(shared, host) {
        return Err(Refused(
            403,
            format!("Host {host:?} is not this page's address"),
        ));
    }
    let from_url = query(request.url(), "token").is_some_and(|t| same(t, &shared.token));
    if shared.need_token
        && !from_url
        && !cookie(request, COOKIE).is_some_and(|t| same(t, &shared.token))
    {
        return Err(Refused(
            401,
            "this page needs its token: open the link with ?token=… that forza-relay logged"
                .to_owned(),
        ));
    }
    if *request.method() == Method::Post {
        let origin = header(request, "Origin").unwrap_or_default();
        if origin != format!("http://{host}") {
            return Err(Refused(403, format!("Origin {origin:?} is not this page")));
        }
        if !header(request, "X-Forza-Token").is_some_and(|t| same(t, &shared.token)) {
            return Err(Refused(403, "a change needs the page's token".to_owned()));
        }
    }
    Ok(from_url)
}

fn handle(shared: &Arc<Shared>, mut request: Request) {
    let set_cookie = match check(shared, &request) {
        Ok(c) => c,
        Err(Refused(status, why)) => {
            let _ = request.respond(text(status, &format!("{why}\n")));
            return;
        }
    };
    let path = request
        .url()
        .split('?')
        .next()
        .unwrap_or_default()
        .to_owned();
    let response = match (request.method().clone(), path.as_str()) {
        (Method::Get, "/") => {
            let page = INDEX.replace("{{token}}", &shared.token);
            let mut r = with_headers(Response::from_string(page), "text/html; charset=utf-8");
            if set_cookie {
                let c = format!(
                    "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                    shared.token
                );
                if let Ok(h) = Header::from_bytes(&b"Set-Cookie"[..], c.as_bytes()) {
                    r.add_header(h);
                }
            }
            r
        }
        (Method::Get, "/app.js") => with_headers(
            Response::from_string(SCRIPT),
            "text/javascript; charset=utf-8",
        ),
        (Method::Get, "/app.css") => {
            with_headers(Response::from_string(STYLE), "text/css; charset=utf-8")
        }
        (Method::Get, "/icon.svg") => with_headers(Response::from_string(ICON), "image/svg+xml"),
        (Method::Get, "/api/snapshot") => json_response(200, &snapshot(shared)),
        (Method::Get, "/api/events") => return events(shared, request),
        (Method::Post, "/api/destinations") => match body(&mut request) {
            Ok(v) => change(shared, v),
            Err(r) => r,
        },
        (Method::Post, "/api/recording") => match body(&mut request) {
            Ok(v) => recording(shared, &v),
            Err(r) => r,
        },
        _ => text(404, &format!("no such page: {path}\n")),
    };
    let _ = request.respond(response);
}

/// The request's JSON body, or the response refusing it.
fn body(request: &mut Request) -> Result<Value, Response<std::io::Cursor<Vec<u8>>>> {
    let mut bytes = Vec::new();
    let read = request
        .as_reader()
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut bytes);
    if read.is_err() {
        return Err(text(400, "the body could not be read\n"));
    }
    if bytes.len() > MAX_BODY {
        return Err(text(413, &format!("a body over {MAX_BODY} bytes\n")));
    }
    serde_json::from_slice(&bytes).map_err(|e| text(400, &format!("not JSON: {e}\n")))
}

/// Everything the page shows, now: for scripts, and for a page that opens.
/// While a page is open the feed's latest updates; with none, the relay is
/// asked now and listened to for the car (at most [`feed::CAR_WAIT`]).
pub fn snapshot(shared: &Shared) -> Value {
    let page_open = !lock(&shared.clients).is_empty();
    let latest = lock(&shared.latest);
    let (car, counters, log) = match page_open {
        true => (
            latest.car.clone(),
            latest.counters.clone(),
            latest.log.clone(),
        ),
        false => (None, None, None),
    };
    drop(latest);
    let model = (!page_open).then(|| feed::listen_once(shared));
    let car = car.or_else(|| model.as_ref()?.car().map(feed::car_json));
    let counters = counters.or_else(|| {
        let mut answers = lock(&shared.answers);
        let now: &Snapshot = answers.take(std::time::Duration::from_millis(200))?;
        Some(feed::counters_json(
            shared,
            now,
            &mut DestinationRates::default(),
            model.as_ref(),
        ))
    });
    let presets: Vec<Value> = crate::setup::tools::tools()
        .iter()
        .map(|t| {
            json!({"id": t.id, "name": t.name, "addr": format!("127.0.0.1:{}", t.port),
                   "format": t.layout.to_string()})
        })
        .collect();
    json!({
        "car": car,
        "counters": counters,
        "log": log.unwrap_or_else(feed::log_json),
        "presets": presets,
    })
}

/// An event stream for one page, on a thread of its own.
fn events(shared: &Arc<Shared>, request: Request) {
    let client = Arc::new(Client::new());
    {
        let mut clients = lock(&shared.clients);
        if clients.len() >= MAX_CLIENTS {
            drop(clients);
            let _ = request.respond(text(
                503,
                &format!("{MAX_CLIENTS} pages are open already: close one\n"),
            ));
            return;
        }
        clients.push(client.clone());
    }
    shared.clients_changed.notify_all();
    let shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("web-events".to_owned())
        .spawn({
            let client = client.clone();
            let shared = shared.clone();
            move || {
                stream(&shared, &client, request);
                lock(&shared.clients).retain(|c| !Arc::ptr_eq(c, &client));
            }
        });
    if let Err(e) = spawned {
        warn!("cannot serve a page's updates: {e}");
        lock(&shared.clients).retain(|c| !Arc::ptr_eq(c, &client));
    }
}

/// Writes `client`'s updates until the page goes or the web page stops.
fn stream(shared: &Shared, client: &Client, request: Request) {
    let mut out = request.into_writer();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n\
         Content-Security-Policy: {CSP}\r\nX-Content-Type-Options: nosniff\r\n\
         Connection: close\r\n\r\nretry: 1000\n\n"
    );
    if out
        .write_all(head.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return;
    }
    let mut pending = Vec::new();
    while !shared.stopping() {
        {
            let queue = lock(&client.queue);
            let (mut queue, _) = client
                .ready
                .wait_timeout_while(queue, KEEPALIVE, |q| q.is_empty() && !shared.stopping())
                .unwrap_or_else(|e| e.into_inner());
            pending.extend(queue.drain(..));
        }
        let result = if pending.is_empty() {
            out.write_all(b": keepalive\n\n")
        } else {
            pending
                .drain(..)
                .try_for_each(|e| out.write_all(e.as_bytes()))
        };
        if result.and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

/// A change of destinations, as the page sends it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Change {
    action: String,
    /// The destination's name (for `change`, the new one).
    #[serde(default)]
    name: String,
    /// For `change`: the name it had.
    #[serde(default)]
    was: Option<String>,
    #[serde(default)]
    addr: String,
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    only_race_on: bool,
    #[serde(default)]
    max_rate: u32,
}

fn change(shared: &Shared, value: Value) -> Response<std::io::Cursor<Vec<u8>>> {
    let change: Change = match serde_json::from_value(value) {
        Ok(c) => c,
        Err(e) => return json_response(400, &json!({"ok": false, "error": e.to_string()})),
    };
    let wanted = match change.action.as_str() {
        "add" => edit::Edit::Add(edit::Fields {
            name: change.name.trim().to_owned(),
            addr: change.addr.trim().to_owned(),
            format: change.format.map(|f| f.trim().to_owned()),
            only_race_on: change.only_race_on,
            max_rate: change.max_rate,
        }),
        "change" => edit::Edit::Change(
            change.was.unwrap_or_else(|| change.name.clone()),
            edit::Fields {
                name: change.name.trim().to_owned(),
                addr: change.addr.trim().to_owned(),
                format: change.format.map(|f| f.trim().to_owned()),
                only_race_on: change.only_race_on,
                max_rate: change.max_rate,
            },
        ),
        "remove" => edit::Edit::Remove(change.name),
        other => {
            return json_response(
                400,
                &json!({"ok": false, "error": format!("unknown action {other:?}: add, change or remove")}),
            )
        }
    };
    match edit::apply(shared, &wanted) {
        Ok(message) => {
            info!("web page: {message}");
            json_response(
                200,
                &json!({"ok": true, "saved": shared.file.is_some(), "message": message}),
            )
        }
        Err(error) => json_response(422, &json!({"ok": false, "error": error})),
    }
}

fn recording(shared: &Shared, value: &Value) -> Response<std::io::Cursor<Vec<u8>>> {
    let mut current = lock(&shared.recording);
    match value.get("action").and_then(Value::as_str) {
        Some("start") if current.is_none() => {
            match PageRecording::start(shared, &feed::recording_template(shared)) {
                Ok(r) => {
                    let described = r.describe();
                    *current = Some(r);
                    json_response(200, &json!({"ok": true, "recording": described}))
                }
                Err(e) => json_response(422, &json!({"ok": false, "error": e})),
            }
        }
        Some("start") => json_response(409, &json!({"ok": false, "error": "already recording"})),
        Some("stop") => match current.take() {
            Some(r) => {
                r.finish();
                json_response(200, &json!({"ok": true}))
            }
            None => json_response(409, &json!({"ok": false, "error": "not recording"})),
        },
        other => json_response(
            400,
            &json!({"ok": false, "error": format!("unknown action {other:?}: start or stop")}),
        ),
    }
}
