//! Claim in PostgreSQL: a read, and only when a write is due, one statement (a CTE) that
//! writes only when the row is still absent or really due. A duplicate costs that one read
//! and seals nothing; a first delivery or a takeover costs the read and the statement.
//!
//! The read decides with `domain::decide_claim` on the database's clock, so the sealer runs
//! only for a write, and only for what that write stores: the recovery payload of a new row
//! (under its new life) or of a takeover of a row without one (under the row's life), or
//! the "exceeded max attempts" text of a budget quarantine. Every branch of the statement
//! that would store a sealed value the caller did not prepare does not run, and an update
//! runs only on the life the values were sealed for; so when the row changed between the
//! read and the statement (or a concurrent insert committed after the statement's
//! snapshot), the statement returns the current row or nothing, and the Claim reads and
//! decides again (at most [`MAX_RACES`] times). A row whose sealed fields do not open
//! answers DATA_LOSS from the read, before anything is decided or written.

use super::{PgDriver, clock, interpret, micros};
use crate::domain::{
    ClaimInput, ClaimOutcome, Decision, Policy, State, Timestamp, Write, decide_claim,
};
use crate::seal::{Field, LIFE_LEN, new_life};
use crate::store::StoreError;
use crate::store::driver::Row;
use crate::store::row::columns;
use crate::store::sealed::binding;
use sqlx::Row as _;
use std::time::Duration;

/// How often a Claim reads again after losing a race to a concurrent commit.
const MAX_RACES: usize = 16;

/// The row and the store's clock, without a lock.
const READ: &str = concat!(
    "SELECT ",
    clock!("$5", "$4"),
    " AS db_now, ",
    columns!(),
    " FROM receipts WHERE tenant_id = $1 AND namespace = $2 AND key = $3"
);

/// `$8` is the sealed payload (or NULL), `$10` the sealed error text of a budget quarantine
/// (or NULL), `$12` the new row's life (NULL: an update was prepared, not an insert), `$13`
/// the life of the row an update was prepared for (NULL for a row from before lifetimes),
/// `$14` whether the Claim carries a payload, `$15` how many microseconds after the
/// statement's start it may still commit (NULL: no deadline). `ins` runs only when an
/// insert was prepared; `upd` only when an update was, on the same life, with every sealed
/// value it stores. A takeover locks the row first (`locked`) and only then reads the clock
/// (`t`), so its lease runs from when the row was had, however long the lock took; every
/// written row passes `claimd_in_time` after that last wait, or the whole statement rolls
/// back.
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
                          lease_expires_at, created_at, updated_at, recovery_payload, life_id)
    SELECT $1, $2, $3, 'processing', 1, $5, $6, c.now + $7::bigint * interval '1 microsecond',
           c.now, c.now, $8, $12
    FROM c WHERE NOT EXISTS (SELECT 1 FROM cur) AND $12::bytea IS NOT NULL
    ON CONFLICT (tenant_id, namespace, key) DO NOTHING
    RETURNING *
),
locked AS MATERIALIZED (
    SELECT r.key FROM receipts r, c, cur
    WHERE r.tenant_id = $1 AND r.namespace = $2 AND r.key = $3 AND cur.fingerprint = $5
      AND ((r.state = 'processing' AND r.lease_expires_at <= c.now)
        OR (r.state = 'retry_wait' AND r.next_attempt_at <= c.now))
      AND $12::bytea IS NULL AND r.life_id IS NOT DISTINCT FROM $13::bytea
    FOR UPDATE OF r
),
t AS (SELECT ",
    clock!(after_lock: "$11", "$4"),
    " AS now FROM locked),
upd AS (
    UPDATE receipts r SET
        state = CASE WHEN r.attempt - r.free_attempts >= $9 THEN 'quarantined' ELSE 'processing' END,
        attempt = CASE WHEN r.attempt - r.free_attempts >= $9 THEN r.attempt ELSE r.attempt + 1 END,
        claim_token = CASE WHEN r.attempt - r.free_attempts >= $9 THEN NULL ELSE $6 END,
        lease_expires_at = CASE WHEN r.attempt - r.free_attempts >= $9 THEN NULL
                                ELSE t.now + $7::bigint * interval '1 microsecond' END,
        last_error = CASE WHEN r.attempt - r.free_attempts >= $9 THEN $10 ELSE r.last_error END,
        next_attempt_at = NULL,
        recovery_payload = CASE WHEN r.attempt - r.free_attempts >= $9 THEN r.recovery_payload
                                ELSE COALESCE(r.recovery_payload, $8) END,
        updated_at = t.now
    FROM c, t, cur
    WHERE r.tenant_id = $1 AND r.namespace = $2 AND r.key = $3 AND cur.fingerprint = $5
      AND ((r.state = 'processing' AND r.lease_expires_at <= c.now)
        OR (r.state = 'retry_wait' AND r.next_attempt_at <= c.now))
      AND $12::bytea IS NULL AND r.life_id IS NOT DISTINCT FROM $13::bytea
      AND CASE WHEN r.attempt - r.free_attempts >= $9 THEN $10::bytea IS NOT NULL
               ELSE r.recovery_payload IS NOT NULL OR $8::bytea IS NOT NULL OR NOT $14::boolean
          END
    RETURNING r.*
)
SELECT 'ins' AS src, c.now AS db_now, claimd_in_time(statement_timestamp() + $15::bigint * interval '1 microsecond') AS in_time, ins.* FROM ins, c
UNION ALL SELECT 'upd', c.now, claimd_in_time(statement_timestamp() + $15::bigint * interval '1 microsecond'), upd.* FROM upd, c
UNION ALL SELECT 'cur', c.now, true, cur.* FROM cur, c WHERE NOT EXISTS (SELECT 1 FROM upd)"
);

