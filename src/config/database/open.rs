//! Opening the store at start (`serve`, `migrate`, `keys`, `reseal`): a failure becomes a
//! [`DatabaseError`] that names the flag, the database (its URL without the password) and
//! what to do — a URL claimd cannot parse, nobody listening, a login refused, a database
//! that does not exist, migrations newer than this binary, a data directory it cannot use.

use crate::store::{self, Store, StoreError, StoreOptions};
use sqlx::migrate::MigrateError;
use std::sync::Arc;

/// Why the database could not be opened or migrated at start. Never carries a password.
#[derive(Debug, thiserror::Error)]
pub enum DatabaseError {
    /// The store could not be opened (connected, created).
    #[error("cannot open the database {shown} ({}): {advice}", flag(shown))]
    Open {
        /// The URL without its password.
        shown: String,
        /// What went wrong and what to do.
        advice: String,
    },
    /// The migrations could not be applied.
    #[error("cannot migrate the database {shown} ({}): {advice}", flag(shown))]
    Migrate {
        /// The URL without its password.
        shown: String,
        /// What went wrong and what to do.
        advice: String,
    },
}

/// Opens the store `url` names, as `store::open` does.
pub async fn open(url: &str, options: &StoreOptions) -> Result<Arc<dyn Store>, DatabaseError> {
    store::open(url, options)
        .await
        .map_err(|e| DatabaseError::Open {
            shown: without_password(url),
            advice: advice(url, &e),
        })
}

/// Applies the migrations to `store`, opened from `url`.
pub async fn migrate(store: &dyn Store, url: &str) -> Result<(), DatabaseError> {
    store.migrate().await.map_err(|e| DatabaseError::Migrate {
        shown: without_password(url),
        advice: advice(url, &e),
    })
}

/// The flag that names the database: the embedded one is in `--data-dir` unless
/// `--database-url` names its file.
fn flag(shown: &str) -> &'static str {
    if shown.starts_with("sqlite:") {
        "--data-dir or --database-url"
    } else {
        "--database-url"
    }
}

/// `url` with any password (`user:password@`, `password=`) replaced by `***`.
pub fn without_password(url: &str) -> String {
    let mut shown = url.to_owned();
    if let Some(scheme_end) = shown.find("://") {
        let rest = scheme_end + 3;
        let authority_end = shown[rest..]
            .find(['/', '?', '#'])
            .map_or(shown.len(), |i| rest + i);
        if let Some(at) = shown[rest..authority_end].rfind('@') {
            let at = rest + at;
            if let Some(colon) = shown[rest..at].find(':') {
                shown.replace_range(rest + colon + 1..at, "***");
            }
        }
    }
    if let Some(query) = shown.find('?') {
        let (head, tail) = shown.split_at(query + 1);
        let params: Vec<String> = tail
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => p.to_owned(),
            })
            .collect();
        shown = format!("{head}{}", params.join("&"));
    }
    shown
}

/// Where a `postgres://` URL leads: its host and port (`localhost:5432` when absent), or the
/// socket directory its `host=` parameter names.
fn host_port(url: &str) -> String {
    let socket_dir = url.split_once('?').and_then(|(_, query)| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix("host="))
            .filter(|h| h.starts_with('/'))
    });
    if let Some(dir) = socket_dir {
        return format!("the socket directory {dir}");
    }
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match host {
        "" => "localhost:5432".to_owned(),
        h if h.contains(':') && !h.ends_with(']') => h.to_owned(),
        h => format!("{h}:5432"),
    }
}

/// What went wrong opening or migrating `url`, in words, and what to do about it.
fn advice(url: &str, error: &StoreError) -> String {
    let sqlx = match error {
        StoreError::UnsupportedUrl => {
            return "claimd has no such database: expected postgres://user@host/database or \
                    sqlite://path/to/claimd.db"
                .to_owned();
        }
        // The embedded store's own messages name the file and what to do.
        StoreError::Open(why) => return why.clone(),
        StoreError::Migrate(MigrateError::VersionMissing(version)) => {
            return format!(
                "it has migration {version} applied, which this claimd does not have: a newer \
                 claimd migrated it — run that version (or a newer one), or restore the \
                 backup taken before the upgrade"
            );
        }
        StoreError::Migrate(MigrateError::Execute(e) | MigrateError::ExecuteMigration(e, _)) => e,
        StoreError::Unavailable(e) | StoreError::Database(e) | StoreError::Storage(e) => e,
        StoreError::ReadOnly(why) => {
            return format!(
                "the server accepts no writes ({why}) — point --database-url at the primary \
                 (or a proxy that routes to it)"
            );
        }
        other => return chain(other),
    };
    match sqlx {
        sqlx::Error::Configuration(e) => format!(
            "the URL cannot be used: {e} — expected \
             postgres://user[:password]@host[:port]/database"
        ),
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => format!(
            "connection refused at {} — start PostgreSQL there, or fix the host and port in \
             the URL",
            host_port(url)
        ),
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => format!(
            "{io} — check that the host in the URL is reachable from here, or raise \
             --db-timeout"
        ),
        sqlx::Error::Io(io) => format!(
            "cannot reach {}: {io} — check the host and port (or socket directory) in the URL",
            host_port(url)
        ),
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some("28P01" | "28000") => format!(
                "PostgreSQL refused the login: {} — check the user and password in the URL \
                 (and pg_hba.conf)",
                db.message()
            ),
            Some("25006") => format!(
                "the server accepts no writes ({}): it is a standby (or read-only) — point \
                 --database-url at the primary, or a proxy that routes to it (`--no-migrate` \
                 starts claimd anyway, NOT_SERVING until the server accepts writes)",
                db.message()
            ),
            Some("3D000") => format!(
                "{} — create it (`createdb NAME` or `CREATE DATABASE`), or name an existing \
                 database in the URL",
                db.message()
            ),
            _ => chain(sqlx),
        },
        sqlx::Error::PoolTimedOut => {
            "no connection within --db-timeout — check that the database is up and \
             reachable, or raise --db-timeout"
                .to_owned()
        }
        other => chain(other),
    }
}

/// `error` and its sources on one line, each left out whose text is already there.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::without_password;

    #[test]
    fn a_url_is_shown_without_its_password() {
        for (url, shown) in [
            (
                "postgres://u:s3cret@db:5432/x",
                "postgres://u:***@db:5432/x",
            ),
            ("postgres://u@db/x", "postgres://u@db/x"),
            (
                "postgres://u:p@ss@db/x?sslmode=require",
                "postgres://u:***@db/x?sslmode=require",
            ),
            (
                "postgres://db/x?user=u&password=s3cret",
                "postgres://db/x?user=u&password=***",
            ),
            ("sqlite://data/claimd.db", "sqlite://data/claimd.db"),
        ] {
            assert_eq!(without_password(url), shown);
        }
    }
}
