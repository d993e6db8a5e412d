//! GPU & server tab: each GPU's memory and utilization now and over time (level starts marked),
//! power, temperature and clock; the engine's running and queued requests and KV-cache usage;
//! the accept length as the server reports it. Missing sources say why.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{LineGauge, Paragraph, Widget, Wrap};

/// A GPU bar's filled and empty parts: told apart by shape, not only by colour.
const FILLED: &str = "━";
const EMPTY: &str = "╌";

use super::{LineChart, Series};
use crate::fmt::num;
use crate::telemetry::{GpuReading, GpuSource};
use crate::tui::app::App;
use crate::tui::theme::Theme;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Draws the tab.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let gpus = app
        .session
        .latest_gpu
        .as_ref()
        .map_or(&[][..], |g| g.gpus.as_slice());
    let gpu_rows = if gpus.is_empty() {
        2
    } else {
        gpus.len() as u16
    };
    let gpu_h = (gpu_rows + 2).min(area.height.saturating_sub(4));
    let server_h = 4;
    let charts_h = area.height.saturating_sub(gpu_h + server_h);
    let [gpu_area, charts, server_area] = Layout::vertical([
        Constraint::Length(gpu_h),
        Constraint::Length(if charts_h >= 7 { charts_h } else { 0 }),
        Constraint::Min(server_h),
    ])
    .areas(area);
    render_gpus(app, gpus, gpu_area, buf, th);
    if charts_h >= 7 {
        render_charts(app, charts, buf, th);
    }
    render_server(app, server_area, buf, th);
}

fn gpu_title(app: &App) -> String {
    let source = match app.session.latest_gpu.as_ref().map(|g| g.source) {
        Some(GpuSource::Nvml) => " GPUs (NVML)",
        Some(GpuSource::NvidiaSmi) => " GPUs (nvidia-smi)",
        Some(GpuSource::Dcgm) => " GPUs (DCGM exporter)",
        Some(GpuSource::SimulatedDcgm) => " GPUs — SIMULATED by servetop-sim",
        None => " GPUs",
    };
    // Energy: what the GPUs draw idle, and the latest finished level's energy per token.
    let idle = app
        .session
        .summary
        .telemetry
        .idle_power_w
        .map_or(String::new(), |w| format!(" · idle {w:.0} W"));
    let level = app
        .session
        .summary
        .levels()
        .filter(|l| l.energy.joules_per_output_token.is_some())
        .last()
        .map_or(String::new(), |l| {
            format!(
                " · {} {} J/token, {} W",
                l.label(),
                crate::fmt::num(l.energy.joules_per_output_token),
                crate::fmt::num(l.energy.mean_power_w)
            )
        });
    format!("{source}{idle}{level} ")
}

fn render_gpus(app: &App, gpus: &[GpuReading], area: Rect, buf: &mut Buffer, th: &Theme) {
    let block = th.panel(gpu_title(app));
    let inner = block.inner(area);
    block.render(area, buf);
    if gpus.is_empty() {
        let why = app
            .session
            .summary
            .telemetry
            .gpu_reason
            .as_deref()
            .map_or_else(
                || "waiting for the first GPU sample…".to_string(),
                |r| format!("no NVIDIA GPU: {r}"),
            );
        Paragraph::new(Span::styled(why, th.warn))
            .wrap(Wrap { trim: true })
            .render(inner, buf);
        return;
    }
    let wide = inner.width >= 110;
    for (row, g) in gpus.iter().enumerate() {
        let y = inner.y + row as u16;
        if y >= inner.y + inner.height {
            break;
        }
        let line = Rect::new(inner.x, y, inner.width, 1);
        let [label, mem, util, rest] = Layout::horizontal([
            Constraint::Length(if wide { 30 } else { 6 }),
            Constraint::Percentage(if wide { 30 } else { 45 }),
            Constraint::Percentage(if wide { 20 } else { 30 }),
            Constraint::Min(0),
        ])
        .areas(line);
        let name = if wide {
            crate::tui::text::fit(&format!("{} {}", g.index, g.name), 29)
        } else {
            format!("GPU{}", g.index)
        };
        Span::styled(name, th.accent).render(label, buf);
        let (mem_ratio, mem_label) = match (g.mem_used_bytes, g.mem_total_bytes) {
            (Some(u), Some(t)) if t > 0 => (
                u as f64 / t as f64,
                format!("{:.0}/{:.0}G", u as f64 / GIB, t as f64 / GIB),
            ),
            _ => (0.0, "mem N/A".into()),
        };
        // Heavy filled, dashed empty: the bars read without colour (NO_COLOR) too.
        LineGauge::default()
            .filled_symbol(FILLED)
            .unfilled_symbol(EMPTY)
            .ratio(mem_ratio.clamp(0.0, 1.0))
            .label(mem_label)
            .filled_style(Style::default().fg(th.series[0]))
            .render(mem, buf);
        let u = g.util_gpu_pct;
        LineGauge::default()
            .filled_symbol(FILLED)
            .unfilled_symbol(EMPTY)
            .ratio((u.unwrap_or(0.0) / 100.0).clamp(0.0, 1.0))
            .label(u.map_or("util N/A".into(), |u| format!("{u:>3.0}%")))
            .filled_style(Style::default().fg(th.series[1]))
            .render(util, buf);
        let power = match (g.power_w, g.power_limit_w) {
            (Some(p), Some(l)) => format!("{p:.0}/{l:.0}W"),
            (Some(p), None) => format!("{p:.0}W"),
            _ => "N/A".into(),
        };
        let temp = g.temp_c.map_or("N/A".into(), |t| format!("{t:.0}°C"));
        let extra = if wide {
            format!(
                " {power} {temp} {}",
                g.sm_clock_mhz
                    .map_or(String::new(), |c| format!("{c:.0}MHz"))
            )
        } else {
            // Narrow: the two numbers that matter most, whole.
            format!(
                " {} {temp}",
                g.power_w.map_or("N/A".into(), |p| format!("{p:.0}W"))
            )
        };
        Span::styled(crate::tui::text::fit(&extra, rest.width as usize), th.dim).render(rest, buf);
    }
}

