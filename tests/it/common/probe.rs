//! grpc.health.v1 Check over any channel, with the error text kept (TLS alerts live in the
//! error's sources), for the TLS and health-listener tests.

use super::app::tls_channel;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, ClientTlsConfig};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// A plaintext channel to `addr`, connected.
pub async fn plaintext_channel(addr: SocketAddr) -> Result<Channel, tonic::transport::Error> {
    // `http://` and a socket address always make a valid URI.
    Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect()
        .await
}

/// Health Check of `service` over `channel`: the status, or the error with its sources.
pub async fn check(channel: Channel, service: &str) -> Result<ServingStatus, String> {
    let request = HealthCheckRequest {
        service: service.into(),
    };
    match HealthClient::new(channel).check(request).await {
        Ok(r) => Ok(r.into_inner().status()),
        Err(status) => Err(format!("call: {status:?}")),
    }
}

/// Health Check of `""` over TLS with `tls`: the status, or the error of the connection or
/// the call.
pub async fn health_over_tls(
    addr: SocketAddr,
    tls: ClientTlsConfig,
) -> Result<ServingStatus, String> {
    let channel = tls_channel(addr, tls)
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    check(channel, "").await
}

/// Health Check of `""` in plaintext: the status, or the error of the connection or the call.
pub async fn health_in_plaintext(addr: SocketAddr) -> Result<ServingStatus, String> {
    let channel = plaintext_channel(addr)
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    check(channel, "").await
}

/// Polls Check on `channel` every 100 ms until `service` reports `want` (15 s at most).
pub async fn wait_for(channel: &Channel, service: &str, want: ServingStatus) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = check(channel.clone(), service).await;
        if now == Ok(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{service:?} never {want:?}; last {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
