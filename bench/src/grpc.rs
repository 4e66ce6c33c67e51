//! claimd's side of a round: ClaimService calls over plaintext gRPC, with no API key
//! (claimd in protected mode on loopback serves tenant `default`) or, with `--tenants N`,
//! every call of a receipt key sending the API key of tenant `hash(key) mod N`
//! (`authorization: Bearer …`): a key's setup and its timed calls reach the same tenant, as
//! an application that maps its events to tenants stably. Callers share channels as an
//! application shares a client: caller `i` uses channel `i / callers_per_channel`, each
//! channel one HTTP/2 connection. Only Claim, Complete and Retry are used.

use crate::side::{Answer, Decision};
use anyhow::Context;
use claimd_client::pb::{self, claim_service_client::ClaimServiceClient};
use std::time::Duration;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;

/// The namespace every bench receipt lives in, in claimd and in the prefill.
pub const NAMESPACE: &str = "bench";

/// Clients of one claimd, one per channel.
#[derive(Clone)]
pub struct GrpcSide {
    clients: Vec<ClaimServiceClient<Channel>>,
    per_channel: usize,
    /// `Bearer <key>` of each tenant; empty: no key.
    keys: Vec<MetadataValue<Ascii>>,
}

/// A protobuf Duration of `d` (whole seconds and nanoseconds).
fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A failed call as one line.
fn failed(call: &str, key: &str, status: &tonic::Status) -> String {
    format!("{call} {key}: {:?} {}", status.code(), status.message())
}

impl GrpcSide {
    /// Connects `ceil(callers / per_channel)` channels to `addr` (`host:port`).
    /// `keys`: one API key per tenant (a call on receipt key `k` sends key `hash(k) mod
    /// len`); empty: none.
    pub async fn connect(
        addr: &str,
        callers: usize,
        per_channel: usize,
        keys: &[String],
    ) -> anyhow::Result<Self> {
        let channels = callers.div_ceil(per_channel).max(1);
        let mut clients = Vec::with_capacity(channels);
        for _ in 0..channels {
            let channel = Channel::from_shared(format!("http://{addr}"))
                .context("--target must be host:port")?
                .connect()
                .await
                .with_context(|| format!("cannot connect to claimd at {addr}"))?;
            clients.push(ClaimServiceClient::new(channel));
        }
        let keys = keys
            .iter()
            .map(|k| format!("Bearer {k}").parse())
            .collect::<Result<_, _>>()
            .context("an API key that is not ASCII")?;
        Ok(GrpcSide {
            clients,
            per_channel,
            keys,
        })
    }

    /// The client of caller number `caller`.
    fn client(&self, caller: usize) -> ClaimServiceClient<Channel> {
        self.clients[(caller / self.per_channel) % self.clients.len()].clone()
    }

    /// `message`, on receipt key `key`, with the API key of its tenant if any.
    fn request<T>(&self, key: &str, message: T) -> tonic::Request<T> {
        use std::hash::{Hash, Hasher};
        let mut request = tonic::Request::new(message);
        if !self.keys.is_empty() {
            // DefaultHasher::new() has fixed keys: the same tenant for a key all run long.
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            key.hash(&mut hasher);
            let tenant = usize::try_from(hasher.finish() % self.keys.len() as u64).unwrap_or(0);
            request
                .metadata_mut()
                .insert("authorization", self.keys[tenant].clone());
        }
        request
    }

    /// Claim; the answer whatever the decision, an error for a failed call.
    pub async fn claim(
        &self,
        caller: usize,
        key: &str,
        fp: &[u8],
        lease: Duration,
    ) -> Result<Answer, String> {
        let request = pb::ClaimRequest {
            namespace: NAMESPACE.into(),
            key: key.into(),
            fingerprint: fp.to_vec(),
            lease_ttl: Some(duration(lease)),
            ..Default::default()
        };
        let reply = self.client(caller).claim(self.request(key, request)).await;
        let reply = reply.map_err(|s| failed("Claim", key, &s))?.into_inner();
        let decision = match pb::Decision::try_from(reply.decision) {
            Ok(pb::Decision::Claimed) => Decision::Claimed,
            Ok(pb::Decision::InFlight) => Decision::InFlight,
            Ok(pb::Decision::Completed) => Decision::Completed,
            Ok(pb::Decision::RetryScheduled) => Decision::RetryScheduled,
            Ok(pb::Decision::Quarantined) => Decision::Quarantined,
            Ok(pb::Decision::Conflict) => Decision::Conflict,
            Ok(pb::Decision::Unspecified) | Err(_) => Decision::Unknown(reply.decision),
        };
        let receipt = reply.receipt.unwrap_or_default();
        Ok(Answer {
            decision,
            token: reply.claim_token,
            attempt: receipt.attempt,
            response: receipt.response,
        })
    }

    /// Complete; an error unless the receipt came back COMPLETED.
    pub async fn complete(
        &self,
        caller: usize,
        key: &str,
        token: &str,
        response: &[u8],
    ) -> Result<(), String> {
        let request = pb::CompleteRequest {
            namespace: NAMESPACE.into(),
            key: key.into(),
            claim_token: token.into(),
            response: response.to_vec(),
        };
        let reply = self
            .client(caller)
            .complete(self.request(key, request))
            .await;
        let reply = reply.map_err(|s| failed("Complete", key, &s))?.into_inner();
        let state = reply.receipt.map(|r| r.state());
        match state {
            Some(pb::State::Completed) => Ok(()),
            other => Err(format!(
                "Complete {key}: receipt state {other:?}, not COMPLETED"
            )),
        }
    }

    /// Retry with `retry_after`; an error unless the receipt came back RETRY_WAIT.
    pub async fn retry(
        &self,
        caller: usize,
        key: &str,
        token: &str,
        after: Duration,
    ) -> Result<(), String> {
        let request = pb::RetryRequest {
            namespace: NAMESPACE.into(),
            key: key.into(),
            claim_token: token.into(),
            error: "bench: simulated failure".into(),
            retry_after: Some(duration(after)),
            count_attempt: None,
        };
        let reply = self.client(caller).retry(self.request(key, request)).await;
        let reply = reply.map_err(|s| failed("Retry", key, &s))?.into_inner();
        let state = reply.receipt.map(|r| r.state());
        match state {
            Some(pb::State::RetryWait) => Ok(()),
            other => Err(format!(
                "Retry {key}: receipt state {other:?}, not RETRY_WAIT"
            )),
        }
    }
}
