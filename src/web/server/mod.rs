//! The page's HTTP side: every request is checked before anything else
//! happens, then served from the embedded assets, the feed's newest updates,
//! or turned into a change. Handlers only read and send: what waits (a file,
//! the relay's answer) runs on a worker thread, never on the connections'.
//!
//! The checks, in order (issue 14's security rules):
//! 1. at most [`MAX_HEADER_BYTES`] of headers (431; a head over
//!    [`connections::MAX_HEAD_BUFFER`] was refused with 431 as it came), a
//!    body of at most [`MAX_BODY`] (413), GET or POST only (405); a request
//!    hyper could not parse has already had its 400;
//! 2. the `Host` is this computer's name for the page (`localhost`,
//!    `127.0.0.1`, `[::1]`, the bound address, or any IP literal when bound
//!    to every interface), with the page's port: a DNS-rebinding page's own
//!    host name is refused (403);
//! 3. served beyond this computer, the session token: `?token=` or the
//!    `X-Forza-Token` header (401 without it). No cookie keeps it (issue 30:
//!    cookies have no port, so one would reach every other web server on
//!    the same host): the page carries it in its own links and requests;
//! 4. a change (POST) carries a same-origin `Origin` and the token in
//!    `X-Forza-Token`, which only the page itself has read (403).
//!
//! Then every request has [`connections::REQUEST_DEADLINE`] to be answered,
//! its body included (408). What waits on a file or on the relay runs from
//! the page's bounded queue ([`super::work`]): a full queue is 503 at once,
//! and a request answered meanwhile is never carried out; the requests for
//! `/api/snapshot` share the one being made.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Extension, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures_util::StreamExt as _;
use log::info;
use serde_json::{json, Value};

use super::connections::{self, Peer};
use super::feed::{self, PageRecording};
use super::{edit, live, lock, work, Shared, MAX_BODY, MAX_HEADER_BYTES};
use crate::output::Selection;
use crate::owner::{Ticket, COMMITTED_WAIT};
use crate::setup::autostart;

/// Frames a second of `/api/stream` when `?hz=` does not say.
const DEFAULT_HZ: u32 = 30;

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");
const ICON: &str = include_str!("../assets/icon.svg");
const OVERLAY: &str = include_str!("../assets/overlay.html");
const OVERLAY_SCRIPT: &str = include_str!("../assets/overlay.js");
const OVERLAY_STYLE: &str = include_str!("../assets/overlay.css");

/// Only the page's own scripts, styles and connections; no frames, no forms
/// elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; \
                   frame-ancestors 'none'";
/// The header that carries the token (a change's, and any request's).
const TOKEN_HEADER: &str = "x-forza-token";

/// Every route, behind the checks.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(index))
        .route(
            "/app.js",
            get(|| asset(SCRIPT, "text/javascript; charset=utf-8")),
        )
        .route("/app.css", get(|| asset(STYLE, "text/css; charset=utf-8")))
        .route("/icon.svg", get(|| asset(ICON, "image/svg+xml")))
        .route("/qr.svg", get(qr_code))
        .route("/overlay", get(overlay))
        .route(
            "/overlay.js",
            get(|| asset(OVERLAY_SCRIPT, "text/javascript; charset=utf-8")),
        )
        .route(
            "/overlay.css",
            get(|| asset(OVERLAY_STYLE, "text/css; charset=utf-8")),
        )
        .route("/api/stream", get(stream_route))
        .route("/api/snapshot", get(snapshot_route))
        .route("/api/events", get(events_route))
        .route("/api/destinations", post(destinations_route))
        .route("/api/recording", post(recording_route))
        .route("/api/token", post(token_route))
        .route(
            "/api/autostart",
            get(autostart_status).post(autostart_route),
        )
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

/// A refusal: its status and why, in words.
struct Refused(StatusCode, String);

fn text(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The query's value of `key` (tokens are hex: no decoding needed).
fn query<'a>(url: &'a str, key: &str) -> Option<&'a str> {
    let (_, q) = url.split_once('?')?;
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether `host` (a `Host` header) names this page.
fn host_allowed(shared: &Shared, host: &str) -> bool {
    let addr = shared.site().addr;
    let port = addr.port();
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
        Ok(ip) if ip.is_loopback() || ip == addr.ip() => true,
        // Bound to every interface: any of this computer's addresses, which a
        // phone types as digits; a host name is what DNS rebinding needs.
        Ok(_) => addr.ip().is_unspecified(),
        Err(_) => false,
    }
}

