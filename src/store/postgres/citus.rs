//! claimd on a Citus coordinator (docs/DESIGN.md §4.6). A database with the `citus`
//! extension installed is taken to be one; then:
//!
//! - `claimd migrate` leaves `receipts` hash-distributed by `tenant_id` and `api_keys` a
//!   reference table (a copy on every node), idempotently ([`DISTRIBUTE`]); a
//!   `tenant_usage` table, once there is one, distributed colocated with `receipts`;
//! - sessions plan every statement with its parameters' values (`plan_cache_mode =
//!   force_custom_plan`): Citus routes a statement to a shard only when it knows the
//!   tenant it names, and fails a generic plan it cannot route (SQLSTATE 0A000);
//! - every statement on `receipts` names one tenant: a group-commit batch holds one
//!   tenant's jobs, its write is `writes/citus.rs`'s transaction (`batch.rs`), the janitor
//!   prunes tenant by tenant and `reseal` walks one tenant at a time (`rows.rs`);
//! - what Citus reports of a worker it cannot reach is UNAVAILABLE ([`unreachable`]).

mod batch;
mod rows;

pub(super) use rows::NAMESPACES;

use super::interpret;
use crate::store::StoreError;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

/// Whether the database behind `connect` has the `citus` extension installed.
pub(super) async fn detect(connect: &PgConnectOptions) -> Result<bool, StoreError> {
    let mut conn = PgConnection::connect_with(connect)
        .await
        .map_err(interpret)?;
    let citus = sqlx::raw_sql("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
        .fetch_one(&mut conn)
        .await
        .map_err(interpret)
        .and_then(|row| sqlx::Row::try_get(&row, 0).map_err(interpret));
    let _ = conn.close().await;
    citus
}

/// The session settings on Citus, in place of plain PostgreSQL's generic plans.
pub(super) const PLANS: &str = "SET plan_cache_mode = force_custom_plan";

/// After the migrations: each table distributed as claimd needs it, unless it already is
/// (a second `migrate` changes nothing). `receipts` is hash-distributed by `tenant_id`;
/// `api_keys` (looked up by key id, from any tenant) is a reference table.
pub(super) const DISTRIBUTE: &[&str] = &[
    "SELECT create_distributed_table('receipts', 'tenant_id')
     WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'receipts'::regclass)",
    "SELECT create_reference_table('api_keys')
     WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'api_keys'::regclass)",
    // The storage quotas' per-tenant counters, once a migration makes them: beside each
    // tenant's receipts, on the same worker (colocated), so a batch's upsert of them is
    // routed with its writes.
    "SELECT create_distributed_table(to_regclass('tenant_usage'), 'tenant_id', colocate_with => 'receipts')
     WHERE to_regclass('tenant_usage') IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('tenant_usage'))",
];

/// What Citus says when a worker it needs cannot be reached, or its connection to one was
/// lost mid-statement (reported as SQLSTATE XX000 when libpq gave no code of its own): the
/// calls of the tenants on that worker are then UNAVAILABLE, as a database that is not
/// there is.
const UNREACHABLE: &[&str] = &[
    "connection to the remote node",
    "could not establish any connections to the node",
    "failure on connection marked as essential",
    "server closed the connection unexpectedly",
    "connection not open",
    "no connection to the server",
    "could not receive data from",
    "could not send data to",
    "terminating connection",
    "the database system is",
    "SSL SYSCALL error",
];

/// Whether `db` is Citus reporting a worker it cannot reach ([`UNREACHABLE`]).
pub(super) fn unreachable(db: &dyn sqlx::error::DatabaseError) -> bool {
    let internal = db.code().is_none_or(|c| c == "XX000");
    internal && UNREACHABLE.iter().any(|m| db.message().contains(m))
}

#[cfg(test)]
mod tests {
    #[test]
    fn distributing_the_tables_again_is_a_no_op() {
        for statement in super::DISTRIBUTE {
            let skips = statement.contains("NOT EXISTS (SELECT 1 FROM pg_dist_partition")
                || statement.contains("NOT EXISTS (\n        SELECT 1 FROM pg_dist_partition");
            assert!(skips, "runs only while undistributed: {statement}");
        }
    }
}
