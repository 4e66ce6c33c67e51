//! What the Patroni cluster says about itself: Patroni's REST API (`GET /cluster`: each
//! member's role and state) over plain HTTP/1.0, and HAProxy's stats socket (`show stat`:
//! which servers it counts as up). Every read has a deadline.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long one question may take.
const DEADLINE: Duration = Duration::from_secs(2);

/// One member of the cluster as Patroni sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// `leader`, `sync_standby` or `replica`.
    pub role: String,
    /// `running`, `stopped`, `starting`, `creating replica`…
    pub state: String,
    /// A replica's lag in bytes, when Patroni knows it.
    pub lag: Option<u64>,
}

/// `GET path` on 127.0.0.1:`port`: the status and the body; `None` if nothing answered.
pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, DEADLINE).ok()?;
    stream.set_read_timeout(Some(DEADLINE)).ok()?;
    stream.set_write_timeout(Some(DEADLINE)).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The members Patroni's REST API on `port` lists (`GET /cluster`).
pub fn members(port: u16) -> Option<Vec<Member>> {
    let (status, body) = get(port, "/cluster")?;
    if status != 200 {
        return None;
    }
    let cluster: serde_json::Value = serde_json::from_str(&body).ok()?;
    let members = cluster["members"].as_array()?;
    let text = |m: &serde_json::Value, field: &str| m[field].as_str().unwrap_or("").to_owned();
    let members = members.iter().map(|m| Member {
        name: text(m, "name"),
        role: text(m, "role"),
        state: text(m, "state"),
        lag: m["lag"].as_u64(),
    });
    Some(members.collect())
}

/// The servers HAProxy's stats socket `socket` counts as up (`UP`, or `UP 1/2` while
/// going down: it still routes to them), by name.
pub fn haproxy_up(socket: &Path) -> Option<Vec<String>> {
    let mut stream = UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(DEADLINE)).ok()?;
    stream.write_all(b"show stat\n").ok()?;
    let mut csv = String::new();
    stream.read_to_string(&mut csv).ok()?;
    // `# pxname,svname,…`: field 17 is the status; the frontend and backend rows are not
    // servers.
    let up = csv
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            let (name, status) = (*fields.get(1)?, *fields.get(17)?);
            let server = !matches!(name, "FRONTEND" | "BACKEND");
            (server && status.starts_with("UP")).then(|| name.to_owned())
        });
    Some(up.collect())
}
