//! PNG charts for the report (plotters, bitmap backend): throughput per
//! workload and server, and latency against offered load for each workload
//! the suite swept.
//!
//! Text needs a TrueType font. plotters' `ab_glyph` feature takes one from
//! memory, so nothing links against fontconfig/freetype: the font is read at
//! run time from `RUSH_BENCH_FONT` or the usual Debian locations
//! (`compare.sh` installs `fonts-dejavu-core` when none is there). Without a
//! font the report is still written, with a note instead of the charts.

use crate::report::{peak_run, servers_in, sweep_runs};
use crate::stats::Latency;
use crate::suite::{ServerKind, SuiteResults, SuiteRun};
use plotters::coord::combinators::IntoLogRange;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::OnceLock;

/// What [`draw_all`] produced: file names relative to the report.
#[derive(Debug, Default)]
pub struct Drawn {
    pub throughput: Option<String>,
    /// (workload, file) per latency chart.
    pub latency: Vec<(String, String)>,
    /// Why some or all charts are missing.
    pub skipped: Option<String>,
}

const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

const WIDTH: u32 = 960;
const HEIGHT: u32 = 540;

/// Register a font under plotters' "sans-serif" family, once.
fn ensure_font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let from_env = std::env::var("RUSH_BENCH_FONT").ok();
        let candidates = from_env.iter().map(String::as_str).chain(FONT_CANDIDATES.iter().copied());
        for path in candidates {
            if let Ok(bytes) = std::fs::read(path) {
                // plotters keeps the font for the life of the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "no TrueType font found (set RUSH_BENCH_FONT, or install fonts-dejavu-core); looked in {}",
            FONT_CANDIDATES.join(", ")
        ))
    })
    .clone()
}

fn color(k: ServerKind) -> RGBColor {
    match k {
        ServerKind::Rush => RGBColor(31, 119, 180),
        ServerKind::RedisEverysec => RGBColor(255, 127, 14),
        ServerKind::RedisAlways => RGBColor(148, 103, 189),
    }
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// (offered rate, latency ms) points of one line.
type Points = Vec<(f64, f64)>;

/// Draw every chart the results allow into `out`.
pub fn draw_all(results: &SuiteResults, out: &Path) -> Drawn {
    let mut drawn = Drawn::default();
    if let Err(why) = ensure_font() {
        drawn.skipped = Some(why);
        return drawn;
    }
    let mut problems = Vec::new();
    match throughput_chart(results, &out.join("throughput.png")) {
        Ok(true) => drawn.throughput = Some("throughput.png".into()),
        Ok(false) => {}
        Err(e) => problems.push(format!("throughput.png: {e}")),
    }
    // Latency against load for the swept workloads (the others have one
    // open-loop step, at half the peak: a table row, not a curve).
    let mut workloads: Vec<String> = Vec::new();
    for r in results
        .runs
        .iter()
        .filter(|r| r.fraction.is_some() && r.variant.is_none())
    {
        if !workloads.contains(&r.report.workload)
            && sweep_runs(results, &r.report.workload, r.server).len() > 1
        {
            workloads.push(r.report.workload.clone());
        }
    }
    for w in workloads {
        let file = format!("latency-{w}.png");
        match latency_chart(results, &w, &out.join(&file)) {
            Ok(()) => drawn.latency.push((w, file)),
            Err(e) => problems.push(format!("{file}: {e}")),
        }
    }
    if !problems.is_empty() {
        drawn.skipped = Some(problems.join("; "));
    }
    drawn
}

/// Grouped bars: one group per workload, one bar per server, at the deepest
/// pipeline the suite ran. Returns false when there is nothing to draw.
fn throughput_chart(
    results: &SuiteResults,
    path: &Path,
) -> Result<bool, Box<dyn std::error::Error>> {
    let main = || {
        results
            .runs
            .iter()
            .filter(|r| r.fraction.is_none() && r.variant.is_none())
    };
    let top = main().map(|r| r.report.pipeline).max();
    let Some(top) = top else { return Ok(false) };
    let mut names: Vec<String> = Vec::new();
    for r in main() {
        if !names.contains(&r.report.workload) {
            names.push(r.report.workload.clone());
        }
    }
    let servers = servers_in(results);
    let max = main()
        .filter(|r| r.report.pipeline == top)
        .map(|r| r.report.throughput)
        .fold(0.0f64, f64::max);
    let n = names.len() as f64;
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Throughput, {} connections × {top} in flight",
                results.connections
            ),
            ("sans-serif", 24),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..n, 0.0..(max * 1.2).max(1.0))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("operations per second")
        .y_label_formatter(&|v| crate::driver::group(v.round() as u64))
        .label_style(("sans-serif", 15))
        .draw()?;
    let width = 0.8 / servers.len().max(1) as f64;
    for (j, k) in servers.iter().enumerate() {
        let c = color(*k);
        let bars: Vec<(f64, f64)> = names
            .iter()
            .enumerate()
            .filter_map(|(i, w)| {
                peak_run(results, w, *k, top)
                    .map(|r| (i as f64 + 0.1 + j as f64 * width, r.report.throughput))
            })
            .collect();
        chart
            .draw_series(
                bars.iter()
                    .map(|&(x, v)| Rectangle::new([(x, 0.0), (x + width * 0.92, v)], c.filled())),
            )?
            .label(k.label())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        chart.draw_series(bars.iter().map(|&(x, v)| {
            Text::new(
                short(v),
                (x + width * 0.1, v + max * 0.02),
                ("sans-serif", 13).into_font(),
            )
        }))?;
    }
    // Workload names under their groups (plotters' tick labels can't be
    // placed at group centres on a continuous axis).
    let name_style = ("sans-serif", 16)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (i, w) in names.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(w.clone(), (px, py + 8), name_style.clone()))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 15))
        .draw()?;
    root.present()?;
    Ok(true)
}

