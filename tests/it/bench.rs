//! `claimd-bench`, the benchmark binary, as a smoke test: every workload for one short
//! round (`--seconds 1 --rounds 1 --callers 2`) against claimd on a fresh database of the
//! harness's PostgreSQL, with the SQL baseline beside it, and once on the embedded SQLite
//! store (and the old pinged sqlx baseline once, on one workload). The bench checks every
//! answer against the contract, so it must exit 0 and write its CSV with the claimd/SQL
//! ratio columns and PostgreSQL's costs per cycle. A claimd whose policy makes a takeover
//! answer QUARANTINED must make it exit 1: a wrong answer fails the run. Timings are never
//! asserted.

use crate::common::pg;
use crate::common::process::{self, Claimd};
use std::path::Path;
use std::process::{Command, Output};

/// The workloads, as the CSV names them.
const WORKLOADS: [&str; 6] = ["new", "duplicate", "inflight", "mixed", "takeover", "hot"];

/// `claimd-bench` with the short run's flags and none of the test's `CLAIMD_*` variables.
/// The binary is the workspace's `claimd-bench` crate, built beside claimd by
/// `cargo test --workspace` (`scripts/test`).
pub(crate) fn bench() -> Command {
    let claimd = std::path::Path::new(env!("CARGO_BIN_EXE_claimd"));
    let path = claimd.with_file_name(format!("claimd-bench{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "no {}: build the benchmark first (`cargo build -p claimd-bench`, or run the \
         whole suite with scripts/test)",
        path.display()
    );
    let mut cmd = Command::new(path);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CLAIMD_") {
            cmd.env_remove(name);
        }
    }
    cmd.args(["--seconds", "1", "--rounds", "1", "--callers", "2"]);
    cmd
}

/// Runs `cmd` to the end off the async runtime.
pub(crate) async fn output(mut cmd: Command) -> Output {
    let run = tokio::task::spawn_blocking(move || cmd.output());
    run.await
        .expect("the runner thread")
        .expect("claimd-bench starts")
}

/// The CSV at `path` as header names and rows of fields.
pub(crate) fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).expect("the bench wrote its CSV");
    let mut lines = text
        .lines()
        .map(|l| l.split(',').map(str::to_owned).collect());
    let header: Vec<String> = lines.next().expect("a header line");
    (header, lines.collect())
}

/// Field `name` of `row`.
pub(crate) fn field<'a>(header: &[String], row: &'a [String], name: &str) -> &'a str {
    let i = header.iter().position(|h| h == name);
    let i = i.unwrap_or_else(|| panic!("the CSV has no column {name}: {header:?}"));
    &row[i]
}

