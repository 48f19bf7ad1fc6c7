//! The configuration's one owner through the real binary (issue 23): the
//! page's changes answered after the relay applied them, made only onto the
//! text the running configuration came from (an editor saving in place, a
//! hand edit racing a page edit, a FIFO, a link, a 0600 file, a BOM and CRLF),
//! and every surface saying what the running relay does (the snapshot's
//! settings, `config.error`, a destination's status and its recovery).

use crate::common;

use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use forza_relay::wire::Format;
use serde_json::Value;

use crate::web::{page_token, post_change, started, started_with_page};
use common::bin::Bin;
use common::http::get;
use common::rig::{Game, Pace, Tool};
use common::*;

/// How long a saved file may take to show in the snapshot: a save written in
/// place settles for 1 s before it is read; the rest is a loaded machine's
/// slack. A bound only a lost change reaches.
const SHOWS_WITHIN: Duration = Duration::from_secs(8);

/// Frames a second the game stream sends.
const HZ: u64 = 60;

/// The game: FH6 racing frames at [`HZ`] to `listen`, timestamps 1, 2, 3…,
/// until stopped; [`Game::stop`] says how many it sent.
fn game(listen: SocketAddr) -> Game {
    Game::start(listen, Pace::Hz(HZ), |i| {
        Spec::new(Format::Fh6, i + 1).build()
    })
}

/// A tool: keeps the TimestampMS of each frame it receives as `same` FH6.
fn tool(socket: UdpSocket) -> Tool<u32> {
    Tool::start(socket, |bytes| view(bytes, Format::Fh6).timestamp_ms())
}

/// Asserts that `got` holds every frame 1..=`sent` once.
#[track_caller]
fn every_frame(name: &str, mut got: Vec<u32>, sent: u32) {
    got.sort_unstable();
    let expected: Vec<u32> = (1..=sent).collect();
    assert_eq!(
        got.len(),
        expected.len(),
        "{name}: got {} of {sent}",
        got.len()
    );
    assert_eq!(got, expected, "{name}: every frame once");
}

/// The running relay's snapshot, as the page and scripts read it.
fn snapshot(web: SocketAddr) -> Value {
    get(web, "/api/snapshot", &[]).json()
}

/// Destination `name` in the running relay's snapshot, if it has one.
fn destination(web: SocketAddr, name: &str) -> Option<Value> {
    snapshot(web)["counters"]["destinations"]
        .as_array()?
        .iter()
        .find(|d| d["name"] == name)
        .cloned()
}

/// Polls `check` until it gives `Some`, for at most `within`.
#[track_caller]
fn wait_for<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = check() {
            return t;
        }
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// A configuration with the page and the relay on free ports, no summaries,
/// a comment of the user's, and `destinations` (TOML tables).
fn config_text(destinations: &str) -> String {
    format!(
        "# my relay: these comments are mine\n\
         [listen]\n\
         addr = \"127.0.0.1:0\"\n\
         format = \"fh6\"\n\
         \n\
         [web]\n\
         addr = \"127.0.0.1:0\" # the page\n\
         \n\
         [stats]\n\
         interval = 0\n\
         {destinations}"
    )
}

fn table(name: &str, addr: SocketAddr, extra: &str) -> String {
    format!("\n[[destination]]\nname = \"{name}\"\naddr = \"{addr}\"\n{extra}")
}

/// Saves `text` over `path` as an editor that writes in place does: the file
/// truncated, then written in two halves, `pause` apart. `between` runs
/// while the file is empty, then while it holds the first half.
fn save_in_place(path: &Path, text: &str, pause: Duration, mut between: impl FnMut(&str)) {
    let mut file = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .unwrap();
    between("");
    thread::sleep(pause);
    let (first, rest) = text.split_at(text.len() / 2);
    file.write_all(first.as_bytes()).unwrap();
    file.flush().unwrap();
    between(first);
    thread::sleep(pause);
    file.write_all(rest.as_bytes()).unwrap();
    file.flush().unwrap();
}

