//! A level's GPU energy (docs/metrics.md "Energy and cost"): the energy counter read just
//! before the level and at its end, per GPU; where a GPU has no counter, its sampled power
//! integrated over the level (an estimate, and said so); where neither, not measured, with the
//! reason, never 0.

use serde::{Deserialize, Serialize};

use super::GpuSample;

/// What the level's GPU samples said of its energy.
#[derive(Clone, Debug, Default)]
pub struct EnergyFold {
    /// The sample taken just before the level (the counters' starting point).
    baseline: Option<GpuSample>,
    last: Option<GpuSample>,
    /// Per GPU index: the last (time ms, power W) and the joules integrated so far.
    power: std::collections::BTreeMap<u32, ((i64, f64), f64)>,
    samples: u64,
}

/// Where a level's energy came from.
pub const FROM_COUNTER: &str = "counter";
pub const FROM_POWER: &str = "power samples";

/// Energy over a window.
#[derive(Clone, Debug, PartialEq)]
pub struct Energy {
    pub joules: f64,
    pub window_s: f64,
    pub gpus: u32,
    /// [`FROM_COUNTER`] or [`FROM_POWER`].
    pub source: &'static str,
}

impl EnergyFold {
    /// Starts from `baseline`, the GPU sample taken just before the level.
    pub fn new(baseline: Option<GpuSample>) -> Self {
        let mut f = Self::default();
        if let Some(b) = baseline {
            f.fold_power(&b);
            f.baseline = Some(b);
        }
        f
    }

    /// Folds one sample taken during the level (the last one is taken at its end).
    pub fn add(&mut self, s: &GpuSample) {
        if self.baseline.is_none() {
            self.baseline = Some(s.clone());
        }
        self.fold_power(s);
        self.last = Some(s.clone());
        self.samples += 1;
    }

    /// Trapezoids of power between consecutive samples, per GPU.
    fn fold_power(&mut self, s: &GpuSample) {
        for g in &s.gpus {
            let Some(p) = g.power_w.filter(|p| p.is_finite() && *p >= 0.0) else {
                continue;
            };
            let e = self
                .power
                .entry(g.index)
                .or_insert(((s.at_unix_ms, p), 0.0));
            let (t0, p0) = e.0;
            let dt = (s.at_unix_ms - t0).max(0) as f64 / 1000.0;
            e.1 += f64::midpoint(p0, p) * dt;
            e.0 = (s.at_unix_ms, p);
        }
    }

    /// The level's energy, or why it was not measured.
    pub fn energy(&self) -> Result<Energy, String> {
        let (Some(base), Some(last)) = (&self.baseline, &self.last) else {
            return Err("no GPU readings during the level".into());
        };
        let window_s = (last.at_unix_ms - base.at_unix_ms).max(0) as f64 / 1000.0;
        if window_s <= 0.0 {
            return Err("one GPU reading only: no span to measure over".into());
        }
        // Every GPU with a counter at both ends: the counter.
        let counted: Vec<f64> = last
            .gpus
            .iter()
            .filter_map(|g| {
                let b = base.gpus.iter().find(|x| x.index == g.index)?.energy_mj?;
                Some(g.energy_mj?.checked_sub(b)? as f64 / 1000.0)
            })
            .collect();
        if !counted.is_empty() && counted.len() == last.gpus.len() {
            return Ok(Energy {
                joules: counted.iter().sum(),
                window_s,
                gpus: counted.len() as u32,
                source: FROM_COUNTER,
            });
        }
        if !self.power.is_empty() {
            return Ok(Energy {
                joules: self.power.values().map(|(_, j)| j).sum(),
                window_s,
                gpus: self.power.len() as u32,
                source: FROM_POWER,
            });
        }
        Err("the GPUs report neither an energy counter nor power".into())
    }
}

/// A level's energy and cost, as results.json keys (units in the names).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelEnergy {
    /// `counter`, `power samples`, or `not measured: <why>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// The span the energy was measured over: from the reading before the level to the one
    /// at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_window_s: Option<f64>,
    /// All GPUs together: energy / window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_output_token: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_joule: Option<f64>,
    /// With a price (`--gpu-hour-cost`, `--cost-per-hour`): the level's wall time at that
    /// price, per million output (and input + output) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_million_output_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_million_total_tokens: Option<f64>,
    /// Why there is no cost (a price per GPU hour, but no GPU seen to count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_reason: Option<String>,
}

/// What a price is per.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// USD per GPU hour (`--gpu-hour-cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hour: Option<f64>,
    /// USD per hour for the whole deployment (`--cost-per-hour`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_hour: Option<f64>,
}

/// What a level did, for its energy and cost.
pub struct LevelWork {
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// The level's window (first send to last completion).
    pub duration_s: f64,
}

