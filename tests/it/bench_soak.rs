//! `claimd-bench --soak` as a smoke test, the bounded form of the soak that
//! scripts/reliability.sh runs for 10 minutes per store: 3 s at 100 cycles/s over 2 callers
//! with a sample every second, on the embedded SQLite store and on a fresh database of the
//! harness's PostgreSQL. The bench checks every answer, so it must exit 0, print its
//! verdict line, write a PNG and one CSV row per period with claimd's RSS and open files
//! (at least the bench's own TCP connection to claimd). Timings are never asserted.

use crate::bench::{assert_success, bench, field, output, read_csv};
use crate::common::pg;

/// Sample periods of the soak: 3 s with a sample every second.
const PERIODS: usize = 3;

/// Runs the short soak with `args`, demands exit status 0, the verdict and a PNG, and
/// checks every CSV row against `store`.
async fn soak(store: &str, args: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (csv, png) = (dir.path().join("soak.csv"), dir.path().join("soak.png"));
    let mut cmd = bench();
    cmd.args(["--soak", "3", "--rate", "100", "--sample-every", "1"])
        .args(args)
        .arg("--csv")
        .arg(&csv)
        .arg("--plot")
        .arg(&png);
    let out = output(cmd).await;
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("soak verdict: ") && stdout.contains(", 0 wrong answers"),
        "no verdict, or wrong answers:\n{stdout}"
    );
    let image = std::fs::read(&png).expect("the bench wrote its PNG");
    assert!(image.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");

    let (header, rows) = read_csv(&csv);
    assert_eq!(rows.len(), PERIODS, "one row per period: {rows:?}");
    let num = |row: &[String], name: &str| -> f64 {
        let text = field(&header, row, name);
        text.parse()
            .unwrap_or_else(|_| panic!("{name} is not a number: {text:?}"))
    };
    let mut cycles = 0.0;
    let mut elapsed = 0.0;
    for row in &rows {
        assert_eq!(field(&header, row, "store"), store);
        assert_eq!(field(&header, row, "errors"), "0");
        assert!(num(row, "elapsed_s") > elapsed, "elapsed rises: {rows:?}");
        elapsed = num(row, "elapsed_s");
        assert_eq!(num(row, "target_per_s"), 100.0);
        assert!(num(row, "rss_mib") > 0.0, "claimd's RSS in {row:?}");
        let (fds, sockets) = (num(row, "open_fds"), num(row, "sockets"));
        let tcp = num(row, "tcp_conns");
        assert!(
            tcp >= 1.0,
            "the bench's connection to claimd is counted: {row:?}"
        );
        assert!(
            fds >= sockets && sockets >= tcp,
            "fds ⊇ sockets ⊇ TCP: {row:?}"
        );
        cycles += num(row, "cycles");
    }
    assert!(cycles > 0.0, "no cycle answered in {rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_on_sqlite_gets_right_answers_and_writes_a_row_per_period_and_a_plot() {
    soak("sqlite", &["--store", "sqlite"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_soak_on_postgres_gets_right_answers_and_writes_a_row_per_period_and_a_plot() {
    let url = pg::fresh_database().await;
    soak("postgres", &["--database-url", &url]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soak_without_a_rate_is_refused_with_exit_status_2_naming_the_flag() {
    let mut cmd = bench();
    cmd.args(["--store", "sqlite", "--soak", "3"]);
    let out = output(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit status:\n{stderr}");
    assert!(stderr.contains("--rate"), "names --rate:\n{stderr}");
}
