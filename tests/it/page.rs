//! Issue 30's items about the page, through the real binary where a user
//! meets them (and in-process where a test must hold the configuration's
//! owner still): a `[web] addr` saved while running moves the page; every
//! link the program prints opens the page from this computer; the token is
//! kept across starts and a new one shuts the old out at once; a stopped
//! recording says where its file went; a flood of requests leaves no queue
//! behind it, and an edit answered "not made" is never made afterwards.

use crate::common;

use std::net::{SocketAddr, TcpListener};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use common::bin::Bin;
use common::http::{get, request, Reply};
use common::*;

use crate::web::{
    destinations, forwards, page_token, post_change, started, started_with_page, web_addr,
};

/// How long a fact the test waits for may take: a bound only a failure
/// reaches.
const WITHIN: Duration = Duration::from_secs(10);

/// `GET` of the `http://HOST:PORT/PATH` URL `url`, with `Host` as the URL
/// says (what a browser sends).
#[track_caller]
fn open(url: &str) -> Reply {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an http link: {url:?}"));
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let addr: SocketAddr = host
        .parse()
        .unwrap_or_else(|_| panic!("no address in the link {url:?}"));
    let path = if path.is_empty() { "/" } else { path };
    get(addr, path, &[&format!("Host: {host}")])
}

/// Every `http://…` link in `text`, without the punctuation after it.
fn links(text: &str) -> Vec<String> {
    text.match_indices("http://")
        .map(|(at, _)| {
            let rest = &text[at..];
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '`' || c == '"')
                .unwrap_or(rest.len());
            rest[..end]
                .trim_end_matches([',', '.', ';', ':', ')'])
                .to_owned()
        })
        .collect()
}

/// Issue 30 item 3: every link the relay and the tools beside it print
/// (`watch`, `record` and `export`, `doctor` and `setup` on Linux) answers
/// 200 from this computer, with the page on loopback and served to the
/// network (where `watch` said "http://127.0.0.1:PORT/", which answered 401,
/// and the relay a placeholder, `http://<this computer's address>:PORT/`).
#[test]
fn issue30_every_link_printed_opens_the_page_from_this_computer() {
    for page in ["127.0.0.1:0", "0.0.0.0:0"] {
        let (_tool, to) = receiver();
        let dir = TempPath::dir("links");
        let text = with_page(&listen_toml("fh5"), page) + &destination_toml("tool", to, "same", "");
        std::fs::write(dir.path().join("forza-relay.toml"), &text).unwrap();
        let mut relay = Bin::spawn(&["run"], Some(dir.path()));
        let listen = relay.wait_for_address("listen on ");
        let mut run = relay.wait_for_line("web page on http://");
        if page.starts_with("0.0.0.0") && common::lan_address().is_some() {
            run += &relay.wait_for_line("on a phone or tablet on the same network");
        }
        relay.wait_for_line("running; press Ctrl-C to stop");
        let listen_text = listen.to_string();
        let capture = dir.path().join("drive.pcap");
        let capture = capture.to_str().unwrap();
        let mut printed = Vec::new();
        for args in [
            vec!["watch", "--listen", &listen_text],
            vec!["record", "--listen", &listen_text, "--output", capture],
            vec!["export", "--listen", &listen_text, "--output", "-"],
        ] {
            let done = Bin::run(&args, None);
            assert_eq!(done.code(), 1, "{args:?}: {done:?}");
            printed.push((args[0].to_owned(), done.stderr + &done.stdout));
        }
        if cfg!(target_os = "linux") {
            let to_text = to.to_string();
            let done = Bin::run(
                &[
                    "doctor",
                    "--listen",
                    &listen_text,
                    "--to",
                    &to_text,
                    "--wait",
                    "1",
                ],
                None,
            );
            printed.push(("doctor".to_owned(), done.stderr + &done.stdout));
            let done = Bin::run(&["setup"], Some(dir.path()));
            printed.push(("setup".to_owned(), done.stderr + &done.stdout));
        }
        printed.push(("run".to_owned(), run));
        // The port of this relay's page: setup also names the other tests'
        // relays that run beside this one, which may have stopped since.
        let ours = links(&printed.last().unwrap().1)
            .first()
            .and_then(|l| l.rsplit_once(':').map(|(_, rest)| rest.to_owned()))
            .and_then(|rest| rest.split('/').next().map(str::to_owned))
            .expect("run printed its page's link");
        let mut opened = 0;
        for (who, text) in &printed {
            for link in links(text) {
                let port = link
                    .strip_prefix("http://")
                    .and_then(|r| r.split('/').next())
                    .and_then(|host| host.rsplit_once(':'))
                    .map(|(_, port)| port.to_owned());
                if who == "setup" && port.as_deref() != Some(ours.as_str()) {
                    continue;
                }
                let reply = open(&link);
                assert_eq!(reply.status, 200, "{who} printed {link} ({page}):\n{text}");
                opened += 1;
            }
        }
        let watch = &printed[0].1;
        assert!(
            links(watch).len() == 1 && links(&printed[1].1).len() == 1,
            "watch and record name the page: {printed:?}"
        );
        if page.starts_with("0.0.0.0") {
            assert!(watch.contains("?token="), "{watch}");
        }
        assert!(opened >= 4, "{opened} links in {printed:?}");
        relay.stop();
    }
}

