//! A console client by hand: one request per connection (`Connection: close`), a form
//! encoded as a browser would, the session cookie carried by the test.

use crate::common::app::TestApp;
use crate::common::http1::{self, Answer};
use std::net::SocketAddr;
use std::time::Duration;

/// A TestApp with the console on 127.0.0.1:0 and a short key cache (revocations show
/// within 200 ms), configured further by `configure`.
pub async fn console_app(
    backend: crate::common::app::Backend,
    configure: impl FnOnce(&mut claimd::config::Config) + 'static,
) -> TestApp {
    TestApp::builder()
        .backend(backend)
        .configure(|c| {
            c.console_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            c.key_cache_ttl = Duration::from_millis(200);
        })
        .configure(configure)
        .spawn()
        .await
}

/// The console's address (the app was built by [`console_app`]).
pub fn addr(app: &TestApp) -> SocketAddr {
    app.console_addr.expect("the console is on")
}

/// Sends one request and reads the answer (within 10 s).
pub async fn request(addr: SocketAddr, head: String, body: &[u8]) -> Answer {
    request_within(addr, head, body, Duration::from_secs(10)).await
}

/// Sends one request and reads the answer, which must come within `bound`.
async fn request_within(addr: SocketAddr, head: String, body: &[u8], bound: Duration) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    http1::send(&mut stream, &head, body).await;
    http1::answer(&mut stream, bound).await.expect("an answer")
}

fn head(
    method: &str,
    path: &str,
    addr: SocketAddr,
    cookie: Option<&str>,
    extra: &[(&str, &str)],
    length: usize,
) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(cookie) = cookie {
        head.push_str(&format!("Cookie: claimd_console={cookie}\r\n"));
    }
    if method == "POST" {
        head.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        head.push_str(&format!("Content-Length: {length}\r\n"));
    }
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// `GET path`, with the session `cookie` if any.
pub async fn get(addr: SocketAddr, path: &str, cookie: Option<&str>) -> Answer {
    request(addr, head("GET", path, addr, cookie, &[], 0), b"").await
}

/// `POST path` with `form`, the session `cookie` if any, and `extra` headers.
pub async fn post(
    addr: SocketAddr,
    path: &str,
    form: &[(&str, &str)],
    cookie: Option<&str>,
    extra: &[(&str, &str)],
) -> Answer {
    post_within(addr, path, form, cookie, extra, Duration::from_secs(10)).await
}

/// [`post`], its answer awaited up to `bound` (an action that waits for the database).
pub async fn post_within(
    addr: SocketAddr,
    path: &str,
    form: &[(&str, &str)],
    cookie: Option<&str>,
    extra: &[(&str, &str)],
    bound: Duration,
) -> Answer {
    let body = serde_urlencoded::to_string(form).expect("a form encodes");
    let head = head("POST", path, addr, cookie, extra, body.len());
    request_within(addr, head, body.as_bytes(), bound).await
}

/// A header's value.
pub fn header<'a>(answer: &'a Answer, name: &str) -> Option<&'a str> {
    answer
        .headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The body as text.
pub fn text(answer: &Answer) -> String {
    String::from_utf8_lossy(&answer.body).into_owned()
}

/// Signs in with `key`; the session cookie's value.
pub async fn sign_in(addr: SocketAddr, key: &str) -> String {
    let answer = post(addr, "/login", &[("key", key)], None, &[]).await;
    assert_eq!(answer.status, 303, "signed in: {}", text(&answer));
    let cookie = header(&answer, "set-cookie").expect("a session cookie");
    let value = cookie
        .strip_prefix("claimd_console=")
        .and_then(|rest| rest.split(';').next())
        .expect("the cookie names the session");
    value.to_owned()
}

/// The session's CSRF token, read from a page's forms.
pub async fn csrf(addr: SocketAddr, cookie: &str) -> String {
    let page = text(&get(addr, "/", Some(cookie)).await);
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with the token")
        + 19;
    page[at..]
        .split('"')
        .next()
        .expect("the token ends")
        .to_owned()
}

/// The `/receipt` path of `namespace`/`key`.
pub fn receipt_path(namespace: &str, key: &str) -> String {
    let query = serde_urlencoded::to_string([("namespace", namespace), ("key", key)]).unwrap();
    format!("/receipt?{query}")
}
