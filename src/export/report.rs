//! Reports from saved runs: charts, CSV tables and summary.md re-rendered from results.json
//! (and telemetry.jsonl), for one run or several overlaid — without re-running anything.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::charts::{ChartRun, render_all};
use super::csv::{
    long_context_csv, rates_csv, repeats_csv, session_list_csv, sessions_csv, sweep_csv, trace_csv,
    trace_timeline_csv, turns_csv,
};
use super::html;
use super::markdown::summary_md;
use super::write_atomic;
use crate::summary::RunSummary;
use crate::telemetry::TelemetryRecord;

/// Reads a run directory's results.json and telemetry.jsonl (lines that do not parse are skipped).
pub fn load_run(dir: &Path) -> Result<(RunSummary, Vec<TelemetryRecord>), String> {
    let path = dir.join("results.json");
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut summary: RunSummary = serde_json::from_slice(&bytes).map_err(|e| {
        if crate::summary::tune::record::is_tune(&bytes) {
            format!(
                "{} is a servetop tune: its summary.md has the leaderboard, and each configuration's run is in a sub-directory",
                dir.display()
            )
        } else {
            format!("{} is not a servetop results file: {e}", path.display())
        }
    })?;
    // Findings are the run's own numbers read again: a saved run gets today's.
    summary.refresh_findings();
    Ok((summary, load_telemetry(dir)))
}

/// A previous run to compare against (`--baseline`): a run directory (its results.json) or a
/// results.json itself. It must have at least one level with results.
pub fn load_baseline(path: &Path) -> Result<crate::summary::baseline::Baseline, String> {
    let file = if path.is_dir() {
        path.join("results.json")
    } else {
        path.to_path_buf()
    };
    let bytes = std::fs::read(&file).map_err(|e| {
        format!(
            "--baseline {}: cannot read {}: {e}",
            path.display(),
            file.display()
        )
    })?;
    let summary: RunSummary = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "--baseline {}: {} is not a servetop results file: {e}",
            path.display(),
            file.display()
        )
    })?;
    let b = summary.as_baseline(path.display().to_string());
    if b.levels.is_empty() {
        return Err(format!(
            "--baseline {}: that run has no level with results to compare against",
            path.display()
        ));
    }
    Ok(b)
}

