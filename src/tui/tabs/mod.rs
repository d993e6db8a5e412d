//! One module per tab; each draws its body from `&App`.

mod cells;
mod chart;
pub mod detail;
pub mod findings;
mod in_flight;
mod latency;
pub mod log;
pub mod long_context;
mod rates;
mod scrolled;
mod sessions;
pub mod sweep;
pub mod telemetry;
mod trace;
mod tune;
pub mod turns;

pub use chart::{LineChart, Series, curve_chart, line_chart};
