//! `servetop gpu`: what the GPU sampler sees.

/// `servetop gpu`: what the GPU sampler sees. Exits 0 with or without GPUs.
pub async fn gpu(a: &crate::cli::GpuArgs) -> i32 {
    loop {
        let reading = tokio::task::spawn_blocking(crate::telemetry::gpu::read_once)
            .await
            .unwrap_or_else(|e| Err(format!("sampler thread failed: {e}")));
        if a.json {
            let v = match &reading {
                Ok(s) => {
                    serde_json::json!({"available": true, "reason": null, "source": s.source, "gpus": s.gpus})
                }
                Err(r) => {
                    serde_json::json!({"available": false, "reason": r, "source": null, "gpus": []})
                }
            };
            println!("{v}");
        } else {
            match &reading {
                Ok(s) => {
                    for g in &s.gpus {
                        println!("{}", crate::telemetry::gpu_line(g));
                    }
                }
                Err(r) => println!("no NVIDIA GPU: {r}"),
            }
        }
        if a.once || reading.is_err() {
            return 0;
        }
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_secs_f64(a.interval.max(0.1))) => {}
            _ = tokio::signal::ctrl_c() => return 0,
        }
    }
}
