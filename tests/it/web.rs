//! `run`'s web page through the real binary: what it serves, what it refuses
//! (a foreign Host, a missing or wrong token, a cross-origin change, an
//! oversized body, malformed requests) with nothing changed and the relay
//! still forwarding every packet, and destinations changed from it.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use forza_relay::wire::Format;

use common::bin::Bin;
use common::http::{self, get, request, Reply};
use common::rig::{Game, Pace, Tool};
use common::*;

/// How long a change from the page may take to reach the relay.
const APPLY_WITHIN: Duration = Duration::from_secs(5);

/// Waits until it runs: the relay's address, the page's, the token in the
/// page's URL (empty on loopback).
pub(crate) fn started(bin: &mut Bin) -> (SocketAddr, SocketAddr, String) {
    let listen = bin.wait_for_address("listen on ");
    let (web, token) = web_addr(bin);
    bin.wait_for_line("running; press Ctrl-C to stop");
    (listen, web, token)
}

/// `run` listening and serving its page on ports the OS gives, summaries
/// off, sending to each of `to` (`--to` values), in `dir`.
pub(crate) fn spawn_with_page(to: &[&str], dir: Option<&Path>) -> Bin {
    let mut args = vec![
        "run",
        "--listen",
        "127.0.0.1:0",
        "--web",
        "127.0.0.1:0",
        "--stats-interval",
        "0",
    ];
    for t in to {
        args.extend(["--to", t]);
    }
    Bin::spawn(&args, dir)
}

/// [`spawn_with_page`], waited for until it runs: the relay, its listen
/// address and its page's.
pub(crate) fn started_with_page(to: &[&str], dir: Option<&Path>) -> (Bin, SocketAddr, SocketAddr) {
    let mut bin = spawn_with_page(to, dir);
    let (listen, web, _) = started(&mut bin);
    (bin, listen, web)
}

/// The page's address, from `web page on http://ADDR/…`.
pub(crate) fn web_addr(bin: &mut Bin) -> (SocketAddr, String) {
    let line = bin.wait_for_line("web page on http://");
    let url = &line[line.find("http://").unwrap() + 7..];
    let url = url.split_whitespace().next().unwrap();
    let (addr, rest) = url.split_once('/').unwrap();
    let token = rest.strip_prefix("?token=").unwrap_or_default().to_owned();
    (
        addr.parse()
            .unwrap_or_else(|_| panic!("no address in {line:?}")),
        token,
    )
}

/// The session token, as the page gets it.
pub(crate) fn page_token(page: &Reply) -> String {
    let at = page
        .body
        .find("name=\"forza-token\" content=\"")
        .expect("the token's meta")
        + 28;
    page.body[at..at + 32].to_owned()
}

/// Sends `n` racing packets and checks that `receiver` gets each.
#[track_caller]
pub(crate) fn forwards(sender: &Sender, receiver: &UdpSocket, n: u32) {
    for i in 0..n {
        let p = Spec::new(Format::Fh5, 1_000 + i).build();
        sender.send(&p);
        assert_eq!(recv(receiver), p, "packet {i}");
    }
}

pub(crate) fn destinations(web: SocketAddr, headers: &[&str]) -> Vec<String> {
    let snapshot = get(web, "/api/snapshot", headers).json();
    snapshot["counters"]["destinations"]
        .as_array()
        .expect("destinations")
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_owned())
        .collect()
}

pub(crate) fn post_change(web: SocketAddr, token: &str, body: &str) -> Reply {
    request(
        web,
        "POST",
        "/api/destinations",
        &[
            &format!("Origin: http://{web}"),
            &format!("X-Forza-Token: {token}"),
            "Content-Type: application/json",
        ],
        body,
    )
}

/// The relay on a free port, its page on loopback (another free port), one
/// destination `tool` at `to`, no periodic summary.
fn relay_with_page(to: SocketAddr) -> Bin {
    spawn_with_page(&[&format!("{to},name=tool")], None)
}

