use super::*;
use crate::config::Output;
use crate::report::DestinationSnapshot;
use crate::view::model::fixtures::{destination, snapshot};

/// The relay's snapshot `ms` after its start, `received` datagrams in, with
/// `destinations`.
fn at(ms: u64, received: u64, destinations: Vec<DestinationSnapshot>) -> Snapshot {
    let mut s = snapshot(ms, destinations);
    s.input.received = received;
    s
}

fn with_status(name: &str, status: Status) -> DestinationSnapshot {
    let mut d = destination(name, Output::Same, 10);
    d.status = status;
    d
}

#[test]
fn frames_arriving_are_green_and_say_the_rate_between_two_snapshots() {
    let mut follow = Follow::default();
    follow.look(&at(1_000, 60, vec![with_status("dash", Status::Ok)]));
    let look = follow.look(&at(1_500, 90, vec![with_status("dash", Status::Ok)]));
    assert_eq!(look.colour, Colour::Green);
    assert_eq!(look.tooltip, "forza-relay: receiving 60/s");
}

#[test]
fn the_first_snapshot_says_the_average_since_the_start() {
    let look = Follow::default().look(&at(2_000, 120, Vec::new()));
    assert_eq!(look.colour, Colour::Green);
    assert_eq!(look.tooltip, "forza-relay: receiving 60/s");
}

#[test]
fn nothing_yet_is_grey_and_names_the_port_listened_on() {
    let look = Follow::default().look(&at(3_000, 0, vec![with_status("dash", Status::Idle)]));
    assert_eq!(look.colour, Colour::Grey);
    assert_eq!(
        look.tooltip,
        "forza-relay: nothing received yet on port 5400"
    );
}

#[test]
fn frames_that_stopped_say_for_how_long() {
    let mut follow = Follow::default();
    follow.look(&at(1_000, 60, Vec::new()));
    follow.look(&at(2_000, 120, Vec::new()));
    let look = follow.look(&at(3_000, 120, Vec::new()));
    assert_eq!(look.colour, Colour::Grey);
    assert_eq!(look.tooltip, "forza-relay: nothing received for 1 s");
    let look = follow.look(&at(14_400, 120, Vec::new()));
    assert_eq!(look.tooltip, "forza-relay: nothing received for 12 s");
    // A game back: green again at once.
    let look = follow.look(&at(15_400, 180, Vec::new()));
    assert_eq!(look.colour, Colour::Green);
    assert_eq!(look.tooltip, "forza-relay: receiving 60/s");
}

#[test]
fn a_refused_or_failing_destination_is_amber_and_named() {
    let mut follow = Follow::default();
    follow.look(&at(1_000, 60, Vec::new()));
    let look = follow.look(&at(
        2_000,
        120,
        vec![
            with_status("simhub", Status::Ok),
            with_status("dash", Status::Refused),
            with_status("idle-rig", Status::Idle),
            with_status("logger", Status::Failing),
        ],
    ));
    assert_eq!(look.colour, Colour::Amber);
    assert_eq!(
        look.tooltip,
        "forza-relay: receiving 60/s\ndash refused, logger failing"
    );
}

#[test]
fn many_failing_destinations_are_cut_on_a_whole_name_within_what_windows_keeps() {
    let names: Vec<DestinationSnapshot> = (0..20)
        .map(|i| with_status(&format!("motion-rig-number-{i}"), Status::Refused))
        .collect();
    let look = Follow::default().look(&at(1_000, 60, names));
    assert_eq!(look.colour, Colour::Amber);
    assert!(
        look.tooltip.chars().count() <= TOOLTIP_MAX,
        "{} characters: {}",
        look.tooltip.chars().count(),
        look.tooltip
    );
    let (first, second) = look.tooltip.split_once('\n').expect("two lines");
    assert_eq!(first, "forza-relay: receiving 60/s");
    assert!(
        second.starts_with("motion-rig-number-0 refused, motion-rig-number-1 refused"),
        "{second}"
    );
    // Whole names, then how many are left.
    let (shown, more) = second.rsplit_once(", and ").expect("says how many more");
    let shown_count = shown.split(", ").count();
    assert!(
        shown.split(", ").all(|n| n.ends_with(" refused")),
        "{shown}"
    );
    assert_eq!(more, format!("{} more", 20 - shown_count));
}

#[test]
fn one_name_longer_than_the_room_says_how_many_fail() {
    let long = "x".repeat(200);
    let look = Follow::default().look(&at(1_000, 60, vec![with_status(&long, Status::Failing)]));
    assert_eq!(
        look.tooltip,
        "forza-relay: receiving 60/s\n1 destination failing"
    );
}

#[test]
fn the_menu_offers_what_can_be_done_and_greys_the_rest() {
    let all = menu(Offer {
        page: true,
        at_login: Some(true),
        config_file: true,
    });
    let labels: Vec<_> = all.iter().map(|e| e.label).collect();
    assert_eq!(
        labels,
        [
            "Open the page",
            "Start at login",
            "Open the configuration folder",
            "Quit"
        ]
    );
    let actions: Vec<_> = all.iter().map(|e| e.action).collect();
    assert_eq!(
        actions,
        [
            Action::OpenPage,
            Action::StartAtLogin,
            Action::OpenFolder,
            Action::Quit
        ]
    );
    assert!(all.iter().all(|e| e.enabled), "{all:?}");
    assert_eq!(all[1].checked, Some(true));
    assert_eq!(all[0].checked, None);

    // No page, no file: only Quit can be chosen; the login entry shows off.
    let bare = menu(Offer {
        page: false,
        at_login: None,
        config_file: false,
    });
    let enabled: Vec<_> = bare
        .iter()
        .filter(|e| e.enabled)
        .map(|e| e.action)
        .collect();
    assert_eq!(enabled, [Action::Quit]);
    assert_eq!(bare[1].checked, Some(false));

    // A file, and a login entry that is off.
    let off = menu(Offer {
        page: true,
        at_login: Some(false),
        config_file: true,
    });
    assert!(off[1].enabled);
    assert_eq!(off[1].checked, Some(false));
}
