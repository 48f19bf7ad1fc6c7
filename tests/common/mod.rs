//! Helpers for the relay's integration tests: loopback sockets with read timeouts,
//! a relay running on its own thread, packets built field by field from named
//! values, and the real binary run as a child process with bounded waits.
//! Each test file uses a part of them.
#![allow(dead_code)]

pub mod bin;
pub mod broker;
pub mod http;
pub mod rig;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use forza_relay::config::{Config, Overrides};
use forza_relay::relay::{Control, Relay};
use forza_relay::report::{DestinationSnapshot, Snapshot};
use forza_relay::wire::{Format, Packet, Puddle, Wheels};
use socket2::{Domain, Protocol, Socket, Type};

/// Saves `text` at `path` as most editors save: a new file beside it, renamed
/// over the old one. Windows refuses a rename over a file another program has
/// open at that moment (the relay reading it: the refusal is "Access denied",
/// without the POSIX rename Windows 10 has and Wine lacks), and editors there
/// try again; so does this, for up to a second.
#[track_caller]
pub fn save_as_editors_do(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write the new file");
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match std::fs::rename(&tmp, path) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("rename {} over {}: {e}", tmp.display(), path.display()),
        }
    }
}

/// Set by `.ci/run`: a test that needs an outside tool (tshark, unshare…) fails
/// when the tool is missing, instead of skipping with a note.
pub const REQUIRE_TOOLS: &str = "FORZA_RELAY_REQUIRE_TOOLS";

/// Whether a test that needs `tool` can run. Where it can't, `why` says what is
/// missing: with [`REQUIRE_TOOLS`] set (as `.ci/run` does) that fails the test,
/// elsewhere it is printed as a note and the test returns early.
#[track_caller]
pub fn require_tool(tool: &str, available: bool, why: &str) -> bool {
    if available {
        return true;
    }
    let message = format!("{tool} is not available: {why}");
    if std::env::var_os(REQUIRE_TOOLS).is_some() {
        panic!("{message} ({REQUIRE_TOOLS} is set: .ci/run installs every tool a test needs)");
    }
    eprintln!("note: {message}; skipped (.ci/run installs it and sets {REQUIRE_TOOLS})");
    false
}