#[test]
fn on_loopback_it_serves_the_page_and_refuses_every_unsafe_request_while_relaying() {
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, token) = started(&mut bin);
    assert!(token.is_empty(), "no token in the URL on loopback");
    let sender = Sender::new(listen);
    forwards(&sender, &receiver, 5);

    let page = get(web, "/", &[]);
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").expect("a CSP");
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(
        !page.body.contains(" on") || !page.body.contains("onclick="),
        "no inline handlers"
    );
    let token = page_token(&page);
    for label in ["Name", "Address", "Format"] {
        assert!(
            page.body.contains(&format!(">{label}</label>")),
            "label {label}"
        );
    }
    assert!(page.body.contains(">Add</button>"));
    for asset in ["/app.js", "/app.css", "/icon.svg"] {
        assert_eq!(get(web, asset, &[]).status, 200, "{asset}");
    }
    assert_eq!(destinations(web, &[]), ["tool"]);

    // DNS rebinding: a page of another name that resolves here.
    let foreign = get(
        web,
        "/api/snapshot",
        &[&format!("Host: evil.example:{}", web.port())],
    );
    assert_eq!(foreign.status, 403, "{foreign:?}");
    for host in ["localhost", "127.0.0.1", "[::1]"] {
        let ok = get(
            web,
            "/api/snapshot",
            &[&format!("Host: {host}:{}", web.port())],
        );
        assert_eq!(ok.status, 200, "Host {host}");
    }
    let add = r#"{"action":"add","name":"evil","addr":"127.0.0.1:9"}"#;
    let origin = format!("Origin: http://{web}");
    let with_token = format!("X-Forza-Token: {token}");
    let refused = [
        // Cross-origin, no origin, no token, a wrong token.
        vec!["Origin: http://evil.example".to_owned(), with_token.clone()],
        vec![with_token.clone()],
        vec![origin.clone()],
        vec![origin.clone(), format!("X-Forza-Token: {}", "0".repeat(32))],
    ];
    for headers in refused {
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let r = request(web, "POST", "/api/destinations", &headers, add);
        assert_eq!(r.status, 403, "{headers:?}: {r:?}");
    }
    // An oversized body, said and sent.
    let big = format!(
        r#"{{"action":"add","name":"{}","addr":"127.0.0.1:9"}}"#,
        "x".repeat(40_000)
    );
    let r = request(
        web,
        "POST",
        "/api/destinations",
        &[&origin, &with_token],
        &big,
    );
    assert_eq!(r.status, 413, "{:?}", r.status);
    // Headers over the limit.
    let huge = format!("X-Junk: {}", "y".repeat(10_000));
    assert_eq!(get(web, "/", &[&huge]).status, 431);
    // Malformed requests: each gets 400 (or the connection closed), nothing else.
    let mut answered = 0;
    for i in 0..1_000 {
        let garbage: &[u8] = match i % 4 {
            0 => b"NOT HTTP AT ALL\r\n\r\n",
            1 => b"GET / HTTP/9.9\r\n\r\n",
            2 => b"GET /\x00\xff HTTP/1.1\r\nHost\r\n\r\n",
            _ => b"POST /api/destinations HTTP/1.1\r\nConnection: close\r\nContent-Length: -5\r\n\r\n",
        };
        if let Some(r) = http::raw(web, garbage) {
            assert!(
                r.status == 400 || r.status == 505,
                "request {i}: {:?}",
                r.status
            );
            answered += 1;
        }
    }
    assert!(answered > 0, "malformed requests are answered with 400");
    assert_eq!(destinations(web, &[]), ["tool"], "nothing changed");
    forwards(&sender, &receiver, 50);

    // A page's event stream says something at once.
    let mut events = std::net::TcpStream::connect(web).unwrap();
    use std::io::{Read as _, Write as _};
    events
        .write_all(format!("GET /api/events HTTP/1.1\r\nHost: {web}\r\n\r\n").as_bytes())
        .unwrap();
    events
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("event: counters") {
        let n = events.read(&mut buf).expect("an event within 10 s");
        assert!(n > 0, "the stream closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("text/event-stream"), "{seen}");
    forwards(&sender, &receiver, 20);
    drop(events);

    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// Served beyond loopback, every request needs the token, in the URL or in
/// `X-Forza-Token`; issue 30: no cookie keeps it (cookies have no port: one
/// reached every other web server on the same host), and the first line the
/// relay logs is a link that opens the page from this computer.
#[test]
fn beyond_loopback_every_request_needs_the_token_and_no_cookie_carries_it() {
    let (receiver, to) = receiver();
    let mut bin = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--web",
            "0.0.0.0:0",
            "--stats-interval",
            "0",
            "--to",
            &format!("{to},name=tool"),
        ],
        None,
    );
    let listen = bin.wait_for_address("listen on ");
    let (web, token) = web_addr(&mut bin);
    assert!(web.ip().is_loopback(), "a link from this computer: {web}");
    assert_eq!(token.len(), 32, "{token}");
    let port = web.port();
    bin.wait_for_line("running; press Ctrl-C to stop");
    let sender = Sender::new(listen);

    for path in ["/", "/api/snapshot", "/app.js", "/api/events"] {
        assert_eq!(get(web, path, &[]).status, 401, "{path} without a token");
        let wrong = format!("{path}?token={}", "f".repeat(32));
        assert_eq!(
            get(web, &wrong, &[]).status,
            401,
            "{path} with a wrong token"
        );
    }
    // Another page's cookie, even named after this port, opens nothing.
    for name in [
        "forza_relay_token".to_owned(),
        format!("forza_relay_token_{port}"),
    ] {
        let cookie = format!("Cookie: {name}={token}");
        assert_eq!(get(web, "/api/snapshot", &[&cookie]).status, 401, "{name}");
    }
    let r = request(
        web,
        "POST",
        "/api/destinations",
        &[&format!("Origin: http://{web}")],
        r#"{"action":"remove","name":"tool"}"#,
    );
    assert_eq!(r.status, 401);

    let page = get(web, &format!("/?token={token}"), &[]);
    assert_eq!(page.status, 200);
    assert_eq!(page.header("set-cookie"), None, "no cookie keeps the token");
    // The page links its own files with the token.
    assert!(
        page.body.contains(&format!("/app.js?token={token}")),
        "{}",
        page.body
    );
    assert_eq!(get(web, &format!("/app.js?token={token}"), &[]).status, 200);
    let header = format!("X-Forza-Token: {token}");
    assert_eq!(destinations(web, &[&header]), ["tool"], "nothing changed");
    // A LAN address typed as digits is this page; a host name is not.
    let by_name = get(
        web,
        "/api/snapshot",
        &[&header, &format!("Host: relay.example:{port}")],
    );
    assert_eq!(by_name.status, 403);
    forwards(&sender, &receiver, 20);

    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

#[test]
fn a_destination_added_from_the_page_is_written_with_the_comments_and_relayed_to() {
    let (first, first_addr) = receiver();
    let text = format!(
        "# my relay: the comments stay\n{}\n# the first tool\n{}",
        listen_toml("fh5"),
        destination_toml("first", first_addr, "same", "")
    );
    let text = text.replace(
        "[stats]",
        "[web]\naddr = \"127.0.0.1:0\" # where the page is\n\n[stats]",
    );
    let file = TempPath::file("web.toml", &text);
    let path = file.path().to_str().unwrap();
    let mut bin = Bin::spawn(&["run", "--config", path], None);
    let (listen, web, _) = started(&mut bin);
    let sender = Sender::new(listen);
    forwards(&sender, &first, 3);
    let token = page_token(&get(web, "/", &[]));

    let (second, second_addr) = receiver();
    let r = post_change(
        web,
        &token,
        &format!(r#"{{"action":"add","name":"second","addr":"{second_addr}","format":"fh4"}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["saved"], true);
    let written = std::fs::read_to_string(file.path()).unwrap();
    assert!(
        written.starts_with(&text),
        "comments, order and formatting kept:\n{written}"
    );
    assert!(
        written.contains(&format!("addr = \"{second_addr}\"")),
        "{written}"
    );
    bin.wait_for_line("configuration applied: + second (fh4)");
    // Datagrams reach the new receiver, translated.
    let deadline = Instant::now() + APPLY_WITHIN;
    second
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut buf = [0u8; MAX_DATAGRAM];
    let got = loop {
        sender.send(&Spec::new(Format::Fh5, 7).build());
        let _ = recv(&first);
        if let Ok(n) = second.recv(&mut buf) {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "nothing reached the new destination"
        );
    };
    assert_eq!(got, Format::Fh4.len());

    // A change that makes the file invalid is refused and not written.
    let r = post_change(
        web,
        &token,
        r#"{"action":"add","name":"bad","addr":"nowhere"}"#,
    );
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(
        r.json()["error"].as_str().unwrap().contains("nowhere"),
        "{}",
        r.body
    );
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), written);

    let r = post_change(web, &token, r#"{"action":"remove","name":"second"}"#);
    assert_eq!(r.status, 200, "{}", r.body);
    bin.wait_for_line("configuration applied: - second");
    assert_eq!(
        std::fs::read_to_string(file.path()).unwrap().trim_end(),
        text.trim_end()
    );
    // Nothing more arrives there.
    while second.recv(&mut buf).is_ok() {}
    forwards(&sender, &first, 10);
    assert!(
        second.recv(&mut buf).is_err(),
        "still sent to a removed destination"
    );

    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

#[test]
fn without_a_file_a_change_applies_to_the_running_relay_and_says_it_is_not_saved() {
    let (first, first_addr) = receiver();
    let mut bin = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--web",
            "127.0.0.1:0",
            "--to",
            &format!("{first_addr},name=first"),
        ],
        None,
    );
    let (listen, web, _) = started(&mut bin);
    let token = page_token(&get(web, "/", &[]));
    let snapshot = get(web, "/api/snapshot", &[]).json();
    assert_eq!(snapshot["counters"]["saved"], false);
    let (second, second_addr) = receiver();
    let r = post_change(
        web,
        &token,
        &format!(r#"{{"action":"add","name":"second","addr":"{second_addr}"}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["saved"], false);
    assert!(r.body.contains("not saved"), "{}", r.body);
    let sender = Sender::new(listen);
    let p = Spec::new(Format::Fh5, 1).build();
    sender.send(&p);
    assert_eq!(recv(&first), p);
    assert_eq!(recv(&second), p);
    assert_eq!(destinations(web, &[]), ["first", "second"]);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

#[test]
fn a_taken_port_is_one_warning_and_the_relay_runs_on_without_the_page() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (receiver, to) = receiver();
    let mut bin = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--web",
            &format!("127.0.0.1:{port}"),
            "--to",
            &to.to_string(),
        ],
        None,
    );
    let listen = bin.wait_for_address("listen on ");
    let warning = bin.wait_for_line("no web page");
    assert!(warning.contains(&format!("port {port}")), "{warning}");
    bin.wait_for_line("running; press Ctrl-C to stop");
    forwards(&Sender::new(listen), &receiver, 10);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let warnings = done
        .stderr
        .lines()
        .filter(|l| l.contains("no web page"))
        .count();
    assert_eq!(warnings, 1, "{}", done.stderr);
}

/// Issue 14: `/api/snapshot` gives the car with no page open (the page's feed
/// listens to the relay only while one is): the relay is listened to for a
/// moment, and `car` is `null` only when nothing arrives in it.
#[test]
fn the_snapshot_gives_the_car_with_no_page_open() {
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, _) = started(&mut bin);
    let quiet = get(web, "/api/snapshot", &[]).json();
    assert!(quiet["car"].is_null(), "nothing sent: {}", quiet["car"]);
    assert_eq!(quiet["counters"]["destinations"][0]["name"], "tool");

    let (snapshot, sent) = snapshot_while_a_game_sends(listen, web, true);
    let kmh = snapshot["car"]["speed_kmh"]
        .as_f64()
        .unwrap_or_else(|| panic!("no speed in {}", snapshot["car"]));
    assert!(
        (kmh - f64::from(SPEED) * 3.6).abs() <= 1.0,
        "{kmh} km/h shown for {SPEED} m/s"
    );
    assert_eq!(snapshot["car"]["gear"], GEAR.to_string());
    // What the short listen learnt of the input.
    assert!(
        snapshot["counters"]["input"]["sender"].is_string(),
        "{}",
        snapshot["counters"]["input"]
    );
    // The relay forwarded every packet meanwhile.
    for i in 0..sent {
        assert_eq!(recv(&receiver), Spec::new(Format::Fh5, i).build(), "{i}");
    }
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// `/api/snapshot` asked while a game sends fh5 packets at 60 Hz (IsRaceOn =
/// `racing`) to `listen`: the snapshot, and how many packets were sent.
fn snapshot_while_a_game_sends(
    listen: SocketAddr,
    web: SocketAddr,
    racing: bool,
) -> (serde_json::Value, u32) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let game = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let sender = Sender::new(listen);
            let mut sent = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && sent < 6_000 {
                sender.send(&Spec::new(Format::Fh5, sent).racing(racing).build());
                sent += 1;
                std::thread::sleep(Duration::from_millis(16));
            }
            sent
        }
    });
    let snapshot = get(web, "/api/snapshot", &[]).json();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    (snapshot, game.join().unwrap())
}

