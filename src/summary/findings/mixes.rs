//! What a level's mix of requests cost, within the level: each LoRA adapter against the others
//! (`--lora-modules`), each image size against the others (`--images`). Each compares the
//! requests of one level, so load and lengths are alike but for what the mix deals; where the
//! mix dealt unlike prompt lengths too, the finding says so (docs/metrics.md "Findings").

use std::fmt::Write;

use super::words::{count, ms_text, num, pct_text};
use super::{FEW_REQUESTS, Finding, INPUT_CONFOUND, Strength, measured};
use crate::summary::{LevelSummary, RunSummary};
use crate::workload::LevelKind;

/// The level a mix is compared at: the least loaded sweep level (then rate level) where at
/// least two of its parts completed requests.
fn level_with(s: &RunSummary, parts: impl Fn(&LevelSummary) -> usize) -> Option<&LevelSummary> {
    let mut levels: Vec<&LevelSummary> = s
        .sweep
        .iter()
        .chain(&s.rates)
        .filter(|l| measured(l) && parts(l) >= 2)
        .collect();
    levels.sort_by(|a, b| {
        (a.kind == LevelKind::Rate, a.concurrency, a.request_rate())
            .partial_cmp(&(b.kind == LevelKind::Rate, b.concurrency, b.request_rate()))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    levels.first().copied()
}

/// Why a part of a mix (an adapter, an image size) is thin evidence at `l`: it completed fewer
/// than [`FEW_REQUESTS`].
fn few(what: &str, completed: u64, l: &LevelSummary) -> Option<String> {
    (completed < FEW_REQUESTS).then(|| {
        format!(
            "{what} rests on {} at {}",
            count(completed, "completed request"),
            l.label()
        )
    })
}

/// The spread of `values` (largest over smallest − 1), with the two names, when it is over
/// `share`.
fn spread<'a>(values: &[(&'a str, f64)], share: f64) -> Option<(&'a str, f64, &'a str, f64)> {
    let lo = values
        .iter()
        .filter(|v| v.1 > 0.0)
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let hi = values.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    (hi.1 / lo.1 - 1.0 > share).then_some((lo.0, lo.1, hi.0, hi.1))
}

/// Each adapter's first token and per-token time at one level, the slowest against the
/// fastest.
pub(super) fn lora(s: &RunSummary) -> Option<Finding> {
    let completed = |l: &LevelSummary| {
        l.stats.as_ref().map_or(0, |st| {
            st.scalars.lora.values().filter(|a| a.completed > 0).count()
        })
    };
    let l = level_with(s, completed)?;
    let adapters = &l.stats.as_ref()?.scalars.lora;
    let mut f = Finding::new("lora", String::new(), &[l]);
    let mut parts = Vec::new();
    let mut ttfts: Vec<(&str, f64)> = Vec::new();
    let mut inputs: Vec<(&str, f64)> = Vec::new();
    for (name, a) in adapters.iter().filter(|(_, a)| a.completed > 0) {
        parts.push(format!(
            "{name} {} / {} ({}, {} prompt tokens)",
            a.median_ttft_ms.map_or("-".into(), ms_text),
            a.median_tpot_ms.map_or("-".into(), ms_text),
            count(a.completed, "request"),
            a.mean_input_tokens.map_or("-".into(), num)
        ));
        f = f
            .value(&format!("ttft_p50_ms_{name}"), a.median_ttft_ms)
            .value(&format!("tpot_p50_ms_{name}"), a.median_tpot_ms)
            .value(&format!("mean_input_tokens_{name}"), a.mean_input_tokens);
        ttfts.extend(a.median_ttft_ms.map(|t| (name.as_str(), t)));
        inputs.extend(a.mean_input_tokens.map(|t| (name.as_str(), t)));
        if let Some(why) = few(&format!("the adapter {name}"), a.completed, l) {
            f.weaken(Strength::Thin, why);
        }
    }
    let mut text = format!(
        "LoRA adapters at {}, TTFT p50 / TPOT p50: {}",
        l.label(),
        parts.join("; ")
    );
    if let Some((fast, a, slow, b)) = spread(&ttfts, 0.0) {
        let _ = write!(
            text,
            "; {slow}'s first token comes {} after {fast}'s ({})",
            ms_text(b - a),
            super::words::signed_pct((b / a - 1.0) * 100.0)
        );
    }
    if let Some((lo, a, hi, b)) = spread(&inputs, INPUT_CONFOUND) {
        let _ = write!(
            text,
            "; but the adapters were sent unlike prompts ({hi} {} tokens, {lo} {}), so their times differ by the lengths too",
            num(b),
            num(a)
        );
        f.weaken(
            Strength::Confounded,
            format!(
                "the adapters' mean prompts differ by {} at {} ({hi} {} tokens, {lo} {})",
                pct_text((b / a - 1.0) * 100.0),
                l.label(),
                num(b),
                num(a)
            ),
        );
    }
    f.text = text + ".";
    Some(f)
}

/// TTFT by what the requests carried at one level, the fewest image tokens first.
pub(super) fn images(s: &RunSummary) -> Option<Finding> {
    let kinds = |l: &LevelSummary| {
        l.stats.as_ref().map_or(0, |st| {
            st.scalars
                .images
                .values()
                .filter(|i| i.completed > 0)
                .count()
        })
    };
    let l = level_with(s, kinds).or_else(|| {
        // One size only: what it cost, without a comparison.
        s.sweep
            .iter()
            .chain(&s.rates)
            .find(|l| measured(l) && kinds(l) == 1)
    })?;
    let images = &l.stats.as_ref()?.scalars.images;
    let mut rows: Vec<(&String, &crate::metrics::images::ImageStats)> =
        images.iter().filter(|(_, i)| i.completed > 0).collect();
    rows.sort_by(|a, b| {
        a.1.mean_image_tokens
            .unwrap_or(0.0)
            .total_cmp(&b.1.mean_image_tokens.unwrap_or(0.0))
    });
    let mut f = Finding::new("images", String::new(), &[l]);
    let mut parts = Vec::new();
    let mut text_tokens: Vec<(&str, f64)> = Vec::new();
    for (label, i) in &rows {
        parts.push(format!(
            "{} with {label} ({} image tokens, {})",
            i.median_ttft_ms.map_or("-".into(), ms_text),
            i.mean_image_tokens.map_or("-".into(), num),
            count(i.completed, "request")
        ));
        f = f
            .value(&format!("ttft_p50_ms_{label}"), i.median_ttft_ms)
            .value(&format!("image_tokens_{label}"), i.mean_image_tokens);
        if let (Some(p), Some(m)) = (i.mean_input_tokens, i.mean_image_tokens) {
            text_tokens.push((label.as_str(), p - m));
        }
        if let Some(why) = few(label, i.completed, l) {
            f.weaken(Strength::Thin, why);
        }
    }
    let mut text = format!("Images at {}: TTFT p50 {}", l.label(), parts.join("; "));
    if let Some((lo, a, hi, b)) = spread(&text_tokens, INPUT_CONFOUND) {
        let _ = write!(
            text,
            "; but their text prompts differ too ({hi} {} tokens, {lo} {}), so TTFT differs by more than the images",
            num(b),
            num(a)
        );
        f.weaken(
            Strength::Confounded,
            format!(
                "the image sizes' text prompts differ by {} at {}",
                pct_text((b / a - 1.0) * 100.0),
                l.label()
            ),
        );
    }
    f.text = text + ".";
    Some(f)
}
