//! Which requests the door takes (docs/DESIGN.md §5.11): a POST to ClaimService's paths
//! in Connect's content types (JSON or binary proto) is a Connect call; gRPC and gRPC-Web
//! in protobuf, and every other path, pass through; on the service's paths another content
//! type is 415 and another method than POST 405.

use http::{Request, header};

/// The path prefix of the service the door serves.
pub(super) const SERVICE_PREFIX: &str = "/claimd.v1.ClaimService/";

/// How a Connect request's messages are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Codec {
    Json,
    Proto,
}

impl Codec {
    /// The codec a request's `Content-Type` names; `None` for anything else.
    pub(super) fn of(content_type: &str) -> Option<Codec> {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        match essence.to_ascii_lowercase().as_str() {
            "application/json" => Some(Codec::Json),
            "application/proto" => Some(Codec::Proto),
            _ => None,
        }
    }

    pub(super) fn content_type(self) -> &'static str {
        match self {
            Codec::Json => "application/json",
            Codec::Proto => "application/proto",
        }
    }
}

/// What the door does with a request.
pub(super) enum Route {
    /// Not a Connect request: the inner service answers it.
    Pass,
    /// A Connect unary call of this codec.
    Connect(Codec),
    /// A POST to the service with a content type no protocol here speaks: 415.
    Unsupported,
    /// Another method than POST on the service's paths: 405, `Allow: POST`.
    NotPost,
}

/// The content types the other protocols on the service's paths take (the essence, lower
/// case): gRPC's and gRPC-Web's, in protobuf. `application/grpc+json`,
/// `application/grpc-web+json` or `application/grpcfoo` are none of them.
const PASSED: [&str; 6] = [
    "application/grpc",
    "application/grpc+proto",
    "application/grpc-web",
    "application/grpc-web+proto",
    "application/grpc-web-text",
    "application/grpc-web-text+proto",
];

pub(super) fn route<B>(request: &Request<B>) -> Route {
    if !request.uri().path().starts_with(SERVICE_PREFIX) {
        return Route::Pass;
    }
    if request.method() != http::Method::POST {
        return Route::NotPost;
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if PASSED.iter().any(|t| essence.eq_ignore_ascii_case(t)) {
        return Route::Pass;
    }
    match Codec::of(content_type) {
        Some(codec) => Route::Connect(codec),
        None => Route::Unsupported,
    }
}

/// Whether `request` is gRPC-Web (`application/grpc-web`, `+proto`, `-text`, …).
pub(super) fn is_grpc_web<B>(request: &Request<B>) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc-web"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_posts_to_the_service_with_a_connect_content_type_are_taken() {
        let req = |method: &str, path: &str, ct: &str| {
            Request::builder()
                .method(method)
                .uri(path)
                .header(header::CONTENT_TYPE, ct)
                .body(())
                .expect("a valid request")
        };
        let claim = "/claimd.v1.ClaimService/Claim";
        assert!(matches!(
            route(&req("POST", claim, "application/json")),
            Route::Connect(Codec::Json)
        ));
        assert!(matches!(
            route(&req("POST", claim, "application/json; charset=utf-8")),
            Route::Connect(Codec::Json)
        ));
        assert!(matches!(
            route(&req("POST", claim, "application/proto")),
            Route::Connect(Codec::Proto)
        ));
        assert!(matches!(
            route(&req("POST", claim, "application/grpc")),
            Route::Pass
        ));
        assert!(matches!(
            route(&req("POST", claim, "application/grpc-web+proto")),
            Route::Pass
        ));
        for refused in [
            "application/grpcfoo",
            "application/grpc-web+json",
            "text/plain",
        ] {
            assert!(matches!(
                route(&req("POST", claim, refused)),
                Route::Unsupported
            ));
        }
        assert!(matches!(
            route(&req("GET", claim, "application/json")),
            Route::NotPost
        ));
        assert!(matches!(route(&req("PUT", claim, "")), Route::NotPost));
        let health = "/grpc.health.v1.Health/Check";
        assert!(matches!(
            route(&req("POST", health, "application/json")),
            Route::Pass
        ));
    }
}