/// A game in a menu (IsRaceOn = 0) is said on the page as not racing, over no
/// car; once it races, the car shows and the note goes.
#[test]
fn a_game_in_a_menu_is_said_not_racing_and_a_race_clears_it() {
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, _) = started(&mut bin);

    let (menu, sent) = snapshot_while_a_game_sends(listen, web, false);
    assert!(sent > 0, "the game sent nothing");
    assert!(
        menu["car"].is_null(),
        "a car from menu frames: {}",
        menu["car"]
    );
    assert_eq!(
        menu["counters"]["input"]["not_racing"], true,
        "{}",
        menu["counters"]["input"]
    );
    for i in 0..sent {
        let got = recv(&receiver);
        assert_eq!(got, Spec::new(Format::Fh5, i).racing(false).build(), "{i}");
    }

    let (race, sent) = snapshot_while_a_game_sends(listen, web, true);
    assert_eq!(
        race["counters"]["input"]["not_racing"], false,
        "{}",
        race["counters"]["input"]
    );
    assert_eq!(race["car"]["gear"], GEAR.to_string(), "{}", race["car"]);
    for i in 0..sent {
        assert_eq!(recv(&receiver), Spec::new(Format::Fh5, i).build(), "{i}");
    }
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// Issue 14: a recording started from the page shows its packet count while it
/// grows (the recorder's shared counter).
#[test]
fn a_recording_from_the_page_counts_its_packets_as_it_grows() {
    let folder = TempPath::dir("web-recording");
    let (receiver, to) = receiver();
    let (bin, listen, web) = started_with_page(&[&to.to_string()], Some(folder.path()));
    let token = page_token(&get(web, "/", &[]));
    let post = |action: &str| {
        request(
            web,
            "POST",
            "/api/recording",
            &[
                &format!("Origin: http://{web}"),
                &format!("X-Forza-Token: {token}"),
                "Content-Type: application/json",
            ],
            &format!(r#"{{"action":"{action}"}}"#),
        )
    };
    let started = post("start");
    assert_eq!(started.status, 200, "{}", started.body);
    assert_eq!(started.json()["recording"]["packets"], 0);
    forwards(&Sender::new(listen), &receiver, 20);
    let deadline = Instant::now() + APPLY_WITHIN;
    let recording = loop {
        let r = get(web, "/api/snapshot", &[]).json()["counters"]["recording"].clone();
        if r["packets"] == 20 || Instant::now() >= deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(recording["packets"], 20, "{recording}");
    assert!(recording["bytes"].as_u64().unwrap() > 0, "{recording}");
    assert_eq!(post("stop").status, 200);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// Issue 14: started by double-click (no arguments, a `forza-relay.toml`
/// found) the page opens in the default browser — here the program
/// `FORZA_RELAY_OPENER` names, a script that writes the URL it gets to a file;
/// started with any argument, it does not.
#[cfg(unix)]
#[test]
fn a_double_click_start_opens_the_page_and_a_start_with_arguments_does_not() {
    use std::os::unix::fs::PermissionsExt as _;

    let folder = TempPath::dir("web-open");
    let (_receiver, to) = receiver();
    std::fs::write(
        folder.path().join("forza-relay.toml"),
        format!(
            "[listen]\naddr = \"127.0.0.1:0\"\n[web]\naddr = \"127.0.0.1:0\"\n\
             [[destination]]\naddr = \"{to}\"\n"
        ),
    )
    .unwrap();
    let opened = folder.path().join("opened.txt");
    let script = folder.path().join("opener.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > '{}'\n", opened.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let start = |args: &[&str]| {
        let mut command = common::bin::command();
        command
            .args(args)
            .current_dir(folder.path())
            .env("FORZA_RELAY_OPENER", &script);
        Bin::spawn_command(command)
    };

    let mut bin = start(&[]);
    let (web, _) = web_addr(&mut bin);
    bin.wait_for_line("opening http://");
    let deadline = Instant::now() + APPLY_WITHIN;
    // The file is made before the opener writes into it.
    let written = || std::fs::read_to_string(&opened).unwrap_or_default();
    while written().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let url = written();
    assert_eq!(url, format!("http://{web}/"));
    assert_eq!(get(web, "/", &[]).status, 200, "the page is there");
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
    std::fs::remove_file(&opened).unwrap();

    for args in [&["run"][..], &["run", "--web", "127.0.0.1:0"][..]] {
        let mut bin = start(args);
        let (_web, _) = web_addr(&mut bin);
        bin.wait_for_line("running; press Ctrl-C to stop");
        bin.signal("INT");
        let done = bin.wait();
        assert_eq!(done.code(), 0, "{}", done.stderr);
        assert!(
            !done.stderr.contains("opening http://"),
            "{args:?}: {}",
            done.stderr
        );
        assert!(!opened.exists(), "{args:?} opened the page");
    }
}

/// A game sending racing frames to the relay about 200 times a second, and a
/// receiver counting what the relay forwards, for tests that attack the page
/// while the relay works (issue 24: forwarding never lost a frame; the page
/// must not either).
struct Traffic {
    game: Game,
    tool: Tool<()>,
}

impl Traffic {
    fn start(listen: SocketAddr, receiver: UdpSocket) -> Traffic {
        Traffic {
            game: Game::start(listen, Pace::Hz(200), |i| Spec::new(Format::Fh5, i).build()),
            tool: Tool::start(receiver, |_| ()),
        }
    }

    /// Stops the game; every frame it sent was forwarded.
    #[track_caller]
    fn all_forwarded(self) {
        let sent = self.game.stop();
        let received = self.tool.stop_once_it_has(sent).len();
        assert!(sent > 0, "the game sent nothing");
        assert_eq!(received, sent as usize, "frames forwarded of those sent");
    }
}

/// `GET path` with a read deadline of `within`: `None` when no answer came
/// in time (a page frozen by another client).
fn get_within(web: SocketAddr, path: &str, within: Duration) -> Option<u16> {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect_timeout(&web, within).ok()?;
    s.set_read_timeout(Some(within)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {web}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Issue 24: one connection that promises a body and never sends it freezes
/// nothing: the page answers others at once (within 2 s, a deadlock's bound,
/// not a speed), and a SIGTERM ends the program with its summary and exit 0
/// within 5 s, whatever that client does.
#[test]
fn a_promised_body_that_never_comes_freezes_nothing_and_a_stop_does_not_wait_for_it() {
    use std::io::Write as _;
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, _) = started(&mut bin);
    let traffic = Traffic::start(listen, receiver);
    let mut holding = std::net::TcpStream::connect(web).unwrap();
    write!(
        holding,
        "POST /api/destinations HTTP/1.1\r\nHost: {web}\r\nOrigin: http://{web}\r\n\
         Content-Type: application/json\r\nContent-Length: 2000\r\n\r\n{{\"action\":"
    )
    .unwrap();
    for path in ["/api/snapshot", "/", "/app.js"] {
        assert_eq!(
            get_within(web, path, Duration::from_secs(2)),
            Some(200),
            "{path} while a body is promised"
        );
    }
    traffic.all_forwarded();
    bin.signal("TERM");
    let done = bin.wait_within(Duration::from_secs(5));
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_stderr_has(&["forza-relay ran for"]);
    drop(holding);
}

/// The most memory the process ever held (VmHWM), in KiB.
#[cfg(target_os = "linux")]
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// Issue 24: a header line that never ends is refused as it comes (431 at the
/// read buffer's cap), never buffered whole: 64 MiB of it leave the relay
/// under 64 MiB of memory, and the page and the relay go on.
#[cfg(target_os = "linux")]
#[test]
fn a_64_mib_header_line_is_refused_as_it_comes_and_memory_stays_small() {
    use std::io::{Read as _, Write as _};
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, _) = started(&mut bin);
    let traffic = Traffic::start(listen, receiver);
    let mut s = std::net::TcpStream::connect(web).unwrap();
    s.set_read_timeout(Some(http::HTTP_TIMEOUT)).unwrap();
    write!(s, "GET / HTTP/1.1\r\nHost: {web}\r\nX-Junk: ").unwrap();
    let chunk = vec![b'a'; 64 << 10];
    let mut written = 0usize;
    while written < 64 << 20 {
        match s.write_all(&chunk) {
            Ok(()) => written += chunk.len(),
            // The server closed the connection once its buffer was full.
            Err(_) => break,
        }
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "{answer}"
    );
    let peak = peak_kib(bin.id());
    assert!(
        peak < 64 << 10,
        "{peak} KiB at the most after {written} bytes of a header line"
    );
    assert_eq!(get(web, "/api/snapshot", &[]).status, 200);
    traffic.all_forwarded();
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
}

/// Issue 24: eight event streams that are never read hold no page out: a new
/// one takes the place of the oldest (which is closed), with no traffic to
/// fill their buffers; the page answers and the relay forwards.
#[test]
fn eight_event_streams_that_never_read_keep_no_page_out() {
    use std::io::{Read as _, Write as _};
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, _) = started(&mut bin);
    let open = |web: SocketAddr| {
        let mut s = std::net::TcpStream::connect(web).unwrap();
        write!(s, "GET /api/events HTTP/1.1\r\nHost: {web}\r\n\r\n").unwrap();
        s
    };
    let mut never_read: Vec<_> = (0..8).map(|_| open(web)).collect();
    // Each stream has started (the page's feed counts it) before the next.
    let mut fresh = open(web);
    fresh.set_read_timeout(Some(http::HTTP_TIMEOUT)).unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("event: counters") {
        let n = fresh.read(&mut buf).expect("an event within the timeout");
        assert!(n > 0, "the new stream closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    // The oldest was closed for it: its data ends.
    let oldest = &mut never_read[0];
    oldest.set_read_timeout(Some(http::HTTP_TIMEOUT)).unwrap();
    let mut rest = Vec::new();
    oldest
        .read_to_end(&mut rest)
        .expect("the oldest stream ends");
    assert_eq!(get(web, "/api/snapshot", &[]).status, 200);
    let traffic = Traffic::start(listen, receiver);
    // Pacing, not a wait for a fact: the game plays for 0.3 s beside the
    // streams that never read, then every frame it sent must have arrived.
    std::thread::sleep(Duration::from_millis(300));
    traffic.all_forwarded();
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
    drop(never_read);
}

/// Issue 24: 1,000 connections that send half a request head and wait cost no
/// thread each (tiny_http took one: 1,010 threads), and the page answers.
#[cfg(target_os = "linux")]
#[test]
fn a_thousand_slow_connections_cost_no_thread_each_and_the_page_answers() {
    use std::io::Write as _;
    let threads = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .count()
    };
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, _) = started(&mut bin);
    let traffic = Traffic::start(listen, receiver);
    let before = threads(bin.id());
    let slow: Vec<_> = (0..1_000)
        .map(|_| {
            let mut s =
                std::net::TcpStream::connect_timeout(&web, http::HTTP_TIMEOUT).expect("connect");
            let _ = write!(s, "GET / HTTP/1.1\r\nHost: {web}\r\n");
            s
        })
        .collect();
    assert_eq!(get(web, "/api/snapshot", &[]).status, 200);
    assert_eq!(get(web, "/", &[]).status, 200);
    let after = threads(bin.id());
    // At most the web page's workers more.
    assert!(
        after <= before + 2,
        "{before} threads before, {after} with 1,000 slow connections"
    );
    traffic.all_forwarded();
    drop(slow);
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
}

/// Issue 24: the form's Max age (milliseconds) is written as `max_age =
/// "50ms"` and shown per destination; a bad one is refused by the field's
/// name. Without a file, an add keeps every other destination's max_age
/// (issue 23: it was switched off).
#[test]
fn max_age_from_the_page_is_written_shown_and_kept_for_the_others() {
    let (_first, first_addr) = receiver();
    let text = page_toml("fh5", first_addr, "127.0.0.1:0");
    let file = TempPath::file("web-age.toml", &text);
    let mut bin = Bin::spawn(&["run", "--config", file.path().to_str().unwrap()], None);
    let (_, web, _) = started(&mut bin);
    let token = page_token(&get(web, "/", &[]));
    let (_rig, rig_addr) = receiver();
    let add = |age: &str| {
        post_change(
            web,
            &token,
            &format!(
                r#"{{"action":"add","name":"rig","addr":"{rig_addr}","format":"fm7","max_age_ms":{age}}}"#
            ),
        )
    };
    for (age, error) in [
        ("0", "Max age: 0 ms is out of range"),
        ("-5", "Max age: -5 is not a whole number of milliseconds"),
        (
            "\"soon\"",
            "Max age: \"soon\" is not a whole number of milliseconds",
        ),
    ] {
        let r = add(age);
        assert_eq!(r.status, 422, "{age}: {}", r.body);
        let said = r.json()["error"].as_str().unwrap().to_owned();
        assert!(said.starts_with(error), "{age}: {said}");
    }
    assert_eq!(
        std::fs::read_to_string(file.path()).unwrap(),
        text,
        "nothing written"
    );
    let r = add("50");
    assert_eq!(r.status, 200, "{}", r.body);
    let written = std::fs::read_to_string(file.path()).unwrap();
    assert!(written.contains("max_age = \"50ms\""), "{written}");
    bin.wait_for_line("configuration applied: + rig");
    let deadline = Instant::now() + APPLY_WITHIN;
    let rig = loop {
        let snapshot = get(web, "/api/snapshot", &[]).json();
        let rig = snapshot["counters"]["destinations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == "rig")
            .cloned();
        if let Some(rig) = rig {
            break rig;
        }
        assert!(Instant::now() < deadline, "rig not in {snapshot}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(rig["max_age_ms"], 50, "{rig}");
    assert_eq!(rig["addr"], rig_addr.to_string(), "{rig}");
    assert_eq!(rig["output"], "fm7", "{rig}");
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);

    // Without a file.
    let (_a, a_addr) = receiver();
    let mut bin = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--web",
            "127.0.0.1:0",
            "--to",
            &format!("{a_addr},name=a,max-age=50ms"),
        ],
        None,
    );
    let (_, web, _) = started(&mut bin);
    let token = page_token(&get(web, "/", &[]));
    let (_b, b_addr) = receiver();
    let r = post_change(
        web,
        &token,
        &format!(r#"{{"action":"add","name":"b","addr":"{b_addr}","max_age_ms":null}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["changes"],
        "+ b (same)",
        "only b changed: {}",
        r.body
    );
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        !done.stderr.contains("max_age 50ms -> off"),
        "{}",
        done.stderr
    );
}

/// Reads Server-Sent Events from `stream` until `n` `data:` objects came
/// (within [`http::HTTP_TIMEOUT`] each), each as its text and as JSON; the
/// head must say 200 and text/event-stream.
#[track_caller]
fn stream_objects(stream: &mut std::net::TcpStream, n: usize) -> Vec<(String, serde_json::Value)> {
    use std::io::Read as _;
    stream.set_read_timeout(Some(http::HTTP_TIMEOUT)).unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 16 << 10];
    let mut head_checked = false;
    let mut objects = Vec::new();
    while objects.len() < n {
        let got = stream.read(&mut buf).expect("an event within the timeout");
        assert!(got > 0, "the stream closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..got]));
        if !head_checked {
            let Some((head, rest)) = seen.split_once("\r\n\r\n") else {
                continue;
            };
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            assert!(head.contains("text/event-stream"), "{head}");
            seen = rest.to_owned();
            head_checked = true;
        }
        // Whole data lines only.
        while let Some(at) = seen.find("data: ") {
            let Some(end) = seen[at..].find('\n') else {
                break;
            };
            let line = seen[at + 6..at + end].to_owned();
            seen.drain(..at + end + 1);
            let object: serde_json::Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            objects.push((line, object));
        }
    }
    objects
}

fn open_stream(web: SocketAddr, path: &str) -> std::net::TcpStream {
    use std::io::Write as _;
    let mut s = std::net::TcpStream::connect(web).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {web}\r\n\r\n").unwrap();
    s
}

/// Issue 24: `/api/stream?hz=10` sends, for the frames the game sends, the
/// object `export --as jsonl` writes (the asked fields, in order, the values
/// sent), newer each time and at most 10 a second (6 take half a second or
/// more from the request), and the
/// relay forwards every frame meanwhile; an unknown field or a bad rate is a
/// 400 naming it.
#[test]
fn the_stream_sends_export_s_object_of_the_newest_frame_at_most_hz_a_second() {
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, _) = started(&mut bin);
    for (path, says) in [
        (
            "/api/stream?fields=Speed,Nope,alsoNot",
            "no column named \"Nope\", \"alsoNot\"",
        ),
        ("/api/stream?hz=0", "hz: \"0\""),
        ("/api/stream?hz=1000", "hz: \"1000\""),
        ("/api/stream?hz=fast", "hz: \"fast\""),
    ] {
        let r = get(web, path, &[]);
        assert_eq!(r.status, 400, "{path}");
        assert!(r.body.contains(says), "{path}: {}", r.body);
    }
    let traffic = Traffic::start(listen, receiver);
    let fields = [
        "IsRaceOn",
        "TimestampMS",
        "Speed",
        "CurrentEngineRpm",
        "Gear",
        "LapNumber",
        "speed_kmh",
        "gear_label",
        "recv_s",
        "format",
    ];
    let opened = Instant::now();
    let mut stream = open_stream(
        web,
        &format!("/api/stream?hz=10&fields={}", fields.join(",")),
    );
    let objects = stream_objects(&mut stream, 6);
    // At most 10 a second: 6 objects, each sent a tenth of a second or more
    // after the one before, all after the request, cannot all have arrived
    // sooner than half a second after it (a slow machine only adds to this).
    let took = opened.elapsed();
    assert!(
        took >= Duration::from_millis(500),
        "6 objects within {took:?}: more than 10 a second"
    );
    let mut last: Option<(f64, i64)> = None;
    for (text, o) in &objects {
        // The fields asked, and only those, in the order asked.
        let keys: std::collections::BTreeSet<&str> =
            o.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, fields.into_iter().collect(), "{o}");
        let places: Vec<usize> = fields
            .iter()
            .map(|f| text.find(&format!("\"{f}\":")).unwrap())
            .collect();
        assert!(places.windows(2).all(|w| w[0] < w[1]), "in order: {text}");
        assert_eq!(o["IsRaceOn"], 1, "{o}");
        assert_eq!(o["Speed"].as_f64(), Some(f64::from(SPEED)), "{o}");
        assert_eq!(
            o["CurrentEngineRpm"].as_f64(),
            Some(f64::from(CURRENT_ENGINE_RPM)),
            "{o}"
        );
        assert_eq!(o["Gear"], GEAR, "{o}");
        assert_eq!(o["LapNumber"], LAP_NUMBER, "{o}");
        let kmh = o["speed_kmh"].as_f64().unwrap();
        assert!((kmh - f64::from(SPEED) * 3.6).abs() < 1e-3, "{o}");
        assert_eq!(o["gear_label"], GEAR.to_string(), "{o}");
        // Listening as `auto`, a dry FH5 frame reads as fh6 (the guess for
        // 324 bytes), as export and the relay read it.
        assert_eq!(o["format"], "fh6", "{o}");
        let (at, stamp) = (
            o["recv_s"].as_f64().unwrap(),
            o["TimestampMS"].as_i64().unwrap(),
        );
        if let Some((before, before_stamp)) = last {
            assert!(at > before, "newer frames: {objects:?}");
            assert!(stamp > before_stamp, "newer frames: {objects:?}");
        }
        last = Some((at, stamp));
    }
    // At 10 a second, 6 frames span about half a second of the game's.
    assert!(last.unwrap().0 <= 2.0, "fewer than 5 in 2 s: {objects:?}");
    drop(stream);
    traffic.all_forwarded();
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
}

/// Issue 24: eight frame streams that are never read while the game sends:
/// the relay forwards every frame, the page answers, and a new stream gets
/// its frames.
#[test]
fn eight_frame_streams_that_never_read_hold_neither_the_relay_nor_the_page() {
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, _) = started(&mut bin);
    let never_read: Vec<_> = (0..8).map(|_| open_stream(web, "/api/stream")).collect();
    let traffic = Traffic::start(listen, receiver);
    let mut fresh = open_stream(web, "/api/stream?fields=Speed");
    let objects = stream_objects(&mut fresh, 20);
    assert!(objects
        .iter()
        .all(|(_, o)| o["Speed"].as_f64() == Some(f64::from(SPEED))));
    assert_eq!(get(web, "/api/snapshot", &[]).status, 200);
    traffic.all_forwarded();
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
    drop(never_read);
}

