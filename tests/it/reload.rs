//! Live reload over real loopback sockets: a relay on its own thread, the
//! reload watcher on a config file, and a sender streaming packets while the
//! file changes. Destinations that did not change must receive every packet
//! sent during the reload.

use crate::common;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use forza_relay::config::{system_look_up, Config, LookUp, Output, Overrides};
use forza_relay::counters::DropReason;
use forza_relay::owner::{Outcome, Owner, APPLY_PATIENCE};
use forza_relay::relay::{Control, Relay};
use forza_relay::report::Snapshot;
use forza_relay::wire::Format;

use common::bin::Bin;
use common::rig::{Game, Pace, Tool};
use common::*;

/// Packets per second the sender streams while a file changes.
const RATE: u64 = 400;
/// How long a change may take to be applied (noticed within 1 s, plus a loaded
/// machine's slack).
const APPLY_WITHIN: Duration = Duration::from_secs(5);

/// A relay, its reload watcher and the file it watches.
struct Rig {
    file: TempPath,
    addr: SocketAddr,
    control: Control,
    thread: Option<JoinHandle<Snapshot>>,
    reloader: Option<Owner>,
    /// What the reloader made of each version of the file.
    outcomes: mpsc::Receiver<Outcome>,
}

impl Rig {
    #[track_caller]
    fn start(toml: &str, look_up: Arc<LookUp>) -> Rig {
        let file = TempPath::file("reload.toml", toml);
        let config = Config::reload_file(file.path(), &Overrides::default(), None, &*look_up)
            .unwrap_or_else(|e| panic!("the first config is invalid: {e}"))
            .config;
        let (tx, rx) = mpsc::channel();
        let relay_config = config.clone();
        let thread = thread::spawn(move || {
            let mut relay = Relay::bind(&relay_config).expect("the relay binds");
            tx.send((relay.local_addr(), relay.control()))
                .expect("the test waits");
            relay.run()
        });
        let (addr, control) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the relay starts");
        let mut reloader = Owner::start(
            Some(file.path()),
            Overrides::default(),
            config,
            control.clone(),
            look_up,
        )
        .expect("watch the file");
        let outcomes = reloader.outcomes();
        Rig {
            file,
            addr,
            control,
            thread: Some(thread),
            reloader: Some(reloader),
            outcomes,
        }
    }

    /// The reloader's next outcome (at most [`APPLY_WITHIN`]).
    #[track_caller]
    fn next_outcome(&self) -> Outcome {
        self.outcomes
            .recv_timeout(APPLY_WITHIN)
            .unwrap_or_else(|e| panic!("the reloader said nothing within {APPLY_WITHIN:?}: {e}"))
    }

    /// Saves `toml` as editors do: a new file renamed over the old one.
    fn replace(&self, toml: &str) {
        save_as_editors_do(self.file.path(), toml);
    }

    /// Saves `toml` into the file itself.
    fn overwrite(&self, toml: &str) {
        std::fs::write(self.file.path(), toml).expect("write the file");
    }

