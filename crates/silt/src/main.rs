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
    // The reader of our output went away (`silt inspect f.parquet | head`): stop quietly, as
    // Unix tools do. Rust ignores SIGPIPE, so a write to the closed pipe fails: an error some
    // commands return (handled below), but a panic in `println!`, which every command's printing
    // uses. Only that panic is turned into a quiet exit; SIGPIPE itself stays ignored, so a
    // closed socket or a child's pipe is still an error where it happens.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        // A panic caught and reported as an error (a reader's on a damaged file).
        if silt_core::panics::quiet() {
            return;
        }
        default_hook(info);
    }));
    let code = match cmd::run(args) {
        Ok(code) => code,
        // The reader of our output went away (`silt tables | head`): stop quietly, as Unix
        // tools do.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
                    // Wrapped where the chain does not reach it (arrow's CSV writer).
                    || c.to_string().contains("Broken pipe (os error 32)")
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
