//! What the client's tokens per chunk mean at a level: the speculative accept length, or
//! delivery bursts (docs/metrics.md "A chunk is a delivery", "tokens per chunk").
//!
//! With one chunk per decode step, tokens per chunk is the accept length the client sees. A
//! server that writes several events back to back also makes chunks of several tokens, and
//! those must never pass for drafts. The server is the judge: when it reports no speculation, or
//! tokens per step that disagree, tokens per chunk above 1 are bursts.

use super::LevelScalars;

/// Mean tokens per chunk above this carry more than one token per chunk in earnest (a chunk
/// estimate rescaled to the usage total reads a few percent above 1 without any burst).
pub const SEVERAL_TOKENS_PER_CHUNK: f64 = 1.05;
/// Relative difference between the client's and the server's figure taken as disagreement.
pub const DISAGREEMENT: f64 = 0.25;

/// The level's reading of its tokens per chunk.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChunkVerdict {
    /// Tokens per chunk above 1 are delivery bursts, not drafts.
    pub delivery_bursts: bool,
    /// What to tell the user, if anything.
    pub warning: Option<String>,
}

/// Judges `sc`'s tokens per chunk against the server's tokens per step, or its accept length
/// where it gives no step count (`None`: it reports no speculation).
pub fn chunk_verdict(sc: &LevelScalars, server: Option<f64>) -> ChunkVerdict {
    let Some(c) = sc.accept_length_client else {
        return ChunkVerdict::default();
    };
    let share = sc.multi_event_delivery_share.unwrap_or(0.0);
    let held = format!("{:.0} % of deliveries held several events", share * 100.0);
    match server {
        Some(s) if s > 0.0 && ((c - s) / s).abs() > DISAGREEMENT => {
            if c > s && share > 0.0 {
                ChunkVerdict {
                    delivery_bursts: true,
                    warning: Some(format!(
                        "the client saw {c:.2} tokens per chunk but the server reports {s:.2} tokens per step; {held}, so the extra tokens per chunk are delivery bursts, not drafts"
                    )),
                }
            } else {
                ChunkVerdict {
                    delivery_bursts: false,
                    warning: Some(format!(
                        "the client saw {c:.2} tokens per chunk but the server reports {s:.2} tokens per step; chunks are being merged or split on the way, so the client figure is not the accept length"
                    )),
                }
            }
        }
        None if c >= SEVERAL_TOKENS_PER_CHUNK && share > 0.0 => ChunkVerdict {
            delivery_bursts: true,
            warning: Some(format!(
                "{c:.2} tokens per chunk come from delivery bursts ({held}), not speculative decoding: the server reports none"
            )),
        },
        // The server agrees, or one token per chunk with nothing to explain.
        _ => ChunkVerdict::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalars(client: f64, share: f64) -> LevelScalars {
        LevelScalars {
            accept_length_client: Some(client),
            multi_event_delivery_share: Some(share),
            ..LevelScalars::default()
        }
    }

    #[test]
    fn bursts_without_speculation_are_not_drafts() {
        let v = chunk_verdict(&scalars(1.42, 0.3), None);
        assert!(v.delivery_bursts);
        let w = v.warning.unwrap();
        assert!(
            w.contains("1.42 tokens per chunk") && w.contains("30 %"),
            "{w}"
        );
    }

    #[test]
    fn speculation_the_server_confirms_is_the_accept_length() {
        assert_eq!(
            chunk_verdict(&scalars(3.7, 0.9), Some(3.9)),
            ChunkVerdict::default()
        );
        // One token per chunk and no speculation: nothing to say.
        assert_eq!(
            chunk_verdict(&scalars(1.0, 0.0), None),
            ChunkVerdict::default()
        );
        // A rescaled estimate a little above 1, with no multi-event delivery: nothing either.
        assert_eq!(
            chunk_verdict(&scalars(1.03, 0.0), None),
            ChunkVerdict::default()
        );
        assert_eq!(
            chunk_verdict(&scalars(1.2, 0.0), None),
            ChunkVerdict::default()
        );
    }

    #[test]
    fn more_tokens_per_chunk_than_the_server_accepts_are_bursts() {
        let v = chunk_verdict(&scalars(5.0, 0.6), Some(2.5));
        assert!(v.delivery_bursts);
        assert!(v.warning.unwrap().contains("delivery bursts"));
        // Fewer than the server says: split on the way; shown, with a warning.
        let v = chunk_verdict(&scalars(1.5, 0.0), Some(3.0));
        assert!(!v.delivery_bursts);
        assert!(v.warning.unwrap().contains("merged or split"));
    }
}
