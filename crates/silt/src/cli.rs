//! Command-line arguments (clap). Help texts here are the user's reference; keep them true.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::units::parse_bytes;

#[derive(Parser, Debug)]
#[command(
    name = "silt",
    version,
    about = "Security and network telemetry into a Parquet/Feather lake, queried with SQL",
    long_about = "silt reads security and network telemetry (Zeek TSV and JSON, Suricata EVE, pcap and \
pcapng, JSON, MessagePack, CSV/TSV, LTSV, Avro, Docker json-file, syslog, web access logs; `silt import \
--help` lists them), turns it into Apache Arrow record batches with named schemas (zeek.conn, \
suricata.dns, pcap.packet, ...), writes them into a Hive-partitioned lake of plain Parquet or Feather \
files (<lake>/zeek.conn/dt=2024-03-24/hour=17/<unique>.parquet), and answers SQL over the lake with \
Apache DataFusion. DuckDB, Spark, Trino and Athena read the same files.",
    after_help = "Examples:\n  silt demo\n  silt import zeek conn.log dns.log.gz ./zeek-logs/ --lake ./lake\n  \
cat eve.json | silt import suricata - --lake ./lake\n  silt query --lake ./lake \"SELECT id.orig_h, count(*) AS n FROM zeek.conn GROUP BY 1 ORDER BY n DESC LIMIT 10\"\n  \
silt tables --lake ./lake"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per run: the size of the largest variant costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Import log files (or stdin) into a lake.
    #[command(
        after_help = "Examples:\n  silt import zeek conn.log dns.log.gz ./zeek-logs/ --lake ./lake\n  \
silt import suricata eve.json --lake ./lake\n  cat eve.json | silt import suricata - --lake ./lake\n  \
silt import auto ./mixed/ --lake ./lake --store feather --codec lz4\n\n\
`silt import --help` lists every format. Bad lines never stop an import: each is counted, reported with file:line and reason, and kept \
with its raw text in <lake>/_rejects/. Use --strict to exit non-zero when anything was rejected.\n\n\
Importing the same input twice does not duplicate rows: the lake records what each import consumed \
(<lake>/_silt/imports/), inputs already imported are skipped with a message (--force imports them \
again), and the next import cleans up after one that was killed. Standard input (-) cannot be \
recognised again: it is imported every time.\n\n\
Exit status: 0 all imported; 1 the import could not run (a value it cannot use, an unreadable \
input or lake); 3 a table \
could not be written (the other tables were, the summary says why); 4 an input gave no rows \
(empty, not the format, every record rejected; --allow-empty accepts it); 5 an input was not \
imported because it grew since an earlier import read it (a log still being written: its earlier \
rows would be in the lake twice; --force imports it whole, `silt serve --tail` follows such \
logs); 2 lines were rejected and --strict is set, or the command line could not be parsed. The \
first that applies in this order: 1, 3, 4, 5, 2."
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
    /// Run a server: streaming ingest (HTTP, fluentd Forward) into a lake through a write-ahead
    /// log, and SQL over the lake and the events of the last second (HTTP, Flight SQL).
    #[command(
        after_help = "Examples:\n  silt serve --lake ./lake\n  \
silt serve --lake ./lake --forward 127.0.0.1:24224 --route 'docker.**=docker.nginx' --parse-field docker.nginx:log=access\n  \
silt serve --lake ./lake --http 0.0.0.0:8080 --token-file /etc/silt/token --flight 127.0.0.1:8815\n  \
silt serve --lake ./lake --tail '/opt/zeek/logs/current/*.log' --tail /var/log/suricata/eve.json\n\n\
curl -s 127.0.0.1:8080/v1/ingest/app.events -H 'Content-Type: application/x-ndjson' --data-binary @events.ndjson\n  \
curl -s 127.0.0.1:8080/v1/query -d 'SELECT count(*) FROM app.events'\n  \
silt query --server http://127.0.0.1:8080 \"SELECT count(*) FROM docker.nginx\"\n\n\
An event is acknowledged (HTTP 200, Forward ack) only once it is in the fsynced write-ahead log \
(<lake>/_silt/serve/wal/); it is queryable a moment later (decoded behind the log, typically within \
0.2 s) and reaches the lake's files within --flush-age. \
Ctrl-C or SIGTERM drains: every acknowledged event is written before the server exits; after a crash the \
next start replays the log (docs/serve.md). SIGHUP reloads the enrichment databases \
(--mmdb, --ip-ranges, --rdns) from their files while ingest goes on (docs/enrich.md).\n\n\
silt serve --config silt.toml takes the same settings from a file (docs/silt.example.toml).",
        args_override_self = true
    )]
    Serve(ServeArgs),
    /// List the tables of a lake: rows, files, bytes, first and last event time.
    Tables(TablesArgs),
    /// Run SQL over a lake and produce each result row to a Kafka topic as a JSON object
    /// (idempotent producer; returns once the brokers acknowledged every message).
    #[command(
        after_help = "Example:\n  silt export --lake ./lake --kafka 127.0.0.1:9092 --topic alerts \\\n    \"SELECT timestamp, src_ip, dest_ip, alert.signature FROM suricata.alert WHERE alert.severity <= 2\"\n\n\
Exit status: 0 every message acknowledged; 1 the query or the producer failed; 3 some messages \
were not acknowledged (the count and the first error are printed)."
    )]
    Export(ExportArgs),
    /// Show what is inside a Parquet or Feather file: row groups, column chunks, encodings, statistics.
    Inspect(InspectArgs),
    /// Generate realistic sample telemetry, import it into a local lake, and run example queries.
    Demo(DemoArgs),
    /// Generate realistic synthetic Zeek logs, Suricata EVE, packet captures or Docker nginx logs
    /// (for tests, demos and benchmarks).
    Generate(GenerateArgs),
    /// Build a lookup index: `silt index rdns FILE.csv.gz -o rdns.idx` (reverse DNS for
    /// `--enrich rdns` and the SQL function rdns()).
    #[command(subcommand)]
    Index(IndexCommand),
    /// Print a CREATE statement that lets Athena, Trino, Spark or DuckDB read a lake table in place.
    #[command(
        after_help = "Examples:\n  silt ddl --dialect duckdb zeek.conn --lake ./lake | duckdb\n  \
silt ddl --dialect athena zeek.conn --lake ./lake --location s3://bucket/lake\n  \
silt ddl --dialect spark suricata.alert --lake ./lake --name security.alerts\n\n\
The schema comes from the table's file footers (unified when files differ); the partition \
columns follow the table's partitioning: dt (string) and hour (int), dt alone, or month (string, \
YYYY-MM); Athena gets partition projection for them. The table is named \
module_type (zeek_conn) unless --name says otherwise. See docs/ddl.md for the type mapping."
    )]
    Ddl(DdlArgs),
    /// Benchmark Parquet vs Feather (codecs, levels, row-group sizes) on your data: size, write
    /// time and read path per table, with results.csv and an HTML report.
    #[command(after_help = "Examples:\n  silt bench ./my-logs/ --out report/\n  \
