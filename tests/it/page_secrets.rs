//! Issue 30: what the page's edits may do with an MQTT destination's secrets
//! and the files it names, through the real binary, with fake brokers on
//! loopback ports that record each CONNECT's login
//! ([`common::broker::FakeBroker`]): a password typed without a username is
//! refused by the file's own rule (item 5); a stored password goes only to
//! the broker it was written for (item 9); the page names no environment
//! variable and no CA file, and its answers say nothing of which exist (item
//! 10); a `ca_file` that turned into a FIFO or a huge file answers an error
//! naming it at once, and the next edit works (item 11); a relative
//! `ca_file` is the configuration folder's, not the working folder's (item
//! 14).

use crate::common;

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{json, Value};

use crate::web::{page_token, post_change, started};
use common::bin::Bin;
use common::broker::{Conduct, FakeBroker};
use common::http::{get, Reply};
use common::*;

/// A configuration with the relay and its page on free loopback ports, no
/// summaries, a UDP destination "first" at `first`, and `more` tables.
pub(crate) fn config_text(first: SocketAddr, more: &str) -> String {
    with_page(
        &format!(
            "{}{}{more}",
            listen_toml("fh6"),
            destination_toml("first", first, "same", "")
        ),
        "127.0.0.1:0",
    )
}

/// An MQTT table `name` at `addr` with `extra` lines.
fn mqtt_table(name: &str, addr: &str, extra: &str) -> String {
    format!(
        "\n[[destination]]\nname = \"{name}\"\naddr = \"{addr}\"\ntopic = \"t/{name}\"\n{extra}\n"
    )
}

/// The relay running `file`, its page's address and token.
pub(crate) fn relay(file: &TempPath) -> (Bin, SocketAddr, String) {
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    let (_, web, _) = started(&mut bin);
    let token = page_token(&get(web, "/", &[]));
    (bin, web, token)
}

/// The page's change `body`.
pub(crate) fn change(web: SocketAddr, token: &str, body: &Value) -> Reply {
    post_change(web, token, &body.to_string())
}

/// The page's form for MQTT destination `name` at `addr`, as it sends it.
pub(crate) fn form(action: &str, name: &str, addr: &str, username: &str) -> Value {
    json!({
        "action": action, "was": name, "name": name, "addr": addr, "format": "json",
        "topic": format!("t/{name}"), "username": username, "password": "",
        "password_env": "", "ca_file": "",
    })
}

/// Item 5: the page's Add said "added … saved" and wrote no password; the
/// file's rule answers it by name, and nothing is written.
#[test]
fn issue30_a_password_typed_without_a_username_is_refused_naming_it() {
    let (_first, first_addr) = receiver();
    let broker = FakeBroker::start(|_| Conduct::serve());
    let text = config_text(first_addr, "");
    let file = TempPath::file("secrets-username.toml", &text);
    let (bin, web, token) = relay(&file);
    let mut add = form("add", "league", &broker.addr(), "");
    add["password"] = json!("s3cret");
    let r = change(web, &token, &add);
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.json()["field"], "Password", "{}", r.body);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("a password goes with a username"),
        "{}",
        r.body
    );
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), text);
    assert_eq!(broker.accepted(), 0, "nothing started");
    bin.stop();
}

