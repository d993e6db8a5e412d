//! The dashboard drawn: every tab at 80x24 and 160x48 from the fixtures, as snapshots, and
//! what the drawing must never do (cut a title, panic on a tiny terminal).

use std::sync::atomic::{AtomicBool, Ordering};

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::action::Action;
use super::app::{App, Tab};
use super::fixtures;

fn draw(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| f.render_widget(app, f.area())).unwrap();
    t.backend().to_string()
}

fn snap(name: &str, app: &mut App, tab: Tab) {
    app.ui.tab = tab;
    for (w, h) in [(80, 24), (160, 48)] {
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), draw(app, w, h));
    }
}

/// A level the server was away from says so in its status cell, at either size; the
/// column widens for it only then.
#[test]
fn a_level_with_an_outage_is_marked_in_the_level_table() {
    let mut app = fixtures::finished_run();
    app.ui.tab = Tab::Sweep;
    assert!(!draw(&app, 160, 48).contains("outage"));
    app.session.summary.sweep[1]
        .stats
        .as_mut()
        .unwrap()
        .scalars
        .outage_s = 12.4;
    for (w, h) in [(80, 24), (160, 48)] {
        let screen = draw(&app, w, h);
        let rows: Vec<&str> = screen.lines().filter(|l| l.contains("outage")).collect();
        assert_eq!(rows.len(), 1, "{w}x{h}:\n{screen}");
        assert!(rows[0].contains("outage 12 s"), "{w}x{h}: {}", rows[0]);
    }
}

/// No panel title is cut at 80x24 (a word cut against the corner, `…from the pr┐`), in
/// any tab of any fixture: titles drop their least needed parts first.
#[test]
fn no_panel_title_is_cut_at_80x24() {
    let apps = vec![
        ("mid sweep", fixtures::mid_sweep(vec![1, 4, 8, 16, 64, 100])),
        ("finished", fixtures::finished_run()),
        (
            "baseline",
            fixtures::with_baseline(fixtures::finished_run()),
        ),
        ("long context", fixtures::long_context_in_flight(true)),
        ("telemetry", fixtures::with_telemetry(8)),
        ("rates", fixtures::mid_rates()),
        ("search", fixtures::mid_search()),
        ("tune", fixtures::mid_tune()),
        ("chats", fixtures::finished_chats()),
        ("trace", fixtures::mid_trace()),
        ("twins", fixtures::finished_twins()),
        ("budgets", fixtures::mid_budgets()),
        ("sessions", fixtures::mid_sessions()),
    ];
    for (name, mut app) in apps {
        for tab in Tab::ALL {
            app.ui.tab = tab;
            for line in draw(&app, 80, 24).lines() {
                let cut = line
                    .chars()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| w[0].is_alphanumeric() && w[1] == '┐');
                assert!(!cut, "{name}, {tab:?}: a title is cut: {line}");
            }
        }
    }
}

#[test]
fn sweep_tab_replaying_a_trace() {
    snap("trace_mid", &mut fixtures::mid_trace(), Tab::Sweep);
}

#[test]
fn sweep_tab_mid_run() {
    snap(
        "sweep_mid",
        &mut fixtures::mid_sweep(vec![1, 4, 8, 16, 64, 100]),
        Tab::Sweep,
    );
}

#[test]
fn sweep_tab_with_rate_levels_mid_run() {
    snap("rates_mid", &mut fixtures::mid_rates(), Tab::Sweep);
}

#[test]
fn sweep_tab_slo_search_mid_run() {
    snap("search_mid", &mut fixtures::mid_search(), Tab::Sweep);
}

/// A tune's configuration: the tune's configurations above its levels, this one's search
/// bracket live in its row.
#[test]
fn sweep_tab_tune_mid_search() {
    snap("tune_mid", &mut fixtures::mid_tune(), Tab::Sweep);
}

#[test]
fn sweep_tab_rate_levels_only() {
    snap(
        "rates_only_finished",
        &mut fixtures::finished_rates_only(),
        Tab::Sweep,
    );
}

/// The rows of `text` holding `what`, top down.
fn rows_with(text: &str, what: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(what))
        .map(|(i, _)| i)
        .collect()
}

