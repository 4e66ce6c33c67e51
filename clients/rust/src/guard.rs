//! A Rust client helper: [`Claims::claim`] returns a [`Guard`] when this caller won the
//! claim. The guard heartbeats in the background at a third of the lease, tells the work
//! when the lease was lost ([`Guard::lost`]), and settles the receipt exactly once:
//! [`Guard::complete`], [`Guard::retry`], [`Guard::quarantine`] — or, if it is dropped
//! unsettled (a panic, an early return), a Retry so another delivery can take over at once.

use crate::Error;
use crate::pb::claim_service_client::ClaimServiceClient;
use crate::pb::{
    ClaimRequest, ClaimResponse, CompleteRequest, Decision, HeartbeatRequest, QuarantineRequest,
    Receipt, RetryRequest,
};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// A ClaimService client that adds the API key to every call.
#[derive(Debug, Clone)]
pub struct Claims {
    inner: ClaimServiceClient<Channel>,
    api_key: Option<String>,
}

/// What a claim attempt answered.
#[derive(Debug)]
pub enum Claimed {
    /// This caller holds the lease: do the work, then settle the guard.
    Won(Box<Guard>),
    /// Somebody else holds it, or it is done, scheduled, quarantined or a conflict: the
    /// response says which (and carries the stored response for a replay).
    Not(Box<ClaimResponse>),
}

impl Claims {
    /// A client over `channel`, sending `api_key` (if any) as `authorization: Bearer …`.
    pub fn new(channel: Channel, api_key: Option<String>) -> Claims {
        Claims {
            inner: ClaimServiceClient::new(channel),
            api_key,
        }
    }

    fn request<T>(&self, message: T) -> Result<Request<T>, Status> {
        let mut request = Request::new(message);
        if let Some(key) = &self.api_key {
            let value = format!("Bearer {key}")
                .parse()
                .map_err(|_| Status::invalid_argument("the API key is not a valid header value"))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }

    /// Claims `key` in `namespace` with a lease of `lease`; on a win the guard heartbeats
    /// until it is settled. A refusal by a tenant quota is [`Error::Quota`], with the delay
    /// claimd asked for.
    pub async fn claim(
        &self,
        namespace: &str,
        key: &str,
        fingerprint: &[u8],
        lease: Duration,
    ) -> Result<Claimed, Error> {
        let message = ClaimRequest {
            namespace: namespace.into(),
            key: key.into(),
            fingerprint: fingerprint.to_vec(),
            lease_ttl: prost_types::Duration::try_from(lease).ok(),
            ..Default::default()
        };
        let response = self
            .inner
            .clone()
            .claim(self.request(message)?)
            .await?
            .into_inner();
        if response.decision() != Decision::Claimed {
            return Ok(Claimed::Not(Box::new(response)));
        }
        let (lost_tx, lost_rx) = watch::channel(false);
        let heartbeats = tokio::spawn(heartbeat(
            self.clone(),
            namespace.to_owned(),
            key.to_owned(),
            response.claim_token.clone(),
            lease,
            lost_tx,
        ));
        Ok(Claimed::Won(Box::new(Guard {
            claims: self.clone(),
            namespace: namespace.to_owned(),
            key: key.to_owned(),
            token: response.claim_token.clone(),
            response,
            heartbeats: Some(heartbeats),
            lost: lost_rx,
        })))
    }
}

/// Extends the lease every third of it until aborted; reports a lost lease and stops.
async fn heartbeat(
    claims: Claims,
    namespace: String,
    key: String,
    token: String,
    lease: Duration,
    lost: watch::Sender<bool>,
) {
    loop {
        tokio::time::sleep(lease / 3).await;
        let message = HeartbeatRequest {
            namespace: namespace.clone(),
            key: key.clone(),
            claim_token: token.clone(),
            lease_ttl: prost_types::Duration::try_from(lease).ok(),
            checkpoint: None,
        };
        let Ok(request) = claims.request(message) else {
            return;
        };
        match claims.inner.clone().heartbeat(request).await {
            Ok(_) => {}
            Err(s)
                if matches!(
                    s.code(),
                    Code::Aborted | Code::FailedPrecondition | Code::NotFound
                ) =>
            {
                let _ = lost.send(true);
                return;
            }
            // The database or the network hiccuped: try again at the next beat.
            Err(_) => {}
        }
    }
}

/// The lease this caller won. Settle it exactly once.
#[derive(Debug)]
pub struct Guard {
    claims: Claims,
    namespace: String,
    key: String,
    token: String,
    response: ClaimResponse,
    heartbeats: Option<JoinHandle<()>>,
    lost: watch::Receiver<bool>,
}

impl Guard {
    /// The Claim's answer: the attempt number (a fencing number for downstream writes), and
    /// the checkpoint and recovery payload after a takeover.
    pub fn claim(&self) -> &ClaimResponse {
        &self.response
    }