silt bench --lake ./lake --out report/\n  \
silt bench conn.log eve.json --out report/ --codecs none,zstd:1,lz4 --repetitions 3 --baselines\n\n\
Each table is held in memory as Arrow (at most --max-events rows) and written once per \
store x codec x row-group size x repetition through silt's own writer; write time is conversion \
only (CPU and wall). Four queries (full scan, 10% time window count, top-N group-by, needle \
lookup) run on every file with DataFusion. See docs/bench.md.")]
    Bench(BenchArgs),
    /// Convert logs of one table (JSON, MessagePack, CSV, TSV, LTSV, Avro, Docker, syslog, access
    /// logs, or any other format silt reads) into one Parquet or Feather file.
    #[command(
        after_help = "Examples:\n  silt convert access.ndjson -o access.parquet\n  \
silt convert buffer.msgpack -o logs.parquet --time-field log_time --time-unit ms --codec snappy\n  \
silt convert data.csv -o data.feather --codec lz4\n  \
silt convert access.log -o access.parquet --format access --log-format combined\n  \
silt convert events.json -o events.parquet --schema events.avsc\n\n\
The format comes from --format, else the file extension (.json .ndjson .jsonl .msgpack .csv \
.tsv .ltsv .avro .pcap .pcapng), else the first bytes (`silt convert --help` lists the formats). \
All inputs become one table, named by the first. Rows are sorted by --sort or the time column in bounded \
memory: input in order (or out of order by less than about half of --sort-buffer) is written in \
one pass; older rows are kept in temporary files and merged at the end. Records that \
cannot be used are counted and kept in _rejects/ next to the output. See docs/logs.md.\n\n\
Exit status: 0 written; 1 could not run; 4 the inputs gave no rows, so nothing was written (a file \
already at the output path is left as it was; --allow-empty accepts it); 2 records were rejected \
and --strict is set."
    )]
    Convert(ConvertArgs),
    /// Merge each partition's small files into files of a target size (sorted, with the same
    /// encodings, statistics and bloom filters as a fresh import).
    #[command(after_help = "Examples:\n  silt compact --lake ./lake\n  \
silt compact --lake ./lake --table zeek.conn --older-than 1h --target-file-size 256MiB\n  \
silt compact --lake ./lake --dry-run\n\n\
Files smaller than half the target, published at least --older-than ago, are packed per partition \
into groups of at most the target size; each group becomes one file. silt readers see the old files \
or the new one, never both, and a crash at any point loses and duplicates nothing: the next \
compact, retain, vacuum, import or serve start finishes or undoes the interrupted group. Other \
engines' globs (DuckDB, Spark) see both for the moment between the new file's rename and the \
removal of the old ones (docs/lake.md).\n\n\
Exit status: 0 done; 1 could not run; 3 some groups failed (the others were compacted).")]
    Compact(CompactArgs),
    /// Drop whole partitions older than a retention window (by partition time, not file time).
    #[command(after_help = "Examples:\n  silt retain --lake ./lake --keep 30d\n  \
silt retain --lake ./lake --keep 90d --table suricata.flow=7d --table zeek.dns=14d\n  \
silt retain --lake ./lake --table suricata.flow=7d --dry-run\n\n\
A dt= day, hour= hour or month= month goes when its whole range ends before now minus the window; \
each partition disappears in one atomic rename. Partitions being written (an import or flush in \
progress) wait for the next run; the null partition and unpartitioned tables are never dropped.")]
    Retain(RetainArgs),
    /// Remove what no reader counts any more: files of imports that died, inputs an interrupted
    /// compaction left, stale temporary files, the retention trash, empty partition directories.
    #[command(after_help = "Examples:\n  silt vacuum --lake ./lake\n  \
silt vacuum --lake ./lake --grace 10m --dry-run\n\n\
Only what is older than --grace is removed (a live writer touches its temporary files all the time).")]
    Vacuum(VacuumArgs),
    /// Check every data file of a lake against the checksum silt keeps in its footer (files
    /// without one are decoded whole); changes nothing.
    #[command(after_help = "Examples:\n  silt verify --lake ./lake\n  \
silt verify --lake ./lake --table zeek.conn --decode\n  \
silt verify --lake s3://bucket/lake --json\n\n\
Every Parquet or Feather file silt writes carries a CRC-32 of the whole file in its footer (key \
silt.crc32), because Parquet as parquet-rs writes it has no page checksums: a flipped or zeroed \
byte inside a page can decode into other values with no error. Compaction checks the sum of each \
file it merges and leaves a damaged one in place. Reads only; safe beside imports, serve and \
compaction.\n\n\
Exit status: 0 every file checked out; 1 could not run; 3 some files are damaged or could not be \
read (each is named: move it out of the lake, or restore it from a copy).")]
    Verify(VerifyArgs),
}