/// Item 9: a change of the address with the password field left empty sent
/// the stored password to the new broker (from `mqtts://` to `mqtt://` too,
/// in clear). A host, port or scheme changed keeps none; typed again it goes;
/// the same broker keeps it.
#[test]
fn issue30_a_stored_password_does_not_follow_a_changed_broker() {
    let (_first, first_addr) = receiver();
    let old = FakeBroker::start(|_| Conduct::serve());
    let new = FakeBroker::start(|_| Conduct::serve());
    let tls_port = free_port();
    let text = config_text(
        first_addr,
        &(mqtt_table(
            "league",
            &old.addr(),
            "username = \"driver\"\npassword = \"s3cret\"",
        ) + &mqtt_table(
            "secure",
            &format!("mqtts://127.0.0.1:{tls_port}"),
            "username = \"tls-driver\"\npassword = \"tls-s3cret\"",
        ) + &mqtt_table(
            "stays",
            &old.addr(),
            "username = \"keeper\"\npassword = \"k3pt\"",
        )),
    );
    let file = TempPath::file("secrets-moved.toml", &text);
    let (bin, web, token) = relay(&file);
    let login = |user: &str, password: &str| {
        let (user, password) = (user.to_owned(), password.as_bytes().to_vec());
        move |seen: &[common::broker::Seen]| {
            seen.iter().any(|s| {
                s.username.as_deref() == Some(user.as_str())
                    && s.password.as_deref() == Some(&password[..])
            })
        }
    };
    old.wait_until("league's login", login("driver", "s3cret"));

    // Another host (here another port), the password field empty.
    let r = change(
        web,
        &token,
        &form("change", "league", &new.addr(), "driver"),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let seen = new.wait_until("league's new connection", |seen| {
        seen.iter().any(|s| s.username.as_deref() == Some("driver"))
    });
    let league = seen
        .iter()
        .find(|s| s.username.as_deref() == Some("driver"));
    assert_eq!(league.unwrap().password, None, "{seen:?}");
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("its password was not kept"),
        "{}",
        r.body
    );
    // From mqtts:// to mqtt://.
    let r = change(
        web,
        &token,
        &form("change", "secure", &new.addr(), "tls-driver"),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let seen = new.wait_until("secure's connection", |seen| {
        seen.iter()
            .any(|s| s.username.as_deref() == Some("tls-driver"))
    });
    let secure = seen
        .iter()
        .find(|s| s.username.as_deref() == Some("tls-driver"));
    assert_eq!(secure.unwrap().password, None, "{seen:?}");
    let written = std::fs::read_to_string(file.path()).unwrap();
    assert!(
        !written.contains("s3cret") && written.contains("password = \"k3pt\""),
        "{written}"
    );
    // Typed again, it goes.
    let mut typed = form("change", "league", &new.addr(), "driver");
    typed["password"] = json!("typed");
    let r = change(web, &token, &typed);
    assert_eq!(r.status, 200, "{}", r.body);
    new.wait_until("the typed password", login("driver", "typed"));
    // The same broker written another way keeps it (a new topic: a new
    // connection, with the password).
    let mut same = form(
        "change",
        "stays",
        &format!("MQTT://127.0.0.1:{}/", old.port),
        "keeper",
    );
    same["topic"] = json!("t/stays-2");
    let r = change(web, &token, &same);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains("not kept"), "{}", r.body);
    let kept = old.wait_until("a second login of stays", |seen| {
        seen.iter()
            .filter(|s| s.username.as_deref() == Some("keeper"))
            .count()
            == 2
    });
    assert!(
        kept.iter()
            .filter(|s| s.username.as_deref() == Some("keeper"))
            .all(|s| s.password.as_deref() == Some(&b"k3pt"[..])),
        "{kept:?}"
    );
    let done = bin.stop();
    assert!(!done.stderr.contains("s3cret"), "{}", done.stderr);
}

/// Item 10: an Add naming `password_env` sent any variable of the relay to a
/// broker of the page's choosing, and "… is not set" told which exist; the
/// same for `ca_file` and files. Now both are refused alike, by the field,
/// before anything is read, and no broker is connected to.
#[test]
fn issue30_the_page_names_no_variable_and_no_file_and_says_nothing_of_them() {
    let (_first, first_addr) = receiver();
    let broker = FakeBroker::start(|_| Conduct::serve());
    let text = config_text(first_addr, "");
    let file = TempPath::file("secrets-env.toml", &text);
    let (bin, web, token) = relay(&file);
    let unset = format!("FORZA_RELAY_TEST_UNSET_{}", std::process::id());
    let mut answers = Vec::new();
    for var in ["PATH", "HOME", unset.as_str()] {
        let mut add = form("add", "leak", &broker.addr(), "x");
        add["password_env"] = json!(var);
        let r = change(web, &token, &add);
        assert_eq!(r.status, 422, "{var}: {}", r.body);
        assert_eq!(r.json()["field"], "Password variable", "{}", r.body);
        answers.push(r.body);
    }
    let tls = format!("mqtts://127.0.0.1:{}", broker.port);
    for path in ["/etc/passwd", "/no/such/ca.pem", &file.display(), "ca.pem"] {
        let mut add = form("add", "leak", &tls, "x");
        add["ca_file"] = json!(path);
        let r = change(web, &token, &add);
        assert_eq!(r.status, 422, "{path}: {}", r.body);
        assert_eq!(r.json()["field"], "CA file", "{}", r.body);
        answers.push(r.body.replace("CA file", "Password variable"));
    }
    assert!(
        answers[..3].iter().all(|a| *a == answers[0]),
        "the same answer whatever the variable:\n{}",
        answers.join("\n")
    );
    assert!(
        answers[3..].iter().all(|a| *a == answers[3]),
        "the same answer whatever the file:\n{}",
        answers.join("\n")
    );
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), text);
    assert_eq!(broker.accepted(), 0, "no broker was given anything");
    bin.stop();
}