/// Issue 30 item 2: a `[web] addr` saved while the relay runs moves the
/// page (the new address answers, the old one is closed); a port that is
/// taken is one warning naming it, the page stays where it was and the relay
/// forwards on; `off` closes it. Before, the log said "configuration applied:
/// no changes" and the old address served on.
#[test]
fn issue30_a_web_addr_saved_while_running_moves_the_page() {
    let (receiver, to) = receiver();
    let file = TempPath::file(
        "move.toml",
        &(with_page(&listen_toml("fh5"), "127.0.0.1:0")
            + &destination_toml("tool", to, "same", "")),
    );
    let path = file.path().to_str().unwrap().to_owned();
    let mut bin = Bin::spawn(&["run", "--config", &path], None);
    // The file is watched from before "running".
    let (listen, first, _) = started(&mut bin);
    assert_eq!(get(first, "/", &[]).status, 200);

    // The page's address in the file, replaced by `to`.
    let page_at = |to: &str| {
        let text = std::fs::read_to_string(file.path()).unwrap();
        let at = text.find("[web]\naddr = \"").unwrap() + 14;
        let end = at + text[at..].find('"').unwrap();
        save_as_editors_do(file.path(), &format!("{}{to}{}", &text[..at], &text[end..]));
    };
    // Another loopback address, its port the OS's choice.
    page_at("127.0.0.2:0");
    let moved = bin.wait_for_line("the web page moved from ");
    assert!(
        moved.contains(&format!("from http://{first}/ to http://127.0.0.2:")),
        "{moved}"
    );
    let (second, _) = web_addr(&mut bin);
    assert_eq!(second.ip().to_string(), "127.0.0.2");
    assert_eq!(get(second, "/", &[]).status, 200);
    assert!(
        std::net::TcpStream::connect(first).is_err(),
        "the old address is closed"
    );

    // A port this test holds: one warning naming it; the page stays.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    page_at(&format!("127.0.0.1:{port}"));
    let warned = bin.wait_for_line(&format!("no web page on port {port} of 127.0.0.1"));
    assert!(
        warned.contains(&format!("it stays on http://{second}/")),
        "{warned}"
    );
    assert_eq!(get(second, "/", &[]).status, 200);
    forwards(&Sender::new(listen), &receiver, 5);

    // The same port on every address, as a user serves the page to a phone
    // (found in review: the OS refused 0.0.0.0:P while the page held P on
    // one address, and the page stayed).
    page_at(&format!("0.0.0.0:{}", second.port()));
    let moved = bin.wait_for_line("the web page moved from ");
    assert!(
        moved.contains(&format!(
            "from http://{second}/ to http://127.0.0.1:{}/",
            second.port()
        )),
        "{moved}"
    );
    let (third, token) = web_addr(&mut bin);
    assert_eq!(third.port(), second.port());
    let path = format!("/?token={token}");
    assert_eq!(get(third, &path, &[]).status, 200);
    forwards(&Sender::new(listen), &receiver, 5);

    page_at("off");
    bin.wait_for_line("is closed ([web] addr = \"off\")");
    assert!(std::net::TcpStream::connect(third).is_err(), "closed");
    forwards(&Sender::new(listen), &receiver, 5);
    drop(taken);
    let done = bin.stop();
    assert!(
        !done.stderr.contains("configuration applied: no changes"),
        "{}",
        done.stderr
    );
}

