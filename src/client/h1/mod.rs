//! servetop's own HTTP/1.1 client for streams to plain-http servers: the request's own task
//! writes the request, reads the response head and reads the body straight into the SSE decoder,
//! on a connection it holds for the request's life. There is no connection task and no body
//! channel between the socket and the fold: one wake-up per arrival, where a pooled hyper client
//! took two (its connection task, then the request's task through the body channel), which at a
//! thousand streams starting together was enough to leave sockets unread for tens of
//! milliseconds (docs/client-performance.md).
//!
//! Connections are kept alive and reused through a small pool (idle at most [`POOL_IDLE`], and
//! checked for a close the server already sent before reuse); every read carries the kernel's
//! receive time ([`rxtime`]). https goes through reqwest instead.

mod framing;

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker, ready};
use std::time::{Duration, Instant};

use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use super::held::Wakes;
use super::http::{POOL_IDLE, SendError};
use super::rxtime;
use framing::{Decoder, Head};

/// Largest single read: it already amortises the system call over dozens of SSE events.
pub const STREAM_READ_BUF: usize = 16 * 1024;

/// Largest error body kept.
const MAX_TEXT: usize = 1 << 20;

thread_local! {
    /// Where `recvmsg` puts the bytes before they are decoded: one per thread, not one per
    /// connection (16 KB × a thousand streams would be 16 MB).
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; STREAM_READ_BUF]);
}

/// What one read of a body brought.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Got {
    /// Bytes (their data, if any, handed out), with the kernel's receive time when it gave one.
    Bytes(Option<u64>),
    /// The body has ended.
    End,
}

/// A plain-TCP connection stamping its reads, held by one request at a time.
struct Conn {
    tcp: TcpStream,
    cmsg: Vec<u8>,
    /// Bytes read and not consumed yet (a head's tail, a partial chunk-size line)...
    buf: Vec<u8>,
    /// ...and the receive time of the read that brought them.
    buf_stamp: Option<u64>,
    /// When the runtime last woke the reader for this socket, through `noting`.
    wakes: Arc<Wakes>,
    noting: Waker,
}

/// A connection's leftover bytes are a partial line at most once the head is read; the read
/// that brought the head (up to [`STREAM_READ_BUF`]) would otherwise stay its room for the
/// connection's life, 16 KB a stream at C=10,000.
fn give_back_room(buf: &mut Vec<u8>) {
    if buf.capacity() > 1024 && buf.len() <= 512 {
        buf.shrink_to_fit();
    }
}

/// One read into the thread's scratch buffer, handed to `f` with its receive time (an empty
/// slice at the end of the stream).
/// The socket's readiness goes through the connection's own waker, which notes when the runtime
/// woke the reader (docs/metrics.md "Held reads").
///
/// A read short of the buffer has emptied the socket, so the next one answers EAGAIN: one such
/// read an event at one event a write. Skipping it (the readiness cleared after a short read)
/// halved the `recvmsg` calls of the paced C=10,000 case and left its CPU per token where it was
/// (6.62 s per million tokens both ways, four alternating runs): not done, since it would return
/// `WouldBlock` from `try_io` for a read that succeeded, against tokio's contract.
fn poll_recv<R>(
    tcp: &TcpStream,
    cmsg: &mut Vec<u8>,
    (wakes, noting): (&Wakes, &Waker),
    cx: &mut Context<'_>,
    mut f: impl FnMut(&[u8], Option<u64>) -> R,
) -> Poll<io::Result<R>> {
    let fd = tcp.as_raw_fd();
    wakes.register(cx.waker());
    let mut noted = Context::from_waker(noting);
    loop {
        ready!(tcp.poll_read_ready(&mut noted))?;
        let got = SCRATCH.with_borrow_mut(|scratch| {
            tcp.try_io(Interest::READABLE, || {
                rxtime::recv_stamped(fd, scratch, cmsg)
            })
            .map(|(n, ts)| f(&scratch[..n], ts))
        });
        match got {
            Ok(r) => return Poll::Ready(Ok(r)),
            // Readiness was stale: try_io cleared it; wait again.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

impl Conn {
    async fn connect(host: &str, port: u16) -> io::Result<Conn> {
        rxtime::keep_stamping_on();
        let tcp = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect((host, port)))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "tcp connect timed out"))??;
        tcp.set_nodelay(true)?;
        // Linux acknowledges each small event as a read empties the socket (at one event a
        // write and C=10,000, sending those ACKs and taking them in on loopback was 13 % of the
        // client's CPU). `TCP_QUICKACK` off would halve them, but a server that leaves Nagle's
        // algorithm on holds its next small write for the ACK, and its stream would stall by the
        // delayed-ACK timer (40 ms): the client would measure its own doing. Left as Linux does.
        rxtime::stamp_receives(&tcp);
        let (wakes, noting) = Wakes::new();
        Ok(Conn {
            tcp,
            cmsg: rxtime::cmsg_space(),
            buf: Vec::new(),
            buf_stamp: None,
            wakes,
            noting,
        })
    }

    /// Nothing is waiting on an idle connection: no close from the server, no stray bytes.
    fn idle_and_open(&self) -> bool {
        let mut b = [0u8; 1];
        let peek = nix::sys::socket::recv(
            self.tcp.as_raw_fd(),
            &mut b,
            nix::sys::socket::MsgFlags::MSG_PEEK | nix::sys::socket::MsgFlags::MSG_DONTWAIT,
        );
        self.buf.is_empty() && peek == Err(nix::errno::Errno::EAGAIN)
    }

    /// Reads until a whole response head is in; the bytes after it stay in `buf`.
    async fn read_head(&mut self) -> Result<Head, String> {
        loop {
            if let Some((head, n)) = framing::parse_head(&self.buf)? {
                self.buf.drain(..n);
                give_back_room(&mut self.buf);
                return Ok(head);
            }
            let Conn {
                tcp,
                cmsg,
                buf,
                buf_stamp,
                wakes,
                noting,
            } = self;
            let n = poll_fn(|cx| {
                poll_recv(tcp, cmsg, (wakes, noting), cx, |b, ts| {
                    buf.extend_from_slice(b);
                    *buf_stamp = ts;
                    b.len()
                })
            })
            .await
            .map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("connection closed before message completed".into());
            }
        }
    }
}

