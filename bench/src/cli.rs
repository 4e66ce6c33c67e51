//! The command line of `claimd-bench` (clap derive): which store and workloads, how many
//! callers, rounds and seconds, what claimd to drive (a child process or `--target`), and
//! where the results go. Checks that need more than one flag live in [`Args::check`].

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// Measures claimd against the hand-written SQL a team would write instead.
///
/// For each callers value, each workload and each round, one timed round drives claimd over
/// gRPC and one drives the SQL baseline (table `bench_receipts`, same PostgreSQL database),
/// alternating which goes first. Callers run a closed loop, one tokio task each; claimd's
/// callers share one gRPC channel (HTTP/2 connection) per `--callers-per-channel` (16) of
/// them; the SQL callers share min(callers, --pool-cap) connections (see --sql-driver),
/// and claimd (when started here) gets a pool of as many (`--db-pool-size`). Every answer is checked against the
/// contract; a wrong one is counted, printed (the first few) and makes the exit status 1
/// (2: the run itself failed).
///
/// The SQL baseline runs the cheapest statements that pass each workload's checks:
/// `INSERT … ON CONFLICT DO NOTHING` (plus one `SELECT` on a conflict) for new, duplicate
/// and inflight; `ON CONFLICT DO UPDATE … WHERE` the lease ran out or the retry is due for
/// takeover and mixed; a token-fenced `UPDATE` for Complete and Retry. It seals nothing
/// and keeps no attempt budget. Around each round the bench also reads what PostgreSQL
/// spent (when it runs on this machine): CPU of the postmaster's processes, WAL bytes,
/// write transactions and flushes of the data directory's disk, each per cycle. The bench,
/// claimd and (usually) PostgreSQL share the machine's cores: compare sides of one run,
/// not runs of different machines.
#[derive(Parser, Debug)]
#[command(name = "claimd-bench", version)]
pub struct Args {
    /// The store claimd serves from: `postgres` (needs --database-url; the SQL baseline runs
    /// on the same database) or `sqlite` (claimd's embedded store in a temporary directory;
    /// no SQL baseline, its columns print "—").
    #[arg(long, value_enum, default_value_t = StoreKind::Postgres)]
    pub store: StoreKind,

    /// PostgreSQL URL (`postgres://…`): claimd's database and the SQL baseline's. Required
    /// with --store postgres.
    #[arg(long)]
    pub database_url: Option<String>,

    /// Workloads, comma-separated: new, duplicate, inflight, mixed, takeover, or all.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub workload: Vec<WorkloadArg>,

    /// Concurrent callers, comma-separated; each value is measured on its own.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256")]
    pub callers: Vec<usize>,

    /// Rounds per side, workload and callers value; the report shows medians over rounds.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,

    /// Length of one timed round in seconds (setup before it is not timed).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,

    /// Completed receipts put into claimd's `receipts` table and into `bench_receipts`
    /// before measuring (keys `prefill-<n>`; PostgreSQL: one INSERT … SELECT from
    /// generate_series, then VACUUM ANALYZE; SQLite: one INSERT … SELECT on the file,
    /// before claimd starts). Rows already there are kept.
    #[arg(long, default_value_t = 0)]
    pub prefill: u64,

    /// The claimd binary to start. Default: `claimd` next to this executable.
    #[arg(long)]
    pub claimd: Option<PathBuf>,

    /// A policy file (namespace policies, tenant quotas) for the claimd started here, passed
    /// as its `--config`; every other `CLAIMD_*` variable of this process is withheld from it.
    #[arg(long, conflicts_with = "target")]
    pub claimd_config: Option<PathBuf>,

    /// Drive an already running claimd at this address (host:port, plaintext, no API key)
    /// instead of starting one; its RSS and CPU are not measured. With --store postgres,
    /// --database-url must be the database it serves.
    #[arg(long, conflicts_with = "claimd")]
    pub target: Option<String>,

