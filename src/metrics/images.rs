//! A level's images (`--images`): the prompt tokens they took, and TTFT by what a request
//! carried (its image count and size), since prefill grows with them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dist::Dist;
use super::record::RequestRecord;

/// The requests that carried one count and size of image (results.json `images.LABEL`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageStats {
    /// Its completed requests.
    pub completed: u64,
    /// Prompt tokens its images took, a request (the server's count less the text's).
    pub mean_image_tokens: Option<f64>,
    pub median_ttft_ms: Option<f64>,
    pub p99_ttft_ms: Option<f64>,
    /// Its completed requests' mean prompt tokens, the images' among them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_input_tokens: Option<f64>,
}

#[derive(Clone, Debug, Default)]
struct Fold {
    completed: u64,
    input_tokens: u64,
    image_tokens: u64,
    counted: u64,
    ttft: Dist,
}

/// Folds a level's completed requests by the images they carried.
#[derive(Clone, Debug, Default)]
pub struct ImageFold {
    by: BTreeMap<String, Fold>,
}

impl ImageFold {
    /// Folds a completed record (one without images is left out).
    pub fn add(&mut self, r: &RequestRecord) {
        let Some(label) = &r.images else {
            return;
        };
        let f = self.by.entry(label.clone()).or_default();
        f.completed += 1;
        f.input_tokens += r.input_tokens;
        if let Some(n) = r.image_tokens {
            f.image_tokens += n;
            f.counted += 1;
        }
        if let Some(t) = r.ttft_us {
            f.ttft.record(t);
        }
    }

    /// Mean image tokens a request over every request that said.
    pub fn mean_image_tokens(&self) -> Option<f64> {
        let (tokens, n) = self
            .by
            .values()
            .fold((0, 0), |a, f| (a.0 + f.image_tokens, a.1 + f.counted));
        (n > 0).then(|| tokens as f64 / n as f64)
    }

    pub fn stats(&self) -> BTreeMap<String, ImageStats> {
        self.by
            .iter()
            .map(|(label, f)| {
                let ttft = f.ttft.stats(1e-3);
                let s = ImageStats {
                    completed: f.completed,
                    mean_image_tokens: (f.counted > 0)
                        .then(|| f.image_tokens as f64 / f.counted as f64),
                    median_ttft_ms: ttft.as_ref().map(|d| d.p50),
                    p99_ttft_ms: ttft.as_ref().map(|d| d.p99),
                    mean_input_tokens: (f.completed > 0)
                        .then(|| f.input_tokens as f64 / f.completed as f64),
                };
                (label.clone(), s)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::tests::record;

    #[test]
    fn images_are_folded_by_what_requests_carried() {
        let mut fold = ImageFold::default();
        for (label, tokens, ttft) in [
            ("1×64x64", 9, 10_000),
            ("1×64x64", 9, 30_000),
            ("1×128x128", 25, 50_000),
        ] {
            let mut r = record(ttft, ttft + 1000, 2);
            r.images = Some(label.into());
            r.image_tokens = Some(tokens);
            fold.add(&r);
        }
        fold.add(&record(1, 2, 2));
        let s = fold.stats();
        assert_eq!(s.len(), 2);
        assert_eq!(s["1×64x64"].completed, 2);
        assert_eq!(s["1×64x64"].mean_image_tokens, Some(9.0));
        assert!((s["1×128x128"].median_ttft_ms.unwrap() - 50.0).abs() < 0.1);
        assert!((fold.mean_image_tokens().unwrap() - 43.0 / 3.0).abs() < 1e-12);
    }
}