/// Whether `tool --version` runs.
pub fn runs(tool: &str) -> bool {
    std::process::Command::new(tool)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A loopback port nothing listens on now, TCP or UDP, for a server a test
/// starts (influxd, mosquitto) that takes its port from a file.
pub fn free_port() -> u16 {
    loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        let port = tcp
            .local_addr()
            .expect("a bound socket has an address")
            .port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// How long a receiver waits for one datagram before the test fails: a bound
/// only a lost datagram reaches, also under qemu and Wine on a loaded machine
/// (no test waits for it to pass).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Receive buffer asked for on test receivers, so bursts are not lost in the
/// kernel while a receiver thread waits for a core.
pub const RECV_BUFFER: usize = 8 << 20;
/// Larger than the largest UDP payload, so nothing a test receives is truncated.
pub const MAX_DATAGRAM: usize = 65_536;

// The named values every test packet carries (see `Spec::build`). Each is distinct
// from the others and from zero, so a field read from the wrong offset shows.
pub const ENGINE_MAX_RPM: f32 = 8_250.0;
pub const CURRENT_ENGINE_RPM: f32 = 6_543.25;
pub const VELOCITY_Z: f32 = 40.5;
pub const CAR_ORDINAL: i32 = 3_141;
pub const CAR_PERFORMANCE_INDEX: i32 = 901;
pub const NUM_CYLINDERS: i32 = 12;
pub const CAR_GROUP: u32 = 11;
pub const SMASHABLE_VEL_DIFF: f32 = 2.5;
pub const SMASHABLE_MASS: f32 = 120.75;
pub const POSITION: [f32; 3] = [1_234.5, -56.25, 789.125];
pub const SPEED: f32 = 41.5;
pub const RACE_POSITION: u8 = 4;
pub const LAP_NUMBER: u16 = 2;
pub const GEAR: u8 = 3;
pub const STEER: i8 = -100;
pub const NORMALIZED_AI_BRAKE_DIFFERENCE: i8 = -7;
pub const TIRE_WEAR: [f32; 4] = [0.125, 0.25, 0.375, 0.5];
pub const TRACK_ORDINAL: i32 = 860;
pub const TAIL_BYTE: u8 = 0xAB;

/// FH6 CarClass values (D C B A S1 S2 R X = 0..7).
pub const FH6_S2: i32 = 5;
pub const FH6_R: i32 = 6;
pub const FH6_X: i32 = 7;
/// FH4/FH5 CarClass values (D C B A S1 S2 X = 0..6).
pub const FH5_S2: i32 = 5;
pub const FH5_X: i32 = 6;

/// One test packet: the values that change between packets; the rest are the
/// named consts above.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The packet's layout.
    pub format: Format,
    /// TimestampMS, used to tell packets apart.
    pub timestamp_ms: u32,
    /// IsRaceOn.
    pub race_on: bool,
    /// CarClass, on the format's own scale.
    pub car_class: i32,
    /// WheelInPuddle FL, FR, RL, RR (written as the format types it).
    pub puddle: [Puddle; 4],
}

impl Spec {
    /// A racing packet of `format` with a dry road and class S2 (5 on every scale
    /// the tests use).
    pub fn new(format: Format, timestamp_ms: u32) -> Spec {
        Spec {
            format,
            timestamp_ms,
            race_on: true,
            car_class: FH6_S2,
            puddle: [Puddle::Flag(0); 4],
        }
    }

    /// The same packet with IsRaceOn set to `race_on`.
    pub fn racing(self, race_on: bool) -> Spec {
        Spec { race_on, ..self }
    }

    /// The same packet with CarClass `car_class`.
    pub fn class(self, car_class: i32) -> Spec {
        Spec { car_class, ..self }
    }

    /// The same packet with these WheelInPuddle values.
    pub fn puddle(self, puddle: [Puddle; 4]) -> Spec {
        Spec { puddle, ..self }
    }

    /// The bytes, every field set by name through the `Packet` setters.
    #[track_caller]
    pub fn build(&self) -> Vec<u8> {
        let mut buf = vec![0u8; self.format.len()];
        let mut p = Packet::new_checked(&mut buf[..], self.format)
            .expect("the buffer has the format's length");
        p.set_is_race_on(i32::from(self.race_on));
        p.set_timestamp_ms(self.timestamp_ms);
        p.set_engine_max_rpm(ENGINE_MAX_RPM);
        p.set_current_engine_rpm(CURRENT_ENGINE_RPM);
        p.set_velocity_z(VELOCITY_Z);
        p.set_wheel_in_puddle(Wheels::from_array(self.puddle));
        p.set_car_ordinal(CAR_ORDINAL);
        p.set_car_class(self.car_class);
        p.set_car_performance_index(CAR_PERFORMANCE_INDEX);
        p.set_num_cylinders(NUM_CYLINDERS);
        let layout = self.format.layout();
        if layout.horizon.is_some() {
            p.set_car_group(CAR_GROUP).expect("a Horizon format");
            p.set_smashable_vel_diff(SMASHABLE_VEL_DIFF)
                .expect("a Horizon format");
            p.set_smashable_mass(SMASHABLE_MASS)
                .expect("a Horizon format");
            assert!(p.set_tail_byte(TAIL_BYTE), "a Horizon format has a tail");
        }
        if layout.dash.is_some() {
            p.set_position_x(POSITION[0]).expect("has Dash");
            p.set_position_y(POSITION[1]).expect("has Dash");
            p.set_position_z(POSITION[2]).expect("has Dash");
            p.set_speed(SPEED).expect("has Dash");
            p.set_lap_number(LAP_NUMBER).expect("has Dash");
            p.set_race_position(RACE_POSITION).expect("has Dash");
            p.set_gear(GEAR).expect("has Dash");
            p.set_steer(STEER).expect("has Dash");
            p.set_normalized_ai_brake_difference(NORMALIZED_AI_BRAKE_DIFFERENCE)
                .expect("has Dash");
        }
        if layout.extras.is_some() {
            p.set_tire_wear(Wheels::from_array(TIRE_WEAR))
                .expect("has extras");
            p.set_track_ordinal(TRACK_ORDINAL).expect("has extras");
        }
        buf
    }
}

/// Reads `bytes` as a `format` packet, failing the test if the length is wrong.
#[track_caller]
pub fn view(bytes: &[u8], format: Format) -> Packet<&[u8]> {
    Packet::new_checked(bytes, format).unwrap_or_else(|e| panic!("not a {format} packet: {e}"))
}

/// Checks every Sled field `spec` set, with the puddle and class the output should
/// carry after translation.
#[track_caller]
pub fn assert_sled_fields(p: &Packet<&[u8]>, spec: &Spec, puddle: [Puddle; 4], car_class: i32) {
    assert_eq!(p.is_race_on(), i32::from(spec.race_on), "IsRaceOn");
    assert_eq!(p.timestamp_ms(), spec.timestamp_ms, "TimestampMS");
    assert_eq!(p.engine_max_rpm(), ENGINE_MAX_RPM, "EngineMaxRpm");
    assert_eq!(
        p.current_engine_rpm(),
        CURRENT_ENGINE_RPM,
        "CurrentEngineRpm"
    );
    assert_eq!(p.velocity_z(), VELOCITY_Z, "VelocityZ");
    assert_eq!(p.wheel_in_puddle().into_array(), puddle, "WheelInPuddle");
    assert_eq!(p.car_ordinal(), CAR_ORDINAL, "CarOrdinal");
    assert_eq!(p.car_class(), car_class, "CarClass");
    assert_eq!(
        p.car_performance_index(),
        CAR_PERFORMANCE_INDEX,
        "CarPerformanceIndex"
    );
    assert_eq!(p.num_cylinders(), NUM_CYLINDERS, "NumCylinders");
}

/// Checks the Horizon block and tail: the named values, or zero-filled.
#[track_caller]
pub fn assert_horizon_fields(p: &Packet<&[u8]>, copied: bool) {
    let (group, vel, mass, tail) = if copied {
        (CAR_GROUP, SMASHABLE_VEL_DIFF, SMASHABLE_MASS, TAIL_BYTE)
    } else {
        (0, 0.0, 0.0, 0)
    };
    assert_eq!(p.car_group(), Some(group), "CarGroup");
    assert_eq!(p.smashable_vel_diff(), Some(vel), "SmashableVelDiff");
    assert_eq!(p.smashable_mass(), Some(mass), "SmashableMass");
    assert_eq!(p.tail_byte(), Some(tail), "tail byte");
}

/// Checks that the packet's format has no Horizon block.
#[track_caller]
pub fn assert_no_horizon_fields(p: &Packet<&[u8]>) {
    assert_eq!(p.car_group(), None, "CarGroup");
    assert_eq!(p.smashable_vel_diff(), None, "SmashableVelDiff");
    assert_eq!(p.smashable_mass(), None, "SmashableMass");
    assert_eq!(p.tail_byte(), None, "tail byte");
}

/// Checks the Dash fields: the named values, or zero-filled.
#[track_caller]
pub fn assert_dash_fields(p: &Packet<&[u8]>, copied: bool) {
    let k = |v: f32| if copied { v } else { 0.0 };
    assert_eq!(p.position_x(), Some(k(POSITION[0])), "PositionX");
    assert_eq!(p.position_y(), Some(k(POSITION[1])), "PositionY");
    assert_eq!(p.position_z(), Some(k(POSITION[2])), "PositionZ");
    assert_eq!(p.speed(), Some(k(SPEED)), "Speed");
    let (lap, race_position, gear, steer, ai) = if copied {
        (
            LAP_NUMBER,
            RACE_POSITION,
            GEAR,
            STEER,
            NORMALIZED_AI_BRAKE_DIFFERENCE,
        )
    } else {
        (0, 0, 0, 0, 0)
    };
    assert_eq!(p.lap_number(), Some(lap), "LapNumber");
    assert_eq!(p.race_position(), Some(race_position), "RacePosition");
    assert_eq!(p.gear(), Some(gear), "Gear");
    assert_eq!(p.steer(), Some(steer), "Steer");
    assert_eq!(
        p.normalized_ai_brake_difference(),
        Some(ai),
        "NormalizedAIBrakeDifference"
    );
}

/// A UDP socket bound to `addr` with a large receive buffer and a read timeout.
pub fn receiver_on(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: Linux caps it at net.core.rmem_max.
    let _ = socket.set_recv_buffer_size(RECV_BUFFER);
    socket.bind(&addr.into())?;
    let socket: UdpSocket = socket.into();
    socket.set_read_timeout(Some(READ_TIMEOUT))?;
    Ok(socket)
}

/// A receiver on a fresh loopback port, and its address.
#[track_caller]
pub fn receiver() -> (UdpSocket, SocketAddr) {
    let socket = receiver_on(([127, 0, 0, 1], 0).into()).expect("bind a receiver");
    let addr = socket.local_addr().expect("a bound socket has an address");
    (socket, addr)
}

/// Receives one datagram into `buf`, retrying on `Interrupted`: with a read
/// timeout set, Linux fails a blocking `recv` with EINTR instead of restarting it
/// (seen here when the test process is briefly stopped). Gives up after
/// [`READ_TIMEOUT`].
pub fn recv_into(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<usize> {
    let deadline = Instant::now() + READ_TIMEOUT;
    loop {
        match socket.recv(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted && Instant::now() < deadline => {}
            other => return other,
        }
    }
}

/// The next datagram at `socket`; fails the test after [`READ_TIMEOUT`].
#[track_caller]
pub fn recv(socket: &UdpSocket) -> Vec<u8> {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    match recv_into(socket, &mut buf) {
        Ok(n) => {
            buf.truncate(n);
            buf
        }
        Err(e) => panic!(
            "nothing arrived at {:?} within {READ_TIMEOUT:?}: {e}",
            socket.local_addr()
        ),
    }
}

/// Fails the test if a datagram is already waiting at `socket`. Only meaningful
/// once the relay has handled everything sent (a later datagram was received, or
/// `poll_once` returned): a loopback send is queued before it returns.
#[track_caller]
pub fn assert_nothing_waiting(socket: &UdpSocket) {
    socket.set_nonblocking(true).expect("set non-blocking");
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let got = recv_into(socket, &mut buf);
    socket.set_nonblocking(false).expect("set blocking");
    match got {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Ok(n) => panic!(
            "an unexpected {n}-byte datagram was waiting at {:?}",
            socket.local_addr()
        ),
        Err(e) => panic!("receive failed: {e}"),
    }
}

/// Sends datagrams to the relay from a fresh loopback port.
pub struct Sender {
    socket: UdpSocket,
    to: SocketAddr,
}

impl Sender {
    /// A sender to `to`, bound to the loopback address of the same family.
    #[track_caller]
    pub fn new(to: SocketAddr) -> Sender {
        let from: SocketAddr = if to.is_ipv6() {
            "[::1]:0".parse().expect("an address")
        } else {
            "127.0.0.1:0".parse().expect("an address")
        };
        let socket = Socket::new(Domain::for_address(from), Type::DGRAM, Some(Protocol::UDP))
            .expect("a sender socket");
        // macOS sends no datagram larger than the send buffer, 9216 bytes by
        // default (net.inet.udp.maxdgram); Linux's default is far above this.
        if socket
            .send_buffer_size()
            .is_ok_and(|size| size < MAX_DATAGRAM)
        {
            let _ = socket.set_send_buffer_size(MAX_DATAGRAM);
        }
        socket.bind(&from.into()).expect("bind a sender");
        Sender {
            socket: socket.into(),
            to,
        }
    }

    /// The port it sends from.
    #[track_caller]
    pub fn port(&self) -> u16 {
        self.local_addr().port()
    }

    /// The address it sends from.
    #[track_caller]
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr().expect("a bound socket")
    }

    /// Sends `bytes` as one datagram.
    #[track_caller]
    pub fn send(&self, bytes: &[u8]) {
        let n = loop {
            match self.socket.send_to(bytes, self.to) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => panic!("send {} bytes to {}: {e}", bytes.len(), self.to),
            }
        };
        assert_eq!(n, bytes.len(), "a datagram is sent whole");
    }
}

