//! One request end to end: the post (with one retry on a stale pooled connection), the status,
//! then the stream folded event by event into token chunks and counts, then the record.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::http::{Body, Resp};
use super::{
    Client, Failure, RequestSpec, RequestTag, bursts, dialect, failed_record, held, record_of,
    rxtime, sse, us_since,
};
use crate::client::dialect::{Dialect, is_context_error};
use crate::metrics::{
    ChunkCounting, CountSource, FailureKind, Finish, Outcome, RequestRecord, TokenChunk,
    finalize_counts,
};

/// What a stream has told so far, folded event by event.
struct StreamFold {
    dialect: Dialect,
    chunks: Vec<TokenChunk>,
    /// Token-carrying events so far (a chunk can hold several: see [`StreamFold::push`]).
    token_events: u32,
    /// How tokens per chunk are counted, fixed by the first chunk with text or a count.
    counting: Option<ChunkCounting>,
    /// The last cumulative completion count (exact engines).
    prev_cum: u64,
    usage_prompt: Option<u64>,
    usage_completion: Option<u64>,
    usage_cached: Option<u64>,
    finished: bool,
    length_stop: bool,
    /// `[DONE]` (Messages: `message_stop`) arrived.
    done: bool,
    /// Reasoning and tool calls, event by event.
    kinds: super::kinds::KindFold,
    held: HeldReads,
    /// What the stream's events repeat, parsed once.
    repeat: dialect::RepeatedBytes,
    /// Tokens of this read not yet added to the client's running count: added once a read,
    /// not once an event (an atomic add an event, at a million events a second).
    unshown: u64,
}

/// Token-carrying reads that were held (docs/metrics.md "Held reads"), and whether the first
/// token came in one.
#[derive(Default)]
struct HeldReads {
    reads: u32,
    first: bool,
}

/// Chunks a stream's record has room for before it grows (doubling). Not one a token: at
/// C=10,000 streams of 256 tokens that room alone was 41 MB, while a stream read in bursts
/// (several events a read) fills a fraction of it.
const CHUNKS_AHEAD: usize = 32;

impl StreamFold {
    /// Notes an event's `n` tokens, arrived at `at_us`. Where each event counts its own tokens
    /// (not one a chunk), events of one read become one chunk now: the deliveries they are
    /// merged into at the end ([`bursts::merge_deliveries`]) come out the same, and a stream of
    /// 256 events read in a dozen reads keeps a dozen chunks, not 256 (4 KB a stream at
    /// C=10,000). One token an event keeps its events apart: its steps are found from the gaps
    /// between them ([`bursts::group`]).
    fn push(&mut self, at_us: u64, n: u64, one_a_chunk: bool) {
        let n = n.min(u64::from(u32::MAX)) as u32;
        self.token_events = self.token_events.saturating_add(1);
        match self.chunks.last_mut() {
            Some(last) if !one_a_chunk && last.t_us == at_us => {
                last.tokens = last.tokens.saturating_add(n);
                last.events = last.events.saturating_add(1);
            }
            _ => self.chunks.push(TokenChunk::new(at_us, n)),
        }
    }
}

impl StreamFold {
    fn new(dialect: Dialect, max_tokens: u32) -> Self {
        Self {
            dialect,
            chunks: Vec::with_capacity((max_tokens as usize + 1).min(CHUNKS_AHEAD)),
            token_events: 0,
            counting: None,
            prev_cum: 0,
            usage_prompt: None,
            usage_completion: None,
            usage_cached: None,
            finished: false,
            length_stop: false,
            done: false,
            kinds: super::kinds::KindFold::default(),
            held: HeldReads::default(),
            repeat: dialect::RepeatedBytes::default(),
            unshown: 0,
        }
    }
}

