//! Issue 30 item 4: while a race is shown, the page keeps a phone's screen
//! on where the browser lets it, in headless Chromium: on this computer (a
//! secure context) with the Screen Wake Lock API; over plain http from the
//! network, where that API is absent, with a tiny video the first tap
//! starts. (Whether a phone's screen then stays on is the browser's; the page
//! says which way it took, `data-awake` on its body.)

use crate::common;

use std::time::{Duration, Instant};

use serde_json::json;

use crate::browser::{chromium, Drive, Driver};
use common::bin::Bin;
use common::*;

/// How long the page may take to show something.
const SHOWN_WITHIN: Duration = Duration::from_secs(15);

/// Waits until the page says it keeps the screen on in the way `how`.
#[track_caller]
fn wait_awake(driver: &Driver, how: &str) {
    let deadline = Instant::now() + SHOWN_WITHIN;
    loop {
        let now = driver.run("return document.body.dataset.awake ?? null;");
        if now == how {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the page says {now}, not {how:?}: {}",
            driver.run("return document.getElementById('awake').textContent;")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn issue30_the_page_keeps_the_screen_on_while_a_race_is_shown() {
    if !require_tool(
        "chromium",
        runs(chromium()) && runs("chromedriver"),
        "install Debian's chromium and chromium-driver",
    ) {
        return;
    }
    let (_first, first_addr) = receiver();
    let file = TempPath::file("awake.toml", &page_toml("fh5", first_addr, "0.0.0.0:0"));
    let mut bin = Bin::spawn(&["run", "--config", file.path().to_str().unwrap()], None);
    let listen = bin.wait_for_address("listen on ");
    let (web, token) = crate::web::web_addr(&mut bin);
    bin.wait_for_line("running; press Ctrl-C to stop");
    let drive = Drive::start(listen);

    let driver = Driver::start();
    let here = format!("http://127.0.0.1:{}/?token={token}", web.port());
    driver.session("POST", "/url", &json!({ "url": here }));
    wait_awake(&driver, "wake-lock");
    drive.hold();
    drive.menu(true);
    wait_awake(&driver, "off");
    drive.release();
    wait_awake(&driver, "wake-lock");

    match common::lan_address() {
        Some(ip) => {
            let there = format!("http://{ip}:{}/?token={token}", web.port());
            driver.session("POST", "/url", &json!({ "url": there }));
            assert_eq!(
                driver.run("return 'wakeLock' in navigator;"),
                false,
                "plain http to {ip} is no secure context"
            );
            wait_awake(&driver, "tap");
            driver.click_at("//h1");
            wait_awake(&driver, "video");
            assert_eq!(
                driver.run("const v = document.getElementById('awake-video'); return v && !v.paused && v.muted;"),
                true
            );
            drive.hold();
            drive.menu(true);
            wait_awake(&driver, "off");
        }
        None => eprintln!("note: no address beyond loopback here: the video way is not checked"),
    }
    drop(driver);
    drive.stop();
    bin.stop();
}
