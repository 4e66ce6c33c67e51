//! Tenants from the mesh's identity (issue 48): nginx stands in for an Istio sidecar,
//! adding an `x-forwarded-client-cert` for its caller. A Claim without a key acts for the
//! tenant `[mesh.spiffe]` maps the SPIFFE ID to, within its namespaces; the same header
//! sent straight to claimd is UNAUTHENTICATED and counted by the failed-authentication
//! limit; an unknown ID is refused like a bad key; a key and an identity of one tenant
//! use the key, of two tenants are refused.

use super::nginx::nginx;
use crate::common::app::{Backend, TestApp, connect};
use claimd::mesh::{MeshIdentity, TrustedProxies};
use claimd::pb::{ClaimRequest, Decision};
use std::net::SocketAddr;
use std::time::Duration;

const WEBHOOKS: &str = "spiffe://cluster.local/ns/payments/sa/webhooks";

fn xfcc(uri: &str) -> String {
    format!(
        "By=spiffe://cluster.local/ns/claimd/sa/claimd;Hash=9ba8c2e0;\
         Subject=\"\";URI={uri}"
    )
}

/// A Claim of `key` in `namespace` at `addr` with `headers`: its decision or status code.
async fn claim(
    addr: SocketAddr,
    namespace: &str,
    key: &str,
    headers: &[(&'static str, String)],
) -> Result<i32, tonic::Code> {
    let mut request = tonic::Request::new(ClaimRequest {
        namespace: namespace.into(),
        key: key.into(),
        lease_ttl: Some(prost_types::Duration {
            seconds: 30,
            nanos: 0,
        }),
        ..Default::default()
    });
    for (name, value) in headers {
        // The test's header values are ASCII.
        let value = value.parse().expect("an ASCII header value");
        request.metadata_mut().insert(*name, value);
    }
    let answer = connect(addr).await.claim(request).await;
    answer
        .map(|a| a.into_inner().decision)
        .map_err(|s| s.code())
}

#[tokio::test]
async fn a_spiffe_id_from_a_trusted_sidecar_acts_for_its_tenant_and_from_anyone_else_is_refused() {
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|config| {
            let trusted = TrustedProxies(vec!["127.0.0.8/32".parse().expect("CIDR")]);
            config.connections.trusted_proxies = trusted.clone();
            config.mesh.trusted_proxies = trusted;
            config.auth_failure_limit = 3;
            config.auth_failure_window = Duration::from_secs(600);
            let identity = MeshIdentity {
                tenant: "payments".into(),
                namespaces: vec!["stripe".into()],
            };
            config.mesh.spiffe.insert(WEBHOOKS.into(), identity);
        })
        .spawn()
        .await;
    let (_, payments_key) = app.create_key("payments", None).await;
    let (_, other_key) = app.create_key("other", None).await;
    let sidecar = nginx(
        app.addr,
        &format!(
            "grpc_set_header x-forwarded-client-cert '{}';",
            xfcc(WEBHOOKS)
        ),
    )
    .await;
    let stranger = nginx(
        app.addr,
        &format!(
            "grpc_set_header x-forwarded-client-cert '{}';",
            xfcc("spiffe://cluster.local/ns/edge/sa/unknown")
        ),
    )
    .await;
    let claimed = Decision::Claimed as i32;
    // No key: the identity's tenant and namespaces.
    assert_eq!(claim(sidecar.addr, "stripe", "e1", &[]).await, Ok(claimed));
    let bearer = |key: &str| vec![("authorization", format!("Bearer {key}"))];
    let again = claim(app.addr, "stripe", "e1", &bearer(&payments_key)).await;
    assert_ne!(
        again,
        Ok(claimed),
        "the identity did not act for tenant payments"
    );
    let elsewhere = claim(app.addr, "stripe", "e1", &bearer(&other_key)).await;
    assert_eq!(elsewhere, Ok(claimed), "tenant other saw payments' receipt");
    let denied = claim(sidecar.addr, "github", "e2", &[]).await;
    assert_eq!(denied, Err(tonic::Code::PermissionDenied));
    // A key with the identity: the key's tenant, refused if another.
    let with_key = claim(sidecar.addr, "stripe", "e3", &bearer(&payments_key)).await;
    assert_eq!(with_key, Ok(claimed));
    let mismatch = claim(sidecar.addr, "stripe", "e4", &bearer(&other_key)).await;
    assert_eq!(mismatch, Err(tonic::Code::PermissionDenied));
    // An unknown SPIFFE ID from the trusted proxy: refused like a bad key.
    let unknown = claim(stranger.addr, "stripe", "e5", &[]).await;
    assert_eq!(unknown, Err(tonic::Code::Unauthenticated));
    // The same header straight from an untrusted peer: refused, and counted.
    let forged = vec![("x-forwarded-client-cert", xfcc(WEBHOOKS))];
    let mut codes = Vec::new();
    for i in 0..5 {
        codes.push(claim(app.addr, "stripe", &format!("f{i}"), &forged).await);
    }
    assert_eq!(codes[0], Err(tonic::Code::Unauthenticated), "{codes:?}");
    assert_eq!(
        codes[4],
        Err(tonic::Code::ResourceExhausted),
        "not counted: {codes:?}"
    );
}