impl Client {
    pub(super) async fn exchange(
        &self,
        spec: &RequestSpec,
        tag: RequestTag,
        reply: Option<&mut String>,
    ) -> RequestRecord {
        let (url, dialect) = self.route(spec);
        let body = match self.body_bytes(spec) {
            Ok(b) => bytes::Bytes::from(b),
            Err(e) => {
                return failed_record(
                    spec,
                    tag,
                    Instant::now(),
                    Failure::new(FailureKind::BadPayload, e.to_string()),
                    0,
                );
            }
        };
        self.wait_turn().await;
        // Boxed: the post's state (1.3 KB) is not the stream's, and a future holds room for
        // the largest of its states for its whole life, a stream's included.
        let (t_send, resp, retries) = match Box::pin(self.post_retrying(url, body, tag)).await {
            Ok(r) => r,
            Err((t_send, f, retries)) => return failed_record(spec, tag, t_send, f, retries),
        };
        let status = resp.status();
        if !(200..300).contains(&status) {
            let f = Box::pin(http_failure(status, resp)).await;
            return failed_record(spec, tag, t_send, f, retries);
        }
        let mut fold = StreamFold::new(dialect, spec.max_tokens);
        let mut body = resp.into_body();
        let failure = self.read_stream(&mut body, t_send, &mut fold, reply).await;
        let end = Instant::now();
        if failure.is_none() && (fold.done || fold.finished) {
            body.release();
        }
        let failure = failure.or_else(|| {
            (!fold.done && !fold.finished).then(|| {
                Failure::new(
                    FailureKind::StreamCut,
                    format!(
                        "stream ended after {} token events without a finish reason or [DONE]",
                        fold.token_events
                    ),
                )
            })
        });
        if let Some(f) = failure {
            return failed_record(spec, tag, t_send, f, retries);
        }
        self.ok_record(spec, tag, t_send, end, fold, retries)
    }

    /// Waits for this request's turn to be written: one request per pass of the scheduler, after
    /// the tasks already waiting to run (streams with data to read). A thousand streams ending
    /// together would otherwise write a thousand new requests in one burst while the other
    /// streams' sockets wait; a token left unread until the next one arrives loses its own
    /// arrival time (the kernel keeps one time for merged segments). When nothing else is
    /// waiting the turn costs a few microseconds. Before `t_send`: the request is not sent yet.
    async fn wait_turn(&self) {
        let _turn = self.write_turn.lock().await;
        tokio::task::yield_now().await;
    }

    /// Posts `body`: the send time and the response, or (with the send time) why there is
    /// none. A pooled keep-alive connection the server had already closed fails before any
    /// byte is answered; that is not the server failing the request, so it is retried once on
    /// a fresh connection (llama-server closes after every stream).
    async fn post_retrying(
        &self,
        url: &str,
        body: bytes::Bytes,
        tag: RequestTag,
    ) -> Result<(Instant, Resp, u32), (Instant, Failure, u32)> {
        // Engines log it (vLLM and SGLang take it as the request's id), and the firehose keys
        // its record of write times by it.
        let prefix = &self.opts.request_id_prefix;
        let request_id = if tag.warmup {
            format!("{prefix}-warmup-{}", tag.index)
        } else {
            format!("{prefix}-{}-{}", tag.level, tag.index)
        };
        let mut retries = 0u32;
        loop {
            let t_send = Instant::now();
            let sent = tokio::time::timeout(
                self.opts.first_token_timeout,
                self.post(url, &request_id, body.clone(), retries > 0),
            )
            .await;
            match sent {
                Err(_) => {
                    let f = Failure::new(
                        FailureKind::Timeout,
                        format!(
                            "no response headers within the first-token timeout of {:?}",
                            self.opts.first_token_timeout
                        ),
                    );
                    return Err((t_send, f, retries));
                }
                Ok(Ok(resp)) => return Ok((t_send, resp, retries)),
                Ok(Err(e)) => {
                    if !e.connect && !e.timeout && retries == 0 {
                        tracing::debug!(error = %e.message, "retrying on a fresh connection");
                        retries += 1;
                        continue;
                    }
                    let kind = if e.timeout {
                        FailureKind::Timeout
                    } else {
                        FailureKind::Connect
                    };
                    return Err((t_send, Failure::new(kind, e.message), retries));
                }
            }
        }
    }