/// This computer's address towards the rest of the network, if it has one
/// (a connected UDP socket sends nothing): where a page served to the
/// network is opened from a phone.
pub fn lan_address() -> Option<std::net::IpAddr> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// A loopback TCP port that refuses every connection, for as long as the
/// socket returned is kept: bound and never listening, so no other program
/// can take the port meanwhile (a port bound, closed and handed on could be).
#[track_caller]
pub fn refusing_tcp_port() -> (Socket, SocketAddr) {
    let socket =
        Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("a TCP socket");
    let any: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    socket.bind(&any.into()).expect("bind a TCP port");
    let addr = socket
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .expect("a bound address");
    (socket, addr)
}

/// Validates a test configuration, failing the test with the problems.
#[track_caller]
pub fn config(toml: &str) -> Config {
    Config::from_toml(toml, "test.toml", &Overrides::default())
        .unwrap_or_else(|e| panic!("the test configuration is invalid:\n{e}\n---\n{toml}"))
}

/// `[listen]` on a fresh loopback port with input `format`, and no periodic summary.
pub fn listen_toml(format: &str) -> String {
    format!("[listen]\naddr = \"127.0.0.1:0\"\nformat = \"{format}\"\n\n[stats]\ninterval = 0\n")
}

/// The final summary of a run with `--stats-format json`, from its stdout.
#[track_caller]
pub fn final_json(stdout: &str) -> serde_json::Value {
    let line = stdout
        .lines()
        .find(|l| l.contains("\"event\":\"final\""))
        .unwrap_or_else(|| panic!("no final line:\n{stdout}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// `text`, which has the `[stats]` table [`listen_toml`] writes, with a
/// `[web]` table before it serving the page on `addr`.
pub fn with_page(text: &str, addr: &str) -> String {
    text.replace("[stats]", &format!("[web]\naddr = \"{addr}\"\n\n[stats]"))
}

/// A relay listening for `format` with one `same` destination called
/// "first" at `first`, and the page served on `page`.
pub fn page_toml(format: &str, first: SocketAddr, page: &str) -> String {
    let text = format!(
        "{}\n{}",
        listen_toml(format),
        destination_toml("first", first, "same", "")
    );
    with_page(&text, page)
}

/// One `[[destination]]` table; `options` are extra `key = value` lines.
pub fn destination_toml(name: &str, addr: SocketAddr, format: &str, options: &str) -> String {
    format!(
        "\n[[destination]]\nname = \"{name}\"\naddr = \"{addr}\"\nformat = \"{format}\"\n{options}\n"
    )
}

/// A relay running `run()` on its own thread.
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    handle: Control,
    thread: Option<JoinHandle<Snapshot>>,
}

impl Running {
    /// Binds a relay for `config` on a new thread and runs it.
    #[track_caller]
    pub fn start(config: Config) -> Running {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut relay = match Relay::bind(&config) {
                Ok(relay) => relay,
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                    panic!("the relay did not start");
                }
            };
            let _ = tx.send(Ok((relay.local_addr(), relay.control())));
            relay.run()
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok((addr, handle))) => Running {
                addr,
                handle,
                thread: Some(thread),
            },
            Ok(Err(e)) => panic!("the relay did not start: {e}"),
            Err(e) => panic!("the relay thread did not report its address: {e}"),
        }
    }

    /// Its control (for an observer a test starts beside it).
    pub fn control(&self) -> Control {
        self.handle.clone()
    }

    /// A sender to this relay.
    #[track_caller]
    pub fn sender(&self) -> Sender {
        Sender::new(self.addr)
    }

    /// Its counters now.
    #[track_caller]
    pub fn snapshot(&self) -> Snapshot {
        self.handle
            .snapshot(Duration::from_secs(10))
            .expect("the relay answers within 10 s")
    }

    /// Waits (at most 30 s) until `done` holds for its counters; returns them.
    #[track_caller]
    pub fn wait_until(&self, what: &str, done: impl Fn(&Snapshot) -> bool) -> Snapshot {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let now = self.snapshot();
            if done(&now) {
                return now;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: never so in 30 s:\n{now}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the relay and returns its final report. Call it only once every
    /// datagram sent has been handled (a later one was received somewhere): the
    /// loop may stop before draining what is still queued.
    #[track_caller]
    pub fn stop(mut self) -> Snapshot {
        self.handle.stop();
        let thread = self.thread.take().expect("stopped once");
        thread.join().expect("the relay thread did not panic")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // A failed test still ends its relay thread.
        if let Some(thread) = self.thread.take() {
            self.handle.stop();
            let _ = thread.join();
        }
    }
}

/// The report line of the destination called `name`.
#[track_caller]
pub fn destination<'a>(report: &'a Snapshot, name: &str) -> &'a DestinationSnapshot {
    report
        .destinations
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no destination {name:?} in the report:\n{report}"))
}