    /// Spread claimd's callers over this many tenants: before measuring, the bench creates
    /// one API key for each of the tenants `bench-1` … `bench-N` (`claimd keys create`, on
    /// the database claimd serves), and every call on receipt key `k` sends the API
    /// key of tenant `hash(k) mod N` as `authorization: Bearer …` (a key's setup and its
    /// timed calls reach the same tenant). The keys stay in the database, which from then on serves
    /// only calls with a key (protected mode ends with the first key): give such runs a
    /// database of their own. 0 (default): no key, every call is tenant `default`. The SQL
    /// baseline ignores tenants (its keys are unique per run anyway).
    #[arg(long, default_value_t = 0, conflicts_with = "target")]
    pub tenants: usize,

    /// Most database connections of the SQL baseline's pool (and of the claimd started
    /// here): min(callers, this). PostgreSQL's max_connections must allow twice this plus a
    /// few.
    #[arg(long, default_value_t = 64)]
    pub pool_cap: usize,

    /// The SQL baseline's client. `lean` (default): tokio-postgres, one connection per
    /// caller up to --pool-cap (callers share them round-robin beyond it; statements
    /// pipeline), every statement prepared once per connection, no pool, no ping.
    /// `sqlx-pinged`: the baseline of runs before issue 30, an sqlx pool with its default
    /// ping before every statement.
    #[arg(long, value_enum, default_value_t = SqlDriver::Lean)]
    pub sql_driver: SqlDriver,

    /// claimd callers sharing one gRPC channel (one HTTP/2 connection), as an application
    /// would share a client among request handlers.
    #[arg(long, default_value_t = 16)]
    pub callers_per_channel: usize,

    /// Seed of the mixed workload's deliveries (default: random, printed).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Write one CSV row per store, workload, callers value and side, with every median.
    #[arg(long)]
    pub csv: Option<PathBuf>,

    /// Write a PNG: throughput and p99 against callers (log scale), claimd vs SQL, one row
    /// of panels per workload.
    #[arg(long)]
    pub plot: Option<PathBuf>,

    /// Draw the `--plot` from CSV files a run wrote (`--csv`), one or more, and measure
    /// nothing.
    #[arg(long, value_delimiter = ',', requires = "plot")]
    pub plot_from: Vec<PathBuf>,

    /// A TrueType font for the plot's text. Default: the first `.ttf` found under the
    /// system font directories (DejaVu Sans preferred).
    #[arg(long)]
    pub plot_font: Option<PathBuf>,

    /// Soak instead of rounds: the mixed workload against claimd alone (no SQL baseline)
    /// for this many seconds, open loop at --rate cycles/s over a pool of --callers callers
    /// (one value), every answer checked. Every --sample-every seconds one line on stderr
    /// and one --csv row: cycles, errors and p50/p99/p99.9 of that period, claimd's RSS,
    /// open file descriptors, sockets, established TCP connections and CPU. At the end a
    /// verdict on flatness (first third of the samples against the last; reported, never
    /// the exit status) and the --plot PNG: RSS, connections, latency and throughput
    /// against time. `--plot-from` a soak CSV redraws that plot.
    #[arg(long, conflicts_with = "target")]
    pub soak: Option<f64>,

    /// A soak's cycles (deliveries) started per second, all callers together. Slots are
    /// not skipped: when every caller is busy past its slot the CSV's `behind_ms` grows.
    #[arg(long, requires = "soak")]
    pub rate: Option<f64>,

    /// A soak's sample period in seconds.
    #[arg(long, default_value_t = 10.0, requires = "soak")]
    pub sample_every: f64,
}

/// The store claimd serves from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// A PostgreSQL database (`--database-url`), shared with the SQL baseline.
    Postgres,
    /// claimd's embedded SQLite store.
    Sqlite,
}

impl StoreKind {
    /// The name in the report.
    pub fn label(self) -> &'static str {
        match self {
            StoreKind::Postgres => "postgres",
            StoreKind::Sqlite => "sqlite",
        }
    }
}

/// The SQL baseline's client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SqlDriver {
    /// tokio-postgres: a connection per caller, prepared statements, no ping.
    Lean,
    /// An sqlx pool with its ping per acquire (the baseline before issue 30).
    SqlxPinged,
}

impl SqlDriver {
    /// The name on the command line and in the report.
    pub fn label(self) -> &'static str {
        match self {
            SqlDriver::Lean => "lean",
            SqlDriver::SqlxPinged => "sqlx-pinged",
        }
    }
}

