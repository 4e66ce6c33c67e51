//! The database: `--database-url` unparsable or naming no database claimd has, nobody
//! listening, a login refused, a database that does not exist, migrations newer than this
//! binary; and the embedded database's `--data-dir` not creatable or not writable. The URL
//! is shown without its password.

use super::{assert_names, error_line, refused, serve_in};
use crate::common::pg;
use crate::common::process::{claimd, free_addr};

/// A password no message may show.
const PASSWORD: &str = "s3cret-pw";

/// `claimd serve --database-url url` (plaintext payloads, so no seal keys are needed).
async fn serve_on(url: &str) -> String {
    let data = tempfile::tempdir().expect("temp dir");
    let mut cmd = serve_in(data.path());
    cmd.arg("--database-url")
        .arg(url)
        .arg("--allow-plaintext-payloads");
    let log = refused(cmd).await;
    assert!(!log.contains(PASSWORD), "the password shows:\n{log}");
    log
}

#[tokio::test]
async fn a_database_url_nobody_listens_on_names_the_flag_and_the_address() {
    let addr = free_addr();
    let url = format!("postgres://claimd:{PASSWORD}@{addr}/claimd");
    let log = serve_on(&url).await;
    assert_names(
        error_line(&log),
        &[
            &format!("postgres://claimd:***@{addr}/claimd (--database-url)"),
            &format!("connection refused at {addr}"),
            "start PostgreSQL there",
        ],
    );
    // `migrate` says the same.
    let mut cmd = claimd();
    cmd.arg("migrate").arg("--database-url").arg(&url);
    let log = refused(cmd).await;
    assert!(!log.contains(PASSWORD), "the password shows:\n{log}");
    assert_names(
        error_line(&log),
        &["(--database-url)", "connection refused"],
    );
}

#[tokio::test]
async fn an_unparsable_or_unknown_database_url_names_the_flag_and_the_form_expected() {
    let unparsable = format!("postgres://claimd:{PASSWORD}@[::1/claimd");
    let log = serve_on(&unparsable).await;
    assert_names(
        error_line(&log),
        &["(--database-url)", "cannot be used", "expected postgres://"],
    );
    let unknown = format!("mysql://claimd:{PASSWORD}@localhost/claimd");
    let log = serve_on(&unknown).await;
    assert_names(
        error_line(&log),
        &[
            "--database-url: mysql://claimd:***@localhost/claimd",
            "names no database claimd has",
        ],
    );
}

/// `url` with its path (the database's name) replaced by `name`.
fn with_database_name(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let slash = base.rfind('/').expect("a URL with a database name");
    format!("{}/{name}?{query}", &base[..slash])
}

#[tokio::test]
async fn a_database_that_does_not_exist_is_named_with_what_to_do() {
    let url = with_database_name(&pg::fresh_database().await, "no_such_claimd_db");
    let log = serve_on(&url).await;
    assert_names(
        error_line(&log),
        &[
            "(--database-url)",
            "database \"no_such_claimd_db\" does not exist",
            "create it",
        ],
    );
}

#[tokio::test]
async fn a_login_postgresql_refuses_is_named_without_the_password() {
    let url = pg::fresh_database().await;
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let host = rest.split_once('@').map_or(rest, |(_, host)| host);
    let url = format!("{scheme}://no_such_role:{PASSWORD}@{host}");
    let log = serve_on(&url).await;
    assert_names(
        error_line(&log),
        &[
            "no_such_role:***@",
            "PostgreSQL refused the login",
            "check the user and password",
        ],
    );
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_claimd_is_refused_naming_the_migration() {
    let data = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", data.path().join("claimd.db").display());
    let mut migrate = claimd();
    migrate.arg("migrate").arg("--database-url").arg(&url);
    let status = migrate.output().expect("claimd migrate runs").status;
    assert!(status.success(), "migrate: {status}");
    // A migration this binary does not have, as a newer claimd would leave it.
    let db = sqlx::SqlitePool::connect(&url)
        .await
        .expect("open the file");
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
         execution_time) VALUES (99990101000000, 'from the future', 1, x'00', 0)",
    )
    .execute(&db)
    .await
    .expect("record a newer migration");
    db.close().await;
    let log = refused(serve_in(data.path())).await;
    assert_names(
        error_line(&log),
        &[
            "cannot migrate the database",
            "(--data-dir or --database-url)",
            "migration 99990101000000 applied",
            "a newer claimd migrated it",
        ],
    );
}

#[tokio::test]
async fn a_data_directory_that_cannot_be_created_names_the_flag() {
    let parent = tempfile::tempdir().expect("temp dir");
    let file = parent.path().join("a-file");
    std::fs::write(&file, "not a directory").expect("write a file");
    let log = refused(serve_in(&file.join("data"))).await;
    assert_names(
        error_line(&log),
        &["--data-dir", "a-file", "Not a directory"],
    );
}

#[tokio::test]
async fn a_data_directory_claimd_cannot_write_names_the_flag_and_what_to_do() {
    let data = tempfile::tempdir().expect("temp dir");
    let mut cmd = serve_in(data.path());
    // The key file is generated there first; keys from the environment leave the database.
    cmd.env("CLAIMD_SEAL_KEYS", crate::common::raw::TEST_SEAL_KEY);
    super::unprivileged(&mut cmd, data.path(), false);
    let log = refused(cmd).await;
    assert_names(
        error_line(&log),
        &[
            &format!("the data directory {}", data.path().display()),
            "cannot be written by the user claimd runs as",
            "--data-dir",
        ],
    );
}
