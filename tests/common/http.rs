//! A small HTTP/1.1 client over a plain TCP stream, for the web page's tests
//! (the requests a browser sends, and the malformed ones it never does) and
//! for chromedriver's WebDriver protocol. One request per connection.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a response may take before the test fails.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// A response: status, headers (lower-case names), body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// Sends `raw` (a whole request, as bytes) and reads the response to its end;
/// `None` when the server closed the connection without one.
#[track_caller]
pub fn raw(addr: SocketAddr, raw: &[u8]) -> Option<Reply> {
    raw_within(addr, raw, HTTP_TIMEOUT)
}

/// [`raw`], waiting up to `within` for the response.
#[track_caller]
pub fn raw_within(addr: SocketAddr, raw: &[u8], within: Duration) -> Option<Reply> {
    let mut stream = TcpStream::connect_timeout(&addr, within).expect("connect");
    stream.set_read_timeout(Some(within)).unwrap();
    // A server that answers before reading all of it may reset the rest.
    let _ = stream.write_all(raw);
    // To the end of the body its Content-Length says, else to the close.
    let mut bytes = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
        }
        if complete(&bytes) {
            break;
        }
    }
    parse(&bytes)
}

/// Whether `bytes` hold a whole response with a Content-Length.
fn complete(bytes: &[u8]) -> bool {
    let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&bytes[..end]).to_ascii_lowercase();
    head.lines()
        .filter_map(|l| l.strip_prefix("content-length:"))
        .find_map(|v| v.trim().parse::<usize>().ok())
        .is_some_and(|len| bytes.len() >= end + 4 + len)
}

fn parse(bytes: &[u8]) -> Option<Reply> {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Some(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A request with `headers` (each `Name: value`) and a body.
#[track_caller]
pub fn request(addr: SocketAddr, method: &str, path: &str, headers: &[&str], body: &str) -> Reply {
    request_within(HTTP_TIMEOUT, addr, method, path, headers, body)
}

/// [`request`], waiting up to `within` for the response.
#[track_caller]
pub fn request_within(
    within: Duration,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> Reply {
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        text.push_str(&format!("Host: {addr}\r\n"));
    }
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    text.push_str(body);
    raw_within(addr, text.as_bytes(), within)
        .unwrap_or_else(|| panic!("no response to {method} {path} within {within:?}"))
}

/// `GET path`.
#[track_caller]
pub fn get(addr: SocketAddr, path: &str, headers: &[&str]) -> Reply {
    request(addr, "GET", path, headers, "")
}