    /// Reads the stream to its end, folding every event into `fold`; the failure that ended
    /// it early, if one did.
    async fn read_stream(
        &self,
        body: &mut Body,
        t_send: Instant,
        fold: &mut StreamFold,
        mut reply: Option<&mut String>,
    ) -> Option<Failure> {
        let mut last_arrival = t_send;
        // The previous read: a stall of the runtime after it may hold this read's arrivals.
        let mut last_read = t_send;
        let mut sse = sse::SseDecoder::new();
        // One timer for the whole stream, moved only when it fires early: resetting a timer on
        // every read would cost more than the read at thousands of streams.
        let mut deadline = t_send + self.opts.first_token_timeout;
        let timer = tokio::time::sleep_until(deadline.into());
        tokio::pin!(timer);
        loop {
            let events_before = fold.token_events;
            // When this read's events arrived, taken as its first data is handed out: its
            // events are folded there, the usual ones where they lie in the read
            // (SseDecoder::feed_to).
            let mut read_at: Option<ReadAt> = None;
            let mut to = ReadFold {
                client: self,
                fold: &mut *fold,
                at_us: 0,
                reply: reply.as_deref_mut(),
                ended: None,
            };
            let next = tokio::select! {
                biased;
                n = body.read_with(|piece, stamp| {
                    let at = read_at.get_or_insert_with(|| ReadAt::of(stamp, t_send, last_arrival));
                    to.at_us = at.at_us;
                    if to.ended.is_none() {
                        sse.feed_to(piece, &mut to);
                    }
                }) => n,
                () = &mut timer => {
                    if Instant::now() < deadline {
                        timer.as_mut().reset(deadline.into());
                        continue;
                    }
                    let msg = if to.fold.chunks.is_empty() {
                        format!(
                            "no token within the first-token timeout of {:?}",
                            self.opts.first_token_timeout
                        )
                    } else {
                        format!("stream idle for longer than {:?}", self.opts.idle_timeout)
                    };
                    return Some(Failure::new(FailureKind::Timeout, msg));
                }
            };
            let ended = to.ended;
            let stamp = match next {
                Ok(super::h1::Got::End) => return ended.and_then(Ended::failure),
                Err(e) => {
                    return Some(Failure::new(
                        FailureKind::StreamCut,
                        format!("stream error: {e}"),
                    ));
                }
                Ok(super::h1::Got::Bytes(stamp)) => stamp,
            };
            let ReadAt { now, arrival, .. } =
                read_at.unwrap_or_else(|| ReadAt::of(stamp, t_send, last_arrival));
            last_arrival = arrival;
            let since = std::mem::replace(&mut last_read, now);
            sse.settle();
            let unshown = std::mem::take(&mut fold.unshown);
            if unshown > 0 {
                self.live_tokens.fetch_add(unshown, Ordering::Relaxed);
            }
            // One token event cannot hold two arrivals of tokens: what came with it carries
            // none (a usage or [DONE] chunk, written right after the last token).
            if fold.token_events >= events_before + 2
                && held::held(
                    arrival,
                    body.woken(),
                    Duration::from_micros(bursts::DELIVERY_WINDOW_US),
                    &self.stalls,
                    since,
                    now,
                )
            {
                fold.held.reads += 1;
                fold.held.first |= events_before == 0;
            }
            if let Some(end) = ended {
                return end.failure();
            }
            if !fold.chunks.is_empty() {
                deadline = now + self.opts.idle_timeout;
            }
        }
    }

    /// Folds one SSE data payload (its bytes as they came) that arrived `at_us` after the send;
    /// `true` at `[DONE]` (or Messages' `message_stop`).
    fn fold_event(
        &self,
        fold: &mut StreamFold,
        raw: &[u8],
        at_us: u64,
        reply: Option<&mut String>,
    ) -> Result<bool, Failure> {
        let c = match dialect::parse_raw_in_stream(fold.dialect, raw, &mut fold.repeat)
            .map_err(|e| Failure::new(FailureKind::BadPayload, e))?
        {
            dialect::Raw::Empty => return Ok(false),
            dialect::Raw::Done => {
                fold.done = true;
                return Ok(true);
            }
            dialect::Raw::Chunk(c) => c,
        };
        self.fold_chunk(fold, &c, at_us, reply)
    }

