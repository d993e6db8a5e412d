//! The two transports: hyper over plain TCP with kernel receive timestamps (the benchmark's
//! streams), reqwest for https and everything else; and their one response type.

use std::time::Duration;

use futures_util::StreamExt;

use super::{error_chain, rxtime};

/// hyper-util's pooled HTTP/1.1 client over plain TCP, its connections stamping arrivals with
/// the kernel's receive time ([`rxtime`]).
pub type PlainClient = hyper_util::client::legacy::Client<
    rxtime::StampedConnector,
    http_body_util::Full<bytes::Bytes>,
>;

/// Largest read buffer of one streaming connection. hyper grows a connection's buffer while reads
/// fill it, up to 400 KB: a client that falls behind a fast server (the point of a capacity test)
/// then holds 400 KB per stream, 150 MB at 1000 streams. Reads of 16 KB already amortise the
/// system call over dozens of SSE events.
pub const STREAM_READ_BUF: usize = 16 * 1024;

/// The client for streams to plain-http servers: the same pooling and timeouts as
/// [`http_client`], with the read buffer capped at [`STREAM_READ_BUF`] and kernel receive
/// timestamps on every connection.
pub fn plain_client() -> PlainClient {
    rxtime::keep_stamping_on();
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE)
        .http1_max_buf_size(STREAM_READ_BUF)
        .build(rxtime::StampedConnector)
}

/// A response from either transport.
pub(super) enum Resp {
    Plain(hyper::Response<hyper::body::Incoming>),
    Reqwest(reqwest::Response),
}

/// Why a request got no response.
pub(super) struct SendError {
    pub(super) message: String,
    /// The connection could not be made (nothing was sent).
    pub(super) connect: bool,
    pub(super) timeout: bool,
}

pub(super) type Chunks =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<bytes::Bytes, String>> + Send>>;

impl Resp {
    pub(super) fn status(&self) -> u16 {
        match self {
            Resp::Plain(r) => r.status().as_u16(),
            Resp::Reqwest(r) => r.status().as_u16(),
        }
    }

    /// The whole body as text (error responses); empty when it cannot be read.
    pub(super) async fn text(self) -> String {
        match self {
            Resp::Plain(r) => {
                use http_body_util::BodyExt;
                r.into_body()
                    .collect()
                    .await
                    .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                    .unwrap_or_default()
            }
            Resp::Reqwest(r) => r.text().await.unwrap_or_default(),
        }
    }

    /// The body as it arrives.
    pub(super) fn into_chunks(self) -> Chunks {
        match self {
            Resp::Plain(r) => {
                use http_body_util::BodyExt;
                Box::pin(
                    r.into_body()
                        .into_data_stream()
                        .map(|c| c.map_err(|e| error_chain(&e))),
                )
            }
            Resp::Reqwest(r) => Box::pin(r.bytes_stream().map(|c| c.map_err(|e| error_chain(&e)))),
        }
    }
}

/// How long an idle pooled connection is kept. Servers close idle keep-alive connections after
/// their own timeout: 5 s in llama-server (cpp-httplib) and in uvicorn (vLLM, SGLang). A
/// connection kept longer is reused just as the server closes it, and the request on it fails
/// ("connection closed before message completed"; seen against llama-server on the first
/// `/tokenize` after a 4.6 s level). Dropping it a second earlier than they do avoids the race.
pub const POOL_IDLE: Duration = Duration::from_secs(4);

/// The HTTP client used for benchmark traffic: pooled keep-alive connections, no proxy (a
/// proxy would add its own latency to every number), Nagle off.
pub fn http_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_idle_timeout(POOL_IDLE)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("servetop/", env!("CARGO_PKG_VERSION")))
        .build()
}