/// Room left for the answer's way back: the statement refuses to commit this much before
/// the call's answer is due, so a commit that just makes it is also answered in time.
const ANSWER_TRIP: Duration = Duration::from_millis(2);

/// How long the statement may still take before it must not commit, in microseconds, for
/// `claimd_in_time` (migration 0007), which it calls after its last lock wait; NULL (no
/// limit) for a call without a deadline.
fn due_in_micros() -> Option<i64> {
    let left = crate::deadline::remaining()?.saturating_sub(ANSWER_TRIP);
    Some(i64::try_from(left.as_micros()).unwrap_or(i64::MAX))
}

/// The sealed values one prepared write stores, for the life they are sealed under.
#[derive(Default)]
struct Prepared {
    payload: Option<Vec<u8>>,
    exceeded: Option<Vec<u8>>,
    /// The new row's life, when an insert is prepared.
    new_life: Option<[u8; LIFE_LEN]>,
    /// The life of the row an update is prepared for.
    row_life: Option<Vec<u8>>,
}

impl PgDriver {
    /// The store's clock and the row, opened, with its values as stored.
    async fn read_for_claim(
        &self,
        tenant: &str,
        input: &ClaimInput,
    ) -> Result<Option<(Timestamp, Row)>, StoreError> {
        let found = sqlx::query(READ)
            .bind(tenant)
            .bind(&input.id.namespace)
            .bind(&input.id.key)
            .bind(self.offset())
            .bind(self.frozen())
            .fetch_optional(&self.pool)
            .await
            .map_err(interpret)?;
        let Some(found) = found else { return Ok(None) };
        let now: Timestamp = found.try_get("db_now").map_err(interpret)?;
        let (mut receipt, stored) = super::rows::row(&found)?;
        stored.open_into(&self.seal, tenant, &mut receipt)?;
        Ok(Some((now, (receipt, stored))))
    }

    /// Seals what a new row stores: its payload, under its new life.
    fn prepare_insert(&self, tenant: &str, input: &ClaimInput) -> Prepared {
        let life = new_life();
        let at = binding(tenant, &input.id.namespace, &input.id.key, &life);
        let payload = input.recovery_payload.as_deref();
        Prepared {
            payload: payload.map(|p| self.seal.seal(at, Field::RecoveryPayload, p)),
            new_life: Some(life),
            ..Prepared::default()
        }
    }

    /// Seals what the update `decided` stores in the row `(before, stored)`, under the
    /// row's life: the error text of a budget quarantine, or the payload of a takeover of a
    /// row that has none.
    fn prepare_update(
        &self,
        tenant: &str,
        input: &ClaimInput,
        decided: &ClaimOutcome,
        (before, stored): &Row,
    ) -> Prepared {
        let at = binding(tenant, &input.id.namespace, &input.id.key, stored.life());
        let mut prepared = Prepared {
            row_life: stored.life_id.clone(),
            ..Prepared::default()
        };
        if decided.decision == Decision::Quarantined {
            let text = crate::domain::EXCEEDED_MAX_ATTEMPTS.as_bytes();
            prepared.exceeded = Some(self.seal.seal(at, Field::LastError, text));
        } else if before.recovery_payload.is_none() {
            let payload = input.recovery_payload.as_deref();
            prepared.payload = payload.map(|p| self.seal.seal(at, Field::RecoveryPayload, p));
        }
        prepared
    }

    /// Claim: a read, and one statement when a write is due, both again only after losing
    /// a race to a concurrent commit.
    pub(super) async fn claim(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
    ) -> Result<ClaimOutcome, StoreError> {
        for _ in 0..MAX_RACES {
            let prepared = match self.read_for_claim(tenant, input).await? {
                None => self.prepare_insert(tenant, input),
                Some((now, row)) => {
                    let decided = decide_claim(Some(&row.0), input, now, policy);
                    if decided.write == Write::None {
                        return Ok(decided);
                    }
                    self.prepare_update(tenant, input, &decided, &row)
                }
            };
            if let Some(outcome) = self.write_claim(tenant, input, policy, &prepared).await? {
                return Ok(outcome);
            }
        }
        Err(StoreError::Contended)
    }

    /// Runs the statement with `prepared`; `None` when it lost a race (read again).
    async fn write_claim(
        &self,
        tenant: &str,
        input: &ClaimInput,
        policy: &Policy,
        prepared: &Prepared,
    ) -> Result<Option<ClaimOutcome>, StoreError> {
        let row = sqlx::query(CLAIM)
            .bind(tenant)
            .bind(&input.id.namespace)
            .bind(&input.id.key)
            .bind(self.offset())
            .bind(&input.fingerprint)
            .bind(input.new_token)
            .bind(micros(input.lease_ttl))
            .bind(&prepared.payload)
            .bind(i64::from(policy.max_attempts))
            .bind(&prepared.exceeded)
            .bind(self.frozen())
            .bind(prepared.new_life.map(|l| l.to_vec()))
            .bind(&prepared.row_life)
            .bind(input.recovery_payload.is_some())
            .bind(due_in_micros())
            .fetch_optional(&self.pool)
            .await
            .map_err(interpret)?;
        // No row: the row went away, or a concurrent insert committed after this
        // statement's snapshot.
        let Some(row) = row else { return Ok(None) };
        let src: String = row.try_get("src").map_err(interpret)?;
        let now: Timestamp = row.try_get("db_now").map_err(interpret)?;
        let (mut receipt, blobs): Row = super::rows::row(&row)?;
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
                // A write is due that this statement was not prepared for, or another
                // caller's commit got there first: read and prepare again.
                if out.write != Write::None {
                    return Ok(None);
                }
                out
            }
        };
        Ok(Some(outcome))
    }
}
