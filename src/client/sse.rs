//! Server-sent events framing over raw bytes, with no allocation and no copy per event.
//!
//! The client's hot path: at thousands of streams, every token is one SSE event, so the framing
//! must cost next to nothing. Bytes are appended as they arrive (one copy per network read, not
//! per event); the next complete event's `data` is found with a byte search and handed out as a
//! slice of that buffer. Only an event with several `data:` lines is joined into a reused buffer.
//!
//! It follows the HTML specification's parsing rules (lines end in CRLF, LF or CR; a blank line
//! dispatches; `:` starts a comment; one space after the colon is dropped; an event whose data
//! buffer is empty is not dispatched; a partial event at the end of the stream is dropped), and a
//! property test holds it to the `eventsource-stream` crate on random streams cut at random
//! points. `event`, `id` and `retry` fields are parsed past: no engine's token stream needs them.

use bytes::{Buf, BytesMut};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A buffer larger than this is given back once the events in it are out ([`SseDecoder::settle`]).
const KEEP: usize = 1024;

std::thread_local! {
    /// The room a decoder reads a large read into, one a thread: taken by [`SseDecoder::feed`]
    /// when the stream's own small buffer lacks room, put back by [`SseDecoder::settle`]. A
    /// stream keeps a small buffer between reads (at C=10,000 the memory), and growing it for
    /// each read of 16 events, then giving the room back, cost a new allocation, the copies of
    /// each doubling and a free every read: 4-5 % of the client's CPU at C=100 against the
    /// firehose (`BytesMut::reserve_inner` under the framing's feed). No await comes between a
    /// read's feed and its settle, so the room goes back to the thread it came from; a stream
    /// dropped between them frees it, and the next settle leaves another.
    static SPARE: std::cell::Cell<Option<BytesMut>> = const { std::cell::Cell::new(None) };
}

/// A room larger than this (a read of events of hundreds of KB) is freed, not kept as a
/// thread's spare for the rest of the run.
const SPARE_MAX: usize = 256 * 1024;

/// Incremental SSE decoder: [`feed`](Self::feed) bytes, then take events with
/// [`next_data`](Self::next_data) until it returns `None`.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Unconsumed bytes: the event being built starts at 0.
    buf: BytesMut,
    /// Where to look for the next line end.
    scan: usize,
    /// Byte ranges in `buf` of the current event's `data` values.
    data_lines: Vec<(usize, usize)>,
    /// Bytes of the event handed out last, dropped on the next call.
    consumed: usize,
    /// Several `data` lines joined with LF.
    joined: Vec<u8>,
    /// Past the optional byte-order mark at the start of the stream.
    started: bool,
    /// `buf` has more room than a stream keeps between reads (it grew past [`KEEP`], or it is
    /// the thread's spare). Noted as it grows: once bytes are consumed from its front,
    /// `BytesMut::capacity` counts only the room after them, and a buffer grown to one 16 KB read
    /// then consumed to a partial event reads as small.
    roomy: bool,
}

/// Where the first `\n\n` in `b` ends (a line's end and a blank line: an event's end).
fn blank_line_end(b: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'\n', &b[from..]) {
        let at = from + i;
        if b.get(at + 1) == Some(&b'\n') {
            return Some(at + 2);
        }
        from = at + 1;
    }
    None
}

/// What takes a stream's events from [`SseDecoder::feed_to`].
pub trait Folder {
    /// The event at the start of `b`, where it lies, as [`SseDecoder::next_with`]'s `read`:
    /// the bytes it took (a whole event with its blank line) and whether to read on, or `None`
    /// to leave it to the decoder.
    fn in_place(&mut self, b: &[u8]) -> Option<(bool, usize)>;
    /// Takes the decoder's complete events; `false` to stop.
    fn drain(&mut self, sse: &mut SseDecoder) -> bool;
}

