//! HTTP/1.1 message framing over raw bytes: the request head servetop writes, the response head
//! it reads, and the body's framing (chunked, `content-length`, or until the server closes),
//! decoded incrementally as bytes arrive, with no allocation per read.

/// Longest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;

/// What the response head says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) framing: Framing,
    /// The server closes the connection after this response.
    pub(crate) close: bool,
}

/// How the body's end is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    Chunked,
    Length(u64),
    /// The body lasts until the server closes the connection.
    Close,
}

/// A request head for a body of `body_len` bytes, with room for `room` more bytes after it (the
/// body itself, when it goes in the same write).
pub(crate) fn request_head(
    method: &str,
    path: &str,
    authority: &str,
    headers: &[(&str, &str)],
    body_len: usize,
    room: usize,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(256 + room);
    for part in [method, " ", path, " HTTP/1.1\r\nhost: ", authority, "\r\n"] {
        b.extend_from_slice(part.as_bytes());
    }
    for (k, v) in headers {
        for part in [k, ": ", v, "\r\n"] {
            b.extend_from_slice(part.as_bytes());
        }
    }
    if method != "GET" || body_len > 0 {
        b.extend_from_slice(b"content-length: ");
        b.extend_from_slice(itoa::Buffer::new().format(body_len).as_bytes());
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"\r\n");
    b
}

/// Parses a response head at the start of `buf`: the head and its length in bytes, or `None`
/// until the head is complete. Interim (1xx) responses are skipped.
pub(crate) fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, String> {
    let mut at = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(&buf[at..]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() - at > MAX_HEAD => {
                return Err(format!("response head longer than {MAX_HEAD} bytes"));
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(format!("invalid HTTP response: {e}")),
        };
        let status = resp.code.unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            at += n;
            continue;
        }
        let (mut chunked, mut length, mut close) = (false, None, resp.version == Some(0));
        for h in resp.headers.iter() {
            let v = std::str::from_utf8(h.value).unwrap_or("").trim();
            if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked |= v
                    .rsplit(',')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked"));
            } else if h.name.eq_ignore_ascii_case("content-length") {
                length = Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("invalid content-length {v:?}"))?,
                );
            } else if h.name.eq_ignore_ascii_case("connection") {
                for t in v.split(',') {
                    let t = t.trim();
                    if t.eq_ignore_ascii_case("close") {
                        close = true;
                    } else if t.eq_ignore_ascii_case("keep-alive") && resp.version == Some(0) {
                        close = false;
                    }
                }
            }
        }
        let framing = if chunked {
            Framing::Chunked
        } else if let Some(n) = length {
            Framing::Length(n)
        } else if status == 204 || status == 304 {
            Framing::Length(0)
        } else {
            Framing::Close
        };
        // A body delimited by the close cannot leave the connection reusable.
        let close = close || framing == Framing::Close;
        return Ok(Some((
            Head {
                status,
                framing,
                close,
            },
            at + n,
        )));
    }
}

/// Where a chunked body's decoder stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data, with this many bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last (zero-size) chunk: trailer lines up to a blank one.
    Trailer,
}

/// A response body's framing, decoded incrementally.
#[derive(Clone, Debug)]
pub(crate) struct Decoder {
    framing: Framing,
    chunk: Chunk,
    /// Body bytes left (`content-length` framing).
    left: u64,
    done: bool,
}

impl Decoder {
    pub(crate) fn new(framing: Framing) -> Self {
        let left = match framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        Self {
            framing,
            chunk: Chunk::Size,
            left,
            done: framing == Framing::Length(0),
        }
    }

    /// The body has ended.
    pub(crate) fn done(&self) -> bool {
        self.done
    }

    /// Decodes what it can of `input`, handing body data to `out`: the bytes consumed. What is
    /// left over (a partial chunk-size line) must be passed again, with more, on the next call.
    pub(crate) fn decode(
        &mut self,
        input: &[u8],
        out: &mut impl FnMut(&[u8]),
    ) -> Result<usize, String> {
        match self.framing {
            Framing::Close => {
                out(input);
                Ok(input.len())
            }
            Framing::Length(_) => {
                let n = (self.left.min(input.len() as u64)) as usize;
                if n > 0 {
                    out(&input[..n]);
                }
                self.left -= n as u64;
                self.done = self.left == 0;
                Ok(n)
            }
            Framing::Chunked => self.decode_chunked(input, out),
        }
    }

    fn decode_chunked(
        &mut self,
        input: &[u8],
        out: &mut impl FnMut(&[u8]),
    ) -> Result<usize, String> {
        let mut i = 0;
        while !self.done {
            let rest = &input[i..];
            match self.chunk {
                Chunk::Size | Chunk::Trailer => {
                    let Some(nl) = memchr::memchr(b'\n', rest) else {
                        if rest.len() > MAX_LINE {
                            return Err("chunk-size line too long".into());
                        }
                        break;
                    };
                    let line = rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]);
                    i += nl + 1;
                    if self.chunk == Chunk::Trailer {
                        self.done = line.is_empty();
                        continue;
                    }
                    let size = chunk_size(line)?;
                    self.chunk = if size == 0 {
                        Chunk::Trailer
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    let n = (left.min(rest.len() as u64)) as usize;
                    if n == 0 {
                        break;
                    }
                    out(&rest[..n]);
                    i += n;
                    self.chunk = if n as u64 == left {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left - n as u64)
                    };
                }
                Chunk::DataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        i += 2;
                        self.chunk = Chunk::Size;
                    }
                    [b'\n', ..] => {
                        i += 1;
                        self.chunk = Chunk::Size;
                    }
                    [] | [b'\r'] => break,
                    _ => return Err("chunk data not followed by CRLF".into()),
                },
            }
        }
        Ok(i)
    }

    /// The server closed the connection: the end of a close-delimited body, a cut otherwise.
    pub(crate) fn eof(&mut self) -> Result<(), String> {
        if self.framing == Framing::Close {
            self.done = true;
        }
        if self.done {
            Ok(())
        } else {
            Err("connection closed before the response body ended".into())
        }
    }
}