/// A workload as named on the command line (`all` expands to every one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WorkloadArg {
    /// Every workload below.
    All,
    /// Claim a never-seen key, then Complete it.
    New,
    /// Claim a completed key: COMPLETED with the stored response.
    Duplicate,
    /// Claim a key held under a long lease: IN_FLIGHT.
    Inflight,
    /// Events delivered 1–4 times, some failing into Retry and delivered again.
    Mixed,
    /// Claim a key whose 1 s lease ran out (CLAIMED, attempt 2), then Complete it.
    Takeover,
    /// Every caller claims one completed key at once (a retry storm): COMPLETED.
    Hot,
}

/// One workload to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// See [`WorkloadArg::New`].
    New,
    /// See [`WorkloadArg::Duplicate`].
    Duplicate,
    /// See [`WorkloadArg::Inflight`].
    Inflight,
    /// See [`WorkloadArg::Mixed`].
    Mixed,
    /// See [`WorkloadArg::Takeover`].
    Takeover,
    /// See [`WorkloadArg::Hot`].
    Hot,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 6] = [
        Workload::New,
        Workload::Duplicate,
        Workload::Inflight,
        Workload::Mixed,
        Workload::Takeover,
        Workload::Hot,
    ];

    /// The name in the report and the CSV.
    pub fn label(self) -> &'static str {
        match self {
            Workload::New => "new",
            Workload::Duplicate => "duplicate",
            Workload::Inflight => "inflight",
            Workload::Mixed => "mixed",
            Workload::Takeover => "takeover",
            Workload::Hot => "hot",
        }
    }
}

impl Args {
    /// The workloads asked for, each once, in report order.
    pub fn workloads(&self) -> Vec<Workload> {
        let wanted = |w: Workload| {
            self.workload.iter().any(|a| {
                *a == WorkloadArg::All
                    || matches!(
                        (a, w),
                        (WorkloadArg::New, Workload::New)
                            | (WorkloadArg::Duplicate, Workload::Duplicate)
                            | (WorkloadArg::Inflight, Workload::Inflight)
                            | (WorkloadArg::Mixed, Workload::Mixed)
                            | (WorkloadArg::Takeover, Workload::Takeover)
                            | (WorkloadArg::Hot, Workload::Hot)
                    )
            })
        };
        Workload::ALL.into_iter().filter(|w| wanted(*w)).collect()
    }

    /// Whether the flags make sense together.
    pub fn check(&self) -> anyhow::Result<()> {
        use anyhow::bail;
        match (self.store, &self.database_url) {
            (StoreKind::Postgres, None) => {
                bail!("--store postgres needs --database-url postgres://…")
            }
            (StoreKind::Postgres, Some(url)) if !url.starts_with("postgres") => {
                bail!("--database-url must be a postgres:// URL")
            }
            (StoreKind::Sqlite, Some(_)) => {
                bail!("--store sqlite uses claimd's embedded store: drop --database-url")
            }
            _ => {}
        }
        if self.store == StoreKind::Sqlite && self.target.is_some() && self.prefill > 0 {
            bail!(
                "--prefill with --store sqlite writes the file before claimd starts: not with --target"
            );
        }
        if self.callers.is_empty() || self.callers.contains(&0) {
            bail!("--callers needs positive numbers");
        }
        if self.rounds == 0 || !self.seconds.is_finite() || self.seconds <= 0.0 {
            bail!("--rounds and --seconds must be positive");
        }
        if self.pool_cap == 0 || self.callers_per_channel == 0 {
            bail!("--pool-cap and --callers-per-channel must be positive");
        }
        if self.tenants > 0 && self.soak.is_some() {
            bail!("--tenants is for rounds, not --soak");
        }
        if let Some(soak) = self.soak {
            let positive = |v: f64| v.is_finite() && v > 0.0;
            if !positive(soak) || !positive(self.sample_every) {
                bail!("--soak and --sample-every must be positive seconds");
            }
            if !self.rate.is_some_and(positive) {
                bail!("--soak needs --rate CYCLES_PER_SECOND (positive)");
            }
            if self.callers.len() != 1 {
                bail!("--soak runs one pool of callers: give --callers one value");
            }
        }
        Ok(())
    }
}