#[derive(Args, Debug)]
pub struct CompactArgs {
    /// Lake directory.
    #[arg(long, value_parser = crate::opts::lake_path)]
    pub lake: PathBuf,
    /// Only these tables (repeatable; default: all).
    #[arg(long)]
    pub table: Vec<String>,
    /// Only files published at least this long ago (e.g. 1h), so a live ingest's newest files
    /// are left to grow.
    #[arg(long, default_value = "0s", value_parser = crate::units::parse_duration)]
    pub older_than: std::time::Duration,
    /// Largest file compaction writes; files of at least half of it are left as they are.
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes)]
    pub target_file_size: usize,
    /// Memory for the merge's sort buffers and row groups.
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes)]
    pub memory: usize,
    /// Compression codec of the merged files.
    #[arg(long, default_value = "zstd", value_parser = ["zstd", "snappy", "lz4", "gzip", "brotli", "none"])]
    pub codec: String,
    /// Codec level (zstd -7..22, default 1).
    #[arg(long, allow_hyphen_values = true)]
    pub level: Option<i32>,
    /// Show the groups that would be merged; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress lines.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct RetainArgs {
    /// Lake directory.
    #[arg(long, value_parser = crate::opts::lake_path)]
    pub lake: PathBuf,
    /// Keep this much (e.g. 30d, 12h) of every table not given its own window.
    #[arg(long, value_parser = crate::units::parse_window)]
    pub keep: Option<std::time::Duration>,
    /// A table's own window, TABLE=DURATION (repeatable), e.g. suricata.flow=7d.
    #[arg(long, value_name = "TABLE=DURATION")]
    pub table: Vec<String>,
    /// Show what would be dropped; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct VacuumArgs {
    /// Lake directory.
    #[arg(long, value_parser = crate::opts::lake_path)]
    pub lake: PathBuf,
    /// Only remove what is at least this old.
    #[arg(long, default_value = "1h", value_parser = crate::units::parse_duration)]
    pub grace: std::time::Duration,
    /// Show what would be removed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Lake directory (or object-store URL).
    #[arg(long, value_parser = crate::opts::lake_path)]
    pub lake: PathBuf,
    /// Only these tables (repeatable; default: all).
    #[arg(long)]
    pub table: Vec<String>,
    /// Also decode every file whose checksum matches (every page, every batch validated), not
    /// only the files without one.
    #[arg(long)]
    pub decode: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress, no line per damaged file (the summary and exit status still say).
    #[arg(long, short)]
    pub quiet: bool,
}

/// The `format` argument of `import`, `convert` and `bench`: a name from the format registry
/// (`silt_ingest::registry`, with each format's one-line summary as its help), or `auto` when
/// `with_auto`.
pub fn format_parser(with_auto: bool) -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(format_values(with_auto))
}

fn format_values(with_auto: bool) -> Vec<clap::builder::PossibleValue> {
    let mut values: Vec<clap::builder::PossibleValue> = silt_ingest::registry::FORMATS
        .iter()
        .map(|f| {
            clap::builder::PossibleValue::new(f.name)
                .help(f.summary)
                .aliases(f.aliases.iter().copied())
        })
        .collect();
    if with_auto {
        values.push(
            clap::builder::PossibleValue::new("auto")
                .help("detect each input's format from its content (every format above but sflow and netflow: a capture of flow export reads as pcap unless named)"),
        );
    }
    values
}

/// The formats of `silt import`: every format, auto, and kafka.
pub fn import_format_parser() -> clap::builder::PossibleValuesParser {
    let mut values = format_values(true);
    values.push(clap::builder::PossibleValue::new("kafka").help(
        "consume Kafka topics (--kafka, --topic NAME=FORMAT[:TABLE]) up to their current end",
    ));
    clap::builder::PossibleValuesParser::new(values)
}

/// Access-log options: `silt import access` and `--parse-field` on the generic formats.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Access log options")]
pub struct AccessArgs {
    /// Access-log format: auto (nginx main, combined or common, per line), combined, common,
    /// main, vhost_combined, an nginx log_format string ('$remote_addr - $remote_user
    /// [$time_local] "$request" ...') or an Apache LogFormat string ('%h %l %u %t "%r" %>s %b').
    #[arg(long, default_value = "auto", allow_hyphen_values = true)]
    pub log_format: String,
    /// Parse a string field holding access-log lines into typed columns (remote_addr,
    /// remote_user, time, method, path, protocol, request, status, bytes, referer, user_agent,
    /// x_forwarded_for) placed where the field was: FIELD=FORMAT, e.g. log=access (FORMAT as in
    /// --log-format; access = auto). Lines that do not match keep their row, with null parsed
    /// columns and the raw text in FIELD.
    #[arg(long, value_name = "FIELD=FORMAT")]
    pub parse_field: Option<String>,
    /// With --parse-field: keep every original value in FIELD (default: FIELD keeps only the
    /// values that did not parse).
    #[arg(long, requires = "parse_field")]
    pub keep_field: bool,
}

/// Options of the generic log formats (json, msgpack, csv, tsv, ltsv, avro, docker, syslog).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Generic log options")]
pub struct LogArgs {
    /// Table name module.type (default: docker.logs for docker, else <format>.<file stem>).
    #[arg(long)]
    pub table: Option<String>,
    /// Field holding the event time (default: the first of time, timestamp, ts, @timestamp,
    /// log_time, date present in the first record).
    #[arg(long)]
    pub time_field: Option<String>,
    /// Unit of numeric times: s, ms, us or ns (default: guessed from the magnitude).
    #[arg(long, value_parser = ["s", "ms", "us", "ns"])]
    pub time_unit: Option<String>,
    /// Schema file: Avro (.avsc) or BigQuery JSON schema; records are conformed to it and those
    /// that do not fit are rejected (default: infer the schema).
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// CSV/TSV field delimiter (one character, or \t).
    #[arg(long)]
    pub delimiter: Option<String>,
    /// CSV/TSV input has no header row (columns are named c1, c2, ...).
    #[arg(long)]
    pub no_header: bool,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// Input files, directories (read recursively) or - for standard input; gzip is detected.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output file: .parquet, or .feather/.arrow for Arrow IPC (Feather v2).
    #[arg(long, short)]
    pub output: PathBuf,
    /// Input format (default: from the file extension, else the content).
    #[arg(long, value_parser = format_parser(false))]
    pub format: Option<String>,
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub access: AccessArgs,
    #[command(flatten)]
    pub pcap: PcapArgs,
    #[command(flatten)]
    pub enrich: EnrichArgs,
    #[command(flatten)]
    pub write: WriteOpts,
    /// Exit with status 2 if any record was rejected (everything valid is still written).
    #[arg(long)]
    pub strict: bool,
    /// Exit with status 0 when the inputs gave no rows (nothing is written then); without it
    /// that is status 4.
    #[arg(long)]
    pub allow_empty: bool,
    /// Do not show the progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Rows per record batch.
    #[arg(long, default_value_t = 16384, hide = true)]
    pub batch_rows: usize,
}

