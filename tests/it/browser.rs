//! The web page in a real browser: headless Chromium, driven over
//! chromedriver's W3C WebDriver protocol (HTTP and JSON, with the small
//! client of tests/common/http.rs), loads the page while packets stream into
//! the relay; checks the speed shown and each destination's rate, adds a
//! destination through the labelled form and sees datagrams reach it and the
//! file keep its comments, edits its address through the row's Edit button and
//! sees them move, removes it and sees them stop, and saves the
//! screenshot the README shows (target/web-page.png; docs/web-page.png with
//! FORZA_RELAY_BLESS=1).
//!
//! Debian's `chromium` and `chromium-driver`, which `.ci/run` installs.

use crate::common;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forza_relay::simulate::Simulator;
use forza_relay::wire::{Format, Packet, MAX_LEN};
use serde_json::{json, Value};

use common::bin::Bin;
use common::http::{self, request_within};
use common::*;

/// How long the page may take to show something.
const SHOWN_WITHIN: Duration = Duration::from_secs(15);
/// How long a destination added from the page may take to receive (issue 14).
const ADDED_WITHIN: Duration = Duration::from_secs(3);
/// How long one WebDriver command may take: starting Chromium or taking a
/// screenshot on a CI machine busy with other tests' programs has taken more
/// than the page's own 10 s.
const COMMAND_WITHIN: Duration = Duration::from_secs(60);
/// How many times a browser is started before the test fails: a Chromium that
/// crashes at start, or a chromedriver that lost its port to another program
/// between our choosing it and its binding, is started again.
const STARTS: usize = 3;
/// A phone's screen in CSS pixels: width, height.
const PHONE: (u32, u32) = (390, 844);
/// The W3C WebDriver key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver, ended when dropped.
pub(crate) struct Driver {
    child: Child,
    addr: SocketAddr,
    session: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Ends Chromium; a chromedriver that doesn't answer (or never had a
        // session) is ended all the same, without a panic while unwinding.
        if !self.session.is_empty() {
            let (addr, path) = (self.addr, format!("/session/{}", self.session));
            let _ = std::panic::catch_unwind(|| http::request(addr, "DELETE", &path, &[], ""));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    /// A desktop browser window, 1280 × 1500.
    #[track_caller]
    pub(crate) fn start() -> Driver {
        Driver::with(json!({
            "binary": chromium(),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,1500"],
        }))
    }

    /// A phone: Chromium's mobile emulation of a 390 × 844 screen (an iPhone
    /// 12 to 15's, in CSS pixels), touch, a phone's user agent.
    #[track_caller]
    fn phone() -> Driver {
        Driver::with(json!({
            "binary": chromium(),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage"],
            "mobileEmulation": {
                "deviceMetrics": {"width": PHONE.0, "height": PHONE.1, "pixelRatio": 2.0,
                                  "mobile": true, "touch": true},
                "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 \
                              (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36",
            },
        }))
    }

    /// A session with these `goog:chromeOptions`.
    #[track_caller]
    fn with(options: Value) -> Driver {
        let mut failed = Vec::new();
        for _ in 0..STARTS {
            match Driver::try_with(&options) {
                Ok(driver) => return driver,
                Err(why) => failed.push(why),
            }
        }
        panic!("no browser session in {STARTS} starts: {failed:?}");
    }

    fn try_with(options: &Value) -> Result<Driver, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        // Dropped (chromedriver ended) on every way out but success.
        let mut driver = Driver {
            child,
            addr,
            session: String::new(),
        };
        let deadline = Instant::now() + SHOWN_WITHIN;
        while std::net::TcpStream::connect(addr).is_err() {
            if Instant::now() >= deadline {
                return Err(format!("chromedriver did not listen on {addr}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": options,
        }}});
        let r = driver.send("POST", "/session", &caps.to_string());
        let v: Value = serde_json::from_str(&r.body).unwrap_or_default();
        match v["value"]["sessionId"].as_str() {
            Some(id) if r.status == 200 => {
                driver.session = id.to_owned();
                Ok(driver)
            }
            _ => Err(format!("POST /session: {} {}", r.status, r.body)),
        }
    }

    /// One request to chromedriver, answered within [`COMMAND_WITHIN`].
    #[track_caller]
    fn send(&self, method: &str, path: &str, body: &str) -> http::Reply {
        request_within(
            COMMAND_WITHIN,
            self.addr,
            method,
            path,
            &["Content-Type: application/json"],
            body,
        )
    }

