//! The results: one [`Measured`] per timed round, the medians over rounds per store,
//! workload, callers value and side ([`Row`], with the claimd/SQL ratios on claimd's rows,
//! and what each cycle cost claimd and PostgreSQL),
//! printed as a table ("—" where there is nothing to show) and written as CSV (empty
//! fields there).

use crate::cli::Workload;
use crate::side::SideKind;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// What one timed round measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// `postgres` or `sqlite`.
    pub store: &'static str,
    /// The workload.
    pub workload: Workload,
    /// Concurrent callers.
    pub callers: usize,
    /// claimd or SQL.
    pub side: SideKind,
    /// Successful cycles per second.
    pub throughput: f64,
    /// Latency percentiles of a cycle, milliseconds.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// See `p50_ms`.
    pub p999_ms: f64,
    /// claimd's peak RSS, MiB (claimd rounds of a claimd started here).
    pub rss_mib: Option<f64>,
    /// claimd's CPU, percent of one core (same).
    pub cpu_pct: Option<f64>,
    /// PostgreSQL WAL bytes per cycle.
    pub wal_per_cycle: Option<f64>,
    /// claimd's CPU per cycle, microseconds (a claimd started here).
    pub claimd_cpu_us: Option<f64>,
    /// CPU per cycle of PostgreSQL's processes, microseconds (PostgreSQL on this machine).
    pub pg_cpu_us: Option<f64>,
    /// PostgreSQL transactions that wrote (committed with a commit record) per cycle.
    pub commits_per_cycle: Option<f64>,
    /// Flushes of the disk under PostgreSQL's data directory per cycle (its fsyncs).
    pub flushes_per_cycle: Option<f64>,
    /// Wrong answers and failed calls.
    pub errors: u64,
}

/// The medians over rounds of one store, workload, callers value and side.
#[derive(Debug, Clone)]
pub struct Row {
    /// `postgres` or `sqlite`.
    pub store: &'static str,
    /// The workload.
    pub workload: Workload,
    /// Concurrent callers.
    pub callers: usize,
    /// claimd or SQL.
    pub side: SideKind,
    /// Rounds measured.
    pub rounds: usize,
    /// Median cycles per second.
    pub throughput: f64,
    /// Median p50, p99 and p99.9 latency, milliseconds.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// See `p50_ms`.
    pub p999_ms: f64,
    /// Median peak RSS of claimd, MiB.
    pub rss_mib: Option<f64>,
    /// Median CPU of claimd, percent of one core.
    pub cpu_pct: Option<f64>,
    /// Median WAL bytes per cycle.
    pub wal_per_cycle: Option<f64>,
    /// Median CPU of claimd per cycle, microseconds.
    pub claimd_cpu_us: Option<f64>,
    /// Median CPU of PostgreSQL's processes per cycle, microseconds.
    pub pg_cpu_us: Option<f64>,
    /// Median write transactions (commits) per cycle.
    pub commits_per_cycle: Option<f64>,
    /// Median disk flushes per cycle.
    pub flushes_per_cycle: Option<f64>,
    /// claimd's median throughput over SQL's (claimd rows with a baseline).
    pub throughput_ratio: Option<f64>,
    /// claimd's median p99 over SQL's (same).
    pub p99_ratio: Option<f64>,
    /// Wrong answers over all rounds.
    pub errors: u64,
}

/// The median of `values` (the mean of the middle two for an even count); `None` if empty.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

