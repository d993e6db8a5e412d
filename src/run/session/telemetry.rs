//! The session's telemetry side: GPU and engine samples into the running level's window and
//! the run's idle power, and each level's energy and cost when it ends.

use crate::telemetry::TelemetryRecord;
use crate::telemetry::per_level::LevelTelemetryAcc;

use super::Session;

impl Session {
    pub(super) fn telemetry(&mut self, rec: &TelemetryRecord) {
        let t = &mut self.summary.telemetry;
        let current = self.current.and_then(|i| self.level_telemetry.get_mut(&i));
        match rec {
            TelemetryRecord::Gpu(g) => {
                t.gpu_source = Some(g.source);
                t.gpu_reason = None;
                if let Some(acc) = current {
                    acc.add_gpu(g);
                }
                let power: Vec<f64> = g.gpus.iter().filter_map(|r| r.power_w).collect();
                if self.idle_open && !power.is_empty() {
                    self.idle_power.0 += power.iter().sum::<f64>();
                    self.idle_power.1 += 1;
                    t.idle_power_w = Some(self.idle_power.0 / self.idle_power.1 as f64);
                }
                self.latest_gpu = Some(g.clone());
            }
            TelemetryRecord::Server(s) => {
                t.server_flavor = Some(s.flavor.clone());
                t.server_reason = None;
                if let Some(acc) = current {
                    acc.add_server(s);
                }
                self.latest_server = Some((**s).clone());
            }
            TelemetryRecord::Client(c) => {
                if let Some(acc) = current {
                    acc.add_client(c);
                }
            }
            TelemetryRecord::GpuUnavailable { reason, .. } => t.gpu_reason = Some(reason.clone()),
            TelemetryRecord::ServerUnavailable { reason, .. } => {
                t.server_reason = Some(reason.clone());
            }
        }
    }

    /// The level's energy and cost (docs/metrics.md "Energy and cost"), or why there is none.
    pub(super) fn level_energy(
        &mut self,
        index: u32,
        tel: Option<&LevelTelemetryAcc>,
        stats: Option<&crate::metrics::LevelStats>,
    ) {
        use crate::telemetry::energy::{LevelEnergy, LevelWork, Price};
        let energy = match tel.map(LevelTelemetryAcc::energy) {
            Some(Ok(e)) => Ok(e),
            // Why there were no readings at all says more than "no readings".
            _ if self.summary.config.no_gpu => Err("GPU sampling is off (--no-gpu)".to_string()),
            _ if self.summary.telemetry.gpu_reason.is_some() => Err(self
                .summary
                .telemetry
                .gpu_reason
                .clone()
                .unwrap_or_default()),
            Some(Err(e)) => Err(e),
            None => Err("no GPU readings during the level".to_string()),
        };
        let work = stats.map_or(
            LevelWork {
                output_tokens: 0,
                total_tokens: 0,
                duration_s: 0.0,
            },
            |s| LevelWork {
                output_tokens: s.scalars.total_output_tokens,
                total_tokens: s.scalars.total_output_tokens + s.scalars.total_input_tokens,
                duration_s: s.scalars.duration_s,
            },
        );
        let c = &self.summary.config;
        let price = (c.gpu_hour_cost.is_some() || c.cost_per_hour.is_some()).then_some(Price {
            gpu_hour: c.gpu_hour_cost,
            deployment_hour: c.cost_per_hour,
        });
        if let Some(l) = self.summary.level_mut(index) {
            l.energy = LevelEnergy::of(&energy, &work, price);
        }
    }
}
