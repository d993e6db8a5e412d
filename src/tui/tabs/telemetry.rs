//! GPU & server tab. Telemetry (NVML, DCGM, the engine's /metrics) is not sampled yet; the tab
//! says what will appear and what is known about the server now.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use crate::tui::app::App;
use crate::tui::theme::Theme;

/// Draws the tab.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let mut lines = vec![
        Line::styled(
            "No telemetry is sampled yet, so this tab is empty.",
            th.warn,
        ),
        Line::raw(""),
        Line::raw(
            "This tab will show each GPU's memory and utilization (NVML on this host, or a DCGM exporter elsewhere), power and temperature, and the server's own view from its /metrics: running and queued requests, KV-cache usage, prefix-cache hits and the speculative accept length the engine measures.",
        ),
        Line::raw(""),
    ];
    if let Some(sv) = &app.session.summary.server {
        lines.push(Line::styled("The server as detected:", th.title));
        lines.push(Line::raw(format!(
            "  engine        {}{}",
            sv.engine.name(),
            sv.engine_version
                .as_ref()
                .map(|v| format!(" {v}"))
                .unwrap_or_default()
        )));
        lines.push(Line::raw(format!("  model         {}", sv.model)));
        lines.push(Line::raw(format!("  URL           {}", sv.base_url)));
        lines.push(Line::raw(format!(
            "  context limit {}",
            sv.context_limit.map_or("not reported".into(), |n| format!(
                "{n} tokens ({})",
                sv.context_limit_source.as_deref().unwrap_or("?")
            ))
        )));
    }
    Paragraph::new(lines)
        .block(th.panel(" GPU & server "))
        .wrap(Wrap { trim: true })
        .render(area, buf);
}
