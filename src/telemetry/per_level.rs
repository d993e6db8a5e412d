//! Telemetry summarised per level: engine counters differenced over the level, gauges averaged
//! and peaked, GPU memory peaks and mean utilization, and the accept length the server reports.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{GpuSample, ServerSample};

/// The engine's view of one level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerLevelStats {
    pub samples: u64,
    pub mean_running: Option<f64>,
    pub max_running: Option<f64>,
    pub mean_queued: Option<f64>,
    pub max_queued: Option<f64>,
    /// KV-cache usage 0..1.
    pub mean_kv_usage: Option<f64>,
    pub max_kv_usage: Option<f64>,
    /// Prefix-cache hits / queries over the level (vLLM counters), or the mean SGLang gauge.
    pub prefix_hit_rate: Option<f64>,
    pub preemptions: Option<f64>,
    /// Mean of the engine's own generation-throughput gauge.
    pub mean_gen_throughput: Option<f64>,
    /// Generated tokens the engine counted over the level.
    pub generation_tokens: Option<f64>,
    /// The engine's own mean TTFT over the level (Δsum / Δcount of its TTFT histogram), ms,
    /// and the requests it counted in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_requests: Option<f64>,
}

/// One GPU over one level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuLevelStats {
    pub index: u32,
    pub name: String,
    pub peak_mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    pub mean_util_pct: Option<f64>,
    pub mean_power_w: Option<f64>,
    pub max_temp_c: Option<f64>,
}

/// Speculative decoding as the server reports it over one level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecLevelStats {
    /// Mean tokens per verification step.
    pub accept_length: f64,
    /// `counters` (1 + Δaccepted/Δdrafts), `gauge` (mean of SGLang's `spec_accept_length` over the
    /// level) or `server_info` (SGLang's cumulative average).
    pub source: String,
    /// Δaccepted / Δdraft tokens, with counters.
    pub acceptance_rate: Option<f64>,
    /// Per draft position: Δaccepted at that position / Δdrafts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_position: Vec<f64>,
    /// Tokens per engine step, steps with no draft included: Δgenerated / (Δgenerated −
    /// Δaccepted), with counters. A speculator that does not draft at every step (vLLM's
    /// n-gram) has an accept length above this; the client's tokens per chunk compare with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_step: Option<f64>,
}

#[derive(Clone, Debug, Default)]
struct Gauge {
    sum: f64,
    n: u64,
    max: f64,
}

impl Gauge {
    fn add(&mut self, v: Option<f64>) {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            self.sum += v;
            self.n += 1;
            self.max = if self.n == 1 { v } else { self.max.max(v) };
        }
    }
    fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
    fn max(&self) -> Option<f64> {
        (self.n > 0).then_some(self.max)
    }
}

#[derive(Clone, Debug, Default)]
struct GpuAcc {
    name: String,
    peak_mem: Option<u64>,
    mem_total: Option<u64>,
    util: Gauge,
    power: Gauge,
    temp: Gauge,
}

/// Folds the samples that arrive while a level runs.
#[derive(Clone, Debug, Default)]
pub struct LevelTelemetryAcc {
    /// The last server sample before the level started (counter baseline).
    baseline: Option<ServerSample>,
    last: Option<ServerSample>,
    running: Gauge,
    queued: Gauge,
    kv: Gauge,
    prefix_gauge: Gauge,
    gen_tput: Gauge,
    accept_gauge: Gauge,
    gpus: BTreeMap<u32, GpuAcc>,
    energy: super::energy::EnergyFold,
    client: ClientAcc,
}

/// servetop's own load over a level: CPU and wall seconds summed, every probe's lag.
#[derive(Clone, Debug, Default)]
struct ClientAcc {
    wall_s: f64,
    cpu_s: f64,
    lag_us: Option<crate::metrics::Dist>,
}

/// servetop's own load over one level (docs/metrics.md "Findings", client validity): flat in
/// the level's results.json entry, absent where it was not measured (a run saved before).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientLevelStats {
    /// Process CPU seconds per wall second over the level: 1.0 is one core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_share: Option<f64>,
    /// How late the runtime's timer probe woke past its interval, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_timer_lag_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_timer_lag_p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_timer_lag_max_ms: Option<f64>,
    /// Probes behind the lag figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_timer_probes: Option<u64>,
}

