use super::*;

fn request(path: &str, peer: &str) -> Request {
    let mut r = Request::builder()
        .uri(path)
        .body(axum::body::Body::empty())
        .unwrap();
    r.extensions_mut().insert(Peer(peer.parse().unwrap()));
    r
}

#[test]
fn served_to_the_network_only_this_computer_reads_the_overlay_and_stream_without_the_token() {
    for path in ["/overlay", "/overlay.js", "/api/stream"] {
        assert!(
            !needs_token(true, &request(path, "127.0.0.1:40000")),
            "{path}"
        );
        assert!(
            !needs_token(true, &request(path, "[::ffff:127.0.0.1]:40000")),
            "{path}"
        );
        assert!(!needs_token(true, &request(path, "[::1]:40000")), "{path}");
        assert!(
            needs_token(true, &request(path, "192.168.1.7:40000")),
            "{path}"
        );
    }
    for path in [
        "/",
        "/api/snapshot",
        "/api/events",
        "/api/destinations",
        "/qr.svg",
    ] {
        assert!(
            needs_token(true, &request(path, "127.0.0.1:40000")),
            "{path}"
        );
    }
    assert!(!needs_token(false, &request("/", "127.0.0.1:40000")));
}

#[test]
fn a_query_value_is_decoded() {
    assert_eq!(
        decoded("Speed%2Cgear_label+x%zz%4"),
        "Speed,gear_label x%zz%4"
    );
    let (hz, selection) = stream_query("/api/stream?fields=Speed%2CTireTemp&hz=60").unwrap();
    assert_eq!(hz, 60);
    let names: Vec<String> = selection.columns().iter().map(|c| c.name()).collect();
    assert_eq!(
        names,
        [
            "Speed",
            "TireTempFL",
            "TireTempFR",
            "TireTempRL",
            "TireTempRR"
        ]
    );
    assert_eq!(stream_query("/api/stream").unwrap().0, DEFAULT_HZ);
    // Issue 30: a column named twice is refused, naming it.
    let e = stream_query("/api/stream?fields=Speed%2CTireTemp%2Cspeed").unwrap_err();
    assert!(
        e.starts_with("fields: \"speed\" chooses a column named before"),
        "{e}"
    );
}