/// Issue 24: served beyond this computer, the overlay and the frame stream
/// are read-only and need no token from this computer (an OBS browser source
/// opens them as they are); everything else still does.
#[test]
fn served_to_the_network_this_computer_reads_the_overlay_and_stream_without_a_token() {
    let (_receiver, to) = receiver();
    let mut bin = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--web",
            "0.0.0.0:0",
            "--stats-interval",
            "0",
            "--to",
            &to.to_string(),
        ],
        None,
    );
    let (web, _token) = web_addr(&mut bin);
    let port = web.port();
    bin.wait_for_line("running; press Ctrl-C to stop");
    let overlay = get(web, "/overlay", &[]);
    assert_eq!(overlay.status, 200);
    assert!(overlay.body.contains("/overlay.js"), "{}", overlay.body);
    assert_eq!(get(web, "/overlay.js", &[]).status, 200);
    assert_eq!(get(web, "/overlay.css", &[]).status, 200);
    let mut stream = open_stream(web, "/api/stream?fields=Speed");
    let mut head = [0u8; 12];
    use std::io::Read as _;
    stream.set_read_timeout(Some(http::HTTP_TIMEOUT)).unwrap();
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    for path in ["/", "/api/snapshot", "/api/events", "/qr.svg"] {
        assert_eq!(get(web, path, &[]).status, 401, "{path}");
    }
    // The Host check stands.
    let foreign = get(web, "/overlay", &[&format!("Host: evil.example:{port}")]);
    assert_eq!(foreign.status, 403);
    drop(stream);
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
}

