//! The gRPC face of claimd: `claimd.v1.ClaimService`. Each RPC validates its request, takes
//! the tenant from the request context (never from the body), calls the store and turns the
//! answer into a wire message; errors become status codes in `error.rs` only.

mod admin;
mod convert;
mod error;
pub mod quota;
mod validate;
mod wait;

pub use convert::{decode_list_token, encode_list_token};
pub use error::{InvalidField, oversized_is_resource_exhausted, undecodable_is_invalid_argument};
pub use validate::{
    DEFAULT_MAX_BLOB, MAX_KEY, MAX_RECEIPT_BYTES, MAX_REQUEST_BYTES, max_response_bytes,
};
pub use wait::{ClaimError, DEFAULT_MAX_WAITING_CLAIMS, MAX_WAIT, Waits};

use crate::auth::Principal;
use crate::domain::{Action, ClaimInput, PolicyHandle, ReceiptKey};
use crate::pb::{self, claim_service_server::ClaimService};
use crate::store::{OrphanQuery, Store, StoreError};
use crate::telemetry::{
    Activity, ClaimTelemetry, DEFAULT_NAMESPACE_LIMIT, NamespaceLabels, note_namespace,
};
use chrono::TimeDelta;
use std::sync::Arc;
use tonic::{Request, Response, Status};
use uuid::Uuid;

/// The ClaimService implementation.
#[derive(Clone)]
pub struct ClaimsApi {
    store: Arc<dyn Store>,
    policies: PolicyHandle,
    max_blob: usize,
    page_bytes: usize,
    telemetry: Arc<ClaimTelemetry>,
    activity: Arc<Activity>,
    waits: Waits,
    quotas: Arc<quota::Limiter>,
}

impl ClaimsApi {
    /// A service over `store` with per-namespace `policies` (read per call, so a reload
    /// applies to the next call) and a byte limit for each blob.
    pub fn new(store: Arc<dyn Store>, policies: PolicyHandle, max_blob: usize) -> Self {
        let labels = NamespaceLabels::new(policies.clone(), DEFAULT_NAMESPACE_LIMIT);
        ClaimsApi {
            store,
            policies,
            max_blob,
            page_bytes: crate::store::DEFAULT_PAGE_BYTES,
            telemetry: Arc::new(ClaimTelemetry::new(labels)),
            activity: Arc::default(),
            waits: Waits::new(
                DEFAULT_MAX_WAITING_CLAIMS as usize,
                crate::drain::Drain::default(),
            ),
            quotas: Arc::default(),
        }
    }

    /// Refills the tenants' quota buckets as `clock` moves (the store's: the monotonic
    /// clock plus the offset tests move time by).
    pub fn with_quota_clock(mut self, clock: crate::store::Clock) -> Self {
        self.quotas = Arc::new(quota::Limiter::new(clock));
        self
    }

    /// Lets at most `max` Claims wait at once (`wait`), all answered when `drain` starts.
    pub fn with_waits(mut self, max: usize, drain: crate::drain::Drain) -> Self {
        self.waits = Waits::new(max, drain);
        self
    }

    /// Caps List and ListOrphaned pages at `bytes` of receipts (at least one receipt);
    /// the default is [`crate::store::DEFAULT_PAGE_BYTES`].
    pub fn with_page_bytes(mut self, bytes: usize) -> Self {
        self.page_bytes = bytes;
        self
    }

    /// Gives `limit` namespaces besides the policy file's their own metric label (the rest
    /// are `other`); the default is [`DEFAULT_NAMESPACE_LIMIT`].
    pub fn with_namespace_limit(mut self, limit: usize) -> Self {
        let labels = NamespaceLabels::new(self.policies.clone(), limit);
        self.telemetry = Arc::new(ClaimTelemetry::new(labels));
        self
    }
}

impl ClaimsApi {
    /// The Claims this service decided in the last minute, per tenant and namespace.
    pub fn activity(&self) -> Arc<Activity> {
        self.activity.clone()
    }

    /// The store this service calls.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// `tenant`'s quotas in force and what is left of each on this claimd (the console's
    /// overview).
    pub fn quota_usage(&self, tenant: &str) -> quota::Usage {
        self.quotas.usage(tenant, &self.policies.current().quotas)
    }

    /// `tenant`'s storage limits in force.
    pub fn storage_quota(&self, tenant: &str) -> crate::domain::Storage {
        self.policies.current().quotas.for_tenant(tenant).storage
    }
}

/// The caller's principal, put into the request by the authentication layer.
fn principal<T>(req: &Request<T>) -> Result<Principal, Status> {
    req.extensions()
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| crate::auth::Refusal::NoPrincipal.into())
}

/// The tenant of a caller allowed to use `id`'s namespace.
fn tenant_for(principal: Principal, id: &ReceiptKey) -> Result<String, Status> {
    principal.check(Some(&id.namespace))?;
    Ok(principal.tenant)
}