#[derive(Args, Debug, Clone)]
pub struct WriteOpts {
    /// File format of the lake's files.
    #[arg(long, default_value = "parquet", value_parser = ["parquet", "feather"])]
    pub store: String,
    /// What lists a table's files: hive (the directories alone) or delta (also a Delta Lake log
    /// in <table>/_delta_log, for Spark, Trino and DuckDB's delta_scan; Parquet only; in a lake
    /// directory or a bucket). A table that has a log keeps it whatever this says.
    #[arg(long, default_value = "hive", value_parser = ["hive", "delta"])]
    pub table_format: String,
    /// Compression codec (feather: zstd, lz4 or none).
    #[arg(long, default_value = "zstd", value_parser = ["zstd", "snappy", "lz4", "gzip", "brotli", "none"])]
    pub codec: String,
    /// Codec level: zstd -7..22 (negative = faster; default 1), gzip 0..9, brotli 0..11.
    #[arg(long, allow_hyphen_values = true)]
    pub level: Option<i32>,
    /// Target compressed size of a Parquet row group (e.g. 32MiB, 134217728).
    #[arg(long, default_value = "32MiB", value_parser = parse_bytes)]
    pub row_group_size: usize,
    /// Most rows in a Parquet row group, whatever their size: data that compresses to a few
    /// bytes per row still gets several row groups, which readers scan in parallel.
    #[arg(long, default_value_t = silt_lake::DEFAULT_ROW_GROUP_ROWS)]
    pub row_group_rows: usize,
    /// Target size of a Parquet data page.
    #[arg(long, default_value = "1MiB", value_parser = parse_bytes)]
    pub page_size: usize,
    /// Most rows in a Parquet data page (the page also ends at --page-size).
    #[arg(long, default_value_t = silt_lake::DEFAULT_PAGE_ROWS)]
    pub page_rows: usize,
    /// Largest dictionary page of a string column chunk; a column whose distinct values outgrow
    /// it is written plain from there on (other columns: --page-size).
    #[arg(long, default_value = "4MiB", value_parser = parse_bytes)]
    pub dictionary_page_size: usize,
    /// Directory partitioning by event time. `auto` chooses for each new table, from the
    /// density of its first rows, the finest of hour (dt=/hour=), day (dt=) and month (month=)
    /// whose partitions are expected to reach a quarter of --row-group-size, else none; the
    /// choice is recorded in the lake (`_silt/tables/`), shown in the summary, and followed by
    /// every later import. A given granularity must match the table's record.
    #[arg(long, default_value = "auto", value_parser = ["auto", "hour", "day", "month", "none"])]
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
    #[arg(long, default_value = "16MiB", value_parser = parse_bytes)]
    pub sort_buffer: usize,
    /// Partition (and sort) by this top-level timestamp column instead of the table's time
    /// column, at auto (default), hour, day, month or no granularity:
    /// FIELD[:auto|hour|day|month|none]. Replaces --partition.
    #[arg(
        long,
        value_name = "FIELD[:auto|hour|day|month|none]",
        conflicts_with = "partition"
    )]
    pub partition_by: Option<String>,
    /// Parquet: dictionary-encode these columns even where silt would not (comma separated
    /// paths such as container_name or id.orig_h).
    #[arg(long, value_delimiter = ',', value_name = "COLS")]
    pub dictionary: Vec<String>,
    /// Parquet: never dictionary-encode these columns.
    #[arg(long, value_delimiter = ',', value_name = "COLS")]
    pub no_dictionary: Vec<String>,
    /// Parquet: delta encoding for these columns (DELTA_BINARY_PACKED for integers and
    /// timestamps, DELTA_BYTE_ARRAY for strings); turns their dictionary off unless --dictionary
    /// names them too.
    #[arg(long, value_delimiter = ',', value_name = "COLS")]
    pub delta: Vec<String>,
    /// Parquet: BYTE_STREAM_SPLIT encoding for these float columns.
    #[arg(long, value_delimiter = ',', value_name = "COLS")]
    pub byte_stream_split: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// Input format, or auto (detected per input from its content), or kafka (consume topics
    /// up to their current end: --kafka, --topic).
    #[arg(value_parser = import_format_parser())]
    pub format: String,
    /// Files, directories (read recursively) or - for standard input; gzip is detected.
    #[arg(required_unless_present = "kafka")]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// With kafka: stop once every partition is read to the end it had at the start (the
    /// default and only mode of `silt import kafka`; `silt serve --kafka` keeps consuming).
    #[arg(long)]
    pub until_end: bool,
    /// With kafka: the instance name, for several imports of one group at once on one lake
    /// (default import-GROUP).
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
    /// Lake directory (created if missing).
    #[arg(long, value_parser = crate::opts::lake_path)]
    pub lake: PathBuf,
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub access: AccessArgs,
    #[command(flatten)]
    pub pcap: PcapArgs,
    #[command(flatten)]
    pub enrich: EnrichArgs,
    #[command(flatten)]
    pub write: WriteOpts,
    /// Exit with status 2 if any line was rejected (everything valid is still imported).
    #[arg(long)]
    pub strict: bool,
    /// Exit with status 0 even when an input gave no rows (empty, not the format, or every
    /// record rejected); without it that is status 4.
    #[arg(long)]
    pub allow_empty: bool,
    /// Import inputs again even when the lake's import record says their content is already in
    /// the lake (without it they are skipped with a message, so a re-run never duplicates rows).
    #[arg(long)]
    pub force: bool,
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
pub struct ExportArgs {
    /// Lake directory.
    #[arg(long, value_parser = crate::opts::lake_path)]
    pub lake: PathBuf,
    /// Kafka brokers, HOST:PORT[,HOST:PORT...].
    #[arg(long, value_name = "HOST:PORT,...")]
    pub kafka: String,
    /// The topic to produce to.
    #[arg(long)]
    pub topic: String,
    /// A result column whose value (as text) keys each message (same key, same partition).
    #[arg(long)]
    pub key: Option<String>,
    /// A librdkafka property, KEY=VALUE (repeatable), e.g. security.protocol=SSL.
    #[arg(long = "kafka-option", value_name = "KEY=VALUE")]
    pub kafka_options: Vec<String>,
    /// Give up waiting for acknowledgements after this long.
    #[arg(long, default_value = "60s", value_parser = crate::units::parse_duration)]
    pub timeout: std::time::Duration,
    #[command(flatten)]
    pub messages: MessageArgs,
    #[command(flatten)]
    pub lookup: LookupArgs,
    /// The SQL statement.
    pub sql: String,
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    /// Lake directory.
    #[arg(long, value_parser = crate::opts::lake_path, required_unless_present = "server", conflicts_with = "server")]
    pub lake: Option<PathBuf>,
    /// Ask a running `silt serve` instead of reading a lake (http://HOST:PORT, or
    /// https://HOST:PORT for one serving TLS); the query sees the events not yet in a file
    /// too, from a moment (typically 0.2 s) after their acknowledgement. --token-file when the
    /// server has a token.
    #[arg(long)]
    pub server: Option<String>,
    /// PEM file of the certificates that may sign an https:// server's certificate (its own
    /// certificate, when self-signed); without it, the Mozilla root certificates.
    #[arg(long, value_name = "FILE", requires = "server")]
    pub ca_cert: Option<PathBuf>,
    /// File holding the server's bearer token (with --server).
    #[arg(long, requires = "server")]
    pub token_file: Option<PathBuf>,
    /// Output format (parquet needs -o). Default: from the extension of -o (.csv, .json,
    /// .ndjson/.jsonl, .parquet), else table.
    #[arg(long, value_enum)]
    pub format: Option<OutputFormat>,
    /// Write the result to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Print files, row groups and bytes scanned against the totals (to standard error).
    #[arg(long)]
    pub stats: bool,
    #[command(flatten)]
    pub lookup: LookupArgs,
    /// Let `COPY (...) TO 'path'` write the file it names. Without it queries are read-only:
    /// CREATE, DROP, INSERT, SET and COPY are refused (use -o FILE to save a result).
    #[arg(long)]
    pub allow_write: bool,
    /// The SQL statement.
    pub sql: String,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Read the settings from a TOML file whose keys are these long flags (see
    /// docs/silt.example.toml); flags on the command line override it or add to its lists.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Lake directory (created if missing), file:///path, or s3://bucket/prefix (then with
    /// --state).
    #[arg(long, value_parser = crate::opts::lake_path, required_unless_present = "config")]
    pub lake: Option<PathBuf>,
    /// For an s3:// lake: a local directory for the write-ahead log (acknowledged events wait
    /// there until the bucket holds them), the tail positions and the files being uploaded; the
    /// same at every start. A lake directory keeps these in LAKE/_silt/serve.
    #[arg(long, value_name = "DIR")]
    pub state: Option<PathBuf>,
    /// HTTP API address (ingest, query, /health, /metrics): HOST:PORT, or https://HOST:PORT for
    /// TLS (--tls-cert, --tls-key); `none` for no HTTP.
    #[arg(
        long,
        default_value = "127.0.0.1:8080",
        value_name = "[https://]HOST:PORT|none"
    )]
    pub http: String,
    /// fluentd Forward protocol address: HOST:PORT (TCP, and the UDP heartbeat on the same
    /// port), or tls://HOST:PORT for TLS (--tls-cert, --tls-key; Docker's fluentd log driver
    /// `fluentd-address=tls://...`, fluentd's out_forward `transport tls`).
    #[arg(long, value_name = "[tls://]HOST:PORT")]
    pub forward: Option<String>,
    /// Arrow Flight SQL address: HOST:PORT, or grpc+tls://HOST:PORT for TLS (--tls-cert,
    /// --tls-key; ADBC's `grpc+tls://` URI).
    #[arg(long, value_name = "[grpc+tls://]HOST:PORT")]
    pub flight: Option<String>,
    /// syslog listener: udp://HOST:PORT, tcp://HOST:PORT (RFC 6587 octet counting or newline
    /// framing) or tls://HOST:PORT (TCP with TLS, RFC 5425; --tls-cert, --tls-key), optionally
    /// =TABLE (default syslog.messages); repeatable.
    #[arg(long = "syslog", value_name = "udp|tcp|tls://HOST:PORT[=TABLE]")]
    pub syslogs: Vec<String>,
    /// PEM certificate chain for TLS listeners (--syslog tls://, --forward tls://, --http
    /// https://, --flight grpc+tls://).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// sFlow v5 listener: udp://HOST:PORT (tables sflow.sample, sflow.counter); repeatable.
    #[arg(long = "sflow", value_name = "udp://HOST:PORT")]
    pub sflows: Vec<String>,
    /// NetFlow v5/v9 and IPFIX listener: udp://HOST:PORT (table netflow.flow); repeatable.
    #[arg(long = "netflow", value_name = "udp://HOST:PORT")]
    pub netflows: Vec<String>,
    /// Follow files: [FORMAT:]GLOB (e.g. '/opt/zeek/logs/current/*.log',
    /// suricata:/var/log/suricata/eve.json); new files, rotation by rename and copytruncate,
    /// Zeek header blocks; read positions are kept with the data (repeatable).
    #[arg(long = "tail", value_name = "[FORMAT:]GLOB")]
    pub tails: Vec<String>,
    /// Forward tag -> table, PATTERN=TABLE with fluentd's patterns (`*` one part, `**` any
    /// parts, `{a,b}`); the first match wins (repeatable).
    #[arg(long = "route", value_name = "PATTERN=TABLE")]
    pub routes: Vec<String>,
    /// Parse a text field of a table's records into typed columns, TABLE:FIELD=FORMAT (e.g.
    /// docker.nginx:log=access; FORMAT as in --log-format); repeatable.
    #[arg(long = "parse-field", value_name = "TABLE:FIELD=FORMAT")]
    pub parse_fields: Vec<String>,
    /// Keep the parsed field's original text next to the parsed columns.
    #[arg(long)]
    pub keep_field: bool,
    /// File holding the bearer token required by the HTTP and Flight APIs.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// File holding the Forward protocol's shared key (HELO/PING/PONG handshake).
    #[arg(long)]
    pub forward_shared_key_file: Option<PathBuf>,
    /// File of Forward users, one `USER:PASSWORD` per line (needs the shared key): clients
    /// must also send one of these in the handshake (fluentd's `<security><user>`).
    #[arg(long)]
    pub forward_users_file: Option<PathBuf>,
    /// Allow listening on a non-loopback address without a token (or Forward without a key).
    #[arg(long)]
    pub insecure: bool,
    /// Write buffered events to the lake once the oldest is this old.
    #[arg(long, default_value = "60s", value_parser = crate::units::parse_duration)]
    pub flush_age: std::time::Duration,
    /// ... or once they take this much memory.
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes)]
    pub flush_size: usize,
    /// Largest ingest request body (and its decompressed form).
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes)]
    pub max_body: usize,
    /// A query running longer is stopped.
    #[arg(long, default_value = "300s", value_parser = crate::units::parse_duration)]
    pub query_timeout: std::time::Duration,
    /// Memory a query's sorts, joins and aggregations may hold (default: no limit).
    #[arg(long, value_parser = parse_bytes)]
    pub query_memory: Option<usize>,
    /// Queries running at once at most (HTTP and Flight SQL together); more get HTTP 429.
    #[arg(long, default_value_t = 8)]
    pub max_queries: usize,
    /// HTTP API connections one client (IP address) may hold open at once; one more is
    /// answered 503 and closed (0: no limit). Raise it when many clients come through one proxy.
    #[arg(long, default_value_t = 256)]
    pub http_max_connections_per_client: usize,
    /// Merge each partition's small files this often (e.g. 10m), as `silt compact` does;
    /// queries see the old files or the merged one, never both.
    #[arg(long, value_parser = crate::units::parse_duration)]
    pub compact_every: Option<std::time::Duration>,
    /// Largest file compaction writes (see `silt compact --target-file-size`).
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes)]
    pub compact_target_file_size: usize,
    /// Compaction leaves files younger than this (see `silt compact --older-than`).
    #[arg(long, default_value = "0s", value_parser = crate::units::parse_duration)]
    pub compact_older_than: std::time::Duration,
    /// Drop partitions older than this (e.g. 30d), as `silt retain --keep` does, at every
    /// --compact-every (hourly without it).
    #[arg(long, value_parser = crate::units::parse_window)]
    pub keep: Option<std::time::Duration>,
    /// A table's own retention window, TABLE=DURATION (repeatable), e.g. suricata.flow=7d.
    #[arg(long, value_name = "TABLE=DURATION")]
    pub keep_table: Vec<String>,
    /// Run as the named instance: several servers can share one lake (members of one Kafka
    /// consumer group), each with its own write-ahead log and flush record under
    /// <lake>/_silt/serve/NAME/.
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Produce a table's rows (decoded and enriched) to a Kafka topic of --kafka as JSON
    /// objects instead of writing them to the lake, TABLE=TOPIC (repeatable); at least once.
    #[arg(long = "to-kafka", value_name = "TABLE=TOPIC")]
    pub to_kafka: Vec<String>,
    /// With --to-kafka: write those tables to the lake as well.
    #[arg(long)]
    pub to_kafka_keep: bool,
    #[command(flatten)]
    pub messages: MessageArgs,
    #[command(flatten)]
    pub enrich: EnrichArgs,
    /// Enrichment of one table instead of --enrich's: TABLE=ATTRS[:COLUMNS], e.g.
    /// zeek.conn=asn,geo or web.access=geo:client_ip (the databases of --mmdb, --ip-ranges,
    /// --rdns; in the config file, `enrich` and `enrich-columns` of a [table."module.type"]
    /// section); repeatable.
    #[arg(
        long = "enrich-table",
        value_name = "TABLE=ATTRS[:COLUMNS]",
        help_heading = "Enrichment"
    )]
    pub enrich_tables: Vec<String>,
    #[command(flatten)]
    pub write: WriteOpts,
}

