//! `report.html`: one self-contained page to send — the findings with their caveats (each
//! pointing at the table rows and chart points it rests on), summary.md's tables as sortable
//! HTML tables, every chart of the PNGs as an interactive chart (the same series, drawn by the
//! vendored uPlot from [`crate::export::charts::Figure::spec`]), and a per-request timeline.
//! Scripts, styles and data are inline: the page opens from disk and fetches nothing. The
//! run's results.json is embedded (`<script type="application/json" id="results">`) with its
//! credentials written `***` ([`crate::summary::redact`]).

pub mod markdown;
pub mod timeline;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::charts::{ChartRun, figures, start_ms};
use super::markdown::{FINDINGS_HEADING, long_context_table, rate_table, summary_md, sweep_table};
use super::write_atomic;
use crate::metrics::RequestRecord;
use crate::summary::findings::{CaveatNumbers, Finding, Strength};
use crate::summary::redact::redacted;
use crate::summary::{LevelSummary, Passes, RunSummary};
use crate::telemetry::TelemetryRecord;
use markdown::{LevelRows, esc};

/// The charting library, vendored from npm at a pinned version (assets/report/uplot/README.md).
const UPLOT_JS: &str = include_str!("../../../assets/report/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../../assets/report/uplot/uPlot.min.css");
/// The page's own script and style.
const REPORT_JS: &str = include_str!("../../../assets/report/report.js");
const REPORT_CSS: &str = include_str!("../../../assets/report/report.css");

/// One run on the page: its label, summary, telemetry and measured requests.
pub struct PageRun<'a> {
    pub label: String,
    pub summary: &'a RunSummary,
    pub telemetry: &'a [TelemetryRecord],
    pub requests: &'a [RequestRecord],
}

/// JSON to embed in a `<script>`: a `<` anywhere (only ever inside a string) written `\u003c`,
/// so no text in it can close the element.
fn embedded(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v)
        .unwrap_or_else(|_| "null".into())
        .replace('<', "\\u003c")
}

/// The rows of the tables that start a row with the level's number (sweep, rates, long
/// context), as their writers write them, with each row's level label; and every label.
fn level_rows(s: &RunSummary) -> LevelRows {
    let mut rows = Vec::new();
    let asked = &s.config.metric_percentiles;
    let tables: [(&[LevelSummary], String); 3] = [
        (&s.sweep, sweep_table(&s.sweep, asked)),
        (&s.rates, rate_table(&s.rates, asked)),
        (&s.long_context, long_context_table(&s.long_context)),
    ];
    for (levels, table) in tables {
        if levels.is_empty() {
            continue;
        }
        let order = Passes::of(levels).in_order(levels);
        let lines = table.lines().filter(|l| l.starts_with('|')).skip(2);
        for (line, l) in lines.zip(order) {
            rows.push((line.to_string(), l.label()));
        }
    }
    LevelRows {
        rows,
        labels: s.levels().map(LevelSummary::label).collect(),
    }
}

/// Where each level's points lie on the charts, by label: `[x axis, x]` for the sweep
/// (concurrency), long context (K tokens) and rate levels.
fn level_points(runs: &[&RunSummary]) -> Value {
    let mut out = serde_json::Map::new();
    for s in runs {
        let mut put = |l: &LevelSummary, axis: &str, x: f64| {
            if x.is_finite() {
                let e = out.entry(l.label()).or_insert_with(|| json!([]));
                if let Some(a) = e.as_array_mut() {
                    a.push(json!([axis, x]));
                }
            }
        };
        for l in &s.sweep {
            put(l, "concurrency", f64::from(l.concurrency));
        }
        for l in &s.long_context {
            put(l, "context_k", l.input_len as f64 / 1000.0);
        }
        for l in &s.rates {
            put(l, "rate", l.request_rate().unwrap_or(f64::NAN));
        }
    }
    Value::Object(out)
}