fn receipt_key(namespace: String, key: String) -> Result<ReceiptKey, InvalidField> {
    validate::namespace("namespace", &namespace)?;
    note_namespace(&namespace);
    validate::key(&key)?;
    Ok(ReceiptKey { namespace, key })
}

impl ClaimsApi {
    /// A store error as the caller's status; a storage limit's refusal counted as the
    /// tenant's.
    fn refused(&self, tenant: &str, quotas: &crate::domain::Quotas, e: StoreError) -> Status {
        match e {
            StoreError::OverQuota(r) => Status::from(self.quotas.stored(tenant, quotas, r)),
            e => Status::from(e),
        }
    }

    /// Complete, Heartbeat, Retry and Quarantine share everything but the action.
    async fn act(
        &self,
        tenant: String,
        id: ReceiptKey,
        token: &str,
        action: impl FnOnce(&crate::domain::Policy) -> Result<Action, InvalidField>,
    ) -> Result<Option<pb::Receipt>, Status> {
        let token: Uuid = validate::claim_token(token)?;
        let policies = self.policies.current();
        let policy = &policies
            .for_namespace(&id.namespace)
            .for_tenant(&tenant, &policies.quotas);
        let action = action(policy)?;
        self.quotas.write(&tenant, &policies.quotas)?;
        tracing::debug!(claim.action = action.name(), "act");
        let began = tokio::time::Instant::now();
        let acted = self.store.act(&tenant, &id, token, &action, policy).await;
        let mut receipt = acted.map_err(|e| self.refused(&tenant, &policies.quotas, e))?;
        // A Heartbeat's new lease starts inside its write (after any lock it waited for, and
        // before its commit waited): if the call took more than three quarters of the
        // lease, on this process's clock, less than a quarter of it may be left when the
        // answer leaves, and OK would tell the holder it holds a lease that is over. It is
        // renewed first, as a slow Claim's is, or answered UNAVAILABLE saying the lease may
        // have been extended (docs/DESIGN.md §4.1).
        if let Action::Heartbeat { lease_ttl, .. } = &action {
            let held = wait::Held {
                tenant: &tenant,
                id: &id,
                token,
                lease_ttl: *lease_ttl,
                call: crate::store::LeaseCall::Heartbeat,
            };
            if let Some(renewed) = wait::renewed(&*self.store, held, policy, began).await? {
                receipt = renewed;
            }
        }
        Ok(Some(convert::receipt(receipt)))
    }
}

#[tonic::async_trait]
impl ClaimService for ClaimsApi {
    async fn claim(
        &self,
        request: Request<pb::ClaimRequest>,
    ) -> Result<Response<pb::ClaimResponse>, Status> {
        let caller = principal(&request)?;
        let req = request.into_inner();
        let id = receipt_key(req.namespace, req.key)?;
        let tenant = tenant_for(caller, &id)?;
        validate::fingerprint(&req.fingerprint)?;
        let lease = validate::duration("lease_ttl", req.lease_ttl, crate::domain::MIN_DELAY)?;
        let recovery_payload =
            validate::blob("recovery_payload", req.recovery_payload, self.max_blob)?;
        let policies = self.policies.current();
        let policy = &policies
            .for_namespace(&id.namespace)
            .for_tenant(&tenant, &policies.quotas);
        let input = ClaimInput {
            id,
            fingerprint: req.fingerprint,
            lease_ttl: lease.unwrap_or(policy.lease_ttl),
            recovery_payload,
            new_token: Uuid::new_v4(),
        };
        let wait = validate::wait(req.wait)?;
        // Validated and authorized; nothing read or written yet (docs/DESIGN.md §5.15).
        self.quotas.claim(&tenant, &policies.quotas)?;
        let store = &*self.store;
        let park = || self.quotas.park(&tenant, &policies.quotas);
        let outcome = self
            .waits
            .claim(store, &tenant, &input, policy, wait, park)
            .await
            .map_err(|e| match e {
                ClaimError::Store(e) => self.refused(&tenant, &policies.quotas, e),
                e => Status::from(e),
            })?;
        let namespace = &outcome.receipt.id.namespace;
        let (decision, attempt) = (outcome.decision, req.delivery_attempt);
        self.telemetry.claim_decided(namespace, decision, attempt);
        self.activity.note(&tenant, namespace, decision);
        Ok(Response::new(pb::ClaimResponse {
            decision: convert::decision(outcome.decision) as i32,
            claim_token: outcome.token().map(|t| t.to_string()).unwrap_or_default(),
            receipt: Some(convert::receipt(outcome.receipt)),
        }))
    }

