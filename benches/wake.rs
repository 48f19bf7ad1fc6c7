//! How soon a command takes effect on a relay asleep inside its receive
//! (issue 16): the round trip of [`Control::snapshot`] to an idle relay, whose
//! loop the wake-up datagram has to wake (on Linux; elsewhere the poll's
//! waker does). The issue asks for well under 10 ms; tests/it/relay.rs proves the
//! behaviour, this measures it.
//!
//! ```sh
//! cargo bench --bench wake -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Each iteration first lets the loop fall asleep again (a pause outside the
//! timing), then times one snapshot from asking to answer.

use std::net::UdpSocket;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use forza_relay::config::{Config, Overrides};
use forza_relay::relay::Relay;

/// Long enough for the loop to be back in its receive after an answer.
const FALL_ASLEEP: Duration = Duration::from_micros(500);

fn command_round_trip(c: &mut Criterion) {
    let receiver = UdpSocket::bind("127.0.0.1:0").expect("bind a receiver");
    let toml = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nformat = \"fh6\"\n[stats]\ninterval = 0\n\
         [[destination]]\naddr = \"{}\"\n",
        receiver.local_addr().expect("a bound socket")
    );
    let config = Config::from_toml(&toml, "wake.toml", &Overrides::default()).expect("valid");
    let mut relay = Relay::bind(&config).expect("the relay binds");
    let control = relay.control();
    let running = thread::spawn(move || relay.run());
    c.bench_function("snapshot of a relay asleep in its receive", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                thread::sleep(FALL_ASLEEP);
                let asked = Instant::now();
                let snapshot = control.snapshot(Duration::from_secs(5));
                total += asked.elapsed();
                assert!(snapshot.is_some(), "the relay did not answer");
            }
            total
        })
    });
    control.stop();
    running.join().expect("the relay thread ends");
}

criterion_group!(benches, command_round_trip);
criterion_main!(benches);