    /// Completes when the lease was lost (somebody took the work over): stop working.
    pub async fn lost(&mut self) {
        let _ = self.lost.wait_for(|lost| *lost).await;
    }

    fn stop_heartbeats(&mut self) {
        if let Some(handle) = self.heartbeats.take() {
            handle.abort();
        }
    }

    /// The work is done; `response` is replayed to duplicates.
    pub async fn complete(mut self, response: Vec<u8>) -> Result<Receipt, Error> {
        self.stop_heartbeats();
        let message = CompleteRequest {
            namespace: self.namespace.clone(),
            key: self.key.clone(),
            claim_token: self.token.clone(),
            response,
        };
        let request = self.claims.request(message)?;
        let out = self.claims.inner.clone().complete(request).await;
        out.map(|r| r.into_inner().receipt.unwrap_or_default())
            .map_err(Error::from)
    }

    /// The attempt failed; retry after `retry_after` (or the namespace's backoff).
    pub async fn retry(
        mut self,
        error: &str,
        retry_after: Option<Duration>,
    ) -> Result<Receipt, Error> {
        self.stop_heartbeats();
        let message = retry_request(&self, error, retry_after);
        let request = self.claims.request(message)?;
        let out = self.claims.inner.clone().retry(request).await;
        out.map(|r| r.into_inner().receipt.unwrap_or_default())
            .map_err(Error::from)
    }

    /// The event is poison: move it to the dead letters.
    pub async fn quarantine(mut self, error: &str) -> Result<Receipt, Error> {
        self.stop_heartbeats();
        let message = QuarantineRequest {
            namespace: self.namespace.clone(),
            key: self.key.clone(),
            claim_token: self.token.clone(),
            error: error.into(),
        };
        let request = self.claims.request(message)?;
        let out = self.claims.inner.clone().quarantine(request).await;
        out.map(|r| r.into_inner().receipt.unwrap_or_default())
            .map_err(Error::from)
    }
}

fn retry_request(guard: &Guard, error: &str, retry_after: Option<Duration>) -> RetryRequest {
    RetryRequest {
        namespace: guard.namespace.clone(),
        key: guard.key.clone(),
        claim_token: guard.token.clone(),
        error: error.into(),
        retry_after: retry_after.and_then(|d| prost_types::Duration::try_from(d).ok()),
        count_attempt: None,
    }
}

impl Drop for Guard {
    /// Dropped unsettled: give the work back at once (a Retry due in one second).
    fn drop(&mut self) {
        let Some(handle) = self.heartbeats.take() else {
            return;
        };
        handle.abort();
        let message = retry_request(
            self,
            "claim guard dropped without settling",
            Some(Duration::from_secs(1)),
        );
        let (claims, Ok(request)) = (self.claims.clone(), self.claims.request(message)) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = claims.inner.clone().retry(request).await;
            });
        }
    }
}