/// Medians per store, workload, callers value and side, in that order, with the ratios.
pub fn summarize(rounds: &[Measured]) -> Vec<Row> {
    let mut groups: BTreeMap<(&str, Workload, usize, SideKind), Vec<&Measured>> = BTreeMap::new();
    for m in rounds {
        let key = (m.store, m.workload, m.callers, m.side);
        groups.entry(key).or_default().push(m);
    }
    let mut rows: Vec<Row> = groups
        .into_iter()
        .map(|((store, workload, callers, side), ms)| {
            let all = |f: fn(&Measured) -> f64| median(ms.iter().map(|m| f(m)).collect());
            let some =
                |f: fn(&Measured) -> Option<f64>| median(ms.iter().filter_map(|m| f(m)).collect());
            Row {
                store,
                workload,
                callers,
                side,
                rounds: ms.len(),
                throughput: all(|m| m.throughput).unwrap_or(0.0),
                p50_ms: all(|m| m.p50_ms).unwrap_or(0.0),
                p99_ms: all(|m| m.p99_ms).unwrap_or(0.0),
                p999_ms: all(|m| m.p999_ms).unwrap_or(0.0),
                rss_mib: some(|m| m.rss_mib),
                cpu_pct: some(|m| m.cpu_pct),
                wal_per_cycle: some(|m| m.wal_per_cycle),
                claimd_cpu_us: some(|m| m.claimd_cpu_us),
                pg_cpu_us: some(|m| m.pg_cpu_us),
                commits_per_cycle: some(|m| m.commits_per_cycle),
                flushes_per_cycle: some(|m| m.flushes_per_cycle),
                throughput_ratio: None,
                p99_ratio: None,
                errors: ms.iter().map(|m| m.errors).sum(),
            }
        })
        .collect();
    let baselines: Vec<Row> = rows
        .iter()
        .filter(|r| r.side == SideKind::Sql)
        .cloned()
        .collect();
    for row in rows.iter_mut().filter(|r| r.side == SideKind::Claimd) {
        let sql = baselines
            .iter()
            .find(|b| (b.store, b.workload, b.callers) == (row.store, row.workload, row.callers));
        if let Some(sql) = sql {
            row.throughput_ratio = ratio(row.throughput, sql.throughput);
            row.p99_ratio = ratio(row.p99_ms, sql.p99_ms);
        }
    }
    rows
}

/// `a / b`, if `b` is not zero.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

