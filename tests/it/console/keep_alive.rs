//! A console client that keeps its connection (HTTP/1.1 keep-alive), as a browser or a
//! flood would: requests in turn on one socket, each answer read by its `Content-Length`.

use super::page::{header, text};
use crate::common::http1::{self, Answer};
use std::net::SocketAddr;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// One kept connection to the console.
pub struct Connection {
    stream: TcpStream,
    addr: SocketAddr,
    read: Vec<u8>,
}

impl Connection {
    /// A new connection to the console at `addr`.
    pub async fn open(addr: SocketAddr) -> Connection {
        let stream = TcpStream::connect(addr).await.expect("connects");
        // A head and its form in one segment each time: no Nagle wait for a delayed ACK.
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Connection {
            stream,
            addr,
            read: Vec::new(),
        }
    }

    /// `POST /login` with `key`, carrying the session `cookie` if any.
    pub async fn sign_in(&mut self, key: &str, cookie: Option<&str>) -> Answer {
        let body = serde_urlencoded::to_string([("key", key)]).expect("a form encodes");
        let head = format!(
            "POST /login HTTP/1.1\r\nHost: {}\r\n{}Content-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            cookie_line(cookie),
            body.len()
        );
        self.exchange(&head, body.as_bytes()).await
    }

    /// `GET path` with the session `cookie`.
    pub async fn get(&mut self, path: &str, cookie: &str) -> Answer {
        let cookie = cookie_line(Some(cookie));
        let head = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n{cookie}\r\n", self.addr);
        self.exchange(&head, b"").await
    }

    /// Whether `cookie` names a live session: a page that does not exist is looked up only
    /// after the session is (404 for a live one, 401 "Your session ended" otherwise).
    pub async fn is_live(&mut self, cookie: &str) -> bool {
        let answer = self.get("/no-such-page", cookie).await;
        match answer.status {
            404 => true,
            401 => false,
            other => panic!("{other}: {}", text(&answer)),
        }
    }

    /// Sends one request and reads its answer.
    async fn exchange(&mut self, head: &str, body: &[u8]) -> Answer {
        let request = [head.as_bytes(), body].concat();
        http1::send(&mut self.stream, "", &request).await;
        let end = loop {
            if let Some(at) = self.read.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = http1::parse(&self.read[..at + 4]).expect("an answer's head");
                let length = header(&head, "content-length").map_or(0, |l| l.parse().unwrap());
                if self.read.len() >= at + 4 + length {
                    break at + 4 + length;
                }
            }
            let mut buf = [0u8; 8192];
            let n = self.stream.read(&mut buf).await.expect("reads");
            assert!(n > 0, "the console closed a kept connection");
            self.read.extend_from_slice(&buf[..n]);
        };
        let answer = http1::parse(&self.read[..end]).expect("an answer");
        self.read.drain(..end);
        answer
    }
}

fn cookie_line(cookie: Option<&str>) -> String {
    cookie.map_or(String::new(), |c| format!("Cookie: claimd_console={c}\r\n"))
}

/// The session cookie a sign-in's answer sets (it must be a 303 that sets one).
pub fn session_cookie(answer: &Answer) -> String {
    assert_eq!(answer.status, 303, "signed in: {}", text(answer));
    header(answer, "set-cookie")
        .and_then(|c| c.strip_prefix("claimd_console="))
        .and_then(|rest| rest.split(';').next())
        .expect("the cookie names the session")
        .to_owned()
}