/// One finding as a list item: its text as results.json has it, its strength, its caveats
/// (by number when `numbers` numbers them, as summary.md and the tables do) and the levels it
/// rests on (`data-levels`, what a click highlights).
fn finding_item(out: &mut String, f: &Finding, run: Option<&str>, numbers: Option<&CaveatNumbers>) {
    let levels = embedded(&f.levels).replace('"', "&quot;");
    let _ = write!(
        out,
        "<li class=\"finding {}\" data-finding=\"{}\" data-levels=\"{levels}\" tabindex=\"0\">",
        f.strength.name(),
        esc(&f.id)
    );
    if let Some(r) = run {
        let _ = write!(out, "<span class=\"run\">{}</span> ", esc(r));
    }
    let _ = write!(out, "<span class=\"finding-text\">{}</span>", esc(&f.text));
    if f.strength != Strength::Solid {
        let _ = write!(
            out,
            " <span class=\"strength\" title=\"{}\">{}</span>",
            esc(&f.strength_reasons.join("; ")),
            f.strength.name()
        );
    }
    match numbers {
        Some(n) => {
            for i in n.of_finding(f) {
                let text = n.list().get(i - 1).map_or("", String::as_str);
                let _ = write!(
                    out,
                    " <a class=\"cav\" href=\"#caveat-{i}\" title=\"{}\">caveat {i}</a>",
                    esc(text)
                );
            }
        }
        None if !f.caveats.is_empty() => {
            out.push_str("<ul class=\"caveats\">");
            for c in &f.caveats {
                let _ = write!(out, "<li>{}</li>", esc(c));
            }
            out.push_str("</ul>");
        }
        None => {}
    }
    if !f.levels.is_empty() {
        let _ = write!(
            out,
            "<div class=\"rests\">rests on {}</div>",
            esc(&f.levels.join(", "))
        );
    }
    out.push_str("</li>\n");
}

/// The findings section: each group's findings (named by run when there are several), and
/// the numbered caveats when `numbers` numbers them.
fn findings_html(groups: &[(Option<&str>, &[Finding])], numbers: Option<&CaveatNumbers>) -> String {
    let mut out = String::from("<section id=\"findings\"><h2>Findings</h2>\n");
    if groups.iter().all(|(_, f)| f.is_empty()) {
        out.push_str("<p>No findings: the run has no finished level yet.</p>\n");
    } else {
        out.push_str("<p class=\"hint\">Click a finding to highlight the table rows and chart points it rests on.</p>\n<ol class=\"findings\">\n");
        for (run, fs) in groups {
            for f in *fs {
                finding_item(&mut out, f, *run, numbers);
            }
        }
        out.push_str("</ol>\n");
    }
    if let Some(n) = numbers.filter(|n| !n.list().is_empty()) {
        out.push_str("<h3>Caveats</h3>\n<p class=\"hint\">Numbered beside the findings and in the tables' caveats column.</p>\n<ol class=\"caveat-list\">\n");
        for (i, c) in n.list().iter().enumerate() {
            let _ = writeln!(out, "<li id=\"caveat-{}\">{}</li>", i + 1, esc(c));
        }
        out.push_str("</ol>\n");
    }
    out.push_str("</section>\n");
    out
}

/// The charts section: a figure per PNG, a chart element per panel (drawn by the script).
fn charts_html(specs: &[(&str, Value)]) -> String {
    let mut out = String::from(
        "<section id=\"charts\"><h2>Charts</h2>\n<noscript><p>The interactive charts need scripts; the same charts are the PNGs in charts/.</p></noscript>\n",
    );
    for (name, spec) in specs {
        let text = |k: &str| spec[k].as_str().unwrap_or_default().to_string();
        let cols = spec["cols"].as_u64().unwrap_or(1);
        let _ = write!(
            out,
            "<figure class=\"figure\" id=\"fig-{name}\"><h3>{}</h3><p class=\"sub\">{}</p><div class=\"panels\" style=\"--cols:{cols}\">",
            esc(&text("title")),
            esc(&text("subtitle"))
        );
        let panels = spec["panels"].as_array().map_or(0, Vec::len);
        for i in 0..panels {
            let _ = write!(
                out,
                "<div class=\"chart\" data-chart=\"{name}/{i}\" data-figure=\"{name}\" data-panel=\"{i}\"></div>"
            );
        }
        out.push_str("</div>");
        for note in spec["footer"].as_array().into_iter().flatten() {
            let _ = write!(
                out,
                "<p class=\"note\">{}</p>",
                esc(note.as_str().unwrap_or_default())
            );
        }
        out.push_str("</figure>\n");
    }
    out.push_str("</section>\n");
    out
}

