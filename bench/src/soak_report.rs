//! A soak's results: one [`Sample`] per period, as a CSV row (written as the soak goes, so
//! a run cut short keeps its rows, and read back for `--plot-from`), and the [`verdict`] on
//! flatness at the end: the first third of the samples against the last third.

use anyhow::{Context, bail, ensure};
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::Path;

/// The CSV header; [`is_soak_csv`] recognises a soak's file by it.
const HEADER: &str = "store,elapsed_s,target_per_s,cycles,cycles_per_s,errors,p50_ms,p99_ms,\
    p999_ms,rss_mib,open_fds,sockets,tcp_conns,cpu_pct,behind_ms";
/// Fields per row.
const FIELDS: usize = 15;
/// RSS growth from the first third to the last still called flat: this share of the
/// first third's RSS, or [`RSS_SLACK_MIB`], whichever is larger.
const RSS_GROWTH_FLAT: f64 = 0.10;
/// See [`RSS_GROWTH_FLAT`].
const RSS_SLACK_MIB: f64 = 2.0;
/// Sockets the last third may hold beyond the first third's most and still be flat (a
/// pool opening one more connection is not a leak).
const SOCKET_SLACK: usize = 2;
/// The last third's median p99 over the first third's still called flat.
const P99_DRIFT_FLAT: f64 = 2.0;

/// One sample period of a soak; the latencies and counts are of that period alone.
#[derive(Debug, Clone)]
pub struct Sample {
    /// `postgres` or `sqlite`.
    pub store: String,
    /// Seconds since the load started, at the end of the period.
    pub elapsed_s: f64,
    /// The cycles per second asked for (`--rate`).
    pub target_per_s: f64,
    /// Cycles answered right in the period.
    pub cycles: u64,
    /// The same per second.
    pub cycles_per_s: f64,
    /// Wrong answers and failed calls in the period.
    pub errors: u64,
    /// Latency percentiles of the period's cycles, milliseconds.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// See `p50_ms`.
    pub p999_ms: f64,
    /// claimd's resident set at the end of the period, MiB.
    pub rss_mib: f64,
    /// claimd's open file descriptors then.
    pub open_fds: usize,
    /// Those that were sockets.
    pub sockets: usize,
    /// Those sockets that were established TCP connections.
    pub tcp_conns: usize,
    /// claimd's CPU over the period, percent of one core.
    pub cpu_pct: f64,
    /// How far the pacer's next slot lay in the past at the end of the period, ms.
    pub behind_ms: f64,
}

impl Sample {
    /// The CSV row (no newline).
    fn row(&self) -> String {
        format!(
            "{},{:.1},{:.0},{},{:.1},{},{:.3},{:.3},{:.3},{:.2},{},{},{},{:.1},{:.0}",
            self.store,
            self.elapsed_s,
            self.target_per_s,
            self.cycles,
            self.cycles_per_s,
            self.errors,
            self.p50_ms,
            self.p99_ms,
            self.p999_ms,
            self.rss_mib,
            self.open_fds,
            self.sockets,
            self.tcp_conns,
            self.cpu_pct,
            self.behind_ms
        )
    }
}

/// A soak CSV being written, one row per sample as it is taken.
pub struct CsvOut(File);

impl CsvOut {
    /// Creates `path` with the header line.
    pub fn create(path: &Path) -> anyhow::Result<CsvOut> {
        let mut file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        writeln!(file, "{HEADER}")?;
        Ok(CsvOut(file))
    }

    /// Appends `sample`'s row.
    pub fn write(&mut self, sample: &Sample) -> anyhow::Result<()> {
        writeln!(self.0, "{}", sample.row())?;
        Ok(())
    }
}

/// Whether `path` is a CSV a soak wrote (by its header).
pub fn is_soak_csv(path: &Path) -> anyhow::Result<bool> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text.lines().next() == Some(HEADER))
}

