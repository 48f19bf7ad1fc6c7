//! Issue 32 item 4, one instance: a second start on the listen port of a
//! running relay finds it (the status query it answers) and, instead of
//! failing on the port, says so in one line naming it and its page, opens
//! the page when it was double-clicked, and exits 0. The first relay relays on.

use crate::common;

use common::bin::Bin;
use common::*;

use std::net::{SocketAddr, UdpSocket};

use crate::web::{forwards, started_with_page};

/// The first relay: listening on a port the OS gives, its page on loopback,
/// relaying to a receiver. Returns it, its listen and page addresses, and
/// the receiver.
fn first_relay() -> (Bin, SocketAddr, SocketAddr, UdpSocket) {
    let (receiver, to) = receiver();
    let (bin, listen, web) = started_with_page(&[&to.to_string()], None);
    (bin, listen, web, receiver)
}

#[test]
fn issue32_a_second_start_on_the_port_names_the_running_relay_and_its_page_and_exits_0() {
    let (first, listen, web, relayed) = first_relay();
    let (_other, to) = receiver();
    let second = Bin::run(
        &[
            "run",
            "--listen",
            &listen.to_string(),
            "--to",
            &to.to_string(),
        ],
        None,
    );
    assert_eq!(second.code(), 0, "{}", second.stderr);
    let said: Vec<&str> = second
        .stderr
        .lines()
        .filter(|l| l.contains("already running"))
        .collect();
    assert_eq!(said.len(), 1, "one line: {}", second.stderr);
    assert!(
        said[0].contains(&format!("(pid {})", first.id()))
            && said[0].contains(&format!("listening on {listen}"))
            && said[0].contains(&format!("its page is http://{web}/")),
        "{}",
        said[0]
    );
    assert!(
        !second.stderr.contains("cannot listen"),
        "{}",
        second.stderr
    );
    // The first one relays on, and was not asked to change.
    forwards(&Sender::new(listen), &relayed, 3);
    assert!(!first.has_said("configuration applied"));
    first.stop();
}

#[cfg(unix)]
#[test]
fn issue32_a_second_double_click_opens_the_running_relay_s_page_and_exits_0() {
    use std::os::unix::fs::PermissionsExt as _;

    use forza_relay::wire::Format;

    let (first, listen, web, relayed) = first_relay();
    let folder = TempPath::dir("one-instance");
    let (_other, to) = receiver();
    std::fs::write(
        folder.path().join("forza-relay.toml"),
        format!("[listen]\naddr = \"{listen}\"\n\n[[destination]]\naddr = \"{to}\"\n"),
    )
    .unwrap();
    let opened = folder.path().join("opened.txt");
    let script = folder.path().join("opener.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nprintf '%s' \"$1\" > '{}'\n", opened.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // No arguments at all, in the folder of its configuration: a double-click.
    let mut command = common::bin::command();
    command
        .current_dir(folder.path())
        .env("FORZA_RELAY_OPENER", &script);
    let second = Bin::spawn_command(command).wait();
    assert_eq!(second.code(), 0, "{}", second.stderr);
    assert!(
        second.stderr.contains("already running"),
        "{}",
        second.stderr
    );
    // The opener ran before the program ended, with the running one's page.
    assert_eq!(
        std::fs::read_to_string(&opened).unwrap_or_default(),
        format!("http://{web}/")
    );
    let p = Spec::new(Format::Fh5, 7).build();
    Sender::new(listen).send(&p);
    assert_eq!(recv(&relayed), p);
    first.stop();
}
