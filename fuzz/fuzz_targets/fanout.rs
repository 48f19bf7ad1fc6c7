//! The whole fan-out core under arbitrary input: the first bytes are routes
//! (input format, allow-list, up to eight destinations of every output kind with
//! `only_race_on`, `max_rate` and `max_age`) and how the shell answers, the rest
//! a script of datagrams received before they are handled, at advancing times,
//! timer ticks (`due`), outcomes of queued frames, and reloads (`plan` then
//! `commit` with other routes), checked after every step against an oracle
//! written from the formats reference; the counters must be the oracle's and
//! add up. The script and its checks live in
//! tests/fanout_check (shared with the stable property test
//! tests/it/fanout_props.rs, which runs them in CI).

#![no_main]

use libfuzzer_sys::fuzz_target;

// `Covered` is for the property test's figures; the fuzzer doesn't read it.
#[allow(dead_code)]
#[path = "../../tests/fanout_check/mod.rs"]
mod fanout_check;

fuzz_target!(|data: &[u8]| {
    fanout_check::run(data);
});
