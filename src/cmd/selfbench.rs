//! `servetop soak`, `servetop bench-client` and its child `bench-case`: servetop measuring
//! itself (see [`crate::selfbench`]).

use super::fail;

/// `servetop soak`: the long-run memory benchmark (see [`crate::selfbench::soak`]).
pub async fn soak(a: crate::cli::SoakArgs) -> i32 {
    if !(a.minutes > 0.0 && a.sample_s > 0.0 && a.concurrency > 0) {
        return fail("soak: --minutes, --sample-s and --concurrency must be more than 0");
    }
    if let Err(e) = crate::sim::faults::Faults::parse(&a.inject) {
        return fail(&e);
    }
    match tokio::task::spawn_blocking(move || crate::selfbench::soak::soak(&a)).await {
        Ok(Ok(r)) => {
            crate::selfbench::soak::print(&r);
            0
        }
        Ok(Err(e)) => {
            eprintln!("servetop: soak: {e}");
            1
        }
        Err(e) => {
            eprintln!("servetop: soak: {e}");
            1
        }
    }
}

/// `servetop bench-client` (see [`crate::selfbench`]).
pub async fn bench_client(a: crate::cli::BenchClientArgs) -> i32 {
    let json = a.json;
    if let Err(e) =
        crate::selfbench::check_agent_args(&a).and_then(|()| crate::selfbench::check_out(&a))
    {
        return fail(&e);
    }
    // Before any case: a socket a stream in each process (the client's case and the
    // firehose, processes of their own that inherit the limit); an agent case's users may
    // each hold one.
    let most = [
        &a.concurrency,
        &a.accuracy_concurrency,
        &a.wave_concurrency,
        &a.agent_sessions,
    ]
    .iter()
    .flat_map(|l| l.0.iter().copied())
    .max()
    .unwrap_or(0);
    if most > 0 {
        let what = format!("bench-client at C={most}");
        let checked = super::limits::ensure_local_ports(most, &what).and_then(|()| {
            super::limits::ensure_open_files(
                most,
                &what,
                "a socket a stream, in the client's process and in the firehose's",
            )
        });
        match checked {
            Ok(Some(line)) => eprintln!("servetop: {line}"),
            Ok(None) => {}
            Err(e) => return fail(&e),
        }
    }
    match tokio::task::spawn_blocking(move || crate::selfbench::bench_client(&a)).await {
        Ok(Ok(rows)) => {
            crate::selfbench::print(&rows, json);
            0
        }
        Ok(Err(e)) => {
            eprintln!("servetop: bench-client: {e}");
            1
        }
        Err(e) => {
            eprintln!("servetop: bench-client: {e}");
            1
        }
    }
}

/// One bench-client case (a child process): prints its result as one JSON line.
pub async fn bench_case(a: crate::cli::BenchCaseArgs) -> i32 {
    match crate::selfbench::case(a).await {
        Ok(r) => {
            println!("{}", serde_json::to_string(&r).unwrap_or_default());
            0
        }
        Err(e) => {
            eprintln!("servetop: bench-case: {e}");
            1
        }
    }
}
