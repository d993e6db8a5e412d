//! The values of flags as clap takes them: lists, rates, counts, names, budgets and sizes, each
//! parsed into its type (the grammar itself is [`crate::grammar`]'s) with a one-line error that
//! says what was wrong.

use crate::grammar::{parse_count, parse_list, parse_pair, parse_percentiles, parse_rates};

/// A parsed LIST flag (one value on the command line, many levels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List(pub Vec<u64>);

pub(super) fn list(s: &str) -> Result<List, String> {
    parse_list(s).map(List)
}

/// `--lora-modules`: names, in the order given, each once (empty: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names(pub Vec<String>);

pub(super) fn names(s: &str) -> Result<Names, String> {
    let mut out: Vec<String> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if item.chars().any(char::is_whitespace) {
            return Err(format!(
                "'{item}' has a space: names are separated by commas"
            ));
        }
        if out.iter().any(|n| n == item) {
            return Err(format!("'{item}' is given twice"));
        }
        out.push(item.to_string());
    }
    Ok(Names(out))
}

/// `--thinking-budget`: reasoning-token budgets, in the order given (`0,256,1k`), each once;
/// 0 asks for no thinking at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budgets(pub Vec<u32>);

pub(super) fn budgets(s: &str) -> Result<Budgets, String> {
    let mut out: Vec<u32> = Vec::new();
    for item in s.split(',').map(str::trim) {
        let v = parse_count(item)
            .map_err(|e| format!("--thinking-budget: {e} (examples: 256, 0,1k)"))?;
        let v = u32::try_from(v).map_err(|_| {
            format!("--thinking-budget: {item} is more tokens than a request can hold")
        })?;
        if out.contains(&v) {
            return Err(format!("--thinking-budget '{s}' names {v} twice"));
        }
        out.push(v);
    }
    Ok(Budgets(out))
}

/// A parsed `--request-rate` (requests/s).
#[derive(Debug, Clone, PartialEq)]
pub struct Rates(pub Vec<f64>);

pub(super) fn rates(s: &str) -> Result<Rates, String> {
    parse_rates(s).map(Rates)
}

/// A parsed `--metric-percentiles` (in %, ascending).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Percentiles(pub Vec<f64>);

pub(super) fn percentiles(s: &str) -> Result<Percentiles, String> {
    parse_percentiles(s)
        .map(Percentiles)
        .map_err(|e| format!("--metric-percentiles: {e}"))
}

/// A parsed `--shapes` (input/output pairs in the order given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shapes(pub Vec<crate::workload::shapes::Shape>);

pub(super) fn shapes(s: &str) -> Result<Shapes, String> {
    crate::workload::shapes::Shape::parse_list(s).map(Shapes)
}

/// A parsed `--shape-mix` (shapes and weights in the order given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShapeMix(pub Vec<crate::workload::shapes::WeightedShape>);

pub(super) fn shape_mix(s: &str) -> Result<ShapeMix, String> {
    crate::workload::shapes::WeightedShape::parse_list(s).map(ShapeMix)
}

/// `--length-dist lognormal:S`: the σ of the log, above 0 and at most 2.
pub(super) fn length_dist(s: &str) -> Result<f64, String> {
    s.trim()
        .strip_prefix("lognormal:")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0 && *v <= 2.0)
        .ok_or_else(|| {
            format!(
                "'{s}' is not lognormal:S (S the spread, σ of the log, above 0 and at most 2, e.g. lognormal:0.5)"
            )
        })
}

/// A parsed `--content` (kinds in the order given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contents(pub Vec<crate::workload::content::ContentKind>);

pub(super) fn contents(s: &str) -> Result<Contents, String> {
    crate::workload::content::ContentKind::parse_list(s).map(Contents)
}

/// `--range-ratio`: a spread of 0 or more and below 1 (vLLM's bounds).
pub(super) fn range_ratio(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "'{s}' is not a spread from 0 to below 1 (0.5: lengths from half to one and a half times the planned ones)"
        )),
    }
}

pub(super) fn count(s: &str) -> Result<u64, String> {
    parse_count(s)
}

pub(super) fn count_u32(s: &str) -> Result<u32, String> {
    let v = parse_count(s)?;
    u32::try_from(v).map_err(|_| format!("'{s}' is too large"))
}

pub(super) fn parse_cells(s: &str) -> Result<(u16, u16), String> {
    parse_pair(s, 10..=1000, "columns and rows")
}

/// Parses a chart size like `1600x900`.
pub fn parse_size(s: &str) -> Result<(u32, u32), String> {
    parse_pair(s, 200..=8000, "width and height in pixels")
}
