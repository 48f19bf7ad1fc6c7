//! A broker that is not one: a loopback TCP listener speaking just enough
//! MQTT 3.1.1 (CONNECT, CONNACK, PUBLISH, PUBACK, PINGREQ, DISCONNECT) to see
//! what a publisher sends and to misbehave on purpose: answer "session
//! present", close each connection at once, or stop reading. It records each
//! connection's login (the CONNECT's username and password, as a test of
//! where a password goes needs) and every message published on it.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long a test waits for the broker to see something: only a hang
/// reaches it.
pub const BROKER_WAIT: Duration = Duration::from_secs(20);

/// What the broker does with connection number `n` (0 the first).
#[derive(Debug, Clone)]
pub struct Conduct {
    /// The CONNACK's session-present flag.
    pub session_present: bool,
    /// What it does after the CONNACK.
    pub then: Then,
}

/// What the broker does once it has answered a CONNECT.
#[derive(Debug, Clone)]
pub enum Then {
    /// Reads and answers everything until the client goes.
    Serve,
    /// Closes the connection at once.
    Close,
    /// Reads nothing until `release` is set, then closes the connection
    /// (unread data makes that a reset).
    Stall { release: Arc<AtomicBool> },
}

impl Conduct {
    /// A broker that serves every connection as a broker does.
    pub fn serve() -> Conduct {
        Conduct {
            session_present: false,
            then: Then::Serve,
        }
    }
}

/// One connection as the broker saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The CONNECT's client id.
    pub client_id: String,
    /// The CONNECT's username, if it had one.
    pub username: Option<String>,
    /// The CONNECT's password, if it had one.
    pub password: Option<Vec<u8>>,
    /// Every PUBLISH read: topic and payload.
    pub published: Vec<(String, Vec<u8>)>,
    /// The client said DISCONNECT.
    pub disconnected: bool,
}

#[derive(Default)]
struct Record {
    seen: Vec<Seen>,
    /// Connections accepted (a CONNECT may not have come yet).
    accepted: usize,
}

/// The fake broker; its thread ends with the test program.
pub struct FakeBroker {
    pub port: u16,
    record: Arc<(Mutex<Record>, Condvar)>,
}

impl FakeBroker {
    /// Listens on 127.0.0.1, a port of its own, and treats connection `n` as
    /// `conduct(n)` says.
    pub fn start(conduct: impl Fn(usize) -> Conduct + Send + 'static) -> FakeBroker {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake broker");
        let port = listener.local_addr().unwrap().port();
        let record: Arc<(Mutex<Record>, Condvar)> = Arc::default();
        let shared = record.clone();
        thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(stream) = stream else { break };
                let index = {
                    let (lock, ready) = &*shared;
                    let mut r = lock.lock().unwrap();
                    r.accepted += 1;
                    r.seen.push(Seen::default());
                    ready.notify_all();
                    r.seen.len() - 1
                };
                let conduct = conduct(n);
                let shared = shared.clone();
                thread::spawn(move || {
                    let _ = serve(stream, &conduct, |change: &dyn Fn(&mut Seen)| {
                        let (lock, ready) = &*shared;
                        change(&mut lock.lock().unwrap().seen[index]);
                        ready.notify_all();
                    });
                });
            }
        });
        FakeBroker { port, record }
    }

    /// Its address as a destination writes it.
    pub fn addr(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// Every connection so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.record.0.lock().unwrap().seen.clone()
    }

    /// Waits until `done` holds of the connections seen; fails the test after
    /// [`BROKER_WAIT`].
    #[track_caller]
    pub fn wait_until(&self, what: &str, done: impl Fn(&[Seen]) -> bool) -> Vec<Seen> {
        let deadline = Instant::now() + BROKER_WAIT;
        let (lock, ready) = &*self.record;
        let mut r = lock.lock().unwrap();
        while !done(&r.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "the fake broker never saw {what}");
            r = ready.wait_timeout(r, left).unwrap().0;
        }
        r.seen.clone()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.record.0.lock().unwrap().accepted
    }
}

/// Reads one packet: its first byte and its body.
fn packet(stream: &mut TcpStream) -> io::Result<(u8, Vec<u8>)> {
    let mut first = [0u8; 1];
    stream.read_exact(&mut first)?;
    let mut len = 0usize;
    for shift in [0, 7, 14, 21] {
        let mut b = [0u8; 1];
        stream.read_exact(&mut b)?;
        len |= usize::from(b[0] & 0x7F) << shift;
        if b[0] & 0x80 == 0 {
            break;
        }
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok((first[0], body))
}

/// A length-prefixed field of `body` at `*at`.
fn field<'a>(body: &'a [u8], at: &mut usize) -> io::Result<&'a [u8]> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "a field runs past the packet");
    let len = body
        .get(*at..*at + 2)
        .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        .ok_or_else(bad)?;
    let value = body.get(*at + 2..*at + 2 + len).ok_or_else(bad)?;
    *at += 2 + len;
    Ok(value)
}

/// What a CONNECT says: client id, username, password.
fn connect(body: &[u8]) -> io::Result<Seen> {
    let mut at = 0;
    field(body, &mut at)?; // "MQTT"
    let flags = body[at + 1];
    at += 4; // level, flags, keep-alive
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut seen = Seen {
        client_id: text(field(body, &mut at)?),
        ..Seen::default()
    };
    if flags & 0x04 != 0 {
        field(body, &mut at)?; // the will's topic
        field(body, &mut at)?; // and message
    }
    if flags & 0x80 != 0 {
        seen.username = Some(text(field(body, &mut at)?));
    }
    if flags & 0x40 != 0 {
        seen.password = Some(field(body, &mut at)?.to_vec());
    }
    Ok(seen)
}

/// One connection, as `conduct` says; `record` changes what it saw.
fn serve(
    mut stream: TcpStream,
    conduct: &Conduct,
    record: impl Fn(&dyn Fn(&mut Seen)),
) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let (kind, body) = packet(&mut stream)?;
    if kind >> 4 != 1 {
        return Ok(());
    }
    let login = connect(&body)?;
    record(&|seen: &mut Seen| {
        seen.client_id.clone_from(&login.client_id);
        seen.username.clone_from(&login.username);
        seen.password.clone_from(&login.password);
    });
    stream.write_all(&[0x20, 0x02, u8::from(conduct.session_present), 0x00])?;
    match &conduct.then {
        Then::Close => return Ok(()),
        Then::Stall { release } => {
            while !release.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(5));
            }
            return Ok(());
        }
        Then::Serve => {}
    }
    loop {
        let (kind, body) = packet(&mut stream)?;
        match kind >> 4 {
            3 => {
                let qos = (kind >> 1) & 3;
                let mut at = 0;
                let topic = String::from_utf8_lossy(field(&body, &mut at)?).into_owned();
                if qos > 0 {
                    stream.write_all(&[0x40, 0x02, body[at], body[at + 1]])?;
                    at += 2;
                }
                let payload = body[at..].to_vec();
                record(&|seen: &mut Seen| seen.published.push((topic.clone(), payload.clone())));
            }
            12 => stream.write_all(&[0xD0, 0x00])?,
            14 => {
                record(&|seen: &mut Seen| seen.disconnected = true);
                return Ok(());
            }
            _ => {}
        }
    }
}