/// Writes the test CA's certificate at `path`.
fn write_ca(path: &Path) {
    std::fs::write(path, include_str!("../fixtures/test-ca.pem")).unwrap();
}

/// Items 11 and 14: a `ca_file` the file names, relative to the
/// configuration's folder, is kept by a change from the page (it was looked
/// for in the working folder); once it is a FIFO or a sparse 2 GiB file,
/// every edit answers at once with an error naming it (a FIFO blocked the
/// owner for ever, every later edit 503), and once it is a certificate again
/// edits work.
#[test]
fn issue30_a_ca_file_turned_fifo_or_huge_answers_naming_it_and_edits_go_on() {
    let (_first, first_addr) = receiver();
    let dir = TempPath::dir("secrets-ca");
    let ca = dir.path().join("league-ca.pem");
    write_ca(&ca);
    let path = dir.path().join("forza-relay.toml");
    let tls = format!("mqtts://127.0.0.1:{}", free_port());
    std::fs::write(
        &path,
        config_text(
            first_addr,
            &mqtt_table("secure", &tls, "ca_file = \"league-ca.pem\""),
        ),
    )
    .unwrap();
    // Started from another folder: the test's own.
    let mut bin = Bin::spawn(&["--config", &path.display().to_string()], None);
    let (_, web, _) = started(&mut bin);
    let token = page_token(&get(web, "/", &[]));
    let mut keep = form("change", "secure", &tls, "");
    keep["ca_file"] = json!("league-ca.pem");
    keep["topic"] = json!("t/secure-2");
    let r = change(web, &token, &keep);
    assert_eq!(r.status, 200, "{}", r.body);
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("ca_file = \"league-ca.pem\""), "{written}");

    let shown = ca.display().to_string();
    let mut n = 0;
    let mut add = |expect: u16| {
        n += 1;
        let (_tool, addr) = receiver();
        let body = json!({"action": "add", "name": format!("tool-{n}"), "addr": addr.to_string()});
        let r = change(web, &token, &body);
        assert_eq!(r.status, expect, "{}", r.body);
        r
    };
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut cases = vec![("bytes, more than the 1024 KiB read", {
        let shown = shown.clone();
        Box::new(move || {
            std::fs::remove_file(&shown).unwrap();
            std::fs::File::create(&shown)
                .unwrap()
                .set_len(2 << 30)
                .unwrap();
        }) as Box<dyn Fn()>
    })];
    #[cfg(unix)]
    cases.push(("it is a named pipe (FIFO), not a file", {
        let shown = shown.clone();
        Box::new(move || {
            std::fs::remove_file(&shown).unwrap();
            let made = std::process::Command::new("mkfifo")
                .arg(&shown)
                .status()
                .expect("mkfifo");
            assert!(made.success());
        })
    }));
    for (why, make) in cases {
        make();
        // Twice: the owner answers, and is free for the next one.
        for _ in 0..2 {
            let r = add(422);
            let error = r.json()["error"].as_str().unwrap().to_owned();
            assert!(
                error.contains(&format!("{shown}: cannot read it: ")) && error.contains(why),
                "{error}"
            );
        }
        std::fs::remove_file(&ca).unwrap();
        write_ca(&ca);
        add(200);
    }
    bin.stop();
}