/// Issue 30 item 4 (and 15): the token is kept across starts in the state
/// folder, private (0600); `forza-relay web new-token` and the page's button
/// each make a new one, and the old one opens nothing from then on in the
/// relay running.
#[test]
fn issue30_the_token_is_kept_across_starts_and_a_new_one_shuts_the_old_out() {
    let state = TempPath::dir("state");
    let spawn = || {
        let mut command = common::bin::command();
        command
            .args(["run", "--listen", "127.0.0.1:0", "--web", "0.0.0.0:0"])
            .args(["--stats-interval", "0", "--to", "127.0.0.1:9"])
            .env("FORZA_RELAY_STATE_DIR", state.path());
        let mut bin = Bin::spawn_command(command);
        let (_, web, token) = started(&mut bin);
        (bin, web, token)
    };
    let (bin, _, first) = spawn();
    bin.stop();
    let (mut bin, web, again) = spawn();
    assert_eq!(again, first, "the same token after a restart");
    let kept = state.path().join("web-token");
    assert_eq!(std::fs::read_to_string(&kept).unwrap().trim(), first);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the token file is the user's alone");
    }
    assert_eq!(get(web, &format!("/?token={first}"), &[]).status, 200);

    let mut command = common::bin::command();
    command
        .args(["web", "new-token"])
        .env("FORZA_RELAY_STATE_DIR", state.path());
    let out = command.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    let second = std::fs::read_to_string(&kept).unwrap().trim().to_owned();
    assert_ne!(second, first);
    assert!(said.contains(&kept.display().to_string()), "{said}");
    assert_eq!(
        get(web, &format!("/?token={first}"), &[]).status,
        401,
        "the old one"
    );
    assert_eq!(get(web, &format!("/?token={second}"), &[]).status, 200);

    // The page's button.
    let renewed = request(
        web,
        "POST",
        "/api/token",
        &[
            &format!("Origin: http://{web}"),
            &format!("X-Forza-Token: {second}"),
        ],
        "{}",
    );
    assert_eq!(renewed.status, 200, "{}", renewed.body);
    let third = renewed.json()["token"].as_str().unwrap().to_owned();
    assert_eq!(std::fs::read_to_string(&kept).unwrap().trim(), third);
    assert_eq!(get(web, &format!("/?token={second}"), &[]).status, 401);
    assert_eq!(get(web, &format!("/?token={third}"), &[]).status, 200);
    bin.wait_for_line("a new token was made on the page");
    bin.stop();
}

/// Issue 30 item 8: once a recording from the page stops, the snapshot (and
/// the page) say where its file went and how many packets it holds, where
/// they said only "not recording".
#[test]
fn issue30_a_stopped_recording_says_its_file_and_packets() {
    let folder = TempPath::dir("last-recording");
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
            ],
            &format!(r#"{{"action":"{action}"}}"#),
        )
    };
    assert_eq!(post("start").status, 200);
    forwards(&Sender::new(listen), &receiver, 20);
    let deadline = Instant::now() + WITHIN;
    while get(web, "/api/snapshot", &[]).json()["counters"]["recording"]["packets"] != 20 {
        assert!(Instant::now() < deadline, "the recording never counted 20");
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = post("stop");
    assert_eq!(stopped.status, 200, "{}", stopped.body);
    let counters = get(web, "/api/snapshot", &[]).json()["counters"].clone();
    assert!(counters["recording"].is_null(), "{counters}");
    let last = &counters["last_recording"];
    assert_eq!(last["packets"], 20, "{counters}");
    let path = last["path"]
        .as_str()
        .unwrap_or_else(|| panic!("no path: {counters}"));
    assert_eq!(stopped.json()["recorded"]["path"], path);
    let written = folder.path().join(path);
    let size = std::fs::metadata(&written).unwrap().len();
    assert_eq!(last["bytes"], size);
    bin.stop();
}