/// The checks of the module doc.
fn check(shared: &Shared, request: &Request) -> Result<(), Refused> {
    let headers = request.headers();
    let header_bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return Err(Refused(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("headers over {MAX_HEADER_BYTES} bytes"),
        ));
    }
    let length = header_str(headers, header::CONTENT_LENGTH).and_then(|v| v.parse::<u64>().ok());
    if length.is_some_and(|n| n > MAX_BODY as u64) {
        return Err(Refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a body over {MAX_BODY} bytes"),
        ));
    }
    let method = request.method();
    if method != Method::GET && method != Method::POST {
        return Err(Refused(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {method} not allowed"),
        ));
    }
    let Some(host) = header_str(headers, header::HOST) else {
        return Err(Refused(
            StatusCode::BAD_REQUEST,
            "a request without a Host header".to_owned(),
        ));
    };
    if !host_allowed(shared, host) {
        return Err(Refused(
            StatusCode::FORBIDDEN,
            format!("Host {host:?} is not this page's address"),
        ));
    }
    let url = request.uri().path_and_query().map_or("", |p| p.as_str());
    let header_token = header_str(headers, header::HeaderName::from_static(TOKEN_HEADER));
    let given = query(url, "token").or(header_token);
    if needs_token(shared.site().need_token, request)
        && !given.is_some_and(|t| shared.token.matches(t))
    {
        return Err(Refused(
            StatusCode::UNAUTHORIZED,
            "this page needs its token: open the link with ?token=… that forza-relay logged \
             (forza-relay web new-token makes a new one)"
                .to_owned(),
        ));
    }
    if method == Method::POST {
        let origin = header_str(headers, header::ORIGIN).unwrap_or_default();
        if origin != format!("http://{host}") {
            return Err(Refused(
                StatusCode::FORBIDDEN,
                format!("Origin {origin:?} is not this page"),
            ));
        }
        if !header_token.is_some_and(|t| shared.token.matches(t)) {
            return Err(Refused(
                StatusCode::FORBIDDEN,
                "a change needs the page's token".to_owned(),
            ));
        }
    }
    Ok(())
}

/// What may be read with no token from this computer (a loopback peer) when
/// the page is served beyond it: the overlay and the frame stream, which
/// change nothing (an OBS browser source on this computer opens them as they
/// are).
const READ_ONLY: &[&str] = &[
    "/overlay",
    "/overlay.js",
    "/overlay.css",
    "/icon.svg",
    "/api/stream",
];

/// Whether `request` needs the token: every one when the page is served
/// beyond this computer (`beyond`), but the read-only ones from this computer.
fn needs_token(beyond: bool, request: &Request) -> bool {
    let from_here = request
        .extensions()
        .get::<Peer>()
        .is_some_and(|p| p.0.ip().to_canonical().is_loopback());
    beyond && !(from_here && READ_ONLY.contains(&request.uri().path()))
}

/// Runs the checks, then the route within [`connections::REQUEST_DEADLINE`];
/// every answer gets the security headers.
async fn guard(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let mut response = match check(&shared, &request) {
        Err(Refused(status, why)) => text(status, format!("{why}\n")),
        Ok(()) => {
            // A request answered 408 here drops its route, and with it its
            // place in the queue of waiting work: it is never carried out.
            // Its work knows when that is, from the request's start.
            let mut request = request;
            request
                .extensions_mut()
                .insert(Answered(Instant::now() + connections::REQUEST_DEADLINE));
            let answered =
                tokio::time::timeout(connections::REQUEST_DEADLINE, next.run(request)).await;
            answered.unwrap_or_else(|_| {
                text(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "not answered within {} s (a body that did not come?); nothing was \
                         done\n",
                        connections::REQUEST_DEADLINE.as_secs()
                    ),
                )
            })
        }
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn not_found(request: Request) -> Response {
    text(
        StatusCode::NOT_FOUND,
        format!("no such page: {}\n", request.uri().path()),
    )
}

/// The QR code of the page's LAN address, when it is served there.
async fn qr_code(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    match shared.phone() {
        Some(phone) => ([(header::CONTENT_TYPE, "image/svg+xml")], phone.svg).into_response(),
        None => not_found(request).await,
    }
}

/// `?token=…` for the page's own links when it needs its token, else
/// nothing.
fn token_query(shared: &Shared) -> String {
    match shared.site().need_token {
        true => format!("?token={}", shared.token.current()),
        false => String::new(),
    }
}

async fn index(State(shared): State<Arc<Shared>>) -> Response {
    let page = INDEX
        .replace("{{token}}", &shared.token.current())
        .replace("{{query}}", &token_query(&shared));
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// The overlay's page, its own files linked with the token when it needs one
/// (another computer opens it with `?token=`).
async fn overlay(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let query = match needs_token(shared.site().need_token, &request) {
        true => token_query(&shared),
        false => String::new(),
    };
    let page = OVERLAY.replace("{{query}}", &query);
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// Runs `work` from the page's queue of waiting work: `Err` (the answer) when
/// the queue is full or the page stops. Dropping the returned future (the
/// request answered 408, its client gone) gives the job up if it has not
/// started.
async fn on_worker<T: Send + 'static>(
    shared: &Shared,
    Answered(deadline): Answered,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    let waiting = shared
        .work
        .submit(deadline, work)
        .map_err(|work::Full| busy())?;
    waiting.answer().await.ok_or_else(stopping)
}

fn busy() -> Response {
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "the page is busy: {} requests wait already; try again\n",
            super::QUEUED
        ),
    )
}