/// How rows produced to Kafka are encoded (`silt export`, `silt serve --to-kafka`).
#[derive(Args, Debug, Clone, Default)]
pub struct MessageArgs {
    /// Encoding of produced messages: json (one object per row) or avro (one Avro record per
    /// row: single-object encoding with its schema in --avro-schemas, or the Confluent wire
    /// format with --schema-registry).
    #[arg(long, default_value = "json", value_parser = ["json", "avro"])]
    pub message_format: String,
    /// With --message-format avro: register schemas in this Confluent-compatible schema
    /// registry (http://HOST:PORT or https://[USER:PASSWORD@]HOST:PORT, subject TOPIC-value;
    /// user and password go as basic authentication) and frame messages with its ids.
    #[arg(long, value_name = "URL")]
    pub schema_registry: Option<String>,
    /// With an https:// --schema-registry: trust only the CA certificates in this PEM file
    /// (default: the system's roots, which SSL_CERT_FILE can replace).
    #[arg(long, value_name = "PEM")]
    pub schema_registry_ca: Option<PathBuf>,
    /// With --message-format avro and no registry: where each schema is written as
    /// <fingerprint>.avsc (default <lake>/_silt/avro-schemas).
    #[arg(long, value_name = "DIR")]
    pub avro_schemas: Option<PathBuf>,
}

