//! One module per subcommand.

pub mod bench;
pub mod compact;
pub mod convert;
pub mod ddl;
pub mod demo;
pub mod export;
pub mod generate;
pub mod import;
pub mod import_kafka;
pub mod index;
pub mod inspect;
pub mod query;
pub mod retain;
pub mod serve;
pub mod tables;
pub mod vacuum;
pub mod verify;

use crate::cli::{Cli, Command};

/// Runs a command; returns the process exit status.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Import(a) => import::run(a),
        Command::Query(a) => query::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Tables(a) => tables::run(a),
        Command::Export(a) => export::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Generate(a) => generate::run(a),
        Command::Ddl(a) => ddl::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Index(c) => index::run(c),
        Command::Compact(a) => compact::run(a),
        Command::Retain(a) => retain::run(a),
        Command::Vacuum(a) => vacuum::run(a),
        Command::Verify(a) => verify::run(a),
    }
}