/// The connections to one server.
#[derive(Debug)]
pub(crate) struct Pool {
    host: String,
    port: u16,
    /// The `host` header.
    authority: String,
    idle: Mutex<Vec<(Conn, Instant)>>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("tcp", &self.tcp)
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool for `base_url` (`http://host[:port]`, any path after it ignored); `None` for
    /// other schemes.
    pub(crate) fn new(base_url: &str) -> Option<Arc<Pool>> {
        let rest = base_url.strip_prefix("http://")?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => (h, p.parse().ok()?),
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        (!host.is_empty()).then(|| {
            Arc::new(Pool {
                host: host.to_string(),
                port,
                authority: authority.to_string(),
                idle: Mutex::new(Vec::new()),
            })
        })
    }

    /// The most recently used idle connection still open, if any (older ones are closed).
    fn checkout(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().ok()?;
        while let Some((c, since)) = idle.pop() {
            if since.elapsed() < POOL_IDLE && c.idle_and_open() {
                return Some(c);
            }
        }
        None
    }

    fn checkin(&self, c: Conn) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push((c, Instant::now()));
        }
    }

    /// Idle connections now in the pool.
    pub(crate) fn idle_count(&self) -> usize {
        self.idle.lock().map_or(0, |i| i.len())
    }

    /// Writes one request on a pooled connection (a new one when `fresh` or none is idle) and
    /// reads its response head.
    pub(crate) async fn send(
        self: &Arc<Self>,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        fresh: bool,
    ) -> Result<Response, SendError> {
        let pooled = if fresh { None } else { self.checkout() };
        let mut conn = match pooled {
            Some(c) => c,
            None => Conn::connect(&self.host, self.port)
                .await
                .map_err(|e| SendError {
                    message: format!("connect {}: {e}", self.authority),
                    connect: true,
                    timeout: false,
                })?,
        };
        let failed = |e: io::Error| SendError {
            message: format!("writing the request: {e}"),
            connect: false,
            timeout: false,
        };
        // One write for a typical request; a long prompt's body is written from where it is
        // rather than copied behind the head (a hundred 100K-token prompts in flight would
        // hold tens of MB of copies).
        let one_write = body.len() <= STREAM_READ_BUF;
        let room = if one_write { body.len() } else { 0 };
        let mut head =
            framing::request_head(method, path, &self.authority, headers, body.len(), room);
        if one_write {
            head.extend_from_slice(body);
            conn.tcp.write_all(&head).await.map_err(failed)?;
        } else {
            conn.tcp.write_all(&head).await.map_err(failed)?;
            conn.tcp.write_all(body).await.map_err(failed)?;
        }
        let failed = |message: String| SendError {
            message,
            connect: false,
            timeout: false,
        };
        let head = conn.read_head().await.map_err(failed)?;
        Ok(Response {
            head,
            body: Body {
                dec: Decoder::new(head.framing),
                conn: Some(conn),
                pool: self.clone(),
                close: head.close,
            },
        })
    }
}