fn delta(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(b? - a?).filter(|d| *d >= 0.0)
}

impl LevelTelemetryAcc {
    /// Starts a level with `baseline` as the engine counters' starting point and `gpu` (the
    /// reading taken just before the level) as the energy counters'.
    pub fn new(baseline: Option<ServerSample>, gpu: Option<GpuSample>) -> Self {
        Self {
            baseline,
            energy: super::energy::EnergyFold::new(gpu),
            ..Self::default()
        }
    }

    /// The level's GPU energy, or why it was not measured.
    pub fn energy(&self) -> Result<super::energy::Energy, String> {
        self.energy.energy()
    }

    /// Folds one sample of servetop's own load.
    pub fn add_client(&mut self, c: &super::client_load::ClientSample) {
        let acc = &mut self.client;
        acc.wall_s += c.wall_s;
        acc.cpu_s += c.cpu_s;
        let d = acc.lag_us.get_or_insert_with(crate::metrics::Dist::new);
        for &v in &c.lag_us {
            d.record(u64::from(v));
        }
    }

    /// servetop's own load over the level (nothing when no sample arrived in it).
    pub fn client(&self) -> ClientLevelStats {
        let c = &self.client;
        let lag = c.lag_us.as_ref().and_then(|d| d.stats(1e-3));
        ClientLevelStats {
            client_cpu_share: (c.wall_s > 0.0).then(|| c.cpu_s / c.wall_s),
            client_timer_lag_p50_ms: lag.as_ref().map(|d| d.p50),
            client_timer_lag_p99_ms: lag.as_ref().map(|d| d.p99),
            client_timer_lag_max_ms: lag.as_ref().map(|d| d.max),
            client_timer_probes: lag.as_ref().map(|d| d.count),
        }
    }

    /// Folds one engine sample.
    pub fn add_server(&mut self, s: &ServerSample) {
        self.running.add(s.running);
        self.queued.add(s.queued);
        self.kv.add(s.kv_usage);
        self.prefix_gauge.add(s.prefix_hit_rate);
        self.gen_tput.add(s.gen_throughput);
        self.accept_gauge.add(s.accept_length_gauge);
        if self.baseline.is_none() {
            self.baseline = Some(s.clone());
        }
        self.last = Some(s.clone());
    }

    /// Folds one GPU sample.
    pub fn add_gpu(&mut self, s: &GpuSample) {
        self.energy.add(s);
        for g in &s.gpus {
            let a = self.gpus.entry(g.index).or_default();
            a.name.clone_from(&g.name);
            a.peak_mem = match (a.peak_mem, g.mem_used_bytes) {
                (Some(p), Some(m)) => Some(p.max(m)),
                (p, m) => p.or(m),
            };
            a.mem_total = g.mem_total_bytes.or(a.mem_total);
            a.util.add(g.util_gpu_pct);
            a.power.add(g.power_w);
            a.temp.add(g.temp_c);
        }
    }

    /// The engine's view, if any sample arrived.
    pub fn server(&self) -> Option<ServerLevelStats> {
        let last = self.last.as_ref()?;
        let base = self.baseline.as_ref();
        let d = |f: fn(&ServerSample) -> Option<f64>| delta(base.and_then(f), f(last));
        let prefix_hit_rate = match (d(|s| s.prefix_hits_total), d(|s| s.prefix_queries_total)) {
            (Some(h), Some(q)) if q > 0.0 => Some(h / q),
            _ => self.prefix_gauge.mean(),
        };
        Some(ServerLevelStats {
            samples: self.running.n.max(self.kv.n),
            mean_running: self.running.mean(),
            max_running: self.running.max(),
            mean_queued: self.queued.mean(),
            max_queued: self.queued.max(),
            mean_kv_usage: self.kv.mean(),
            max_kv_usage: self.kv.max(),
            prefix_hit_rate,
            preemptions: d(|s| s.preemptions_total),
            mean_gen_throughput: self.gen_tput.mean(),
            generation_tokens: d(|s| s.generation_tokens_total),
            mean_ttft_ms: match (d(|s| s.ttft_seconds_sum), d(|s| s.ttft_seconds_count)) {
                (Some(sum), Some(n)) if n > 0.0 => Some(sum / n * 1000.0),
                _ => None,
            },
            ttft_requests: d(|s| s.ttft_seconds_count).filter(|n| *n > 0.0),
        })
    }

