//! The log as the relay's loop uses it (issue 12): with the program's logger
//! installed, a loop that warns (destinations refusing, said once each since
//! issue 30, and datagrams that are no fh6 packet, every second) allocates
//! nothing in steady state, as `tests/no_alloc.rs` proves for the rest of the
//! loop. A counting allocator, armed only on the loop's thread, watches.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use forza_relay::config::{Config, Overrides};
use forza_relay::relay::Relay;
use forza_relay::wire::{Format, Packet};

mod counting;

use counting::{ALLOCATIONS, ARMED};

#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// Destinations where nothing listens: 127.0.0.2, which no test binds.
const DEAD: u16 = 20;

#[test]
fn issue12_the_loop_logging_its_warnings_allocates_nothing_in_steady_state() {
    forza_relay::logging::init().expect("install the logger");
    let live = UdpSocket::bind("127.0.0.1:0").expect("a receiver");
    let live_addr = live.local_addr().expect("bound");
    let mut toml = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nformat = \"fh6\"\n[stats]\ninterval = 1\n\
         [[destination]]\nname = \"live\"\naddr = \"{live_addr}\"\n"
    );
    for i in 0..DEAD {
        let dead = SocketAddr::from(([127, 0, 0, 2], 46_000 + i));
        toml += &format!("[[destination]]\nname = \"dead{i}\"\naddr = \"{dead}\"\n");
    }
    let config = Config::from_toml(&toml, "logging.toml", &Overrides::default()).expect("valid");
    let mut relay = Relay::bind(&config).expect("bind");
    let target = relay.local_addr();
    let sender = UdpSocket::bind("127.0.0.1:0").expect("a sender");
    let mut buf = [0u8; 324];
    let mut n = 0u32;
    let mut send = |n: &mut u32| {
        let mut p = Packet::new_checked(&mut buf[..], Format::Fh6).expect("324 bytes");
        p.set_is_race_on(1);
        p.set_timestamp_ms(*n);
        sender.send_to(&buf, target).expect("send");
        // A datagram that is no fh6 packet: warned about once an interval.
        sender.send_to(&buf[..100], target).expect("send");
        *n += 1;
    };
    // Warm-up: the first warnings (each destination's first refusal) make
    // this thread's line buffer.
    let warm_up = Instant::now() + Duration::from_millis(300);
    while Instant::now() < warm_up {
        send(&mut n);
        relay.poll_once(Some(Duration::from_millis(5)));
    }
    let queued = forza_relay::logging::queued_bytes();
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    // Longer than the warning interval (1 s): the loop warns again about the
    // datagrams that are no packets.
    let measured = Instant::now() + Duration::from_millis(1_500);
    while Instant::now() < measured {
        // The sender (on this thread too) is not armed: only the loop is.
        send(&mut n);
        ARMED.with(|a| a.set(true));
        relay.poll_once(Some(Duration::from_millis(5)));
        ARMED.with(|a| a.set(false));
        thread::sleep(Duration::from_millis(2));
    }
    let allocations = ALLOCATIONS.load(Ordering::SeqCst) - before;
    let logged = forza_relay::logging::queued_bytes() - queued;
    let report = relay.snapshot();
    assert!(
        logged > 0,
        "the loop logged nothing while measured:\n{report}"
    );
    assert_eq!(
        allocations, 0,
        "{allocations} allocations while the loop logged {logged} bytes"
    );
    assert!(
        report.destination("live").expect("live").stats.sent >= u64::from(n) / 2,
        "{report}"
    );
    assert!(forza_relay::logging::flush(), "the log was written");
}