    /// Folds one parsed event (see [`Self::fold_event`]).
    fn fold_chunk(
        &self,
        fold: &mut StreamFold,
        c: &dialect::ChunkData<'_>,
        at_us: u64,
        reply: Option<&mut String>,
    ) -> Result<bool, Failure> {
        let dialect = fold.dialect;
        if let Some(msg) = &c.error {
            let kind = if is_context_error(msg) {
                FailureKind::ContextTooLong
            } else {
                FailureKind::ServerError
            };
            return Err(Failure::new(kind, format!("error in stream: {msg}")));
        }
        if let Some(u) = c.usage {
            fold.kinds.usage_reasoning = u.reasoning_tokens.or(fold.kinds.usage_reasoning);
            fold.usage_prompt = u.prompt_tokens.or(fold.usage_prompt);
            fold.usage_cached = u.cached_tokens.or(fold.usage_cached);
            if !c.has_choice || dialect == Dialect::SglangNative {
                fold.usage_completion = u.completion_tokens.or(fold.usage_completion);
            } else if c.cumulative_completion.is_some() {
                fold.usage_completion = c.cumulative_completion;
            }
        }
        fold.finished |= c.finished;
        fold.length_stop |= c.length_stop;
        if c.end {
            fold.done = true;
            return Ok(true);
        }
        if !c.has_choice {
            return Ok(false);
        }
        if matches!(dialect, Dialect::Chat | Dialect::Messages) && !c.content.is_empty() {
            fold.kinds.content(&c.content);
        }
        if let Some(r) = reply {
            if dialect == Dialect::SglangNative {
                // SGLang resends the whole text so far.
                r.clear();
            }
            // The answer only: a chat client sends back no reasoning (docs/metrics.md).
            r.push_str(&c.content);
        }
        // A role-only opening chunk (chat) says nothing about how tokens are counted.
        if fold.counting.is_none() && c.cumulative_completion.is_none() && c.text.is_empty() {
            return Ok(false);
        }
        // The counting mode is fixed by the first chunk that carries text or a count.
        let mode = *fold
            .counting
            .get_or_insert_with(|| match (dialect, c.cumulative_completion) {
                (Dialect::SglangNative, Some(_)) => ChunkCounting::Exact(CountSource::EngineNative),
                (_, Some(_)) => ChunkCounting::Exact(CountSource::PerChunkUsage),
                _ if self.opts.tokenizer.is_some() => ChunkCounting::Tokenizer,
                _ => ChunkCounting::OnePerChunk,
            });
        let n = match (mode, c.cumulative_completion) {
            (ChunkCounting::Exact(_), Some(cum)) => {
                let n = cum.saturating_sub(fold.prev_cum);
                fold.prev_cum = fold.prev_cum.max(cum);
                n
            }
            (ChunkCounting::Tokenizer, _) => match &self.opts.tokenizer {
                Some(t) if !c.text.is_empty() => t
                    .encode(c.text.as_ref(), false)
                    .map_or(1, |e| e.len() as u64),
                _ => 0,
            },
            // Exact mode but this chunk lacks a count, or the estimate: one per content chunk.
            _ => u64::from(!c.text.is_empty()),
        };
        if n > 0 {
            fold.kinds.add(c.kind, n, &c.tool_indices);
            fold.unshown += n;
            fold.push(at_us, n, mode == ChunkCounting::OnePerChunk);
        }
        Ok(false)
    }

    /// The record of a stream that ended well: chunks grouped into deliveries, counts settled,
    /// unless the server cut the output at its context limit.
    fn ok_record(
        &self,
        spec: &RequestSpec,
        tag: RequestTag,
        t_send: Instant,
        end: Instant,
        fold: StreamFold,
        retries: u32,
    ) -> RequestRecord {
        let StreamFold {
            mut chunks,
            counting,
            usage_prompt,
            usage_completion,
            usage_cached,
            finished,
            length_stop,
            kinds,
            held,
            ..
        } = fold;
        let counting = counting.unwrap_or(ChunkCounting::OnePerChunk);
        // One event per token (no per-chunk counts): events of one speculative step arrive back
        // to back; group them into that step's chunk (see `bursts`). Exact per-chunk counts are
        // already one event per step. Then, for every engine, the events that reached the client
        // together become one delivery.
        if counting == ChunkCounting::OnePerChunk {
            bursts::group(&mut chunks);
        }
        bursts::merge_deliveries(&mut chunks);
        let event_counts = (counting == ChunkCounting::OnePerChunk)
            .then(|| chunks.iter().map(|c| c.tokens).collect::<Vec<_>>());
        let counts = finalize_counts(&mut chunks, counting, usage_completion);
        // The usage total spread over the chunks evenly: keep the chunks' own counts (one token
        // per event, summed per step or delivery) instead when they already add up to it.
        if let Some(b) = event_counts
            && b.iter().map(|&n| u64::from(n)).sum::<u64>() == counts.output_tokens
        {
            for (c, n) in chunks.iter_mut().zip(b) {
                c.tokens = n;
            }
        }
        let (input_tokens, input_source) = match (usage_prompt, spec.counted_input_tokens) {
            (Some(p), _) => (p, CountSource::Usage),
            (None, Some((n, src))) => (n, src),
            (None, None) => (spec.planned_input_tokens, CountSource::Planned),
        };
        if let Some(f) = self.context_cut(spec, length_stop, input_tokens, &counts) {
            return failed_record(spec, tag, t_send, f, retries);
        }
        let (ttft_us, e2e_us) = match crate::metrics::record::first_last(&chunks) {
            Some((a, b)) => (Some(a), Some(b)),
            None => (None, None),
        };
        // llama.cpp streams one token an event; the tokens of a `</think>` it forces or
        // swallows come in none.
        let silent_rest = self.engine == crate::client::Engine::Llamacpp
            && counting == ChunkCounting::OnePerChunk;
        let reasoning = kinds.settle(&chunks, &counts, silent_rest);
        RequestRecord {
            ttfc_us: reasoning.ttfc_us,
            reasoning_tokens: reasoning.reasoning_tokens,
            reasoning_source: reasoning.reasoning_source,
            first_tool_call_us: reasoning.first_tool_call_us,
            tool_calls: reasoning.tool_calls,
            input_tokens,
            input_source,
            output_tokens: counts.output_tokens,
            output_source: counts.output_source,
            chunk_source: counts.chunk_source,
            ttft_us,
            e2e_us,
            chunks,
            cached_tokens: usage_cached,
            held_reads: held.reads,
            first_held: held.first,
            finish: finished.then_some(if length_stop {
                Finish::Length
            } else {
                Finish::Stop
            }),
            think_tags: reasoning.think_tags,
            ..record_of(spec, tag, t_send, end, Outcome::Ok, retries)
        }
    }
}