/// Calls `poll_once` until `done` holds, for at most ten seconds.
#[track_caller]
pub fn pump_until(relay: &mut Relay, mut done: impl FnMut(&Relay) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(relay) {
        assert!(
            Instant::now() < deadline,
            "the relay did not get there in 10 s:\n{}",
            relay.snapshot()
        );
        relay.poll_once(Some(Duration::from_millis(50)));
    }
}

/// A file or folder in the temp dir, removed when dropped.
pub struct TempPath(PathBuf);

static NEXT_TEMP: AtomicU32 = AtomicU32::new(0);

impl TempPath {
    fn unique(tag: &str) -> PathBuf {
        let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
        std::env::temp_dir().join(format!("forza-relay-test-{}-{n}-{tag}", std::process::id()))
    }

    /// A file holding `contents`.
    #[track_caller]
    pub fn file(tag: &str, contents: &str) -> TempPath {
        let path = Self::unique(tag);
        std::fs::write(&path, contents).expect("write a temp file");
        TempPath(path)
    }

    /// An empty folder.
    #[track_caller]
    pub fn dir(tag: &str) -> TempPath {
        let path = Self::unique(tag);
        std::fs::create_dir(&path).expect("create a temp dir");
        TempPath(path)
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Where it is, as text.
    pub fn display(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if self.0.is_dir() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// Linux: the system call the thread called `name` of process `pid` is asleep
/// in (the first field of `/proc/PID/task/TID/syscall`); `None` while it runs,
/// or when that can't be read.
#[cfg(target_os = "linux")]
pub fn syscall_of_thread(pid: u32, name: &str) -> Option<i64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let call = std::fs::read_to_string(task.path().join("syscall")).ok()?;
            return call.split(' ').next()?.parse().ok();
        }
    }
    None
}

/// Linux: the system calls a thread waits for the poll in.
#[cfg(target_os = "linux")]
pub fn epoll_waits() -> Vec<i64> {
    #[allow(unused_mut)]
    let mut calls = vec![libc::SYS_epoll_pwait];
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    calls.push(libc::SYS_epoll_wait);
    calls
}

/// Linux: waits (at most `limit`) until the thread called `name` of `pid` is
/// seen asleep in one of `calls`; false if it never was. Under an emulator
/// (`FORZA_RELAY_TEST_RUNNER`, see [`bin::command`]) `/proc` shows the host's
/// system calls, not the target's: true, with a note.
#[cfg(target_os = "linux")]
pub fn seen_in_syscall(pid: u32, name: &str, calls: &[i64], limit: Duration) -> bool {
    if std::env::var_os("FORZA_RELAY_TEST_RUNNER").is_some() {
        eprintln!("note: under an emulator: where {name} waits is not checked");
        return true;
    }
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if syscall_of_thread(pid, name).is_some_and(|call| calls.contains(&call)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}
