//! `silt`: the command-line shell over the silt libraries. Each subcommand lives in `cmd/` and
//! only parses arguments, calls a library, and prints; the work is done in the crates.

mod cli;
mod cmd;
mod units;

use clap::Parser;

/// mimalloc instead of glibc malloc: readers of JSON-like formats allocate many small values per
/// record, and with glibc malloc the NDJSON conversions of the web-log benchmark took 1.5-1.7x
/// as long. The cost is peak RSS: 270-298 MiB against glibc's 166 MiB on 543k Zeek conn records
/// (docs/benchmarks.md, "Zeek TSV -> Parquet").
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
