//! `silt`: the command-line shell over the silt libraries. Each subcommand lives in `cmd/` and
//! only parses arguments, calls a library, and prints; the work is done in the crates. No
//! command module imports another: what several share is in `opts` (flags to library options),
//! `progress` (the progress bar) and `render` (printing summaries and tables).

mod alloc;
mod cli;
mod cmd;
mod config;
mod opts;
mod progress;
mod render;
mod units;

use clap::Parser;

/// mimalloc for small blocks, glibc malloc for large ones: see [`alloc`] for the measurements.
#[global_allocator]
static GLOBAL: alloc::SplitAlloc = alloc::SplitAlloc;

fn main() {
    alloc::limit_arenas();
    tracing_subscriber::fmt()
        // SILT_LOG=debug (or any EnvFilter directive) for more; by default warnings, and what
        // the Kafka consumer does with its partitions.
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SILT_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,silt_serve::kafka=info")
            }),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = cli::Cli::parse();
    let code = match cmd::run(args) {
        Ok(code) => code,
        // The reader of our output went away (`silt tables | head`): stop quietly, as Unix
        // tools do.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            0
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}