/// A response whose head has been read.
#[derive(Debug)]
pub(crate) struct Response {
    head: Head,
    pub(crate) body: Body,
}

impl Response {
    pub(crate) fn status(&self) -> u16 {
        self.head.status
    }
}

/// A response's body, read from the connection it came on. Dropped before [`Body::release`],
/// the connection is closed.
#[derive(Debug)]
pub(crate) struct Body {
    conn: Option<Conn>,
    dec: Decoder,
    pool: Arc<Pool>,
    close: bool,
}

impl Body {
    /// When the runtime last woke the reader of this body's socket.
    pub(crate) fn woken(&self) -> Option<Instant> {
        self.conn.as_ref()?.wakes.last()
    }

    /// Waits for the body's next bytes and hands their data to `out`, with the kernel's
    /// receive time of the read that brought them (a read may bring framing only).
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut impl FnMut(&[u8], Option<u64>),
    ) -> Poll<Result<Got, String>> {
        let Some(conn) = self.conn.as_mut() else {
            return Poll::Ready(Ok(Got::End));
        };
        if self.dec.done() {
            return Poll::Ready(Ok(Got::End));
        }
        let Conn {
            tcp,
            cmsg,
            buf,
            buf_stamp,
            wakes,
            noting,
        } = conn;
        let dec = &mut self.dec;
        // Bytes that came with the head (or a partial line) first, with their read's time.
        if !buf.is_empty() {
            let stamp = *buf_stamp;
            let n = dec.decode(buf, &mut |d: &[u8]| out(d, stamp))?;
            buf.drain(..n);
            give_back_room(buf);
            if n > 0 {
                return Poll::Ready(Ok(Got::Bytes(*buf_stamp)));
            }
        }
        let got = ready!(poll_recv(tcp, cmsg, (wakes, noting), cx, |bytes, ts| {
            if bytes.is_empty() {
                return dec.eof().map(|()| Got::End);
            }
            *buf_stamp = ts;
            let out = &mut |d: &[u8]| out(d, ts);
            if buf.is_empty() {
                let n = dec.decode(bytes, out)?;
                buf.extend_from_slice(&bytes[n..]);
            } else {
                buf.extend_from_slice(bytes);
                let n = dec.decode(buf, out)?;
                buf.drain(..n);
                give_back_room(buf);
            }
            Ok(Got::Bytes(ts))
        }));
        Poll::Ready(got.map_err(|e| e.to_string()).and_then(|r| r))
    }

    /// Reads the whole body (at most 1 MB of it) as text, then releases the connection.
    pub(crate) async fn text(mut self) -> Result<String, String> {
        let mut v = Vec::new();
        while v.len() < MAX_TEXT {
            let more =
                poll_fn(|cx| self.poll_read(cx, &mut |b: &[u8], _| v.extend_from_slice(b))).await?;
            if more == Got::End {
                break;
            }
        }
        self.release();
        Ok(String::from_utf8_lossy(&v).into_owned())
    }

    /// The stream is over (its last event came): the connection goes back to the pool once the
    /// body has ended. A server may end it a moment after the last event (a separate last
    /// chunk), so what has arrived is read now and the rest, if any, by a small task.
    pub(crate) fn release(mut self) {
        if self.close {
            return;
        }
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            match self.poll_read(&mut cx, &mut |_: &[u8], _| {}) {
                Poll::Ready(Ok(Got::Bytes(_))) => {}
                Poll::Ready(Ok(Got::End)) => return self.checkin(),
                Poll::Ready(Err(_)) => return,
                Poll::Pending => break,
            }
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            let end = tokio::time::timeout(Duration::from_secs(2), async {
                loop {
                    match poll_fn(|cx| self.poll_read(cx, &mut |_: &[u8], _| {})).await {
                        Ok(Got::Bytes(_)) => {}
                        Ok(Got::End) => return true,
                        Err(_) => return false,
                    }
                }
            })
            .await;
            if end == Ok(true) {
                self.checkin();
            }
        });
    }

    fn checkin(&mut self) {
        if let Some(c) = self.conn.take()
            && self.dec.done()
            && c.buf.is_empty()
        {
            self.pool.checkin(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn pools_parse_their_server_from_the_base_url() {
        let p = Pool::new("http://127.0.0.1:8000").unwrap();
        assert_eq!(
            (p.host.as_str(), p.port, p.authority.as_str()),
            ("127.0.0.1", 8000, "127.0.0.1:8000")
        );
        let p = Pool::new("http://[::1]:9/v1").unwrap();
        assert_eq!((p.host.as_str(), p.port), ("::1", 9));
        let p = Pool::new("http://example.com").unwrap();
        assert_eq!((p.host.as_str(), p.port), ("example.com", 80));
        assert!(Pool::new("https://example.com").is_none());
    }

    /// A server answering each request on a connection with `reply`, counting connections.
    async fn server(reply: &'static [u8]) -> (String, Arc<std::sync::atomic::AtomicU32>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let conns = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let n = conns.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::spawn(async move {
                    let mut b = vec![0u8; 4096];
                    let mut got = Vec::new();
                    loop {
                        let Ok(k) = s.read(&mut b).await else { return };
                        if k == 0 {
                            return;
                        }
                        got.extend_from_slice(&b[..k]);
                        while let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                            got.drain(..i + 4);
                            if s.write_all(reply).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (url, conns)
    }

    async fn body_of(r: Response) -> String {
        r.body.text().await.unwrap()
    }

    #[tokio::test]
    async fn a_finished_body_puts_its_connection_back_for_the_next_request() {
        let (url, conns) =
            server(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
                .await;
        let pool = Pool::new(&url).unwrap();
        for _ in 0..3 {
            let r = pool.send("GET", "/", &[], b"", false).await.unwrap();
            assert_eq!(r.status(), 200);
            assert_eq!(body_of(r).await, "abc");
            assert_eq!(pool.idle_count(), 1);
        }
        assert_eq!(conns.load(std::sync::atomic::Ordering::Relaxed), 1);
        // A body dropped before its end closes its connection instead.
        let r = pool.send("GET", "/", &[], b"", false).await.unwrap();
        drop(r);
        assert_eq!(pool.idle_count(), 0);
    }

    /// A long prompt's body goes in its own write after the head; the server gets all of it.
    #[tokio::test]
    async fn a_body_longer_than_one_read_arrives_whole() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        // Reads the head, then exactly content-length bytes, and answers with their sum.
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut got = Vec::new();
            let mut b = vec![0u8; 65536];
            let (head_end, len) = loop {
                let k = s.read(&mut b).await.unwrap();
                got.extend_from_slice(&b[..k]);
                if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&got[..i]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .unwrap()
                        .parse()
                        .unwrap();
                    break (i + 4, len);
                }
            };
            while got.len() < head_end + len {
                let k = s.read(&mut b).await.unwrap();
                got.extend_from_slice(&b[..k]);
            }
            let sum: u64 = got[head_end..].iter().map(|&x| u64::from(x)).sum();
            let text = sum.to_string();
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{text}",
                text.len()
            );
            s.write_all(reply.as_bytes()).await.unwrap();
        });
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let want: u64 = body.iter().map(|&x| u64::from(x)).sum();
        let pool = Pool::new(&url).unwrap();
        let r = pool.send("POST", "/", &[], &body, false).await.unwrap();
        assert_eq!(body_of(r).await, want.to_string());
    }

    #[tokio::test]
    async fn a_server_that_closes_gets_a_new_connection_each_time() {
        let (url, conns) =
            server(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno")
                .await;
        let pool = Pool::new(&url).unwrap();
        for _ in 0..2 {
            let r = pool.send("POST", "/x", &[], b"{}", false).await.unwrap();
            assert_eq!(r.status(), 404);
            assert_eq!(body_of(r).await, "no");
            assert_eq!(pool.idle_count(), 0);
        }
        assert_eq!(conns.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn an_idle_connection_the_server_closed_is_not_reused() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let (closed_tx, mut closed) = tokio::sync::mpsc::unbounded_channel();
        // Answers one request per connection, then closes it (without saying so).
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut b = vec![0u8; 4096];
                let _ = s.read(&mut b).await;
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx")
                    .await;
                drop(s);
                let _ = closed_tx.send(());
            }
        });
        let pool = Pool::new(&url).unwrap();
        let r = pool.send("GET", "/", &[], b"", false).await.unwrap();
        assert_eq!(body_of(r).await, "x");
        assert_eq!(pool.idle_count(), 1);
        // Once the server's FIN has reached the idle connection, the next request opens a new
        // one instead of failing on it.
        closed.recv().await.unwrap();
        let mut waits = 0;
        while pool.idle.lock().unwrap()[0].0.idle_and_open() {
            waits += 1;
            assert!(waits < 100_000, "the close never reached the connection");
            tokio::task::yield_now().await;
        }
        let r = pool.send("GET", "/", &[], b"", false).await.unwrap();
        assert_eq!(body_of(r).await, "x");
    }
}
