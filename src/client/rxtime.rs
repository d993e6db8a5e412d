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
//! How: every streaming connection (`client::h1`) turns the option on and reads with `recvmsg`;
//! each read reports the latest timestamp of the segments it returned, so an event can only be
//! stamped late, never early. Where the option is refused, reads carry no stamp and the client
//! stamps at read time as before.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};

/// When data stamped `t_ns` (ns since the Unix epoch) arrived, as an `Instant` no later than
/// `now` (read just now, at `unix_now_ns` on the wall clock). `None` when it is older than
/// `max_age` (a stale reading from before this response).
pub fn arrival(t_ns: u64, now: Instant, unix_now_ns: u64, max_age: Duration) -> Option<Instant> {
    let age = Duration::from_nanos(unix_now_ns.saturating_sub(t_ns));
    (age <= max_age).then(|| now.checked_sub(age)).flatten()
}

/// Nanoseconds since the Unix epoch.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Asks the kernel to stamp what this socket receives (best effort).
pub fn stamp_receives(sock: &impl std::os::fd::AsFd) {
    let _ = setsockopt(sock, sockopt::ReceiveTimestampns, &true);
}

/// Room for one receive timestamp's control message.
pub fn cmsg_space() -> Vec<u8> {
    nix::cmsg_space!(nix::sys::time::TimeSpec)
}

#[allow(
    clippy::ptr_arg,
    reason = "nix's recvmsg takes the control-message buffer as a Vec"
)]
/// One non-blocking `recvmsg` into `buf`: bytes read (0 at the end of the stream) and the
/// kernel's receive time of the latest segment read, if it gave one.
pub fn recv_stamped(
    fd: RawFd,
    buf: &mut [u8],
    cmsg: &mut Vec<u8>,
) -> io::Result<(usize, Option<u64>)> {
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg =
        recvmsg::<()>(fd, &mut iov, Some(cmsg), MsgFlags::MSG_DONTWAIT).map_err(io::Error::from)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use tokio::io::AsyncWriteExt;

    /// Data that waits in the socket while the reader is busy is stamped when it arrived, not
    /// when it was read.
    #[tokio::test]
    async fn arrival_is_when_the_kernel_got_it_not_when_it_was_read() {
        keep_stamping_on();
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
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        stamp_receives(&s);
        let mut cmsg = cmsg_space();
        // Linux turns receive stamping on for the whole stack from a deferred work item when the
        // first socket asks, so the first reads may go unstamped (a real run then falls back to
        // read time): ask again until a read is stamped, rather than guessing how long it takes.
        let mut tries = 0;
        let (ts, before, after, read_at) = loop {
            tries += 1;
            assert!(tries <= 50, "no receive timestamp after {tries} reads");
            s.write_all(b"g").await.unwrap();
            let (before, after) = rx.recv().await.unwrap();
            // The reader is busy for 150 ms while the bytes wait in the socket.
            std::thread::sleep(Duration::from_millis(150));
            let mut scratch = [0u8; 64];
            let (n, ts) = loop {
                s.readable().await.unwrap();
                let fd = s.as_raw_fd();
                match s.try_io(tokio::io::Interest::READABLE, || {
                    recv_stamped(fd, &mut scratch, &mut cmsg)
                }) {
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
        let now = Instant::now();
        let a = arrival(4_990_000_000, now, 5_000_000_000, Duration::from_secs(1)).unwrap();
        assert_eq!(now - a, Duration::from_millis(10));
        // Too old to belong to this read.
        assert_eq!(
            arrival(4_990_000_000, now, 7_000_000_000, Duration::from_secs(1)),
            None
        );
    }
}