/// Consuming Kafka topics (`silt serve --kafka`, `silt import kafka`).
#[derive(Args, Debug, Clone, Default)]
pub struct KafkaArgs {
    /// Kafka brokers to consume from, HOST:PORT[,HOST:PORT...].
    #[arg(long, value_name = "HOST:PORT,...")]
    pub kafka: Option<String>,
    /// A topic to consume and how to read it, NAME=FORMAT[:TABLE] (repeatable), e.g.
    /// eve=suricata, zeek-conn=zeek:zeek.conn, netdata=csv:rasp.netdata.
    #[arg(long = "topic", value_name = "NAME=FORMAT[:TABLE]")]
    pub topics: Vec<String>,
    /// Column names of a csv/tsv topic whose messages are rows without a header,
    /// NAME=COL,COL,... (repeatable).
    #[arg(long = "topic-columns", value_name = "NAME=COLUMNS")]
    pub topic_columns: Vec<String>,
    /// Consumer group id: processes with the same group share the topics' partitions.
    #[arg(long, default_value = "silt")]
    pub group: String,
    /// Where a partition neither the lake nor the group has an offset for starts.
    #[arg(long, default_value = "earliest", value_parser = ["earliest", "latest"])]
    pub kafka_start: String,
    /// Keep each message's own attributes as columns of its rows, a comma-separated list of
    /// topic, partition, offset, timestamp, key, headers (or all): _kafka_key, _kafka_headers
    /// (a map), ... For zeek, suricata, json, msgpack, and csv/tsv topics with --topic-columns.
    #[arg(long = "kafka-meta", value_name = "LIST")]
    pub kafka_meta: Option<String>,
    /// A librdkafka property, KEY=VALUE (repeatable): security.protocol=SASL_SSL,
    /// sasl.mechanism=SCRAM-SHA-512, sasl.username=..., ssl.ca.location=...
    #[arg(long = "kafka-option", value_name = "KEY=VALUE")]
    pub kafka_options: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum IndexCommand {
    /// A reverse-DNS index from Rapid7-style CSV (`ip,name` per line, gzip detected; a header
    /// line is skipped, a repeated address keeps its first name), built in bounded memory
    /// (external sort) from inputs far larger than memory; memory-mapped at lookup.
    #[command(
        after_help = "Example:\n  silt index rdns rdns.csv.gz -o rdns.idx --memory 512MiB\n  \
silt import zeek conn.log --lake ./lake --enrich rdns --rdns rdns.idx\n  \
silt query --lake ./lake --rdns rdns.idx \"SELECT rdns(id.resp_h) AS name, count(*) FROM zeek.conn GROUP BY 1 ORDER BY 2 DESC LIMIT 10\"\n\n\
Bad lines are counted, kept in <output>.rejects (line, reason, text) and summarised; --strict \
makes any of them a non-zero exit (status 2). The index appears atomically (temporary name, \
fsync, rename). Format: crates/silt-rdns/FORMAT.md."
    )]
    Rdns(IndexRdnsArgs),
}

