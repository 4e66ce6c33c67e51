//! A tenant's gRPC caller: an API key made in the test's database and the ClaimService
//! calls the browser tests make receipts with and check them by, each carrying the key.

use crate::common::app::{TestApp, decision, secs};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{
    self, ClaimRequest, ClaimResponse, CompleteRequest, Decision, GetRequest, ListRequest,
    QuarantineRequest, RetryRequest, State,
};
use tonic::Request;
use tonic::transport::Channel;

/// The fingerprint of every event the tests claim.
pub const FP: &[u8] = b"sha256-of-the-body";

/// One tenant's caller.
pub struct Tenant {
    /// The API key, as a browser signs in with it.
    pub key: String,
    client: ClaimServiceClient<Channel>,
}

impl Tenant {
    /// A new key for `tenant`, usable at once.
    pub async fn new(app: &TestApp, tenant: &str) -> Tenant {
        let (_, key) = app.create_key(tenant, None).await;
        Tenant {
            key,
            client: app.new_client().await,
        }
    }

    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        // An API key is ASCII: always a valid header value.
        let value = format!("Bearer {}", self.key)
            .parse()
            .expect("a header value");
        request.metadata_mut().insert("authorization", value);
        request
    }

    /// A Claim of `ns`/`key` with a lease of `lease` seconds; must succeed.
    pub async fn claim(&self, ns: &str, key: &str, lease: i64) -> ClaimResponse {
        let request = ClaimRequest {
            namespace: ns.into(),
            key: key.into(),
            fingerprint: FP.to_vec(),
            lease_ttl: secs(lease, 0),
            recovery_payload: b"{\"type\":\"invoice.paid\"}".to_vec(),
            ..Default::default()
        };
        let answer = self.client.clone().claim(self.request(request)).await;
        answer.expect("Claim").into_inner()
    }

    /// Claims `ns`/`key` (must be CLAIMED); the claim token.
    pub async fn claimed(&self, ns: &str, key: &str, lease: i64) -> String {
        let answer = self.claim(ns, key, lease).await;
        assert_eq!(decision(&answer), Decision::Claimed, "{answer:?}");
        answer.claim_token
    }

    /// A dead letter: claimed, then quarantined by its holder with `error`.
    pub async fn dead_letter(&self, ns: &str, key: &str, error: &str) {
        let claim_token = self.claimed(ns, key, 30).await;
        let request = QuarantineRequest {
            namespace: ns.into(),
            key: key.into(),
            claim_token,
            error: error.into(),
        };
        let answer = self.client.clone().quarantine(self.request(request)).await;
        answer.expect("Quarantine");
    }

    /// A completed receipt.
    pub async fn completed(&self, ns: &str, key: &str) {
        let claim_token = self.claimed(ns, key, 30).await;
        let request = CompleteRequest {
            namespace: ns.into(),
            key: key.into(),
            claim_token,
            response: b"{\"ok\":true}".to_vec(),
        };
        let answer = self.client.clone().complete(self.request(request)).await;
        answer.expect("Complete");
    }

    /// A receipt waiting `after` seconds for its next attempt, its last error `error`.
    pub async fn retrying(&self, ns: &str, key: &str, error: &str, after: i64) {
        let claim_token = self.claimed(ns, key, 30).await;
        let request = RetryRequest {
            namespace: ns.into(),
            key: key.into(),
            claim_token,
            error: error.into(),
            retry_after: secs(after, 0),
            count_attempt: None,
        };
        let answer = self.client.clone().retry(self.request(request)).await;
        answer.expect("Retry");
    }

    /// The receipt, as Get returns it; must exist.
    pub async fn get(&self, ns: &str, key: &str) -> pb::Receipt {
        let request = GetRequest {
            namespace: ns.into(),
            key: key.into(),
        };
        let answer = self.client.clone().get(self.request(request)).await;
        let answer = answer.unwrap_or_else(|e| panic!("Get {ns}/{key}: {e:?}"));
        answer.into_inner().receipt.expect("Get returns a receipt")
    }

    /// The receipt's state, as Get returns it.
    pub async fn state(&self, ns: &str, key: &str) -> State {
        let receipt = self.get(ns, key).await;
        State::try_from(receipt.state).unwrap_or(State::Unspecified)
    }

    /// Every receipt of `ns` by List, all pages: (key, state) in listed order.
    pub async fn list(&self, ns: &str) -> Vec<(String, State)> {
        let mut request = ListRequest {
            namespace: ns.into(),
            states: Vec::new(),
            page_size: 100,
            page_token: String::new(),
        };
        let mut listed = Vec::new();
        loop {
            let answer = self
                .client
                .clone()
                .list(self.request(request.clone()))
                .await;
            let page = answer.expect("List").into_inner();
            for r in page.receipts {
                listed.push((
                    r.key,
                    State::try_from(r.state).unwrap_or(State::Unspecified),
                ));
            }
            if page.next_page_token.is_empty() {
                return listed;
            }
            request.page_token = page.next_page_token;
        }
    }
}
