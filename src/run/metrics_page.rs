//! `--metrics-listen ADDR`: servetop's own Prometheus page, served over HTTP while the run goes.
//! The page's text is [`crate::export::prometheus::render`]'s; the run's sink rewrites it as the
//! files are flushed, and the handler here only reads it.

use std::sync::{Arc, Mutex};

/// Where the sink puts the page and the HTTP handler reads it.
pub type Page = Arc<Mutex<String>>;

/// Serves `page` at `/metrics` on `listener` until the process ends, on a thread of its own
/// below the streams' priority (a scrape never holds a read: `run::follower`).
pub fn serve(listener: std::net::TcpListener, page: Page) -> Result<(), String> {
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("--metrics-listen: {e}"))?;
    super::follower::detach("servetop-metrics", move || async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let page = page.clone();
                async move {
                    let text = page.lock().map(|p| p.clone()).unwrap_or_default();
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        text,
                    )
                }
            }),
        );
        let _ = axum::serve(listener, app).await;
    })
    .map_err(|e| format!("--metrics-listen: {e}"))
}

/// Listens on `addr` (`HOST:PORT`, or a port on every interface) and serves a new page there:
/// the page, and the address it is served at.
pub fn listen(addr: &str) -> Result<(Page, String), String> {
    let full = if addr.contains(':') {
        addr.to_string()
    } else {
        format!("0.0.0.0:{addr}")
    };
    let listener = std::net::TcpListener::bind(&full)
        .map_err(|e| format!("--metrics-listen {addr}: cannot listen there: {e}"))?;
    let bound = listener.local_addr().map_or(full, |a| a.to_string());
    let page = Page::default();
    serve(listener, page.clone())?;
    Ok((page, bound))
}
