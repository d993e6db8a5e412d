//! Arrival times from the kernel: streaming connections ask Linux for the receive timestamp of
//! the data each read returns (`SO_TIMESTAMPNS`), so a token's arrival time is when it reached
//! this machine, not when a busy client got round to reading it.
//!
//! Why: at a thousand streams, an engine's decode step writes a thousand events at once, and one
//! core needs several milliseconds to read them all; stamped at read time, the last streams'
//! tokens would look late by that much (measured: p99 timing error of 9-13 ms at C=1000 with
//! read-time stamps, against the firehose simulator's record of its own writes). The kernel
//! stamps each segment as it is queued to the socket, whatever the client is doing.
//!
//! How: a connector for hyper-util's pooled client that opens the TCP connection itself, turns
//! the option on, and reads with `recvmsg`, keeping the latest timestamp in an [`RxClock`] that
//! rides along with every response (hyper-util puts a connector's "extra" into the response's
//! extensions). A read that takes several segments reports the latest one, so an event can only
//! be stamped late, never early. Where the option is refused, the clock stays at 0 and the client
//! stamps at read time as before.

use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use tokio::io::{AsyncWrite, Interest};
use tokio::net::TcpStream;

/// Largest single read (hyper's buffer is capped at the same size).
const READ_CHUNK: usize = super::STREAM_READ_BUF;

/// The kernel receive time of a connection's latest read, in ns since the Unix epoch (0 when the
/// kernel gives none).
#[derive(Clone, Debug, Default)]
pub struct RxClock(Arc<AtomicU64>);

impl RxClock {
    /// The latest receive time, ns since the epoch, if any.
    pub fn last_ns(&self) -> Option<u64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&t| t > 0)
    }

    /// When the data of the latest read arrived, as an `Instant` no later than `now` (read just
    /// now, at `unix_now_ns` on the wall clock). `None` without a timestamp, or when it is older
    /// than `max_age` (a stale reading from before this response).
    pub fn arrival(&self, now: Instant, unix_now_ns: u64, max_age: Duration) -> Option<Instant> {
        let t = self.last_ns()?;
        let age = Duration::from_nanos(unix_now_ns.saturating_sub(t));
        (age <= max_age).then(|| now.checked_sub(age)).flatten()
    }
}

/// Nanoseconds since the Unix epoch.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// A TCP stream that records kernel receive timestamps as it reads.
pub struct StampedStream {
    tcp: TcpStream,
    clock: RxClock,
    cmsg: Vec<u8>,
}

thread_local! {
    /// Where `recvmsg` puts the bytes before they are copied into hyper's buffer: one per thread,
    /// not one per connection (16 KB × a thousand streams would be 16 MB).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; READ_CHUNK]);
}

impl StampedStream {
    /// Wraps a connected stream; asks the kernel for receive timestamps (best effort).
    pub fn new(tcp: TcpStream) -> Self {
        let _ = setsockopt(&tcp, sockopt::ReceiveTimestampns, &true);
        Self {
            tcp,
            clock: RxClock::default(),
            cmsg: nix::cmsg_space!(nix::sys::time::TimeSpec),
        }
    }

    /// The clock this stream updates.
    pub fn clock(&self) -> RxClock {
        self.clock.clone()
    }

    /// One `recvmsg` into `scratch`: bytes read and the kernel's timestamp, if it gave one.
    fn read_stamped(&mut self, scratch: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
        let Self { tcp, cmsg, .. } = self;
        let fd = tcp.as_raw_fd();
        tcp.try_io(Interest::READABLE, || {
            let mut iov = [io::IoSliceMut::new(scratch)];
            let msg = recvmsg::<()>(fd, &mut iov, Some(cmsg), MsgFlags::empty())
                .map_err(io::Error::from)?;
            let mut ts = None;
            if let Ok(cmsgs) = msg.cmsgs() {
                for c in cmsgs {
                    if let ControlMessageOwned::ScmTimestampns(t) = c {
                        let ns = i128::from(t.tv_sec()) * 1_000_000_000 + i128::from(t.tv_nsec());
                        ts = u64::try_from(ns).ok();
                    }
                }
            }
            Ok((msg.bytes, ts))
        })
    }
}

impl hyper::rt::Read for StampedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.tcp.poll_read_ready(cx))?;
            let got = SCRATCH.with_borrow_mut(|scratch| {
                let want = buf.remaining().min(scratch.len());
                let r = this.read_stamped(&mut scratch[..want]);
                if let Ok((n, _)) = r {
                    buf.put_slice(&scratch[..n]);
                }
                r
            });
            match got {
                Ok((_, ts)) => {
                    // A read without a stamp clears the clock rather than leave an older one.
                    this.clock.0.store(ts.unwrap_or(0), Ordering::Relaxed);
                    return Poll::Ready(Ok(()));
                }
                // Readiness was stale: try_io cleared it; wait again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl hyper::rt::Write for StampedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }
}

