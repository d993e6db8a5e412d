//! The reference reader: the least a client can do to read the firehose's streams — one
//! thread, one fixed buffer, `epoll` over C keep-alive connections, each read scanned for event
//! ends (`\n\n`) and nothing more: no SSE parsing, no JSON, no timestamps, no records. Its
//! tokens/s against the same firehose, on the same core, in the same run, is the ceiling that
//! servetop's capacity is a ratio to (`ratio_to_reference`), so the figure means the same on a
//! fast machine and a slow one.
//!
//! Each connection runs a closed loop: write a streaming completion request, read until its
//! `[DONE]` event (the `output_len`-th event plus one) and the chunked body's end, then write
//! the next, until `requests` have been sent.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::Instant;

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use serde::{Deserialize, Serialize};

/// What the reference reader measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reading {
    pub requests: u64,
    /// Token events read (the `[DONE]` events not counted).
    pub tokens: u64,
    pub duration_s: f64,
    pub tokens_per_s: f64,
    /// This process's CPU (user + system) over the reading.
    pub cpu_s: f64,
    pub cpu_s_per_million_tokens: f64,
}

/// The end of a chunked body.
const BODY_END: &[u8] = b"0\r\n\r\n";

/// Where a reader stands in one streamed response: its event ends counted, and its last bytes.
#[derive(Debug, Default)]
pub struct Response {
    /// `\n\n` seen so far in this response.
    pub events: u64,
    /// The last bytes read, for an event end or the body's end split between two reads.
    tail: [u8; 4],
}

impl Response {
    /// Scans `bytes` of the response; whether it is over (its `events_per_response`-th event
    /// and the chunked body's end seen).
    pub fn scan(&mut self, bytes: &[u8], events_per_response: u64) -> bool {
        let mut prev = self.tail[3];
        for &b in bytes {
            if b == b'\n' && prev == b'\n' {
                self.events += 1;
            }
            prev = b;
        }
        let mut t = [0u8; 8];
        t[..4].copy_from_slice(&self.tail);
        let n = bytes.len().min(4);
        t[4..4 + n].copy_from_slice(&bytes[bytes.len() - n..]);
        let end = 4 + n;
        self.tail.copy_from_slice(&t[end - 4..end]);
        // The body's end comes right after the [DONE] event, in the same write.
        self.events >= events_per_response
            && t[..end].ends_with(&BODY_END[BODY_END.len().min(end)..])
            && self.tail.ends_with(&BODY_END[1..])
    }
}

/// One connection and its place in its current response.
struct Conn {
    sock: TcpStream,
    response: Response,
    busy: bool,
}

/// The streaming completion request the reference reader sends the firehose at `addr`
/// (`host:port`): `input_len` words of prompt, `output_len` tokens asked, end of sequence
/// ignored.
pub fn request(addr: &str, input_len: u64, output_len: u32) -> Vec<u8> {
    let prompt = "the ".repeat(input_len as usize);
    let body = serde_json::json!({
        "model": "firehose", "prompt": prompt, "max_tokens": output_len,
        "stream": true, "ignore_eos": true,
    })
    .to_string();
    format!(
        "POST /v1/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads `requests` streams of `output_len` tokens from the firehose at `addr` (`host:port`),
/// `concurrency` at a time.
pub fn read(
    addr: &str,
    concurrency: u32,
    requests: u32,
    input_len: u64,
    output_len: u32,
) -> Result<Reading, String> {
    let request = request(addr, input_len, output_len);
    let per_response = u64::from(output_len) + 1;
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| format!("epoll: {e}"))?;
    let mut conns = Vec::new();
    for i in 0..concurrency.min(requests) {
        let sock = TcpStream::connect(addr).map_err(|e| format!("reference reader {addr}: {e}"))?;
        sock.set_nodelay(true).map_err(|e| e.to_string())?;
        epoll
            .add(
                sock.as_fd(),
                EpollEvent::new(EpollFlags::EPOLLIN, u64::from(i)),
            )
            .map_err(|e| format!("epoll: {e}"))?;
        conns.push(Conn {
            sock,
            response: Response::default(),
            busy: false,
        });
    }
    let cpu0 = super::cpu_seconds();
    let start = Instant::now();
    let (mut sent, mut done, mut tokens) = (0u32, 0u32, 0u64);
    for c in &mut conns {
        c.sock.write_all(&request).map_err(|e| e.to_string())?;
        c.busy = true;
        sent += 1;
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut ready = vec![EpollEvent::empty(); 1024];
    while done < requests {
        let n = epoll
            .wait(&mut ready, EpollTimeout::from(10_000u16))
            .map_err(|e| format!("epoll: {e}"))?;
        if n == 0 {
            return Err(format!(
                "the reference reader waited 10 s for the firehose ({done} of {requests} done)"
            ));
        }
        for ev in &ready[..n] {
            let c = &mut conns[ev.data() as usize];
            let got = match c.sock.read(&mut buf) {
                Ok(0) => return Err("the firehose closed a connection".into()),
                Ok(got) => got,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e.to_string()),
            };
            if !c.busy || !c.response.scan(&buf[..got], per_response) {
                continue;
            }
            done += 1;
            tokens += c.response.events - 1;
            c.response = Response::default();
            c.busy = false;
            if sent < requests {
                c.sock.write_all(&request).map_err(|e| e.to_string())?;
                c.busy = true;
                sent += 1;
            }
        }
    }
    let duration_s = start.elapsed().as_secs_f64();
    let cpu_s = super::cpu_seconds() - cpu0;
    Ok(Reading {
        requests: u64::from(done),
        tokens,
        duration_s,
        tokens_per_s: tokens as f64 / duration_s.max(1e-9),
        cpu_s,
        cpu_s_per_million_tokens: if tokens > 0 {
            cpu_s / tokens as f64 * 1e6
        } else {
            0.0
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response cut anywhere into reads: the events are counted and the end found once, at
    /// the end.
    #[test]
    fn events_and_the_body_end_are_found_across_any_cut() {
        let body = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1e\r\ndata: {\"a\":1}\n\ndata: {\"a\":2}\n\n\r\n14\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";
        for cut in 1..body.len() {
            for step in [1, 3, cut] {
                let mut c = Response::default();
                let mut ends = Vec::new();
                let mut at = 0;
                while at < body.len() {
                    let to = (at + step).min(body.len());
                    ends.push(c.scan(&body[at..to], 3));
                    at = to;
                }
                assert_eq!(c.events, 3, "step {step}");
                assert_eq!(ends.iter().filter(|&&e| e).count(), 1, "step {step}");
                assert!(ends.last().copied().unwrap_or(false), "step {step}");
            }
        }
    }
}
