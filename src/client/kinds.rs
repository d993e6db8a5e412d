//! What a chat stream's events were — thinking, the answer, tool calls — and the figures of
//! docs/metrics.md "Reasoning and tool calls" once the stream's chunks are settled.

use super::dialect;
use crate::metrics::{CountSource, FinalCounts, TokenChunk};

/// What a chat stream's events were (docs/metrics.md "Reasoning and tool calls"): the tokens
/// of each kind as the events were counted, and which token-carrying event first carried an
/// answer or a tool call (by position, so it can be found again among the chunks once events
/// are grouped into deliveries).
#[derive(Default)]
pub(super) struct KindFold {
    /// Token-carrying events so far.
    events: u32,
    reasoning_tokens: u64,
    other_tokens: u64,
    /// Token-carrying events before the first content event / tool-call event.
    first_content_event: Option<u32>,
    first_tool_event: Option<u32>,
    tool_indices: Vec<u32>,
    pub(super) usage_reasoning: Option<u64>,
    /// A literal `<think>` / `</think>` in the answer text.
    tags: TagScan,
}

/// Finds a literal `<think>` or `</think>` in answer text that arrives in pieces: a tag may
/// span events (`<`, `think`, `>`), so the last bytes of the one before are kept.
#[derive(Default)]
struct TagScan {
    tail: [u8; TagScan::KEEP],
    len: usize,
    found: bool,
}

impl TagScan {
    /// One byte short of the longest tag: all a tag can have in the pieces before.
    const KEEP: usize = b"</think>".len() - 1;

    fn feed(&mut self, text: &[u8]) {
        if self.found || text.is_empty() {
            return;
        }
        // A tag across the boundary starts in the tail and ends in the first KEEP bytes.
        let head = &text[..text.len().min(Self::KEEP)];
        let mut buf = [0u8; 2 * Self::KEEP];
        buf[..self.len].copy_from_slice(&self.tail[..self.len]);
        buf[self.len..self.len + head.len()].copy_from_slice(head);
        let joined = &buf[..self.len + head.len()];
        if has_tag(joined) || has_tag(text) {
            self.found = true;
            return;
        }
        let last = if text.len() >= Self::KEEP {
            text
        } else {
            joined
        };
        let keep = last.len().min(Self::KEEP);
        self.tail[..keep].copy_from_slice(&last[last.len() - keep..]);
        self.len = keep;
    }
}

fn has_tag(b: &[u8]) -> bool {
    use memchr::memmem::find;
    find(b, b"<think>").is_some() || find(b, b"</think>").is_some()
}

impl KindFold {
    /// Answer text (`delta.content`) as it arrives.
    pub(super) fn content(&mut self, text: &str) {
        self.tags.feed(text.as_bytes());
    }

    /// One token-carrying event of `n` tokens.
    pub(super) fn add(&mut self, kind: dialect::DeltaKind, n: u64, tool_indices: &[u32]) {
        use dialect::DeltaKind;
        // A silent event continues what came before: thinking, until an answer began.
        let kind = match kind {
            DeltaKind::Silent
                if self.reasoning_tokens > 0
                    && self.first_content_event.is_none()
                    && self.first_tool_event.is_none() =>
            {
                DeltaKind::Reasoning
            }
            DeltaKind::Silent => {
                self.other_tokens += n;
                self.events += 1;
                return;
            }
            k => k,
        };
        match kind {
            DeltaKind::Reasoning => self.reasoning_tokens += n,
            DeltaKind::Content => {
                self.other_tokens += n;
                self.first_content_event.get_or_insert(self.events);
            }
            DeltaKind::ToolCall => {
                // A tool call is the answer too: it begins there.
                self.other_tokens += n;
                self.first_content_event.get_or_insert(self.events);
                self.first_tool_event.get_or_insert(self.events);
            }
            DeltaKind::Silent => self.other_tokens += n,
        }
        for &i in tool_indices {
            if !self.tool_indices.contains(&i) {
                self.tool_indices.push(i);
            }
        }
        self.events += 1;
    }
}