impl Connection for StampedStream {
    fn connected(&self) -> Connected {
        Connected::new().extra(self.clock.clone())
    }
}

/// Linux stamps received packets only while some socket wants it, and turns that on and off
/// through a deferred work item: with servers that close every connection after one response
/// (llama-server), each new connection's first reads would go unstamped and mix read-time stamps
/// into a stream's kernel stamps. One idle socket that asks for stamps for the life of the
/// process keeps them on.
pub fn keep_stamping_on() {
    static KEEPER: std::sync::OnceLock<Option<std::net::UdpSocket>> = std::sync::OnceLock::new();
    KEEPER.get_or_init(|| {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
        setsockopt(&s, sockopt::ReceiveTimestampns, &true).ok()?;
        Some(s)
    });
}

/// Opens plain-TCP connections as [`StampedStream`]s (Nagle off, 10 s connect timeout).
#[derive(Clone, Debug, Default)]
pub struct StampedConnector;

impl tower_service::Service<Uri> for StampedConnector {
    type Response = StampedStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<StampedStream>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        keep_stamping_on();
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or_else(|| io::Error::other(format!("no host in {uri}")))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(80);
            let tcp = tokio::time::timeout(
                Duration::from_secs(10),
                TcpStream::connect((host.as_str(), port)),
            )
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "tcp connect timed out"))??;
            tcp.set_nodelay(true)?;
            Ok(StampedStream::new(tcp))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Data that waits in the socket while the reader is busy is stamped when it arrived, not
    /// when it was read.
    #[tokio::test]
    async fn arrival_is_when_the_kernel_got_it_not_when_it_was_read() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // Each byte the client sends asks for one write of "first", timed on the wall clock.
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            let mut go = [0u8; 1];
            while tokio::io::AsyncReadExt::read_exact(&mut s, &mut go)
                .await
                .is_ok()
            {
                let before = unix_now_ns();
                s.write_all(b"first").await.unwrap();
                let _ = tx.send((before, unix_now_ns()));
            }
        });
        let mut conn = StampedConnector;
        let uri: Uri = format!("http://{addr}").parse().unwrap();
        let mut s = tower_service::Service::call(&mut conn, uri).await.unwrap();
        // Linux turns receive stamping on for the whole stack from a deferred work item when the
        // first socket asks, so the first reads may go unstamped (a real run then falls back to
        // read time): ask again until a read is stamped, rather than guessing how long it takes.
        let mut tries = 0;
        let (ts, before, after, read_at) = loop {
            tries += 1;
            assert!(tries <= 50, "no receive timestamp after {tries} reads");
            s.tcp.write_all(b"g").await.unwrap();
            let (before, after) = rx.recv().await.unwrap();
            // The reader is busy for 150 ms while the bytes wait in the socket.
            std::thread::sleep(Duration::from_millis(150));
            let mut scratch = [0u8; 64];
            let (n, ts) = loop {
                s.tcp.readable().await.unwrap();
                match s.read_stamped(&mut scratch) {
                    Ok(r) => break r,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{e}"),
                }
            };
            let read_at = unix_now_ns();
            assert_eq!(&scratch[..n], b"first");
            assert!(read_at - before >= 150_000_000);
            if let Some(ts) = ts {
                break (ts, before, after, read_at);
            }
        };
        // Stamped within the write call (loopback delivers during it; 1 ms for the clocks'
        // granularity), so at least the 150 ms of the busy reader before the read.
        assert!(
            ts + 1_000_000 >= before && ts <= after + 1_000_000,
            "stamp {ts}, write {before}..{after}, read {read_at}"
        );
        assert!(read_at - ts >= 149_000_000, "stamp {ts}, read {read_at}");
        server.abort();
    }

    #[test]
    fn arrival_converts_the_wall_clock_stamp_to_an_instant() {
        let c = RxClock::default();
        let now = Instant::now();
        assert_eq!(c.arrival(now, 5_000_000_000, Duration::from_secs(1)), None);
        c.0.store(4_990_000_000, Ordering::Relaxed);
        let a = c
            .arrival(now, 5_000_000_000, Duration::from_secs(1))
            .unwrap();
        assert_eq!(now - a, Duration::from_millis(10));
        // Too old to belong to this read.
        assert_eq!(c.arrival(now, 7_000_000_000, Duration::from_secs(1)), None);
    }
}
