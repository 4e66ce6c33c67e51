//! The sealed columns exactly as the database stores them, read and written with the
//! database's own driver (PostgreSQL or SQLite, by URL): to prove that nothing is stored in
//! the clear, to check key ids, and to tamper with rows.

use sqlx::{Connection, PgConnection, Row, SqliteConnection};

/// The columns claimd seals.
pub const SEALED: [&str; 4] = ["last_error", "checkpoint", "response", "recovery_payload"];

/// A seal key every test process agrees on (32 bytes of 7, standard base64), for claimd
/// binaries that must read each other's rows.
pub const TEST_SEAL_KEY: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

enum Conn {
    Pg(PgConnection),
    Lite(SqliteConnection),
}

async fn connect(url: &str) -> Conn {
    // The test's own database is up while the test runs.
    if url.starts_with("sqlite:") {
        Conn::Lite(SqliteConnection::connect(url).await.expect("connect"))
    } else {
        Conn::Pg(PgConnection::connect(url).await.expect("connect"))
    }
}

/// One row's identity and its sealed columns, in [`SEALED`] order.
#[derive(Debug, Clone)]
pub struct RawRow {
    /// `tenant_id`.
    pub tenant: String,
    /// `namespace`.
    pub namespace: String,
    /// `key`.
    pub key: String,
    /// `state`.
    pub state: String,
    /// The sealed columns as stored.
    pub blobs: [Option<Vec<u8>>; 4],
}

/// Every row of `receipts`.
pub async fn rows(url: &str) -> Vec<RawRow> {
    let sql = "SELECT tenant_id, namespace, key, state, last_error, checkpoint, response, \
               recovery_payload FROM receipts ORDER BY namespace, key";
    macro_rules! decode {
        ($rows:expr) => {
            $rows
                .iter()
                .map(|r| RawRow {
                    tenant: r.get(0),
                    namespace: r.get(1),
                    key: r.get(2),
                    state: r.get(3),
                    blobs: [r.get(4), r.get(5), r.get(6), r.get(7)],
                })
                .collect()
        };
    }
    // Reading the test's own table cannot fail while the test runs.
    match connect(url).await {
        Conn::Pg(mut c) => decode!(sqlx::query(sql).fetch_all(&mut c).await.expect("rows")),
        Conn::Lite(mut c) => decode!(sqlx::query(sql).fetch_all(&mut c).await.expect("rows")),
    }
}

/// The row of `namespace`/`key`.
pub async fn row(url: &str, namespace: &str, key: &str) -> RawRow {
    let all = rows(url).await;
    let found = all
        .into_iter()
        .find(|r| r.namespace == namespace && r.key == key);
    found.unwrap_or_else(|| panic!("no row {namespace}/{key}"))
}

/// The stored bytes of `column` of `namespace`/`key`.
pub async fn read(url: &str, namespace: &str, key: &str, column: &str) -> Option<Vec<u8>> {
    let i = SEALED
        .iter()
        .position(|c| *c == column)
        .expect("a sealed column");
    row(url, namespace, key).await.blobs[i].clone()
}

/// Overwrites `column` of `namespace`/`key` with `value`, behind claimd's back.
pub async fn write(url: &str, namespace: &str, key: &str, column: &str, value: Option<&[u8]>) {
    // Written with SQLite's `?n`; PostgreSQL gets them as `$n`.
    let sql = match column {
        "last_error" => "UPDATE receipts SET last_error = ?1 WHERE namespace = ?2 AND key = ?3",
        "checkpoint" => "UPDATE receipts SET checkpoint = ?1 WHERE namespace = ?2 AND key = ?3",
        "response" => "UPDATE receipts SET response = ?1 WHERE namespace = ?2 AND key = ?3",
        "recovery_payload" => {
            "UPDATE receipts SET recovery_payload = ?1 WHERE namespace = ?2 AND key = ?3"
        }
        other => panic!("{other} is not a sealed column"),
    };
    // The test's own table accepts the write.
    let updated = match connect(url).await {
        Conn::Pg(mut c) => {
            let sql = pg_placeholders(sql);
            let query = sqlx::query(sqlx::AssertSqlSafe(sql));
            let query = query.bind(value).bind(namespace).bind(key);
            query.execute(&mut c).await.expect("update").rows_affected()
        }
        Conn::Lite(mut c) => {
            let query = sqlx::query(sql).bind(value).bind(namespace).bind(key);
            query.execute(&mut c).await.expect("update").rows_affected()
        }
    };
    assert_eq!(updated, 1, "no row {namespace}/{key}");
}