/// A page that opens while the game sends is never told "nothing received
/// yet": the feed's first counters come once it has listened a moment, and
/// `never` is the relay's count, not the feed's fresh model's (run as a user
/// would, the title said "nothing received yet (102 s)" for a second).
#[test]
fn a_page_opened_while_the_game_sends_is_never_told_nothing_arrived() {
    use std::io::Read as _;
    let (receiver, to) = receiver();
    let mut bin = relay_with_page(to);
    let (listen, web, _) = started(&mut bin);
    let traffic = Traffic::start(listen, receiver);
    let deadline = Instant::now() + APPLY_WITHIN;
    while get(web, "/api/snapshot", &[]).json()["counters"]["input"]["received"] == 0 {
        assert!(Instant::now() < deadline, "nothing reached the relay");
    }
    let mut events = open_stream(web, "/api/events");
    events.set_read_timeout(Some(http::HTTP_TIMEOUT)).unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 16 << 10];
    let counters = loop {
        let n = events.read(&mut buf).expect("an event within the timeout");
        assert!(n > 0, "the stream closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        if let Some(at) = seen.find("event: counters\ndata: ") {
            let rest = &seen[at + 22..];
            if let Some(end) = rest.find('\n') {
                break serde_json::from_str::<serde_json::Value>(&rest[..end]).unwrap();
            }
        }
    };
    assert_eq!(counters["input"]["never"], false, "{}", counters["input"]);
    // The feed had heard the game before it spoke.
    assert!(
        counters["input"]["sender"].is_string(),
        "{}",
        counters["input"]
    );
    drop(events);
    traffic.all_forwarded();
    bin.signal("INT");
    assert_eq!(bin.wait().code(), 0);
}
