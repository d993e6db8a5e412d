//! The two transports: servetop's own HTTP/1.1 client over plain TCP with kernel receive
//! timestamps (the benchmark's streams, [`super::h1`]), reqwest for https and everything else;
//! and their one response type.

use std::time::Duration;

use futures_util::StreamExt;

use super::{error_chain, h1};

/// A response from either transport.
pub(super) enum Resp {
    Own(h1::Response),
    Reqwest(reqwest::Response),
}

/// Why a request got no response (from either transport).
#[derive(Debug)]
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
            Resp::Own(r) => r.status(),
            Resp::Reqwest(r) => r.status().as_u16(),
        }
    }

    /// The whole body as text (error responses); empty when it cannot be read.
    pub(super) async fn text(self) -> String {
        match self {
            Resp::Own(r) => r.body.text().await.unwrap_or_default(),
            Resp::Reqwest(r) => r.text().await.unwrap_or_default(),
        }
    }

    /// The body as it arrives.
    pub(super) fn into_body(self) -> Body {
        match self {
            Resp::Own(r) => Body::Own(r.body),
            Resp::Reqwest(r) => Body::Chunks(Box::pin(
                r.bytes_stream().map(|c| c.map_err(|e| error_chain(&e))),
            )),
        }
    }
}

/// A response body as it arrives.
pub(super) enum Body {
    /// Read from the socket in the request's own task, with kernel receive times.
    Own(h1::Body),
    Chunks(Chunks),
}

impl Body {
    /// Waits for the body's next bytes and hands each piece of their data to `each`, with the
    /// kernel's receive time when known, before anything is copied (an SSE decoder's
    /// [`feed_framed`](super::sse::SseDecoder::feed_framed) takes the events where they lie).
    /// Cancel-safe: what was read is handed out.
    pub(super) async fn read_with(
        &mut self,
        mut each: impl FnMut(&[u8], Option<u64>),
    ) -> Result<h1::Got, String> {
        match self {
            Body::Own(b) => std::future::poll_fn(|cx| b.poll_read(cx, &mut each)).await,
            Body::Chunks(c) => match c.next().await {
                None => Ok(h1::Got::End),
                Some(Err(e)) => Err(e),
                Some(Ok(bytes)) => {
                    each(&bytes, None);
                    Ok(h1::Got::Bytes(None))
                }
            },
        }
    }

    /// When the runtime last woke this body's reader; `None` where that is not known
    /// (https, through reqwest).
    pub(super) fn woken(&self) -> Option<std::time::Instant> {
        match self {
            Body::Own(b) => b.woken(),
            Body::Chunks(_) => None,
        }
    }

    /// The stream ended well: its connection may serve the next request.
    pub(super) fn release(self) {
        if let Body::Own(b) = self {
            b.release();
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
/// proxy would add its own latency to every number), Nagle off; `headers` (`--header`) on
/// every request.
pub fn http_client(headers: &[(String, String)]) -> Result<reqwest::Client, String> {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        let n = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("--header {name}: {e}"))?;
        let v = reqwest::header::HeaderValue::from_str(value)
            .map_err(|e| format!("--header {name}: {e}"))?;
        map.append(n, v);
    }
    reqwest::Client::builder()
        .default_headers(map)
        .no_proxy()
        .tcp_nodelay(true)
        .pool_idle_timeout(POOL_IDLE)
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("servetop/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}
