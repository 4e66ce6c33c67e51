//! The tower layer that authenticates every call on the main listener before any service
//! sees it — from the request's headers alone, before a byte of its body is read, whatever
//! the protocol — except health Check and Watch ([`OPEN_PATHS`]); refusals are answered
//! with the status `api/error.rs` maps them to. The peer's IP address (from tonic's
//! connection info, plaintext or TLS) gives the source the failed-authentication limit counts
//! by.
//! In protected mode a call without credentials over the Connect door or gRPC-Web must also
//! be addressed to this machine ([`super::local`]).

use super::{AuthError, Authenticator};
use http::HeaderValue;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::Status;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

/// The calls served without credentials: health Check and Watch, which reveal only the
/// serving status.
const OPEN_PATHS: [&str; 2] = [
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
];

/// The tower layer that authenticates every request before any service sees it.
#[derive(Clone)]
pub struct AuthLayer {
    auth: Arc<Authenticator>,
    local: Option<Arc<[HeaderValue]>>,
}

impl AuthLayer {
    /// A layer over `auth`; calls without credentials in protected mode are not checked
    /// for where they are addressed (see [`AuthLayer::local_only`]).
    pub fn new(auth: Arc<Authenticator>) -> Self {
        AuthLayer { auth, local: None }
    }

    /// Serves calls without credentials in protected mode only when they are addressed to
    /// this machine and come from no browser origin but `origins` (`--cors-allow-origin`).
    pub fn local_only(self, origins: &[HeaderValue]) -> Self {
        AuthLayer {
            local: Some(origins.into()),
            ..self
        }
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService {
            inner,
            auth: self.auth.clone(),
            local: self.local.clone(),
        }
    }
}

/// See [`AuthLayer`].
#[derive(Clone)]
pub struct AuthService<S> {
    inner: S,
    auth: Arc<Authenticator>,
    local: Option<Arc<[HeaderValue]>>,
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower::Service<http::Request<ReqBody>> for AuthService<S>
where
    S: tower::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        // The clone is not ready; swap it in and call the one poll_ready prepared.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if OPEN_PATHS.contains(&request.uri().path()) {
            return Box::pin(inner.call(request));
        }
        let auth = self.auth.clone();
        let anonymous = !request.headers().contains_key(http::header::AUTHORIZATION);
        let web = request.extensions().get::<super::WebProtocol>().is_some();
        let foreign = match &self.local {
            Some(origins) if anonymous && web => super::local::refusal(&request, origins),
            _ => None,
        };
        Box::pin(async move {
            if let Some(refusal) = foreign {
                match auth.serves_anonymous().await {
                    Ok(false) => {}
                    Ok(true) => return Ok(Status::from(AuthError::from(refusal)).into_http()),
                    Err(e) => return Ok(Status::from(AuthError::from(e)).into_http()),
                }
            }
            let header = request
                .headers()
                .get(http::header::AUTHORIZATION)
                .map(|v| v.as_bytes());
            // A certificate's ID counts only when mapped: an unmapped one leaves the key.
            let identity = super::mesh::claimed_id(&request).or_else(|| {
                let cert = request
                    .extensions()
                    .get::<crate::mesh::cert::CertIdentity>()?;
                auth.knows_identity(&cert.0).then(|| Ok(cert.0.clone()))
            });
            match auth
                .authenticate_call(header, identity, peer_ip(&request))
                .await
            {
                Ok(principal) => {
                    request.extensions_mut().insert(principal);
                    inner.call(request).await
                }
                Err(error) => Ok(Status::from(error).into_http()),
            }
        })
    }
}

/// The IP address the request came from, if tonic recorded the connection.
pub(crate) fn peer_ip<B>(request: &http::Request<B>) -> Option<IpAddr> {
    let extensions = request.extensions();
    let tcp = extensions.get::<TcpConnectInfo>().or_else(|| {
        extensions
            .get::<TlsConnectInfo<TcpConnectInfo>>()
            .map(TlsConnectInfo::get_ref)
    });
    tcp.and_then(TcpConnectInfo::remote_addr).map(|a| a.ip())
}
