//! The levels an SLO search runs: what its probes send, from the run's shape. Pure, so the
//! runner that runs them and the estimate that times them build the same levels.

use crate::metrics::Slo;
use crate::workload::mix::RequestMix;
use crate::workload::sessions::Sessions;
use crate::workload::{Arrival, LevelKind, LevelSpec, OpenLoop, levels};

use super::SearchConfig;

/// What the search needs besides its configuration: the SLO and the shape of its requests.
#[derive(Clone, Debug)]
pub struct SearchPlan {
    pub config: SearchConfig,
    pub slo: Slo,
    pub input_tokens: u64,
    pub output_tokens: u32,
    /// Leading tokens every probe's prompts share (`--shared-prefix-len`).
    pub shared_prefix_tokens: u64,
    /// What the probes' requests mix in (`--range-ratio`).
    pub mix: RequestMix,
    /// Burstiness, ramp-up and concurrency cap of the rate probes.
    pub open_loop: OpenLoop,
    /// The concurrency search's probes are session levels of this shape (`--sessions`).
    pub sessions: Option<Sessions>,
}

impl SearchPlan {
    /// The rate search's first level: a closed-loop probe of the most requests/s the server
    /// sustains.
    pub fn throughput_probe(&self, index: u32) -> LevelSpec {
        LevelSpec {
            shared_prefix_tokens: self.shared_prefix_tokens,
            mix: self.mix.clone(),
            ..LevelSpec::new(
                index,
                LevelKind::Sweep,
                self.config.probe_concurrency,
                (self.input_tokens, self.output_tokens),
                self.config.throughput_requests(),
            )
        }
    }

    /// A rate probe at `rate` req/s, with the run's arrival shape and cap.
    pub fn rate_probe(&self, index: u32, rate: f64) -> LevelSpec {
        let ol = &self.open_loop;
        LevelSpec {
            arrival: Some(Arrival {
                request_rate: rate,
                burstiness: ol.burstiness,
                ramp_up_s: ol.ramp_up_s,
                max_concurrency: ol.max_concurrency,
            }),
            shared_prefix_tokens: self.shared_prefix_tokens,
            mix: self.mix.clone(),
            ..LevelSpec::new(
                index,
                LevelKind::Rate,
                ol.max_concurrency.unwrap_or(0),
                (self.input_tokens, self.output_tokens),
                self.config.requests_at(rate),
            )
        }
    }

    /// A concurrency probe at `c`: a closed-loop level of `c` streams, or with sessions a
    /// session level of `c` users running whole sessions, with the requests
    /// [`SearchConfig::requests_at_concurrency`] asks for (`e2e_s`: the last probe's mean
    /// request time) — a session level at least its `--sessions-per-level`, in whole sessions.
    pub fn concurrency_probe(&self, index: u32, c: u32, e2e_s: Option<f64>) -> LevelSpec {
        let requests = self.config.requests_at_concurrency(c, e2e_s);
        let lengths = (self.input_tokens, self.output_tokens);
        match &self.sessions {
            Some(s) => {
                let per_session = s.conversation().requests();
                let sessions = requests.div_ceil(per_session).max(s.per_level.at(c));
                levels::session_level_of(index, c, s, lengths, self.shared_prefix_tokens, sessions)
            }
            None => LevelSpec {
                shared_prefix_tokens: self.shared_prefix_tokens,
                mix: self.mix.clone(),
                ..LevelSpec::new(index, LevelKind::Sweep, c, lengths, requests)
            },
        }
    }
}