/// 45321.0 → "45.3k".
fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// (offered rate, `us` of the latency in ms) of each open-loop step.
fn points(runs: &[&SuiteRun], us: impl Fn(&Latency) -> f64) -> Points {
    runs.iter()
        .map(|r| {
            (
                r.report.rate.unwrap_or(0.0),
                (us(&r.report.latency) / 1000.0).max(0.001),
            )
        })
        .collect()
}

/// p99 (thick, dots) and p50 (thin) latency against offered load, one colour
/// per server, log-scaled milliseconds.
fn latency_chart(results: &SuiteResults, workload: &str, path: &Path) -> DrawResult {
    let servers = servers_in(results);
    let mut lines: Vec<(ServerKind, Points, Points)> = Vec::new();
    let (mut max_x, mut lo, mut hi) = (0.0f64, f64::MAX, 0.0f64);
    for k in servers {
        let runs = sweep_runs(results, workload, k);
        if runs.is_empty() {
            continue;
        }
        let p99 = points(&runs, |l| l.p99_us);
        let p50 = points(&runs, |l| l.p50_us);
        for &(x, y) in p99.iter().chain(&p50) {
            max_x = max_x.max(x);
            lo = lo.min(y);
            hi = hi.max(y);
        }
        lines.push((k, p99, p50));
    }
    if lines.is_empty() {
        return Err("no open-loop runs".into());
    }
    let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{workload}: latency against offered load (open loop)"),
            ("sans-serif", 24),
        )
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..max_x * 1.05, ((lo / 2.0)..(hi * 2.0)).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("offered load, operations per second")
        .y_desc("latency, ms (log)")
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| {
            if *v >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        })
        .label_style(("sans-serif", 15))
        .draw()?;
    for (k, p99, p50) in lines {
        let c = color(k);
        chart
            .draw_series(LineSeries::new(p99.clone(), c.stroke_width(3)))?
            .label(format!("{} p99", k.label()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        chart.draw_series(p99.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
        chart
            .draw_series(LineSeries::new(p50, c.mix(0.6).stroke_width(1)))?
            .label(format!("{} p50", k.label()))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], c.mix(0.6).stroke_width(1))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .draw()?;
    root.present()?;
    Ok(())
}