    /// Speculative decoding over the level: counters first, then the gauge, then `server_info`.
    pub fn spec(&self) -> Option<SpecLevelStats> {
        let last = self.last.as_ref()?;
        let base = self.baseline.as_ref();
        let d = |f: fn(&ServerSample) -> Option<f64>| delta(base.and_then(f), f(last));
        if let (Some(drafts), Some(acc)) =
            (d(|s| s.spec_drafts_total), d(|s| s.spec_accepted_total))
            && drafts > 0.0
        {
            let per_position = match base {
                Some(b) if !last.spec_accepted_per_pos_total.is_empty() => last
                    .spec_accepted_per_pos_total
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        (v - b.spec_accepted_per_pos_total.get(i).copied().unwrap_or(0.0)) / drafts
                    })
                    .collect(),
                _ => Vec::new(),
            };
            return Some(SpecLevelStats {
                accept_length: 1.0 + acc / drafts,
                source: "counters".into(),
                acceptance_rate: d(|s| s.spec_draft_tokens_total)
                    .filter(|t| *t > 0.0)
                    .map(|t| acc / t),
                per_position,
                tokens_per_step: d(|s| s.generation_tokens_total)
                    .filter(|g| *g > acc)
                    .map(|g| g / (g - acc)),
            });
        }
        if let Some(g) = self.accept_gauge.mean() {
            return Some(SpecLevelStats {
                accept_length: g,
                source: "gauge".into(),
                ..SpecLevelStats::default()
            });
        }
        last.accept_length_cumulative.map(|v| SpecLevelStats {
            accept_length: v,
            source: "server_info".into(),
            ..SpecLevelStats::default()
        })
    }

    /// Each GPU over the level.
    pub fn gpus(&self) -> Vec<GpuLevelStats> {
        self.gpus
            .iter()
            .map(|(i, a)| GpuLevelStats {
                index: *i,
                name: a.name.clone(),
                peak_mem_used_bytes: a.peak_mem,
                mem_total_bytes: a.mem_total,
                mean_util_pct: a.util.mean(),
                mean_power_w: a.power.mean(),
                max_temp_c: a.temp.max(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::{GpuReading, GpuSource};

    fn server(
        drafts: f64,
        draft_tokens: f64,
        accepted: f64,
        per_pos: Vec<f64>,
        kv: f64,
    ) -> ServerSample {
        ServerSample {
            spec_drafts_total: Some(drafts),
            spec_draft_tokens_total: Some(draft_tokens),
            spec_accepted_total: Some(accepted),
            spec_accepted_per_pos_total: per_pos,
            kv_usage: Some(kv),
            running: Some(4.0),
            generation_tokens_total: Some(accepted + drafts),
            ..ServerSample::default()
        }
    }

    #[test]
    fn counters_are_differenced_over_the_level() {
        // Before the level: 100 drafts, 300 draft tokens, 150 accepted.
        let mut a = LevelTelemetryAcc::new(
            Some(server(100.0, 300.0, 150.0, vec![80.0, 50.0, 20.0], 0.1)),
            None,
        );
        a.add_server(&server(150.0, 450.0, 250.0, vec![120.0, 85.0, 45.0], 0.3));
        // During: 300 more drafts, 900 draft tokens, 600 accepted: accept length 1 + 600/300 = 3.
        a.add_server(&server(
            400.0,
            1200.0,
            750.0,
            vec![370.0, 250.0, 130.0],
            0.5,
        ));
        let s = a.spec().unwrap();
        assert_eq!(s.source, "counters");
        assert!((s.accept_length - 3.0).abs() < 1e-12);
        assert!((s.acceptance_rate.unwrap() - 600.0 / 900.0).abs() < 1e-12);
        assert_eq!(s.per_position.len(), 3);
        assert!((s.per_position[0] - 290.0 / 300.0).abs() < 1e-12);
        // Every step drafted here: 900 tokens in 900 − 600 = 300 steps, the accept length.
        assert!((s.tokens_per_step.unwrap() - 3.0).abs() < 1e-12);
        let sv = a.server().unwrap();
        assert!((sv.mean_kv_usage.unwrap() - 0.4).abs() < 1e-12);
        assert_eq!(sv.max_kv_usage, Some(0.5));
    }

    #[test]
    fn steps_without_a_draft_lower_tokens_per_step_not_the_accept_length() {
        // 100 drafted steps accept 150 tokens (250 tokens), 100 more steps had no draft (100
        // tokens): accept length 2.5, but 350 tokens in 200 steps is 1.75 per step.
        let mut start = server(0.0, 0.0, 0.0, vec![], 0.0);
        start.generation_tokens_total = Some(0.0);
        let mut a = LevelTelemetryAcc::new(Some(start), None);
        let mut end = server(100.0, 300.0, 150.0, vec![], 0.0);
        end.generation_tokens_total = Some(350.0);
        a.add_server(&end);
        let s = a.spec().unwrap();
        assert!((s.accept_length - 2.5).abs() < 1e-12);
        assert!((s.tokens_per_step.unwrap() - 1.75).abs() < 1e-12);
    }

    #[test]
    fn gauge_then_server_info_when_no_counters() {
        let mut a = LevelTelemetryAcc::new(None, None);
        a.add_server(&ServerSample {
            accept_length_gauge: Some(3.0),
            ..ServerSample::default()
        });
        a.add_server(&ServerSample {
            accept_length_gauge: Some(4.0),
            ..ServerSample::default()
        });
        assert_eq!(
            a.spec().unwrap(),
            SpecLevelStats {
                accept_length: 3.5,
                source: "gauge".into(),
                ..SpecLevelStats::default()
            }
        );
        let mut b = LevelTelemetryAcc::new(None, None);
        b.add_server(&ServerSample {
            accept_length_cumulative: Some(2.5),
            ..ServerSample::default()
        });
        assert_eq!(b.spec().unwrap().source, "server_info");
        assert!(LevelTelemetryAcc::new(None, None).spec().is_none());
    }

    /// A gauge the page lacks folds to `None`, not to 0: a server without a queued gauge has no
    /// queue figures, while the gauges it has are averaged and peaked as read.
    #[test]
    fn a_missing_gauge_is_none_not_zero() {
        let mut a = LevelTelemetryAcc::new(None, None);
        for (running, kv) in [(3.0, 0.25), (5.0, 0.75)] {
            a.add_server(&ServerSample {
                running: Some(running),
                kv_usage: Some(kv),
                ..ServerSample::default()
            });
        }
        let s = a.server().unwrap();
        assert_eq!((s.mean_running, s.max_running), (Some(4.0), Some(5.0)));
        assert_eq!((s.mean_queued, s.max_queued), (None, None));
        assert_eq!((s.mean_kv_usage, s.max_kv_usage), (Some(0.5), Some(0.75)));
        assert_eq!(s.samples, 2);
        // Every gauge at 0 is a reading of 0.
        let mut z = LevelTelemetryAcc::new(None, None);
        z.add_server(&ServerSample {
            running: Some(0.0),
            queued: Some(0.0),
            ..ServerSample::default()
        });
        let s = z.server().unwrap();
        assert_eq!((s.max_running, s.max_queued), (Some(0.0), Some(0.0)));
    }

    #[test]
    fn gpu_peaks_and_means() {
        let mut a = LevelTelemetryAcc::new(None, None);
        for (m, u) in [(10u64, 50.0), (30, 100.0), (20, 0.0)] {
            a.add_gpu(&GpuSample {
                at_unix_ms: 0,
                source: GpuSource::Nvml,
                gpus: vec![GpuReading {
                    index: 0,
                    name: "g".into(),
                    mem_used_bytes: Some(m),
                    mem_total_bytes: Some(40),
                    util_gpu_pct: Some(u),
                    ..GpuReading::default()
                }],
            });
        }
        let g = &a.gpus()[0];
        assert_eq!(g.peak_mem_used_bytes, Some(30));
        assert_eq!(g.mean_util_pct, Some(50.0));
    }
}
