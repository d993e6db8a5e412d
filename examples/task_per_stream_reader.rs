//! The least a client built like servetop's can do: one tokio task a stream on a one-worker
//! runtime, each writing the reference reader's request and reading its answer with plain
//! `read`s, counting event ends (`\n\n`) as the reference reader does and nothing more: no
//! timestamps, no parse, no records.
//! Against the firehose it separates what tokio's task-per-stream model costs from what
//! servetop's own reads add (docs/client-performance.md, "A read's cost at ten thousand paced
//! streams"): compare its CPU per million tokens with `servetop bench-case --kind reference`
//! (one thread, `epoll`) and `--kind accuracy` on the same firehose.
//!
//! ```sh
//! taskset -c 0 servetop sim --firehose --port 0 --events-per-write 1 --decode-step-ms 20 &
//! taskset -c 1 cargo run --release --example task_per_stream_reader -- 127.0.0.1:PORT 10000 2
//! ```
//!
//! Arguments: the firehose's address, the streams, the requests each stream sends one after
//! another (50 output tokens each), and `stamped` to read as servetop does, with `recvmsg` and
//! the kernel's receive time of each read (`SO_TIMESTAMPNS`). The connections are opened before
//! the clock starts.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

use servetop::client::rxtime;
use servetop::selfbench::reference::{self, Response};
use servetop::telemetry::client_load::cpu_seconds_of;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// Output tokens a request asks for; its answer has one more event, `[DONE]`.
const OUTPUT: u64 = 50;

/// One read as servetop's streams read: `recvmsg` with the kernel's receive time of its latest
/// segment, through servetop's own call (`rxtime::recv_stamped`).
async fn recv_stamped(
    sock: &TcpStream,
    buf: &mut [u8],
    cmsg: &mut Vec<u8>,
) -> Result<usize, String> {
    let fd = sock.as_raw_fd();
    loop {
        sock.readable().await.map_err(|e| e.to_string())?;
        match sock.try_io(Interest::READABLE, || rxtime::recv_stamped(fd, buf, cmsg)) {
            Ok((n, stamp)) => {
                std::hint::black_box(stamp);
                return Ok(n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Sends `requests` requests on `sock`, one after another, each read to its body's end: the
/// token events read.
async fn stream(
    mut sock: TcpStream,
    request: Arc<Vec<u8>>,
    requests: u32,
    stamped: bool,
) -> Result<u64, String> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut cmsg = rxtime::cmsg_space();
    if stamped {
        rxtime::stamp_receives(&sock);
    }
    let mut tokens = 0;
    for _ in 0..requests {
        sock.write_all(&request).await.map_err(|e| e.to_string())?;
        let mut response = Response::default();
        loop {
            let got = if stamped {
                recv_stamped(&sock, &mut buf, &mut cmsg).await?
            } else {
                sock.read(&mut buf).await.map_err(|e| e.to_string())?
            };
            if got == 0 {
                return Err("the firehose closed a connection".into());
            }
            if response.scan(&buf[..got], OUTPUT + 1) {
                break;
            }
        }
        tokens += response.events - 1;
    }
    Ok(tokens)
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: task_per_stream_reader ADDR STREAMS REQUESTS_PER_STREAM [stamped]";
    let addr = args.get(1).ok_or(usage)?.clone();
    let streams: u32 = args.get(2).and_then(|a| a.parse().ok()).ok_or(usage)?;
    let requests: u32 = args.get(3).and_then(|a| a.parse().ok()).ok_or(usage)?;
    let stamped = match args.get(4).map(String::as_str) {
        None => false,
        Some("stamped") => true,
        Some(_) => return Err(usage.into()),
    };
    let request = Arc::new(reference::request(&addr, 32, OUTPUT as u32));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let socks = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..streams {
            let s = TcpStream::connect(&addr)
                .await
                .map_err(|e| format!("{addr}: {e}"))?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            v.push(s);
        }
        Ok::<_, String>(v)
    })?;
    let (cpu0, t0) = (cpu_seconds_of("self"), Instant::now());
    let tokens = rt.block_on(async {
        let tasks: Vec<_> = socks
            .into_iter()
            .map(|s| tokio::spawn(stream(s, request.clone(), requests, stamped)))
            .collect();
        let mut tokens = 0;
        for t in tasks {
            tokens += t.await.map_err(|e| e.to_string())??;
        }
        Ok::<_, String>(tokens)
    })?;
    let (cpu, secs) = (cpu_seconds_of("self") - cpu0, t0.elapsed().as_secs_f64());
    println!(
        "{tokens} tokens in {secs:.2} s: {:.0} tok/s, {cpu:.2} s of CPU, {:.2} s per million tokens",
        tokens as f64 / secs,
        cpu / tokens.max(1) as f64 * 1e6
    );
    Ok(())
}