/// Issue 30 item 12: 200 clients asking for `/api/snapshot` at once with the
/// game silent (each snapshot then listens half a second) leave no queue
/// behind them: once they are answered, the next snapshot and an edit are
/// answered 200, not 408 (tokio's unbounded queue kept the page answering
/// 408 for 80–90 s).
#[test]
fn issue30_a_flood_of_snapshots_leaves_no_queue_behind_it() {
    let (_tool, to) = receiver();
    let mut bin = Bin::spawn(
        &[
            "run",
            "--listen",
            "127.0.0.1:0",
            "--web",
            "127.0.0.1:0",
            "--stats-interval",
            "0",
            "--to",
            &format!("{to},name=tool"),
        ],
        None,
    );
    let (_, web, _) = started(&mut bin);
    let token = page_token(&get(web, "/", &[]));
    let gate = Arc::new(std::sync::Barrier::new(200));
    let flood: Vec<_> = (0..200)
        .map(|_| {
            let gate = gate.clone();
            std::thread::spawn(move || {
                gate.wait();
                get(web, "/api/snapshot", &[]).status
            })
        })
        .collect();
    let statuses: Vec<u16> = flood.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(
        statuses.iter().all(|s| [200, 503].contains(s)),
        "only answers or 'busy': {statuses:?}"
    );
    assert_eq!(
        get(web, "/api/snapshot", &[]).status,
        200,
        "after the flood"
    );
    let added = post_change(
        web,
        &token,
        &format!(
            r#"{{"action":"add","name":"after","addr":"{}"}}"#,
            receiver().1
        ),
    );
    assert_eq!(added.status, 200, "{}", added.body);
    assert_eq!(destinations(web, &[]), ["tool", "after"]);
    bin.stop();
}

/// Issue 30 item 12: an edit the page answered without making (the owner was
/// busy: here in a host name look-up the test holds) is never made
/// afterwards, when the owner is free again; the next edit is.
#[test]
fn issue30_an_edit_answered_not_made_is_never_made_afterwards() {
    use forza_relay::config::{system_look_up, Overrides};
    use forza_relay::owner::Owner;
    use forza_relay::web::Web;

    let (_tool, to) = receiver();
    let config = common::config(&(listen_toml("fh5") + &destination_toml("tool", to, "same", "")));
    let relay = Running::start(config.clone());
    let (release, held) = mpsc::channel::<()>();
    let held = Mutex::new(held);
    let (asked_tx, asked) = mpsc::channel::<()>();
    let asked_tx = Mutex::new(asked_tx);
    let look_up = move |host: &str, port: u16| {
        if host == "slow.test" {
            let _ = asked_tx.lock().unwrap().send(());
            let _ = held.lock().unwrap().recv_timeout(Duration::from_secs(60));
            return Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))]);
        }
        system_look_up(host, port)
    };
    let owner = Owner::start(
        None,
        Overrides::default(),
        config.clone(),
        relay.control(),
        Arc::new(look_up),
    )
    .unwrap();
    let mut web = Web::new(
        Some("127.0.0.1:0".parse().unwrap()),
        owner.editor(),
        config.input,
        None,
    );
    web.serve(relay.control()).unwrap();
    let page = web.local_addr().unwrap();
    let token = page_token(&get(page, "/", &[]));

    let slow = std::thread::spawn(move || {
        post_change(
            page,
            &token,
            r#"{"action":"add","name":"slow","addr":"slow.test:5300"}"#,
        )
    });
    asked
        .recv_timeout(WITHIN)
        .expect("the owner looks slow.test up");
    let answered = slow.join().unwrap();
    assert_eq!(answered.status, 503, "{}", answered.body);
    assert!(
        answered.body.contains("nothing changed"),
        "{}",
        answered.body
    );
    // The owner is free again: the edit it was making was given up.
    release.send(()).unwrap();
    let token = page_token(&get(page, "/", &[]));
    let next = post_change(
        page,
        &token,
        &format!(
            r#"{{"action":"add","name":"next","addr":"{}"}}"#,
            receiver().1
        ),
    );
    assert_eq!(next.status, 200, "{}", next.body);
    let names: Vec<String> = relay
        .snapshot()
        .destinations
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(names, ["tool", "next"], "slow was never made");
    use forza_relay::app::Observer as _;
    let mut last = relay.snapshot();
    Box::new(web).finish(&mut last).unwrap();
    drop(owner);
    relay.stop();
}
