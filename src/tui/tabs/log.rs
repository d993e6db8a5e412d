//! Log tab: the plan the run started with; failures by kind with their first message, skips, crashes and warnings; the servers
//! servetop started and the tail of their log; the run's configuration.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use crate::tui::app::App;
use crate::tui::theme::Theme;

/// Draws the tab.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let s = &app.session.summary;
    let events = event_lines(app, th);
    let cfg_lines: Vec<Line> = app
        .views
        .config_lines
        .iter()
        .map(|(k, v)| {
            Line::from(vec![
                Span::styled(format!("{k:<24}"), th.accent),
                Span::raw(v.as_str()),
            ])
        })
        .collect();
    let side = area.width >= 120;
    let (a, mut b) = if side {
        let [a, b] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)])
            .areas(area);
        (a, b)
    } else {
        let [a, b] =
            Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
        (a, b)
    };
    super::scrolled::render(
        "plan, failures, skips, warnings",
        events,
        app.ui.scrolled(crate::tui::tab::Tab::Log),
        a,
        buf,
        th,
    );
    if s.config.serve.is_some() {
        // The server servetop started: its newest output under the configuration.
        let [cfg, log] =
            Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(b);
        b = cfg;
        render_server_log(app, log, buf, th);
    }
    Paragraph::new(cfg_lines)
        .block(th.panel(" configuration "))
        .wrap(Wrap { trim: true })
        .render(b, buf);
}

/// The plan, then what happened: failures, cancellations, crashes, skips, warnings, the
/// servers servetop started, the run's error.
fn event_lines<'a>(app: &'a App, th: &Theme) -> Vec<Line<'a>> {
    let s = &app.session.summary;
    let mut events: Vec<Line> = s
        .plan
        .iter()
        .map(|p| Line::styled(p.clone(), th.accent))
        .collect();
    for l in s.levels() {
        let Some(st) = app.level_stats(l.index) else {
            continue;
        };
        for (kind, f) in &st.scalars.failures {
            events.push(Line::from(vec![
                Span::styled(format!("{:<9} {kind} ×{} ", l.label(), f.count), th.bad),
                Span::raw(format!("first: {}", f.first_message)),
            ]));
        }
        if st.scalars.cancelled > 0 {
            events.push(Line::styled(
                format!(
                    "{:<9} {} requests cancelled by the user",
                    l.label(),
                    st.scalars.cancelled
                ),
                th.warn,
            ));
        }
    }
    for l in s.levels() {
        if let Some(c) = &l.server_crash {
            events.push(Line::from(vec![
                Span::styled(format!("{:<9} crashed ", l.label()), th.bad),
                Span::raw(c.clone()),
            ]));
        }
        if let Some(r) = &l.reason {
            events.push(Line::from(vec![
                Span::styled(format!("{:<9} skipped ", l.label()), th.warn),
                Span::raw(r.clone()),
            ]));
        }
    }
    for w in &s.warnings {
        events.push(Line::from(vec![
            Span::styled("warning   ", th.warn),
            Span::raw(w.clone()),
        ]));
    }
    for (i, sv) in s.servers.iter().enumerate() {
        events.push(Line::from(vec![
            Span::styled(format!("server #{i}  "), th.accent),
            Span::raw(format!(
                "context {} · ready after {} · {}",
                sv.context_len.map_or("-".into(), |c| c.to_string()),
                sv.ready_s.map_or("-".into(), |r| format!("{r:.1} s")),
                sv.command
            )),
        ]));
    }
    if let Some(e) = &s.error {
        events.push(Line::from(vec![
            Span::styled("error     ", th.bad),
            Span::raw(e.clone()),
        ]));
    }
    if events.len() == s.plan.len() {
        events.push(Line::styled("no failures, skips or warnings so far", th.ok));
    }
    events
}

/// The last lines of server.log that fit, wrapped (not cut at the border), newest at the
/// bottom.
fn render_server_log(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let room = usize::from(area.height.saturating_sub(2));
    let width = area.width.saturating_sub(2);
    let log = &app.session.server_log;
    let lines: Vec<Line> = if log.is_empty() {
        vec![Line::styled("nothing new from the server yet", th.dim)]
    } else {
        // From the newest back, as many lines as their wrapped rows leave room for.
        let mut rows = 0;
        let mut newest: Vec<Line> = Vec::new();
        for l in log.iter().rev() {
            let line = Line::raw(l.clone());
            rows += super::scrolled::rows(std::slice::from_ref(&line), width);
            if rows > room && !newest.is_empty() {
                break;
            }
            newest.push(line);
        }
        newest.reverse();
        newest
    };
    Paragraph::new(lines)
        .block(th.panel(" server.log (newest last) "))
        .wrap(Wrap { trim: false })
        .render(area, buf);
}
