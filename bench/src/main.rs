//! `claimd-bench`: claimd's own benchmark (see `claimd-bench --help`). It drives N
//! concurrent callers in a closed loop over real gRPC against a claimd it starts as a child
//! process (or `--target`), and the same workload as hand-written SQL against the same
//! PostgreSQL database, alternating rounds; checks every answer against the contract; and
//! reports medians over rounds of throughput, latency percentiles, claimd's RSS and CPU,
//! WAL bytes per cycle and the claimd/SQL ratios, as a table, a CSV file and a PNG plot.
//!
//! This file owns the run: flags → claimd (restarted per callers value with a pool of
//! min(callers, --pool-cap) connections) and the sides → the rounds in order → the report;
//! or, with `--soak`, the setup before handing over to [`soak::run`].
//! Exit status: 0 when every answer was right, 1 when any was wrong (they are printed and
//! never counted as cycles), 2 when the run itself failed.

mod cli;
mod database;
mod grpc;
mod mixed;
mod plot;
mod procstat;
mod report;
mod round;
mod runner;
mod server;
mod side;
mod soak;
mod soak_plot;
mod soak_report;
mod sql;
mod sql_pinged;
mod workload;

use anyhow::Context;
use clap::Parser;
use cli::{Args, StoreKind, Workload};
use database::Pg;
use grpc::GrpcSide;
use server::{Claimd, Launch};
use side::{Side, SideKind};
use sql::SqlSide;
use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

