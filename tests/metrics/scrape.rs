//! Prometheus scrapes as a test makes them: a plain HTTP/1.1 GET over TCP, and a strict
//! parser of the text exposition that fails on any line that is neither `# HELP`/`# TYPE`
//! nor `name{labels} value` with a float value.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An HTTP response: the status code, the head's lines after the status line, the body.
#[derive(Debug)]
pub struct HttpResponse {
    /// e.g. 200.
    pub status: u16,
    /// `name: value` lines, as sent.
    pub headers: Vec<String>,
    /// The body as text.
    pub body: String,
}

/// `GET path` on `addr` with `Connection: close`, read to the end.
pub async fn get(addr: SocketAddr, path: &str) -> HttpResponse {
    // The server under test is listening; anything else is a test failure.
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let raw = String::from_utf8(raw).expect("an HTTP response in UTF-8");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("a status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    HttpResponse {
        status,
        headers: lines.map(str::to_owned).collect(),
        body: body.to_owned(),
    }
}

/// `GET /metrics` on `addr`: demands 200 and the text format's content type, and returns
/// the parsed exposition and its text.
pub async fn metrics(addr: SocketAddr) -> (Exposition, String) {
    let response = get(addr, "/metrics").await;
    assert_eq!(response.status, 200, "{response:?}");
    let content_type = response
        .headers
        .iter()
        .find(|h| h.to_ascii_lowercase().starts_with("content-type:"))
        .expect("a content type");
    let text_format = "text/plain; version=0.0.4";
    assert!(content_type.contains(text_format), "{content_type}");
    (parse(&response.body), response.body)
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name, e.g. `claimd_rpc_duration_seconds_count`.
    pub name: String,
    /// The labels.
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
}

/// A parsed exposition: the samples and the `# TYPE` of each metric family.
#[derive(Debug, Default)]
pub struct Exposition {
    /// Every sample, in order.
    pub samples: Vec<Sample>,
    /// Family name → `counter`, `gauge`, `histogram`, …
    pub types: BTreeMap<String, String>,
}

impl Exposition {
    /// The value of the sample `name` with exactly `labels`, 0 if there is none.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let found = self
            .samples
            .iter()
            .find(|s| s.name == name && s.labels == want);
        found.map(|s| s.value).unwrap_or(0.0)
    }

    /// Every sample of `name`.
    pub fn all(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }
}

/// Two scrapes of one server: what moved in between.
#[derive(Debug)]
pub struct Moves {
    /// The earlier scrape.
    pub before: Exposition,
    /// The later scrape.
    pub after: Exposition,
}

impl Moves {
    /// How much the sample `name` with exactly `labels` moved (absent counts as 0).
    pub fn of(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.after.value(name, labels) - self.before.value(name, labels)
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses the text exposition, panicking with the line on anything malformed.
pub fn parse(text: &str) -> Exposition {
    let mut exposition = Exposition::default();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(valid_name(name), "bad HELP line {line:?}");
            assert!(!help.is_empty(), "empty HELP in {line:?}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("{line:?}"));
            assert!(valid_name(name), "bad TYPE line {line:?}");
            let kinds = ["counter", "gauge", "histogram", "summary", "untyped"];
            assert!(kinds.contains(&kind), "bad TYPE in {line:?}");
            exposition.types.insert(name.into(), kind.into());
        } else {
            exposition.samples.push(sample(line));
        }
    }
    exposition
}

/// `name{k="v",…} value`.
fn sample(line: &str) -> Sample {
    let (series, value) = line
        .rsplit_once(' ')
        .unwrap_or_else(|| panic!("no value in {line:?}"));
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}")),
    };
    let (name, labels) = match series.split_once('{') {
        None => (series, BTreeMap::new()),
        Some((name, rest)) => {
            let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line:?}"));
            (name, labels(body, line))
        }
    };
    assert!(valid_name(name), "bad metric name in {line:?}");
    Sample {
        name: name.into(),
        labels,
        value,
    }
}

/// `k="v",k2="v2"` with `\\`, `\"` and `\n` escapes.
fn labels(mut body: &str, line: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    while !body.is_empty() {
        let (key, rest) = body.split_once("=\"").unwrap_or_else(|| panic!("{line:?}"));
        assert!(valid_name(key), "bad label name in {line:?}");
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    _ => panic!("bad escape in {line:?}"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => panic!("unterminated label value in {line:?}"),
            }
        };
        labels.insert(key.to_owned(), value);
        body = &rest[end + 1..];
        body = body.strip_prefix(',').unwrap_or(body);
    }
    labels
}
