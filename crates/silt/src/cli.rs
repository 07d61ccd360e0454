//! Command-line arguments (clap). Help texts here are the user's reference; keep them true.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::units::parse_bytes;

#[derive(Parser, Debug)]
#[command(
    name = "silt",
    version,
    about = "Security and network telemetry into a Parquet/Feather lake, queried with SQL",
    long_about = "silt reads Zeek (TSV and JSON) and Suricata EVE logs, turns them into Apache Arrow \
record batches with named schemas (zeek.conn, suricata.dns, ...), writes them into a Hive-partitioned \
lake of plain Parquet or Feather files (<lake>/zeek.conn/dt=2024-03-24/hour=17/<unique>.parquet), and \
answers SQL over the lake with Apache DataFusion. DuckDB, Spark, Trino and Athena read the same files.",
    after_help = "Examples:\n  silt demo\n  silt import zeek conn.log dns.log.gz ./zeek-logs/ --lake ./lake\n  \
cat eve.json | silt import suricata - --lake ./lake\n  silt query --lake ./lake \"SELECT id.orig_h, count(*) AS n FROM zeek.conn GROUP BY 1 ORDER BY n DESC LIMIT 10\"\n  \
silt tables --lake ./lake"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Import log files (or stdin) into a lake.
    #[command(
        after_help = "Examples:\n  silt import zeek conn.log dns.log.gz ./zeek-logs/ --lake ./lake\n  \
silt import suricata eve.json --lake ./lake\n  cat eve.json | silt import suricata - --lake ./lake\n  \
silt import auto ./mixed/ --lake ./lake --store feather --codec lz4\n\n\
Bad lines never stop an import: each is counted, reported with file:line and reason, and kept \
with its raw text in <lake>/_rejects/. Use --strict to exit non-zero when anything was rejected."
    )]
    Import(ImportArgs),
    /// Run SQL over a lake. Tables are named as they read: zeek.conn, suricata.dns, ...
    #[command(
        after_help = "Examples:\n  silt query --lake ./lake \"SELECT count(*) FROM zeek.conn\"\n  \
silt query --lake ./lake --stats \"SELECT * FROM zeek.conn WHERE ts >= TIMESTAMP '2018-03-24 17:00:00' AND uid = 'CXWv6p3arKYeMETxOg'\"\n  \
silt query --lake ./lake --format parquet -o top.parquet \"SELECT id.orig_h, count(*) FROM zeek.conn GROUP BY 1\"\n\n\
A predicate on a table's time column (ts for Zeek, timestamp for Suricata) prunes dt=/hour= \
directories by itself. cidr_contains(cidr, addr) tests subnet membership: \
WHERE cidr_contains('10.0.0.0/8', id.orig_h)."
    )]
    Query(QueryArgs),
    /// List the tables of a lake: rows, files, bytes, first and last event time.
    Tables(TablesArgs),
    /// Show what is inside a Parquet or Feather file: row groups, column chunks, encodings, statistics.
    Inspect(InspectArgs),
    /// Generate realistic sample telemetry, import it into a local lake, and run example queries.
    Demo(DemoArgs),
    /// Generate realistic synthetic Zeek logs or Suricata EVE (for tests, demos and benchmarks).
    Generate(GenerateArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportFormat {
    /// Zeek logs, TSV or JSON (decided per file).
    Zeek,
    /// Suricata EVE JSON.
    Suricata,
    /// Detect the format of each file from its content.
    Auto,
}

#[derive(Args, Debug, Clone)]
pub struct WriteOpts {
    /// File format of the lake's files.
    #[arg(long, default_value = "parquet", value_parser = ["parquet", "feather"])]
    pub store: String,
    /// Compression codec (feather: zstd, lz4 or none).
    #[arg(long, default_value = "zstd", value_parser = ["zstd", "snappy", "lz4", "gzip", "brotli", "none"])]
    pub codec: String,
    /// Codec level: zstd -7..22 (negative = faster; default 1), gzip 0..9, brotli 0..11.
    #[arg(long, allow_hyphen_values = true)]
    pub level: Option<i32>,
    /// Target compressed size of a Parquet row group (e.g. 32MiB, 134217728).
    #[arg(long, default_value = "32MiB", value_parser = parse_bytes)]
    pub row_group_size: usize,
    /// Target size of a Parquet data page.
    #[arg(long, default_value = "1MiB", value_parser = parse_bytes)]
    pub page_size: usize,
    /// Directory partitioning by event time.
    #[arg(long, default_value = "hour", value_parser = ["hour", "day", "none"])]
    pub partition: String,
    /// Sort keys within each file, comma separated column paths (default: the time column).
    #[arg(long, value_delimiter = ',')]
    pub sort: Vec<String>,
    /// Extra columns with Parquet bloom filters (comma separated paths such as id.orig_h), in
    /// addition to each table's lookup columns (uid, community_id, flow_id, addresses).
    #[arg(long, value_delimiter = ',')]
    pub bloom: Vec<String>,
    /// Do not add bloom filters on the tables' lookup columns.
    #[arg(long)]
    pub no_bloom: bool,
    /// Memory for buffered rows and in-progress row groups, all tables together.
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes)]
    pub memory: usize,
    /// Per-partition sort buffer: input out of order by less than about half of this still
    /// yields one sorted file per partition.
    #[arg(long, default_value = "32MiB", value_parser = parse_bytes)]
    pub sort_buffer: usize,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// Input format.
    #[arg(value_enum)]
    pub format: ImportFormat,
    /// Files, directories (read recursively) or - for standard input; gzip is detected.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Lake directory (created if missing).
    #[arg(long)]
    pub lake: PathBuf,
    #[command(flatten)]
    pub write: WriteOpts,
    /// Exit with status 2 if any line was rejected (everything valid is still imported).
    #[arg(long)]
    pub strict: bool,
    /// Do not show the progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Rows per record batch handed from readers to the writer.
    #[arg(long, default_value_t = 16384, hide = true)]
    pub batch_rows: usize,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Table,
    Csv,
    Json,
    Ndjson,
    Parquet,
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    /// Lake directory.
    #[arg(long)]
    pub lake: PathBuf,
    /// Output format (parquet needs -o).
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
    /// Write the result to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Print files, row groups and bytes scanned against the totals (to standard error).
    #[arg(long)]
    pub stats: bool,
    /// The SQL statement.
    pub sql: String,
}

#[derive(Args, Debug)]
pub struct TablesArgs {
    /// Lake directory.
    #[arg(long)]
    pub lake: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// A .parquet or .feather file.
    pub file: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Working directory for the generated logs (logs/) and the lake (lake/).
    #[arg(long, default_value = "silt-demo")]
    pub dir: PathBuf,
    /// Number of Zeek events to generate (Suricata gets a fifth of it).
    #[arg(long, default_value_t = 200_000)]
    pub events: u64,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenKind {
    Zeek,
    Suricata,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// What to generate.
    #[arg(value_enum)]
    pub kind: GenKind,
    /// Number of events (records) in total.
    #[arg(long, default_value_t = 100_000)]
    pub events: u64,
    /// Output directory.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Only these Zeek logs (comma separated, e.g. conn or conn,dns); all events go to them.
    #[arg(long, value_delimiter = ',')]
    pub log: Vec<String>,
    /// Random seed (the same seed gives the same data).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}
