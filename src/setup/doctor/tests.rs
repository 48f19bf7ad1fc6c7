use super::*;

fn at(text: &str) -> SocketAddr {
    text.parse().expect("a socket address")
}

#[test]
fn the_games_own_range_is_a_problem_and_its_edges_count() {
    for port in [5200, 5250, 5300] {
        assert_eq!(
            listen_range(at(&format!("0.0.0.0:{port}"))).status,
            Status::Problem
        );
    }
    for port in [5199, 5301, 5400] {
        assert_eq!(
            listen_range(at(&format!("0.0.0.0:{port}"))).status,
            Status::Ok
        );
    }
}

#[test]
fn a_running_relay_on_the_listen_port_is_not_a_problem() {
    let e = io::Error::from(io::ErrorKind::AddrInUse);
    let relay = Holder {
        pid: 9,
        process: "forza-relay.exe".to_owned(),
        addr: at("0.0.0.0:5400"),
        tool: None,
    };
    assert_eq!(held(at("0.0.0.0:5400"), &e, Some(relay)).status, Status::Ok);
    let other = Holder {
        pid: 9,
        process: "nc".to_owned(),
        addr: at("0.0.0.0:5400"),
        tool: None,
    };
    let f = held(at("0.0.0.0:5400"), &e, Some(other));
    assert_eq!(f.status, Status::Problem);
    assert_eq!(f.message, "port 5400 is in use by nc (pid 9)");
}

#[test]
fn the_report_is_ok_only_without_problems() {
    let report = Report::new(vec![
        Finding::ok("a", "fine"),
        Finding::unknown("b", "not checked"),
    ]);
    assert!(report.ok);
    assert!(report.to_string().ends_with("all is well"));
    let report = Report::new(vec![Finding::problem("a", "broken", "mend it")]);
    assert!(!report.ok);
    assert_eq!(
        report.to_json(),
        r#"{"ok":false,"checks":[{"check":"a","status":"problem","message":"broken","fix":"mend it"}]}"#
    );
}

#[test]
fn an_arrival_check_not_made_is_never_all_is_well() {
    let report = Report::new(vec![
        Finding::ok("listen_port", "held by forza-relay, which did not answer"),
        Finding::unknown("arrivals", "not checked"),
    ]);
    assert!(!report.ok);
    assert!(
        report
            .to_string()
            .ends_with("no problem found, but whether datagrams arrive could not be checked"),
        "{report}"
    );
}

/// Issue 23: what the running relay received while watched, from its
/// two answers.
#[test]
fn the_relays_arrivals_say_nothing_received_or_the_rate_sender_and_format() {
    let listen = at("127.0.0.1:5400");
    let first = Answer::example(listen);
    let mut last = first.clone();
    last.elapsed_s += 3.0;
    let nothing = relay_arrivals(&Observation {
        first: first.clone(),
        last: last.clone(),
    });
    assert_eq!(nothing.status, Status::Problem);
    assert_eq!(
        nothing.message,
        "forza-relay (pid 30) received nothing on 127.0.0.1:5400 in 3.0 s (0 datagrams in \
             the 63 s since it started)"
    );
    assert!(nothing
        .fix
        .as_deref()
        .unwrap_or("")
        .contains("Data Out IP Port to 5400"));

    let game = at("127.0.0.1:5201");
    last.elapsed_s = first.elapsed_s + 1.5;
    last.input.received = 90;
    last.input.format = Some("fh6".to_owned());
    last.input.senders.push(crate::report::query::Sender {
        addr: game,
        datagrams: 90,
        following: true,
    });
    let seen = relay_arrivals(&Observation {
        first: first.clone(),
        last: last.clone(),
    });
    assert_eq!(seen.status, Status::Ok);
    assert_eq!(
        seen.message,
        "forza-relay (pid 30) receives 60 datagrams/s on 127.0.0.1:5400 from \
             127.0.0.1:5201, format fh6"
    );

    last.input.malformed = 90;
    last.input.expects = "fh6".to_owned();
    let wrong = relay_arrivals(&Observation { first, last });
    assert_eq!(wrong.status, Status::Problem);
    assert!(
        wrong
            .message
            .ends_with("; 90 of them are not packets in the fh6 format (324 bytes)"),
        "{}",
        wrong.message
    );
}
