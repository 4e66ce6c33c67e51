//! `--plot FILE.png` with plotters' bitmap backend: one row of panels per workload,
//! throughput (cycles/s), p99 latency (ms) and, when measured, PostgreSQL's CPU per cycle
//! (µs) against callers (log scale), claimd and the SQL baseline as two lines. Text is drawn with a TrueType font read at
//! run time (`--plot-font`, else the first `.ttf` under the system font directories,
//! DejaVu Sans preferred), so the build needs no font library. The line-and-legend
//! drawing here ([`line`], [`legend`]) is also the soak plot's.

use crate::report::Row;
use crate::side::SideKind;
use anyhow::{Context, anyhow, bail};
use plotters::coord::CoordTranslate;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::path::{Path, PathBuf};

/// Where fonts are looked for when `--plot-font` is not given.
const FONT_DIRS: [&str; 2] = ["/usr/share/fonts", "/usr/local/share/fonts"];
/// Pixels per panel.
const PANEL: (u32, u32) = (640, 360);

/// Registers `font` (else the one [`find_font`] finds) as plotters' "sans-serif".
pub fn use_font(font: Option<&Path>) -> anyhow::Result<()> {
    let font = match font {
        Some(font) => font.to_path_buf(),
        None => find_font().context(
            "no .ttf font found for the plot: pass --plot-font, or install one \
             (Debian: fonts-dejavu-core)",
        )?,
    };
    let bytes = std::fs::read(&font).with_context(|| format!("cannot read {}", font.display()))?;
    // plotters keeps registered fonts for the life of the process.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow!("{} is not a usable TrueType font", font.display()))
}

/// Draws the rows' medians into `path`.
pub fn draw(path: &Path, rows: &[Row], font: Option<&Path>) -> anyhow::Result<()> {
    use_font(font)?;
    let mut workloads: Vec<_> = rows.iter().map(|r| (r.store, r.workload)).collect();
    workloads.dedup();
    if workloads.is_empty() {
        bail!("nothing measured to plot");
    }
    // A third column when PostgreSQL's CPU per cycle was measured.
    let costs = rows.iter().any(|r| r.pg_cpu_us.is_some());
    let columns = if costs { 3 } else { 2 };
    let height = PANEL.1 * u32::try_from(workloads.len())?;
    let width = PANEL.0 * u32::try_from(columns)?;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let panels = root.split_evenly((workloads.len(), columns));
    for (i, (store, workload)) in workloads.iter().enumerate() {
        let of = |side: SideKind| -> Vec<&Row> {
            rows.iter()
                .filter(|r| (r.store, r.workload, r.side) == (*store, *workload, side))
                .collect()
        };
        let (claimd, sql) = (of(SideKind::Claimd), of(SideKind::Sql));
        let title = format!("{store} {}", workload.label());
        let at = columns * i;
        panel(&panels[at], &title, "cycles/s", &claimd, &sql, |r| {
            r.throughput
        })?;
        panel(&panels[at + 1], &title, "p99 ms", &claimd, &sql, |r| {
            r.p99_ms
        })?;
        if costs {
            let (claimd, sql) = (with_pg_cpu(&claimd), with_pg_cpu(&sql));
            panel(
                &panels[at + 2],
                &title,
                "PostgreSQL CPU µs/cycle",
                &claimd,
                &sql,
                |r| r.pg_cpu_us.unwrap_or(0.0),
            )?;
        }
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// The rows where PostgreSQL's CPU was measured.
fn with_pg_cpu<'a>(rows: &[&'a Row]) -> Vec<&'a Row> {
    rows.iter()
        .copied()
        .filter(|r| r.pg_cpu_us.is_some())
        .collect()
}

/// One panel: `value` of claimd's and SQL's rows against callers.
fn panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    title: &str,
    y_desc: &str,
    claimd: &[&Row],
    sql: &[&Row],
    value: fn(&Row) -> f64,
) -> anyhow::Result<()> {
    let all = claimd.iter().chain(sql);
    let max_x = all.clone().map(|r| r.callers as f64).fold(1.0, f64::max) * 1.3;
    let max_y = all.map(|r| value(r)).fold(0.0, f64::max).max(1e-3) * 1.15;
    let caption = format!("{title}: {y_desc}");
    let series = [(claimd, "claimd", BLUE), (sql, "SQL", RED)];
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d((0.8f64..max_x).log_scale(), 0f64..max_y)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("callers")
        .y_desc(y_desc)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (rows, label, color) in series {
        if rows.is_empty() {
            continue;
        }
        let points: Vec<(f64, f64)> = rows.iter().map(|r| (r.callers as f64, value(r))).collect();
        line(&mut chart, points, label, color, 4)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// Draws `points` as a line of `color` with a dot of `dot` pixels at each point, under
/// `label` in the legend.
pub fn line<'a, CT>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, CT>,
    points: Vec<(f64, f64)>,
    label: &'static str,
    color: RGBColor,
    dot: u32,
) -> anyhow::Result<()>
where
    CT: CoordTranslate<From = (f64, f64)>,
{
    chart
        .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
        .map_err(|e| anyhow!("{e}"))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    let dots = points
        .into_iter()
        .map(|p| Circle::new(p, dot, color.filled()));
    chart.draw_series(dots).map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// The legend of `chart`'s lines, boxed, at `position`.
pub fn legend<'a, CT>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> anyhow::Result<()>
where
    CT: CoordTranslate<From = (f64, f64)>,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))
}

/// The first `.ttf` under [`FONT_DIRS`], DejaVu Sans if it is there.
fn find_font() -> Option<PathBuf> {
    let mut found = Vec::new();
    for dir in FONT_DIRS {
        collect_ttf(Path::new(dir), &mut found, 0);
    }
    found.sort();
    let preferred = found.iter().find(|p| p.ends_with("DejaVuSans.ttf"));
    preferred.or(found.first()).cloned()
}

/// Every `.ttf` below `dir`, a few levels deep.
fn collect_ttf(dir: &Path, found: &mut Vec<PathBuf>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && depth < 4 {
            collect_ttf(&path, found, depth + 1);
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("ttf"))
        {
            found.push(path);
        }
    }
}
