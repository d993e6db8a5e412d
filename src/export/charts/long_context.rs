//! `long_context.png`: TTFT, prefill and decode speed against input length.

use super::figure::{Figure, figure_of};
use super::panel::{Line, Panel, XKind};
use super::title::Settings;
use super::{ChartRun, grouped, run_lines, stat};
use crate::metrics::curves;
use crate::summary::{LevelStatus, LevelSummary, RunSummary};

/// `long_context.png`, with skipped lengths marked and their reasons in the footer.
pub(super) fn draw(runs: &[ChartRun<'_>]) -> Figure {
    let k = |l: &LevelSummary| l.input_len as f64 / 1000.0;
    let ctx_lines = |name: &str, f: fn(&LevelSummary) -> Option<f64>| -> Vec<Line> {
        let points = |s: &RunSummary| grouped::means(&grouped::by_level(&s.long_context, k, f));
        let lines = run_lines(runs, name, points, false, 0);
        let levels = runs.iter().map(|r| r.summary.long_context.as_slice());
        grouped::with_errors(lines, levels, k, f)
    };
    let (marks, footer) = notes(runs);
    let empty = "no long-context length finished in this run".to_string();
    let panel = |title: &str, y: &str, name: &str, f: fn(&LevelSummary) -> Option<f64>| Panel {
        title: title.into(),
        x: XKind::ContextK,
        y_desc: y.into(),
        y_log_ok: false,
        y_top: None,
        lines: ctx_lines(name, f),
        marks: marks.clone(),
        limits: vec![],
        events: vec![],
        empty: empty.clone(),
    };
    figure_of(
        (
            "Long context: prefill and decode vs input length",
            Settings::Plan(settings),
        ),
        runs,
        vec![
            panel("Time to first token", "seconds", "TTFT", |l| {
                stat(l, curves::TTFT_MEAN_S)
            }),
            panel("Prefill speed", "input tok/s", "prefill", |l| {
                stat(l, curves::PREFILL_TOK_S)
            }),
            panel("Decode speed", "tok/s per request", "decode", |l| {
                stat(l, curves::DECODE_TOK_S)
            }),
        ],
        3,
        footer,
    )
}

/// The lengths' vertical marks and the footer's notes: skipped lengths (once, when skipped in
/// every `--repeat` run) and where servetop restarted the server with a larger context.
fn notes(runs: &[ChartRun<'_>]) -> (Vec<(f64, String)>, Vec<String>) {
    // A length skipped in every `--repeat` run is marked once.
    let mut skipped: Vec<&LevelSummary> = runs
        .iter()
        .flat_map(|r| r.summary.long_context.iter())
        .filter(|l| l.status == LevelStatus::Skipped)
        .collect();
    let mut seen = std::collections::HashSet::new();
    skipped.retain(|l| seen.insert((l.input_len, l.reason.clone())));
    let mut marks: Vec<(f64, String)> = skipped
        .iter()
        .map(|l| {
            (
                l.input_len as f64 / 1000.0,
                format!("{}K skipped", l.input_len / 1000),
            )
        })
        .collect();
    let mut footer: Vec<String> = skipped
        .iter()
        .map(|l| {
            format!(
                "{}K skipped: {}",
                l.input_len / 1000,
                l.reason.as_deref().unwrap_or("")
            )
        })
        .collect();
    // Where servetop restarted the server with a larger context (the first run's restarts).
    let restarts = runs[0].summary.first_after_restarts();
    for (l, ctx) in restarts.iter().filter(|(l, _)| l.input_len > 0) {
        let ctx = ctx.map_or("?".to_string(), |c| c.to_string());
        marks.push((l.input_len as f64 / 1000.0, format!("restart: {ctx} ctx")));
        footer.push(format!(
            "Server restarted before {}: context {ctx} from here on.",
            l.label()
        ));
    }
    (marks, footer)
}

/// The long-context plan for the subtitle: its lengths and output tokens, one request at a
/// time (not the sweep's lengths); none for a run without long-context lengths.
fn settings(s: &RunSummary) -> Option<String> {
    if s.long_context.is_empty() {
        return None;
    }
    let mut lengths: Vec<String> = Vec::new();
    for l in &s.long_context {
        let k = crate::fmt::fmt_tokens(l.input_len);
        // A length run several times (--repeat) once.
        if !lengths.contains(&k) {
            lengths.push(k);
        }
    }
    Some(format!(
        "{} in / {} out tokens, one request at a time",
        lengths.join(", "),
        s.config.long_context_output_len
    ))
}

#[cfg(test)]
mod tests {
    /// The subtitle names the long-context lengths and their output tokens, not the sweep's.
    #[test]
    fn the_subtitle_gives_the_long_context_plan() {
        let app = crate::tui::fixtures::finished_run();
        let s = &app.session.summary;
        assert!(!s.long_context.is_empty());
        let text = super::settings(s).unwrap();
        let first = crate::fmt::fmt_tokens(s.long_context[0].input_len);
        assert!(text.starts_with(&first), "{text}");
        assert!(
            text.contains(&format!(
                "in / {} out tokens, one request at a time",
                s.config.long_context_output_len
            )),
            "{text}"
        );
        assert!(!text.contains(&s.config.lengths_label()), "{text}");
    }

    #[test]
    fn a_restart_is_marked_at_the_first_length_it_measured() {
        let s = super::super::restarted_run();
        let first = s
            .long_context
            .iter()
            .find(|l| l.input_len > 16_384 && l.status == crate::summary::LevelStatus::Done)
            .expect("a length above 16K in the fixture");
        let runs = [super::ChartRun {
            label: "run".into(),
            summary: &s,
            telemetry: &[],
        }];
        let (marks, footer) = super::notes(&runs);
        let at = first.input_len as f64 / 1000.0;
        assert!(
            marks.contains(&(at, "restart: 131072 ctx".to_string())),
            "{marks:?}"
        );
        assert!(
            footer.contains(&format!(
                "Server restarted before {}: context 131072 from here on.",
                first.label()
            )),
            "{footer:?}"
        );
        // One restart, one mark: the later lengths on the same server are not marked.
        assert_eq!(
            marks.iter().filter(|m| m.1.starts_with("restart")).count(),
            1
        );
    }
}
