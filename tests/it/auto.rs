//! Issue 23 item 7 through the real binary: under `listen.format = "auto"`
//! a datagram whose own bytes tell its Horizon format is read as that format
//! from the first, and another sender's datagrams never move the answer for
//! the game's stream; that sender is said once in the log and shown in the
//! snapshot's `input.senders`.

use crate::common;

use std::net::SocketAddr;

use forza_relay::wire::{Format, Puddle, AGREEING_PACKETS};
use serde_json::{json, Value};

use crate::web::started;
use common::bin::Bin;
use common::http::get;
use common::*;

const WET: Puddle = Puddle::Flag(1);
const DRY: Puddle = Puddle::Flag(0);

/// `run` from a configuration file reading `auto`, the page on loopback,
/// forwarding to an fh5 destination `fh5`: the binary, where it listens and
/// where its page is.
fn auto_relay(dir: &TempPath, fh5: SocketAddr) -> (Bin, SocketAddr, SocketAddr) {
    let path = dir.path().join("forza-relay.toml");
    std::fs::write(
        &path,
        format!(
            "[listen]\naddr = \"127.0.0.1:0\"\nformat = \"auto\"\n\n\
             [web]\naddr = \"127.0.0.1:0\"\n\n[stats]\ninterval = 0\n{}",
            destination_toml("fh5", fh5, "fh5", "")
        ),
    )
    .expect("write the configuration");
    let path = path.to_str().expect("UTF-8").to_owned();
    let mut bin = Bin::spawn(&["run", "--config", &path], None);
    let (listen, web, _token) = started(&mut bin);
    (bin, listen, web)
}

/// 60 wet FH6 frames (WheelInPuddle flags 1, 1, 0, 0, CarClass R) reach
/// an fh5 destination translated from the first: FH5's depths 1, 1, 0, 0
/// and R as S2 (FH5 has no R). Before, the first 29 passed as they came
/// (class 6, X in FH5, and "depths" of 1.4e-45) until 30 agreed.
#[test]
fn issue23_sixty_wet_fh6_frames_under_auto_reach_fh5_translated_from_the_first() {
    let (fh5, fh5_addr) = receiver();
    let dir = TempPath::dir("auto-wet");
    let (relay, listen, _web) = auto_relay(&dir, fh5_addr);
    let game = Sender::new(listen);
    for ts in 1..=60 {
        let spec = Spec::new(Format::Fh6, ts)
            .class(FH6_R)
            .puddle([WET, WET, DRY, DRY]);
        game.send(&spec.build());
        let got = recv(&fh5);
        let p = view(&got, Format::Fh5);
        assert_sled_fields(
            &p,
            &spec,
            [
                Puddle::Depth(1.0),
                Puddle::Depth(1.0),
                Puddle::Depth(0.0),
                Puddle::Depth(0.0),
            ],
            FH5_S2,
        );
        assert_horizon_fields(&p, true);
        assert_dash_fields(&p, true);
    }
    assert_nothing_waiting(&fh5);
    let done = relay.stop();
    // fh6 was the guess and the frames confirmed it: no change to say.
    assert!(
        !done.stderr.contains("Horizon packets: reading fh5"),
        "{}",
        done.stderr
    );
    done.assert_stderr_has(&["Received 60 packets"]);
}

/// The game's stream confirmed fh6; then another socket's FH5-looking
/// datagrams (depths 0.25, class X) interleaved with the game's dry frames
/// of class R, which tell nothing by themselves. The game's frames stay read
/// as fh6 (R reaches FH5 as S2, not as X), the other's pass as FH5 as they
/// came; the log says the second sender once, and the snapshot lists both,
/// the game's followed.
#[test]
fn issue23_a_second_sender_is_shown_in_the_snapshot_and_never_flips_the_games_reading() {
    let (fh5, fh5_addr) = receiver();
    let dir = TempPath::dir("auto-senders");
    let (mut relay, listen, web) = auto_relay(&dir, fh5_addr);
    let (game, other) = (Sender::new(listen), Sender::new(listen));
    for ts in 1..=AGREEING_PACKETS {
        let p = Spec::new(Format::Fh6, ts).puddle([WET, DRY, DRY, DRY]);
        game.send(&p.build());
        assert_eq!(view(&recv(&fh5), Format::Fh5).timestamp_ms(), ts);
    }
    let fh5_looking = |ts| {
        Spec::new(Format::Fh5, ts)
            .class(FH5_X)
            .puddle([Puddle::Depth(0.25); 4])
            .build()
    };
    for i in 0..40 {
        let theirs = fh5_looking(1_000 + i);
        other.send(&theirs);
        assert_eq!(recv(&fh5), theirs, "fh5 to fh5: as it came");
        let ts = 100 + i;
        let dry = Spec::new(Format::Fh6, ts).class(FH6_R);
        game.send(&dry.build());
        let got = recv(&fh5);
        assert_sled_fields(
            &view(&got, Format::Fh5),
            &dry,
            [Puddle::Depth(0.0); 4],
            FH5_S2,
        );
    }
    let line = relay.wait_for_line("another sender: ");
    assert!(
        line.contains(&format!(
            "another sender: {} sends to {listen} too, beside {} (the stream followed)",
            other.local_addr(),
            game.local_addr()
        )) && line.contains("they never change how the stream followed is read"),
        "{line}"
    );
    let snapshot: Value = get(web, "/api/snapshot", &[]).json();
    let input = &snapshot["counters"]["input"];
    assert_eq!(
        input["senders"],
        json!([
            {
                "addr": game.local_addr().to_string(),
                "datagrams": AGREEING_PACKETS + 40,
                "following": true,
            },
            {
                "addr": other.local_addr().to_string(),
                "datagrams": 40,
                "following": false,
            },
        ]),
        "{snapshot}"
    );
    assert_eq!(input["format"], "fh6", "{snapshot}");
    assert_eq!(input["format_guessed"], false, "{snapshot}");
    assert_nothing_waiting(&fh5);
    let done = relay.stop();
    assert_eq!(
        done.stderr.matches("another sender: ").count(),
        1,
        "{}",
        done.stderr
    );
    assert!(
        !done.stderr.contains("Horizon packets: reading fh5"),
        "{}",
        done.stderr
    );
}