/// A non-2xx answer as a failure: its status and the server's message (a context error when
/// the message says so).
async fn http_failure(status: u16, resp: Resp) -> Failure {
    let text = tokio::time::timeout(Duration::from_secs(5), resp.text())
        .await
        .unwrap_or_default();
    let message = dialect::http_error_message(&text);
    let kind = if is_context_error(&message) {
        FailureKind::ContextTooLong
    } else {
        FailureKind::HttpStatus
    };
    Failure {
        kind,
        message: format!("HTTP {status}: {message}"),
        http_status: Some(status),
    }
}

/// When a read's events arrived, and when it was read.
#[derive(Clone, Copy)]
struct ReadAt {
    /// When the read returned.
    now: Instant,
    /// When its events arrived: when the kernel received its last byte (or `now`, without a
    /// kernel timestamp), after the send and after the previous read's.
    arrival: Instant,
    /// `arrival` in µs after the send.
    at_us: u64,
}

impl ReadAt {
    fn of(stamp: Option<u64>, t_send: Instant, last_arrival: Instant) -> ReadAt {
        let now = Instant::now();
        let arrival = stamp
            .and_then(|t| rxtime::arrival(t, now, rxtime::unix_now_ns(), Duration::from_secs(5)))
            .unwrap_or(now)
            .max(last_arrival);
        ReadAt {
            now,
            arrival,
            at_us: us_since(t_send, arrival),
        }
    }
}

/// One read's events folded as the decoder hands them out ([`sse::Folder`]).
struct ReadFold<'a> {
    client: &'a Client,
    fold: &'a mut StreamFold,
    /// When the read's events arrived, µs after the send.
    at_us: u64,
    reply: Option<&'a mut String>,
    /// What ended the stream, if something did.
    ended: Option<Ended>,
}

/// What ended a stream in a read.
enum Ended {
    /// Its end (`[DONE]`, Messages' `message_stop`).
    Done,
    /// A failure in it.
    Failed(Failure),
}

impl Ended {
    fn failure(self) -> Option<Failure> {
        match self {
            Ended::Done => None,
            Ended::Failed(f) => Some(f),
        }
    }
}

impl ReadFold<'_> {
    /// Whether to read on after an event's fold; what ended the stream noted.
    fn go_on(&mut self, folded: Result<bool, Failure>) -> bool {
        match folded {
            Ok(false) => true,
            Ok(true) => {
                self.ended = Some(Ended::Done);
                false
            }
            Err(f) => {
                self.ended = Some(Ended::Failed(f));
                false
            }
        }
    }
}

impl sse::Folder for ReadFold<'_> {
    fn in_place(&mut self, b: &[u8]) -> Option<(bool, usize)> {
        let (c, took) = dialect::framed_in_stream(self.fold.dialect, b, &self.fold.repeat)?;
        let folded = self
            .client
            .fold_chunk(self.fold, &c, self.at_us, self.reply.as_deref_mut());
        Some((self.go_on(folded), took))
    }

    fn drain(&mut self, sse: &mut sse::SseDecoder) -> bool {
        loop {
            // An event with the last one's shape is read where it starts in the buffer; any
            // other is framed by the decoder first. Folded where it was read: the parse is not
            // moved (it is 200 bytes; moving it twice an event was 4 % of the client's CPU at
            // C=100 against the firehose).
            if let Some(go_on) = sse.next_with(|b| self.in_place(b)) {
                if !go_on {
                    return false;
                }
                continue;
            }
            let Some(raw) = sse.next_data() else {
                return true;
            };
            let folded =
                self.client
                    .fold_event(self.fold, raw, self.at_us, self.reply.as_deref_mut());
            if !self.go_on(folded) {
                return false;
            }
        }
    }
}
