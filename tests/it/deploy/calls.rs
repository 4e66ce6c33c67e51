//! Calls through the Service with an API key, as a client in the cluster makes them: a Claim,
//! its Complete and a duplicate; and the history workload (`history::workload`, the fault
//! tests' callers) running while a rollout replaces the pods behind the Service, checked
//! afterwards by the history checker against a final read of every key.

use crate::history::{Op, Outcome, checker, workload};
use claimd::pb::claim_service_client::ClaimServiceClient;
use claimd::pb::{ClaimRequest, CompleteRequest, Decision, GetRequest, Receipt};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tonic::transport::Channel;

/// A client of the Service at `addr` that sends `key` with every call.
pub struct Client {
    client: ClaimServiceClient<Channel>,
    key: String,
}

impl Client {
    pub fn new(addr: SocketAddr, key: &str) -> Client {
        Client {
            client: workload::channel(addr, Duration::from_secs(10)),
            key: key.to_owned(),
        }
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        // An API key is base64url and underscores: a valid header value.
        let value = format!("Bearer {}", self.key)
            .parse()
            .expect("an ASCII key");
        request.metadata_mut().insert("authorization", value);
        request
    }

    /// Claims `key` in namespace `deploy`: the decision and the claim token.
    pub async fn claim(&self, key: &str) -> (Decision, String, Option<Receipt>) {
        let request = self.request(ClaimRequest {
            namespace: "deploy".into(),
            key: key.into(),
            fingerprint: b"sha256:deploy".to_vec(),
            ..Default::default()
        });
        let answer = self.client.clone().claim(request).await;
        let answer = answer
            .unwrap_or_else(|s| panic!("Claim {key}: {s:?}"))
            .into_inner();
        (answer.decision(), answer.claim_token, answer.receipt)
    }

    /// Completes `key` with `token`, storing `response`.
    pub async fn complete(&self, key: &str, token: &str, response: &[u8]) {
        let request = self.request(CompleteRequest {
            namespace: "deploy".into(),
            key: key.into(),
            claim_token: token.into(),
            response: response.to_vec(),
        });
        let answer = self.client.clone().complete(request).await;
        answer.unwrap_or_else(|s| panic!("Complete {key}: {s:?}"));
    }

    /// Gets `key`'s receipt.
    pub async fn get(&self, key: &str) -> Receipt {
        let request = self.request(GetRequest {
            namespace: "deploy".into(),
            key: key.into(),
        });
        let answer = self.client.clone().get(request).await;
        let answer = answer
            .unwrap_or_else(|s| panic!("Get {key}: {s:?}"))
            .into_inner();
        // A Get that answers always carries the receipt.
        answer.receipt.expect("Get answers a receipt")
    }
}

/// What a workload run under a rollout left: the checker's verdict and the calls answered
/// INTERNAL (claimd's or the transport's: none may be).
pub struct Run {
    pub verdict: checker::Verdict,
    pub internal: Vec<Op>,
}

/// Runs the history workload with `api_key` through `service` while `rollout` runs, for
/// `settle` more, then checks the history against a final read through the Service.
pub async fn under_rollout<F: Future<Output = ()>>(
    service: SocketAddr,
    api_key: &str,
    settle: Duration,
    rollout: F,
) -> Run {
    let load = workload::Workload {
        api_key: Some(api_key.to_owned()),
        ..workload::Workload::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let running = {
        let stop = stop.clone();
        tokio::spawn(async move { workload::run(&load, &[service], stop).await })
    };
    rollout.await;
    tokio::time::sleep(settle).await;
    stop.store(true, Ordering::SeqCst);
    // The callers end when their last call does: within one call's deadline.
    let history = running.await.expect("the workload ran");
    let patience = Duration::from_secs(30);
    let finals = workload::finals_as(&history, service, patience, Some(api_key)).await;
    let verdict = checker::check(&history, &finals);
    // Shown with --nocapture: the load the rollout held.
    println!(
        "history: {} calls, {} answered, {} unknown, {} CLAIMED, {} violations",
        verdict.ops,
        verdict.acknowledged,
        verdict.unknown,
        verdict.claimed,
        verdict.violations.len()
    );
    let internal = history
        .into_iter()
        .filter(|op| matches!(op.outcome, Outcome::Unknown(tonic::Code::Internal)))
        .collect();
    Run { verdict, internal }
}
