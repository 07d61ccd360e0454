//! `silt`: the command-line shell over the silt libraries. Each subcommand lives in `cmd/` and
//! only parses arguments, calls a library, and prints; the work is done in the crates.

mod cli;
mod cmd;
mod units;

use clap::Parser;

/// mimalloc instead of glibc malloc: imports allocate and free many multi-megabyte column
/// buffers, which glibc serves with fresh mmap/munmap each time (page faults and zeroing showed
/// up as a large share of system time in `perf` profiles of `silt import`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("SILT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let args = cli::Cli::parse();
    let code = match cmd::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}
