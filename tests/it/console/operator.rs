//! An operator of the console for the Quarantine tests: a tenant's API key signed in, its
//! deliveries and holder calls over gRPC with that key, and the Quarantine form — as the
//! receipt's page renders it, or as a page showing a given receipt would.

use super::page::{self, addr, get, post_within, receipt_path, sign_in, text};
use crate::common::app::{TestApp, secs};
use crate::common::http1::Answer;
use crate::common::receipt_ops::micros;
use chrono::TimeDelta;
use claimd::domain::{Policies, Policy};
use claimd::pb::{self, ClaimRequest, Decision, State};
use std::net::SocketAddr;
use std::time::Duration;
use tonic::Request;

/// The namespace of the Quarantine tests: one attempt per receipt, a day's retention.
pub const NS: &str = "hooks";

/// [`NS`]'s policy.
pub fn policies() -> Policies {
    let mut policies = Policies::default();
    let one = Policy {
        max_attempts: 1,
        retention: TimeDelta::days(1),
        response_retention: TimeDelta::days(1),
        ..Policy::default()
    };
    policies.namespaces.insert(NS.into(), one);
    policies
}

/// A tenant's API key, signed in to the console.
pub struct Operator<'a> {
    app: &'a TestApp,
    key: String,
    /// The console's address.
    pub console: SocketAddr,
    /// The session cookie's value.
    pub session: String,
    csrf: String,
}

impl<'a> Operator<'a> {
    pub async fn new(app: &'a TestApp) -> Operator<'a> {
        let (_, key) = app.create_key("acme", None).await;
        let console = addr(app);
        let session = sign_in(console, &key).await;
        let csrf = page::csrf(console, &session).await;
        Operator {
            app,
            key,
            console,
            session,
            csrf,
        }
    }

    pub fn call<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        let value = format!("Bearer {}", self.key)
            .parse()
            .expect("a header value");
        request.metadata_mut().insert("authorization", value);
        request
    }

    /// A delivery of `key` with a `lease` s lease: its answer.
    pub async fn deliver(&self, key: &str, lease: i64) -> pb::ClaimResponse {
        let claim = ClaimRequest {
            namespace: NS.into(),
            key: key.into(),
            fingerprint: b"fp".to_vec(),
            lease_ttl: secs(lease, 0),
            recovery_payload: b"body".to_vec(),
            ..Default::default()
        };
        let mut client = self.app.new_client().await;
        client.claim(self.call(claim)).await.unwrap().into_inner()
    }

    /// A delivery of `key` that must be CLAIMED: its token.
    pub async fn claimed(&self, key: &str, lease: i64) -> String {
        let answer = self.deliver(key, lease).await;
        assert_eq!(answer.decision(), Decision::Claimed, "{answer:?}");
        answer.claim_token
    }

    pub async fn get(&self, key: &str) -> Result<pb::Receipt, tonic::Status> {
        let get = pb::GetRequest {
            namespace: NS.into(),
            key: key.into(),
        };
        let mut client = self.app.new_client().await;
        let answer = client.get(self.call(get)).await?.into_inner();
        Ok(answer.receipt.expect("Get carries a receipt"))
    }

    pub async fn complete(&self, key: &str, token: String) -> Result<pb::Receipt, tonic::Status> {
        let complete = pb::CompleteRequest {
            namespace: NS.into(),
            key: key.into(),
            claim_token: token,
            response: b"done".to_vec(),
        };
        let mut client = self.app.new_client().await;
        let answer = client.complete(self.call(complete)).await?.into_inner();
        Ok(answer.receipt.expect("Complete carries the receipt"))
    }

    pub async fn retry(&self, key: &str, token: String, after: i64) {
        let retry = pb::RetryRequest {
            namespace: NS.into(),
            key: key.into(),
            claim_token: token,
            error: "upstream 503".into(),
            retry_after: secs(after, 0),
            count_attempt: Some(false),
        };
        let mut client = self.app.new_client().await;
        client.retry(self.call(retry)).await.expect("Retry");
    }

    /// The Quarantine form of `key`'s page as the page renders it (it must offer one).
    pub async fn form(&self, key: &str) -> Vec<(String, String)> {
        let answer = get(self.console, &receipt_path(NS, key), Some(&self.session)).await;
        let html = text(&answer);
        assert!(
            html.contains("id=\"quarantine\""),
            "an orphan's page: {html}"
        );
        let form = &html[html
            .find("action=\"/receipt/quarantine\"")
            .expect("the form")..];
        let names = [
            "csrf",
            "namespace",
            "key",
            "created",
            "changed",
            "state",
            "attempt",
        ];
        names
            .iter()
            .map(|name| {
                let at = form.find(&format!("name=\"{name}\" value=\"")).expect(name);
                let value = form[at + name.len() + 15..].split('"').next().unwrap();
                (name.to_string(), value.to_owned())
            })
            .collect()
    }

    /// The form a page showing `receipt` would carry (for receipts whose page offers none:
    /// the POST is served for any state).
    pub fn form_of(&self, receipt: &pb::Receipt) -> Vec<(String, String)> {
        let state = match receipt.state() {
            State::Processing => "processing",
            State::RetryWait => "retry_wait",
            State::Completed => "completed",
            _ => "quarantined",
        };
        [
            ("csrf", self.csrf.clone()),
            ("namespace", receipt.namespace.clone()),
            ("key", receipt.key.clone()),
            ("created", micros(receipt.created_at).to_string()),
            ("changed", micros(receipt.updated_at).to_string()),
            ("state", state.to_owned()),
            ("attempt", receipt.attempt.to_string()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
    }

    /// Posts `form` with the operator's `reason`.
    pub async fn quarantine(&self, form: &[(String, String)], reason: &str) -> Answer {
        self.quarantine_within(form, reason, Duration::from_secs(10))
            .await
    }

    /// [`Operator::quarantine`], its answer awaited up to `bound`.
    pub async fn quarantine_within(
        &self,
        form: &[(String, String)],
        reason: &str,
        bound: Duration,
    ) -> Answer {
        let mut fields: Vec<(&str, &str)> =
            form.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        fields.push(("reason", reason));
        let path = "/receipt/quarantine";
        post_within(self.console, path, &fields, Some(&self.session), &[], bound).await
    }
}
