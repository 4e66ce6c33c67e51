//! A soak's `--plot FILE.png` with plotters' bitmap backend, in the font and with the lines
//! and legend of [`crate::plot`]: four panels against elapsed time — claimd's RSS; its open fds, sockets and
//! established TCP connections; p50, p99 and p99.9 per sample period (log scale, so the
//! p50 stays visible beside a stall's p99.9); and cycles/s answered against the rate asked
//! for.

use crate::soak_report::Sample;
use anyhow::{anyhow, bail};
use plotters::prelude::*;
use std::path::Path;

/// Pixels per panel.
const PANEL: (u32, u32) = (640, 360);

/// One line of a panel: its legend and colour, and a value per sample.
type Series = (&'static str, RGBColor, fn(&Sample) -> f64);

/// Draws `samples` (of one soak) into `path`.
pub fn draw(path: &Path, samples: &[Sample], font: Option<&Path>) -> anyhow::Result<()> {
    let Some(first) = samples.first() else {
        bail!("no samples to plot");
    };
    if samples.iter().any(|s| s.store != first.store) {
        bail!("one soak per plot: the samples are of more than one store");
    }
    crate::plot::use_font(font)?;
    let root = BitMapBackend::new(path, (PANEL.0 * 2, PANEL.1 * 2)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let panels = root.split_evenly((2, 2));
    let title = |what: &str| format!("{} soak: {what}", first.store);
    let green = RGBColor(0, 150, 0);
    let grey = RGBColor(128, 128, 128);
    let rss: [Series; 1] = [("RSS", BLUE, |s| s.rss_mib)];
    let files: [Series; 3] = [
        ("open fds", green, |s| s.open_fds as f64),
        ("sockets", RED, |s| s.sockets as f64),
        ("TCP established", BLUE, |s| s.tcp_conns as f64),
    ];
    let latency: [Series; 3] = [
        ("p50", green, |s| s.p50_ms),
        ("p99", BLUE, |s| s.p99_ms),
        ("p99.9", RED, |s| s.p999_ms),
    ];
    let throughput: [Series; 2] = [
        ("answered", BLUE, |s| s.cycles_per_s),
        ("rate asked", grey, |s| s.target_per_s),
    ];
    panel(
        &panels[0],
        &title("claimd RSS"),
        "MiB",
        samples,
        &rss,
        false,
    )?;
    panel(
        &panels[1],
        &title("claimd open files"),
        "count",
        samples,
        &files,
        false,
    )?;
    panel(
        &panels[2],
        &title("latency per period"),
        "ms (log scale)",
        samples,
        &latency,
        true,
    )?;
    panel(
        &panels[3],
        &title("throughput"),
        "cycles/s",
        samples,
        &throughput,
        false,
    )?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// One panel: each series against elapsed seconds, the y axis from 0 (or, `log`, from
/// the decade below the smallest value, drawn as log10) with room at the top for the legend.
fn panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    caption: &str,
    y_desc: &str,
    samples: &[Sample],
    series: &[Series],
    log: bool,
) -> anyhow::Result<()> {
    let max_x = samples.iter().map(|s| s.elapsed_s).fold(1.0, f64::max) * 1.02;
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|(_, _, f)| samples.iter().map(f))
        .collect();
    let max = ys.iter().copied().fold(1e-3, f64::max);
    let (lo, hi) = if log {
        let min = ys.iter().copied().filter(|v| *v > 0.0).fold(max, f64::min);
        let lo = min.log10().floor();
        (lo, (max.log10().ceil() + 0.6).max(lo + 1.0))
    } else {
        (0.0, max * 1.35)
    };
    let at = |v: f64| {
        if log {
            v.max(10f64.powf(lo)).log10()
        } else {
            v
        }
    };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..max_x, lo..hi)
        .map_err(|e| anyhow!("{e}"))?;
    let label = |y: &f64| {
        let v = if log { 10f64.powf(*y) } else { *y };
        if v >= 20.0 || (log && v >= 1.0) {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    let mut mesh = chart.configure_mesh();
    if log {
        // About one label per decade.
        mesh.y_labels((hi - lo).ceil() as usize + 1);
    }
    mesh.x_desc("seconds")
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&label)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for &(label, color, value) in series {
        let points: Vec<(f64, f64)> = samples
            .iter()
            .map(|s| (s.elapsed_s, at(value(s))))
            .collect();
        crate::plot::line(&mut chart, points, label, color, 3)?;
    }
    crate::plot::legend(&mut chart, SeriesLabelPosition::UpperRight)
}