    /// One WebDriver command; its `value`.
    #[track_caller]
    fn call(&self, method: &str, path: &str, body: &Value) -> Value {
        let body = if method == "GET" {
            String::new()
        } else {
            body.to_string()
        };
        let r = self.send(method, path, &body);
        let v = r.json();
        assert_eq!(r.status, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    #[track_caller]
    pub(crate) fn session(&self, method: &str, path: &str, body: &Value) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    /// The element `xpath` finds, if any.
    fn find(&self, xpath: &str) -> Option<String> {
        let r = self.send(
            "POST",
            &format!("/session/{}/element", self.session),
            &json!({"using": "xpath", "value": xpath}).to_string(),
        );
        (r.status == 200).then(|| r.json()["value"][ELEMENT].as_str().unwrap().to_owned())
    }

    /// The text of the element `xpath` finds, read in one step in the page
    /// (its rows are redrawn every second: an element found in one command
    /// may be gone by the next).
    fn text_at(&self, xpath: &str) -> Option<String> {
        let script = "const e = document.evaluate(arguments[0], document, null, \
                      XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue; \
                      return e ? e.textContent : null;";
        let path = format!("/session/{}/execute/sync", self.session);
        let body = json!({"script": script, "args": [xpath]}).to_string();
        let r = self.send("POST", &path, &body);
        (r.status == 200)
            .then(|| r.json()["value"].as_str().map(str::to_owned))
            .flatten()
    }

    /// Clicks the element `xpath` finds, finding it again when it was redrawn
    /// in between.
    #[track_caller]
    pub(crate) fn click_at(&self, xpath: &str) {
        let deadline = Instant::now() + SHOWN_WITHIN;
        let mut last = "not found".to_owned();
        loop {
            if let Some(e) = self.find(xpath) {
                let path = format!("/session/{}/element/{e}/click", self.session);
                let r = self.send("POST", &path, "{}");
                if r.status == 200 {
                    return;
                }
                last = format!("{}: {}", r.status, r.json()["value"]["error"]);
            }
            assert!(
                Instant::now() < deadline,
                "cannot click {xpath} (the last try: {last})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until `xpath` finds an element whose text `ok` accepts.
    #[track_caller]
    fn wait_for(&self, xpath: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + SHOWN_WITHIN;
        let mut last = String::new();
        loop {
            if let Some(text) = self.text_at(xpath) {
                if ok(&text) {
                    return text;
                }
                last = text;
            }
            if Instant::now() >= deadline {
                let source = self.session("GET", "/source", &json!({}));
                let source = source.as_str().unwrap_or_default();
                let at = source.find("id=\"destinations\"").unwrap_or(0);
                panic!(
                    "{xpath}: last shown {last:?}; the table: {}",
                    &source[at..(at + 1500).min(source.len())]
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The field whose visible `<label>` says `label`.
    #[track_caller]
    fn labelled(&self, label: &str) -> String {
        let l = self
            .find(&format!("//label[normalize-space()='{label}']"))
            .unwrap_or_else(|| panic!("no label {label:?}"));
        let id = self.session("GET", &format!("/element/{l}/attribute/for"), &json!({}));
        let id = id.as_str().expect("the label names its field");
        self.find(&format!("//*[@id='{id}']"))
            .expect("the labelled field")
    }

    #[track_caller]
    fn type_into(&self, element: &str, text: &str) {
        self.session("POST", &format!("/element/{element}/clear"), &json!({}));
        self.session(
            "POST",
            &format!("/element/{element}/value"),
            &json!({"text": text}),
        );
    }

    #[track_caller]
    fn click(&self, element: &str) {
        self.session("POST", &format!("/element/{element}/click"), &json!({}));
    }
}

/// The Chromium program: Debian calls it `chromium`.
pub(crate) fn chromium() -> &'static str {
    "/usr/bin/chromium"
}

impl Driver {
    /// Runs `script` (a function body) in the page; its return value.
    #[track_caller]
    pub(crate) fn run(&self, script: &str) -> Value {
        self.session(
            "POST",
            "/execute/sync",
            &json!({"script": script, "args": []}),
        )
    }

    /// Saves a screenshot as `name` into target/ on every run, and into docs/
    /// (the docs' pictures) when FORZA_RELAY_BLESS is set, as
    /// tests/generated.rs regenerates its files.
    #[track_caller]
    fn screenshot(&self, name: &str) {
        let shot = self.session("GET", "/screenshot", &json!({}));
        let png = base64(shot.as_str().expect("a screenshot"));
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let folder = if std::env::var_os("FORZA_RELAY_BLESS").is_some() {
            root.join("docs")
        } else {
            root.join("target")
        };
        let _ = std::fs::create_dir_all(&folder);
        std::fs::write(folder.join(name), &png).expect("save the screenshot");
    }
}

/// Standard base64, as WebDriver sends a screenshot.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
        .map(value)
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &d)| n | (u32::from(d) << (18 - 6 * i)));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    out
}

/// `simulate`'s drive sent to `to`, about 60 frames a second, until `stop`:
/// the car laps the circuit, so the page's map draws a line. While `hold` is
/// set, the car stands still: the frame it had is sent again (its timestamp
/// going on) and its speed is in `held` (m/s), for the page to be checked
/// against what was sent; with `menu` set too, with IsRaceOn = 0, as a game
/// paused there sends it.
pub(crate) struct Drive {
    stop: Arc<AtomicBool>,
    hold: Arc<AtomicBool>,
    menu: Arc<AtomicBool>,
    held: Arc<Mutex<Option<f32>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Drive {
    pub(crate) fn start(to: SocketAddr) -> Drive {
        let stop = Arc::new(AtomicBool::new(false));
        let hold = Arc::new(AtomicBool::new(false));
        let menu = Arc::new(AtomicBool::new(false));
        let held = Arc::new(Mutex::new(None));
        let thread = std::thread::spawn({
            let (stop, hold, menu, held) = (stop.clone(), hold.clone(), menu.clone(), held.clone());
            move || {
                let sender = Sender::new(to);
                let mut sim = Simulator::new(Format::Fh5, 14);
                let mut buf = [0u8; MAX_LEN];
                let dt = Duration::from_micros(16_667);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let mut kept = held.lock().unwrap();
                    if kept.is_some() && hold.load(Ordering::Relaxed) {
                        let mut p = Packet::new_checked(&mut buf[..n], Format::Fh5).unwrap();
                        p.set_timestamp_ms(p.timestamp_ms().wrapping_add(16));
                        p.set_is_race_on(i32::from(!menu.load(Ordering::Relaxed)));
                    } else {
                        n = sim.frame(dt, &mut buf).expect("MAX_LEN holds fh5");
                        let speed = Packet::new_checked(&buf[..n], Format::Fh5)
                            .unwrap()
                            .speed()
                            .expect("fh5 has Speed");
                        *kept = (hold.load(Ordering::Relaxed) && sim.is_racing() && speed > 5.0)
                            .then_some(speed);
                    }
                    drop(kept);
                    sender.send(&buf[..n]);
                    std::thread::sleep(Duration::from_millis(16));
                }
            }
        });
        Drive {
            stop,
            hold,
            menu,
            held,
            thread,
        }
    }

    /// Stops the car (once it is racing and moving) and returns its speed.
    #[track_caller]
    pub(crate) fn hold(&self) -> f32 {
        self.hold.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + SHOWN_WITHIN;
        loop {
            if let Some(speed) = *self.held.lock().unwrap() {
                return speed;
            }
            assert!(Instant::now() < deadline, "the simulated car never raced");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The car held still is sent as a game in its pause menu sends it
    /// (`true`), or racing again (`false`).
    pub(crate) fn menu(&self, on: bool) {
        self.menu.store(on, Ordering::Relaxed);
    }

    /// Drives on.
    pub(crate) fn release(&self) {
        self.menu(false);
        self.hold.store(false, Ordering::Relaxed);
    }

    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

/// Whether `socket` receives something within `within`.
fn receives(socket: &UdpSocket, within: Duration) -> bool {
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + within;
    let mut buf = [0u8; MAX_DATAGRAM];
    while Instant::now() < deadline {
        if socket.recv(&mut buf).is_ok() {
            return true;
        }
    }
    false
}

/// Whether what `socket` was sent stops: what was on its way drains, then
/// nothing more arrives for a second.
fn stops(socket: &UdpSocket) -> bool {
    let deadline = Instant::now() + SHOWN_WITHIN;
    while receives(socket, Duration::from_millis(300)) {
        if Instant::now() >= deadline {
            return false;
        }
    }
    !receives(socket, Duration::from_secs(1))
}

#[test]
fn the_page_in_chromium_shows_the_car_and_adds_and_removes_a_destination() {
    if !require_tool(
        "chromium",
        runs(chromium()) && runs("chromedriver"),
        "install Debian's chromium and chromium-driver",
    ) {
        return;
    }
    let (first, first_addr) = receiver();
    let text = format!(
        "# my relay: the comments stay\n{}\n# the first tool\n{}",
        listen_toml("fh5"),
        destination_toml("first", first_addr, "same", "")
    )
    .replace(
        "[stats]",
        "[web]\naddr = \"127.0.0.1:0\" # the page\n\n[stats]",
    );
    let file = TempPath::file("browser.toml", &text);
    let mut bin = Bin::spawn(&["run", "--config", file.path().to_str().unwrap()], None);
    let listen = bin.wait_for_address("listen on ");
    let line = bin.wait_for_line("web page on http://");
    let url = line[line.find("http://").unwrap()..].trim().to_owned();
    bin.wait_for_line("running; press Ctrl-C to stop");
    let drive = Drive::start(listen);

    let driver = Driver::start();
    driver.session("POST", "/url", &json!({ "url": url }));
    // The speed of the car held still, in km/h, ±1.
    let kmh = f64::from(drive.hold()) * 3.6;
    driver.wait_for("//*[@id='speed-kmh']", |t| {
        t.parse::<f64>().is_ok_and(|v| (v - kmh).abs() <= 1.0)
    });
    // Paused in a menu: the page says so over the last racing values.
    // The title's dot says what the game's feed does, in words.
    driver.wait_for("//*[@id='feed-state']", |t| t == "receiving");
    // Each tyre is labelled.
    for (i, wheel) in ["FL", "FR", "RL", "RR"].iter().enumerate() {
        driver.wait_for(&format!("(//table[@class='tyres']//th)[{}]", i + 1), |t| {
            t == *wheel
        });
    }
    drive.menu(true);
    driver.wait_for("//*[@id='car-state']", |t| {
        t == "Not racing (menu or paused): the last racing values, dimmed."
    });
    driver.wait_for("//*[@id='feed-state']", |t| {
        t == "not racing (menu or paused)"
    });
    driver.wait_for("//*[@id='speed-kmh']", |t| {
        t.parse::<f64>().is_ok_and(|v| (v - kmh).abs() <= 1.0)
    });
    drive.menu(false);
    driver.wait_for("//*[@id='car-state']", str::is_empty);
    driver.wait_for("//*[@id='feed-state']", |t| t == "receiving");
    drive.release();
    driver.wait_for("//tr[@data-name='first']/td[@class='rate']", |t| {
        t.parse::<f64>().is_ok_and(|v| v > 0.0)
    });
    // The rows are redrawn every second; a row's buttons stay the same
    // elements, so a click that spans a redraw (pressed before it, released
    // after) lands. Under load, WebDriver's find-then-click lost that race
    // every time for 20 s ("stale element reference").
    let sent_cell = "//tr[@data-name='first']/td[@data-label='Sent']";
    let edit = driver
        .find("//tr[@data-name='first']//button[normalize-space()='Edit']")
        .expect("the Edit button");
    let sent = driver.text_at(sent_cell).unwrap_or_default();
    driver.wait_for(sent_cell, |t| t != sent);
    let r = driver.send(
        "GET",
        &format!("/session/{}/element/{edit}/name", driver.session),
        "",
    );
    assert_eq!(
        r.status,
        200,
        "the Edit button found before a redraw is still in the page: {}",
        r.json()["value"]["error"]
    );

    let (second, second_addr) = receiver();
    driver.type_into(&driver.labelled("Name"), "second");
    // An address without its port: the error names the field, never a line
    // of the file, and nothing is written.
    driver.type_into(&driver.labelled("Address"), "192.168.1.50");
    driver.click_at("//button[normalize-space()='Add']");
    // "Applying…" while the request is on its way, then the answer.
    let error = driver.wait_for("//*[@id='form-result']", |t| {
        !t.is_empty() && t != "Applying…"
    });
    assert!(
        error.starts_with("Address: \"192.168.1.50\": needs a port") && !error.contains(".toml"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), text);
    driver.type_into(&driver.labelled("Address"), &second_addr.to_string());
    driver.type_into(&driver.labelled("Max age (ms, empty = off)"), "50");
    let format = driver.labelled("Format");
    let fh4 = driver
        .find(&format!(
            "//*[@id='{}']/option[text()='fh4']",
            "dest-format"
        ))
        .expect("fh4 in the Format list");
    driver.click(&format);
    driver.click(&fh4);
    let add = driver
        .find("//button[normalize-space()='Add']")
        .expect("a button that says Add");
    driver.click(&add);
    assert!(
        receives(&second, ADDED_WITHIN),
        "nothing reached the destination added from the page within {ADDED_WITHIN:?}"
    );
    // The relay takes the edit before the file is replaced: the page says
    // "saved in" once it is.
    driver.wait_for("//*[@id='form-result']", |t| {
        t.starts_with("added destination \"second\"") && t.contains("saved in")
    });
    let written = std::fs::read_to_string(file.path()).unwrap();
    assert!(written.starts_with(&text), "comments kept:\n{written}");
    assert!(
        written.contains(&format!("addr = \"{second_addr}\"")),
        "{written}"
    );
    assert!(written.contains("format = \"fh4\""), "{written}");
    assert!(written.contains("max_age = \"50ms\""), "{written}");
    driver.wait_for("//tr[@data-name='second']/td[@class='rate']", |t| {
        t.parse::<f64>().is_ok_and(|v| v > 0.0)
    });
    driver.wait_for("//tr[@data-name='second']/td[@data-label='Filters']", |t| {
        t == "≤ 50 ms old"
    });

    // The map draws the drive as a line: the car has gone round the first
    // corner (the circuit opens with 200 m straight, then turns 90°).
    let deadline = Instant::now() + 2 * SHOWN_WITHIN;
    loop {
        let extent = driver.session(
            "POST",
            "/execute/sync",
            &json!({"script": "const xs = track.map((p) => p[0]), zs = track.map((p) => p[1]); \
                       return Math.min(Math.max(...xs) - Math.min(...xs), \
                                       Math.max(...zs) - Math.min(...zs));", "args": []}),
        );
        if extent.as_f64().is_some_and(|m| m > 60.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the map's drive spans {extent} m across"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    driver.screenshot("web-page.png");

    // Edit: the row's button fills the form, Save changes the address (the
    // server's `change`, written with the comments kept, applied by the
    // reloader), and the datagrams move to the new receiver.
    let (third, third_addr) = receiver();
    driver.click_at("//tr[@data-name='second']//button[normalize-space()='Edit']");
    driver.wait_for("//*[@id='add']", |t| t == "Save");
    let address = driver.labelled("Address");
    driver.type_into(&address, &third_addr.to_string());
    driver.click_at("//button[normalize-space()='Save']");
    // The page answers once the change is applied and saved (issue 23).
    driver.wait_for("//*[@id='form-result']", |t| {
        t.starts_with("changed destination \"second\"") && t.contains("saved in")
    });
    assert!(
        receives(&third, ADDED_WITHIN),
        "nothing reached the new address of the destination edited on the page within \
         {ADDED_WITHIN:?}"
    );
    let written = std::fs::read_to_string(file.path()).unwrap();
    assert!(written.starts_with(&text), "comments kept:\n{written}");
    assert!(
        written.contains(&format!("addr = \"{third_addr}\""))
            && !written.contains(&second_addr.to_string()),
        "{written}"
    );
    assert!(
        written.contains("format = \"fh4\"") && written.contains("max_age = \"50ms\""),
        "the rest kept: {written}"
    );
    assert!(
        stops(&second),
        "still sent to the address the destination had"
    );
    driver.wait_for("//*[@id='add']", |t| t == "Add");

    driver.click_at("//tr[@data-name='second']//button[normalize-space()='Remove']");
    bin.wait_for_line("configuration applied: - second");
    assert!(stops(&third), "still sent to a removed destination");
    // Remove can be undone: the destination comes back as it was.
    driver.wait_for("//*[@id='undo-text']", |t| t.starts_with("Removed second"));
    driver.click_at("//button[normalize-space()='Undo']");
    bin.wait_for_line("configuration applied: + second");
    assert!(
        receives(&third, ADDED_WITHIN),
        "nothing reached the destination back by Undo"
    );
    // Applied first, then saved: the answer says when it is.
    driver.wait_for("//*[@id='form-result']", |t| {
        t.starts_with("added destination \"second\"") && t.contains("saved in")
    });
    let written = std::fs::read_to_string(file.path()).unwrap();
    assert!(
        written.contains(&format!("addr = \"{third_addr}\""))
            && written.contains("format = \"fh4\"")
            && written.contains("max_age = \"50ms\""),
        "undone as it was: {written}"
    );
    driver.wait_for("//tr[@data-name='second']/td[@class='rate']", |t| {
        t.parse::<f64>().is_ok_and(|v| v > 0.0)
    });
    driver.click_at("//tr[@data-name='second']//button[normalize-space()='Remove']");
    bin.wait_for_line("configuration applied: - second");
    assert!(stops(&third), "still sent to a removed destination");
    driver.wait_for("//*[@id='form-result']", |t| {
        t.starts_with("removed destination \"second\"") && t.contains("saved in")
    });
    assert!(
        receives(&first, Duration::from_secs(1)),
        "first still relayed to"
    );
    assert_eq!(
        std::fs::read_to_string(file.path()).unwrap().trim_end(),
        text.trim_end()
    );

    drive.stop();
    drop(driver);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// Issue 25: the page's form offers MQTT (its keys shown for an mqtt://
/// address) and json/influx with their fields; the password typed goes to
/// the file, never back to the page, and a change that doesn't type it keeps
/// it. Frames reach a real broker on the topic the page gave.
#[test]
fn the_page_adds_an_mqtt_destination_and_never_shows_its_password() {
    if !require_tool(
        "chromium",
        runs(chromium()) && runs("chromedriver"),
        "install Debian's chromium and chromium-driver",
    ) || !crate::mqtt::mosquitto_available()
    {
        return;
    }
    let dir = TempPath::dir("mosquitto-page");
    let broker = crate::mqtt::Mosquitto::start(dir.path(), "allow_anonymous true");
    let (first, first_addr) = receiver();
    let text = page_toml("fh6", first_addr, "127.0.0.1:0");
    let file = TempPath::file("mqtt-page.toml", &text);
    let (bin, listen, url) = relay_with_page_file(&file);
    let drive = Drive::start(listen);
    let driver = Driver::start();
    driver.session("POST", "/url", &json!({ "url": url }));
    driver.wait_for("//tr[@data-name='first']/td[@class='rate']", |t| {
        t.parse::<f64>().is_ok_and(|v| v > 0.0)
    });
    let shown = |id: &str| {
        driver.run(&format!("return !document.getElementById('{id}').hidden;")) == json!(true)
    };
    assert!(
        !shown("dest-topic") && !shown("dest-fields"),
        "nothing to show yet"
    );
    let topic = crate::mqtt::topic("page");
    driver.type_into(&driver.labelled("Name"), "league");
    driver.type_into(&driver.labelled("Address"), &broker.addr());
    assert!(
        shown("dest-topic") && shown("dest-password"),
        "the broker's keys"
    );
    assert!(
        shown("dest-fields"),
        "an MQTT destination sends json by default"
    );
    driver.type_into(&driver.labelled("Topic"), &topic);
    driver.type_into(&driver.labelled("Username"), "driver7");
    driver.type_into(&driver.labelled("Password"), "s3cret pass");
    driver.type_into(
        &driver.labelled("Fields (empty = all)"),
        "TimestampMS, speed_kmh",
    );
    let data = crate::mqtt::Sub::start(broker.port, &topic, &[]);
    driver.click_at("//button[normalize-space()='Add']");
    driver.wait_for("//*[@id='form-result']", |t| {
        t.starts_with("added destination \"league\"") && t.contains("saved in")
    });
    let m = data.next();
    let o: Value = serde_json::from_str(&m.payload).unwrap();
    assert!(o["TimestampMS"].is_u64() && o["speed_kmh"].is_f64(), "{o}");
    assert_eq!(o.as_object().unwrap().len(), 2, "the fields asked for: {o}");
    let written = std::fs::read_to_string(file.path()).unwrap();
    for part in [
        format!("addr = \"{}\"", broker.addr()),
        format!("topic = \"{topic}\""),
        "username = \"driver7\"".to_owned(),
        "password = \"s3cret pass\"".to_owned(),
        "fields = [\"TimestampMS\", \"speed_kmh\"]".to_owned(),
    ] {
        assert!(written.contains(&part), "{part} not in:\n{written}");
    }
    assert!(
        !written.contains("max_rate"),
        "MQTT's default rate: {written}"
    );
    driver.wait_for("//tr[@data-name='league']/td[@data-label='Address']", |t| {
        t.ends_with(&format!("→ {topic}"))
    });
    driver.wait_for("//tr[@data-name='league']/td[@data-label='Format']", |t| {
        t == "json: TimestampMS, speed_kmh"
    });

    // Edit: the form is filled from the relay's snapshot, which has no
    // password; Save with another format keeps the one in the file.
    driver.click_at("//tr[@data-name='league']//button[normalize-space()='Edit']");
    driver.wait_for("//*[@id='add']", |t| t == "Save");
    let password = driver.run(
        "const p = document.getElementById('dest-password'); return [p.value, p.placeholder];",
    );
    assert_eq!(password, json!(["", "unchanged"]));
    let page = driver.run("return document.documentElement.outerHTML;");
    assert!(
        !page.to_string().contains("s3cret"),
        "the password is on the page"
    );
    let format = driver.labelled("Format");
    let influx = driver
        .find("//*[@id='dest-format']/option[@value='influx']")
        .expect("influx in the Format list");
    driver.click(&format);
    driver.click(&influx);
    driver.click_at("//button[normalize-space()='Save']");
    driver.wait_for("//*[@id='form-result']", |t| {
        t.starts_with("changed destination \"league\"") && t.contains("saved in")
    });
    let written = std::fs::read_to_string(file.path()).unwrap();
    assert!(
        written.contains("password = \"s3cret pass\"") && written.contains("format = \"influx\""),
        "{written}"
    );
    loop {
        let m = data.next();
        if m.payload.starts_with("forza,game=fh6") {
            break;
        }
    }
    let web: SocketAddr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .and_then(|a| a.parse().ok())
        .expect("the page's address");
    let snapshot = http::get(web, "/api/snapshot", &[]);
    assert_eq!(snapshot.status, 200);
    assert!(
        snapshot.body.contains("\"password_set\":true"),
        "{}",
        snapshot.body
    );
    assert!(!snapshot.body.contains("s3cret"), "{}", snapshot.body);
    drive.stop();
    drop(driver);
    bin.signal("INT");
    let done = bin.wait();
    drop(first);
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(!done.stderr.contains("s3cret"), "{}", done.stderr);
    assert_eq!(
        crate::mqtt::Sub::retained(broker.port, &format!("{topic}/status"), &[]).payload,
        "offline"
    );
}

/// The relay running `file`'s text (its `[web]` on loopback), with the page's
/// URL: the binary, where it listens, the URL.
fn relay_with_page_file(file: &TempPath) -> (Bin, SocketAddr, String) {
    let mut bin = Bin::spawn(&["run", "--config", file.path().to_str().unwrap()], None);
    let listen = bin.wait_for_address("listen on ");
    let line = bin.wait_for_line("web page on http://");
    let url = line[line.find("http://").unwrap()..].trim().to_owned();
    bin.wait_for_line("running; press Ctrl-C to stop");
    (bin, listen, url)
}

/// Issue 24: on a phone (390 × 844, mobile emulation) nothing scrolls
/// sideways: with three destinations each is a card whose Edit button is on
/// the screen, the form fits, and while racing the car comes first.
#[test]
fn on_a_phone_nothing_scrolls_sideways_and_the_car_comes_first_while_racing() {
    if !require_tool(
        "chromium",
        runs(chromium()) && runs("chromedriver"),
        "install Debian's chromium and chromium-driver",
    ) {
        return;
    }
    let receivers: Vec<(UdpSocket, SocketAddr)> = (0..3).map(|_| receiver()).collect();
    let names = ["simhub", "motion-rig-with-a-long-name", "dash"];
    let mut text = with_page(&listen_toml("fh5"), "127.0.0.1:0");
    for ((_, addr), name) in receivers.iter().zip(names) {
        text.push_str(&destination_toml(
            name,
            *addr,
            "fm7",
            "only_race_on = true\nmax_rate = 60\n",
        ));
    }
    let file = TempPath::file("phone.toml", &text);
    let (bin, listen, url) = relay_with_page_file(&file);
    let drive = Drive::start(listen);
    let driver = Driver::phone();
    driver.session("POST", "/url", &json!({ "url": url }));
    for name in names {
        driver.wait_for(
            &format!("//tr[@data-name='{name}']/td[contains(@class,'rate')]"),
            |t| t.parse::<f64>().is_ok_and(|v| v > 0.0),
        );
    }
    // The car shows, racing: it is on top.
    driver.wait_for("//*[@id='speed-kmh']", |t| t.parse::<f64>().is_ok());
    let deadline = Instant::now() + SHOWN_WITHIN;
    let layout = loop {
        let layout = driver.run(
            "const right = (sel) => [...document.querySelectorAll(sel)]\
               .map((e) => e.getBoundingClientRect().right); \
             const top = (id) => document.getElementById(id).getBoundingClientRect().top; \
             return {screen: screen.width, scroll: document.documentElement.scrollWidth, \
                     edits: right('button.edit'), \
                     form: right('#add-form input, #add-form select, #add-form button:not([hidden])'), \
                     car: top('car-section'), input: top('input-section'), \
                     destinations: top('destinations-section')};",
        );
        if layout["car"].as_f64() < layout["input"].as_f64() || Instant::now() >= deadline {
            break layout;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let screen = layout["screen"].as_f64().unwrap();
    assert_eq!(screen, f64::from(PHONE.0), "{layout}");
    assert!(
        layout["scroll"].as_f64().unwrap() <= screen,
        "the page scrolls sideways: {layout}"
    );
    let edits = layout["edits"].as_array().unwrap();
    assert_eq!(edits.len(), 3, "{layout}");
    for right in edits.iter().chain(layout["form"].as_array().unwrap()) {
        assert!(
            right.as_f64().unwrap() <= screen,
            "off the screen: {layout}"
        );
    }
    assert!(
        layout["car"].as_f64() < layout["input"].as_f64()
            && layout["car"].as_f64() < layout["destinations"].as_f64(),
        "the car comes first while racing: {layout}"
    );
    driver.screenshot("web-phone.png");
    driver.run("document.getElementById('destinations-section').scrollIntoView(); return null;");
    driver.screenshot("web-phone-destinations.png");
    drive.stop();
    drop(driver);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    drop(receivers);
}

/// Issue 24: served beyond this computer (`0.0.0.0`) and opened through
/// 127.0.0.1 with the token, the page shows "Open on your phone" with a QR
/// code that decodes (zbar's `zbarimg`) to the page's URL on the network:
/// its port and its token, the URL the page and the console show.
#[test]
fn served_to_the_network_the_page_shows_a_qr_code_of_its_address_with_the_token() {
    if !require_tool(
        "chromium",
        runs(chromium()) && runs("chromedriver"),
        "install Debian's chromium and chromium-driver",
    ) || !require_tool("zbarimg", runs("zbarimg"), "install Debian's zbar-tools")
    {
        return;
    }
    let (_first, first_addr) = receiver();
    let text = page_toml("fh5", first_addr, "0.0.0.0:0");
    let file = TempPath::file("qr.toml", &text);
    let mut bin = Bin::spawn(&["run", "--config", file.path().to_str().unwrap()], None);
    let (web, token) = crate::web::web_addr(&mut bin);
    let port = web.port();
    let phone_line = bin.wait_for_line("on a phone or tablet on the same network, open ");
    let console_url = phone_line
        .split("open ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    bin.wait_for_line("running; press Ctrl-C to stop");

    let driver = Driver::start();
    let url = format!("http://127.0.0.1:{port}/?token={token}");
    driver.session("POST", "/url", &json!({ "url": url }));
    let shown = driver.wait_for("//*[@id='phone-url']", |t| t.starts_with("http://"));
    // The image has loaded.
    let deadline = Instant::now() + SHOWN_WITHIN;
    while driver
        .run("return document.getElementById('phone-qr').naturalWidth;")
        .as_u64()
        .unwrap_or(0)
        == 0
    {
        assert!(Instant::now() < deadline, "the QR code did not load");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The code as a phone's camera sees it: read from a screenshot of the
    // element, again until it reads (a screenshot taken as the page redraws
    // can catch it half painted; seen once in a loaded CI run).
    let png = TempPath::file("qr.png", "");
    let decoded = loop {
        let img = driver.find("//*[@id='phone-qr']").expect("the QR code");
        let shot = driver.session("GET", &format!("/element/{img}/screenshot"), &json!({}));
        std::fs::write(png.path(), base64(shot.as_str().expect("a screenshot"))).unwrap();
        let decoded = Command::new("zbarimg")
            .args(["--raw", "-q"])
            .arg(png.path())
            .output()
            .expect("run zbarimg");
        if decoded.status.success() {
            break decoded;
        }
        assert!(
            Instant::now() < deadline,
            "zbarimg read no code within {SHOWN_WITHIN:?}: {decoded:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let decoded = String::from_utf8(decoded.stdout).unwrap().trim().to_owned();
    assert!(
        decoded.starts_with("http://")
            && decoded.contains(&format!(":{port}/"))
            && decoded.ends_with(&format!("/?token={token}")),
        "{decoded}"
    );
    assert_eq!(decoded, shown, "the code is the address the page shows");
    assert_eq!(decoded, console_url, "and the one the console shows");
    drop(driver);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
    // The console's code: lines of half blocks.
    assert!(done.stderr.contains("▀▀▀"), "{}", done.stderr);
}

/// Issue 24: "Start at login" on the page shows what `autostart status`
/// says, and turns it on and off through the same code: under a temporary
/// HOME and XDG_CONFIG_HOME, with no systemd user session, the desktop entry
/// is written naming the running configuration, then removed.
#[cfg(all(unix, not(target_os = "macos")))]
#[test]
fn start_at_login_on_the_page_writes_and_removes_the_login_entry() {
    if !require_tool(
        "chromium",
        runs(chromium()) && runs("chromedriver"),
        "install Debian's chromium and chromium-driver",
    ) {
        return;
    }
    let home = TempPath::dir("login-home");
    let config_home = home.path().join("config");
    let runtime = home.path().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    let (_first, first_addr) = receiver();
    let text = page_toml("fh5", first_addr, "127.0.0.1:0");
    let file = TempPath::file("login.toml", &text);
    let mut command = common::bin::command();
    command
        .args(["run", "--config", file.path().to_str().unwrap()])
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", &config_home)
        .env("XDG_RUNTIME_DIR", &runtime);
    let mut bin = Bin::spawn_command(command);
    let line = bin.wait_for_line("web page on http://");
    let url = line[line.find("http://").unwrap()..].trim().to_owned();
    bin.wait_for_line("running; press Ctrl-C to stop");
    let entry = config_home.join("autostart/forza-relay.desktop");

    let driver = Driver::start();
    driver.session("POST", "/url", &json!({ "url": url }));
    driver.wait_for("//*[@id='autostart-state']", |t| {
        t == "off: forza-relay does not start at login"
    });
    driver.click_at("//*[@id='autostart']");
    let said = driver.wait_for("//*[@id='autostart-state']", |t| t.starts_with("on: "));
    assert!(
        said.starts_with(&format!("on: {} starts at login", entry.display())),
        "{said}"
    );
    let written = std::fs::read_to_string(&entry).expect("the login entry is written");
    let config = std::fs::canonicalize(file.path()).unwrap();
    assert!(
        written.contains(&format!("\"--config\" \"{}\"", config.display())),
        "{written}"
    );
    assert_eq!(
        driver.run("return document.getElementById('autostart').checked;"),
        true
    );
    bin.wait_for_line("web page: start at login: wrote ");
    driver.click_at("//*[@id='autostart']");
    driver.wait_for("//*[@id='autostart-state']", |t| t.starts_with("off: "));
    assert!(!entry.exists(), "the login entry is removed");
    drop(driver);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// A game-like picture behind the overlay for its screenshot: sky, grass, a
/// road to the horizon with its lines (CSS gradients, set from the test, not
/// the page).
const GAME_BACKGROUND: &str = "document.documentElement.style.background = \
    'conic-gradient(from 157deg at 50% 52%, #fff 0 1deg, transparent 1deg), \
     conic-gradient(from 202deg at 50% 52%, #fff 0 1deg, transparent 1deg), \
     conic-gradient(from 179.5deg at 50% 52%, #f2d24b 0 1deg, transparent 1deg), \
     conic-gradient(from 156deg at 50% 52%, #4a4d52 0 48deg, transparent 48deg), \
     linear-gradient(transparent 52%, #6f9a50 52%, #3f6b32), \
     linear-gradient(#5d95d6, #cfe6f7 52%)'; \
    document.documentElement.style.minHeight = '100vh'; return null;";

/// Issue 24: `/overlay` is transparent (html and body), shows the speed sent
/// (km/h, and mph with `?units=mph`), and `?show=` picks its parts; saves the
/// docs' screenshot over a game-like picture (target/overlay.png; docs/ with
/// FORZA_RELAY_BLESS=1).
#[test]
fn the_overlay_is_transparent_and_shows_the_speed_sent() {
    if !require_tool(
        "chromium",
        runs(chromium()) && runs("chromedriver"),
        "install Debian's chromium and chromium-driver",
    ) {
        return;
    }
    let (_first, first_addr) = receiver();
    let text = page_toml("fh5", first_addr, "127.0.0.1:0");
    let file = TempPath::file("overlay.toml", &text);
    let (bin, listen, url) = relay_with_page_file(&file);
    let base = url.trim_end_matches('/').to_owned();
    let drive = Drive::start(listen);
    let speed = f64::from(drive.hold());
    let driver = Driver::with(json!({
        "binary": chromium(),
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--window-size=800,600"],
    }));

    driver.session("POST", "/url", &json!({ "url": format!("{base}/overlay") }));
    let kmh = speed * 3.6;
    driver.wait_for("//*[@id='speed']", |t| {
        t.parse::<f64>().is_ok_and(|v| (v - kmh).abs() <= 1.0)
    });
    driver.wait_for("//*[@id='unit']", |t| t == "km/h");
    driver.wait_for("//*[@id='gear']", |t| !t.is_empty() && t != "–");
    // The g readout is numbers while racing; for a frame whose accelerations
    // are NaN, which the stream sends as nulls (tests/it/web.rs), dashes —
    // never a made-up "0.00 g". Drawn and read in one script, between two
    // frames of the stream.
    driver.wait_for("//*[@id='g-text']", |t| {
        t.starts_with("lat ") && t.ends_with(" g") && !t.contains('–')
    });
    let unknown = driver.run(
        "render({g_lat: null, g_long: null}); \
         return document.getElementById('g-text').textContent;",
    );
    assert_eq!(unknown, "lat – g, long – g");
    let backgrounds = driver.run(
        "const bg = (e) => getComputedStyle(e).backgroundColor; \
         return [bg(document.documentElement), bg(document.body), \
                 getComputedStyle(document.documentElement).backgroundImage];",
    );
    assert_eq!(
        backgrounds,
        json!(["rgba(0, 0, 0, 0)", "rgba(0, 0, 0, 0)", "none"]),
        "transparent html and body"
    );
    driver.session(
        "POST",
        "/url",
        &json!({ "url": format!("{base}/overlay?units=mph&show=speed,gear&scale=1.5") }),
    );
    let mph = speed * 3600.0 / 1609.344;
    driver.wait_for("//*[@id='speed']", |t| {
        t.parse::<f64>().is_ok_and(|v| (v - mph).abs() <= 1.0)
    });
    driver.wait_for("//*[@id='unit']", |t| t == "mph");
    let parts = driver.run(
        "return [...document.querySelectorAll('.part')].map((p) => [p.dataset.part, \
         getComputedStyle(p).display !== 'none']);",
    );
    assert_eq!(
        parts,
        json!([
            ["speed", true],
            ["gear", true],
            ["rpm", false],
            ["pedals", false],
            ["g", false],
            ["lap", false],
            ["delta", false],
            ["laps", false]
        ]),
    );
    let scale = driver
        .run("return getComputedStyle(document.documentElement).getPropertyValue('--scale');");
    assert_eq!(scale, "1.5");

    // The docs' picture: the car at speed, over a game-like scene.
    driver.session("POST", "/url", &json!({ "url": format!("{base}/overlay") }));
    drive.release();
    driver.wait_for("//*[@id='speed']", |t| {
        t.parse::<f64>().is_ok_and(|v| v >= 90.0)
    });
    driver.run(GAME_BACKGROUND);
    driver.screenshot("overlay.png");
    drive.stop();
    drop(driver);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// Issue 34: a simulated lap driven while the page is open shows in its lap
/// table, the lap's time the game's LastLap; and a browser that prefers a
/// dark scheme gets the dark page (a black background; screenshot
/// web-dark-laps.png).
#[test]
fn the_page_shows_the_lap_table_after_a_simulated_lap_and_goes_dark_when_asked() {
    if !require_tool(
        "chromium",
        runs(chromium()) && runs("chromedriver"),
        "install Debian's chromium and chromium-driver",
    ) {
        return;
    }
    let (_tool, tool_addr) = receiver();
    let file = TempPath::file(
        "laps.toml",
        &(with_page(&listen_toml("fh6"), "127.0.0.1:0")
            + &destination_toml("tool", tool_addr, "same", "")),
    );
    let (bin, listen, url) = relay_with_page_file(&file);
    let driver = Driver::with(json!({
        "binary": chromium(),
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--window-size=1280,1500",
                 "--force-dark-mode", "--blink-settings=preferredColorScheme=0"],
    }));
    driver.session("POST", "/url", &json!({ "url": url }));
    // The page's feed listens once the page is open: wait for its counters.
    driver.wait_for("//*[@id='destinations']//tr[@data-name='tool']", |_| true);
    // A lap and a little more, 40 frames every 10 ms (a minute's drive in
    // about 20 s would be too slow; the page's tap keeps up at this pace).
    let mut sim = Simulator::new(Format::Fh6, 5);
    let mut buf = [0u8; MAX_LEN];
    let sender = Sender::new(listen);
    let mut last_lap = None;
    let mut lap = None;
    let mut after = 0;
    let start = Instant::now();
    let mut sent = 0u64;
    while after < 120 {
        let n = sim.frame(Duration::from_micros(16_667), &mut buf).unwrap();
        let p = Packet::new_checked(&buf[..n], Format::Fh6).unwrap();
        if p.race_on() {
            let number = p.lap_number().unwrap();
            if last_lap.is_none() && lap.is_some_and(|l| l != number) {
                last_lap = p.last_lap();
            }
            lap = Some(number);
        }
        if last_lap.is_some() {
            after += 1;
        }
        sender.send(&buf[..n]);
        sent += 1;
        if sent.is_multiple_of(40) {
            let due = start + Duration::from_millis(10 * sent / 40);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        assert!(sent < 60 * 60 * 10, "no lap in 10 minutes of driving");
    }
    let seconds = last_lap.unwrap();
    let minutes = (seconds / 60.0).floor();
    let shown = format!("{}:{:06.3}", minutes as u32, seconds - 60.0 * minutes);
    let row = "//table[@id='lap-table']/tbody/tr[1]";
    driver.wait_for(&format!("{row}/td[2]"), |t| t == shown);
    assert_eq!(driver.text_at(&format!("{row}/td[1]")).unwrap(), "★ 1");
    assert_eq!(driver.text_at(&format!("{row}/td[3]")).unwrap(), "–");
    let look = driver.run(
        "return {dark: matchMedia('(prefers-color-scheme: dark)').matches, \
                 background: getComputedStyle(document.body).backgroundColor};",
    );
    assert_eq!(look["dark"], true, "{look}");
    assert_eq!(look["background"], "rgb(0, 0, 0)", "{look}");
    driver.run("document.getElementById('lap-table').scrollIntoView(); return null;");
    driver.screenshot("web-dark-laps.png");
    drop(driver);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// Issue 34: `/overlay?show=delta,laps` shows only the live delta and the
/// session's laps: after a simulated lap, its row (lap 1, the game's
/// LastLap) and a signed delta once the next lap is under way; the other
/// parts stay hidden.
#[test]
fn the_overlay_shows_the_delta_and_the_laps_when_asked() {
    if !require_tool(
        "chromium",
        runs(chromium()) && runs("chromedriver"),
        "install Debian's chromium and chromium-driver",
    ) {
        return;
    }
    let (_first, first_addr) = receiver();
    let file = TempPath::file(
        "overlay-laps.toml",
        &page_toml("fh6", first_addr, "127.0.0.1:0"),
    );
    let (bin, listen, url) = relay_with_page_file(&file);
    let base = url.trim_end_matches('/').to_owned();
    let driver = Driver::with(json!({
        "binary": chromium(),
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--window-size=800,600"],
    }));
    driver.session(
        "POST",
        "/url",
        &json!({ "url": format!("{base}/overlay?show=delta,laps") }),
    );
    let parts = driver.run(
        "return [...document.querySelectorAll('.part')].filter((p) => \
         getComputedStyle(p).display !== 'none').map((p) => p.dataset.part);",
    );
    assert_eq!(parts, json!(["delta", "laps"]));
    // Give the stream time to open, then drive a lap and a third of the next
    // at 2,000 frames a second: the overlay samples 30 a second.
    std::thread::sleep(Duration::from_millis(500));
    let mut sim = Simulator::new(Format::Fh6, 5);
    let mut buf = [0u8; MAX_LEN];
    let sender = Sender::new(listen);
    let (mut lap, mut last_lap, mut after) = (None, None, 0);
    let start = Instant::now();
    let mut sent = 0u64;
    while after < 1_000 {
        let n = sim.frame(Duration::from_micros(16_667), &mut buf).unwrap();
        let p = Packet::new_checked(&buf[..n], Format::Fh6).unwrap();
        if p.race_on() {
            let number = p.lap_number().unwrap();
            if last_lap.is_none() && lap.is_some_and(|l| l != number) {
                last_lap = p.last_lap();
            }
            lap = Some(number);
        }
        if last_lap.is_some() {
            after += 1;
        }
        sender.send(&buf[..n]);
        sent += 1;
        if sent.is_multiple_of(20) {
            let due = start + Duration::from_millis(10 * sent / 20);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
        assert!(sent < 60 * 60 * 10, "no lap in 10 minutes of driving");
    }
    let seconds = last_lap.unwrap();
    let minutes = (seconds / 60.0).floor();
    let shown = format!("{}:{:06.3}", minutes as u32, seconds - 60.0 * minutes);
    driver.wait_for("//tbody[@id='laps']/tr[1]/td[2]", |t| t == shown);
    assert_eq!(
        driver.text_at("//tbody[@id='laps']/tr[1]/td[1]").unwrap(),
        "★ 1"
    );
    driver.wait_for("//*[@id='delta']", |t| {
        (t.starts_with('+') || t.starts_with('-')) && t[1..].parse::<f64>().is_ok()
    });
    drop(driver);
    bin.signal("INT");
    let done = bin.wait();
    assert_eq!(done.code(), 0, "{}", done.stderr);
}