/// With `--response-format` each sweep chart draws a curve per twin, named under it by its
/// pass (`⠤ plain  • json`), each holding its own twin's levels: never one curve through
/// both. The table lists the plain levels (the headline), then the twins.
#[test]
fn sweep_tab_with_structured_twins() {
    let mut app = fixtures::finished_twins();
    let s = &app.session.summary;
    for curves in [&app.views.sweep.aggregate, &app.views.sweep.per_stream] {
        let labels: Vec<&str> = curves.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["plain", "json"]);
    }
    for (c, json) in app.views.sweep.aggregate.iter().zip([false, true]) {
        let own: Vec<(f64, f64)> = s
            .sweep
            .iter()
            .filter(|l| l.response_format.is_some() == json)
            .map(|l| {
                let st = l.stats.as_ref().unwrap();
                (
                    f64::from(l.concurrency).log2(),
                    st.scalars.output_throughput,
                )
            })
            .collect();
        assert_eq!(c.points, own, "{}", c.label);
        assert_eq!(c.points.len(), 6, "one point a concurrency");
    }
    // The grammar's cost: the twin's curve lies under the plain one at every level.
    let [plain, json] = [0, 1].map(|k| &app.views.sweep.aggregate[k].points);
    assert!(plain.iter().zip(json).all(|(p, j)| j.1 < p.1));
    snap("twins_finished", &mut app, Tab::Sweep);
    for (w, h) in [(80, 24), (160, 48)] {
        let text = draw(&app, w, h);
        let legends = rows_with(&text, "⠤ plain  • json");
        // One legend a chart: out tok/s; at 160 columns per-stream and TTFT p50 too.
        let want = if w < 120 { 1 } else { 3 };
        assert_eq!(legends.len(), 1, "{text}");
        assert_eq!(
            text.lines()
                .nth(legends[0])
                .unwrap()
                .matches("⠤ plain")
                .count(),
            want,
            "{text}"
        );
    }
    let text = draw(&app, 160, 48);
    let (last_plain, first_json) = (
        rows_with(&text, "│C=100 ")[0],
        rows_with(&text, "│C=1 · json")[0],
    );
    assert!(last_plain < first_json, "{text}");
}

/// The long-context tab of a run with `--response-format`: a curve per twin on each chart,
/// named under it; the table names each length's pass (`8K · json`), plain lengths first.
#[test]
fn long_context_tab_with_structured_twins() {
    let mut app = fixtures::finished_twins();
    let labels: Vec<&str> = app
        .views
        .long
        .prefill
        .iter()
        .map(|c| c.label.as_str())
        .collect();
    assert_eq!(labels, ["plain", "json"]);
    assert!(app.views.long.decode.iter().all(|c| c.points.len() == 2));
    snap("twins_long_context", &mut app, Tab::LongContext);
    let text = draw(&app, 160, 48);
    assert!(text.contains("⠤ plain  • json"), "{text}");
    let (plain, json) = (rows_with(&text, "│16K  "), rows_with(&text, "│8K · json"));
    assert!(
        plain.len() == 1 && json.len() == 1 && plain[0] < json[0],
        "{text}"
    );
}

/// With two thinking budgets the same: a curve per budget named by its pass (`think 16`,
/// `think 64`), the first budget's the headline; mid-run, the level in progress is a point
/// of its own budget's curve, apart from the line.
#[test]
fn sweep_tab_with_two_thinking_budgets() {
    let mut app = fixtures::mid_budgets();
    let v = &app.views.sweep;
    let labels: Vec<&str> = v.aggregate.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["think 16", "think 64"]);
    assert_eq!(v.aggregate[0].points.len(), 4);
    assert!(v.aggregate[0].running.is_none());
    // Budget 64: C=1 and C=4 done, C=8 running (at log2 8 = 3), C=16 waiting.
    assert_eq!(v.aggregate[1].points.len(), 2);
    assert_eq!(v.aggregate[1].running.map(|p| p.0), Some(3.0));
    snap("budgets_mid", &mut app, Tab::Sweep);
    for (w, h) in [(80, 24), (160, 48)] {
        let text = draw(&app, w, h);
        assert!(text.contains("⠤ think 16  • think 64"), "{text}");
        // The level in progress is named with its pass over its histogram (and its live rate).
        assert!(text.contains("┌ TTFT ms · C=8 (think 64) ─"), "{text}");
    }
    assert!(draw(&app, 160, 48).contains("┌ out tok/s · C=8 (think 64) now 204 ─"));
    // The GPU charts' level marks name the pass too.
    let marks: Vec<&str> = app
        .clocked
        .telemetry
        .level_marks
        .iter()
        .map(|m| m.1.as_str())
        .collect();
    assert_eq!(marks.last(), Some(&"C=8 (think 64)"), "{marks:?}");
}

#[test]
fn sweep_tab_finished() {
    snap("sweep_finished", &mut fixtures::finished_run(), Tab::Sweep);
}

#[test]
fn long_context_tab() {
    snap(
        "long_context",
        &mut fixtures::finished_run(),
        Tab::LongContext,
    );
}

#[test]
fn a_baseline_draws_dotted_curves_and_delta_columns() {
    let finished = fixtures::finished_run();
    snap(
        "baseline_finished",
        &mut fixtures::with_baseline(finished),
        Tab::Sweep,
    );
    let mid = fixtures::mid_sweep(vec![1, 4, 8, 16, 64, 100]);
    snap(
        "baseline_mid",
        &mut fixtures::with_baseline(mid),
        Tab::Sweep,
    );
    snap(
        "baseline_long_context",
        &mut fixtures::with_baseline(fixtures::finished_run()),
        Tab::LongContext,
    );
}