/// A page's change: `body`'s JSON.
fn add(web: SocketAddr, token: &str, name: &str, addr: SocketAddr) -> common::http::Reply {
    post_change(
        web,
        token,
        &format!(r#"{{"action":"add","name":"{name}","addr":"{addr}"}}"#),
    )
}

#[test]
fn an_editor_saving_in_place_with_a_page_edit_in_the_middle_keeps_the_users_text() {
    let (healthy, h_addr) = receiver();
    let (dash, d_addr) = receiver();
    let (_page_tool, p_addr) = receiver();
    let text =
        config_text(&(table("healthy", h_addr, "") + &table("dash", d_addr, "max_rate = 30\n")));
    let file = TempPath::file("in-place.toml", &text);
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let (listen, web, _) = started(&mut bin);
    let token = page_token(&get(web, "/", &[]));
    let (healthy, dash) = (tool(healthy), tool(dash));
    let game = game(listen);

    // The editor's new text: dash at 60 Hz, and a comment of its own.
    let saved = text.replace("max_rate = 30", "max_rate = 60 # faster");
    let mut answers = Vec::new();
    save_in_place(file.path(), &saved, Duration::from_millis(300), |on_disk| {
        let r = add(web, &token, "page-tool", p_addr);
        // Nothing written: the file holds what the editor has written so far.
        let now = std::fs::read_to_string(file.path()).unwrap();
        answers.push((r.status, r.json()["error"].clone(), now == on_disk));
    });
    for (status, error, untouched) in &answers {
        assert_eq!(*status, 409, "an edit of a file being saved: {error}");
        // "changed on disk", or, when the owner has already read the empty
        // or half file, that file's error.
        let error = error.as_str().unwrap();
        assert!(
            error.contains("changed on disk") || error.contains("the file has an error"),
            "{error}"
        );
        assert!(untouched, "the page wrote nothing while the editor saved");
    }
    wait_for("the editor's save applied", SHOWS_WITHIN, || {
        (destination(web, "dash")?["max_rate"] == 60).then_some(())
    });
    assert_eq!(
        std::fs::read_to_string(file.path()).unwrap(),
        saved,
        "the user's text, whole"
    );
    assert!(
        destination(web, "page-tool").is_none(),
        "the refused edit changed nothing"
    );
    // Once the file is settled, the same edit goes through, onto the editor's text.
    let r = add(web, &token, "page-tool", p_addr);
    assert_eq!(r.status, 200, "{}", r.body);
    let after = std::fs::read_to_string(file.path()).unwrap();
    assert!(
        after.starts_with(&saved),
        "the editor's text kept:\n{after}"
    );
    assert!(after.contains("name = \"page-tool\""), "{after}");

    let sent = game.stop();
    every_frame("healthy", healthy.stop_once_it_has(sent), sent);
    assert!(!dash.stop().is_empty(), "dash kept receiving");
    bin.stop();
}

#[test]
fn twenty_hand_edits_raced_against_page_edits_lose_none_and_wipe_nothing() {
    let (healthy, h_addr) = receiver();
    let (_dash, d_addr) = receiver();
    let (_rig, r_addr) = receiver();
    let (_page, p_addr) = receiver();
    let text = config_text(
        &(table("healthy", h_addr, "")
            + &table("dash", d_addr, "max_rate = 100\n")
            + &table("rig", r_addr, "max_age = \"100ms\"\n")),
    );
    let file = TempPath::file("race.toml", &text);
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let (listen, web, _) = started(&mut bin);
    let token = page_token(&get(web, "/", &[]));
    let healthy = tool(healthy);
    let game = game(listen);

    let (mut applied, mut refused) = (0, 0);
    for i in 1..=20u32 {
        // The page: adds a destination when the relay has none called
        // "page", removes it when it has, at a moment that moves from round
        // to round: before the hand reads the file, while it saves, after.
        let page = thread::spawn(move || {
            thread::sleep(Duration::from_millis(u64::from(i % 4) * 25));
            let adding = destination(web, "page").is_none();
            let body = match adding {
                true => format!(r#"{{"action":"add","name":"page","addr":"{p_addr}"}}"#),
                false => r#"{"action":"remove","name":"page"}"#.to_owned(),
            };
            let r = post_change(web, &page_token_of(web), &body);
            (r, adding, destination(web, "page").is_some())
        });
        // Every fifth round the hand waits for the page's answer (an edit
        // with nothing racing it must apply, on a slow machine too: under
        // qemu every raced edit met a save); the others race it.
        let (answered, racing) = if i % 5 == 0 {
            (Some(page.join().unwrap()), None)
        } else {
            thread::sleep(Duration::from_millis(40));
            (None, Some(page))
        };
        // The hand: reads the file, changes dash's rate, saves in place.
        let before = std::fs::read_to_string(file.path()).unwrap();
        let rate = before
            .lines()
            .find(|l| l.starts_with("max_rate = "))
            .expect("dash's rate")
            .to_owned();
        let hand = before.replace(&rate, &format!("max_rate = {i}"));
        save_in_place(file.path(), &hand, Duration::from_millis(20), |_| {});
        let (r, adding, there) = match answered {
            Some(answer) => {
                assert_eq!(
                    answer.0.status, 200,
                    "round {i}, unraced: {}",
                    answer.0.body
                );
                answer
            }
            None => racing.expect("raced").join().unwrap(),
        };
        match r.status {
            200 => {
                applied += 1;
                assert_eq!(there, adding, "round {i}: answered only once applied");
            }
            409 => refused += 1,
            // A save applied between the page's look and its change.
            422 if r.body.contains("\"page\" is already") => refused += 1,
            other => panic!("round {i}: {other} {}", r.body),
        }
        // The hand's edit is never lost: the relay runs it and the file says it.
        wait_for(&format!("round {i}: the hand's edit"), SHOWS_WITHIN, || {
            (destination(web, "dash")?["max_rate"] == i).then_some(())
        });
        let now = std::fs::read_to_string(file.path()).unwrap();
        assert!(
            now.contains(&format!("max_rate = {i}\n")),
            "round {i}:\n{now}"
        );
        assert!(
            now.starts_with("# my relay: these comments are mine\n"),
            "round {i}: wiped:\n{now}"
        );
        for name in ["healthy", "dash", "rig"] {
            assert!(
                now.contains(&format!("name = \"{name}\"")),
                "round {i}: {name} gone:\n{now}"
            );
        }
        // One truth: what runs is what the file says.
        let in_file = now.contains("name = \"page\"");
        wait_for(
            &format!("round {i}: page as the file says"),
            SHOWS_WITHIN,
            || (destination(web, "page").is_some() == in_file).then_some(()),
        );
    }
    assert_eq!(applied + refused, 20);
    assert!(
        applied > 0 && refused > 0,
        "both cases met: {applied} applied, {refused} refused"
    );
    let _ = token;
    let sent = game.stop();
    every_frame("healthy", healthy.stop_once_it_has(sent), sent);
    bin.stop();
    eprintln!("page edits: {applied} applied, {refused} refused as the file changed");
}

/// The page's token, read from the page itself.
fn page_token_of(web: SocketAddr) -> String {
    page_token(&get(web, "/", &[]))
}

#[cfg(unix)]
#[test]
fn a_linked_0600_config_with_a_bom_and_crlf_stays_so_and_gets_the_change() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_a, a_addr) = receiver();
    let (_b, b_addr) = receiver();
    let folder = TempPath::dir("linked");
    let real = folder.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let target = real.join("relay.toml");
    let text = format!(
        "\u{feff}{}",
        config_text(&table("a", a_addr, "")).replace('\n', "\r\n")
    );
    std::fs::write(&target, &text).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = folder.path().join("forza-relay.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();

    let mut bin = Bin::spawn(&["--config", &link.display().to_string()], None);
    let (_, web, _) = started(&mut bin);
    let r = add(web, &page_token_of(web), "b", b_addr);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "still a link"
    );
    let written = std::fs::read_to_string(&target).unwrap();
    assert!(
        written.starts_with(&text),
        "the user's text first:\n{written:?}"
    );
    assert!(written.contains("name = \"b\"\r\n"), "{written:?}");
    assert_eq!(
        written.matches('\n').count(),
        written.matches("\r\n").count(),
        "every line ends in CR LF"
    );
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Later hand edits of the target still apply (the link is still watched).
    let hand = written.replace("name = \"b\"", "name = \"b2\"");
    std::fs::write(&target, &hand).unwrap();
    wait_for("the hand edit of the target", SHOWS_WITHIN, || {
        destination(web, "b2").map(|_| ())
    });
    bin.stop();
}