/// Asserts the run succeeded, showing what it printed if not.
pub(crate) fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "claimd-bench failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs every workload with `args` and 1,000 receipts prefilled, demands exit status 0 and
/// a table with the ratio column, and returns the CSV's header and rows.
async fn every_workload(args: &[&str]) -> (Vec<String>, Vec<Vec<String>>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = dir.path().join("bench.csv");
    let mut cmd = bench();
    cmd.args(args)
        .args(["--workload", "all", "--prefill", "1000"])
        .arg("--csv")
        .arg(&csv);
    let out = output(cmd).await;
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("thr/SQL"),
        "no ratio column in the table:\n{stdout}"
    );
    read_csv(&csv)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_gets_right_answers_from_claimd_and_the_sql_baseline_on_postgres() {
    let url = pg::fresh_database().await;
    let (header, rows) = every_workload(&["--database-url", &url]).await;
    assert_eq!(
        rows.len(),
        2 * WORKLOADS.len(),
        "one row per workload and side"
    );
    for workload in WORKLOADS {
        for side in ["claimd", "sql"] {
            let row = rows
                .iter()
                .find(|r| {
                    field(&header, r, "workload") == workload && field(&header, r, "side") == side
                })
                .unwrap_or_else(|| panic!("no {workload}/{side} row in {rows:?}"));
            assert_eq!(field(&header, row, "store"), "postgres");
            assert_eq!(field(&header, row, "errors"), "0");
            let wal = field(&header, row, "wal_bytes_per_cycle");
            assert!(wal.parse::<f64>().is_ok(), "{workload}/{side}: WAL {wal:?}");
            // Read from PostgreSQL itself, wherever it runs (its CPU and its disk's flushes
            // only when it runs here, so those columns may be empty).
            let commits = field(&header, row, "pg_commits_per_cycle");
            assert!(
                commits.parse::<f64>().is_ok(),
                "{workload}/{side}: commits {commits:?}"
            );
            field(&header, row, "pg_cpu_us_per_cycle");
            field(&header, row, "pg_disk_flushes_per_cycle");
            let ratio = field(&header, row, "throughput_ratio");
            if side == "claimd" {
                let ratio: f64 = ratio.parse().expect("a ratio on claimd's row");
                assert!(ratio > 0.0, "{workload}: throughput ratio {ratio}");
                let p99: f64 = field(&header, row, "p99_ratio")
                    .parse()
                    .expect("a p99 ratio");
                assert!(p99 > 0.0, "{workload}: p99 ratio {p99}");
                let rss = field(&header, row, "rss_peak_mib");
                assert!(
                    rss.parse::<f64>().is_ok_and(|m| m > 0.0),
                    "{workload}: RSS {rss:?}"
                );
                let cpu = field(&header, row, "claimd_cpu_us_per_cycle");
                assert!(cpu.parse::<f64>().is_ok(), "{workload}: claimd CPU {cpu:?}");
            } else {
                assert_eq!(ratio, "", "no ratio on the baseline's own row");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_pinged_sqlx_baseline_still_runs_when_asked_for() {
    let url = pg::fresh_database().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = dir.path().join("bench.csv");
    let mut cmd = bench();
    cmd.args(["--database-url", &url, "--workload", "new"])
        .args(["--sql-driver", "sqlx-pinged"])
        .arg("--csv")
        .arg(&csv);
    let out = output(cmd).await;
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("SQL driver sqlx-pinged"), "{stdout}");
    let (header, rows) = read_csv(&csv);
    assert_eq!(rows.len(), 2, "new, claimd and sql: {rows:?}");
    for row in &rows {
        assert_eq!(field(&header, row, "errors"), "0");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_gets_right_answers_from_claimd_on_sqlite() {
    let (header, rows) = every_workload(&["--store", "sqlite"]).await;
    assert_eq!(rows.len(), WORKLOADS.len(), "one claimd row per workload");
    assert!(header.iter().any(|h| h == "throughput_ratio"));
    for (row, workload) in rows.iter().zip(WORKLOADS) {
        assert_eq!(field(&header, row, "workload"), workload);
        assert_eq!(field(&header, row, "store"), "sqlite");
        assert_eq!(field(&header, row, "side"), "claimd");
        assert_eq!(field(&header, row, "errors"), "0");
        // No SQL baseline on the embedded store: no ratio.
        assert_eq!(field(&header, row, "throughput_ratio"), "");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_answer_makes_the_bench_exit_1() {
    // With one attempt allowed, claimd quarantines an expired lease at the next Claim
    // instead of handing it over: the takeover workload's "CLAIMED, attempt 2" is wrong.
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[namespaces.\"bench\"]\nmax_attempts = 1\n").expect("policy");
    let addr = process::free_addr();
    let mut server = process::claimd();
    server
        .args([
            "serve",
            "--listen",
            &addr.to_string(),
            "--metrics-listen",
            "off",
        ])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&policy);
    let _claimd = Claimd::start(server, addr).await;

    let mut cmd = bench();
    cmd.args([
        "--store",
        "sqlite",
        "--workload",
        "takeover",
        "--target",
        &addr.to_string(),
    ]);
    let out = output(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "exit status for wrong answers:\n{stderr}"
    );
    assert!(
        stderr.contains("Quarantined") && stderr.contains("want Claimed"),
        "the wrong answers are printed:\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claimd_the_bench_starts_serves_the_policy_file_named_by_claimd_config() {
    // The same one-attempt policy as above, handed to the claimd the bench starts itself:
    // the takeover workload's second attempt is then quarantined, which only that policy
    // does (every_workload_gets_right_answers_from_claimd_on_sqlite runs it without).
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[namespaces.\"bench\"]\nmax_attempts = 1\n").expect("policy");
    let mut cmd = bench();
    cmd.args(["--store", "sqlite", "--workload", "takeover"])
        .arg("--claimd-config")
        .arg(&policy);
    let out = output(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the policy applied:\n{stderr}");
    assert!(
        stderr.contains("Quarantined") && stderr.contains("want Claimed"),
        "the wrong answers are printed:\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tenants_the_callers_are_spread_over_that_many_tenants_each_with_its_api_key() {
    // --tenants 2: the bench creates one key for bench-1 and one for bench-2, and its two
    // callers send one each; claimd then stores each caller's receipts under its tenant
    // (and, a key existing, serves no call without one: every answer was right, so every
    // call carried its key).
    let url = pg::fresh_database().await;
    let mut cmd = bench();
    cmd.args(["--database-url", &url, "--workload", "new,duplicate"])
        .args(["--tenants", "2"]);
    let out = output(cmd).await;
    assert_success(&out);
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let tenants: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT tenant_id FROM receipts WHERE namespace = 'bench' ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(tenants, ["bench-1", "bench-2"], "receipts by tenant");
    let keys: i64 =
        sqlx::query_scalar("SELECT count(*) FROM api_keys WHERE label = 'claimd-bench'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(keys, 2, "one key per tenant");
}
