//! Validation's unit tests: each mistake a file or `--to` can hold, refused
//! with the value named.

use super::*;
use crate::config::system_look_up;
use crate::config::testing::{parse, problems};
use crate::output::mqtt::Roots;

#[test]
fn every_mistake_is_reported_with_its_line_and_value() {
    let p = problems(
        r#"[listen]
addr = "0.0.0.0:5400"
format = "fh7"
allow = ["10.0.0.0/33"]

[[destination]]
name = "a"
addr = "127.0.0.1:8000"
format = "fm8"

[[destination]]
name = "a"
addr = "127.0.0.1:8000"

[[destination]]
name = "b"
addr = "127.0.0.1:5400"

[[destination]]
name = "c"
addr = "localhost"
"#,
    );
    let all = p.join("\n");
    for expect in [
        // Issue 30: a format typo gets a "did you mean", as a field's does.
        "test.toml:3: listen.format: unknown input format \"fh7\" (did you mean \"fm7\", \
             \"fh4\", \"fh5\" or \"fh6\"?) (valid: auto, sled",
        "test.toml:4: listen.allow: \"10.0.0.0/33\" is not an IP address or CIDR range",
        "test.toml:9: destination[1].format: \"fm8\" is not a format (did you mean \"fm7\"?) \
             (valid: same, json, influx, sled",
        "test.toml:12: destination[2].name: \"a\" is already the name of another destination",
        "test.toml:13: destination[2].addr: \"127.0.0.1:8000\" (127.0.0.1:8000) is the same \
             address as destination \"a\"",
        "test.toml:17: destination[3].addr: \"127.0.0.1:5400\" (127.0.0.1:5400) is \
             forza-relay's own listen address 0.0.0.0:5400",
        "test.toml:21: destination[4].addr: \"localhost\": needs a port",
    ] {
        assert!(all.contains(expect), "missing {expect:?} in\n{all}");
    }
    assert_eq!(p.len(), 7, "{all}");
}

/// The loop problems `parse` reports for a `listen` address and `dests`.
#[track_caller]
fn loop_problems(listen: &str, dests: &[&str]) -> Vec<String> {
    let mut text = format!("[listen]\naddr = \"{listen}\"\n");
    for (i, d) in dests.iter().enumerate() {
        text += &format!("[[destination]]\nname = \"d{i}\"\naddr = \"{d}\"\n");
    }
    match parse(&text) {
        Ok(_) => Vec::new(),
        Err(e) => e.problems.into_iter().map(|p| p.message).collect(),
    }
}

#[test]
fn issue9_a_destination_on_the_listen_port_of_this_computer_is_refused_however_written() {
    assert_eq!(
        loop_problems(
            "[::]:5400",
            &["127.0.0.2:5400", "localhost:5400", "[::1]:5400"]
        ),
        [
            "\"127.0.0.2:5400\" (127.0.0.2:5400) is forza-relay's own listen address \
                 [::]:5400: packets would loop forever",
            "\"localhost:5400\" (127.0.0.1:5400) is forza-relay's own listen address \
                 [::]:5400: packets would loop forever",
            "\"[::1]:5400\" ([::1]:5400) is forza-relay's own listen address [::]:5400: \
                 packets would loop forever",
        ]
    );
    assert_eq!(
        loop_problems("127.0.0.1:5400", &["localhost:5400"]),
        [
            "\"localhost:5400\" (127.0.0.1:5400) is forza-relay's own listen address \
              127.0.0.1:5400: packets would loop forever"
        ]
    );
    // Another port, or IPv6 loopback for an IPv4-only listener, is fine.
    assert_eq!(
        loop_problems("0.0.0.0:5400", &["localhost:5401", "[::1]:5400"]),
        Vec::<String>::new()
    );
}

#[test]
fn issue9_this_computers_own_hostname_on_the_listen_port_is_refused() {
    let name = std::process::Command::new("hostname")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|n| !n.is_empty());
    let Some(name) = name else {
        eprintln!("note: no `hostname` command; this computer's own name not tested");
        return;
    };
    let dest = format!("{name}:5400");
    let Ok(addr) = resolve(&dest, &system_look_up) else {
        eprintln!("note: {name:?} does not resolve here; not tested");
        return;
    };
    assert!(is_own_address(addr.ip()), "{name} is {addr}");
    let p = loop_problems("0.0.0.0:5400", &[&dest]);
    assert_eq!(
        p,
        [format!(
            "{dest:?} ({addr}) is forza-relay's own listen address 0.0.0.0:5400: \
                 packets would loop forever"
        )]
    );
}

