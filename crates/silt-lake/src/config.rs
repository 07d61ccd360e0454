//! Writer configuration: store, codec, row-group target, partitioning, sort keys, bloom filters,
//! memory bounds. Defaults are chosen for interactive SQL and for Athena/Trino (see docs/lake.md).

use std::str::FromStr;

/// File format of the lake's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreKind {
    Parquet,
    /// Arrow IPC file format (Feather v2).
    Feather,
}

impl StoreKind {
    pub fn extension(self) -> &'static str {
        match self {
            StoreKind::Parquet => "parquet",
            StoreKind::Feather => "feather",
        }
    }

    /// The store a data file's name says: `.parquet`, or `.feather`/`.arrow`/`.ipc` (Arrow IPC
    /// files as other tools name them); `None` for any other file.
    pub fn from_path(p: &std::path::Path) -> Option<Self> {
        match p.extension()?.to_str()? {
            "parquet" => Some(StoreKind::Parquet),
            "feather" | "arrow" | "ipc" => Some(StoreKind::Feather),
            _ => None,
        }
    }
}

impl FromStr for StoreKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "parquet" => Ok(StoreKind::Parquet),
            "feather" | "arrow" | "ipc" => Ok(StoreKind::Feather),
            _ => Err(format!("unknown store {s:?}: use parquet or feather")),
        }
    }
}

/// Compression codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Zstd,
    Snappy,
    Lz4,
    Gzip,
    Brotli,
    None,
}

impl FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "zstd" => Ok(Codec::Zstd),
            "snappy" => Ok(Codec::Snappy),
            "lz4" => Ok(Codec::Lz4),
            "gzip" => Ok(Codec::Gzip),
            "brotli" => Ok(Codec::Brotli),
            "none" | "uncompressed" => Ok(Codec::None),
            _ => Err(format!(
                "unknown codec {s:?}: use zstd, snappy, lz4, gzip, brotli or none"
            )),
        }
    }
}

/// How files are grouped into directories by event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Partitioning {
    /// `dt=YYYY-MM-DD/hour=HH/`
    Hour,
    /// `dt=YYYY-MM-DD/`
    Day,
    /// `month=YYYY-MM/`
    Month,
    /// files directly in the table directory
    None,
}

impl Partitioning {
    /// The name `--partition` and the lake's table record use.
    pub fn name(self) -> &'static str {
        match self {
            Partitioning::Hour => "hour",
            Partitioning::Day => "day",
            Partitioning::Month => "month",
            Partitioning::None => "none",
        }
    }
}

impl std::fmt::Display for Partitioning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Partitioning {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "hour" => Ok(Partitioning::Hour),
            "day" => Ok(Partitioning::Day),
            "month" => Ok(Partitioning::Month),
            "none" => Ok(Partitioning::None),
            _ => Err(format!(
                "unknown partitioning {s:?}: use auto, hour, day, month or none"
            )),
        }
    }
}

/// How a table's partitioning is chosen when the table is first written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartitionChoice {
    /// From the data's density (see [`crate::granularity`]): the finest of hour, day and month
    /// whose partitions are expected to reach a quarter of the row-group target, else none. The
    /// choice is recorded in the lake; later imports follow the record.
    #[default]
    Auto,
    /// This granularity; a table already partitioned otherwise is an error.
    Fixed(Partitioning),
}

impl FromStr for PartitionChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            Ok(PartitionChoice::Auto)
        } else {
            s.parse().map(PartitionChoice::Fixed)
        }
    }
}

impl From<Partitioning> for PartitionChoice {
    fn from(p: Partitioning) -> Self {
        PartitionChoice::Fixed(p)
    }
}

/// Most rows in a Parquet data page, by default. parquet-rs's own default is 20,000 rows, which
/// cut the pages of narrow columns far below `page_bytes` (a port column: 20,000 rows, 32 KB),
/// too little for zstd to find what repeats: the real-derived conn log (issue 21) wrote its
/// `id.orig_p` in 3.05 MB where DuckDB, with a page per row group of 124,542 rows, wrote 1.10 MB.
/// Measured on the 2M-row inputs of `bench/zeek-convert.sh` (silt import, one run each):
///
/// | page rows | real conn | real dns | gen conn | gen dns | peak RSS (gen conn) |
/// |---:|---:|---:|---:|---:|---:|
/// | 20,000 | 47.5 MB | 34.1 MB | 67.4 MB | 57.3 MB | 230 MiB |
/// | 65,536 | 37.8 MB | 33.9 MB | 67.1 MB | 56.3 MB | 232 MiB |
/// | 131,072 | 34.8 MB | 34.0 MB | 67.1 MB | 56.4 MB | 252 MiB |
/// | 1,048,576 | 33.2 MB | 34.3 MB | | | 312 MiB (real conn) |
///
/// Larger pages cost memory (each column writer holds a page's values) and coarsen page-index
/// pruning; 65,536 rows keeps most of the gain at almost no memory.
pub const DEFAULT_PAGE_ROWS: usize = 65_536;