/// Errors printed per round at most.
const PRINT_ERRORS: usize = 5;
/// Takeover cycles per second per caller assumed when nothing has been measured yet.
const GUESS_RATE_PER_CALLER: f64 = 200.0;
/// ... and at most this many in all.
const GUESS_RATE_MAX: f64 = 2000.0;
/// Most takeover keys prepared for one round.
const MAX_TAKEOVER_KEYS: usize = 500_000;

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(0) => ExitCode::SUCCESS,
        Ok(wrong) => {
            eprintln!("claimd-bench: {wrong} wrong answers (see above); exit status 1");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("claimd-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The whole run; the number of wrong answers.
async fn run(args: Args) -> anyhow::Result<u64> {
    if let (false, Some(path)) = (args.plot_from.is_empty(), &args.plot) {
        if let [csv] = args.plot_from.as_slice()
            && soak_report::is_soak_csv(csv)?
        {
            let samples = soak_report::read_csv(csv)?;
            soak_plot::draw(path, &samples, args.plot_font.as_deref())?;
            return Ok(0);
        }
        let mut rows = Vec::new();
        for csv in &args.plot_from {
            rows.extend(report::read_csv(csv)?);
        }
        plot::draw(path, &rows, args.plot_font.as_deref())?;
        return Ok(0);
    }
    args.check()?;
    let workloads = args.workloads();
    let seed = args.seed.unwrap_or_else(rand::random);
    let run_id = format!("{:08x}", rand::random::<u32>());
    let pg = match &args.database_url {
        Some(url) => Some(Pg::connect(url).await?),
        None => None,
    };
    if let Some(pg) = &pg {
        pg.create_baseline().await?;
    }
    let work = tempfile::Builder::new().prefix("claimd-bench-").tempdir()?;
    let launch = match &args.target {
        Some(_) => None,
        None => Some(Launch {
            binary: Launch::default_binary(args.claimd.clone())?,
            store: args.store,
            database_url: args.database_url.clone(),
            data_dir: work.path().join("data"),
            log: work.path().join("claimd.log"),
            seal_key: Launch::random_seal_key(),
            config: args.claimd_config.clone(),
        }),
    };
    eprintln!(
        "claimd-bench: run {run_id}, seed {seed}, store {}, {}",
        args.store.label(),
        match args.soak {
            Some(soak) => format!("a soak of {soak} s"),
            None => format!("{} s rounds x {}", args.seconds, args.rounds),
        }
    );
    prefill(&args, launch.as_ref(), pg.as_ref()).await?;
    let keys = match (&launch, args.tenants) {
        (Some(launch), n) if n > 0 => {
            let keys = launch.create_keys(n)?;
            eprintln!(
                "claimd-bench: callers spread over {n} tenants (bench-1 … bench-{n}), one API key each"
            );
            keys
        }
        _ => Vec::new(),
    };
    if args.soak.is_some() {
        // --soak conflicts with --target, so claimd is started here.
        let launch = launch.as_ref().context("--soak starts its own claimd")?;
        return soak::run(&args, launch, seed, &run_id).await;
    }

    let mut all = Vec::new();
    let mut wrong = 0u64;
    let mut rates: HashMap<(SideKind, usize, Workload), f64> = HashMap::new();
    for &callers in &args.callers {
        let pool = callers.min(args.pool_cap);
        let child = match &launch {
            Some(launch) => Some(Claimd::start(launch, pool).await?),
            None => None,
        };
        let addr = match (&child, &args.target) {
            (Some(c), _) => c.addr.clone(),
            (None, Some(target)) => target.clone(),
            (None, None) => unreachable!("either a child or a target"),
        };
        let grpc = GrpcSide::connect(&addr, callers, args.callers_per_channel, &keys).await?;
        let mut sides = vec![Side::Claimd(grpc)];
        if let Some(url) = &args.database_url {
            sides.push(Side::Sql(
                SqlSide::connect(url, pool, args.sql_driver).await?,
            ));
        }
        eprintln!(
            "callers {callers}: {} gRPC channel(s), pool {pool} connection(s)",
            callers.div_ceil(args.callers_per_channel)
        );
        let ctx = round::Context {
            store: args.store.label(),
            pg: pg.as_ref(),
            claimd_pid: child.as_ref().map(Claimd::pid),
            length: Duration::from_secs_f64(args.seconds),
            run: &run_id,
            seed,
        };
        for &workload in &workloads {
            for r in 0..args.rounds {
                let mut order: Vec<&Side> = sides.iter().collect();
                if r % 2 == 1 {
                    order.reverse();
                }
                for side in order {
                    let kind = side.kind();
                    let keys = takeover_keys(&rates, kind, callers, args.seconds);
                    let out = round::measure(&ctx, side, workload, callers, r, keys).await?;
                    let m = &out.measured;
                    let rate_key = (kind, callers, workload);
                    rates.insert(rate_key, m.throughput);
                    eprintln!(
                        "  {} {:<9} callers {callers:>3} round {}/{} {:<6} {:>8.0} cycles/s \
                         p99 {:>7.2} ms{}{}",
                        ctx.store,
                        workload.label(),
                        r + 1,
                        args.rounds,
                        kind.label(),
                        m.throughput,
                        m.p99_ms,
                        if out.ran_out {
                            format!(
                                " (prepared keys ran out: {} cycles in {:.1} s)",
                                out.cycles,
                                out.elapsed.as_secs_f64()
                            )
                        } else {
                            String::new()
                        },
                        if m.errors > 0 {
                            format!(" — {} WRONG", m.errors)
                        } else {
                            String::new()
                        },
                    );
                    for e in out.first_errors.iter().take(PRINT_ERRORS) {
                        eprintln!("    wrong: {e}");
                    }
                    wrong += m.errors;
                    all.push(out.measured);
                }
            }
        }
        if let Some(child) = child {
            child.stop().await?;
        }
    }

    let rows = report::summarize(&all);
    println!(
        "claimd-bench: store {}, SQL driver {}, medians of {} round(s) of {} s; ratios are \
         claimd / SQL; RSS, CPU % (of one core) and CPU µs/cyc are claimd's; PG µs/cyc is \
         PostgreSQL's CPU, commits/cyc its transactions that wrote, flushes/cyc its disk's",
        args.store.label(),
        args.sql_driver.label(),
        args.rounds,
        args.seconds
    );
    print!("{}", report::table(&rows));
    if let Some(path) = &args.csv {
        report::write_csv(path, &rows)?;
    }
    if let Some(path) = &args.plot {
        plot::draw(path, &rows, args.plot_font.as_deref())?;
    }
    Ok(wrong)
}

/// `--prefill`: migrate (unless `--target`), then fill claimd's table and the baseline's.
async fn prefill(args: &Args, launch: Option<&Launch>, pg: Option<&Pg>) -> anyhow::Result<()> {
    if args.prefill == 0 {
        return Ok(());
    }
    if let Some(launch) = launch {
        launch.migrate()?;
    }
    match (args.store, launch, pg) {
        (StoreKind::Sqlite, Some(launch), _) => {
            database::prefill_sqlite(&launch.data_dir.join("claimd.db"), args.prefill).await
        }
        (StoreKind::Postgres, _, Some(pg)) => pg.prefill(args.prefill).await,
        _ => Ok(()),
    }
}

/// How many takeover keys to prepare: the side's last measured rate at these callers
/// (takeover's, else new's, else the best it reached at any callers value, else a modest
/// guess) over a round, with half again as many to spare. Too few only ends the round
/// early (and says so); too many only makes the untimed setup longer.
fn takeover_keys(
    rates: &HashMap<(SideKind, usize, Workload), f64>,
    side: SideKind,
    callers: usize,
    seconds: f64,
) -> usize {
    let best = rates
        .iter()
        .filter(|((s, _, w), _)| *s == side && matches!(w, Workload::New | Workload::Takeover))
        .map(|(_, rate)| *rate)
        .reduce(f64::max);
    let rate = rates
        .get(&(side, callers, Workload::Takeover))
        .or_else(|| rates.get(&(side, callers, Workload::New)))
        .copied()
        .or(best)
        .unwrap_or((GUESS_RATE_PER_CALLER * callers as f64).min(GUESS_RATE_MAX));
    let keys = (rate * seconds * 1.5) as usize + 100;
    keys.min(MAX_TAKEOVER_KEYS)
}