impl LevelEnergy {
    /// The figures of a level from its energy (or why none) and its work.
    pub fn of(energy: &Result<Energy, String>, work: &LevelWork, price: Option<Price>) -> Self {
        let per_token = |x: f64, n: u64| (n > 0).then(|| x / n as f64);
        let mut out = match energy {
            Ok(e) => LevelEnergy {
                energy_source: Some(e.source.to_string()),
                energy_j: Some(e.joules),
                energy_window_s: Some(e.window_s),
                mean_power_w: Some(e.joules / e.window_s),
                joules_per_output_token: per_token(e.joules, work.output_tokens),
                output_tokens_per_joule: (e.joules > 0.0)
                    .then(|| work.output_tokens as f64 / e.joules),
                ..LevelEnergy::default()
            },
            Err(why) => LevelEnergy {
                energy_source: Some(format!("not measured: {why}")),
                ..LevelEnergy::default()
            },
        };
        let gpus = energy.as_ref().ok().map(|e| e.gpus);
        let per_hour = match price {
            Some(Price {
                deployment_hour: Some(d),
                ..
            }) => Some(d),
            Some(Price {
                gpu_hour: Some(g), ..
            }) => match gpus {
                Some(n) if n > 0 => Some(g * f64::from(n)),
                _ => {
                    out.cost_reason = Some(
                        "--gpu-hour-cost needs the GPUs counted (no GPU readings); give --cost-per-hour for the whole deployment instead".into(),
                    );
                    None
                }
            },
            _ => None,
        };
        if let Some(h) = per_hour {
            let cost = h * work.duration_s / 3600.0;
            out.cost_per_million_output_tokens = per_token(cost * 1e6, work.output_tokens);
            out.cost_per_million_total_tokens = per_token(cost * 1e6, work.total_tokens);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{GpuReading, GpuSource};

    fn sample(at_ms: i64, gpus: &[(Option<u64>, Option<f64>)]) -> GpuSample {
        GpuSample {
            at_unix_ms: at_ms,
            source: GpuSource::Nvml,
            gpus: gpus
                .iter()
                .enumerate()
                .map(|(i, &(energy_mj, power_w))| GpuReading {
                    index: i as u32,
                    energy_mj,
                    power_w,
                    ..GpuReading::default()
                })
                .collect(),
        }
    }

    #[test]
    fn the_counter_is_read_at_both_ends_of_the_level() {
        let mut f = EnergyFold::new(Some(sample(
            1_000,
            &[
                (Some(5_000_000), Some(100.0)),
                (Some(7_000_000), Some(100.0)),
            ],
        )));
        f.add(&sample(
            2_000,
            &[
                (Some(5_300_000), Some(300.0)),
                (Some(7_300_000), Some(300.0)),
            ],
        ));
        f.add(&sample(
            5_000,
            &[
                (Some(6_200_000), Some(300.0)),
                (Some(8_200_000), Some(300.0)),
            ],
        ));
        let e = f.energy().unwrap();
        assert_eq!(e.source, FROM_COUNTER);
        assert!((e.joules - 2400.0).abs() < 1e-9, "{e:?}");
        assert!((e.window_s - 4.0).abs() < 1e-9);
        let work = LevelWork {
            output_tokens: 1200,
            total_tokens: 4800,
            duration_s: 3.6,
        };
        let l = LevelEnergy::of(
            &Ok(e),
            &work,
            Some(Price {
                gpu_hour: Some(2.0),
                deployment_hour: None,
            }),
        );
        assert_eq!(l.mean_power_w, Some(600.0));
        assert_eq!(l.joules_per_output_token, Some(2.0));
        assert_eq!(l.output_tokens_per_joule, Some(0.5));
        // Two GPUs at $2 an hour for 3.6 s: $0.004, over 1200 and 4800 tokens.
        let per_m = l.cost_per_million_output_tokens.unwrap();
        assert!((per_m - 0.004 / 1200.0 * 1e6).abs() < 1e-9, "{per_m}");
        let per_m_total = l.cost_per_million_total_tokens.unwrap();
        assert!((per_m_total - 0.004 / 4800.0 * 1e6).abs() < 1e-9);
    }

    #[test]
    fn without_a_counter_power_is_integrated_and_said_so() {
        let mut f = EnergyFold::new(Some(sample(0, &[(None, Some(100.0))])));
        f.add(&sample(1_000, &[(None, Some(300.0))]));
        f.add(&sample(3_000, &[(None, Some(300.0))]));
        let e = f.energy().unwrap();
        assert_eq!(e.source, FROM_POWER);
        // 200 J over the first second, 600 J over the next two.
        assert!((e.joules - 800.0).abs() < 1e-9, "{e:?}");
    }

    #[test]
    fn nothing_to_measure_is_a_reason_never_zero() {
        let none = EnergyFold::new(None);
        let l = LevelEnergy::of(
            &none.energy(),
            &LevelWork {
                output_tokens: 10,
                total_tokens: 20,
                duration_s: 1.0,
            },
            Some(Price {
                gpu_hour: Some(1.0),
                deployment_hour: None,
            }),
        );
        assert_eq!(
            l.energy_source.as_deref(),
            Some("not measured: no GPU readings during the level")
        );
        assert_eq!(l.energy_j, None);
        assert_eq!(l.joules_per_output_token, None);
        assert!(l.cost_reason.unwrap().contains("--cost-per-hour"));
        let mut bare = EnergyFold::new(Some(sample(0, &[(None, None)])));
        bare.add(&sample(1_000, &[(None, None)]));
        assert!(
            bare.energy()
                .unwrap_err()
                .contains("neither an energy counter nor power")
        );
    }
}