/// `?n` → `$n`, PostgreSQL's placeholders.
fn pg_placeholders(sql: &str) -> String {
    sql.replace('?', "$")
}

/// Flips one bit in the middle of the stored `column` of `namespace`/`key`.
pub async fn flip_bit(url: &str, namespace: &str, key: &str, column: &str) {
    let mut stored = read(url, namespace, key, column)
        .await
        .expect("a stored value");
    let middle = stored.len() / 2;
    stored[middle] ^= 0x10;
    write(url, namespace, key, column, Some(&stored)).await;
}

/// Everything PostgreSQL would print of the table (`r::text`, bytea in hex), or for SQLite
/// every byte of the database file and its WAL: where a plaintext canary must not appear.
pub async fn everything(url: &str) -> Vec<u8> {
    match connect(url).await {
        Conn::Pg(mut c) => {
            let sql = "SELECT string_agg(r::text, E'\\n') FROM receipts r";
            let text: Option<String> = sqlx::query_scalar(sql)
                .fetch_one(&mut c)
                .await
                .expect("dump");
            text.unwrap_or_default().into_bytes()
        }
        Conn::Lite(_) => {
            let file = url.trim_start_matches("sqlite://");
            let mut bytes = Vec::new();
            for suffix in ["", "-wal"] {
                bytes.extend(std::fs::read(format!("{file}{suffix}")).unwrap_or_default());
            }
            bytes
        }
    }
}

/// Whether `haystack` holds `needle` as bytes, or as PostgreSQL's hex of them.
pub fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    let hex: String = needle.iter().map(|b| format!("{b:02x}")).collect();
    let found = |n: &[u8]| haystack.windows(n.len()).any(|w| w == n);
    found(needle) || found(hex.as_bytes())
}

/// The `life_id` of `namespace`/`key` (`None` for a row from before lifetimes).
pub async fn life(url: &str, namespace: &str, key: &str) -> Option<Vec<u8>> {
    let sql = "SELECT life_id FROM receipts WHERE namespace = ?1 AND key = ?2";
    // The test's own row is there while the test runs.
    match connect(url).await {
        Conn::Pg(mut c) => {
            let query = sqlx::query_scalar(sqlx::AssertSqlSafe(pg_placeholders(sql)));
            let query = query.bind(namespace).bind(key);
            query.fetch_one(&mut c).await.expect("life_id")
        }
        Conn::Lite(mut c) => {
            let query = sqlx::query_scalar(sql).bind(namespace).bind(key);
            query.fetch_one(&mut c).await.expect("life_id")
        }
    }
}

/// Sets the `life_id` of `namespace`/`key`, behind claimd's back (`None`: a row as it was
/// before lifetimes).
pub async fn set_life(url: &str, namespace: &str, key: &str, life: Option<&[u8]>) {
    let sql = "UPDATE receipts SET life_id = ?1 WHERE namespace = ?2 AND key = ?3";
    // The test's own table accepts the write.
    let updated = match connect(url).await {
        Conn::Pg(mut c) => {
            let query = sqlx::query(sqlx::AssertSqlSafe(pg_placeholders(sql)));
            let query = query.bind(life).bind(namespace).bind(key);
            query.execute(&mut c).await.expect("update").rows_affected()
        }
        Conn::Lite(mut c) => {
            let query = sqlx::query(sql).bind(life).bind(namespace).bind(key);
            query.execute(&mut c).await.expect("update").rows_affected()
        }
    };
    assert_eq!(updated, 1, "no row {namespace}/{key}");
}