/// A request's reasoning and tool-call figures, settled once its chunks are.
pub(super) struct Settled {
    pub(super) ttfc_us: Option<u64>,
    pub(super) reasoning_tokens: Option<u64>,
    pub(super) reasoning_source: Option<CountSource>,
    pub(super) first_tool_call_us: Option<u64>,
    pub(super) tool_calls: u32,
    pub(super) think_tags: bool,
}

impl KindFold {
    /// The figures of a stream whose final chunks (deliveries) are `chunks` and whose counts
    /// are `counts`: the first answer (tool call) is in the chunk that holds its event.
    ///
    /// `silent_rest`: the stream carries one token an event and the tokens no event carried
    /// were silent (llama.cpp's closing `</think>`): they go to the answer, not in proportion.
    pub(super) fn settle(
        self,
        chunks: &[TokenChunk],
        counts: &FinalCounts,
        silent_rest: bool,
    ) -> Settled {
        let time_of_event = |e: u32| {
            let mut seen = 0u32;
            chunks.iter().find_map(|c| {
                seen = seen.saturating_add(c.events);
                (seen > e).then_some(c.t_us)
            })
        };
        let n = counts.output_tokens;
        let counted = self.reasoning_tokens + self.other_tokens;
        let (reasoning_tokens, reasoning_source) = match self.usage_reasoning {
            // vLLM's deepseek_r1 counter reports 0 when the template opened `<think>` in the
            // prompt, whatever streamed as reasoning: a 0 against reasoning events is not a
            // count.
            Some(r) if r > 0 || self.reasoning_tokens == 0 => {
                (Some(r.min(n)), Some(CountSource::Usage))
            }
            None if self.reasoning_tokens == 0 => (None, None),
            // The events' own counts, rescaled so the kinds add up to the output total.
            _ => (
                Some(
                    if counted == n || counted == 0 || (silent_rest && counted < n) {
                        self.reasoning_tokens
                    } else {
                        ((self.reasoning_tokens as f64) * (n as f64) / (counted as f64)).round()
                            as u64
                    },
                ),
                Some(counts.chunk_source),
            ),
        };
        Settled {
            ttfc_us: self.first_content_event.and_then(time_of_event),
            reasoning_tokens,
            reasoning_source,
            first_tool_call_us: self.first_tool_event.and_then(time_of_event),
            tool_calls: u32::try_from(self.tool_indices.len()).unwrap_or(u32::MAX),
            think_tags: self.tags.found,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dialect::DeltaKind::{Content, Reasoning, Silent};

    fn chunk(t_us: u64, tokens: u32, events: u32) -> TokenChunk {
        TokenChunk {
            t_us,
            tokens,
            events,
        }
    }

    fn counts(output_tokens: u64) -> FinalCounts {
        FinalCounts {
            output_tokens,
            output_source: CountSource::Usage,
            chunk_source: CountSource::ChunkEstimate,
        }
    }

    /// Three thinking events, a silent one (the parser holding `</think>` back), two answer
    /// events; grouped into deliveries of 1, 2 and 3 events.
    fn fold() -> KindFold {
        let mut k = KindFold::default();
        for kind in [Reasoning, Reasoning, Reasoning, Silent, Content, Content] {
            k.add(kind, 1, &[]);
        }
        k
    }

    /// Whether the pieces, fed in order, hold a tag.
    fn tags_in(pieces: &[&str]) -> bool {
        let mut k = KindFold::default();
        for p in pieces {
            k.content(p);
        }
        k.tags.found
    }

    #[test]
    fn a_usage_count_of_zero_against_reasoning_events_is_not_taken() {
        let chunks = [chunk(10, 1, 1), chunk(20, 2, 2), chunk(30, 3, 3)];
        let mut k = fold();
        k.usage_reasoning = Some(0);
        let s = k.settle(&chunks, &counts(6), false);
        assert_eq!(s.reasoning_tokens, Some(4));
        assert_eq!(s.reasoning_source, Some(CountSource::ChunkEstimate));
        // A count above zero is the server's, and wins.
        let mut k = fold();
        k.usage_reasoning = Some(3);
        let s = k.settle(&chunks, &counts(6), false);
        assert_eq!(s.reasoning_tokens, Some(3));
        assert_eq!(s.reasoning_source, Some(CountSource::Usage));
    }

    #[test]
    fn a_literal_think_tag_is_found_whole_or_split_over_events() {
        assert!(tags_in(&["<think>"]));
        assert!(tags_in(&["well</think>so"]));
        assert!(tags_in(&["<", "think", ">"]));
        assert!(tags_in(&["a", "</", "th", "in", "k", ">", "b"]));
        assert!(tags_in(&["0123456789</thi", "nk>"]));
        assert!(tags_in(&["x<", "/think>"]));
        // Every split of the tag after a long piece.
        let t = "lorem ipsum dolor </think> sit";
        for cut in 1..t.len() {
            assert!(tags_in(&[&t[..cut], &t[cut..]]), "cut at {cut}");
        }
    }

    #[test]
    fn text_near_a_tag_is_not_one() {
        assert!(!tags_in(&["think about it"]));
        assert!(!tags_in(&["<thin", "g>", "think>"]));
        assert!(!tags_in(&["</thinker>", "<think", " >"]));
        assert!(!tags_in(&["<", "t", "h", "i", "n", "k", " ", ">"]));
        assert!(!tags_in(&[]));
    }

    #[test]
    fn the_first_answer_is_found_in_the_delivery_that_holds_its_event() {
        let chunks = [chunk(10, 1, 1), chunk(20, 2, 2), chunk(30, 3, 3)];
        let s = fold().settle(&chunks, &counts(6), false);
        // Events 0..6; the first answer is event 4, in the third delivery (events 3..6).
        assert_eq!(s.ttfc_us, Some(30));
        // The silent event before the answer was thinking: 4 of 6.
        assert_eq!(s.reasoning_tokens, Some(4));
        assert_eq!(s.reasoning_source, Some(CountSource::ChunkEstimate));
        assert_eq!(s.tool_calls, 0);
        assert_eq!(s.first_tool_call_us, None);
    }

    #[test]
    fn counted_kinds_are_rescaled_to_the_output_total_unless_the_server_said() {
        let chunks = [chunk(10, 6, 6)];
        // The usage says 12 tokens came in these 6 events: thinking keeps its share, 4 of 6.
        assert_eq!(
            fold().settle(&chunks, &counts(12), false).reasoning_tokens,
            Some(8)
        );
        // One token an event, the rest silent (llama.cpp's closing tag): thinking is its 4
        // events.
        assert_eq!(
            fold().settle(&chunks, &counts(12), true).reasoning_tokens,
            Some(4)
        );
        let mut told = fold();
        told.usage_reasoning = Some(5);
        let s = told.settle(&chunks, &counts(12), false);
        assert_eq!(s.reasoning_tokens, Some(5));
        assert_eq!(s.reasoning_source, Some(CountSource::Usage));
    }

    #[test]
    fn tool_calls_are_counted_by_index_and_begin_the_answer() {
        let mut k = KindFold::default();
        k.add(Reasoning, 2, &[]);
        k.add(dialect::DeltaKind::ToolCall, 1, &[0]);
        k.add(dialect::DeltaKind::ToolCall, 3, &[0]);
        k.add(dialect::DeltaKind::ToolCall, 1, &[1]);
        let chunks = [chunk(5, 2, 1), chunk(9, 1, 1), chunk(12, 4, 2)];
        let s = k.settle(&chunks, &counts(7), false);
        assert_eq!(s.tool_calls, 2);
        assert_eq!(s.first_tool_call_us, Some(9));
        assert_eq!(s.ttfc_us, Some(9));
        assert_eq!(s.reasoning_tokens, Some(2));
    }
}
