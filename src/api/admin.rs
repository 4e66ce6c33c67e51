//! The dead-letter admin RPCs: `List` (a tenant's receipts by namespace and state, paged in
//! (namespace, key) order) and `Redrive` (a QUARANTINED receipt gets a fresh attempt budget
//! and is due at once). The `ClaimService` impl in `mod.rs` delegates here.

use super::{ClaimsApi, convert, principal, receipt_key, tenant_for, validate};
use crate::pb;
use crate::store::ListQuery;
use crate::telemetry::note_namespace;
use tonic::{Request, Response, Status};

impl ClaimsApi {
    /// `List`: validates every field, then checks that the caller's key may use the
    /// namespace (a key limited to namespaces must name one), then reads one page.
    pub(super) async fn list_receipts(
        &self,
        request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        let caller = principal(&request)?;
        let req = request.into_inner();
        let namespace = validate::optional_namespace("namespace", req.namespace)?;
        if let Some(namespace) = &namespace {
            note_namespace(namespace);
        }
        let states = validate::states("states", &req.states)?;
        let limit = validate::page_size(req.page_size)?;
        let after = convert::decode_list_token(&req.page_token)?;
        caller.check(namespace.as_deref())?;
        let query = ListQuery {
            namespace,
            states,
            limit,
            max_bytes: self.page_bytes,
            after,
            key_prefix: None,
            updated_since: None,
        };
        let page = self.store.list(&caller.tenant, &query).await?;
        Ok(Response::new(pb::ListResponse {
            receipts: page.receipts.into_iter().map(convert::receipt).collect(),
            next_page_token: page
                .next
                .as_ref()
                .map(convert::encode_list_token)
                .unwrap_or_default(),
        }))
    }

    /// `Redrive`: the dead letter becomes RETRY_WAIT, due now, with a fresh budget.
    pub(super) async fn redrive_receipt(
        &self,
        request: Request<pb::RedriveRequest>,
    ) -> Result<Response<pb::RedriveResponse>, Status> {
        let caller = principal(&request)?;
        let req = request.into_inner();
        let id = receipt_key(req.namespace, req.key)?;
        let tenant = tenant_for(caller, &id)?;
        self.quotas
            .write(&tenant, &self.policies.current().quotas)?;
        let receipt = self.store.redrive(&tenant, &id).await?;
        // An operator's action: logged (the `rpc` span carries the namespace).
        tracing::info!(attempt = receipt.attempt, "dead letter redriven");
        Ok(Response::new(pb::RedriveResponse {
            receipt: Some(convert::receipt(receipt)),
        }))
    }
}
