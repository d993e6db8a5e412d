//! The dashboard's tabs, named by keys (actions) and drawn by the tabs' renderers.

/// The dashboard's tabs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Sweep,
    LongContext,
    Telemetry,
    Log,
    Findings,
}

impl Tab {
    /// Every tab in order.
    pub const ALL: [Tab; 5] = [
        Tab::Sweep,
        Tab::LongContext,
        Tab::Telemetry,
        Tab::Log,
        Tab::Findings,
    ];

    /// The title in the tab bar.
    pub fn title(self) -> &'static str {
        match self {
            Tab::Sweep => "1 Sweep",
            Tab::LongContext => "2 Long context",
            Tab::Telemetry => "3 GPU & server",
            Tab::Log => "4 Log",
            Tab::Findings => "5 Findings",
        }
    }

    pub fn index(self) -> usize {
        Tab::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }

    /// The tab after this one (wrapping).
    #[must_use]
    pub fn next(self) -> Tab {
        Tab::ALL[(self.index() + 1) % Tab::ALL.len()]
    }

    /// The tab before this one (wrapping).
    #[must_use]
    pub fn prev(self) -> Tab {
        Tab::ALL[(self.index() + Tab::ALL.len() - 1) % Tab::ALL.len()]
    }
}
