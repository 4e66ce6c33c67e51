//! HTTP/1.1 by hand on any byte stream (plain TCP or TLS), for the door's limit tests: a
//! request head with whatever `Host`, `Content-Length` and headers the test says, a body
//! sent in parts or never finished, and the answer read until the server closes.

use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// One HTTP/1.1 answer.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (a Connect answer or error).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The Connect error code of the answer (`""` if there is none).
    pub fn code(&self) -> String {
        self.json()["code"].as_str().unwrap_or_default().to_owned()
    }
}

/// The head of a POST to ClaimService's `method`, declaring `length` body bytes.
pub fn head(
    method: &str,
    host: &str,
    content_type: &str,
    length: usize,
    headers: &[(&str, &str)],
) -> String {
    let mut head = format!(
        "POST /claimd.v1.ClaimService/{method} HTTP/1.1\r\nHost: {host}\r\n\
         Content-Type: {content_type}\r\nContent-Length: {length}\r\nConnection: close\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// Sends `head` and `body` on `stream` (which may be less than the head declares).
pub async fn send<S: AsyncWrite + Unpin>(stream: &mut S, head: &str, body: &[u8]) {
    stream.write_all(head.as_bytes()).await.expect("send head");
    stream.write_all(body).await.expect("send body");
    stream.flush().await.expect("flush");
}

/// The answer on `stream`, read until the server closes the connection; `None` if it
/// does not within `bound` (or closes before a whole head).
pub async fn answer<S: AsyncRead + Unpin>(stream: &mut S, bound: Duration) -> Option<Answer> {
    let mut raw = Vec::new();
    let read = async {
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(bound, read).await.ok()?;
    parse(&raw)
}

/// An answer from its bytes.
pub fn parse(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v == "chunked")
    {
        body = dechunk(&body);
    }
    Some(Answer {
        status,
        headers,
        body,
    })
}

/// The body of a chunked answer.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[..end]).ok();
        let size = size
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 || raw.len() < end + 2 + size {
            break;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[(end + 4 + size).min(raw.len())..];
    }
    out
}
