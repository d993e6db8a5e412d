//! servetop binary: parse the command line, pick the command, exit with its code.

use clap::Parser;

fn main() {
    let cli = servetop::cli::Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("servetop: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = rt.block_on(async move {
        match cli.command {
            servetop::cli::Command::Run(a) => Box::pin(servetop::commands::run(a)).await,
            servetop::cli::Command::Sim(a) => servetop::commands::sim(a).await,
            servetop::cli::Command::Demo(a) => servetop::commands::demo(a).await,
            servetop::cli::Command::Gpu(a) => servetop::commands::gpu(&a).await,
            servetop::cli::Command::Report(a) => servetop::commands::report(&a),
            servetop::cli::Command::Soak(a) => servetop::commands::soak(a).await,
            servetop::cli::Command::BenchClient(a) => servetop::commands::bench_client(a).await,
            servetop::cli::Command::BenchCase(a) => servetop::commands::bench_case(a).await,
        }
    });
    // Let in-flight tasks notice the runtime going away before exiting with the code.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    std::process::exit(code);
}