/// The per-request timeline's section (a chart drawn by the script, and what it shows).
fn timeline_html(t: &Value) -> String {
    let total = t["total"].as_u64().unwrap_or(0);
    let drawn = t["drawn"].as_u64().unwrap_or(0);
    let every = t["every"].as_u64().unwrap_or(1);
    let said = if total == 0 {
        "No request was recorded (requests.jsonl is missing or empty).".to_string()
    } else if every > 1 {
        format!(
            "A sample: every {every}th request, {drawn} of {total} (all are drawn up to {}).",
            timeline::ALL_UP_TO
        )
    } else {
        format!("All {total} measured requests.")
    };
    format!(
        "<section id=\"timeline\"><h2>Requests over time</h2>\n<p class=\"sub\">Each request in a lane (a lane holds requests that never overlap): grey, waiting in servetop past its scheduled time; orange, time to first token; blue, decode; red, failed or stopped. {said}</p>\n<div class=\"chart timeline\" data-chart=\"requests\"></div>\n</section>\n"
    )
}

/// The page's head: the title and the styles.
fn head(title: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<style>\n{UPLOT_CSS}\n{REPORT_CSS}\n</style>\n</head>\n",
        esc(title)
    )
}

/// What a page holds, before it is written out.
struct Page {
    title: String,
    banner: Option<String>,
    intro: String,
    findings: String,
    specs: Vec<(&'static str, Value)>,
    timeline: Option<Value>,
    tables: String,
    results: Vec<(String, String)>,
    points: Value,
}

impl Page {
    fn html(&self) -> String {
        let mut out = head(&self.title);
        out.push_str("<body>\n<header>\n");
        let _ = writeln!(out, "<h1>{}</h1>", esc(&self.title));
        if let Some(b) = &self.banner {
            let _ = writeln!(out, "<p class=\"simulated\">{}</p>", esc(b));
        }
        out.push_str(&self.intro);
        out.push_str("<nav><a href=\"#findings\">Findings</a> · <a href=\"#charts\">Charts</a>");
        if self.timeline.is_some() {
            out.push_str(" · <a href=\"#timeline\">Requests over time</a>");
        }
        out.push_str(" · <a href=\"#tables\">Tables</a></nav>\n</header>\n<main>\n");
        out.push_str(&self.findings);
        out.push_str(&charts_html(&self.specs));
        if let Some(t) = &self.timeline {
            out.push_str(&timeline_html(t));
        }
        let _ = write!(
            out,
            "<section id=\"tables\"><h2>Tables</h2>\n{}</section>\n</main>\n<footer>Written by servetop {}. One file: scripts, styles and data are inline; it fetches nothing.</footer>\n",
            self.tables,
            env!("CARGO_PKG_VERSION")
        );
        for (i, (label, json)) in self.results.iter().enumerate() {
            let id = if i == 0 {
                " id=\"results\"".to_string()
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "<script type=\"application/json\"{id} class=\"run-results\" data-label=\"{}\">{json}</script>",
                esc(label)
            );
        }
        let figures: Vec<Value> = self
            .specs
            .iter()
            .map(|(name, spec)| json!({"name": name, "spec": spec}))
            .collect();
        let _ = writeln!(
            out,
            "<script type=\"application/json\" id=\"figures\">{}</script>",
            embedded(&figures)
        );
        let _ = writeln!(
            out,
            "<script type=\"application/json\" id=\"level-points\">{}</script>",
            embedded(&self.points)
        );
        if let Some(t) = &self.timeline {
            let _ = writeln!(
                out,
                "<script type=\"application/json\" id=\"timeline-data\">{}</script>",
                embedded(t)
            );
        }
        let _ = write!(
            out,
            "<script>\n{UPLOT_JS}\n</script>\n<script>\n{REPORT_JS}\n</script>\n</body>\n</html>\n"
        );
        out
    }
}

/// The simulated banner, when any run was simulated.
fn banner(runs: &[&RunSummary]) -> Option<String> {
    runs.iter().any(|s| s.simulated).then(|| {
        "SIMULATED SERVER — the numbers on this page come from servetop's built-in simulator, not from real hardware.".to_string()
    })
}

/// Each run's figure specs, drawn as the PNGs draw them.
fn specs(runs: &[ChartRun<'_>]) -> Vec<(&'static str, Value)> {
    figures(runs)
        .into_iter()
        .map(|(name, f)| (name, f.spec()))
        .collect()
}

/// One run's report.html, from its summary (credentials masked here), telemetry and requests.
pub fn run_page(run: &PageRun<'_>) -> String {
    let s = redacted(run.summary);
    let chart_runs = [ChartRun {
        label: run.label.clone(),
        summary: &s,
        telemetry: run.telemetry,
    }];
    let model = s.server.as_ref().map_or("?", |v| v.model.as_str());
    let page = Page {
        title: format!("servetop: {model}"),
        banner: banner(&[&s]),
        intro: format!(
            "<p class=\"sub\">{} · started {} on {} · {}</p>\n",
            esc(&run.label),
            esc(&s.started_at),
            esc(&s.host),
            esc(&s.config.lengths_label())
        ),
        findings: findings_html(&[(None, &s.findings)], Some(&CaveatNumbers::of(&s))),
        specs: specs(&chart_runs),
        timeline: Some(timeline::timeline(
            run.requests,
            &s,
            start_ms(&chart_runs[0]),
        )),
        tables: markdown::to_html(&summary_md(&s), &level_rows(&s), FINDINGS_HEADING),
        results: vec![(run.label.clone(), embedded(&s))],
        points: level_points(&[&s]),
    };
    page.html()
}

/// Several runs' report.html: their findings and the findings across them, the unlike-plan
/// warnings, the charts overlaid, and the comparison's summary.md (`md`).
pub fn comparison_page(
    runs: &[PageRun<'_>],
    across: &[Finding],
    unlike: &[String],
    md: &str,
) -> String {
    let summaries: Vec<RunSummary> = runs.iter().map(|r| redacted(r.summary)).collect();
    let refs: Vec<&RunSummary> = summaries.iter().collect();
    let chart_runs: Vec<ChartRun<'_>> = runs
        .iter()
        .zip(&summaries)
        .map(|(r, s)| ChartRun {
            label: r.label.clone(),
            summary: s,
            telemetry: r.telemetry,
        })
        .collect();
    let mut intro = String::from("<ul class=\"runs\">\n");
    for (r, s) in runs.iter().zip(&summaries) {
        let _ = writeln!(
            intro,
            "<li><strong>{}</strong>: {} · started {} on {}</li>",
            esc(&r.label),
            esc(&s.config.lengths_label()),
            esc(&s.started_at),
            esc(&s.host)
        );
    }
    intro.push_str("</ul>\n");
    if !unlike.is_empty() {
        intro.push_str("<div class=\"unlike\"><strong>Not like for like:</strong><ul>");
        for u in unlike {
            let _ = write!(intro, "<li>{}</li>", esc(u));
        }
        intro.push_str("</ul></div>\n");
    }
    let mut groups: Vec<(Option<&str>, &[Finding])> = vec![(Some("across the runs"), across)];
    for (r, s) in runs.iter().zip(&summaries) {
        groups.push((Some(r.label.as_str()), &s.findings));
    }
    let mut rows = LevelRows::default();
    for s in &summaries {
        let r = level_rows(s);
        rows.rows.extend(r.rows);
        rows.labels.extend(r.labels);
    }
    let page = Page {
        title: format!("servetop comparison: {} runs", runs.len()),
        banner: banner(&refs),
        intro,
        findings: findings_html(&groups, None),
        specs: specs(&chart_runs),
        timeline: None,
        tables: markdown::to_html(md, &rows, ""),
        results: runs
            .iter()
            .zip(&summaries)
            .map(|(r, s)| (r.label.clone(), embedded(s)))
            .collect(),
        points: level_points(&refs),
    };
    page.html()
}

/// Writes `page` as `dir/report.html`; returns its path.
pub fn write_page(dir: &Path, page: &str) -> Result<PathBuf, String> {
    let p = dir.join("report.html");
    write_atomic(&p, page.as_bytes()).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    Ok(p)
}