/// Most rows in a Parquet row group by default (parquet-rs's and pyarrow's default too).
///
/// Row groups are cut at `row_group_bytes` of compressed data, but data that compresses to a
/// few bytes per row (sFlow samples, flows) would otherwise put millions of rows into one row
/// group, and DataFusion, DuckDB and Spark give one row group to one core: a 6.7M-row sFlow file
/// written as one row group scanned on one of this machine's two cores.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1 << 20;

/// What keeps the list of a table's files (`--table-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableFormat {
    /// Plain Hive layout: the files in the directories are the table (the default).
    #[default]
    Hive,
    /// The same files, plus a Delta Lake log (`<table>/_delta_log/`, see [`crate::delta`]) that
    /// Spark, Trino and DuckDB's `delta_scan` read as the table. Applies to tables this run
    /// creates or writes; a table that already has a log keeps it whatever the flag says.
    Delta,
}

impl FromStr for TableFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "hive" => Ok(TableFormat::Hive),
            "delta" => Ok(TableFormat::Delta),
            _ => Err(format!("unknown table format {s:?}: use hive or delta")),
        }
    }
}

/// Everything the writer needs to know.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    pub store: StoreKind,
    pub codec: Codec,
    /// Codec level: zstd accepts -7..=22 (negative = faster), gzip 0..=9, brotli 0..=11.
    /// `None` = the codec's default (zstd: 1).
    pub level: Option<i32>,
    /// Target compressed size of a Parquet row group; the writer flushes a row group once its
    /// encoded size reaches this. Default 32 MiB: one row group per Athena/Trino split.
    pub row_group_bytes: usize,
    /// Most rows in a Parquet row group (default [`DEFAULT_ROW_GROUP_ROWS`], as parquet-rs and
    /// pyarrow): a file that compresses well below `row_group_bytes` still gets several row
    /// groups, which query engines scan on several cores.
    pub row_group_rows: usize,
    /// Target size of a Parquet data page (default 1 MiB).
    pub page_bytes: usize,
    /// Most rows in a Parquet data page (default [`DEFAULT_PAGE_ROWS`]).
    pub page_rows: usize,
    /// Largest dictionary page of a string column chunk before parquet-rs falls back to plain
    /// encoding for the rest of the chunk (default 4 MiB; other columns: `page_bytes`; see
    /// docs/lake.md).
    pub dictionary_page_bytes: usize,
    /// Directory partitioning by event time: chosen from the data (default) or given.
    pub partition: PartitionChoice,
    /// Sort keys (column paths such as `ts` or `id.orig_h`); empty = the table's time column.
    pub sort: Vec<String>,
    /// Columns that get a bloom filter, in addition to the table's lookup columns
    /// (`silt.lookup_columns`), unless `bloom_lookup_columns` is false.
    pub bloom_columns: Vec<String>,
    pub bloom_lookup_columns: bool,
    /// False-positive probability of the bloom filters.
    pub bloom_fpp: f64,
    /// Rows waiting to be sorted, per partition, before the lower half is written (bytes of Arrow
    /// memory). Input that is out of order by less than about half of this stays in one sorted file.
    pub sort_buffer_bytes: usize,
    /// Upper bound for all buffered rows and in-progress row groups together; beyond it the largest
    /// buffers are written out early (smaller row groups, never more memory).
    pub memory_bytes: usize,
    /// At most this many partitions have a file open; the least recently used one is finished.
    pub max_open_partitions: usize,
    /// `--partition-by FIELD`: partition and sort every table by this top-level timestamp column
    /// instead of the one its schema metadata names (`silt.time_column`); the files' metadata
    /// then names this column. `None` = the metadata's column.
    pub time_column: Option<String>,
    /// Per-column Parquet encoding hints, applied on top of the automatic choices.
    pub encodings: EncodingHints,
    /// `--table-format`: whether tables written get a Delta Lake log.
    pub table_format: TableFormat,
}