    async fn complete(
        &self,
        request: Request<pb::CompleteRequest>,
    ) -> Result<Response<pb::CompleteResponse>, Status> {
        let caller = principal(&request)?;
        let req = request.into_inner();
        let id = receipt_key(req.namespace, req.key)?;
        let tenant = tenant_for(caller, &id)?;
        let response = validate::blob("response", req.response, self.max_blob)?;
        let receipt = self
            .act(tenant, id, &req.claim_token, |_| {
                Ok(Action::Complete { response })
            })
            .await?;
        Ok(Response::new(pb::CompleteResponse { receipt }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        let caller = principal(&request)?;
        let req = request.into_inner();
        let id = receipt_key(req.namespace, req.key)?;
        let tenant = tenant_for(caller, &id)?;
        let lease = validate::duration("lease_ttl", req.lease_ttl, crate::domain::MIN_DELAY)?;
        let checkpoint = match req.checkpoint {
            Some(cp) => Some(validate::blob("checkpoint", cp, self.max_blob)?.unwrap_or_default()),
            None => None,
        };
        let receipt = self
            .act(tenant, id, &req.claim_token, |policy| {
                Ok(Action::Heartbeat {
                    lease_ttl: lease.unwrap_or(policy.lease_ttl),
                    checkpoint,
                })
            })
            .await?;
        Ok(Response::new(pb::HeartbeatResponse { receipt }))
    }

    async fn retry(
        &self,
        request: Request<pb::RetryRequest>,
    ) -> Result<Response<pb::RetryResponse>, Status> {
        let caller = principal(&request)?;
        let req = request.into_inner();
        let id = receipt_key(req.namespace, req.key)?;
        let tenant = tenant_for(caller, &id)?;
        let error = validate::text("error", req.error, self.max_blob)?;
        let retry_after =
            validate::duration("retry_after", req.retry_after, crate::domain::MIN_DELAY)?;
        let action = Action::Retry {
            error,
            retry_after,
            count_attempt: req.count_attempt.unwrap_or(true),
            jitter: rand::random::<f64>(),
        };
        let receipt = self
            .act(tenant, id, &req.claim_token, |_| Ok(action))
            .await?;
        Ok(Response::new(pb::RetryResponse { receipt }))
    }

    async fn quarantine(
        &self,
        request: Request<pb::QuarantineRequest>,
    ) -> Result<Response<pb::QuarantineResponse>, Status> {
        let caller = principal(&request)?;
        let req = request.into_inner();
        let id = receipt_key(req.namespace, req.key)?;
        let tenant = tenant_for(caller, &id)?;
        let error = validate::text("error", req.error, self.max_blob)?;
        let receipt = self
            .act(tenant, id, &req.claim_token, |_| {
                Ok(Action::Quarantine { error })
            })
            .await?;
        Ok(Response::new(pb::QuarantineResponse { receipt }))
    }

    async fn get(
        &self,
        request: Request<pb::GetRequest>,
    ) -> Result<Response<pb::GetResponse>, Status> {
        let caller = principal(&request)?;
        let req = request.into_inner();
        let id = receipt_key(req.namespace, req.key)?;
        let tenant = tenant_for(caller, &id)?;
        let receipt = self.store.get(&tenant, &id).await?;
        let receipt = receipt.ok_or(crate::store::StoreError::NotFound)?;
        Ok(Response::new(pb::GetResponse {
            receipt: Some(convert::receipt(receipt)),
        }))
    }

    async fn list_orphaned(
        &self,
        request: Request<pb::ListOrphanedRequest>,
    ) -> Result<Response<pb::ListOrphanedResponse>, Status> {
        let caller = principal(&request)?;
        let req = request.into_inner();
        let namespace = match req.namespace.is_empty() {
            true => None,
            false => {
                Some(validate::namespace("namespace", &req.namespace).map(|()| req.namespace)?)
            }
        };
        if let Some(namespace) = &namespace {
            note_namespace(namespace);
        }
        let overdue_by = validate::duration("overdue_by", req.overdue_by, TimeDelta::zero())?;
        caller.check(namespace.as_deref())?;
        let tenant = caller.tenant;
        let query = OrphanQuery {
            namespace,
            limit: validate::page_size(req.page_size)?,
            max_bytes: self.page_bytes,
            after: convert::decode_page_token(&req.page_token)?,
            overdue_by: overdue_by.unwrap_or_default(),
        };
        let page = self.store.list_orphaned(&tenant, &query).await?;
        Ok(Response::new(pb::ListOrphanedResponse {
            orphans: page.orphans.into_iter().map(convert::orphan).collect(),
            next_page_token: page
                .next
                .as_ref()
                .map(convert::encode_page_token)
                .unwrap_or_default(),
        }))
    }

    async fn list(
        &self,
        request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        self.list_receipts(request).await
    }

    async fn redrive(
        &self,
        request: Request<pb::RedriveRequest>,
    ) -> Result<Response<pb::RedriveResponse>, Status> {
        self.redrive_receipt(request).await
    }
}