/// The levels from C=16 up regress against the baseline beyond its 10 % limit: what
/// summary.md and the exit code read.
#[test]
fn a_baseline_regression_is_named_level_by_level() {
    let app = fixtures::with_baseline(fixtures::finished_run());
    let s = &app.session.summary;
    insta::assert_snapshot!(
        "baseline_regressions",
        format!(
            "{}\n{}",
            crate::export::markdown::baseline_table(s),
            s.regressions().join("\n")
        )
    );
    assert_eq!(s.regressions().len(), 3, "C=16, C=64, C=100");
}

#[test]
fn a_length_servetop_restarts_its_server_for_is_not_called_too_long() {
    let mut app = fixtures::long_context_in_flight(false);
    app.ui.tab = Tab::LongContext;
    // A server of 10K: the lengths after the running 8K do not fit it.
    app.session.summary.server.as_mut().unwrap().context_limit = Some(10_000);
    let before = draw(&app, 160, 48);
    assert!(before.contains("too long"), "{before}");
    app.session.summary.config.serve = Some(crate::config::ServeConfig {
        command: "vllm serve M --port {port} --max-model-len {context_len}".into(),
        context_len: Some(32768),
        context_steps: Vec::new(),
        timeout_s: 600.0,
        restart_on_crash: false,
        params: Vec::new(),
    });
    let after = draw(&app, 160, 48);
    assert!(!after.contains("too long"), "{after}");
    assert!(after.contains("│16K      restarts "), "{after}");
}

#[test]
fn long_context_request_in_flight() {
    snap(
        "long_context_prefilling",
        &mut fixtures::long_context_in_flight(false),
        Tab::LongContext,
    );
    snap(
        "long_context_decoding",
        &mut fixtures::long_context_in_flight(true),
        Tab::LongContext,
    );
}

/// After a restart for a length that needed more context: the restart named with its
/// context and first length, the lengths still to come waiting for restarts of their own,
/// none called too long.
#[test]
fn long_context_after_a_server_restart() {
    let mut app = fixtures::long_context_restarted();
    snap("long_context_restarted", &mut app, Tab::LongContext);
    let text = draw(&app, 80, 24);
    assert!(
        text.contains("server restarted with context 32768 for 30K ctx"),
        "{text}"
    );
    assert!(text.contains("│60K      restarts"), "{text}");
    assert!(
        text.contains(
            "┌ 30K ctx in flight · request 1 of 1 · server restarted with context 32768 ─"
        ),
        "{text}"
    );
    assert!(!text.contains("too long"), "{text}");
}

#[test]
fn sweep_tab_with_sessions() {
    snap("sessions", &mut fixtures::mid_sessions(), Tab::Sweep);
}

#[test]
fn long_context_tab_with_multi_turn_chats() {
    snap(
        "multi_turn",
        &mut fixtures::finished_chats(),
        Tab::LongContext,
    );
}

#[test]
fn telemetry_tab_with_0_1_2_8_gpus() {
    for n in [0, 1, 2, 8] {
        snap(
            &format!("telemetry_{n}gpu"),
            &mut fixtures::with_telemetry(n),
            Tab::Telemetry,
        );
    }
}

#[test]
fn findings_tab() {
    let mut app = fixtures::finished_run();
    insta::assert_snapshot!(
        "findings_empty_80x24",
        draw(
            &{
                let mut a = fixtures::mid_sweep(vec![1, 4, 8]);
                a.ui.tab = Tab::Findings;
                a
            },
            80,
            24
        )
    );
    snap("findings", &mut app, Tab::Findings);
}

#[test]
fn log_tab() {
    snap("log", &mut fixtures::finished_run(), Tab::Log);
}

#[test]
fn help_and_quit_question() {
    let mut app = fixtures::mid_sweep(vec![1, 4, 8]);
    app.handle(Action::ToggleHelp);
    insta::assert_snapshot!("help_80x24", draw(&app, 80, 24));
    app.handle(Action::Cancel);
    app.handle(Action::Quit);
    insta::assert_snapshot!("quit_question_80x24", draw(&app, 80, 24));
}

#[test]
fn running_level_row_is_highlighted() {
    let app = fixtures::mid_sweep(vec![1, 4, 8]);
    let mut t = Terminal::new(TestBackend::new(160, 48)).unwrap();
    t.draw(|f| f.render_widget(&app, f.area())).unwrap();
    let buf = t.backend().buffer();
    let row = (0..48u16)
        .find(|y| {
            let line: String = (0..160u16).map(|x| buf[(x, *y)].symbol()).collect();
            line.contains("│C=8 ") && line.contains("running")
        })
        .expect("a row for the running level");
    assert!(
        buf[(2, row)]
            .modifier
            .contains(ratatui::style::Modifier::REVERSED)
    );
}

