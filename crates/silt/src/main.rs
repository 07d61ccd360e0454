//! `silt`: the command-line shell over the silt libraries. Each subcommand lives in `cmd/` and
//! only parses arguments, calls a library, and prints; the work is done in the crates.

mod cli;
mod cmd;
mod units;

use clap::Parser;

/// mimalloc instead of glibc malloc: imports allocate and free many multi-megabyte column
/// buffers, which glibc serves with fresh mmap/munmap each time; a `perf` profile of `silt import`
/// showed page faults and page zeroing in its system time. The gain has not been measured on a
/// quiet machine yet (see docs/benchmarks.md).
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