#[derive(Args, Debug)]
pub struct IndexRdnsArgs {
    /// The CSV file (`-` for standard input); gzip is detected.
    pub input: PathBuf,
    /// The index file to write.
    #[arg(long, short)]
    pub output: PathBuf,
    /// Memory for the sort (the run buffer, then the merge); peak RSS is about this plus ~30 MiB.
    #[arg(long, default_value = "256MiB", value_parser = parse_bytes)]
    pub memory: usize,
    /// Directory for the sorted runs (needs about a third of the gzip'd input).
    #[arg(long)]
    pub tmp_dir: Option<PathBuf>,
    /// Exit with status 2 if any line was rejected.
    #[arg(long)]
    pub strict: bool,
}

#[derive(Args, Debug)]
pub struct TablesArgs {
    /// Lake directory.
    #[arg(long, value_parser = crate::opts::lake_path)]
    pub lake: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DdlDialect {
    /// Amazon Athena: CREATE EXTERNAL TABLE with partition projection (needs --location).
    Athena,
    /// Trino's Hive connector: CREATE TABLE ... WITH (external_location, partitioned_by).
    Trino,
    /// Spark SQL: CREATE TABLE ... USING PARQUET PARTITIONED BY ..., then MSCK REPAIR TABLE.
    Spark,
    /// DuckDB: CREATE VIEW ... AS SELECT * FROM read_parquet(..., hive_partitioning = true).
    Duckdb,
}

#[derive(Args, Debug)]
pub struct DdlArgs {
    /// SQL dialect.
    #[arg(long, value_enum)]
    pub dialect: DdlDialect,
    /// The table (module.type, as `silt tables` lists it).
    pub table: String,
    /// Lake directory.
    #[arg(long, value_parser = crate::opts::lake_path)]
    pub lake: PathBuf,
    /// Where the engine finds the lake's root directory (s3://bucket/prefix); the table is
    /// <location>/<module>.<type>/. Default: the local lake (file:// for Trino and Spark).
    #[arg(long)]
    pub location: Option<String>,
    /// Table name in the engine, optionally schema-qualified (default: module_type, e.g. zeek_conn).
    #[arg(long)]
    pub name: Option<String>,
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
    /// A packet capture (classic pcap, or pcapng with --pcapng): TCP/UDP/ICMP, IPv4/IPv6,
    /// VLAN/QinQ, some VXLAN, ~10k concurrent flows. --events counts packets; -o is the file.
    Pcap,
    /// One hour (12:00-13:00 UTC) of Docker nginx logs as the fluentd logging driver ships them:
    /// {log_time (epoch ms), container_id, container_name, source, log (nginx combined line)}
    /// as MessagePack or NDJSON (--format). --events counts records, or --bytes sets the
    /// MessagePack size (the NDJSON file of the same options has the same records); -o is the file.
    DockerNginx,
    /// sFlow v5 export of sampled packets (the pcap generator's traffic mix) from 4 switches, as
    /// a pcap of UDP datagrams to port 6343 (`silt import sflow` reads it; tables sflow.sample
    /// and sflow.counter). --events counts flow samples; -o is the file.
    Sflow,
    /// Rapid7-shaped reverse-DNS data (`ip,name` lines, gzip'd) for `silt index rdns`.
    /// --events counts rows; -o is the file (.csv.gz).
    Rdns,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// What to generate.
    #[arg(value_enum)]
    pub kind: GenKind,
    /// Number of events (records) in total.
    #[arg(long, default_value_t = 100_000)]
    pub events: u64,
    /// Output directory (for pcap: the output file, or - for standard output).
    #[arg(long, short)]
    pub output: PathBuf,
    /// Only these Zeek logs (comma separated, e.g. conn or conn,dns); all events go to them.
    #[arg(long, value_delimiter = ',')]
    pub log: Vec<String>,
    /// Random seed (the same seed gives the same data).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub pcap: PcapGenArgs,
    #[command(flatten)]
    pub weblog: WeblogGenArgs,
}

/// Options of `silt generate docker-nginx` only.
#[derive(Args, Debug)]
#[command(next_help_heading = "docker-nginx options")]
pub struct WeblogGenArgs {
    /// Record encoding of docker-nginx.
    #[arg(long = "format", default_value = "msgpack", value_parser = ["msgpack", "ndjson"])]
    pub weblog_format: String,
}

/// Options of `silt generate pcap` only.
#[derive(Args, Debug)]
#[command(next_help_heading = "PCAP options")]
pub struct PcapGenArgs {
    /// Stop once the file reaches this size (e.g. 200MB, 2GiB); --events is then ignored.
    /// docker-nginx: the MessagePack size of the records, whatever --format.
    #[arg(long, value_parser = parse_bytes)]
    pub bytes: Option<usize>,
    /// Write pcapng instead of classic pcap (microsecond timestamps either way).
    #[arg(long)]
    pub pcapng: bool,
    /// Flows open at the same time (interleaved packets).
    #[arg(long, default_value_t = 10_000)]
    pub concurrent_flows: usize,
    /// sflow: sample the packets of this capture (classic pcap) instead of generated ones.
    #[arg(long, value_name = "PCAP")]
    pub from: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Files or directories to read (any format `silt import` reads); or use --lake.
    pub inputs: Vec<PathBuf>,
    /// Benchmark the tables of this lake instead of inputs (original input bytes are then unknown).
    #[arg(long, value_parser = crate::opts::lake_path, conflicts_with = "inputs")]
    pub lake: Option<PathBuf>,
    /// Report directory: results.csv, index.html, plots/ (created).
    #[arg(long)]
    pub out: PathBuf,
    /// Input format, as for `silt import` (default: detected per input).
    #[arg(long, default_value = "auto", value_parser = format_parser(true))]
    pub format: String,
    #[command(flatten)]
    pub log: LogArgs,
    #[command(flatten)]
    pub access: AccessArgs,
    #[command(flatten)]
    pub pcap: PcapArgs,
    /// Stores to compare (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "parquet,feather")]
    pub stores: Vec<String>,
    /// Codecs with optional level (comma separated): none, zstd:LEVEL (-7..22), lz4, snappy
    /// (Parquet only), gzip:LEVEL, brotli:LEVEL.
    #[arg(
        long,
        value_delimiter = ',',
        allow_hyphen_values = true,
        default_value = "none,zstd:-5,zstd:1,zstd:9,zstd:19"
    )]
    pub codecs: Vec<String>,
    /// Parquet row-group target sizes (comma separated, e.g. 32MiB,128MiB).
    #[arg(long, value_delimiter = ',', default_value = "32MiB", value_parser = parse_bytes)]
    pub row_group_size: Vec<usize>,
    /// Writes per configuration; the median is reported.
    #[arg(long, default_value_t = 1)]
    pub repetitions: u32,
    /// Leave out tables with fewer events (the study used 10k / 100k).
    #[arg(long, default_value_t = 0)]
    pub min_events: u64,
    /// Rows kept in memory per table (the first ones); bounds memory.
    #[arg(long, default_value_t = 2_000_000)]
    pub max_events: u64,
    /// Keep the written files under <out>/files/ (default: deleted after measuring).
    #[arg(long)]
    pub keep_files: bool,
    /// Skip the read path (queries).
    #[arg(long)]
    pub no_reads: bool,
    /// Skip the Parquet zstd:1 variants (no bloom filters, unsorted, sorted by host, no
    /// dictionaries, typed columns as text).
    #[arg(long)]
    pub no_variants: bool,
    /// Also time DuckDB and pyarrow writing the same rows (bench/baselines.py; needs a Python
    /// with duckdb and pyarrow, see scripts/pyenv.sh).
    #[arg(long)]
    pub baselines: bool,
    /// Python interpreter for --baselines (default: scripts/pyenv.sh's venv, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Exit with status 2 before measuring anything if any input line or lake file was rejected
    /// (the rejects file is still written).
    #[arg(long)]
    pub strict: bool,
    /// Do not print progress.
    #[arg(long, short)]
    pub quiet: bool,
    /// Rows per record batch.
    #[arg(long, default_value_t = 16384, hide = true)]
    pub batch_rows: usize,
}

