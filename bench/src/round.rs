//! One round of one side: its untimed setup, the timed closed loop, and what is measured
//! around it — PostgreSQL's counters before and after (WAL position, next transaction id,
//! CPU time of its processes, flushes of its disk: see [`crate::database::PgCosts`]),
//! claimd's CPU time and peak RSS during it (claimd rounds of a claimd started here) — then
//! the mixed workload's untimed tail. Turns the callers' records into one [`Measured`].

use crate::cli::Workload;
use crate::database::Pg;
use crate::procstat::{RssSampler, cpu_seconds};
use crate::report::Measured;
use crate::runner::{closed_loop, merge};
use crate::side::{Side, SideKind};
use crate::{mixed, workload};
use std::time::Duration;

/// What every round of a run shares.
pub struct Context<'a> {
    /// `postgres` or `sqlite`.
    pub store: &'static str,
    /// For WAL positions (PostgreSQL only).
    pub pg: Option<&'a Pg>,
    /// The claimd child's pid, if this process started it.
    pub claimd_pid: Option<u32>,
    /// Length of a timed round.
    pub length: Duration,
    /// Unique to the run, the start of every key.
    pub run: &'a str,
    /// The mixed workload's seed.
    pub seed: u64,
}

/// One round's result: the medians' input, the first wrong answers, and whether prepared
/// keys ran out before the round's end.
pub struct Outcome {
    /// What was measured.
    pub measured: Measured,
    /// The first few wrong answers (all of them are counted in `measured.errors`).
    pub first_errors: Vec<String>,
    /// Whether a caller stopped early for want of prepared keys (takeover).
    pub ran_out: bool,
    /// Successful cycles.
    pub cycles: u64,
    /// The timed phase's length.
    pub elapsed: Duration,
}

/// Sets up, times and measures one round of `workload` with `callers` callers on `side`.
pub async fn measure(
    ctx: &Context<'_>,
    side: &Side,
    workload: Workload,
    callers: usize,
    round: usize,
    takeover_keys: usize,
) -> anyhow::Result<Outcome> {
    let kind = side.kind();
    let prefix = format!(
        "{}-{}-{callers}-{round}-{}",
        ctx.run,
        workload.label(),
        kind.label()
    );
    let seed = ctx.seed ^ (round as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    let plan = workload::prepare(side, workload, prefix, callers, takeover_keys, seed).await?;
    let pid = ctx.claimd_pid.filter(|_| kind == SideKind::Claimd);

    let pg_before = match ctx.pg {
        Some(pg) => Some(pg.costs().await?),
        None => None,
    };
    let cpu_before = pid.map(cpu_seconds).transpose()?;
    let sampler = pid.map(RssSampler::start);
    let (mut recorders, elapsed) = closed_loop(callers, ctx.length, |i, deadline| {
        workload::caller(side.clone(), plan.clone(), i, deadline)
    })
    .await?;
    let cpu_after = pid.map(cpu_seconds).transpose()?;
    let pg_after = match ctx.pg {
        Some(pg) => Some(pg.costs().await?),
        None => None,
    };
    let rss_kib = match sampler {
        Some(s) => Some(s.stop().await),
        None => None,
    };

    let tail = if workload == Workload::Mixed {
        Some(mixed::drain(side, &mut recorders).await)
    } else {
        None
    };
    let mut merged = merge(&recorders);
    if let Some(tail) = tail {
        merged.errors += tail.errors;
        merged.first_errors.extend(tail.first_errors);
    }
    let cycles = merged.cycles;
    let seconds = elapsed.as_secs_f64();
    let ms = |q: f64| merged.hist.value_at_quantile(q) as f64 / 1000.0;
    let claimd_cpu = match (cpu_before, cpu_after) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let cpu = claimd_cpu.map(|s| s / seconds * 100.0);
    // Per cycle: a difference over the round divided by its successful cycles.
    let per_cycle = |delta: Option<f64>| delta.filter(|_| cycles > 0).map(|d| d / cycles as f64);
    let pg = pg_before.zip(pg_after);
    let wal = per_cycle(pg.map(|(a, b)| (b.wal - a.wal) as f64));
    let commits = per_cycle(pg.map(|(a, b)| (b.next_xid - a.next_xid) as f64));
    let pg_cpu = per_cycle(pg.and_then(|(a, b)| Some(b.cpu? - a.cpu?))).map(|s| s * 1e6);
    let flushes =
        per_cycle(pg.and_then(|(a, b)| Some(b.flushes?.saturating_sub(a.flushes?) as f64)));
    let measured = Measured {
        store: ctx.store,
        workload,
        callers,
        side: kind,
        throughput: cycles as f64 / seconds,
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        p999_ms: ms(0.999),
        rss_mib: rss_kib.map(|k| k as f64 / 1024.0),
        cpu_pct: cpu,
        wal_per_cycle: wal,
        claimd_cpu_us: per_cycle(claimd_cpu).map(|s| s * 1e6),
        pg_cpu_us: pg_cpu,
        commits_per_cycle: commits,
        flushes_per_cycle: flushes,
        errors: merged.errors,
    };
    Ok(Outcome {
        measured,
        first_errors: merged.first_errors,
        ran_out: merged.ran_out,
        cycles,
        elapsed,
    })
}
