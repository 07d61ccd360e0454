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
    let kafka = match &args.command {
        cli::Command::Serve(_) | cli::Command::Export(_) => true,
        cli::Command::Import(a) => a.format == "kafka",
        _ => false,
    };
    if !kafka {
        // The reader of our output went away (`silt inspect f.parquet | head`): end quietly as
        // Unix tools do, killed by SIGPIPE, instead of `println!` panicking on the closed pipe
        // (Rust ignores SIGPIPE). Rust's own sockets send with MSG_NOSIGNAL; librdkafka's TLS
        // connections may not, so not for the commands that talk to Kafka (nor for `serve`: a
        // server outlives whatever reads its standard output).
        // SAFETY: setting a signal's disposition to its default, before any other thread runs.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
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
            eprintln!("error: {}", error_text(&e));
            1
        }
    };
    std::process::exit(code);
}

/// An error and its causes, `: `-separated as `{:#}` gives them, leaving out a cause whose text
/// the message already holds: DataFusion's and parquet's errors repeat their source in their own
/// text, which `{:#}` printed two or three times over.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for c in e.chain() {
        let s = c.to_string();
        if text.contains(&s) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&s);
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_text_says_each_cause_once() {
        let inner = anyhow::anyhow!("No such file or directory (os error 2)");
        let e = inner
            .context("Object at location /x not found: No such file or directory (os error 2)")
            .context("reading /x");
        assert_eq!(
            super::error_text(&e),
            "reading /x: Object at location /x not found: No such file or directory (os error 2)"
        );
    }
}
