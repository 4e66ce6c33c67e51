//! `--soak SECONDS`: a long, rate-limited run of the `mixed` workload against one claimd
//! started here (no SQL baseline), to see whether anything grows with time. The callers
//! run as in a round, but every delivery waits for its slot of one [`Pacer`] (open loop at
//! `--rate` cycles/s: slots are not skipped, and the pacing wait is not latency) and every
//! record is copied into one [`Tap`]. Every `--sample-every` seconds this module takes the
//! tap's period (a fresh histogram per period) and reads claimd's RSS, CPU and open files
//! from `/proc` into a [`Sample`]: a stderr line and a CSV row at once. At the end the
//! retries still owed are delivered (checked), claimd is stopped, the verdict line printed
//! and the plot drawn. The number of wrong answers is the result (exit status 1 if any).

use crate::cli::{Args, Workload};
use crate::grpc::GrpcSide;
use crate::procstat::{cpu_seconds, open_files, rss_kib};
use crate::runner::{Pacer, Tap, closed_loop, lock, merge};
use crate::server::{Claimd, Launch};
use crate::side::Side;
use crate::soak_report::{CsvOut, Sample, verdict};
use crate::{mixed, soak_plot, workload};
use anyhow::Context;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wrong answers printed per sample at most.
const PRINT_ERRORS: usize = 5;

/// Runs the soak `args` describe on a claimd started from `launch`; the wrong answers.
pub async fn run(args: &Args, launch: &Launch, seed: u64, run_id: &str) -> anyhow::Result<u64> {
    // Args::check demands --rate and one --callers value with --soak.
    let seconds = args.soak.context("--soak SECONDS")?;
    let rate = args.rate.context("--rate CYCLES_PER_SECOND")?;
    let callers = args.callers[0];
    let pool = callers.min(args.pool_cap);
    let store = args.store.label();
    let child = Claimd::start(launch, pool).await?;
    let pid = child.pid();
    let grpc = GrpcSide::connect(&child.addr, callers, args.callers_per_channel, &[]).await?;
    let side = Side::Claimd(grpc);
    eprintln!(
        "soak: store {store}, {seconds} s of mixed at {rate} cycles/s over {callers} callers \
         ({} gRPC channel(s), pool {pool}), a sample every {} s",
        callers.div_ceil(args.callers_per_channel),
        args.sample_every
    );
    let prefix = format!("{run_id}-soak");
    let mut plan = workload::prepare(&side, Workload::Mixed, prefix, callers, 0, seed).await?;
    let tap = Tap::default();
    let pacer = Arc::new(Pacer::new(rate));
    plan.pace = Some(pacer.clone());
    plan.tap = Some(tap.clone());
    let length = Duration::from_secs_f64(seconds);
    let mut csv = args.csv.as_deref().map(CsvOut::create).transpose()?;

    let load = {
        let (side, plan) = (side.clone(), plan.clone());
        tokio::spawn(closed_loop(callers, length, move |i, deadline| {
            workload::caller(side.clone(), plan.clone(), i, deadline)
        }))
    };
    let mut probe = Probe {
        store,
        rate,
        pid,
        start: Instant::now(),
        last: Instant::now(),
        cpu: cpu_seconds(pid)?,
    };
    let period = Duration::from_secs_f64(args.sample_every);
    let end = probe.start + length;
    let mut samples = Vec::new();
    for k in 1u32.. {
        let at = (probe.start + period * k).min(end);
        tokio::time::sleep_until(at.into()).await;
        let (sample, first_errors) = probe.take(&tap, &pacer)?;
        print_sample(&sample, &first_errors);
        if let Some(csv) = &mut csv {
            csv.write(&sample)?;
        }
        samples.push(sample);
        if at >= end {
            break;
        }
    }

    let (mut recorders, _) = load.await??;
    let tail = mixed::drain(&side, &mut recorders).await;
    let merged = merge(&recorders);
    for e in tail.first_errors.iter().take(PRINT_ERRORS) {
        eprintln!("    wrong (a retry delivered after the end): {e}");
    }
    child.stop().await?;
    let wrong = merged.errors + tail.errors;
    println!(
        "claimd-bench soak: store {store}, {seconds} s of mixed at {rate} cycles/s over \
         {callers} callers: {} cycles ({:.0}/s), {wrong} wrong answers",
        merged.cycles,
        merged.cycles as f64 / seconds
    );
    println!("{}", verdict(&samples));
    if let Some(path) = &args.plot {
        soak_plot::draw(path, &samples, args.plot_font.as_deref())?;
    }
    Ok(wrong)
}

/// What a sample is measured against: the previous sample's time and CPU.
struct Probe {
    store: &'static str,
    rate: f64,
    pid: u32,
    start: Instant,
    last: Instant,
    cpu: f64,
}

impl Probe {
    /// Ends the current period: its cycles and latencies from the tap (left empty), claimd's
    /// RSS, open files and CPU since the last sample; the period's first wrong answers.
    fn take(&mut self, tap: &Tap, pacer: &Pacer) -> anyhow::Result<(Sample, Vec<String>)> {
        let period = std::mem::take(&mut *lock(tap));
        let now = Instant::now();
        let cpu = cpu_seconds(self.pid).context("claimd's CPU time (did it exit?)")?;
        let rss = rss_kib(self.pid).context("claimd exited during the soak")?;
        let files = open_files(self.pid).context("claimd's open files")?;
        let seconds = now.duration_since(self.last).as_secs_f64().max(1e-9);
        let ms = |q: f64| match period.cycles {
            0 => 0.0,
            _ => period.hist.value_at_quantile(q) as f64 / 1000.0,
        };
        let sample = Sample {
            store: self.store.to_owned(),
            elapsed_s: now.duration_since(self.start).as_secs_f64(),
            target_per_s: self.rate,
            cycles: period.cycles,
            cycles_per_s: period.cycles as f64 / seconds,
            errors: period.errors,
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            rss_mib: rss as f64 / 1024.0,
            open_fds: files.fds,
            sockets: files.sockets,
            tcp_conns: files.tcp,
            cpu_pct: (cpu - self.cpu) / seconds * 100.0,
            behind_ms: pacer.behind().as_secs_f64() * 1000.0,
        };
        (self.last, self.cpu) = (now, cpu);
        Ok((sample, period.first_errors))
    }
}

/// The sample's stderr line, and its first wrong answers.
fn print_sample(s: &Sample, first_errors: &[String]) {
    eprintln!(
        "  {:>6.0} s {:>7.0} cycles/s p50 {:>6.2} p99 {:>7.2} p999 {:>7.2} ms RSS {:>6.1} MiB \
         fds {:>3} sockets {:>3} TCP {:>3} CPU {:>3.0} % behind {:>5.0} ms{}",
        s.elapsed_s,
        s.cycles_per_s,
        s.p50_ms,
        s.p99_ms,
        s.p999_ms,
        s.rss_mib,
        s.open_fds,
        s.sockets,
        s.tcp_conns,
        s.cpu_pct,
        s.behind_ms,
        match s.errors {
            0 => String::new(),
            n => format!(" — {n} WRONG"),
        }
    );
    for e in first_errors.iter().take(PRINT_ERRORS) {
        eprintln!("    wrong: {e}");
    }
}
