//! A figure as data for the report page's interactive charts (report.html): each panel's axes,
//! lines, marks and limits, exactly as the PNG draws them; the page's script only draws.

use super::figure::Figure;
use serde_json::{Value, json};

use super::panel::{Line, Panel, XKind, log_y, x_desc};

/// The name the page knows an x axis by.
fn x_name(x: XKind) -> &'static str {
    match x {
        XKind::Concurrency => "concurrency",
        XKind::ContextK => "context_k",
        XKind::Seconds => "seconds",
        XKind::TraceSeconds => "trace_seconds",
        XKind::Rate => "rate",
        XKind::Turn => "turn",
        XKind::PerUser => "per_user",
        XKind::Wait => "wait",
    }
}

/// `#rrggbb`.
fn hex(c: plotters::style::RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// A line's points with both coordinates finite (JSON holds no NaN; the PNG skips them too).
fn finite(points: &[(f64, f64)]) -> Vec<[f64; 2]> {
    points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|&(x, y)| [x, y])
        .collect()
}

fn line(l: &Line) -> Value {
    let errors: Vec<[f64; 3]> = l
        .errors
        .iter()
        .filter(|(x, lo, hi)| x.is_finite() && lo.is_finite() && hi.is_finite())
        .map(|&(x, lo, hi)| [x, lo, hi])
        .collect();
    json!({
        "name": l.name,
        "color": hex(l.color),
        "dashed": l.dashed,
        "points": finite(&l.points),
        "errors": errors,
    })
}

fn marks(m: &[(f64, String)]) -> Value {
    m.iter()
        .filter(|(v, _)| v.is_finite())
        .map(|(v, label)| json!([v, label]))
        .collect()
}

fn panel(p: &Panel) -> Value {
    json!({
        "title": p.title,
        "x": x_name(p.x),
        "x_label": x_desc(p.x),
        "y_label": p.y_desc,
        "y_log": log_y(p),
        "y_log_ok": p.y_log_ok,
        "y_top": p.y_top,
        "lines": p.lines.iter().map(line).collect::<Vec<_>>(),
        "marks": marks(&p.marks),
        "limits": marks(&p.limits),
        "events": marks(&p.events),
        "empty": p.empty,
    })
}

impl Figure {
    /// The figure as the report page draws it: title, subtitle, columns, footer and panels.
    pub fn spec(&self) -> Value {
        json!({
            "title": self.title,
            "subtitle": self.subtitle,
            "cols": self.cols,
            "footer": self.footer,
            "panels": self.panels.iter().map(panel).collect::<Vec<_>>(),
        })
    }
}