/// `value` with `decimals` decimals, or "—".
fn show(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "—".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The table printed on stdout.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let header = [
        "store",
        "workload",
        "callers",
        "side",
        "cycles/s",
        "p50 ms",
        "p99 ms",
        "p999 ms",
        "RSS MiB",
        "CPU %",
        "CPU µs/cyc",
        "PG µs/cyc",
        "WAL B/cyc",
        "commits/cyc",
        "flushes/cyc",
        "thr/SQL",
        "p99/SQL",
        "errors",
    ];
    let mut lines = vec![header.map(str::to_owned).to_vec()];
    for r in rows {
        lines.push(vec![
            r.store.to_owned(),
            r.workload.label().to_owned(),
            r.callers.to_string(),
            r.side.label().to_owned(),
            format!("{:.0}", r.throughput),
            format!("{:.2}", r.p50_ms),
            format!("{:.2}", r.p99_ms),
            format!("{:.2}", r.p999_ms),
            show(r.rss_mib, 1),
            show(r.cpu_pct, 0),
            show(r.claimd_cpu_us, 0),
            show(r.pg_cpu_us, 0),
            show(r.wal_per_cycle, 0),
            show(r.commits_per_cycle, 2),
            show(r.flushes_per_cycle, 2),
            show(r.throughput_ratio, 2),
            show(r.p99_ratio, 2),
            r.errors.to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in &lines {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                let pad = w - cell.chars().count();
                match c {
                    0..=1 | 3 => format!("{cell}{}", " ".repeat(pad)),
                    _ => format!("{}{cell}", " ".repeat(pad)),
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

/// The CSV columns, in order. Runs before issue 30 wrote the first 15 (up to `errors`);
/// [`read_csv`] reads either by name.
const COLUMNS: [&str; 19] = [
    "store",
    "workload",
    "callers",
    "side",
    "rounds",
    "cycles_per_s",
    "p50_ms",
    "p99_ms",
    "p999_ms",
    "rss_peak_mib",
    "cpu_pct",
    "wal_bytes_per_cycle",
    "throughput_ratio",
    "p99_ratio",
    "errors",
    "claimd_cpu_us_per_cycle",
    "pg_cpu_us_per_cycle",
    "pg_commits_per_cycle",
    "pg_disk_flushes_per_cycle",
];

/// The CSV text: a header, then one line per row.
pub fn csv(rows: &[Row]) -> String {
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for r in rows {
        let fields = [
            r.store.to_owned(),
            r.workload.label().to_owned(),
            r.callers.to_string(),
            r.side.label().to_owned(),
            r.rounds.to_string(),
            format!("{:.2}", r.throughput),
            format!("{:.4}", r.p50_ms),
            format!("{:.4}", r.p99_ms),
            format!("{:.4}", r.p999_ms),
            opt(r.rss_mib),
            opt(r.cpu_pct),
            opt(r.wal_per_cycle),
            opt(r.throughput_ratio),
            opt(r.p99_ratio),
            r.errors.to_string(),
            opt(r.claimd_cpu_us),
            opt(r.pg_cpu_us),
            opt(r.commits_per_cycle),
            opt(r.flushes_per_cycle),
        ];
        let _ = writeln!(out, "{}", fields.join(","));
    }
    out
}

/// Writes [`csv`] to `path`.
pub fn write_csv(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    std::fs::write(path, csv(rows))?;
    Ok(())
}

/// The rows of a CSV file [`write_csv`] wrote (for `--plot-from`), by column name: a file
/// of an older run lacks the last columns, read as empty.
pub fn read_csv(path: &Path) -> anyhow::Result<Vec<Row>> {
    let text = std::fs::read_to_string(path)?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| anyhow::anyhow!("{}: empty", path.display()))?
        .split(',')
        .collect();
    let index = |name: &str| header.iter().position(|h| *h == name);
    for required in &COLUMNS[..15] {
        anyhow::ensure!(
            index(required).is_some(),
            "{}: no column {required}",
            path.display()
        );
    }
    let mut rows = Vec::new();
    for (n, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        anyhow::ensure!(
            f.len() == header.len(),
            "{}:{}: expected {} fields",
            path.display(),
            n + 2,
            header.len()
        );
        let get = |name: &str| index(name).map_or("", |i| f[i]);
        let num = |name: &str| -> anyhow::Result<f64> { Ok(get(name).parse()?) };
        let opt = |name: &str| get(name).parse().ok();
        let store = match get("store") {
            "postgres" => "postgres",
            "sqlite" => "sqlite",
            other => anyhow::bail!("unknown store {other:?}"),
        };
        let workload = Workload::ALL
            .into_iter()
            .find(|w| w.label() == get("workload"))
            .ok_or_else(|| anyhow::anyhow!("unknown workload {:?}", get("workload")))?;
        let side = match get("side") {
            "claimd" => SideKind::Claimd,
            "sql" => SideKind::Sql,
            other => anyhow::bail!("unknown side {other:?}"),
        };
        rows.push(Row {
            store,
            workload,
            callers: get("callers").parse()?,
            side,
            rounds: get("rounds").parse()?,
            throughput: num("cycles_per_s")?,
            p50_ms: num("p50_ms")?,
            p99_ms: num("p99_ms")?,
            p999_ms: num("p999_ms")?,
            rss_mib: opt("rss_peak_mib"),
            cpu_pct: opt("cpu_pct"),
            wal_per_cycle: opt("wal_bytes_per_cycle"),
            claimd_cpu_us: opt("claimd_cpu_us_per_cycle"),
            pg_cpu_us: opt("pg_cpu_us_per_cycle"),
            commits_per_cycle: opt("pg_commits_per_cycle"),
            flushes_per_cycle: opt("pg_disk_flushes_per_cycle"),
            throughput_ratio: opt("throughput_ratio"),
            p99_ratio: opt("p99_ratio"),
            errors: get("errors").parse()?,
        });
    }
    Ok(rows)
}
