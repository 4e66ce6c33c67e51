//! Claim in PostgreSQL: one statement (a CTE) that reads the receipt and writes only when
//! the row is absent or really due, so a duplicate costs a read. Under READ COMMITTED, a
//! concurrent insert or takeover that commits after the statement's snapshot leaves the
//! statement without a consistent answer; it detects that case and runs again with a new
//! snapshot (the only time a Claim takes a second round trip).
//!
//! The recovery payload and the "exceeded max attempts" text are sealed for this exact row
//! before the statement runs. A takeover is decided in SQL before the row is opened, so a
//! row whose sealed fields do not open can be taken over (attempt + 1) and then answered
//! DATA_LOSS; its lease then runs out again.

use super::{PgDriver, clock, interpret, micros};
use crate::domain::{
    ClaimInput, ClaimOutcome, Decision, Policy, State, Timestamp, Write, decide_claim,
};
use crate::seal::{Binding, Field};
use crate::store::StoreError;
use sqlx::Row;

/// How often a Claim runs again after losing a race to a concurrent commit.
const MAX_RACES: usize = 16;

const CLAIM: &str = concat!(
    "
WITH c AS (SELECT ",
    clock!("$11", "$4"),
    " AS now),
cur AS (
    SELECT r.* FROM receipts r WHERE r.tenant_id = $1 AND r.namespace = $2 AND r.key = $3
),
ins AS (
    INSERT INTO receipts (tenant_id, namespace, key, state, attempt, fingerprint, claim_token,
                          lease_expires_at, created_at, updated_at, recovery_payload)
    SELECT $1, $2, $3, 'processing', 1, $5, $6, c.now + $7::bigint * interval '1 microsecond',
           c.now, c.now, $8
    FROM c WHERE NOT EXISTS (SELECT 1 FROM cur)
    ON CONFLICT (tenant_id, namespace, key) DO NOTHING
    RETURNING *
),
upd AS (
    UPDATE receipts r SET
        state = CASE WHEN r.attempt - r.free_attempts >= $9 THEN 'quarantined' ELSE 'processing' END,
        attempt = CASE WHEN r.attempt - r.free_attempts >= $9 THEN r.attempt ELSE r.attempt + 1 END,
        claim_token = CASE WHEN r.attempt - r.free_attempts >= $9 THEN NULL ELSE $6 END,
        lease_expires_at = CASE WHEN r.attempt - r.free_attempts >= $9 THEN NULL
                                ELSE c.now + $7::bigint * interval '1 microsecond' END,
        last_error = CASE WHEN r.attempt - r.free_attempts >= $9 THEN $10 ELSE r.last_error END,
        next_attempt_at = NULL,
        recovery_payload = CASE WHEN r.attempt - r.free_attempts >= $9 THEN r.recovery_payload
                                ELSE COALESCE(r.recovery_payload, $8) END,
        updated_at = c.now
    FROM c, cur
    WHERE r.tenant_id = $1 AND r.namespace = $2 AND r.key = $3 AND cur.fingerprint = $5
      AND ((r.state = 'processing' AND r.lease_expires_at <= c.now)
        OR (r.state = 'retry_wait' AND r.next_attempt_at <= c.now))
    RETURNING r.*
)
SELECT 'ins' AS src, c.now AS db_now, ins.* FROM ins, c
UNION ALL SELECT 'upd', c.now, upd.* FROM upd, c
UNION ALL SELECT 'cur', c.now, cur.* FROM cur, c WHERE NOT EXISTS (SELECT 1 FROM upd)"
);

impl PgDriver {
    /// Claim as one statement, run again only after losing a race to a concurrent commit.
    pub(super) async fn claim(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError> {
        // Sealed in Rust for this exact row before the statement: the payload a first claim
        // stores and the error text a budget-spent takeover stores.
        let at = Binding {
            tenant,
            namespace: &input.id.namespace,
            key: &input.id.key,
        };
        let payload = input.recovery_payload.as_deref();
        let payload = payload.map(|p| self.seal.seal(at, Field::RecoveryPayload, p));
        let exceeded = crate::domain::EXCEEDED_MAX_ATTEMPTS.as_bytes();
        let exceeded = self.seal.seal(at, Field::LastError, exceeded);
        for _ in 0..MAX_RACES {
            let row = sqlx::query(CLAIM)
                .bind(tenant)
                .bind(&input.id.namespace)
                .bind(&input.id.key)
                .bind(self.offset())
                .bind(&input.fingerprint)
                .bind(input.new_token)
                .bind(micros(input.lease_ttl))
                .bind(&payload)
                .bind(i64::from(policy.max_attempts))
                .bind(&exceeded)
                .bind(self.frozen())
                .fetch_optional(&self.pool)
                .await
                .map_err(interpret)?;
            // No row: a concurrent insert committed after this statement's snapshot.
            let Some(row) = row else { continue };
            let src: String = row.try_get("src").map_err(interpret)?;
            let now: Timestamp = row.try_get("db_now").map_err(interpret)?;
            let (mut receipt, blobs) = super::rows::row(&row)?;
            blobs.open_into(&self.seal, tenant, &mut receipt)?;
            let outcome = match src.as_str() {
                "ins" => ClaimOutcome {
                    decision: Decision::Claimed,
                    receipt,
                    write: Write::Insert,
                },
                "upd" => ClaimOutcome {
                    decision: match receipt.state {
                        State::Quarantined => Decision::Quarantined,
                        _ => Decision::Claimed,
                    },
                    receipt,
                    write: Write::Update,
                },
                _ => {
                    let out = decide_claim(Some(&receipt), input, now, policy);
                    // A write was due but another caller's commit got there first.
                    if out.write != Write::None {
                        continue;
                    }
                    out
                }
            };
            return Ok(outcome);
        }
        Err(StoreError::Contended)
    }
}
