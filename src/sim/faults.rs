//! Fault injection for `servetop sim --inject KIND=RATE[,KIND=RATE...]`: each request draws at
//! most one fault with the given probabilities, and the simulator counts what it injected so
//! tests can hold the client's failure counts against it.

use serde::{Deserialize, Serialize};

/// One kind of injected fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// HTTP 500 with an error body.
    Http500,
    /// HTTP 429 with `Retry-After`.
    Http429,
    /// HTTP 400 with the engine's context-length message.
    Ctx400,
    /// The connection is cut after the first token.
    ResetMid,
    /// A line of broken JSON after the first token.
    Malformed,
    /// No bytes for `stall-s` seconds after the first token, then the stream goes on.
    Stall,
    /// The first token comes `slow-first-s` seconds late.
    SlowFirst,
    /// An error object inside the stream after the first token, then `[DONE]`.
    ErrorEvent,
    /// A new connection is accepted and reset before any byte is read (per connection).
    ResetBefore,
}

impl FaultKind {
    /// Every kind, with its command-line name.
    pub const ALL: [(FaultKind, &'static str); 9] = [
        (FaultKind::Http500, "http500"),
        (FaultKind::Http429, "http429"),
        (FaultKind::Ctx400, "ctx400"),
        (FaultKind::ResetMid, "reset-mid"),
        (FaultKind::Malformed, "malformed"),
        (FaultKind::Stall, "stall"),
        (FaultKind::SlowFirst, "slow-first"),
        (FaultKind::ErrorEvent, "error-event"),
        (FaultKind::ResetBefore, "reset-before"),
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        FaultKind::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("?", |(_, n)| n)
    }
}

/// Probabilities per request, and the durations of stalls and slow first tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Faults {
    /// Per-request faults.
    pub rates: Vec<(FaultKind, f64)>,
    /// Probability that a new connection is reset before the first byte.
    #[serde(default)]
    pub reset_before: f64,
    pub stall_s: f64,
    pub slow_first_s: f64,
    /// `restart=S`: every S seconds of serving, the server goes away (listener closed, open
    /// streams cut) as if its process exited, and comes back `down-s` seconds later with a
    /// fresh engine. Only `servetop sim` acts on it (the process is the unit that restarts).
    #[serde(default)]
    pub restart_every_s: Option<f64>,
    #[serde(default = "default_down_s")]
    pub down_s: f64,
}

fn default_down_s() -> f64 {
    5.0
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            rates: Vec::new(),
            reset_before: 0.0,
            stall_s: 5.0,
            slow_first_s: 3.0,
            restart_every_s: None,
            down_s: default_down_s(),
        }
    }
}

impl Faults {
    /// Parses `http500=0.1,stall=0.05,stall-s=2,slow-first-s=4`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut f = Faults::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("--inject '{part}' must look like http500=0.1"))?;
            let v: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("--inject '{part}': '{v}' is not a number"))?;
            match k.trim() {
                "stall-s" => f.stall_s = v.max(0.0),
                "slow-first-s" => f.slow_first_s = v.max(0.0),
                "restart" if v > 0.0 => f.restart_every_s = Some(v),
                "restart" => {
                    return Err(format!(
                        "--inject restart={v}: seconds between restarts must be more than 0"
                    ));
                }
                "down-s" => f.down_s = v.max(0.0),
                name => {
                    let kind = FaultKind::ALL
                        .iter()
                        .find(|(_, n)| *n == name)
                        .map(|(k, _)| *k)
                        .ok_or_else(|| {
                            format!(
                                "--inject: unknown fault '{name}' (known: {}, stall-s, slow-first-s, restart, down-s)",
                                FaultKind::ALL.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
                            )
                        })?;
                    if !(0.0..=1.0).contains(&v) {
                        return Err(format!(
                            "--inject {name}={v}: a rate is a probability in 0..1"
                        ));
                    }
                    if kind == FaultKind::ResetBefore {
                        f.reset_before = v;
                    } else {
                        f.rates.push((kind, v));
                    }
                }
            }
        }
        if f.rates.iter().map(|r| r.1).sum::<f64>() > 1.0 + 1e-9 {
            return Err("--inject: the rates add up to more than 1".into());
        }
        Ok(f)
    }

    /// The fault for a request whose uniform draw is `u` (0..1), if any.
    pub fn pick(&self, u: f64) -> Option<FaultKind> {
        let mut acc = 0.0;
        for (k, r) in &self.rates {
            acc += r;
            if u < acc {
                return Some(*k);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_pick() {
        let f = Faults::parse("http500=0.25,stall=0.25,stall-s=2").unwrap();
        assert!((f.stall_s - 2.0).abs() < f64::EPSILON);
        assert_eq!(f.pick(0.1), Some(FaultKind::Http500));
        assert_eq!(f.pick(0.3), Some(FaultKind::Stall));
        assert_eq!(f.pick(0.6), None);
        assert!(
            Faults::parse("boom=0.1")
                .unwrap_err()
                .contains("unknown fault 'boom'")
        );
        assert!(Faults::parse("http500=2").is_err());
        assert!(Faults::parse("http500=0.6,ctx400=0.6").is_err());
        let r = Faults::parse("restart=30,down-s=2").unwrap();
        assert_eq!(r.restart_every_s, Some(30.0));
        assert!((r.down_s - 2.0).abs() < f64::EPSILON);
        assert!(r.rates.is_empty());
        assert!(Faults::parse("restart=0").is_err());
    }
}