#[test]
fn a_stats_interval_longer_than_a_day_is_refused() {
    let p = problems(
        "[stats]\ninterval = 9223372036854775807\n[[destination]]\naddr = \"127.0.0.1:8000\"\n",
    );
    assert_eq!(
        p,
        [
            "test.toml:2: stats.interval: 9223372036854775807 seconds is longer than a day \
              (86400); use 0 to turn the summary off"
        ]
    );
}

#[test]
fn stats_format_is_text_or_json() {
    let dest = "[[destination]]\naddr = \"127.0.0.1:8000\"\n";
    assert_eq!(
        parse(&format!("[stats]\nformat = \"JSON\"\n{dest}"))
            .unwrap()
            .stats_format,
        StatsFormat::Json
    );
    assert_eq!(parse(dest).unwrap().stats_format, StatsFormat::Text);
    assert_eq!(
        problems(&format!("[stats]\nformat = \"xml\"\n{dest}")),
        ["test.toml:2: stats.format: \"xml\" is not a stats format (valid: text, json)"]
    );
}

#[test]
fn no_destinations_is_an_error() {
    assert_eq!(
        problems("[listen]\naddr = \"0.0.0.0:5400\"\n"),
        ["test.toml: no destinations: add a [[destination]] table (or --to HOST:PORT)"]
    );
}

#[test]
fn bad_listen_and_unresolvable_host_name_the_value() {
    let p = problems(
        "[listen]\naddr = \"0.0.0.0\"\n[[destination]]\naddr = \"no-such-host.invalid:9\"\n",
    )
    .join("\n");
    assert!(
        p.contains("test.toml:2: listen.addr: \"0.0.0.0\" is not an address to listen on"),
        "{p}"
    );
    assert!(
            p.contains("test.toml:4: destination[1].addr: \"no-such-host.invalid:9\": cannot resolve host \"no-such-host.invalid\""),
            "{p}"
        );
}

#[test]
fn the_web_page_is_on_this_pc_by_default_and_off_or_moved_on_request() {
    let dest = "[[destination]]\naddr = \"127.0.0.1:8000\"\n";
    let c = |text: &str| Config::from_toml(text, "t.toml", &Overrides::default());
    assert_eq!(c(dest).unwrap().web, Some(DEFAULT_WEB));
    let off = c(&format!("[web]\naddr = \"off\"\n{dest}")).unwrap();
    assert_eq!(off.web, None);
    let lan = c(&format!("[web]\naddr = \"0.0.0.0:8080\"\n{dest}")).unwrap();
    assert_eq!(lan.web, Some("0.0.0.0:8080".parse().unwrap()));
    let e = c(&format!("[web]\naddr = \"nowhere\"\n{dest}")).unwrap_err();
    assert_eq!(e.problems[0].place, "t.toml:2: web.addr");
    assert!(e.problems[0].message.contains("\"nowhere\""), "{e:?}");
    let flag = Overrides {
        web: Some("off".to_owned()),
        ..Overrides::default()
    };
    assert_eq!(Config::from_toml(dest, "t", &flag).unwrap().web, None);
}