/// A chunk-size line's size (hex digits, optional extensions after `;`).
fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let digits = line
        .split(|&b| b == b';')
        .next()
        .unwrap_or(line)
        .trim_ascii();
    let text = std::str::from_utf8(digits).unwrap_or("");
    if text.is_empty() || text.len() > 15 {
        return Err(format!(
            "invalid chunk size {:?}",
            String::from_utf8_lossy(line)
        ));
    }
    u64::from_str_radix(text, 16)
        .map_err(|_| format!("invalid chunk size {:?}", String::from_utf8_lossy(line)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(framing: Framing, parts: &[&[u8]]) -> Result<(Vec<u8>, bool), String> {
        let mut d = Decoder::new(framing);
        let (mut body, mut pending) = (Vec::new(), Vec::new());
        for p in parts {
            pending.extend_from_slice(p);
            let n = d.decode(&pending, &mut |b| body.extend_from_slice(b))?;
            pending.drain(..n);
        }
        Ok((body, d.done()))
    }

    #[test]
    fn chunked_bodies_decode_with_extensions_and_trailers() {
        let wire = b"5;name=x\r\nhello\r\n7\r\n, world\r\n0\r\nx-trailer: 1\r\n\r\n";
        assert_eq!(
            decode_all(Framing::Chunked, &[wire]).unwrap(),
            (b"hello, world".to_vec(), true)
        );
        // A body that has not ended yet is not done.
        let (body, done) = decode_all(Framing::Chunked, &[b"5\r\nhel"]).unwrap();
        assert_eq!((body.as_slice(), done), (&b"hel"[..], false));
        assert!(decode_all(Framing::Chunked, &[b"zz\r\n"]).is_err());
        assert!(decode_all(Framing::Chunked, &[b"2\r\nabXY"]).is_err());
    }

    #[test]
    fn length_and_close_bodies_end_where_their_framing_says() {
        let (body, done) = decode_all(Framing::Length(5), &[b"hel", b"loEXTRA"]).unwrap();
        assert_eq!((body.as_slice(), done), (&b"hello"[..], true));
        let mut d = Decoder::new(Framing::Close);
        assert!(!d.done());
        assert!(d.eof().is_ok() && d.done());
        let mut cut = Decoder::new(Framing::Chunked);
        assert!(cut.eof().is_err());
    }

    #[test]
    fn heads_say_status_framing_and_whether_the_connection_stays() {
        let h = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n";
        let (head, n) = parse_head(h).unwrap().unwrap();
        assert_eq!(
            head,
            Head {
                status: 200,
                framing: Framing::Chunked,
                close: false
            }
        );
        assert_eq!(&h[n..], b"5\r\n");
        let (head, _) =
            parse_head(b"HTTP/1.1 400 Bad\r\ncontent-length: 3\r\nconnection: close\r\n\r\n")
                .unwrap()
                .unwrap();
        assert_eq!(
            (head.status, head.framing, head.close),
            (400, Framing::Length(3), true)
        );
        let (head, _) = parse_head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap();
        assert_eq!((head.framing, head.close), (Framing::Close, true));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-le").unwrap(), None);
        assert!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
    }

    #[test]
    fn a_request_head_says_its_bodys_length() {
        let headers = [("x-request-id", "a")];
        let mut r = request_head("POST", "/v1/completions", "h:1", &headers, 2, 2);
        r.extend_from_slice(b"{}");
        assert_eq!(
            r,
            b"POST /v1/completions HTTP/1.1\r\nhost: h:1\r\nx-request-id: a\r\ncontent-length: 2\r\n\r\n{}"
        );
        let g = request_head("GET", "/v1/models", "h:1", &[], 0, 0);
        assert_eq!(g, b"GET /v1/models HTTP/1.1\r\nhost: h:1\r\n\r\n");
    }

    proptest! {
        /// Any body, chunked at random sizes and cut into reads at random points, decodes to
        /// itself and ends exactly at the terminating chunk.
        #[test]
        fn chunked_decoding_survives_any_cut(
            body in proptest::collection::vec(any::<u8>(), 0..600),
            sizes in proptest::collection::vec(1usize..80, 1..20),
            cuts in proptest::collection::vec(0usize..700, 0..12),
        ) {
            let mut wire = Vec::new();
            let (mut at, mut k) = (0, 0);
            while at < body.len() {
                let n = sizes[k % sizes.len()].min(body.len() - at);
                wire.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                wire.extend_from_slice(&body[at..at + n]);
                wire.extend_from_slice(b"\r\n");
                at += n;
                k += 1;
            }
            wire.extend_from_slice(b"0\r\n\r\n");
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(wire.len())).collect();
            cuts.sort_unstable();
            let mut parts = Vec::new();
            let mut prev = 0;
            for c in cuts.into_iter().chain([wire.len()]) {
                parts.push(&wire[prev..c]);
                prev = c;
            }
            let (got, done) = decode_all(Framing::Chunked, &parts).unwrap();
            prop_assert_eq!(got, body);
            prop_assert!(done);
        }
    }
}
