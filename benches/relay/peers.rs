//! What sits between the sender and the receivers: nothing (direct),
//! forza-relay, the relay of an older commit, socat, samplicator, or a naive
//! Python relay;
//! how each is started and what arrives at each destination.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use forza_relay::wire::Format;

use crate::traffic::{Arrive, INPUT};

/// The four destinations of a multi-destination forza-relay run: the `format=`
/// given to it and the format that arrives.
pub const MIX: [(&str, Format); 4] = [
    ("same", Format::Fh6),
    ("fh5", Format::Fh5),
    ("fm7", Format::Fm7),
    ("sled", Format::Sled),
];

/// The environment variable naming the baseline relay binary.
pub const BASELINE_ENV: &str = "FORZA_RELAY_BASELINE";
/// The environment variable naming a `samplicate` binary, built from
/// samplicator's public source (GPL: built beside the bench, never committed).
pub const SAMPLICATOR_ENV: &str = "FORZA_RELAY_SAMPLICATOR";

/// A naive relay: receive, then `sendto` each destination, nothing else (no
/// translation: every destination gets the bytes as they came).
const PYTHON_RELAY: &str = r#"
import socket, sys
def main():
    listen = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listen.bind(("127.0.0.1", int(sys.argv[1])))
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dests = [("127.0.0.1", int(port)) for port in sys.argv[2:]]
    while True:
        data, _ = listen.recvfrom(2048)
        for d in dests:
            out.sendto(data, d)
try:
    main()
except KeyboardInterrupt:
    pass
"#;

/// One way for the packets to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// Straight to one receiver, no relay.
    Direct,
    /// This tree's forza-relay, destinations [`MIX`] (1 destination: `same`).
    Forza,
    /// This tree's forza-relay, every destination `same`: no translation.
    ForzaAllSame,
    /// As `Forza`, with the outbox off ([`forza_relay::relay::SEND_EACH_VAR`]):
    /// a `sendto` on each destination's connected socket, not one
    /// `sendmmsg` for all (issue 33's like for like).
    ForzaSendEach,
    /// As `ForzaAllSame`, the first destination with `max-age` (the
    /// freshness section's [`crate::freshness::MAX_AGE`]).
    ForzaAged,
    /// This tree's forza-relay to two destinations: `same`, and `json` (every
    /// column: issue 25's JSON output beside the bytes as they came).
    ForzaJson,
    /// An older forza-relay binary (no JSON stats: counted at the receivers).
    Baseline(PathBuf),
    /// `socat -u UDP4-RECV:IN UDP4-SENDTO:127.0.0.1:OUT`: one destination only.
    Socat,
    /// [`PYTHON_RELAY`] run by `python3`.
    Python,
    /// samplicator's `samplicate`, the C relay: a blocking `recvfrom`, then a
    /// `sendto` each destination.
    Samplicator(PathBuf),
    /// The same shape in a few lines of our own C (`peers/c_relay.c`, built by
    /// [`build_c_relay`]): a peer any machine with a C compiler has.
    CRelay(PathBuf),
    /// forza-relay's system calls and nothing else
    /// (`peers/experiments/floor.c`, built by [`build_floor`]): `recvmmsg` on
    /// a blocking socket with receive times, a `send` per destination on a
    /// connected socket.
    Floor(PathBuf),
}

