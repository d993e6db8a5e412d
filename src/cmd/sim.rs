//! `servetop sim`: the built-in simulated server (or the firehose) until Ctrl-C.

use std::net::SocketAddr;
use std::time::Duration;

use super::fail;
use crate::cli::SimArgs;
use crate::cli::config::sim_config;
use crate::sim;

/// `servetop sim`.
pub async fn sim(a: SimArgs) -> i32 {
    if a.firehose {
        return firehose(&a).await;
    }
    let cfg = match sim_config(&a) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let addr: SocketAddr = match format!("{}:{}", a.host, a.port).parse() {
        Ok(a) => a,
        Err(e) => return fail(&format!("--host/--port: {e}")),
    };
    let handle = match sim::start(cfg.clone(), addr).await {
        Ok(h) => h,
        Err(e) => return fail(&format!("cannot serve on {addr}: {e}")),
    };
    println!("{}", handle.url());
    eprintln!(
        "SIMULATED server (preset {}) serving model {} at {} — context {} tokens, up to {} running, prefill {} tok/s, {} ms steps, accept length {}. Ctrl-C stops.",
        cfg.preset,
        cfg.model,
        handle.url(),
        cfg.context_length,
        cfg.max_running,
        crate::fmt::num(Some(cfg.prefill_tokens_per_s)),
        crate::fmt::num(Some(cfg.decode_step_ms)),
        crate::fmt::num(Some(cfg.accept_length.mean()))
    );
    let Some(every) = cfg.faults.restart_every_s else {
        let _ = tokio::signal::ctrl_c().await;
        handle.stop();
        return 0;
    };
    // Outages: serve for `every` seconds, go away for `down_s`, come back with a fresh engine.
    // Come back on the port actually bound (`--port 0` picks one once).
    let addr = handle.addr;
    let mut handle = handle;
    let down = cfg.faults.down_s;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    for n in 1u64.. {
        tokio::select! {
            _ = &mut ctrl_c => { handle.stop(); return 0; }
            () = tokio::time::sleep(Duration::from_secs_f64(every)) => {}
        }
        handle.stop();
        eprintln!("SIMULATED outage {n}: not serving for {down} s");
        tokio::select! {
            _ = &mut ctrl_c => return 0,
            () = tokio::time::sleep(Duration::from_secs_f64(down)) => {}
        }
        handle = match sim::start(cfg.clone(), addr).await {
            Ok(h) => h,
            Err(e) => return fail(&format!("cannot serve again on {addr}: {e}")),
        };
        eprintln!("SIMULATED restart {n}: serving again at {}", handle.url());
    }
    0
}

/// `servetop sim --firehose`.
async fn firehose(a: &SimArgs) -> i32 {
    let addr: SocketAddr = match format!("{}:{}", a.host, a.port).parse() {
        Ok(a) => a,
        Err(e) => return fail(&format!("--host/--port: {e}")),
    };
    let cfg = sim::firehose::FirehoseConfig {
        model: a.model.clone().unwrap_or_else(|| "sim/firehose".into()),
        context_length: a.context_length.unwrap_or(1 << 20),
        events_per_write: a.events_per_write.max(1),
        pace: a
            .decode_step_ms
            .filter(|&ms| ms > 0.0)
            .map(|ms| Duration::from_secs_f64(ms / 1000.0)),
        record_writes: a.record_writes,
    };
    let handle = match sim::firehose::start(cfg.clone(), addr).await {
        Ok(h) => h,
        Err(e) => return fail(&format!("cannot serve on {addr}: {e}")),
    };
    println!("{}", handle.url());
    eprintln!(
        "SIMULATED firehose serving model {} at {}: {} event(s) per write, {}. Ctrl-C stops.",
        cfg.model,
        handle.url(),
        cfg.events_per_write,
        cfg.pace
            .map_or("as fast as the socket takes them".to_string(), |p| format!(
                "one write every {p:?} per stream"
            ))
    );
    let _ = tokio::signal::ctrl_c().await;
    0
}
