//! Issue 30, item 14, through the real binary's page: a name the page's own
//! Add accepted (a tab in it) could then never be changed or removed (409);
//! a topic of the broker's (`$SYS/…`) or one another destination publishes
//! on was taken; a column named twice in the stream's `?fields=` wrote a key
//! twice. Each is refused, naming the value.

use crate::common;

use serde_json::json;

use crate::page_secrets::{change, config_text, form, relay};
use common::broker::{Conduct, FakeBroker};
use common::http::get;
use common::*;

#[test]
fn issue30_the_page_refuses_names_and_topics_that_could_not_work_naming_them() {
    let (_first, first_addr) = receiver();
    let broker = FakeBroker::start(|_| Conduct::serve());
    let text = config_text(
        first_addr,
        &format!(
            "\n[[destination]]\nname = \"a/b\"\naddr = \"{}\"\n",
            broker.addr()
        ),
    );
    let file = TempPath::file("names-page.toml", &text);
    let (bin, web, token) = relay(&file);
    let (_tool, tool) = receiver();

    let r = change(
        web,
        &token,
        &json!({"action": "add", "name": "a\tb", "addr": tool.to_string()}),
    );
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.json()["field"], "Name");
    assert_eq!(
        r.json()["error"],
        "Name: \"a\\tb\" holds a control character (U+0009): write the name without it"
    );

    // "a+b" defaults to a/b's topic on the same broker.
    let mut clash = form("add", "a+b", &broker.addr(), "");
    clash["topic"] = json!("");
    let r = change(web, &token, &clash);
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(
        r.json()["error"],
        "Name: destinations \"a/b\" and \"a+b\" would both publish on \"forza-relay/a-b\" on \
         127.0.0.1: give each its own topic"
    );
    let mut sys = form("add", "sys", &broker.addr(), "");
    sys["topic"] = json!("$SYS/broker/load");
    let r = change(web, &token, &sys);
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.json()["field"], "Topic");
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .starts_with("Topic: \"$SYS/broker/load\" begins with $"),
        "{}",
        r.body
    );
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), text);

    let r = get(web, "/api/stream?fields=Speed,TireTemp,tiretempfr", &[]);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body
            .starts_with("fields: \"tiretempfr\" chooses a column named before"),
        "{}",
        r.body
    );
    bin.stop();
}
