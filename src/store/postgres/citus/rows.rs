//! The janitor's and `reseal`'s statements on Citus, one tenant at a time: plain
//! PostgreSQL's picks rows of every tenant in one `DELETE … IN (SELECT … LIMIT n FOR
//! UPDATE SKIP LOCKED)` (or one keyset page over the whole table), which spans shards and
//! which Citus does not run. Here a multi-shard read finds the tenants that have rows to
//! prune (or the next tenant to reseal), and each tenant's rows are pruned (or locked and
//! read) by the same statement narrowed to that tenant, which Citus routes to its shard.

use super::super::prune::{DELETE_ROWS as DELETE, STRIP_ROWS as STRIP};
use super::super::{PgDriver, clock, interpret, micros};
use crate::store::reseal::ResealRow;
use crate::store::{PruneScope, PruneStep, ResealCursor, StoreError};
use sqlx::{FromRow, Postgres, Transaction};
use std::sync::LazyLock;

/// The tenants with receipts of namespace `$1` past retention (`$3`/`$4`: the clock less
/// the retention, as in [`DELETE`]).
const TENANTS_TO_DELETE: &str = concat!(
    "SELECT DISTINCT tenant_id FROM receipts
    WHERE namespace = $1 AND (
        (state = 'completed' AND response IS NOT NULL AND completed_at < ",
    clock!("$3", "$2"),
    ")
        OR ((state = 'quarantined' OR (state = 'completed' AND response IS NULL))
            AND terminal_at < ",
    clock!("$3", "$2"),
    "))
    ORDER BY tenant_id"
);

/// The tenants with responses of namespace `$1` past response retention.
const TENANTS_TO_STRIP: &str = concat!(
    "SELECT DISTINCT tenant_id FROM receipts
    WHERE namespace = $1 AND state = 'completed' AND response IS NOT NULL
      AND completed_at < ",
    clock!("$3", "$2"),
    "
    ORDER BY tenant_id"
);

/// The namespaces that hold terminal receipts, of every tenant.
pub(in crate::store::postgres) const NAMESPACES: &str =
    "SELECT DISTINCT namespace FROM receipts WHERE terminal_at IS NOT NULL ORDER BY namespace";

/// `sql` with every pick of rows narrowed to the tenant `$param`.
fn one_tenant(sql: &str, param: usize) -> String {
    let tenant = format!("tenant_id = ${param}::text");
    sql.replace(
        "WHERE namespace = $1",
        &format!("WHERE {tenant} AND namespace = $1"),
    )
    .replace(
        "WHERE (tenant_id, namespace, key) IN",
        &format!("WHERE {tenant} AND (tenant_id, namespace, key) IN"),
    )
}

/// [`DELETE`] of one tenant, `$5`.
static DELETE_TENANT: LazyLock<String> = LazyLock::new(|| one_tenant(DELETE, 5));
/// [`STRIP`] of one tenant, `$6`, its `response_pruned_at` the value `$5` read by
/// [`CLOCK`] first: Citus routes a modification whole only when it calls no volatile
/// function inside a `COALESCE`, which the clock is (a clock read in the statement's
/// `FROM` instead made Citus plan it in pieces: `tests/it/citus.rs` checks).
static STRIP_TENANT: LazyLock<String> = LazyLock::new(|| {
    let now = concat!("response_pruned_at = ", clock!("$4", "$5"));
    assert!(
        STRIP.contains(now),
        "STRIP sets response_pruned_at to the clock"
    );
    one_tenant(
        &STRIP.replace(now, "response_pruned_at = $5::timestamptz"),
        6,
    )
});

/// The store's clock (`$1` frozen, `$2` the offset), for [`STRIP_TENANT`].
const CLOCK: &str = concat!("SELECT ", clock!("$1", "$2"));

/// One tenant's rows after a (namespace, key), locked, for `reseal`.
const RESEAL_TENANT: &str = "SELECT tenant_id, namespace, key, last_error, checkpoint, response,
    recovery_payload, life_id, write_id FROM receipts
    WHERE tenant_id = $1 AND (namespace, key) > ($2::text, $3::text)
    ORDER BY namespace, key
    LIMIT $4
    FOR UPDATE";

/// The first tenant after `$1` (NULL: the first of all) that has receipts.
const NEXT_TENANT: &str =
    "SELECT min(tenant_id) FROM receipts WHERE $1::text IS NULL OR tenant_id > $1";

impl PgDriver {
    /// One prune statement's worth (`batch` rows at most) of `scope`, tenant by tenant.
    pub(in crate::store::postgres) async fn prune_citus(
        &self,
        scope: &PruneScope,
        step: PruneStep,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let (find, sql, age) = match step {
            PruneStep::Delete => (TENANTS_TO_DELETE, &*DELETE_TENANT, scope.retention),
            PruneStep::StripResponse => {
                (TENANTS_TO_STRIP, &*STRIP_TENANT, scope.response_retention)
            }
        };
        let before = self.offset().saturating_sub(micros(age));
        let tenants = sqlx::query_scalar(find)
            .bind(&scope.namespace)
            .bind(before)
            .bind(self.frozen())
            .fetch_all(&self.pool);
        let tenants: Vec<String> = self
            .bounded(async { tenants.await.map_err(interpret) })
            .await?;
        let now: Option<crate::domain::Timestamp> = match step {
            PruneStep::StripResponse if !tenants.is_empty() => {
                let now = sqlx::query_scalar(CLOCK)
                    .bind(self.frozen())
                    .bind(self.offset())
                    .fetch_one(&self.pool);
                Some(self.bounded(async { now.await.map_err(interpret) }).await?)
            }
            _ => None,
        };
        let mut done = 0;
        for tenant in tenants {
            let left = u64::from(batch).saturating_sub(done);
            if left == 0 {
                break;
            }
            let mut query = sqlx::query(sql.as_str())
                .bind(&scope.namespace)
                .bind(i64::try_from(left).unwrap_or(i64::MAX))
                .bind(before)
                .bind(self.frozen());
            if let Some(now) = now {
                query = query.bind(now); // response_pruned_at
            }
            let pruned = query.bind(&tenant).execute(&self.pool);
            let pruned = self
                .bounded(async { pruned.await.map_err(interpret) })
                .await?;
            done += pruned.rows_affected();
        }
        Ok(done)
    }

    /// Up to `limit` rows after `after` in primary-key order, locked in `tx`, read one
    /// tenant at a time.
    pub(in crate::store::postgres) async fn reseal_rows_citus(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        after: Option<&ResealCursor>,
        limit: u32,
    ) -> Result<Vec<ResealRow>, StoreError> {
        let mut rows: Vec<ResealRow> = Vec::new();
        let (mut tenant, mut from) = match after {
            Some(c) => (Some(c.tenant.clone()), (c.namespace.clone(), c.key.clone())),
            None => (next_tenant(tx, None).await?, (String::new(), String::new())),
        };
        while let Some(t) = tenant {
            let left = i64::from(limit) - rows.len() as i64;
            if left <= 0 {
                break;
            }
            let found = sqlx::query(RESEAL_TENANT)
                .bind(&t)
                .bind(&from.0)
                .bind(&from.1)
                .bind(left)
                .fetch_all(&mut **tx)
                .await
                .map_err(interpret)?;
            for row in &found {
                rows.push(ResealRow::from_row(row).map_err(interpret)?);
            }
            if rows.len() >= limit as usize {
                break;
            }
            tenant = next_tenant(tx, Some(&t)).await?;
            from = (String::new(), String::new());
        }
        Ok(rows)
    }
}

/// The first tenant after `after` that has receipts.
async fn next_tenant(
    tx: &mut Transaction<'static, Postgres>,
    after: Option<&str>,
) -> Result<Option<String>, StoreError> {
    sqlx::query_scalar(NEXT_TENANT)
        .bind(after)
        .fetch_one(&mut **tx)
        .await
        .map_err(interpret)
}