    /// Waits until the relay's counters satisfy `applied`.
    #[track_caller]
    fn wait_for(&self, what: &str, applied: impl Fn(&Snapshot) -> bool) -> Snapshot {
        let deadline = Instant::now() + APPLY_WITHIN;
        loop {
            let s = self
                .control
                .snapshot(Duration::from_secs(2))
                .expect("the relay answers");
            if applied(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{what} not applied within {APPLY_WITHIN:?}:\n{s}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(mut self) -> Snapshot {
        drop(self.reloader.take());
        self.control.stop();
        self.thread
            .take()
            .expect("stopped once")
            .join()
            .expect("the relay thread did not panic")
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.control.stop();
            let _ = thread.join();
        }
    }
}

fn names(s: &Snapshot) -> Vec<&str> {
    s.destinations.iter().map(|d| d.name.as_str()).collect()
}

/// Streams fh6 packets (TimestampMS `first`, `first` + 1, …) at [`RATE`] to
/// `to` until stopped; in every ten, the last three are IsRaceOn = 0 (a short
/// stop).
fn stream(to: SocketAddr, first: u32) -> Game {
    Game::start(to, Pace::Hz(RATE), move |i| {
        let ts = first + i;
        Spec::new(Format::Fh6, ts)
            .racing(ts % 10 < 7)
            .class(FH6_R)
            .build()
    })
}

/// What one destination receives, kept as (length, TimestampMS, CarClass) of
/// each datagram read as `format`.
fn collect(socket: UdpSocket, format: Format) -> Tool<Got> {
    Tool::start(socket, move |bytes| {
        let view = forza_relay::wire::Packet::new_checked(bytes, format);
        let (ts, class) = view.map_or((u32::MAX, -1), |p| (p.timestamp_ms(), p.car_class()));
        (bytes.len(), ts, class)
    })
}

/// Asserts `got` holds TimestampMS 0..sent, each once, in order.
#[track_caller]
fn assert_every_packet(name: &str, got: &[(usize, u32, i32)], sent: u32) {
    let timestamps: Vec<u32> = got.iter().map(|g| g.1).collect();
    let expected: Vec<u32> = (0..sent).collect();
    if timestamps != expected {
        let missing: Vec<u32> = expected
            .iter()
            .copied()
            .filter(|t| !timestamps.contains(t))
            .take(10)
            .collect();
        panic!(
            "{name}: {} of {sent} packets arrived; first missing {missing:?}",
            timestamps.len()
        );
    }
}

fn listen() -> String {
    listen_toml("fh6")
}

/// How a test saves the new file.
#[derive(Debug, Clone, Copy)]
enum Save {
    /// A new file renamed over the old one, as editors do.
    Replace,
    /// Into the file itself.
    Overwrite,
}

/// (length, TimestampMS, CarClass) of one datagram a destination received.
type Got = (usize, u32, i32);

/// What one reload under traffic saw.
struct Reload {
    /// Packets sent in all.
    sent: u32,
    /// What each receiver got, in the order given.
    got: Vec<Vec<Got>>,
    /// The counters once the change was seen applied.
    applied: Snapshot,
    /// The final counters.
    report: Snapshot,
}

/// Starts a relay on `before` and streams packets to it; `prepare()`, then saves
/// `after` while they flow, waits until `applied` holds (`what` names the change),
/// lets `more` packets go, and collects what each of `receivers` got.
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn reload_under_traffic(
    before: &str,
    after: &str,
    look_up: Arc<LookUp>,
    receivers: Vec<(UdpSocket, Format)>,
    save: Save,
    prepare: impl FnOnce(),
    what: &str,
    applied: impl Fn(&Snapshot) -> bool,
    more: u32,
) -> Reload {
    let rig = Rig::start(before, look_up);
    let tools: Vec<_> = receivers
        .into_iter()
        .map(|(socket, format)| collect(socket, format))
        .collect();
    let stream = stream(rig.addr, 0);
    stream.wait_sent(80);
    prepare();
    match save {
        Save::Replace => rig.replace(after),
        Save::Overwrite => rig.overwrite(after),
    }
    let applied = rig.wait_for(what, applied);
    let sent = stream.stop_after(more);
    // Every datagram read before the stop: a Stop that comes while the last
    // ones still wait in the socket (a loaded machine) would lose them.
    rig.wait_for("every datagram sent read", |s| {
        s.input.received >= u64::from(sent)
    });
    // Once the relay has stopped, all it sent is queued at the tools.
    let report = rig.stop();
    let got: Vec<Vec<Got>> = tools.into_iter().map(Tool::finish).collect();
    let counts: Vec<usize> = got.iter().map(Vec::len).collect();
    println!("{what}: sent {sent}; the destinations got {counts:?}\n{report}");
    Reload {
        sent,
        got,
        applied,
        report,
    }
}

#[test]
fn an_added_destination_starts_and_the_others_lose_nothing() {
    let (a, a_addr) = receiver();
    let (c, c_addr) = receiver();
    let before = listen() + &destination_toml("A", a_addr, "same", "");
    let after = before.clone() + &destination_toml("C", c_addr, "fm7", "");
    let r = reload_under_traffic(
        &before,
        &after,
        Arc::new(system_look_up),
        vec![(a, Format::Fh6), (c, Format::Fm7)],
        Save::Replace,
        || {},
        "+ C",
        |s| names(s) == ["A", "C"],
        100,
    );
    let (a_got, c_got) = (&r.got[0], &r.got[1]);
    assert_every_packet("A", a_got, r.sent);
    let c_report = destination(&r.report, "C");
    assert_eq!(c_report.output, Output::Format(Format::Fm7));
    assert!(
        c_got.len() >= 100,
        "C got {} after it was added",
        c_got.len()
    );
    assert_eq!(c_got.len() as u64, c_report.stats.sent);
    assert!(c_got.iter().all(|g| g.0 == Format::Fm7.len()), "C gets fm7");
    // C's packets are the newest ones, in order, ending with the last sent.
    assert!(c_got.windows(2).all(|w| w[0].1 + 1 == w[1].1), "C in order");
    assert_eq!(c_got.last().map(|g| g.1), Some(r.sent - 1));
}

#[test]
fn a_removed_destination_stops_and_the_others_lose_nothing() {
    let (a, a_addr) = receiver();
    let (d, d_addr) = receiver();
    let after = listen() + &destination_toml("A", a_addr, "same", "");
    let before = after.clone() + &destination_toml("D", d_addr, "same", "");
    let r = reload_under_traffic(
        &before,
        &after,
        Arc::new(system_look_up),
        vec![(a, Format::Fh6), (d, Format::Fh6)],
        Save::Replace,
        || {},
        "- D",
        |s| names(s) == ["A"],
        100,
    );
    let (a_got, d_got) = (&r.got[0], &r.got[1]);
    assert_every_packet("A", a_got, r.sent);
    assert!(!d_got.is_empty(), "D got packets before it was removed");
    assert!(
        d_got.len() as u32 + 100 <= r.sent,
        "D got {} of {}: nothing after its removal",
        d_got.len(),
        r.sent
    );
    assert!(d_got.windows(2).all(|w| w[0].1 + 1 == w[1].1), "D in order");
    assert!(r.report.destination("D").is_none());
    assert!(r.applied.input.received <= u64::from(r.sent));
}

#[test]
fn a_changed_format_applies_at_once_and_keeps_every_packet_and_counter() {
    let (a, a_addr) = receiver();
    let (b, b_addr) = receiver();
    let with_b = |format| {
        listen()
            + &destination_toml("A", a_addr, "same", "")
            + &destination_toml("B", b_addr, format, "")
    };
    let r = reload_under_traffic(
        &with_b("same"),
        &with_b("fh5"),
        Arc::new(system_look_up),
        vec![(a, Format::Fh6), (b, Format::Fh6)],
        Save::Overwrite,
        || {},
        "~ B: same -> fh5",
        |s| {
            s.destination("B")
                .is_some_and(|b| b.output == Output::Format(Format::Fh5))
        },
        100,
    );
    let (a_got, b_got) = (&r.got[0], &r.got[1]);
    assert_every_packet("A", a_got, r.sent);
    // Both formats are 324 bytes: the class tells them apart (FH6 R = 6 becomes
    // FH5 S2 = 5). B got every packet, first as sent, then translated.
    assert_every_packet("B", b_got, r.sent);
    let switch = b_got
        .iter()
        .position(|g| g.2 == FH5_S2)
        .expect("B got fh5 packets");
    assert!(switch > 0, "B got fh6 packets before the change");
    assert!(b_got[..switch].iter().all(|g| g.2 == FH6_R), "fh6 before");
    assert!(b_got[switch..].iter().all(|g| g.2 == FH5_S2), "fh5 after");
    assert_eq!(
        destination(&r.report, "B").stats.sent,
        u64::from(r.sent),
        "B kept its counters across the change"
    );
}

#[test]
fn a_changed_filter_applies_and_counts_add_up() {
    let (a, a_addr) = receiver();
    let (b, b_addr) = receiver();
    let with_b = |options| {
        listen()
            + &destination_toml("A", a_addr, "same", "")
            + &destination_toml("B", b_addr, "same", options)
    };
    let r = reload_under_traffic(
        &with_b(""),
        &with_b("only_race_on = true"),
        Arc::new(system_look_up),
        vec![(a, Format::Fh6), (b, Format::Fh6)],
        Save::Replace,
        || {},
        "~ B: only_race_on",
        |s| {
            s.destination("B")
                .is_some_and(|b| b.stats.dropped(DropReason::NotRacing) > 0)
        },
        100,
    );
    let (a_got, b_got) = (&r.got[0], &r.got[1]);
    assert_every_packet("A", a_got, r.sent);
    let b_report = destination(&r.report, "B");
    assert_eq!(b_got.len() as u64, b_report.stats.sent);
    assert_eq!(
        b_report.stats.sent + b_report.stats.dropped(DropReason::NotRacing),
        u64::from(r.sent),
        "every packet B didn't get was a not-racing one: {}",
        r.report
    );
}

#[test]
fn a_changed_listen_address_moves_the_listener_and_keeps_the_destinations() {
    let (a, a_addr) = receiver();
    let free = UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("reserve a port");
    let before = listen() + &destination_toml("A", a_addr, "same", "");
    let after = format!("[listen]\naddr = \"{free}\"\nformat = \"fh6\"\n\n[stats]\ninterval = 0\n")
        + &destination_toml("A", a_addr, "same", "");
    let rig = Rig::start(&before, Arc::new(system_look_up));
    let a_rx = collect(a, Format::Fh6);
    let first = stream(rig.addr, 0).stop_after(200);
    rig.wait_for("the first packets", |s| {
        s.input.received == u64::from(first)
    });
    rig.replace(&after);
    rig.wait_for("~ listen", |s| s.listen == free);
    let second = stream(free, first).stop_after(200);
    let report = rig.stop();
    let a_got = a_rx.finish();
    println!("sent {first} + {second}; A got {}\n{report}", a_got.len());

    assert_every_packet("A", &a_got, first + second);
    assert_eq!(report.listen, free);
    assert_eq!(
        destination(&report, "A").stats.sent,
        u64::from(first + second)
    );
}

#[test]
fn an_invalid_file_changes_nothing_and_a_fixed_one_applies() {
    let (a, a_addr) = receiver();
    let (c, c_addr) = receiver();
    let good = listen() + &destination_toml("A", a_addr, "same", "");
    let rig = Rig::start(&good, Arc::new(system_look_up));
    let (a_rx, c_rx) = (collect(a, Format::Fh6), collect(c, Format::Fh6));
    let stream = stream(rig.addr, 0);
    for bad in [
        good.clone() + &destination_toml("C", c_addr, "fh7", ""),
        "[listen\naddr = ".to_owned(),
        String::new(),
        good.replace("format = \"fh6\"", "format = 6"),
    ] {
        rig.replace(&bad);
        match rig.next_outcome() {
            Outcome::Invalid(e) => assert!(!e.problems.is_empty(), "{bad:?}"),
            other => panic!("{bad:?} gave {other:?}"),
        }
        let s = rig
            .control
            .snapshot(Duration::from_secs(2))
            .expect("the relay answers");
        assert_eq!(names(&s), ["A"], "after {bad:?}");
    }
    rig.replace(&(good.clone() + &destination_toml("C", c_addr, "same", "")));
    rig.wait_for("+ C", |s| names(s) == ["A", "C"]);
    let sent = stream.stop_after(50);
    let report = rig.stop();
    let (a_got, c_got) = (a_rx.finish(), c_rx.finish());
    println!(
        "sent {sent}; A got {}, C got {}\n{report}",
        a_got.len(),
        c_got.len()
    );
    assert_every_packet("A", &a_got, sent);
    assert!(c_got.len() >= 50);
}

/// A resolver for the made-up host `tool.test`, which can be switched off.
fn switchable(addr: SocketAddr, resolves: Arc<AtomicBool>) -> Arc<LookUp> {
    Arc::new(move |host: &str, port: u16| {
        if host == "tool.test" && resolves.load(Ordering::SeqCst) {
            Ok(vec![SocketAddr::new(addr.ip(), port)])
        } else if host == "tool.test" {
            Err(io::Error::other("no such host (the test switched it off)"))
        } else {
            system_look_up(host, port)
        }
    })
}

#[test]
fn a_hostname_that_stops_resolving_keeps_its_address() {
    let (a, a_addr) = receiver();
    let (c, c_addr) = receiver();
    let resolves = Arc::new(AtomicBool::new(true));
    let by_name = format!(
        "{}\n[[destination]]\nname = \"A\"\naddr = \"tool.test:{}\"\n",
        listen(),
        a_addr.port()
    );
    let switch = resolves.clone();
    let r = reload_under_traffic(
        &by_name,
        &(by_name.clone() + &destination_toml("C", c_addr, "same", "")),
        switchable(a_addr, resolves),
        vec![(a, Format::Fh6), (c, Format::Fh6)],
        Save::Replace,
        move || switch.store(false, Ordering::SeqCst),
        "+ C",
        |s| names(s) == ["A", "C"],
        50,
    );
    assert_eq!(
        destination(&r.applied, "A").addr,
        Some(a_addr),
        "the old address is kept"
    );
    assert_every_packet("A", &r.got[0], r.sent);
    assert!(r.got[1].len() >= 50);
}

#[test]
fn binary_logs_one_line_saying_what_changed() {
    let (_a, a_addr) = receiver();
    let (_b, b_addr) = receiver();
    let (_c, c_addr) = receiver();
    let (_d, d_addr) = receiver();
    let file = TempPath::file(
        "reload-bin.toml",
        &(listen()
            + &destination_toml("A", a_addr, "same", "")
            + &destination_toml("B", b_addr, "same", "")
            + &destination_toml("D", d_addr, "same", "")),
    );
    let mut bin = Bin::spawn(&["--config", &file.display()], None);
    bin.wait_until_running();
    let after = listen()
        + &destination_toml("A", a_addr, "same", "")
        + &destination_toml("B", b_addr, "fh5", "")
        + &destination_toml("C", c_addr, "fm7", "");
    replace_file(file.path(), &after);
    let line = bin.wait_for_line("configuration applied");
    assert!(
        line.ends_with("configuration applied: + C (fm7), ~ B: same -> fh5, - D"),
        "{line}"
    );
    std::fs::write(file.path(), "[[destination]]\naddr = 7\n").expect("write");
    let line = bin.wait_for_line("was not reloaded");
    assert!(
        line.contains("the previous configuration runs on"),
        "{line}"
    );
    bin.wait_for_line("reload-bin.toml:2");
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    done.assert_summary_line("C", c_addr, "fm7", 0);
    done.assert_summary_line("B", b_addr, "fh5", 0);
}

fn replace_file(path: &Path, text: &str) {
    save_as_editors_do(path, text);
}

/// Starts the binary on the config at `path` and a stream of packets to it,
/// collecting what each of `receivers` gets.
struct BinRig {
    bin: Bin,
    stream: Game,
    tools: Vec<Tool<Got>>,
}

impl BinRig {
    #[track_caller]
    fn start(path: &Path, receivers: Vec<UdpSocket>) -> BinRig {
        let mut bin = Bin::spawn(&["--config", &path.display().to_string()], None);
        // Logged once the reloader watches the file, and SIGHUP reaches it.
        let addr = bin.wait_until_running();
        let tools = receivers
            .into_iter()
            .map(|r| collect(r, Format::Fh6))
            .collect();
        let stream = stream(addr, 0);
        stream.wait_sent(80);
        BinRig { bin, stream, tools }
    }

    /// Lets `more` packets go, stops the stream and the binary (exit 0), and
    /// returns what was sent, what each receiver got, and how the binary ended.
    #[track_caller]
    fn stop(self, more: u32) -> (u32, Vec<Vec<Got>>, common::bin::Finished) {
        let sent = self.stream.stop_after(more);
        self.bin.signal("INT");
        let done = self.bin.wait();
        assert_eq!(done.code(), 0, "{}", done.stderr);
        // The process has ended: all it sent is queued at the tools.
        let got = self.tools.into_iter().map(Tool::finish).collect();
        (sent, got, done)
    }
}

#[test]
fn issue12_a_save_written_in_two_parts_is_applied_once() {
    let (a, a_addr) = receiver();
    let (c, c_addr) = receiver();
    let (d, d_addr) = receiver();
    let head = listen() + &destination_toml("A", a_addr, "same", "");
    let before = head.clone() + &destination_toml("C", c_addr, "same", "");
    let after = before.clone() + &destination_toml("D", d_addr, "same", "");
    let file = TempPath::file("two-parts.toml", &before);
    let mut rig = BinRig::start(file.path(), vec![a, c, d]);
    {
        // A valid file without C, then, half a second later, the rest: as a
        // slow program (or a network drive) saves it.
        use std::io::Write as _;
        let mut f = std::fs::File::create(file.path()).expect("open the file");
        f.write_all(head.as_bytes()).expect("write the first part");
        f.flush().expect("flush");
        // Pacing the slow writer, not a wait for a fact.
        thread::sleep(Duration::from_millis(500));
        f.write_all(&after.as_bytes()[head.len()..])
            .expect("write the rest");
    }
    let line = rig.bin.wait_for_line("configuration applied");
    assert!(
        line.ends_with("configuration applied: + D (same)"),
        "{line}"
    );
    let (sent, got, done) = rig.stop(100);
    assert_every_packet("A", &got[0], sent);
    assert_every_packet("C", &got[1], sent);
    assert!(got[2].len() >= 100, "D got {}", got[2].len());
    let applied = done
        .stderr
        .lines()
        .filter(|l| l.contains("configuration applied"))
        .count();
    assert_eq!(applied, 1, "{}", done.stderr);
    done.assert_summary_line("C", c_addr, "same", u64::from(sent));
}

#[cfg(unix)]
#[test]
fn issue12_a_config_symlinked_into_another_folder_is_reloaded_on_save() {
    let (a, a_addr) = receiver();
    let (c, c_addr) = receiver();
    let real_dir = TempPath::dir("real");
    let link_dir = TempPath::dir("link");
    let real = real_dir.path().join("real.toml");
    let link = link_dir.path().join("forza-relay.toml");
    let before = listen() + &destination_toml("A", a_addr, "same", "");
    std::fs::write(&real, &before).expect("write the file");
    std::os::unix::fs::symlink(&real, &link).expect("link it");
    let mut rig = BinRig::start(&link, vec![a, c]);
    replace_file(
        &real,
        &(before + &destination_toml("C", c_addr, "same", "")),
    );
    let line = rig.bin.wait_for_line("configuration applied");
    assert!(
        line.ends_with("configuration applied: + C (same)"),
        "{line}"
    );
    let (sent, got, _) = rig.stop(100);
    assert_every_packet("A", &got[0], sent);
    assert!(got[1].len() >= 100, "C got {}", got[1].len());
}

#[cfg(unix)]
#[track_caller]
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

#[cfg(unix)]
#[test]
fn issue12_a_fifo_as_config_is_refused_by_check_run_and_the_reloader() {
    let dir = TempPath::dir("fifo");
    let fifo = dir.path().join("fifo.toml");
    mkfifo(&fifo);
    let fifo_text = fifo.display().to_string();
    for sub in ["check", "run"] {
        let done = Bin::run(&[sub, "--config", &fifo_text], None);
        assert_eq!(done.code(), 2, "{sub}: {}", done.stderr);
        done.assert_stderr_has(&[&format!(
            "{fifo_text}: cannot read the config file: it is a named pipe (FIFO)"
        )]);
    }

    let (a, a_addr) = receiver();
    let (c, c_addr) = receiver();
    let path = dir.path().join("live.toml");
    let good = listen() + &destination_toml("A", a_addr, "same", "");
    std::fs::write(&path, &good).expect("write the file");
    let mut rig = BinRig::start(&path, vec![a, c]);
    std::fs::remove_file(&path).expect("remove the file");
    mkfifo(&path);
    rig.bin.wait_for_line("was not reloaded");
    rig.bin.wait_for_line("it is a named pipe (FIFO)");
    // A SIGHUP now reads it again, and refuses it again, without blocking.
    rig.bin.signal("HUP");
    rig.bin.wait_for_line("it is a named pipe (FIFO)");
    std::fs::remove_file(&path).expect("remove the FIFO");
    replace_file(
        &path,
        &(good.clone() + &destination_toml("C", c_addr, "same", "")),
    );
    let line = rig.bin.wait_for_line("configuration applied");
    assert!(
        line.ends_with("configuration applied: + C (same)"),
        "{line}"
    );
    std::fs::remove_file(&path).expect("remove the file");
    mkfifo(&path);
    rig.bin.wait_for_line("it is a named pipe (FIFO)");
    // Stopping never waits for a reader of the FIFO.
    let (sent, got, _) = rig.stop(50);
    assert_every_packet("A", &got[0], sent);
}

#[test]
fn issue17_sighup_with_nothing_changed_says_so_in_one_line() {
    let (a, a_addr) = receiver();
    let file = TempPath::file(
        "hup.toml",
        &(listen() + &destination_toml("A", a_addr, "same", "")),
    );
    let mut rig = BinRig::start(file.path(), vec![a]);
    rig.bin.signal("HUP");
    let line = rig.bin.wait_for_line("SIGHUP");
    assert!(
        line.ends_with(&format!("SIGHUP: {} is unchanged", file.display())),
        "{line}"
    );
    let (sent, got, _) = rig.stop(20);
    assert_every_packet("A", &got[0], sent);
}

#[test]
fn issue17_a_key_that_needs_a_restart_is_named_in_a_warning() {
    let (a, a_addr) = receiver();
    let before = listen() + &destination_toml("A", a_addr, "same", "");
    let file = TempPath::file("restart-keys.toml", &before);
    let mut rig = BinRig::start(file.path(), vec![a]);
    let after = before.replace("[stats]\n", "[stats]\nformat = \"json\"\n");
    assert_ne!(after, before);
    replace_file(file.path(), &after);
    let line = rig.bin.wait_for_line("takes effect at the next start");
    assert!(line.contains("[stats] format"), "{line}");
    let (sent, got, done) = rig.stop(20);
    assert_every_packet("A", &got[0], sent);
    // The summaries stayed text, as at the start.
    assert!(!done.stdout.contains("\"event\""), "{}", done.stdout);
}

#[test]
fn issue17_a_slow_apply_is_logged_and_waited_for_until_the_relay_takes_it() {
    let (_a, a_addr) = receiver();
    let (_c, c_addr) = receiver();
    let before = listen() + &destination_toml("A", a_addr, "same", "");
    let file = TempPath::file("slow.toml", &before);
    let config = Config::reload_file(file.path(), &Overrides::default(), None, &system_look_up)
        .expect("a valid file")
        .config;
    let mut relay = Relay::bind(&config).expect("the relay binds");
    let control = relay.control();
    let mut reloader = Owner::start(
        Some(file.path()),
        Overrides::default(),
        config,
        control.clone(),
        Arc::new(system_look_up),
    )
    .expect("watch the file");
    let outcomes = reloader.outcomes();
    replace_file(
        file.path(),
        &(before + &destination_toml("C", c_addr, "same", "")),
    );
    // The loop is not running yet: the reloader says it is waiting, and waits.
    match outcomes.recv_timeout(APPLY_PATIENCE + APPLY_WITHIN) {
        Ok(Outcome::Waiting) => {}
        other => panic!("expected Waiting, got {other:?}"),
    }
    let thread = thread::spawn(move || relay.run());
    match outcomes.recv_timeout(APPLY_WITHIN) {
        Ok(Outcome::Applied(changes)) => assert_eq!(changes, "+ C (same)"),
        other => panic!("expected Applied, got {other:?}"),
    }
    let s = control
        .snapshot(Duration::from_secs(2))
        .expect("the relay answers");
    assert_eq!(names(&s), ["A", "C"]);
    drop(reloader);
    control.stop();
    thread.join().expect("the relay thread");
}
