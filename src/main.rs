//! servetop binary: parse the command line, pick the command, exit with its code.

use clap::Parser;

fn main() {
    let cli = servetop::cli::Cli::parse();
    // Whatever panics, and however (a dead terminal can turn one into an abort), a server
    // servetop started goes first.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        servetop::serve::kill_all_now();
        default_hook(info);
    }));
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
            servetop::cli::Command::Run(a) => Box::pin(servetop::cmd::run::run(a)).await,
            servetop::cli::Command::Sim(a) => servetop::cmd::sim::sim(a).await,
            servetop::cli::Command::Demo(a) => servetop::cmd::demo::demo(a).await,
            servetop::cli::Command::Gpu(a) => servetop::cmd::gpu::gpu(&a).await,
            servetop::cli::Command::Report(a) => servetop::cmd::report::report(&a),
            servetop::cli::Command::Attach(a) => servetop::cmd::attach::attach(a).await,
            servetop::cli::Command::Tune(a) => Box::pin(servetop::cmd::tune::tune(a)).await,
            servetop::cli::Command::Soak(a) => servetop::cmd::selfbench::soak(a).await,
            servetop::cli::Command::BenchClient(a) => {
                servetop::cmd::selfbench::bench_client(a).await
            }
            servetop::cli::Command::BenchCase(a) => servetop::cmd::selfbench::bench_case(a).await,
        }
    });
    // Let in-flight tasks notice the runtime going away before exiting with the code.
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    std::process::exit(code);
}