/// Options of `silt import pcap` only.
/// The databases enrichment and the SQL functions asn(), as_org(), geo_country(),
/// geo_city() and rdns() look addresses up in (docs/enrich.md).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Enrichment databases")]
pub struct LookupArgs {
    /// A MaxMind DB file: GeoLite2/GeoIP2 ASN, Country, City or ISP (the kind is read from the
    /// file); repeatable, one per kind.
    #[arg(long = "mmdb", value_name = "FILE")]
    pub mmdb: Vec<PathBuf>,
    /// An IP range map in CSV (gzip allowed): MaxMind GeoLite2 ASN/Country/City blocks (with
    /// their Locations file next to them) or `ipIntStart,ipIntEnd,AS name`; repeatable.
    #[arg(long = "ip-ranges", value_name = "FILE")]
    pub ip_ranges: Vec<PathBuf>,
    /// The reverse-DNS index built by `silt index rdns`.
    #[arg(long, value_name = "INDEX")]
    pub rdns: Option<PathBuf>,
}

/// `--enrich`: columns added next to each address column (docs/enrich.md).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Enrichment")]
pub struct EnrichArgs {
    /// Add columns next to every address column: asn (`<p>_asn`, `<p>_as_org`), geo
    /// (`<p>_country`, and `<p>_city` with a City database), rdns (`<p>_rdns`), where `<p>` is
    /// the column's name without `_h`/`_ip`/`_addr` (id.orig_h -> orig_asn); comma-separated.
    #[arg(long, value_name = "asn,geo,rdns")]
    pub enrich: Option<String>,
    /// Enrich only these columns (comma-separated; default: every address column).
    #[arg(long, value_name = "COLS", requires = "enrich")]
    pub enrich_columns: Option<String>,
    #[command(flatten)]
    pub lookup: LookupArgs,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "PCAP options")]
pub struct PcapArgs {
    /// sflow / netflow formats: only UDP datagrams to this port (default: every UDP datagram).
    #[arg(long)]
    pub port: Option<u16>,
    /// Also write bidirectional flow records (table pcap.flow) next to the packets.
    #[arg(long)]
    pub flows: bool,
    /// Write only flow records (pcap.flow), no packet rows.
    #[arg(long, conflicts_with = "flows")]
    pub flows_only: bool,
    /// Keep the captured frame bytes in a `payload` column: `full`, or the first N bytes
    /// (default: no payload column).
    #[arg(long, value_name = "full|N")]
    pub payload: Option<String>,
    /// Flow idle timeout in seconds for UDP, ICMP and other non-TCP flows.
    #[arg(long, default_value_t = 60.0)]
    pub idle_timeout: f64,
    /// Flow idle timeout in seconds for TCP flows.
    #[arg(long, default_value_t = 300.0)]
    pub tcp_idle_timeout: f64,
    /// Flow active timeout in seconds: a longer flow is cut and continues as a new record.
    #[arg(long, default_value_t = 1800.0)]
    pub active_timeout: f64,
    /// Community ID seed (packets and flows).
    #[arg(long, default_value_t = 0)]
    pub community_id_seed: u16,
}