/// One series a GPU, named `names[i]`, in the three series colours in turn.
fn gpu_series<'a>(
    sets: &'a [crate::tui::views::Series],
    names: &'a [String],
    colors: &[Color; 3],
) -> Vec<Series<'a>> {
    sets.iter()
        .enumerate()
        .map(|(i, points)| Series::line(&names[i], points, Style::default().fg(colors[i % 3])))
        .collect()
}

/// Four chart cells: one row when the tab is 120 columns wide or more, else two by two.
fn chart_cells(area: Rect) -> Vec<Rect> {
    if area.width >= 120 {
        Layout::horizontal([Constraint::Ratio(1, 4); 4])
            .split(area)
            .to_vec()
    } else {
        let [top, bottom] = Layout::vertical([Constraint::Ratio(1, 2); 2]).areas(area);
        let a = Layout::horizontal([Constraint::Ratio(1, 2); 2]).split(top);
        let b = Layout::horizontal([Constraint::Ratio(1, 2); 2]).split(bottom);
        vec![a[0], a[1], b[0], b[1]]
    }
}

fn render_charts(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let v = &app.clocked.telemetry;
    let t_max = v
        .running
        .last()
        .map(|p| p.0)
        .into_iter()
        .chain(v.gpu_util.iter().filter_map(|s| s.last().map(|p| p.0)))
        .fold(1.0f64, f64::max);
    let colors = [th.series[0], th.series[1], th.series[2]];
    let names: Vec<String> = (0..v.gpu_mem_gib.len())
        .map(|i| format!("GPU{i}"))
        .collect();
    let mem = gpu_series(&v.gpu_mem_gib, &names, &colors);
    let util = gpu_series(&v.gpu_util, &names, &colors);
    let server = [
        Series::line("running", &v.running, Style::default().fg(colors[0])),
        Series::line("queued", &v.queued, Style::default().fg(colors[1])),
    ];
    let kv = [Series::line(
        "KV %",
        &v.kv_pct,
        Style::default().fg(colors[2]),
    )];
    let cells = chart_cells(area);
    let (no_gpu, no_srv) = ("no GPU samples", "no engine metrics");
    let mem_top = (v.gpu_mem_total_gib > 0.0).then_some(v.gpu_mem_total_gib);
    // Level starts are ticks on the time axis, labelled where they fit: the data stays in view.
    let chart = |title, series, y_fixed, empty| LineChart {
        title,
        series,
        x: [0.0, t_max],
        x_ends: ["0 s".to_string(), format!("{t_max:.0} s")],
        ticks: &v.level_marks,
        y_fixed,
        highlight: None,
        highlight_pending: false,
        empty,
    };
    chart("GPU memory (GiB) · ┴ level starts", &mem, mem_top, no_gpu).render(cells[0], buf, th);
    chart("GPU utilization (%)", &util, Some(100.0), no_gpu).render(cells[1], buf, th);
    chart("server: running, queued", &server, None, no_srv).render(cells[2], buf, th);
    chart("server KV-cache use (%)", &kv, Some(100.0), no_srv).render(cells[3], buf, th);
}

fn render_server(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let s = &app.session;
    let title = match &s.summary.telemetry.server_flavor {
        Some(f) => format!(" server ({f} metrics) "),
        None => " server ".into(),
    };
    let mut lines = Vec::new();
    match (&s.latest_server, &s.summary.telemetry.server_reason) {
        (Some(v), _) => {
            let accept = v
                .accept_length_gauge
                .or(v.accept_length_cumulative)
                .or_else(|| match (v.spec_accepted_total, v.spec_drafts_total) {
                    (Some(a), Some(d)) if d > 0.0 => Some(1.0 + a / d),
                    _ => None,
                });
            let count = |x: Option<f64>| x.map_or("N/A".into(), |x| format!("{x:.0}"));
            lines.push(Line::raw(format!(
                "running {} · queued {} · KV {} · gen {} tok/s · accept (server) {}",
                count(v.running),
                count(v.queued),
                v.kv_usage
                    .map_or("N/A".into(), |k| format!("{:.0}%", k * 100.0)),
                num(v.gen_throughput),
                num(accept),
            )));
        }
        (None, Some(r)) => lines.push(Line::styled(format!("no engine metrics: {r}"), th.warn)),
        (None, None) => lines.push(Line::styled(
            "waiting for the first scrape of the engine's /metrics…",
            th.dim,
        )),
    }
    if let Some(sv) = &s.summary.server {
        lines.push(Line::styled(
            format!(
                "{} · {} · context {}",
                sv.engine.name(),
                sv.model,
                sv.context_limit
                    .map_or("not reported".into(), |n| format!("{n} tokens"))
            ),
            th.dim,
        ));
    }
    Paragraph::new(lines)
        .block(th.panel(title))
        .wrap(Wrap { trim: true })
        .render(area, buf);
}