#[test]
fn a_read_only_config_is_not_replaced_and_nothing_changes() {
    let (_a, a_addr) = receiver();
    let (_b, b_addr) = receiver();
    let text = config_text(&table("a", a_addr, ""));
    let file = TempPath::file("read-only.toml", &text);
    let mut permissions = std::fs::metadata(file.path()).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(file.path(), permissions.clone()).unwrap();
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let (_, web, _) = started(&mut bin);
    let r = add(web, &page_token_of(web), "b", b_addr);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.json()["error"].as_str().unwrap().contains("read-only"),
        "{}",
        r.body
    );
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), text);
    assert!(
        destination(web, "b").is_none(),
        "the relay went back to what the file says"
    );
    assert!(destination(web, "a").is_some());
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(file.path(), permissions).unwrap();
    bin.stop();
}

#[cfg(unix)]
#[test]
fn a_fifo_at_the_config_path_gets_an_answer_and_is_named() {
    use std::io::Read as _;
    use std::net::TcpStream;
    let (a, a_addr) = receiver();
    let (_b, b_addr) = receiver();
    let file = TempPath::file("fifo.toml", &config_text(&table("a", a_addr, "")));
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let (listen, web, _) = started(&mut bin);
    std::fs::remove_file(file.path()).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(file.path())
        .status()
        .expect("mkfifo");
    assert!(status.success());
    // An answer within 5 s: the client gives up after that.
    let token = page_token_of(web);
    let body = format!(r#"{{"action":"add","name":"b","addr":"{b_addr}"}}"#);
    let mut stream = TcpStream::connect(web).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "POST /api/destinations HTTP/1.1\r\nHost: {web}\r\nOrigin: http://{web}\r\n\
         X-Forza-Token: {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("an answer within 5 s");
    assert!(answer.starts_with("HTTP/1.1 409"), "{answer}");
    assert!(answer.contains("named pipe"), "{answer}");
    // The snapshot says why the file is not read; the relay forwards on.
    let error = wait_for("config.error", SHOWS_WITHIN, || {
        snapshot(web)["counters"]["config"]["error"]
            .as_str()
            .map(str::to_owned)
    });
    assert!(error.contains("named pipe"), "{error}");
    let sender = Sender::new(listen);
    let p = Spec::new(Format::Fh6, 7).build();
    sender.send(&p);
    assert_eq!(recv(&a), p);
    bin.stop();
}

#[test]
fn the_post_answers_after_the_apply_and_a_hand_edit_shows_in_the_snapshot() {
    let (_a, a_addr) = receiver();
    let (_b, b_addr) = receiver();
    let text = config_text(&table("a", a_addr, "max_rate = 30\nonly_race_on = true\n"));
    let file = TempPath::file("answers.toml", &text);
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let (_, web, _) = started(&mut bin);
    let a = destination(web, "a").expect("a");
    assert_eq!(a["addr"], a_addr.to_string());
    assert_eq!(a["output"], "same");
    assert_eq!(a["max_rate"], 30);
    assert_eq!(a["only_race_on"], true);
    assert_eq!(a["max_age_ms"], Value::Null);
    assert_eq!(snapshot(web)["counters"]["config"]["path"], file.display());

    let r = post_change(
        web,
        &page_token_of(web),
        &format!(
            r#"{{"action":"add","name":"b","addr":"{b_addr}","format":"fh5","max_rate":20,"max_age_ms":50}}"#
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["changes"], "+ b (fh5)");
    // Right after the answer, with no wait: the relay runs it.
    let b = destination(web, "b").expect("b in the snapshot right after the 200");
    assert_eq!(b["addr"], b_addr.to_string());
    assert_eq!(b["output"], "fh5");
    assert_eq!(b["max_rate"], 20);
    assert_eq!(b["max_age_ms"], 50);

    // A hand edit (saved as most editors save: a new file renamed over it).
    let now = std::fs::read_to_string(file.path()).unwrap();
    let hand = now.replacen("max_rate = 30", "max_rate = 60", 1);
    save_as_editors_do(file.path(), &hand);
    wait_for("the hand edit within 3 s", Duration::from_secs(3), || {
        (destination(web, "a")?["max_rate"] == 60).then_some(())
    });
    bin.stop();
}

#[test]
fn an_unsaved_add_keeps_every_key_of_every_other_destination() {
    let (_a, a_addr) = receiver();
    let (_b, b_addr) = receiver();
    let (_c, c_addr) = receiver();
    let (bin, _, web) = started_with_page(
        &[
            &format!("{a_addr},name=a,format=fm7,only-race-on,max-rate=30,max-age=50ms"),
            &format!("{b_addr},name=b"),
        ],
        None,
    );
    let before = destination(web, "a").expect("a");
    let r = add(web, &page_token_of(web), "c", c_addr);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["changes"], "+ c (same)", "only c changed");
    assert_eq!(r.json()["saved"], false);
    let after = destination(web, "a").expect("a");
    for key in ["addr", "output", "only_race_on", "max_rate", "max_age_ms"] {
        assert_eq!(after[key], before[key], "a's {key}");
    }
    assert_eq!(after["max_age_ms"], 50);
    assert_eq!(after["output"], "fm7");
    let done = bin.stop();
    assert!(!done.stderr.contains("~ a:"), "{}", done.stderr);
}

#[test]
fn a_typo_in_a_saved_file_is_config_error_until_the_fix_which_the_log_says() {
    let (_a, a_addr) = receiver();
    let text = config_text(&table("a", a_addr, "max_rate = 30\n"));
    let file = TempPath::file("typo.toml", &text);
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let (_, web, _) = started(&mut bin);
    assert_eq!(snapshot(web)["counters"]["config"]["error"], Value::Null);
    let replace = |text: &str| save_as_editors_do(file.path(), text);
    replace(&text.replace("max_rate = 30", "max_rte = 30"));
    let error = wait_for("config.error", SHOWS_WITHIN, || {
        snapshot(web)["counters"]["config"]["error"]
            .as_str()
            .map(str::to_owned)
    });
    let line = text.lines().position(|l| l == "max_rate = 30").unwrap() + 1;
    assert!(
        error.contains(&format!("{}:{line}", file.display())),
        "{error}"
    );
    assert!(error.contains("max_rte"), "{error}");
    // The page can't edit a broken file: it says why.
    let (_b, b_addr) = receiver();
    let r = add(web, &page_token_of(web), "b", b_addr);
    assert_eq!(r.status, 409);
    assert!(
        r.json()["error"].as_str().unwrap().contains("fix it first"),
        "{}",
        r.body
    );

    replace(&text.replace("max_rate = 30", "max_rate = 40"));
    bin.wait_for_line("applied (the earlier error is fixed)");
    wait_for("config.error cleared", SHOWS_WITHIN, || {
        let s = snapshot(web);
        (s["counters"]["config"]["error"].is_null() && destination(web, "a")?["max_rate"] == 40)
            .then_some(())
    });
    bin.stop();
}

#[test]
fn a_refused_destination_turns_ok_soon_after_its_tool_listens_and_says_so_once() {
    let port = free_port();
    let late: SocketAddr = ([127, 0, 0, 1], port).into();
    let (healthy, h_addr) = receiver();
    let text = config_text(&(table("healthy", h_addr, "") + &table("late", late, "")));
    let file = TempPath::file("late.toml", &text);
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let (listen, web, _) = started(&mut bin);
    let healthy = tool(healthy);
    let game = game(listen);
    wait_for("late refused", SHOWS_WITHIN, || {
        (destination(web, "late")?["status"] == "refused").then_some(())
    });
    assert_eq!(destination(web, "healthy").unwrap()["status"], "ok");
    // The tool starts.
    let late_tool = tool(receiver_on(late).expect("the late tool's port is free"));
    wait_for(
        "late ok within 4 s of listening",
        Duration::from_secs(4),
        || (destination(web, "late")?["status"] == "ok").then_some(()),
    );
    let got = late_tool.got();
    assert!(got > 0, "the tool receives");
    let sent = game.stop();
    every_frame("healthy", healthy.stop_once_it_has(sent), sent);
    late_tool.stop();
    let done = bin.stop();
    let again: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.contains("is receiving again"))
        .collect();
    assert_eq!(again.len(), 1, "{}", done.stderr);
    assert!(
        again[0].contains(&format!("late ({late}) is receiving again (after ")),
        "{}",
        again[0]
    );
    assert!(
        !done.stderr.contains("since the last message"),
        "no last word about refusals the recovery said: {}",
        done.stderr
    );
}