/// A run directory's telemetry.jsonl (none when it is missing; lines that do not parse are
/// skipped).
pub fn load_telemetry(dir: &Path) -> Vec<TelemetryRecord> {
    std::fs::read_to_string(dir.join("telemetry.jsonl"))
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Charts and CSV for the run in `dir` from its summary in memory and the telemetry on file
/// (the GPU timeline needs every sample, which only telemetry.jsonl keeps); returns the files
/// written.
pub fn write_charts(
    dir: &Path,
    summary: &RunSummary,
    size: (u32, u32),
) -> Result<Vec<PathBuf>, String> {
    export_run(dir, summary, &load_telemetry(dir), size)
}

/// Charts into `dir/charts/` and the CSV files into `dir` (`rates.csv` when the run has rate
/// levels, `trace.csv` and `trace_timeline.csv` with a trace), for one finished (or stopped)
/// run.
pub fn export_run(
    dir: &Path,
    summary: &RunSummary,
    telemetry: &[TelemetryRecord],
    size: (u32, u32),
) -> Result<Vec<PathBuf>, String> {
    let runs = [ChartRun {
        label: run_label(summary, dir),
        summary,
        telemetry,
    }];
    let mut files = render_all(&runs, &dir.join("charts"), size)?;
    let labelled = [(runs[0].label.clone(), summary)];
    let mut tables = vec![
        ("sweep.csv", sweep_csv(&labelled)),
        ("long_context.csv", long_context_csv(&labelled)),
    ];
    if !summary.rates.is_empty() {
        tables.push(("rates.csv", rates_csv(&labelled)));
    }
    if !summary.multi_turn.is_empty() {
        tables.push(("turns.csv", turns_csv(&labelled)));
    }
    if !summary.sessions.is_empty() {
        tables.push(("sessions.csv", sessions_csv(&labelled)));
        tables.push(("session_list.csv", session_list_csv(&labelled)));
    }
    if !summary.traces.is_empty() {
        tables.push(("trace.csv", trace_csv(&labelled)));
        tables.push(("trace_timeline.csv", trace_timeline_csv(&labelled)));
    }
    if crate::export::markdown::any_repeats(summary) {
        tables.push(("repeats.csv", repeats_csv(&labelled)));
    }
    for (name, text) in tables {
        let p = dir.join(name);
        write_atomic(&p, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        files.push(p);
    }
    files.push(write_run_html(dir, dir, summary, telemetry)?);
    Ok(files)
}

/// `out/report.html` for the run in `dir`: its summary, telemetry and the requests of its
/// requests.jsonl.
pub fn write_run_html(
    dir: &Path,
    out: &Path,
    summary: &RunSummary,
    telemetry: &[TelemetryRecord],
) -> Result<PathBuf, String> {
    let requests = html::timeline::load_requests(dir);
    let page = html::run_page(&html::PageRun {
        label: run_label(summary, dir),
        summary,
        telemetry,
        requests: &requests,
    });
    html::write_page(out, &page)
}

/// A comparison's summary.md and CSV tables into `out`, for `labelled` runs read from `dirs`.
fn write_tables(
    out: &Path,
    dirs: &[PathBuf],
    labelled: &[(String, &RunSummary)],
) -> Result<Vec<PathBuf>, String> {
    let mut tables = vec![
        ("sweep.csv", sweep_csv(labelled)),
        ("long_context.csv", long_context_csv(labelled)),
        ("summary.md", comparison_md(dirs, labelled)),
    ];
    if labelled.iter().any(|(_, s)| !s.rates.is_empty()) {
        tables.push(("rates.csv", rates_csv(labelled)));
    }
    if labelled.iter().any(|(_, s)| !s.traces.is_empty()) {
        tables.push(("trace.csv", trace_csv(labelled)));
    }
    let mut files = Vec::new();
    for (name, text) in tables {
        let p = out.join(name);
        write_atomic(&p, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        files.push(p);
    }
    Ok(files)
}

/// A comparison's summary.md: the findings across the runs, the side-by-side table, then each
/// run's own summary.
fn comparison_md(dirs: &[PathBuf], labelled: &[(String, &RunSummary)]) -> String {
    let mut md = String::from("# servetop comparison\n\n");
    md.push_str(&super::markdown::across_section(
        &crate::summary::findings::compare::across(labelled),
    ));
    md.push_str(&super::markdown::side_by_side(labelled));
    for ((name, s), dir) in labelled.iter().zip(dirs) {
        let _ = writeln!(md, "## {name} ({})\n", dir.display());
        md.push_str(&summary_md(s).replacen("# servetop results", "### results", 1));
        md.push('\n');
    }
    md
}

/// A run's default label: its directory name.
pub fn run_label(_summary: &RunSummary, dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// What `servetop report` wrote, and what a person should know of the comparison.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// The files written.
    pub files: Vec<PathBuf>,
    /// Of several runs, that their plans differ, and where a later run's levels were not
    /// compared with the first run's and why ([`super::markdown::Against::lines`]); one line
    /// each.
    pub unlike: Vec<String>,
    /// Of several runs, whether any level of a later run was compared with the first run's.
    pub compared_any: bool,
}

/// `servetop report`: one directory re-renders in place; several overlay into `out`.
pub fn report(
    dirs: &[PathBuf],
    labels: &[String],
    out: Option<&Path>,
    size: (u32, u32),
) -> Result<Vec<PathBuf>, String> {
    report_runs(dirs, labels, out, Some(size), None).map(|r| r.files)
}

/// [`report`], with what the comparison of several runs could not compare; `size: None`
/// writes report.html alone (`--html`), nothing else rewritten; `gpus` (`--gpus`) is each
/// run's GPU count where servetop saw none.
pub fn report_runs(
    dirs: &[PathBuf],
    labels: &[String],
    out: Option<&Path>,
    size: Option<(u32, u32)>,
    gpus: Option<u32>,
) -> Result<Report, String> {
    let mut loaded: Vec<(RunSummary, Vec<TelemetryRecord>)> =
        dirs.iter().map(|d| load_run(d)).collect::<Result<_, _>>()?;
    if gpus.is_some() {
        for (s, _) in &mut loaded {
            s.config.gpus = gpus;
        }
    }
    if !labels.is_empty() && labels.len() != dirs.len() {
        return Err(format!(
            "{} --label values for {} run directories: give one per directory, or none",
            labels.len(),
            dirs.len()
        ));
    }
    let names: Vec<String> = dirs
        .iter()
        .zip(&loaded)
        .enumerate()
        .map(|(i, (d, (s, _)))| labels.get(i).cloned().unwrap_or_else(|| run_label(s, d)))
        .collect();
    if dirs.len() == 1 {
        let (s, t) = &loaded[0];
        let Some(size) = size else {
            let out = out.unwrap_or(&dirs[0]);
            create_dir(out)?;
            return Ok(Report {
                files: vec![write_run_html(&dirs[0], out, s, t)?],
                ..Report::default()
            });
        };
        if out.is_none() {
            let mut files = export_run(&dirs[0], s, t, size)?;
            let md = dirs[0].join("summary.md");
            write_atomic(&md, summary_md(s).as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", md.display()))?;
            files.push(md);
            return Ok(Report {
                files,
                ..Report::default()
            });
        }
    }
    let out = out.map_or_else(|| super::default_run_dir("compare"), Path::to_path_buf);
    create_dir(&out)?;
    // The charts name each run's plan in their title band; the tables' headings carry it
    // when the plans differ, so no run's figures pass for another's.
    let runs: Vec<ChartRun> = names
        .iter()
        .zip(&loaded)
        .map(|(n, (s, t))| ChartRun {
            label: n.clone(),
            summary: s,
            telemetry: t,
        })
        .collect();
    let plans: Vec<String> = loaded
        .iter()
        .map(|(s, _)| s.config.lengths_label())
        .collect();
    let unlike = plans.iter().any(|p| *p != plans[0]);
    let labelled: Vec<(String, &RunSummary)> = names
        .iter()
        .zip(&plans)
        .map(|(n, p)| {
            if unlike {
                format!("{n} · {p}")
            } else {
                n.clone()
            }
        })
        .zip(loaded.iter().map(|(s, _)| s))
        .collect();
    // Said on stderr by the runs' names alone (summary.md's headings carry their plans).
    let against = super::markdown::against_first(
        &names
            .iter()
            .cloned()
            .zip(loaded.iter().map(|(s, _)| s))
            .collect::<Vec<_>>(),
    );
    let said = unlike_lines(dirs, &plans, &against);
    let compared_any = against.iter().any(|a| !a.compared.is_empty());
    let mut files = Vec::new();
    if let Some(size) = size {
        files.extend(render_all(&runs, &out.join("charts"), size)?);
        files.extend(write_tables(&out, dirs, &labelled)?);
    }
    files.push(match loaded.as_slice() {
        [(s, t)] => write_run_html(&dirs[0], &out, s, t)?,
        _ => write_comparison_html(&out, dirs, &runs, &labelled, &said)?,
    });
    Ok(Report {
        files,
        unlike: said,
        compared_any,
    })
}

/// What a comparison cannot compare, a line each: that the runs' `plans` differ, and where a
/// later run's levels were not compared with the first run's and why.
fn unlike_lines(
    dirs: &[PathBuf],
    plans: &[String],
    against: &[super::markdown::Against],
) -> Vec<String> {
    let mut said = Vec::new();
    if plans.iter().any(|p| *p != plans[0]) {
        let each: Vec<String> = dirs
            .iter()
            .zip(plans)
            .map(|(d, p)| format!("{}: {p}", d.display()))
            .collect();
        said.push(format!(
            "these runs had different plans ({}); the comparison overlays unlike runs, with a Δ only where two levels sent the same requests",
            each.join("; ")
        ));
    }
    said.extend(against.iter().flat_map(super::markdown::Against::lines));
    said
}

/// `out/report.html` comparing `runs` (labelled for the tables as `labelled`), with what
/// could not be compared (`said`).
fn write_comparison_html(
    out: &Path,
    dirs: &[PathBuf],
    runs: &[ChartRun<'_>],
    labelled: &[(String, &RunSummary)],
    said: &[String],
) -> Result<PathBuf, String> {
    let page_runs: Vec<html::PageRun<'_>> = runs
        .iter()
        .map(|r| html::PageRun {
            label: r.label.clone(),
            summary: r.summary,
            telemetry: r.telemetry,
            requests: &[],
        })
        .collect();
    let page = html::comparison_page(
        &page_runs,
        &crate::summary::findings::compare::across(labelled),
        said,
        &comparison_md(dirs, labelled),
    );
    html::write_page(out, &page)
}

/// Creates `dir` (and its parents) for what a report writes there.
fn create_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}
