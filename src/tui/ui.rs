//! Drawing the whole screen from `&App`: header, tab bar, the tab's body, footer, pop-ups.
//! Pure: reads the app, formats, draws; never computes statistics or reads a clock.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Tabs, Widget, Wrap};

use super::app::{App, Tab};
use super::tabs;
use super::text::{clock, fit};
use super::theme::Theme;

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let th = Theme::new(self.ui.no_color);
        let [header, tabs_bar, body, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(1),
            Constraint::Length(1),
        ])
        .areas(area);
        render_header(self, header, buf, &th);
        let titles: Vec<&str> = Tab::ALL.iter().map(|t| t.title()).collect();
        Tabs::new(titles)
            .select(Tab::ALL.iter().position(|t| *t == self.ui.tab))
            .highlight_style(th.current)
            .divider("│")
            .render(tabs_bar, buf);
        match self.ui.tab {
            _ if self.views.detail.is_some() => {
                if let Some(v) = &self.views.detail {
                    tabs::detail::render(self, v, body, buf, &th);
                }
            }
            Tab::Sweep => tabs::sweep::render(self, body, buf, &th),
            Tab::LongContext => tabs::long_context::render(self, body, buf, &th),
            Tab::Telemetry => tabs::telemetry::render(self, body, buf, &th),
            Tab::Log => tabs::log::render(self, body, buf, &th),
            Tab::Findings => tabs::findings::render(self, body, buf, &th),
        }
        render_footer(self, footer, buf, &th);
        if self.ui.show_help {
            render_help(area, buf, &th);
        }
        if self.ui.confirm_quit {
            render_confirm(self, area, buf, &th);
        }
    }
}

fn render_header(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let s = &app.session.summary;
    let mut spans = vec![Span::styled(" servetop ", th.title)];
    if s.simulated {
        spans.push(Span::styled(" SIMULATED ", th.badge));
        spans.push(Span::raw(" "));
    }
    // A server-configuration sweep: which configuration this run measures.
    if let Some(label) = s
        .config
        .serve
        .as_ref()
        .map(crate::config::ServeConfig::params_label)
        .filter(|l| !l.is_empty())
    {
        spans.push(Span::styled(format!(" {label} "), th.badge));
        spans.push(Span::raw(" "));
    }
    // One shard of a run split over machines: each level here is its share.
    if let Some(sh) = s.config.shard {
        spans.push(Span::styled(format!(" shard {} ", sh.label()), th.badge));
        spans.push(Span::raw(" "));
    }
    let (engine, model, url) = s
        .server
        .as_ref()
        .map_or(("connecting", "", s.config.base_url.as_str()), |sv| {
            (sv.engine.name(), sv.model.as_str(), sv.base_url.as_str())
        });
    let engine = engine.trim_end_matches(" (simulated)");
    let badges: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let clock = format!(" {} │ ", clock(app.clocked.now));
    // Room for the middle and the phase (and the phase's trailing space).
    let room = (area.width as usize).saturating_sub(badges + clock.chars().count() + 1);
    let (middle, phase) = header_middle(engine, model, url, &app.session.phase, room);
    spans.push(Span::styled(middle.clone(), th.accent));
    let used = middle.chars().count() + phase.chars().count();
    spans.push(Span::raw(" ".repeat(room.saturating_sub(used))));
    spans.push(Span::styled(format!("{clock}{phase} "), th.title));
    Line::from(spans).render(area, buf);
}

/// The header's middle (engine, model, URL) and phase within `room` columns: whole parts are
/// dropped from the middle (URL, then model) rather than a word cut in half; the model stays
/// while the phase can be cut to a readable length instead (a restart's long phase).
fn header_middle(
    engine: &str,
    model: &str,
    url: &str,
    phase: &str,
    room: usize,
) -> (String, String) {
    /// The shortest a cut phase is left.
    const PHASE_MIN: usize = 16;
    let mids = [
        format!("{engine} · {model} · {url}"),
        format!("{engine} · {model}"),
        engine.to_string(),
    ];
    let phase_len = phase.chars().count();
    if let Some(m) = mids.iter().find(|m| m.chars().count() + phase_len <= room) {
        return (m.clone(), phase.to_string());
    }
    for m in &mids[1..] {
        let left = room.saturating_sub(m.chars().count());
        if left >= PHASE_MIN.min(phase_len) {
            return (m.clone(), super::text::fit(phase, left));
        }
    }
    (String::new(), super::text::fit(phase, room))
}

/// The footer's keys: for the run's own dashboard or a viewer, wide or narrow, with the
/// level keys in a tab with level tables.
fn footer_keys(app: &App, wide: bool) -> &'static str {
    let viewer = matches!(app.role, super::app::Role::Viewer { .. });
    // A viewer that cannot steer (a finished run, a TCP feed) has no X to offer.
    if let super::app::Role::Viewer { steers, ended } = app.role
        && (!steers || ended || app.run_over())
    {
        return match (app.tab_levels().is_empty(), wide) {
            (false, true) => " Tab/←→ tabs · ↑↓ Enter level · ? help · q leave ",
            (false, false) => " ←→ tabs ↑↓⏎ level ? help q leave ",
            (true, true) => " Tab/←→ tabs · ? help · q leave ",
            (true, false) => " ←→ tabs ? help q leave ",
        };
    }
    let levels = !app.tab_levels().is_empty();
    match (viewer, levels, wide) {
        (false, true, true) => {
            " Tab/←→ tabs · ↑↓ Enter level · p pause · s skip · e export · d detach · ? help · q quit "
        }
        (false, false, true) => {
            " Tab/←→ tabs · p pause · s skip level · e export · d detach · ? help · q quit "
        }
        (false, true, false) => " ←→ tabs ↑↓⏎ level p pause s skip e export ? help q quit ",
        (false, false, false) => " ←→ tabs p pause s skip e export ? help q quit ",
        (true, true, true) => " Tab/←→ tabs · ↑↓ Enter level · X stop run · ? help · q leave ",
        (true, false, true) => " Tab/←→ tabs · X stop run · ? help · q leave ",
        (true, true, false) => " ←→ tabs ↑↓⏎ level X stop ? help q leave ",
        (true, false, false) => " ←→ tabs X stop run ? help q leave ",
    }
}