impl Peer {
    /// Its name in the tables.
    pub fn label(&self) -> &'static str {
        match self {
            Peer::Direct => "direct (no relay)",
            Peer::Forza => "forza-relay",
            Peer::ForzaAllSame => "forza-relay, all same",
            Peer::ForzaSendEach => "forza-relay, a send each",
            Peer::ForzaAged => "forza-relay",
            Peer::ForzaJson => "forza-relay, same + json",
            Peer::Baseline(_) => "forza-relay c4441a5",
            Peer::Socat => "socat",
            Peer::Python => "python relay",
            Peer::Samplicator(_) => "samplicator",
            Peer::CRelay(_) => "C relay (peers/c_relay.c)",
            Peer::Floor(_) => "floor (experiments/floor.c)",
        }
    }

    /// Whether it can feed `dests` destinations (direct feeds one receiver).
    pub fn serves(&self, dests: usize) -> bool {
        match self {
            Peer::Direct | Peer::Socat => dests == 1,
            Peer::ForzaJson => dests == 2,
            _ => true,
        }
    }

    /// What arrives at each of `dests` destinations.
    pub fn arriving(&self, dests: usize) -> Vec<Arrive> {
        match self {
            Peer::Forza | Peer::ForzaSendEach | Peer::Baseline(_) => {
                MIX[..dests].iter().map(|m| Arrive::Packet(m.1)).collect()
            }
            Peer::ForzaJson => vec![Arrive::Packet(INPUT), Arrive::Json],
            _ => vec![Arrive::Packet(INPUT); dests],
        }
    }

    /// Whether it prints its final counters as JSON (`--stats-format json`).
    pub fn has_json(&self) -> bool {
        matches!(
            self,
            Peer::Forza
                | Peer::ForzaAllSame
                | Peer::ForzaSendEach
                | Peer::ForzaAged
                | Peer::ForzaJson
        )
    }

    /// The command that starts it listening on `listen` and sending to `to`;
    /// `None` for direct.
    pub fn command(&self, listen: SocketAddr, to: &[SocketAddr]) -> Option<Command> {
        let forza = |binary: &std::ffi::OsStr, all_same: bool, aged: bool, json: bool| {
            let mut cmd = Command::new(binary);
            cmd.args(["run", "--listen", &listen.to_string()]).args([
                "--input",
                INPUT.id(),
                "--stats-interval",
                "0",
            ]);
            for (i, addr) in to.iter().enumerate() {
                let output = if json && i == 1 {
                    "json"
                } else if all_same {
                    "same"
                } else {
                    MIX[i % MIX.len()].0
                };
                let age = if aged && i == 0 {
                    format!(",max-age={}ms", crate::freshness::MAX_AGE.as_millis())
                } else {
                    String::new()
                };
                cmd.arg("--to")
                    .arg(format!("{addr},format={output},name=d{i}{age}"));
            }
            cmd
        };
        match self {
            Peer::Direct => None,
            Peer::Forza
            | Peer::ForzaAllSame
            | Peer::ForzaSendEach
            | Peer::ForzaAged
            | Peer::ForzaJson => {
                let mut cmd = forza(
                    env!("CARGO_BIN_EXE_forza-relay").as_ref(),
                    !matches!(self, Peer::Forza | Peer::ForzaSendEach),
                    *self == Peer::ForzaAged,
                    *self == Peer::ForzaJson,
                );
                cmd.args(["--stats-format", "json"]);
                if *self == Peer::ForzaSendEach {
                    cmd.env(forza_relay::relay::SEND_EACH_VAR, "1");
                }
                Some(cmd)
            }
            Peer::Baseline(path) => Some(forza(path.as_os_str(), false, false, false)),
            Peer::Socat => {
                let mut cmd = Command::new("socat");
                cmd.arg("-u")
                    .arg(format!("UDP4-RECV:{}", listen.port()))
                    .arg(format!("UDP4-SENDTO:{}", to[0]));
                Some(cmd)
            }
            Peer::Python => {
                let mut cmd = Command::new("python3");
                cmd.args(["-c", PYTHON_RELAY, &listen.port().to_string()]);
                cmd.args(to.iter().map(|a| a.port().to_string()));
                Some(cmd)
            }
            Peer::Samplicator(path) => {
                let mut cmd = Command::new(path);
                cmd.args([
                    "-s",
                    &listen.ip().to_string(),
                    "-p",
                    &listen.port().to_string(),
                ])
                // The receive buffer forza-relay asks for.
                .args(["-b", "4194304"])
                .args(to.iter().map(|a| format!("{}/{}", a.ip(), a.port())));
                Some(cmd)
            }
            Peer::CRelay(path) => {
                let mut cmd = Command::new(path);
                // The receive buffer forza-relay asks for.
                cmd.args([listen.port().to_string(), "4194304".to_owned()])
                    .args(to.iter().map(|a| a.port().to_string()));
                Some(cmd)
            }
            Peer::Floor(path) => {
                let mut cmd = Command::new(path);
                // forza-relay's receive buffer; mode 0: the calls alone.
                cmd.args([
                    listen.port().to_string(),
                    "4194304".to_owned(),
                    "0".to_owned(),
                ])
                .args(to.iter().map(|a| a.port().to_string()));
                Some(cmd)
            }
        }
    }
}

/// Compiles `peers/c_relay.c` with the system's C compiler (`cc`, `-O2`) into
/// the bench's scratch folder; `None` (and why, printed) without a compiler.
pub fn build_c_relay() -> Option<PathBuf> {
    build_c("peers/c_relay.c", "c-relay", "C relay")
}

/// Compiles `peers/experiments/floor.c` as [`build_c_relay`] does.
pub fn build_floor() -> Option<PathBuf> {
    build_c("peers/experiments/floor.c", "floor", "floor")
}

/// Compiles `source` (under benches/relay) into `name` in the scratch folder.
fn build_c(source: &str, name: &str, what: &str) -> Option<PathBuf> {
    let source = format!("{}/benches/relay/{source}", env!("CARGO_MANIFEST_DIR"));
    let binary = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let built = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&binary)
        .arg(&source)
        .status();
    match built {
        Ok(s) if s.success() => Some(binary),
        Ok(s) => {
            println!("{what}: `cc` failed ({s}) on {source}: its rows are skipped");
            None
        }
        Err(e) => {
            println!("{what}: no C compiler (`cc`: {e}): its rows are skipped");
            None
        }
    }
}

/// Whether `program --version` (or `-V`) runs: the tool is installed.
pub fn installed(program: &str, version_flag: &str) -> bool {
    Command::new(program)
        .arg(version_flag)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