fn stopping() -> Response {
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        "the page is stopping\n".to_owned(),
    )
}

/// The `/api/snapshot` being made: every request for one meanwhile waits for
/// it (issue 30: 200 clients no longer queue 200 of them). Its job makes
/// nothing when no request waits any more, and a job skipped past its
/// deadline closes the channel: its waiters are answered at once.
pub struct Flight {
    /// Which flight, for its job to clear only its own.
    id: u64,
    answer: tokio::sync::watch::Receiver<Option<Arc<str>>>,
    _job: work::Waiting<()>,
}

async fn snapshot_route(State(shared): State<Arc<Shared>>) -> Response {
    static FLIGHTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut answer = {
        let mut flight = lock(&shared.snapshot_flight);
        match &*flight {
            // Its job has not been dropped unrun.
            Some(f) if f.answer.has_changed().is_ok() => f.answer.clone(),
            _ => {
                let id = FLIGHTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (tx, rx) = tokio::sync::watch::channel(None);
                // This request's, counted before the job can look.
                let waiter = rx.clone();
                let job = {
                    let shared = shared.clone();
                    move || {
                        // The flight's own receiver and at least one request.
                        let value = (tx.receiver_count() > 1).then(|| snapshot(&shared));
                        // A request from now on asks for a newer one.
                        {
                            let mut flight = lock(&shared.snapshot_flight);
                            if flight.as_ref().is_some_and(|f| f.id == id) {
                                *flight = None;
                            }
                        }
                        if let Some(value) = value {
                            tx.send_replace(Some(Arc::from(value.to_string())));
                        }
                    }
                };
                let deadline = Instant::now() + connections::REQUEST_DEADLINE;
                let Ok(job) = shared.work.submit(deadline, job) else {
                    return busy();
                };
                *flight = Some(Flight {
                    id,
                    answer: rx,
                    _job: job,
                });
                waiter
            }
        }
    };
    let made = answer
        .wait_for(Option::is_some)
        .await
        .map(|value| value.clone());
    match made {
        Ok(Some(body)) => (
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
        // Its job was dropped unrun (past its deadline, or the page stops).
        _ => stopping(),
    }
}

async fn events_route(State(shared): State<Arc<Shared>>) -> Response {
    live::page_events(&shared).into_response()
}

/// `text` with its `%XX` escapes and `+` decoded (a query's value).
fn decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What `/api/stream?hz=&fields=` asks for, or why it can't be.
fn stream_query(url: &str) -> Result<(u32, Selection), String> {
    let hz = match query(url, "hz").map(decoded) {
        None => DEFAULT_HZ,
        Some(text) => match text.trim().parse::<u32>() {
            Ok(hz) if (1..=feed::MAX_HZ).contains(&hz) => hz,
            _ => {
                return Err(format!(
                    "hz: {text:?} is not a number of frames a second from 1 to {} (the \
                     game's rate at most: a frame is sent only once)",
                    feed::MAX_HZ
                ))
            }
        },
    };
    let selection = match query(url, "fields").map(decoded) {
        None => Selection::all(),
        Some(names) => Selection::names(names.split(',')).map_err(|e| {
            if e.unknown.is_empty() && !e.repeated.is_empty() {
                return format!("fields: {}", e.repeated_message());
            }
            let quoted: Vec<String> = e.unknown.iter().map(|n| format!("{n:?}")).collect();
            let valid: Vec<String> = Selection::all()
                .columns()
                .iter()
                .map(|c| c.name())
                .collect();
            format!(
                "fields: no column named {} (the names of `forza-relay export --fields`; \
                 a per-wheel field such as TireTemp gives its four wheels). Valid names: {}",
                quoted.join(", "),
                valid.join(", ")
            )
        })?,
    };
    Ok((hz, selection))
}

/// The game's frames as Server-Sent Events: `?hz=` (default
/// [`DEFAULT_HZ`]), `?fields=` export's names.
async fn stream_route(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let url = request.uri().path_and_query().map_or("", |p| p.as_str());
    match stream_query(url) {
        Ok((hz, selection)) => live::frames(&shared, hz, &selection).into_response(),
        Err(why) => text(StatusCode::BAD_REQUEST, format!("{why}\n")),
    }
}

/// The request's JSON body, or the response refusing it.
async fn body(request: Request) -> Result<Value, Response> {
    let mut bytes = Vec::new();
    let mut stream = request.into_body().into_data_stream();
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else {
            return Err(text(
                StatusCode::BAD_REQUEST,
                "the body could not be read\n".to_owned(),
            ));
        };
        if bytes.len() + chunk.len() > MAX_BODY {
            return Err(text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("a body over {MAX_BODY} bytes\n"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| text(StatusCode::BAD_REQUEST, format!("not JSON: {e}\n")))
}

async fn destinations_route(
    State(shared): State<Arc<Shared>>,
    Extension(answered): Extension<Answered>,
    request: Request,
) -> Response {
    let value = match body(request).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    // Committed to early enough that the relay's answer comes before the
    // request's 408 (review of issue 30: committed to just before it, an edit
    // answered "nothing was done" was made after).
    let ticket = Ticket::until(answered.0 - COMMITTED_WAIT - Duration::from_secs(1));
    // Given up when this request is answered without it (a 408): the owner
    // then never makes it.
    let _give_up = GiveUp(ticket.clone());
    let run = {
        let shared = shared.clone();
        move || change(&shared, &value, &ticket)
    };
    on_worker(&shared, answered, run)
        .await
        .unwrap_or_else(|r| r)
}

/// When a request is answered 408 if its route has not answered it: set by
/// [`guard`] as the request comes, for the work the route queues.
#[derive(Debug, Clone, Copy)]
struct Answered(Instant);

/// Gives its ticket up when dropped: the request it belongs to is answered.
struct GiveUp(Ticket);

impl Drop for GiveUp {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

async fn recording_route(
    State(shared): State<Arc<Shared>>,
    Extension(answered): Extension<Answered>,
    request: Request,
) -> Response {
    let value = match body(request).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let run = {
        let shared = shared.clone();
        move || recording(&shared, &value)
    };
    on_worker(&shared, answered, run)
        .await
        .unwrap_or_else(|r| r)
}

/// A new token for the page (issue 30): the old one opens nothing from now
/// on; the answer has the new one, for the page to open itself with.
async fn token_route(
    State(shared): State<Arc<Shared>>,
    Extension(answered): Extension<Answered>,
) -> Response {
    let run = {
        let shared = shared.clone();
        move || shared.token.renew()
    };
    match on_worker(&shared, answered, run).await {
        Ok(Ok(token)) => {
            info!("web page: a new token was made on the page; the old one opens nothing now");
            json_response(StatusCode::OK, &json!({"ok": true, "token": token}))
        }
        Ok(Err(e)) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &json!({"ok": false, "error": format!("no new token: {e}")}),
        ),
        Err(r) => r,
    }
}

/// "Start at login" as `autostart status` says it: `on`, the lines it said,
/// and whether the page can turn it on (it needs a configuration file).
fn autostart_json(said: Result<Vec<String>, std::io::Error>, file: bool) -> Value {
    match said {
        Ok(said) => json!({
            "ok": true,
            "on": autostart::is_on(&said),
            "said": said,
            "can": file,
        }),
        Err(e) => json!({"ok": false, "error": e.to_string(), "can": file}),
    }
}

async fn autostart_status(
    State(shared): State<Arc<Shared>>,
    Extension(answered): Extension<Answered>,
) -> Response {
    let file = shared.file.is_some();
    match on_worker(&shared, answered, autostart::status).await {
        Ok(said) => json_response(StatusCode::OK, &autostart_json(said, file)),
        Err(r) => r,
    }
}

/// Turns "Start at login" on or off, through the same code as `forza-relay
/// autostart on|off`; on, the relay starts at the next login (this one runs
/// already).
async fn autostart_route(
    State(shared): State<Arc<Shared>>,
    Extension(answered): Extension<Answered>,
    request: Request,
) -> Response {
    let value = match body(request).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let file = shared.file.clone();
    let work = move || {
        let said = match (value.get("action").and_then(Value::as_str), &file) {
            (Some("on"), Some(file)) => autostart::Launch::new(file)
                .and_then(|launch| autostart::on(&launch, autostart::Start::AtNextLogin)),
            (Some("on"), None) => {
                return json_response(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &json!({"ok": false, "error": "Start at login runs a configuration file: \
                        with none (run --to …), save one first (forza-relay setup --write \
                        forza-relay.toml) and start forza-relay with it"}),
                )
            }
            (Some("off"), _) => autostart::off(),
            (other, _) => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &json!({"ok": false, "error": format!("unknown action {other:?}: on or off")}),
                )
            }
        };
        match said {
            Ok(said) => {
                // Each thing done, in its first line (the file's text is not
                // for the log).
                for line in said.iter().filter_map(|l| l.lines().next()) {
                    info!("web page: start at login: {line}");
                }
                json_response(
                    StatusCode::OK,
                    &autostart_json(autostart::status(), file.is_some()),
                )
            }
            Err(e) => json_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                &json!({"ok": false, "error": e.to_string()}),
            ),
        }
    };
    on_worker(&shared, answered, work)
        .await
        .unwrap_or_else(|r| r)
}