#[test]
fn no_cell_is_cut_mid_word_at_120_columns() {
    let app = fixtures::finished_run();
    let screen = draw(&app, 120, 40);
    for cut in ["runnin ", "out to ", "p50/90/9 "] {
        assert!(!screen.contains(cut), "{cut:?} in\n{screen}");
    }
}

/// ↑↓ pick a level in the tables, Enter opens its details in place of the tab (its
/// figures, TTFT and ITL histograms, output tokens over time, failures), ↑↓ walk the
/// levels while open, Esc closes them and then lets the level go.
#[test]
fn level_details() {
    let mut app = fixtures::finished_run();
    app.ui.tab = Tab::Sweep;
    let levels = app.tab_levels();
    app.handle(Action::Scroll(1));
    assert_eq!(
        app.ui.selected,
        Some(levels[0]),
        "nothing picked: ↓ picks the first"
    );
    app.handle(Action::Scroll(2));
    app.handle(Action::Open);
    let v = app.views.detail.clone().expect("details open");
    assert_eq!(v.index, levels[2]);
    assert!(v.ttft.is_some() && v.itl.is_some() && !v.tokens_per_s.is_empty());
    for (w, h) in [(80, 24), (160, 48)] {
        insta::assert_snapshot!(format!("level_detail_{w}x{h}"), draw(&app, w, h));
    }
    app.handle(Action::Scroll(i32::MAX));
    assert_eq!(
        app.views.detail.as_ref().map(|v| v.index),
        levels.last().copied(),
        "End walks to the last level, details open"
    );
    app.handle(Action::Cancel);
    assert!(app.views.detail.is_none());
    assert_eq!(app.ui.selected, levels.last().copied());
    app.handle(Action::Cancel);
    assert_eq!(app.ui.selected, None);
    // A level picked is let go with its tab.
    app.handle(Action::Scroll(-1));
    app.handle(Action::Open);
    app.handle(Action::NextTab);
    assert!(app.views.detail.is_none() && app.ui.selected.is_none());
}

/// The running level's details while it runs: its figures so far.
#[test]
fn level_details_of_the_running_level() {
    let mut app = fixtures::mid_sweep(vec![1, 4, 8]);
    app.handle(Action::Scroll(1));
    assert_eq!(app.ui.selected, app.session.current, "↓ first picks it");
    app.handle(Action::Open);
    let v = app.views.detail.clone().expect("details open");
    assert_eq!(Some(v.index), app.session.current);
    insta::assert_snapshot!("level_detail_running_80x24", draw(&app, 80, 24));
}

/// A viewer's footer says how to leave it and how to stop the run.
#[test]
fn a_viewer_says_q_leaves_and_x_stops() {
    let mut app = fixtures::mid_sweep(vec![1, 4, 8]);
    app.role = super::app::Role::Viewer {
        steers: true,
        ended: false,
    };
    insta::assert_snapshot!("viewer_80x24", draw(&app, 80, 24));
    app.handle(Action::Quit);
    assert!(app.ui.exit, "q leaves a viewer at once");
    let mut app = fixtures::mid_sweep(vec![1, 4, 8]);
    app.role = super::app::Role::Viewer {
        steers: true,
        ended: false,
    };
    assert_eq!(app.handle(Action::StopRun), None);
    assert!(app.ui.confirm_quit, "X asks first");
    assert_eq!(
        app.handle(Action::Confirm),
        Some(super::app::Effect::Cancel)
    );
    assert!(!app.ui.exit, "the viewer stays to watch the run stop");
    // A finished run browsed cannot be stopped: no X offered, X says why.
    let mut app = fixtures::finished_run();
    app.role = super::app::Role::Viewer {
        steers: false,
        ended: true,
    };
    let screen = draw(&app, 80, 24);
    assert!(
        screen.contains("q leave") && !screen.contains("X stop"),
        "{screen}"
    );
    assert_eq!(app.handle(Action::StopRun), None);
    assert!(!app.ui.confirm_quit);
}

#[test]
fn tiny_terminal_does_not_panic() {
    let app = fixtures::finished_run();
    for (w, h) in [(1, 1), (20, 5), (40, 10), (79, 23)] {
        let _ = draw(&app, w, h);
    }
}

#[test]
fn panic_hook_restores_before_the_message() {
    static RESTORED: AtomicBool = AtomicBool::new(false);
    super::install_panic_hook(|| RESTORED.store(true, Ordering::SeqCst));
    let r = std::panic::catch_unwind(|| panic!("boom"));
    assert!(r.is_err());
    assert!(RESTORED.load(Ordering::SeqCst));
    let _ = std::panic::take_hook();
}
