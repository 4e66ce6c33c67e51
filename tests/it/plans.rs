//! The group commit's statements in PostgreSQL find every row through the primary key in
//! the generic plan claimd's sessions use (`plan_cache_mode = force_generic_plan`,
//! docs/DESIGN.md §4.1), whatever the table held when the plan was made: an empty table (a
//! fresh deployment) and a small analysed one. A plan made then is kept by the connection,
//! so a scan of `receipts` in it would be paid on every batch as the table grows (found:
//! the insert's `NOT EXISTS` ran as a hash anti-join over a whole-table scan).

use claimd::store::postgres::batch_statements;
use sqlx::{Connection, Executor, PgConnection, Row};

/// The generic plan of `statement` (prepared as `name`), every parameter NULL (a generic
/// plan ignores values). Simple-protocol queries only, beside sqlx's own statements.
async fn generic_plan(conn: &mut PgConnection, name: &str, statement: &str) -> String {
    // Every parameter is cast where it is used (`$7::int4[]`).
    let params = (1..=64)
        .filter(|n| statement.contains(&format!("${n}::")))
        .count();
    let nulls = vec!["NULL"; params].join(", ");
    let sql = format!(
        "SET plan_cache_mode = force_generic_plan; PREPARE {name} AS {statement}; \
         EXPLAIN EXECUTE {name}({nulls})"
    );
    let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    conn.execute(sqlx::AssertSqlSafe(format!("DEALLOCATE {name}")))
        .await
        .unwrap();
    let lines: Vec<String> = rows.iter().map(|r| r.get::<String, _>(0)).collect();
    lines.join("\n")
}

/// Fails unless no statement scans `receipts` as the table is now.
async fn assert_no_scan(conn: &mut PgConnection, when: &str) {
    for (name, statement) in batch_statements() {
        let plan = generic_plan(conn, name, statement).await;
        assert!(
            !plan.contains("Seq Scan on receipts"),
            "{name} scans the table ({when}):\n{plan}"
        );
    }
}

#[tokio::test]
async fn postgres_batch_statements_find_rows_by_primary_key_in_a_generic_plan() {
    let url = crate::common::pg::fresh_database().await;
    let migrated = crate::common::process::claimd()
        .args(["migrate", "--database-url", &url])
        .status()
        .expect("claimd migrate runs");
    assert!(migrated.success(), "claimd migrate: {migrated}");
    let mut conn = PgConnection::connect(&url).await.unwrap();
    assert_no_scan(&mut conn, "empty table").await;
    conn.execute(
        "INSERT INTO receipts (tenant_id, namespace, key, state, attempt, fingerprint,
                               created_at, updated_at, completed_at)
         SELECT 'default', 'ns', 'k' || n, 'completed', 1, '\\x00', now(), now(), now()
         FROM generate_series(1, 2000) n",
    )
    .await
    .unwrap();
    conn.execute("ANALYZE receipts").await.unwrap();
    assert_no_scan(&mut conn, "2,000 rows, analysed").await;
}