/// Everything the page shows, now: for scripts, and for a page that opens.
/// While a page is open the feed's newest updates; with none, the relay is
/// asked now and listened to for the car (at most [`feed::CAR_WAIT`]).
pub fn snapshot(shared: &Shared) -> Value {
    let page_open = lock(&shared.listeners).pages > 0;
    let u = &shared.updates;
    let (car, counters, log) = match page_open {
        true => (
            feed::newest(&u.car),
            feed::newest(&u.counters),
            feed::newest(&u.log),
        ),
        false => (None, None, None),
    };
    let model = (!page_open).then(|| feed::listen_once(shared));
    let car = car.or_else(|| model.as_ref()?.car().map(feed::car_json));
    let counters = counters.or_else(|| {
        let mut answers = lock(&shared.answers);
        let now = answers.take(std::time::Duration::from_millis(200))?;
        Some(feed::counters_json(
            shared,
            now,
            &mut lock(&shared.counting),
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
    // The races kept (issue 34), newest first: a name to `replay`.
    let races: Vec<Value> = shared
        .races
        .as_deref()
        .map(crate::app::races::list)
        .unwrap_or_default()
        .iter()
        .rev()
        .map(|p| {
            json!({
                "name": p.file_name().map(|n| n.to_string_lossy().into_owned()),
                "path": p.display().to_string(),
                "bytes": std::fs::metadata(p).map(|m| m.len()).ok(),
            })
        })
        .collect();
    json!({
        "car": car,
        "counters": counters,
        "races": races,
        "log": log.unwrap_or_else(feed::log_json),
        "presets": presets,
        "phone": shared.phone().map(|p| json!({"url": p.url, "qr": "/qr.svg"})),
    })
}

/// A change of destinations: answered once the configuration's owner made it
/// and the relay applied it, or with why nothing changed ([`edit::change`]).
fn change(shared: &Shared, value: &Value, ticket: &Ticket) -> Response {
    let (status, body) = edit::change(shared, value, ticket);
    json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &body,
    )
}

fn recording(shared: &Shared, value: &Value) -> Response {
    let mut current = lock(&shared.recording);
    match value.get("action").and_then(Value::as_str) {
        Some("start") if current.is_none() => {
            match PageRecording::start(shared, &feed::recording_template(shared)) {
                Ok(r) => {
                    let described = r.describe();
                    *current = Some(r);
                    json_response(StatusCode::OK, &json!({"ok": true, "recording": described}))
                }
                Err(e) => json_response(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &json!({"ok": false, "error": e}),
                ),
            }
        }
        Some("start") => json_response(
            StatusCode::CONFLICT,
            &json!({"ok": false, "error": "already recording"}),
        ),
        Some("stop") => match current.take() {
            Some(r) => {
                let written = r.finish();
                lock(&shared.last_recording).clone_from(&written);
                json_response(StatusCode::OK, &json!({"ok": true, "recorded": written}))
            }
            None => json_response(
                StatusCode::CONFLICT,
                &json!({"ok": false, "error": "not recording"}),
            ),
        },
        other => json_response(
            StatusCode::BAD_REQUEST,
            &json!({"ok": false, "error": format!("unknown action {other:?}: start or stop")}),
        ),
    }
}

#[cfg(test)]
mod tests;
