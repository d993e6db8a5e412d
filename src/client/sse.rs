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
}
