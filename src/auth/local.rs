//! Protected mode against DNS rebinding (docs/DESIGN.md §5.3): while no API key exists, a
//! call without credentials in a protocol a browser page can speak ([`WebProtocol`]: the
//! Connect door and gRPC-Web) is served as tenant `default` only if it is addressed to this
//! machine — its `Host` (HTTP/1.1) or `:authority` (HTTP/2) is `localhost`, a name under
//! `.localhost`, or a loopback address, with or without a port — and does not come from a
//! browser page of an origin other than `--cors-allow-origin`'s. A web page an attacker
//! points at 127.0.0.1 by rebinding its own name sends that name as `Host` and its origin
//! as `Origin`, so it is refused. Plain gRPC is left as it was: a page cannot speak it (it
//! needs HTTP/2, which browsers speak only over TLS, where the certificate does not name
//! the attacker's host; over HTTP/1.1 claimd answers gRPC 400).

use super::Refusal;
use http::HeaderValue;
use http::uri::Authority;
use std::net::IpAddr;

/// Marks a request in a protocol a browser page can send (put in its extensions by the
/// door, `crate::connect`, for Connect and gRPC-Web requests).
#[derive(Debug, Clone, Copy)]
pub struct WebProtocol;

/// Why an anonymous request is not served in protected mode, if it is not.
pub fn refusal<B>(request: &http::Request<B>, origins: &[HeaderValue]) -> Option<Refusal> {
    let authority = request.uri().authority().map(Authority::as_str);
    let host = request
        .headers()
        .get(http::header::HOST)
        .map(|h| h.to_str().unwrap_or(""));
    let named: Vec<&str> = authority.into_iter().chain(host).collect();
    if named.is_empty() || !named.iter().all(|h| is_local(h)) {
        return Some(Refusal::NotLocalHost);
    }
    let origin = request.headers().get(http::header::ORIGIN);
    if origin.is_some_and(|o| !origins.contains(o)) {
        return Some(Refusal::ForeignOrigin);
    }
    None
}

/// Whether `authority` (`host[:port]`) names this machine.
fn is_local(authority: &str) -> bool {
    let Ok(parsed) = authority.parse::<Authority>() else {
        return false;
    };
    let host = parsed.host();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return ip.to_canonical().is_loopback();
    }
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_with_or_without_a_port_are_local_and_nothing_else_is() {
        for local in [
            "localhost",
            "LOCALHOST:50051",
            "localhost.:1",
            "app.localhost:8080",
            "127.0.0.1",
            "127.1.2.3:50051",
            "[::1]",
            "[::1]:50051",
            "[::ffff:127.0.0.1]:9",
        ] {
            assert!(is_local(local), "{local}");
        }
        for foreign in [
            "evil.example",
            "evil.example:50051",
            "localhost.evil.example",
            "10.0.0.1:50051",
            "[2001:db8::1]:50051",
            "0.0.0.0:50051",
            "",
            "local host",
        ] {
            assert!(!is_local(foreign), "{foreign}");
        }
    }

    #[test]
    fn an_origin_must_be_an_allowed_one() {
        let request = |host: &str, origin: Option<&str>| {
            let mut builder =
                http::Request::post("/claimd.v1.ClaimService/Claim").header("host", host);
            if let Some(origin) = origin {
                builder = builder.header("origin", origin);
            }
            builder.body(()).expect("a valid request")
        };
        let allowed = [HeaderValue::from_static("http://localhost:3000")];
        assert_eq!(refusal(&request("localhost:50051", None), &allowed), None);
        let page = request("localhost:50051", Some("http://localhost:3000"));
        assert_eq!(refusal(&page, &allowed), None);
        let other = request("127.0.0.1:50051", Some("http://evil.example"));
        assert_eq!(refusal(&other, &allowed), Some(Refusal::ForeignOrigin));
        let rebound = request("evil.example:50051", Some("http://evil.example:50051"));
        assert_eq!(refusal(&rebound, &allowed), Some(Refusal::NotLocalHost));
        let nameless = http::Request::post("/x").body(()).expect("a valid request");
        assert_eq!(refusal(&nameless, &allowed), Some(Refusal::NotLocalHost));
    }
}