fn render_footer(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let keys = footer_keys(app, area.width >= 100);
    let room = (area.width as usize).saturating_sub(keys.chars().count());
    let status = if let Some((msg, _)) = &app.ui.flash {
        Span::styled(fit(msg, room), th.warn)
    } else if app.run_over() {
        let dir = app
            .sink
            .dir()
            .map(|d| format!(" · results in {}", d.display()))
            .unwrap_or_default();
        // Drop the directory rather than cut it.
        let full = format!("{}{dir} · q exits", app.session.phase);
        let short = format!("{} · q exits", app.session.phase);
        let text = if full.chars().count() <= room {
            full
        } else {
            fit(&short, room)
        };
        Span::styled(text, th.ok)
    } else if app.ui.paused {
        Span::styled(fit("PAUSED (p resumes)", room), th.warn)
    } else if let Some(fps) = app.clocked.frames_lowered {
        // The streams' reads come first on a busy core: say why the screen is slow.
        Span::styled(
            fit(
                &format!(
                    "{fps:.1} of {} fps: reading streams first",
                    crate::fmt::num(Some(app.clocked.frames.target))
                ),
                room,
            ),
            th.warn,
        )
    } else {
        Span::raw("")
    };
    let pad = room.saturating_sub(status.content.chars().count());
    Line::from(vec![
        Span::styled(keys, th.dim),
        Span::raw(" ".repeat(pad)),
        status,
    ])
    .render(area, buf);
}

/// A centred rectangle of at most `w`×`h`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let [v] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(v);
    r
}

fn render_help(area: Rect, buf: &mut Buffer, th: &Theme) {
    let lines = [
        "Tab / ← →, 1-5   switch tabs",
        "↑ ↓ PgUp PgDn    scroll the Log and Findings tabs (Home / End: to an end)",
        "p                pause / resume sending (in-flight requests finish)",
        "s                skip the rest of the level in progress",
        "e                write results.json and summary.md now",
        "↑ ↓ then Enter   pick a level in a table, open its details (Esc closes)",
        "d                detach: the dashboard closes, the run goes on",
        "q                quit (asks first while running); Ctrl-C quits at once",
        "                 (servetop attach: q leaves the viewer, X stops the run)",
        "? / Esc          this help",
        "",
        "per-stream tok/s  one request's decode speed: (out − 1) / (E2E − TTFT)",
        "ITL               chunk gap split evenly over the chunk's tokens",
        "accept            mean tokens per chunk after the first (client view)",
        "TTFT              includes waiting in the server's queue",
        "numbers in ms unless a column says otherwise",
    ];
    let r = centered(area, 78, lines.len() as u16 + 2);
    Clear.render(r, buf);
    Paragraph::new(lines.iter().map(|l| Line::raw(*l)).collect::<Vec<_>>())
        .block(th.panel(" help "))
        .wrap(Wrap { trim: false })
        .render(r, buf);
}

fn render_confirm(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let grace = app.session.summary.config.grace_s;
    let text = vec![
        Line::styled("Stop the run?", th.title),
        Line::raw(format!(
            "In-flight requests get {grace:.0} s to finish; all results are saved."
        )),
        Line::raw(""),
        Line::styled("y / q: stop    n / Esc: keep running", th.accent),
    ];
    let r = centered(area, 64, 6);
    Clear.render(r, buf);
    Paragraph::new(text)
        .block(Block::default().borders(Borders::ALL).border_style(th.warn))
        .wrap(Wrap { trim: true })
        .render(r, buf);
}

#[cfg(test)]
mod tests {
    use super::header_middle;

    /// At 80 columns a restart's phase is cut, not the model (the header lost the model name
    /// during a restart); a short phase leaves room for the URL when there is some.
    #[test]
    fn the_model_stays_and_a_long_phase_is_cut() {
        let phase = "restarting server with context 131072 for 100K · 12 s";
        let (m, p) = header_middle(
            "SGLang 0.5.2",
            "Qwen/Qwen3.5-27B",
            "http://127.0.0.1:30000",
            phase,
            60,
        );
        assert_eq!(m, "SGLang 0.5.2 · Qwen/Qwen3.5-27B");
        assert_eq!(p.chars().count(), 60 - m.chars().count());
        assert!(
            p.starts_with("restarting server") && p.ends_with('…'),
            "{p}"
        );
        let (m, p) = header_middle(
            "SGLang 0.5.2",
            "Qwen/Qwen3.5-27B",
            "http://127.0.0.1:30000",
            "running C=8",
            80,
        );
        assert_eq!(
            m,
            "SGLang 0.5.2 · Qwen/Qwen3.5-27B · http://127.0.0.1:30000"
        );
        assert_eq!(p, "running C=8");
        // Too narrow for the model and a readable phase: the engine alone.
        let (m, _) = header_middle("SGLang 0.5.2", "Qwen/Qwen3.5-27B", "http://x", phase, 36);
        assert_eq!(m, "SGLang 0.5.2");
    }
}