/// Per-column Parquet encoding hints (`--dictionary`, `--no-dictionary`, `--delta`,
/// `--byte-stream-split`). Columns are dotted paths (`id.orig_h`); a list column's path names its
/// elements. Every path must exist in every table written, with a type the encoding supports
/// (checked when a table's first batch arrives, see [`crate::store::encoding_plan`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodingHints {
    /// Dictionary encoding even where silt would turn it off (high-cardinality first rows); the
    /// dictionary page may grow to 4x the page size before parquet-rs falls back to plain.
    pub dictionary: Vec<String>,
    /// No dictionary: plain (or the column's delta/byte-stream-split hint) from the start.
    pub no_dictionary: Vec<String>,
    /// DELTA_BINARY_PACKED for integers, timestamps, dates and decimals up to 18 digits;
    /// DELTA_BYTE_ARRAY for strings and binary. Turns the dictionary off unless `dictionary`
    /// names the column too (then delta is the fallback after the dictionary overflows).
    pub delta: Vec<String>,
    /// BYTE_STREAM_SPLIT for float columns (no dictionary unless `dictionary` names the column).
    pub byte_stream_split: Vec<String>,
}

impl EncodingHints {
    pub fn is_empty(&self) -> bool {
        self == &EncodingHints::default()
    }
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self {
            store: StoreKind::Parquet,
            codec: Codec::Zstd,
            level: None,
            row_group_bytes: 32 << 20,
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            page_bytes: 1 << 20,
            page_rows: DEFAULT_PAGE_ROWS,
            dictionary_page_bytes: 4 << 20,
            partition: PartitionChoice::Auto,
            sort: Vec::new(),
            bloom_columns: Vec::new(),
            bloom_lookup_columns: true,
            bloom_fpp: 0.01,
            sort_buffer_bytes: 16 << 20,
            memory_bytes: 256 << 20,
            max_open_partitions: 32,
            time_column: None,
            encodings: EncodingHints::default(),
            table_format: TableFormat::Hive,
        }
    }
}

impl WriterConfig {
    /// Checks combinations the formats cannot do, with a message that says what to use instead.
    pub fn validate(&self) -> Result<(), String> {
        if self.page_rows == 0 {
            return Err("--page-rows 0: a data page holds at least one row".into());
        }
        if let Some(l) = self.level {
            let ok = match self.codec {
                Codec::Zstd => (-7..=22).contains(&l),
                Codec::Gzip => (0..=9).contains(&l),
                Codec::Brotli => (0..=11).contains(&l),
                _ => false,
            };
            if !ok {
                return Err(format!(
                    "--level {l} does not fit codec {:?} (zstd: -7..22, gzip: 0..9, brotli: 0..11; snappy, lz4 and none take no level)",
                    self.codec
                ));
            }
        }
        if self.store == StoreKind::Feather
            && !matches!(self.codec, Codec::Zstd | Codec::Lz4 | Codec::None)
        {
            return Err(format!(
                "feather files support zstd, lz4 or none, not {:?}",
                self.codec
            ));
        }
        if self.store == StoreKind::Feather && self.table_format == TableFormat::Delta {
            return Err(
                "--table-format delta needs Parquet files (a Delta table is Parquet only): drop --store feather"
                    .into(),
            );
        }
        if self.store == StoreKind::Feather && self.level.is_some() && self.codec == Codec::Lz4 {
            return Err("feather lz4 takes no level".into());
        }
        if self.row_group_bytes == 0 || self.page_bytes == 0 || self.dictionary_page_bytes == 0 {
            return Err(
                "--row-group-size, --page-size and --dictionary-page-size must be positive".into(),
            );
        }
        if self.row_group_rows == 0 {
            return Err("--row-group-rows 0: a row group holds at least one row".into());
        }
        let e = &self.encodings;
        for c in &e.dictionary {
            if e.no_dictionary.contains(c) {
                return Err(format!(
                    "column {c} is in both --dictionary and --no-dictionary"
                ));
            }
        }
        for c in &e.delta {
            if e.byte_stream_split.contains(c) {
                return Err(format!(
                    "column {c} is in both --delta and --byte-stream-split: choose one encoding"
                ));
            }
        }
        if self.store == StoreKind::Feather && !e.is_empty() {
            return Err(
                "--dictionary, --no-dictionary, --delta and --byte-stream-split are Parquet encodings; feather files take none of them"
                    .into(),
            );
        }
        if let Some(t) = &self.time_column {
            if t.is_empty() || t.contains('.') {
                return Err(format!(
                    "--partition-by {t:?}: name a top-level timestamp column (such as ts or timestamp)"
                ));
            }
        }
        Ok(())
    }
}
