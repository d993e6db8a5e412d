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
        let th = Theme::new(self.no_color);
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
            .select(Tab::ALL.iter().position(|t| *t == self.tab))
            .highlight_style(th.current)
            .divider("│")
            .render(tabs_bar, buf);
        match self.tab {
            Tab::Sweep => tabs::sweep::render(self, body, buf, &th),
            Tab::LongContext => tabs::long_context::render(self, body, buf, &th),
            Tab::Telemetry => tabs::telemetry::render(self, body, buf, &th),
            Tab::Log => tabs::log::render(self, body, buf, &th),
            Tab::Findings => tabs::findings::render(self, body, buf, &th),
        }
        render_footer(self, footer, buf, &th);
        if self.show_help {
            render_help(area, buf, &th);
        }
        if self.confirm_quit {
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
    let right = format!(" {} │ {} ", clock(app.now), app.session.phase);
    let used: usize = spans
        .iter()
        .map(|s| s.content.chars().count())
        .sum::<usize>()
        + right.chars().count();
    let room = (area.width as usize).saturating_sub(used);
    let engine = engine.trim_end_matches(" (simulated)");
    // Drop whole parts (URL, then model) rather than cutting a word in half.
    let middle = [
        format!("{engine} · {model} · {url}"),
        format!("{engine} · {model}"),
        engine.to_string(),
    ]
    .into_iter()
    .find(|c| c.chars().count() <= room)
    .unwrap_or_default();
    spans.push(Span::styled(middle.clone(), th.accent));
    let pad = room.saturating_sub(middle.chars().count());
    spans.push(Span::raw(" ".repeat(pad)));
    spans.push(Span::styled(right, th.title));
    Line::from(spans).render(area, buf);
}

fn render_footer(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let keys = if area.width >= 100 {
        " Tab/←→ tabs · p pause · s skip level · e export · ? help · q quit "
    } else {
        " ←→ tabs p pause s skip e export ? help q quit "
    };
    let room = (area.width as usize).saturating_sub(keys.chars().count());
    let status = if let Some((msg, _)) = &app.flash {
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
    } else if app.paused {
        Span::styled(fit("PAUSED (p resumes)", room), th.warn)
    } else if let Some(fps) = app.frames_lowered {
        // The streams' reads come first on a busy core: say why the screen is slow.
        Span::styled(
            fit(
                &format!(
                    "{fps:.1} of {} fps: reading streams first",
                    crate::fmt::num(Some(app.frames.target))
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
        "q                quit (asks first while running); Ctrl-C quits at once",
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
