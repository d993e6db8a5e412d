//! SLO tiers (`--slo-tier NAME=SPEC`): several named objectives judged on the same levels, so
//! one run answers how many users each class of service holds (an interactive tier with a
//! tight TTFT and a fast per-user output, a batch tier with loose ones). Each tier is an
//! [`Slo`], checked at the run's `--slo-percentile` exactly as `--slo` is.

use serde::{Deserialize, Serialize};

use super::slo::{Slo, SloCheck};

/// A named objective.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloTier {
    pub name: String,
    pub slo: Slo,
}

impl SloTier {
    /// `interactive=ttft:2000,tpot:50`: a name (letters, digits, `-`, `_`) and an SLO spec.
    pub fn parse(s: &str, percentile: f64) -> Result<Self, String> {
        let (name, spec) = s.split_once('=').ok_or_else(|| {
            format!("--slo-tier '{s}' must look like interactive=ttft:2000,tpot:50")
        })?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "--slo-tier '{s}': name the tier with letters, digits, - or _ before the ="
            ));
        }
        let mut slo = Slo::parse(spec).map_err(|e| format!("--slo-tier {name}: {e}"))?;
        slo.percentile = percentile;
        Ok(Self {
            name: name.to_string(),
            slo,
        })
    }
}

/// A level judged against one tier.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierCheck {
    pub tier: String,
    #[serde(flatten)]
    pub check: SloCheck,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tier_is_a_name_and_an_slo_and_nonsense_is_refused() {
        let t = SloTier::parse("interactive=ttft:2000,tpot:50", 95.0).unwrap();
        assert_eq!(t.name, "interactive");
        assert_eq!(t.slo.ttft_ms, Some(2000.0));
        assert_eq!(t.slo.tpot_ms, Some(50.0));
        assert!((t.slo.percentile - 95.0).abs() < 1e-12);
        for (bad, starts) in [
            ("ttft:2000", "--slo-tier 'ttft:2000' must look like"),
            ("=ttft:2000", "--slo-tier '=ttft:2000': name the tier"),
            ("a b=ttft:1", "--slo-tier 'a b=ttft:1': name the tier"),
            ("x=", "--slo-tier x: empty SLO"),
            ("x=ttft:-1", "--slo-tier x: SLO 'ttft:-1'"),
        ] {
            let e = SloTier::parse(bad, 90.0).unwrap_err();
            assert!(e.starts_with(starts), "{bad}: {e}");
        }
    }
}
