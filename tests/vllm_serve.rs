//! `--serve` against a real vLLM (its CPU build, `scripts/vllm/setup.sh`): servetop starts it
//! with `--max-model-len 1024`, and a 2000-token length makes it restart vLLM with 4096, on the
//! same port, wait out its cold start, and measure the length. Without the venv the test says
//! why it skipped and passes; with `SERVETOP_REQUIRE_VLLM=1` (set by `.ci/run`) it must run.
//!
//! vLLM computes on core 0; servetop is kept to the others. Each start takes about 40 s on 2 cores.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod real_server;

use std::process::Command;

use real_server::vllm::{available, cache_dir, root};
use real_server::{cores, measured_by, results, server_contexts, server_gone, temp_run_dir};

#[test]
fn serve_restarts_vllm_with_a_larger_max_model_len() {
    if !available("serve_restarts_vllm_with_a_larger_max_model_len") {
        return;
    }
    let cmd = format!(
        "{} --port {{port}} --max-model-len {{context_len}}",
        root().join("scripts/vllm/serve.sh").display()
    );
    let dir = temp_run_dir("vllm-serve", "restart");
    let n = cores();
    let mut servetop = if n >= 2 {
        let mut c = Command::new("taskset");
        c.args([
            "-c",
            &format!("1-{}", n - 1),
            env!("CARGO_BIN_EXE_servetop"),
        ]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_servetop"))
    };
    let out = servetop
        .env("SERVETOP_VLLM_DIR", cache_dir())
        .args([
            "run",
            "--serve",
            &cmd,
            "--context-len",
            "1024",
            "--context-steps",
            "4096",
            "--serve-timeout",
            "400",
            "--concurrency",
            "none",
            "--long-context",
            "500,2000",
            "--long-context-output-len",
            "16",
            "--long-context-repeats",
            "1",
            "--headless",
            "--no-gpu",
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = results(&dir);
    assert_eq!(r["server"]["engine"], "vllm", "{stderr}");
    let servers = r["servers"].as_array().unwrap();
    assert_eq!(server_contexts(&r), [1024, 4096], "{stderr}");
    let port = servers[0]["port"].as_u64().unwrap();
    for s in servers {
        assert_eq!(s["port"].as_u64(), Some(port));
        // A cold start of a real engine: seconds, not the simulator's milliseconds.
        assert!(s["ready_s"].as_f64().unwrap() > 1.0, "{s}");
    }
    let done = |i| ("done".to_string(), i);
    assert_eq!(measured_by(&r), [done(0), done(1)], "{stderr}");
    // Read back from the restarted vLLM (/v1/models max_model_len), not taken from the flag.
    assert_eq!(r["server"]["context_limit"].as_u64(), Some(4096));
    assert!(server_gone(port), "a vLLM on port {port} outlived servetop");
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap();
    assert!(log.contains("vllm"), "server.log holds vLLM's output");
}