impl SseDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.drop_consumed();
        let need = self.buf.len() + bytes.len();
        if !self.roomy
            && need > self.buf.capacity()
            && let Some(mut spare) = SPARE.take()
        {
            spare.clear();
            spare.extend_from_slice(&self.buf);
            self.buf = spare;
        }
        self.buf.extend_from_slice(bytes);
        self.roomy |= self.buf.capacity() > KEEP;
    }

    /// Appends `bytes` and hands their events to `to`, in order: an event that starts where
    /// the decoder stands at an event's start with nothing held is offered where it lies in
    /// `bytes` ([`Folder::in_place`]); the others are copied in and taken from the buffer
    /// ([`Folder::drain`]), a piece at a time up to the next blank line, so the events after
    /// them are again read in place. A stream's usual events then go from the socket's read to
    /// their parse with no copy between (measured against the firehose: 1.4-2.4 % less CPU per
    /// token at C=1, nothing measurable at C=100 or C=10,000; and the buffer no longer takes each
    /// read's size). Stops where `to` says to, the rest of `bytes` dropped; `false` then.
    pub fn feed_to(&mut self, mut bytes: &[u8], to: &mut impl Folder) -> bool {
        loop {
            self.drop_consumed();
            if self.started && self.buf.is_empty() && self.scan == 0 && self.data_lines.is_empty() {
                while let Some((go_on, took)) = to.in_place(bytes) {
                    debug_assert!(took > 0 && took <= bytes.len());
                    bytes = &bytes[took..];
                    if !go_on {
                        return false;
                    }
                }
            }
            if bytes.is_empty() {
                return true;
            }
            // Up to the end of the next blank line ("\n\n" always ends an event; one split
            // between the held bytes and these is found at the next, a copy of one event more).
            let upto = blank_line_end(bytes).unwrap_or(bytes.len());
            self.feed(&bytes[..upto]);
            bytes = &bytes[upto..];
            if !to.drain(self) {
                return false;
            }
        }
    }

    /// Bytes held for an event not yet complete.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.consumed
    }

    /// Gives back the buffer's room once the complete events in it are out, keeping only the
    /// partial event (a few hundred bytes) in a buffer of its size: a read of 16 KB grows it to
    /// 16 KB, and a stream keeps it while it waits for its next read, so at C=10,000 the
    /// decoders alone held 160 MB. Call it after [`next_data`](Self::next_data) returned `None`.
    pub fn settle(&mut self) {
        self.drop_consumed();
        if self.roomy && self.buf.len() <= KEEP / 2 {
            let small = if self.buf.is_empty() {
                BytesMut::new()
            } else {
                BytesMut::from(&self.buf[..])
            };
            let mut room = std::mem::replace(&mut self.buf, small);
            self.roomy = false;
            room.clear();
            // Empty, it takes back the room before its front: no allocation, since it grew
            // past KEEP.
            room.reserve(KEEP + 1);
            if room.capacity() <= SPARE_MAX {
                // The thread keeps the larger room.
                let kept = match SPARE.take() {
                    Some(other) if other.capacity() >= room.capacity() => other,
                    _ => room,
                };
                SPARE.set(Some(kept));
            }
        }
        if self.joined.capacity() > KEEP {
            self.joined = Vec::new();
        }
    }

    fn drop_consumed(&mut self) {
        if self.consumed > 0 {
            self.buf.advance(self.consumed);
            self.scan -= self.consumed;
            self.consumed = 0;
        }
    }

    /// What `read` makes of the bytes from the next event's start, when the decoder stands at
    /// one (no line of an event read yet): `read` returns its value and how many bytes it
    /// took, a whole event with the blank line that ends it, as [`next_data`](Self::next_data)
    /// would have taken them. `None` (the bytes left as they were) where the decoder is inside
    /// an event, or where `read` takes nothing.
    pub fn next_with<'s, T>(
        &'s mut self,
        read: impl FnOnce(&'s [u8]) -> Option<(T, usize)>,
    ) -> Option<T> {
        self.drop_consumed();
        if !self.started || self.scan != 0 || !self.data_lines.is_empty() {
            return None;
        }
        let (value, took) = read(&self.buf[..])?;
        debug_assert!(took > 0 && took <= self.buf.len());
        self.scan = took;
        self.consumed = took;
        Some(value)
    }

    /// The `data` of the next complete event, or `None` until more bytes arrive.
    pub fn next_data(&mut self) -> Option<&[u8]> {
        self.drop_consumed();
        if !self.started {
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return None;
            }
            if self.buf.starts_with(BOM) {
                self.buf.advance(BOM.len());
            }
            self.started = true;
        }
        loop {
            let rest = &self.buf[self.scan..];
            let i = memchr::memchr2(b'\n', b'\r', rest)?;
            let end_len = if rest[i] == b'\r' {
                // CR LF split across reads: wait for the next byte.
                match rest.get(i + 1) {
                    None => return None,
                    Some(b'\n') => 2,
                    Some(_) => 1,
                }
            } else {
                1
            };
            let (start, end) = (self.scan, self.scan + i);
            self.scan = end + end_len;
            if start == end {
                // A blank line: dispatch.
                let event_end = self.scan;
                match self.data_lines.len() {
                    0 => {
                        // Nothing to dispatch; the event's bytes go now.
                        self.buf.advance(event_end);
                        self.scan = 0;
                        continue;
                    }
                    1 => {
                        let (a, b) = self.data_lines[0];
                        self.data_lines.clear();
                        self.consumed = event_end;
                        return Some(&self.buf[a..b]);
                    }
                    _ => {
                        self.joined.clear();
                        for (k, &(a, b)) in self.data_lines.iter().enumerate() {
                            if k > 0 {
                                self.joined.push(b'\n');
                            }
                            self.joined.extend_from_slice(&self.buf[a..b]);
                        }
                        self.data_lines.clear();
                        self.consumed = event_end;
                        return Some(&self.joined);
                    }
                }
            }
            let line = &self.buf[start..end];
            if line[0] == b':' {
                continue;
            }
            let (name, value_start) = match memchr::memchr(b':', line) {
                Some(c) => {
                    let v = start + c + 1;
                    let v = if self.buf.get(v) == Some(&b' ') && v < end {
                        v + 1
                    } else {
                        v
                    };
                    (&line[..c], v)
                }
                None => (line, end),
            };
            if name == b"data" {
                self.data_lines.push((value_start, end));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]]) -> Vec<String> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c);
            while let Some(data) = d.next_data() {
                out.push(String::from_utf8_lossy(data).into_owned());
            }
        }
        out
    }

    #[test]
    fn events_lines_and_comments() {
        assert_eq!(decode(&[b"data: a\n\ndata:b\r\n\r\n"]), ["a", "b"]);
        assert_eq!(
            decode(&[b": keep-alive\n\ndata: x\rdata: y\r\r\n"]),
            ["x\ny"]
        );
        assert_eq!(
            decode(&[b"event: e\nid: 1\ndata:  two spaces\n\n"]),
            [" two spaces"]
        );
        assert_eq!(decode(&[b"data\n\n"]), [""]);
        assert!(decode(&[b"event: only\n\n"]).is_empty());
        assert!(decode(&[b"data: unterminated"]).is_empty());
    }

    #[test]
    fn split_anywhere_including_crlf_and_bom() {
        let s: &[u8] = b"\xEF\xBB\xBFdata: {\"a\":1}\r\n\r\ndata: [DONE]\r\n\r\n";
        for cut in 0..s.len() {
            assert_eq!(
                decode(&[&s[..cut], &s[cut..]]),
                ["{\"a\":1}", "[DONE]"],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn the_buffer_does_not_grow_with_the_stream() {
        let mut d = SseDecoder::new();
        for _ in 0..10_000 {
            d.feed(b"data: {\"choices\":[{\"text\":\" the\"}]}\n\ndata: {\"cho");
            while d.next_data().is_some() {}
            d.feed(b"ices\":[]}\n\n");
            while d.next_data().is_some() {}
        }
        assert_eq!(d.buffered(), 0);
        assert!(d.buf.capacity() < 4096, "capacity {}", d.buf.capacity());
    }

    /// Large reads go through the thread's spare room: a stream gives it back at its settle
    /// and keeps only its partial event, and the next stream's large read takes it, events
    /// whole across the handover.
    #[test]
    fn large_reads_share_the_threads_room() {
        let event = b"data: {\"choices\":[{\"text\":\" the\"}]}\n\n";
        let read: Vec<u8> = event.repeat(200);
        let (mut a, mut b) = (SseDecoder::new(), SseDecoder::new());
        let mut got = 0;
        for _ in 0..50 {
            for d in [&mut a, &mut b] {
                // A read that ends inside an event, then the rest of it.
                d.feed(&read);
                d.feed(&event[..10]);
                while d.next_data().is_some() {
                    got += 1;
                }
                d.settle();
                assert!(d.buf.capacity() <= KEEP, "kept {}", d.buf.capacity());
                let spare = SPARE.take();
                assert!(spare.as_ref().is_some_and(|s| s.capacity() >= read.len()));
                SPARE.set(spare);
                d.feed(&event[10..]);
                assert_eq!(d.next_data(), Some(&event[6..event.len() - 2]));
                got += 1;
                d.settle();
            }
        }
        assert_eq!(got, 2 * 50 * 201);
    }

    /// One read of 16 KB in one feed, ending inside an event, then consumed to that partial
    /// event: the stream gives the room back all the same (its front consumed, the buffer's
    /// capacity reads as small), and keeps only the partial event.
    #[test]
    fn one_large_read_consumed_to_a_partial_event_gives_its_room_back() {
        let event = b"data: {\"choices\":[{\"text\":\" the\"}]}\n\n";
        let mut read = event.repeat(16 * 1024 / event.len());
        read.extend_from_slice(&event[..20]);
        SPARE.set(None);
        let mut d = SseDecoder::new();
        d.feed(&read);
        while d.next_data().is_some() {}
        d.settle();
        assert_eq!(d.buffered(), 20);
        assert!(d.buf.capacity() <= KEEP, "kept {}", d.buf.capacity());
        let spare = SPARE.take().expect("the room went to the thread");
        assert!(
            spare.capacity() >= read.len() - 20,
            "spare {}",
            spare.capacity()
        );
        d.feed(&event[20..]);
        assert_eq!(d.next_data(), Some(&event[6..event.len() - 2]));
    }

    #[test]
    fn a_stream_that_starts_with_a_byte_order_mark() {
        // eventsource-stream 0.2.3 panics here (it slices the 3-byte BOM at byte 1).
        assert_eq!(decode(&[b"\xEF\xBB\xBFdata: a\n\n"]), ["a"]);
        assert_eq!(decode(&[b"\xEF", b"\xBB\xBFdata: a\n\n"]), ["a"]);
    }

    /// The reference: `eventsource-stream` over the same bytes, cut the same way (`Err` where it
    /// rejects or panics on the input).
    fn reference(chunks: &[Vec<u8>]) -> Result<Vec<String>, ()> {
        let chunks = chunks.to_vec();
        std::panic::catch_unwind(move || reference_inner(&chunks)).unwrap_or(Err(()))
    }

    fn reference_inner(chunks: &[Vec<u8>]) -> Result<Vec<String>, ()> {
        use eventsource_stream::Eventsource;
        use futures_util::StreamExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = futures_util::stream::iter(
                chunks
                    .iter()
                    .map(|c| Ok::<_, std::convert::Infallible>(bytes::Bytes::from(c.clone())))
                    .collect::<Vec<_>>(),
            );
            let mut ev = s.eventsource();
            let mut out = Vec::new();
            while let Some(e) = ev.next().await {
                out.push(e.map_err(|_| ())?.data);
            }
            Ok(out)
        })
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_eventsource_stream(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "data: ", "data:", "data", "event: x", ": c", "id: 7", "retry: 5", "\n", "\r\n",
                "\r", "{\"t\":\" the\"}", " ", "x", "é", "\u{feff}", ":", "dat", "a: ",
            ]), 0..60),
            cuts in proptest::collection::vec(0usize..400, 0..8),
        ) {
            let bytes: Vec<u8> = parts.concat().into_bytes();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points.into_iter().chain([bytes.len()]) {
                chunks.push(bytes[last..p].to_vec());
                last = p;
            }
            if let Ok(want) = reference(&chunks) {
                let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
                proptest::prop_assert_eq!(decode(&refs), want);
            }
        }
    }

    /// One event of a random stream: its text, its framing (what opens and closes it), how its
    /// data is over two lines (0 not, 1 two data lines, 2 a second line that is not data),
    /// whether it finishes, whether it is of the other kind than its stream's, its count.
    type RandomEvent = (String, (&'static str, &'static str), u8, bool, bool, u64);

    /// An event's bytes in a stream of chat or completions events whose events share a usage
    /// (`usage`: 0 vLLM's per-event counts, 1 none, 2 counts the shape must refuse).
    fn event_bytes(
        chat: bool,
        usage: u8,
        (text, (open, close), split, finish, other, n): RandomEvent,
    ) -> Vec<u8> {
        let usage = match usage {
            0 => format!(
                ",\"usage\":{{\"prompt_tokens\":32,\"completion_tokens\":{n},\"total_tokens\":{}}}",
                n + 32
            ),
            1 => String::new(),
            _ => format!(",\"usage\":{{\"prompt_tokens\":0{n},\"completion_tokens\":1}}"),
        };
        let finish = if finish { "\"length\"" } else { "null" };
        let mut e = if chat ^ other {
            format!(
                "{{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":{finish}}}]{usage}}}"
            )
        } else {
            format!(
                "{{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"finish_reason\":{finish}}}]{usage}}}"
            )
        };
        match split {
            // Data over two lines: joined with a line feed, white space to JSON.
            1 => e = e.replacen(",\"model\"", ",\ndata: \"model\"", 1),
            // A second line that is not a data line: the event's data is its first line alone,
            // though its bytes are a kept two-line event's but for the second `data: `.
            2 => e = e.replacen(",\"model\"", ",\n\"model\"", 1),
            _ => {}
        }
        format!("{open}{e}{close}").into_bytes()
    }

    /// Random streams: whether chat, their bytes (each event's too), where reads cut them.
    fn random_streams()
    -> impl proptest::strategy::Strategy<Value = (bool, Vec<Vec<u8>>, Vec<usize>)> {
        use proptest::prelude::*;
        let framing = prop_oneof![
            12 => Just(("data: ", "\n\n")),
            1 => Just(("data:", "\n\n")),
            1 => Just(("data: ", "\r\n\r\n")),
            1 => Just(("data: ", "\r\r")),
            1 => Just((": keep-alive\ndata: ", "\n\n")),
            1 => Just(("event: x\ndata: ", "\n\n")),
            1 => Just(("data:  ", "\n\n")),
            1 => Just(("data: ", " \n\n")),
            1 => Just(("data: ", "\n\n\n")),
            1 => Just(("", "\n\n")),
        ];
        let rare = || prop_oneof![16 => Just(false), 1 => Just(true)];
        let event = (
            prop_oneof![16 => "[a-z é]{0,5}", 1 => "[a-z\\\\\"\t]{0,3}"],
            framing,
            prop_oneof![14 => Just(0u8), 1 => Just(1), 1 => Just(2)],
            rare(),
            rare(),
            0u64..3000,
        );
        (
            any::<bool>(),
            any::<bool>(),
            prop_oneof![4 => Just(0u8), 4 => Just(1), 1 => Just(2)],
            proptest::collection::vec(event, 1..12),
            proptest::collection::vec(0usize..4000, 0..6),
        )
            .prop_map(|(chat, bom, usage, events, cuts)| {
                let mut parts = vec![if bom { BOM.to_vec() } else { Vec::new() }];
                parts.extend(events.into_iter().map(|e| event_bytes(chat, usage, e)));
                (chat, parts, cuts)
            })
    }

    /// Each event's parse of `chunks` read one after the other, taken where they start
    /// (`framed`, as the client reads them) or from their lines; how many were taken where they
    /// start.
    /// How a test reads a stream's events.
    #[derive(Clone, Copy, PartialEq)]
    enum Read {
        /// Each event's lines found first, its data parsed ([`SseDecoder::next_data`]).
        Lines,
        /// An event with the last one's shape read where it starts in the buffer
        /// ([`SseDecoder::next_with`]), the others by their lines.
        Where,
        /// Each read handed to [`SseDecoder::feed_to`]: events read where they lie in it.
        InPlace,
    }

    /// The events read from the buffer, the parse of each event where it starts and the
    /// stream's kept shape (the client's [`Folder`], without its fold).
    struct Taker<'a> {
        dialect: crate::client::dialect::Dialect,
        repeat: &'a mut crate::client::dialect::RepeatedBytes,
        out: &'a mut Vec<String>,
        short: usize,
        framed: bool,
    }

    impl Taker<'_> {
        fn take(&mut self, d: &mut SseDecoder) {
            use crate::client::dialect::{Raw, framed_in_stream, parse_raw_in_stream};
            loop {
                if self.framed
                    && let Some(got) = d.next_with(|b| {
                        let (c, took) = framed_in_stream(self.dialect, b, self.repeat)?;
                        Some((format!("{:?}", Ok::<_, String>(c)), took))
                    })
                {
                    self.out.push(got);
                    self.short += 1;
                    continue;
                }
                let Some(raw) = d.next_data() else { break };
                self.out.push(format!(
                    "{:?}",
                    parse_raw_in_stream(self.dialect, raw, self.repeat).map(|r| match r {
                        Raw::Chunk(c) => c,
                        other => panic!("no [DONE] is sent here: {other:?}"),
                    })
                ));
            }
        }
    }

    impl Folder for Taker<'_> {
        fn in_place(&mut self, b: &[u8]) -> Option<(bool, usize)> {
            let (c, took) = crate::client::dialect::framed_in_stream(self.dialect, b, self.repeat)?;
            self.out.push(format!("{:?}", Ok::<_, String>(c)));
            self.short += 1;
            Some((true, took))
        }

        fn drain(&mut self, d: &mut SseDecoder) -> bool {
            self.take(d);
            true
        }
    }

    fn read_events(
        chunks: &[&[u8]],
        dialect: crate::client::dialect::Dialect,
        how: Read,
    ) -> (Vec<String>, usize) {
        let (mut d, mut repeat) = (
            SseDecoder::new(),
            crate::client::dialect::RepeatedBytes::default(),
        );
        let mut out = Vec::new();
        let mut taker = Taker {
            dialect,
            repeat: &mut repeat,
            out: &mut out,
            short: 0,
            framed: how != Read::Lines,
        };
        for c in chunks {
            if how == Read::InPlace {
                assert!(d.feed_to(c, &mut taker), "nothing stops this reader");
            } else {
                d.feed(c);
                taker.take(&mut d);
            }
            d.settle();
        }
        let short = taker.short;
        (out, short)
    }

    /// A stream's events read where they start ([`SseDecoder::next_with`] with
    /// `dialect::framed_in_stream`, as the client reads them) give what finding each event's
    /// lines first and parsing its data gives ([`SseDecoder::next_data`] with
    /// `dialect::parse_raw_in_stream`), event by event, errors included: on random streams of
    /// completions and chat events, framed every way the format allows (no space after the
    /// colon, CR LF or CR line ends, comments and other fields, data over two lines, a line
    /// that is not data, white space, a byte-order mark), with texts and counts the shape must
    /// refuse, cut into reads at random points. The same events handed over in the reads as
    /// they came ([`SseDecoder::feed_to`], each usual one read where it lies in its read) give
    /// the same. And plainly framed events often take the short way, both ways.
    #[test]
    fn events_read_where_they_start_parse_as_their_lines_do() {
        use crate::client::dialect::Dialect;
        use proptest::strategy::{Strategy, ValueTree};
        let streams = random_streams();
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut events, mut short, mut plain, mut in_read) = (0, 0, 0, 0);
        for _ in 0..3000 {
            let (chat, parts, cuts) = streams.new_tree(&mut runner).unwrap().current();
            plain += parts
                .iter()
                .filter(|p| p.starts_with(b"data: {") && p.ends_with(b"}\n\n"))
                .count();
            let bytes = parts.concat();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut last = 0;
            for p in points.into_iter().chain([bytes.len()]) {
                chunks.push(&bytes[last..p]);
                last = p;
            }
            let dialect = if chat {
                Dialect::Chat
            } else {
                Dialect::Completions
            };
            let (want, _) = read_events(&chunks, dialect, Read::Lines);
            let (got, took) = read_events(&chunks, dialect, Read::Where);
            let stream = String::from_utf8_lossy(&bytes);
            assert_eq!(got, want, "{dialect:?} {stream:?}");
            let (got, took_in_read) = read_events(&chunks, dialect, Read::InPlace);
            assert_eq!(
                got, want,
                "read in place: {dialect:?} {stream:?} cut at {chunks:?}"
            );
            events += want.len();
            short += took;
            in_read += took_in_read;
        }
        assert!(events > 10_000, "{events} events");
        assert!(
            short * 3 > plain,
            "{short} of {plain} plainly framed events were read where they start"
        );
        assert!(
            in_read * 3 > plain,
            "{in_read} of {plain} plainly framed events were read in place"
        );
    }

    /// An event read in place only where the decoder stands at an event's start: a read that
    /// begins with a whole event of the kept shape, after a read that left the event before
    /// unfinished (a data line waiting for its blank line, a field, half a line), continues
    /// that event, as finding its lines does.
    #[test]
    fn a_read_after_an_unfinished_event_continues_it() {
        use crate::client::dialect::Dialect;
        let event = |n: u32| {
            format!(
                "data: {{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"model\":\"m\",\"choices\":[{{\"index\":0,\"text\":\" t{n}\",\"finish_reason\":null}}]}}\n\n"
            )
        };
        let (first, next) = (event(1), event(2));
        for unfinished in [
            "data: [\n",
            "data: [",
            "data: {\"a\":\n",
            ": c\n",
            "event: x\n",
            "\r",
            "da",
        ] {
            let chunks: [&[u8]; 3] = [first.as_bytes(), unfinished.as_bytes(), next.as_bytes()];
            let (want, _) = read_events(&chunks, Dialect::Completions, Read::Lines);
            let (got, _) = read_events(&chunks, Dialect::Completions, Read::InPlace);
            assert_eq!(got, want, "after {unfinished:?}");
        }
        // And where nothing is unfinished, the second event is read in place.
        let chunks: [&[u8]; 2] = [first.as_bytes(), next.as_bytes()];
        let (got, in_read) = read_events(&chunks, Dialect::Completions, Read::InPlace);
        assert_eq!(
            got,
            read_events(&chunks, Dialect::Completions, Read::Lines).0
        );
        assert_eq!(in_read, 1, "the second event in place");
    }
}
