//! A directly connected mTLS client's certificate URI SAN (a SPIFFE ID from a throwaway
//! CA) maps through `[mesh.spiffe]` like a sidecar's header: a Claim without a key acts
//! for its tenant; a certificate without a mapped ID still needs a key.

use crate::common::app::{Backend, TestApp, tls_channel};
use crate::common::certs::Pki;
use claimd::mesh::MeshIdentity;
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, Decision};

#[tokio::test]
async fn an_mtls_clients_spiffe_uri_san_acts_for_its_mapped_tenant_without_a_key() {
    let pki = Pki::new();
    let id = "spiffe://cluster.local/ns/payments/sa/webhooks";
    let app = TestApp::builder()
        .backend(Backend::Sqlite)
        .configure(|config| {
            pki.serve_tls(config, true);
            let identity = MeshIdentity {
                tenant: "payments".into(),
                namespaces: vec![],
            };
            config.mesh.spiffe.insert(id.into(), identity);
        })
        .spawn()
        .await;
    app.create_key("payments", None).await;
    let request = || ClaimRequest {
        namespace: "stripe".into(),
        key: "m1".into(),
        lease_ttl: Some(prost_types::Duration {
            seconds: 30,
            nanos: 0,
        }),
        ..Default::default()
    };
    let mapped = pki.client_tls_as(&pki.client_with_uri(id));
    // The test's own server takes TLS connections.
    let mut client = ClaimServiceClient::new(tls_channel(app.addr, mapped).await.expect("TLS"));
    let answer = client
        .claim(request())
        .await
        .expect("the mapped identity is served");
    assert_eq!(answer.into_inner().decision, Decision::Claimed as i32);
    let plain = pki.client_tls_as(&pki.client);
    let mut client = ClaimServiceClient::new(tls_channel(app.addr, plain).await.expect("TLS"));
    let status = client
        .claim(request())
        .await
        .expect_err("no key, no mapped identity");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
}
