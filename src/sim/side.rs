//! The simulator's side endpoints, beside the serving ones of `http`: its own record
//! (`/sim/requests`) and SGLang's cache flush (`/flush_cache`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::http::{Shared, error};

/// SGLang's `/flush_cache`: empties the prefix cache (always: the simulator flushes while
/// requests run, where SGLang refuses with a 400) and records when. Without a prefix cache
/// (`--no-prefix-cache`) the simulator is a server that offers no way to clear one: a 404.
pub(super) async fn flush_cache(State(s): State<Shared>) -> Response {
    let Some(cache) = &s.cache else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clear();
    if let Ok(mut l) = s.log.lock() {
        l.cache_flushes.push_back(crate::metrics::unix_us());
        if l.cache_flushes.len() > super::log::LOG_CAP {
            l.cache_flushes.pop_front();
        }
    }
    (StatusCode::OK, "Cache flushed.\n").into_response()
}

pub(super) async fn sim_requests(State(s): State<Shared>) -> Response {
    let truth = match s.log.lock() {
        Ok(l) => super::truth::SimTruth::of(&l),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "simulator log poisoned"),
    };
    match &s.cache {
        Some(c) => match c.lock() {
            Ok(c) => Json(truth.with_cache(&c)).into_response(),
            Err(_) => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "simulator cache poisoned",
            ),
        },
        None => Json(truth).into_response(),
    }
}