/// The samples of a soak CSV.
pub fn read_csv(path: &Path) -> anyhow::Result<Vec<Sample>> {
    let text = std::fs::read_to_string(path)?;
    let mut samples = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let at = || format!("{}:{}", path.display(), n + 1);
        ensure!(f.len() == FIELDS, "{}: expected {FIELDS} fields", at());
        let num = |i: usize| -> anyhow::Result<f64> { f[i].parse().with_context(at) };
        let int = |i: usize| -> anyhow::Result<u64> { f[i].parse().with_context(at) };
        samples.push(Sample {
            store: f[0].to_owned(),
            elapsed_s: num(1)?,
            target_per_s: num(2)?,
            cycles: int(3)?,
            cycles_per_s: num(4)?,
            errors: int(5)?,
            p50_ms: num(6)?,
            p99_ms: num(7)?,
            p999_ms: num(8)?,
            rss_mib: num(9)?,
            open_fds: usize::try_from(int(10)?)?,
            sockets: usize::try_from(int(11)?)?,
            tcp_conns: usize::try_from(int(12)?)?,
            cpu_pct: num(13)?,
            behind_ms: num(14)?,
        });
    }
    if samples.is_empty() {
        bail!("{}: no samples", path.display());
    }
    Ok(samples)
}

/// The mean of `f` over `samples`.
fn mean(samples: &[Sample], f: fn(&Sample) -> f64) -> f64 {
    samples.iter().map(f).sum::<f64>() / samples.len().max(1) as f64
}

/// `f`'s smallest and largest value over `samples`.
fn range(samples: &[Sample], f: fn(&Sample) -> usize) -> (usize, usize) {
    let values = samples.iter().map(f);
    (values.clone().min().unwrap_or(0), values.max().unwrap_or(0))
}

/// One line on flatness: RSS (means), p99 (medians) and throughput (means) of the first
/// third of the samples against the last third, the range of open fds, sockets and TCP
/// connections, the worst pacing lag, and "flat" or "NOT flat" by the thresholds above.
/// Reported only: it never decides the exit status.
pub fn verdict(samples: &[Sample]) -> String {
    let n = samples.len();
    if n < 3 {
        return format!("soak verdict: {n} sample(s), too few to compare thirds");
    }
    let (first, last) = (&samples[..n / 3], &samples[n - n / 3..]);
    let (rss_a, rss_b) = (mean(first, |s| s.rss_mib), mean(last, |s| s.rss_mib));
    let p99 = |part: &[Sample]| {
        crate::report::median(part.iter().map(|s| s.p99_ms).collect()).unwrap_or(0.0)
    };
    let (p99_a, p99_b) = (p99(first), p99(last));
    let drift = if p99_a > 0.0 { p99_b / p99_a } else { 1.0 };
    let (thr_a, thr_b) = (
        mean(first, |s| s.cycles_per_s),
        mean(last, |s| s.cycles_per_s),
    );
    let fds = range(samples, |s| s.open_fds);
    let sockets = range(samples, |s| s.sockets);
    let tcp = range(samples, |s| s.tcp_conns);
    let behind = samples.iter().map(|s| s.behind_ms).fold(0.0, f64::max);
    let errors: u64 = samples.iter().map(|s| s.errors).sum();

    let mut why = Vec::new();
    if rss_b - rss_a > (rss_a * RSS_GROWTH_FLAT).max(RSS_SLACK_MIB) {
        why.push("RSS grew");
    }
    if range(last, |s| s.sockets).1 > range(first, |s| s.sockets).1 + SOCKET_SLACK {
        why.push("more sockets at the end");
    }
    if drift > P99_DRIFT_FLAT {
        why.push("p99 drifted up");
    }
    let word = if why.is_empty() {
        "flat".to_owned()
    } else {
        format!("NOT flat ({})", why.join(", "))
    };
    let mut line = format!(
        "soak verdict: {word}; first third → last third of {n} samples: RSS {rss_a:.1} → \
         {rss_b:.1} MiB ({:+.1} MiB, {:+.1} %), p99 {p99_a:.2} → {p99_b:.2} ms (×{drift:.2}), \
         {thr_a:.0} → {thr_b:.0} cycles/s; ",
        rss_b - rss_a,
        (rss_b / rss_a.max(1e-9) - 1.0) * 100.0
    );
    let _ = write!(
        line,
        "open fds {}–{}, sockets {}–{}, TCP connections {}–{}; pacing at most {behind:.0} ms \
         behind; {errors} wrong answers in the samples",
        fds.0, fds.1, sockets.0, sockets.1, tcp.0, tcp.1
    );
    line
}