#[test]
fn max_age_is_off_by_default_and_read_from_the_file_and_from_to() {
    let c = Config::from_toml(
        "[[destination]]\naddr = \"127.0.0.1:20777\"\nmax_age = \"50ms\"\n\
             [[destination]]\naddr = \"127.0.0.1:8000\"\n",
        "rig.toml",
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(c.destinations[0].max_age, Some(Duration::from_millis(50)));
    assert_eq!(c.destinations[1].max_age, None);
    assert!(
        c.describe().contains("none older than 50ms"),
        "{}",
        c.describe()
    );
    let c = Config::from_args(
        &["127.0.0.1:20777,max-age=0.1s".to_owned()],
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(c.destinations[0].max_age, Some(Duration::from_millis(100)));
}

#[test]
fn a_bad_max_age_is_refused_naming_the_value() {
    for (text, says) in [
        ("50", "is not a duration"),
        ("fast", "is not a duration"),
        ("-5ms", "is negative"),
        ("0ms", "would drop every frame"),
        ("500us", "is shorter than 1ms"),
        ("2min", "is longer than 1m"),
    ] {
        let e = Config::from_args(
            &[format!("127.0.0.1:20777,max-age={text}")],
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(&format!("{text:?} {says}")), "{text}: {e}");
        let toml = format!("[[destination]]\naddr = \"127.0.0.1:1\"\nmax_age = \"{text}\"\n");
        let e = Config::from_toml(&toml, "rig.toml", &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_age") && e.contains(says), "{text}: {e}");
    }
}

/// Issue 34: `hold` is off by default and with "0", read from the file and
/// from `--to`, said by the description; a bad one is refused naming it.
#[test]
fn hold_is_off_by_default_read_from_the_file_and_from_to_and_a_bad_one_is_named() {
    let c = Config::from_toml(
        "[[destination]]\naddr = \"127.0.0.1:8000\"\nhold = \"15s\"\n\
         [[destination]]\naddr = \"127.0.0.1:8001\"\nhold = \"0\"\n\
         [[destination]]\naddr = \"127.0.0.1:8002\"\n",
        "hub.toml",
        &Overrides::default(),
    )
    .unwrap();
    let holds: Vec<_> = c.destinations.iter().map(|d| d.hold).collect();
    assert_eq!(holds, [Some(Duration::from_secs(15)), None, None]);
    assert!(
        c.describe()
            .contains("the last racing frame through blank ones for up to 15s"),
        "{}",
        c.describe()
    );
    let c = Config::from_args(
        &["127.0.0.1:8000,hold=500ms".to_owned()],
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(c.destinations[0].hold, Some(Duration::from_millis(500)));
    for (text, says) in [
        ("15", "is not a duration"),
        ("soon", "is not a duration"),
        ("-1s", "is negative"),
        ("2min", "is longer than 1m"),
    ] {
        let toml = format!("[[destination]]\naddr = \"127.0.0.1:1\"\nhold = \"{text}\"\n");
        let e = Config::from_toml(&toml, "hub.toml", &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("hold") && e.contains(&format!("{text:?} {says}")),
            "{text}: {e}"
        );
    }
}

#[test]
fn json_and_influx_destinations_take_fields_by_exports_names() {
    let c = parse(
        r#"[[destination]]
name = "script"
addr = "127.0.0.1:9999"
format = "json"
fields = ["Speed", "TireTemp", "gear_label"]
[[destination]]
name = "telegraf"
addr = "127.0.0.1:8094"
format = "Influx"
"#,
    )
    .unwrap();
    let script = &c.destinations[0];
    assert_eq!(script.output, Output::Text(Encoding::Json));
    let f = script.fields.as_ref().expect("fields");
    assert_eq!(f.names, ["Speed", "TireTemp", "gear_label"]);
    let names: Vec<String> = f.selection.columns().iter().map(Column::name).collect();
    assert_eq!(
        names,
        [
            "Speed",
            "TireTempFL",
            "TireTempFR",
            "TireTempRL",
            "TireTempRR",
            "gear_label"
        ]
    );
    let telegraf = &c.destinations[1];
    assert_eq!(telegraf.output, Output::Text(Encoding::Influx));
    assert_eq!((telegraf.fields.as_ref(), telegraf.max_rate), (None, 0));
    assert_eq!(
        telegraf.target,
        Target::Udp("127.0.0.1:8094".parse().unwrap())
    );
}

#[test]
fn fields_unknown_empty_or_on_a_binary_format_are_refused_naming_the_value() {
    let p = problems(
        r#"[[destination]]
addr = "127.0.0.1:9999"
format = "json"
fields = ["Speed", "Sped", "gear_lable", "Nonsense"]
[[destination]]
addr = "127.0.0.1:9998"
format = "influx"
fields = []
[[destination]]
addr = "127.0.0.1:9997"
format = "fh5"
fields = ["Speed"]
"#,
    );
    assert_eq!(p.len(), 3, "{p:#?}");
    assert!(
        p[0].starts_with(
            "test.toml:4: destination[1].fields: no field named \"Sped\" (did you mean \
                 \"Speed\"?), \"gear_lable\" (did you mean \"gear_label\"?), \"Nonsense\": "
        ),
        "{}",
        p[0]
    );
    assert!(
        p[1].starts_with("test.toml:8: destination[2].fields: fields is empty"),
        "{}",
        p[1]
    );
    assert_eq!(
        p[2],
        "test.toml:12: destination[3].fields: fields is for format = \"json\" or \
             \"influx\": format \"fh5\" sends whole packets"
    );
    let p = problems("[[destination]]\naddr = \"127.0.0.1:1\"\nfields = \"Speed\"\n");
    assert!(
        p[0].contains("fields must be a list of names in brackets"),
        "{p:?}"
    );
}

#[test]
fn an_mqtt_destination_reads_its_broker_topic_login_and_rate() {
    let c = parse(
        r#"[[destination]]
name = "league"
addr = "mqtt://broker.example.com"
username = "driver7"
password = "s3cret"
[[destination]]
name = "home/assistant"
addr = "mqtts://[::1]:8884"
format = "influx"
topic = "ha/forza"
max_rate = 0
fields = ["speed_kmh"]
[[destination]]
name = "from-env"
addr = "MQTT://10.0.0.2:1884"
username = "me"
password_env = "PATH"
"#,
    )
    .unwrap();
    let league = &c.destinations[0];
    assert_eq!(
        league.output,
        Output::Text(Encoding::Json),
        "json by default"
    );
    assert_eq!(league.max_rate, DEFAULT_MAX_RATE, "20 a second by default");
    assert_eq!(league.target.udp(), None);
    let m = league.target.mqtt().expect("a broker");
    assert_eq!(
        m.broker,
        Broker {
            host: "broker.example.com".into(),
            port: 1883,
            tls: false
        }
    );
    assert_eq!(m.topic, "forza-relay/league");
    assert_eq!(m.username.as_deref(), Some("driver7"));
    assert_eq!(m.password.as_ref().map(Secret::expose), Some("s3cret"));
    assert_eq!((m.password_env.as_ref(), &m.roots), (None, &Roots::System));
    let ha = &c.destinations[1];
    assert_eq!(
        (ha.output, ha.max_rate),
        (Output::Text(Encoding::Influx), 0)
    );
    let m = ha.target.mqtt().unwrap();
    assert_eq!(
        (m.broker.host.as_str(), m.broker.port, m.broker.tls),
        ("::1", 8884, true)
    );
    assert_eq!(m.topic, "ha/forza");
    let env = c.destinations[2].target.mqtt().unwrap();
    assert_eq!(env.password_env.as_deref(), Some("PATH"));
    assert_eq!(
        env.password.as_ref().map(Secret::expose),
        std::env::var("PATH").ok().as_deref(),
        "read when the configuration is loaded"
    );
    // Never in a description or a debug print.
    for shown in [c.describe(), format!("{c:?}")] {
        assert!(!shown.contains("s3cret"), "{shown}");
    }
    assert!(
        c.describe().contains("as \"driver7\" with a password"),
        "{}",
        c.describe()
    );
    assert!(
        c.describe().contains("with the password in $PATH"),
        "{}",
        c.describe()
    );
}

#[test]
fn mqtt_mistakes_are_refused_naming_the_value() {
    let unset = format!("FORZA_RELAY_TEST_UNSET_{}", std::process::id());
    let p = problems(&format!(
        r#"[[destination]]
name = "a"
addr = "mqtt://"
[[destination]]
name = "b"
addr = "mqtt://broker:1883"
format = "fh5"
[[destination]]
name = "c"
addr = "mqtt://broker:1883"
username = "me"
password_env = "{unset}"
[[destination]]
name = "d"
addr = "mqtt://broker:1883"
ca_file = "ca.pem"
topic = "league/+"
[[destination]]
name = "e"
addr = "127.0.0.1:9000"
topic = "league"
[[destination]]
name = "f"
addr = "mqtt://broker:1883"
password = "x"
"#
    ));
    let all = p.join("\n");
    for expect in [
        "test.toml:3: destination[1].addr: \"mqtt://\": no broker host name or address in it",
        "test.toml:7: destination[2].format: an MQTT destination publishes json or influx, \
             not \"fh5\"",
        &format!(
            "test.toml:12: destination[3].password_env: the environment variable \
                 \"{unset}\" is not set"
        ),
        "test.toml:16: destination[4].ca_file: ca_file is for TLS: write the address as \
             mqtts://",
        "test.toml:17: destination[4].topic: \"league/+\" holds a wildcard",
        "test.toml:21: destination[5].topic: topic is for an MQTT destination",
        "test.toml:25: destination[6].password: a password goes with a username",
    ] {
        assert!(all.contains(expect), "missing {expect:?} in\n{all}");
    }
    assert_eq!(p.len(), 7, "{all}");
    let p = problems("[[destination]]\naddr = \"mqtts://broker\"\nca_file = \"no-such-ca.pem\"\n");
    assert!(
        p[0].starts_with("test.toml:3: destination[1].ca_file: no-such-ca.pem: cannot read it"),
        "{p:?}"
    );
}

#[test]
fn the_quick_form_takes_fields_and_mqtt_keys() {
    let c = Config::from_args(
        &[
            "127.0.0.1:9999,format=json,fields=Speed+gear_label".to_owned(),
            "mqtt://127.0.0.1,topic=league/7,username=me,password-env=PATH,max-rate=5".to_owned(),
        ],
        &Overrides::default(),
    )
    .unwrap();
    let names = &c.destinations[0].fields.as_ref().unwrap().names;
    assert_eq!(names, &["Speed", "gear_label"]);
    let m = c.destinations[1].target.mqtt().unwrap();
    assert_eq!(
        (m.topic.as_str(), m.username.as_deref()),
        ("league/7", Some("me"))
    );
    assert_eq!(c.destinations[1].max_rate, 5);
    let e = Config::from_args(
        &["mqtt://h,password=secret".to_owned()],
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("password-env=VARIABLE"), "{e}");
    assert!(!e.contains("secret"), "never said back: {e}");
}

/// Issue 30: a `ca_file` gets the configuration file's own guards: a FIFO is
/// refused without waiting for a writer, a sparse 1 GiB file without reading
/// it, each naming the file.
#[test]
fn issue30_a_ca_file_that_is_a_fifo_or_over_the_cap_is_refused_naming_it() {
    let dir = std::env::temp_dir().join(format!("forza-relay-ca-guards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.pem");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut cases = vec![(big, "it is 1073741824 bytes, more than the 1024 KiB read")];
    #[cfg(unix)]
    {
        let fifo = dir.join("fifo.pem");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        cases.push((fifo, "it is a named pipe (FIFO), not a file"));
    }
    for (path, why) in cases {
        let shown = path.display().to_string();
        let p = problems(&format!(
            "[[destination]]\naddr = \"mqtts://broker\"\nca_file = {shown:?}\n"
        ));
        assert_eq!(
            p,
            [format!(
                "test.toml:3: destination[1].ca_file: {shown}: cannot read it: {why}"
            )]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 30: a column named twice in `fields` is an error naming it.
#[test]
fn issue30_a_column_named_twice_in_fields_is_refused_naming_it() {
    let p = problems(
        "[[destination]]\naddr = \"127.0.0.1:9999\"\nformat = \"json\"\n\
         fields = [\"Speed\", \"TireTemp\", \"tiretempfl\"]\n",
    );
    assert_eq!(
        p,
        [
            "test.toml:4: destination[1].fields: \"tiretempfl\" chooses a column named before \
          (names ignore case; a per-wheel field such as TireTemp chooses its four wheels): \
          name each column once"
        ]
    );
}

/// Issue 30: names with surrounding spaces (the page could never change or
/// remove them), control characters (the page's Add took a tab), bidi
/// controls, line separators or non-characters are refused wherever they
/// are written, naming the value; an unnamed destination's name is its
/// address, trimmed.
#[test]
fn issue30_names_that_do_not_show_as_themselves_are_refused_naming_them() {
    let table = |name: &str| {
        let quoted = toml::Value::String(name.to_owned()).to_string();
        format!("[[destination]]\nname = {quoted}\naddr = \"127.0.0.1:9999\"\n")
    };
    for (name, said) in [
        (" dash ", "\" dash \" begins or ends with a space"),
        ("a\tb", "\"a\\tb\" holds a control character (U+0009)"),
        (
            "a\nINFO forged",
            "\"a\\nINFO forged\" holds a control character (U+000A)",
        ),
        (
            "evil\u{202e}lmth",
            "\"evil\\u{202e}lmth\" holds a bidirectional-text control (U+202E)",
        ),
        ("a\u{2028}b", "holds a line or paragraph separator (U+2028)"),
        ("x\u{fdd0}", "holds a Unicode non-character (U+FDD0)"),
    ] {
        let p = problems(&table(name));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("test.toml:2: destination[1].name: ") && p[0].contains(said),
            "{name:?}: {p:?}"
        );
        let e = Config::from_args(
            &[format!("127.0.0.1:9999,name={name}")],
            &Overrides::default(),
        );
        // The quick form trims each option: a name with spaces around is
        // fine there.
        if name.trim() == name {
            let e = e.unwrap_err().to_string();
            assert!(e.contains(said), "--to: {e}");
        }
    }
    let c = parse("[[destination]]\naddr = \" 127.0.0.1:9999 \"\n").unwrap();
    assert_eq!(c.destinations[0].name, "127.0.0.1:9999");
}

/// Issue 30: topics mosquitto refuses (non-characters), the broker's own
/// (`$SYS/…`), with control characters (they were rewritten as `\n`) and
/// two destinations on one topic of one broker (`a/b` and `a+b` share
/// `forza-relay/a-b`) are refused, naming the value and both destinations.
#[test]
fn issue30_topics_that_can_not_work_are_refused_naming_them() {
    let p = problems(
        "[[destination]]\nname = \"a\"\naddr = \"mqtt://b\"\ntopic = \"league/\\uFFFE\"\n\
         [[destination]]\nname = \"s\"\naddr = \"mqtt://b\"\ntopic = \"$SYS/x\"\n\
         [[destination]]\nname = \"c\"\naddr = \"mqtt://b\"\ntopic = \"league\\n7\"\n\
         [[destination]]\nname = \"a/b\"\naddr = \"mqtt://b\"\n\
         [[destination]]\nname = \"a+b\"\naddr = \"mqtt://B:1884\"\n\
         [[destination]]\nname = \"elsewhere\"\naddr = \"mqtt://other\"\ntopic = \"forza-relay/a-b\"\n",
    );
    let all = p.join("\n");
    for expect in [
        "test.toml:4: destination[1].topic: \"league/\\u{fffe}\" holds a Unicode non-character",
        "test.toml:8: destination[2].topic: \"$SYS/x\" begins with $",
        "test.toml:12: destination[3].topic: \"league\\n7\" holds a control character (U+000A)",
        "test.toml:17: destination[5].name: destinations \"a/b\" and \"a+b\" would both \
         publish on \"forza-relay/a-b\" on B",
    ] {
        assert!(all.contains(expect), "missing {expect:?} in\n{all}");
    }
    assert_eq!(p.len(), 4, "{all}");
}

/// Issue 34: `[record] races` is a folder beside the file, keeping 20 races
/// unless told; `keep` alone, out of range or an empty folder is refused
/// naming the key.
#[test]
fn record_races_is_a_folder_with_a_keep_and_its_mistakes_are_named() {
    let dir = std::path::Path::new("/home/me/forza");
    let c = Config::from_toml_at(
        "[record]\nraces = \"races\"\n[[destination]]\naddr = \"127.0.0.1:8000\"\n",
        &dir.join("relay.toml"),
        &Overrides::default(),
        None,
        &system_look_up,
    )
    .unwrap()
    .config;
    let races = c.races.unwrap();
    assert_eq!((races.dir, races.keep), (dir.join("races"), 20));
    let c = Config::from_toml(
        "[record]\nraces = \"/tmp/r\"\nkeep = 3\n[[destination]]\naddr = \"127.0.0.1:8000\"\n",
        "relay.toml",
        &Overrides::default(),
    )
    .unwrap();
    assert_eq!(c.races.map(|r| r.keep), Some(3));
    for (toml, says) in [
        ("keep = 5\n", "record.keep"),
        ("races = \"r\"\nkeep = 0\n", "0 is out of range"),
        ("races = \" \"\n", "the folder is empty"),
    ] {
        let text = format!("[record]\n{toml}[[destination]]\naddr = \"127.0.0.1:8000\"\n");
        let e = Config::from_toml(&text, "relay.toml", &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{toml}: {e}");
    }
}
