//! The choices silt makes per column from the first batch of a file, on top of the writer
//! properties of `properties` (and under the user's hints, which `hints` applies last):
//! - no dictionary for leaves whose values are mostly distinct or would overflow the dictionary
//!   page ([`high_cardinality_leaves`]), and for such text and integers the layout that writes a
//!   sample of it smallest ([`smallest_encoding`]), with chunk statistics only for long free text;
//! - no min/max statistics for text whose values come in no order ([`unordered_text_leaves`]).
//!
//! Touches nothing but the batch it samples (the trial encodings are written to memory).

use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, Encoding, GzipLevel, ZstdLevel};
use parquet::file::properties::{
    EnabledStatistics, WriterProperties, WriterPropertiesBuilder, WriterVersion,
};
use parquet::schema::types::ColumnPath;

use super::properties::compression;
use crate::config::{Codec, WriterConfig};
use crate::writer::partition_point;

/// `props` with the choices judged on `first` (see the module doc). `chunk_rows` are the rows
/// expected in each of the file's column chunks, to which number columns' dictionaries are
/// projected.
pub(super) fn apply(
    mut props: WriterPropertiesBuilder,
    cfg: &WriterConfig,
    first: &RecordBatch,
    chunk_rows: usize,
) -> anyhow::Result<WriterPropertiesBuilder> {
    let pages = (cfg.dictionary_page_bytes, cfg.page_bytes);
    // Plain numbers beat an overflowing dictionary only through an entropy coder: without
    // compression (or with snappy or lz4) 8 plain bytes a value are larger than the
    // dictionary's indices even when it overflows (uncompressed Parquet grew 9 % in
    // `silt bench`), so the projection below is for zstd, gzip and brotli only.
    let project_to = match cfg.codec {
        Codec::Zstd | Codec::Gzip | Codec::Brotli => chunk_rows,
        Codec::None | Codec::Snappy | Codec::Lz4 => 0,
    };
    for leaf in high_cardinality_leaves(first, pages, project_to, chunk_rows) {
        let cp = ColumnPath::new(leaf.path);
        if !leaf.high {
            // Integers that fit a dictionary: deltas (counters and sequence numbers) or plain
            // values through the codec (numbers that repeat in short runs and patterns, such as
            // the sequence numbers of several sFlow agents in step) may be smaller still, and
            // cost no hashing. Either must beat the dictionary's indices and the share of its
            // page the sample's rows would bear in the chunk ([`page_share`]: the sample
            // alone would make a pool of values it mostly covers look as costly as a counter);
            // indices only widen as a chunk's dictionary grows, which errs towards the dictionary.
            if let Some(sample) = &leaf.sample {
                let dict = trial_size(sample, cfg, Encoding::PLAIN, true)?;
                let dict = dict.bytes - dict.dictionary_page
                    + (dict.dictionary_page as f64 * leaf.page_share) as usize;
                let plain = trial_size(sample, cfg, Encoding::PLAIN, false)?.bytes;
                let delta = trial_size(sample, cfg, Encoding::DELTA_BINARY_PACKED, false)?.bytes;
                // Deltas must save INT_DELTA_UNDER (readers decode them more slowly); plain
                // values only need to be no larger than the dictionary: they read as fast, and
                // writing them hashes nothing (the interner was ~10 % of a Zeek conn import's
                // CPU; the real-derived conn's client ports were 3.4x smaller plain).
                if delta * 100 < dict.min(plain) * INT_DELTA_UNDER {
                    props = props
                        .set_column_dictionary_enabled(cp.clone(), false)
                        .set_column_encoding(cp, Encoding::DELTA_BINARY_PACKED);
                } else if plain <= dict {
                    props = props.set_column_dictionary_enabled(cp, false);
                }
            }
            continue;
        }
        props = props.set_column_dictionary_enabled(cp.clone(), false);
        if let Some(sample) = &leaf.sample {
            let enc = smallest_encoding(sample, cfg)?;
            if enc != Encoding::PLAIN {
                props = props.set_column_encoding(cp.clone(), enc);
            }
        }
        if leaf.mean_len.is_some_and(|m| m >= LONG_TEXT_BYTES) {
            // Page min/max of free text prune nothing (a LIKE cannot use them); without
            // them (chunk statistics only) a string `log` conversion used ~8 % less CPU.
            props = props.set_column_statistics_enabled(cp, EnabledStatistics::Chunk);
        }
    }
    for path in unordered_text_leaves(first) {
        // Min/max of text that comes in no order (uids, community ids, hosts and DNS
        // names in a table sorted by time) span about the whole range in every page and
        // row group, so they prune nothing, and equality lookups have the bloom filter.
        // parquet-rs compares every value twice for them: without them, a zeek.conn
        // write in `silt bench` used about a tenth less CPU (648-689 against 735-794
        // ns/event in three alternating runs), a suricata.flow write about 4 % less.
        let cp = ColumnPath::new(path);
        props = props.set_column_statistics_enabled(cp, EnabledStatistics::None);
    }
    Ok(props)
}

/// The share of a column chunk's dictionary page that the `n` sampled values would bear in a
/// chunk of `chunk` values, from the distinct values among the sample's first half (`half`) and
/// among all of it (`whole`).
///
/// The trial's dictionary page is the sample's own. In the chunk it holds the distinct values of
/// `chunk` values and is spread over all of them. How the distinct values grow is estimated
/// with a pool of `K` equally likely values, `d(m) = K (1 - e^(-m/K))`, whose `K` the ratio
/// `whole / half` gives: a pool the sample already covers (client ports: 32k values, 65k rows)
/// barely grows and its sampled rows bear little of the page, values that keep coming (byte
/// counts, ratio 2) grow with the rows and the sample's rows bear all of theirs. Values drawn
/// unevenly (a few common, a long tail) keep growing longer than such a pool, so the estimate
/// errs towards the dictionary, the choice made before silt counted the page at all.
///
/// Counting indices alone, as silt did before, kept dictionaries up to 23 % larger than plain
/// values through zstd for the generated conn's byte counts (in a file written whole, whose
/// sample is the chunk; 3-5 % over the 2M-row lake), and hashed every one of their values. Heaps' law
/// (`d(m) ~ m^b`, as [`high_cardinality_leaves`] projects a dictionary's overflow) was tried
/// for this and rejected: it cannot tell a pool that is nearly covered from one that keeps
/// growing, and put generated DNS client ports plain, 17 % larger than as indices.
fn page_share(half: usize, whole: usize, n: usize, chunk: usize) -> f64 {
    if chunk <= n || half == 0 {
        return 1.0;
    }
    let (n, chunk) = (n as f64, chunk as f64);
    let r = whole as f64 / half as f64;
    // How many times more distinct values the chunk has than the sample.
    let grows = if r >= 2.0 {
        chunk / n
    } else if r <= 1.0 {
        1.0
    } else {
        // r = d(n) / d(n/2) = 1 + e^(-n/(2K))
        let k = n / (-2.0 * (r - 1.0).ln());
        (1.0 - (-chunk / k).exp()) / (1.0 - (-n / k).exp())
    };
    (grows * n / chunk).min(1.0)
}

/// Mean bytes per value from which a high-cardinality string column (whole log lines) gets
/// column-chunk statistics only: page min/max of free text prune nothing, and skipping them saved
/// about 8 % of a string-`log` conversion's CPU.
const LONG_TEXT_BYTES: f64 = 128.0;

/// Value bytes of a text column tried with each encoding by [`smallest_encoding`] (about a
/// data page; at most [`CARDINALITY_SAMPLE`] values).
const TRIAL_BYTES: usize = 1 << 20;

/// The encoding that writes a high-cardinality column's first values smallest with the
/// configured codec: of PLAIN, DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY for text, of PLAIN
/// and DELTA_BINARY_PACKED for integers.
///
/// Which one wins depends on the data, so it is measured rather than guessed: parquet-rs encodes
/// the sample into memory once per candidate (a few milliseconds per column and file; the level
/// is capped for the trial so that zstd 19 or brotli 11 do not make it slow). Measured at zstd 1:
/// Zeek conn uids (`C` + 17 random base62 characters) are 6.8 % smaller as DELTA_BYTE_ARRAY (the
/// shared `C` is stored as a prefix length; the whole file 3.0 %); DNS uids, which repeat a few
/// rows apart, 5.4 % smaller as DELTA_LENGTH_BYTE_ARRAY (the file 2.2 %); whole nginx log lines
/// 3.8 % smaller as DELTA_LENGTH_BYTE_ARRAY; Suricata community ids stay PLAIN. A delta layout
/// must beat PLAIN by 1 % to be chosen. DuckDB and pyarrow read both (checked on 2M-row conn and
/// dns lakes: same distinct count and hash sum of `uid`; the crosscheck queries a generated lake
/// with DuckDB); Spark 3.3+ and Trino document support.
///
/// Integers: counters and sequence numbers (sFlow sample pools and sequence numbers, uptimes,
/// frame numbers) pack as small deltas; random values of the full width stay PLAIN, and random
/// values narrower than their type may pack smaller as deltas (bit-packed to their width than
/// as plain bytes through zstd): deltas are kept when they are under [`INT_DELTA_UNDER`] % of
/// PLAIN.
fn smallest_encoding(
    sample: &arrow::array::ArrayRef,
    cfg: &WriterConfig,
) -> anyhow::Result<Encoding> {
    let size = |enc: Encoding| trial_size(sample, cfg, enc, false).map(|t| t.bytes);
    let plain = size(Encoding::PLAIN)?;
    let mut best = (Encoding::PLAIN, plain);
    // (candidates, percent of PLAIN's bytes a candidate must stay under)
    let (candidates, under): (&[Encoding], usize) = match sample.data_type() {
        DataType::Utf8 => (
            &[
                Encoding::DELTA_LENGTH_BYTE_ARRAY,
                Encoding::DELTA_BYTE_ARRAY,
            ],
            99,
        ),
        _ => (&[Encoding::DELTA_BINARY_PACKED], INT_DELTA_UNDER),
    };
    for &enc in candidates {
        let n = size(enc)?;
        if n < best.1 && n * 100 < plain * under {
            best = (enc, n);
        }
    }
    Ok(best.0)
}

/// Compressed bytes of a column chunk written by [`trial_size`], and of its dictionary page.
struct Trial {
    bytes: usize,
    dictionary_page: usize,
}

/// `sample` written alone as one column chunk with `enc` (after a dictionary when `dictionary`),
/// with the configured codec, its level capped so that zstd 19 or brotli 11 do not make the trial
/// slow.
fn trial_size(
    sample: &arrow::array::ArrayRef,
    cfg: &WriterConfig,
    enc: Encoding,
    dictionary: bool,
) -> anyhow::Result<Trial> {
    let trial = match compression(cfg.codec, cfg.level)? {
        Compression::ZSTD(l) if l.compression_level() > 3 => {
            Compression::ZSTD(ZstdLevel::try_new(3)?)
        }
        Compression::GZIP(l) if l.compression_level() > 6 => {
            Compression::GZIP(GzipLevel::try_new(6)?)
        }
        Compression::BROTLI(l) if l.compression_level() > 4 => {
            Compression::BROTLI(BrotliLevel::try_new(4)?)
        }
        c => c,
    };
    let field = arrow::datatypes::Field::new("v", sample.data_type().clone(), true);
    let schema = std::sync::Arc::new(Schema::new(vec![field]));
    let batch = RecordBatch::try_new(schema.clone(), vec![sample.clone()])?;
    let mut props = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_compression(trial)
        .set_dictionary_enabled(dictionary)
        .set_statistics_enabled(EnabledStatistics::None)
        .set_data_page_size_limit(cfg.page_bytes)
        .set_data_page_row_count_limit(cfg.page_rows);
    if !dictionary {
        props = props.set_encoding(enc);
    }
    let mut w = ArrowWriter::try_new(Vec::new(), schema, Some(props.build()))?;
    w.write(&batch)?;
    w.flush()?;
    let c = w.flushed_row_groups()[0].column(0);
    let dictionary_page = c
        .dictionary_page_offset()
        .map_or(0, |o| (c.data_page_offset() - o).max(0) as usize);
    Ok(Trial {
        bytes: c.compressed_size().max(0) as usize,
        dictionary_page,
    })
}

/// Percent of the alternative's bytes (PLAIN values, or a dictionary's indices) under which
/// an integer column gets DELTA_BINARY_PACKED (or, instead of a dictionary, PLAIN). Readers decode deltas more slowly than plain
/// values or indices, so a saving of a few percent is not worth it; counters and sequence
/// numbers save 30-70 % (sFlow's sample pools and sequence numbers, a synthetic pool counter in
/// `tests/number_dictionary.rs`).
const INT_DELTA_UNDER: usize = 90;

/// Text (Utf8) leaves (through structs; list elements are left alone) whose values come in no
/// order, so that any run of rows spans most of the range of values: min/max statistics of its
/// pages and row groups could prune nothing.
///
/// Judged on the first [`ORDER_SAMPLE`] values: split into runs of [`ORDER_RUN`] rows, each run's
/// min and max are placed among the sample's distinct values, sorted; the leaf is unordered when
/// the runs span more than half of them on average. Random ids and hosts in a table sorted by
/// time span nearly all; a sort key, time-ordered ids (ULIDs, UUIDv7, even with many per
/// millisecond) or a column that changes slowly span little, and keep their statistics, as does
/// a constant column. A page holds far more rows than a run, so a leaf judged ordered may still
/// have wide pages (it then only keeps statistics it did not need), while one judged unordered
/// cannot have narrow ones.
fn unordered_text_leaves(batch: &RecordBatch) -> Vec<Vec<String>> {
    use arrow::array::{Array, AsArray};
    fn unordered(s: &arrow::array::StringArray) -> bool {
        let vals: Vec<&str> = s.iter().take(ORDER_SAMPLE).flatten().collect();
        if vals.len() < 2 * ORDER_RUN {
            return false;
        }
        let mut distinct = vals.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() < 2 {
            return false;
        }
        let rank = |v: &str| distinct.partition_point(|d| *d < v);
        let runs: Vec<f64> = vals
            .chunks_exact(ORDER_RUN)
            .map(|run| {
                let (lo, hi) = run
                    .iter()
                    .fold((run[0], run[0]), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
                (rank(hi) - rank(lo)) as f64 / (distinct.len() - 1) as f64
            })
            .collect();
        runs.iter().sum::<f64>() / runs.len() as f64 > 0.5
    }
    fn walk(path: &mut Vec<String>, a: &dyn Array, out: &mut Vec<Vec<String>>) {
        match a.data_type() {
            DataType::Struct(fields) => {
                for (f, c) in fields.iter().zip(a.as_struct().columns()) {
                    path.push(f.name().clone());
                    walk(path, c.as_ref(), out);
                    path.pop();
                }
            }
            DataType::Utf8 if unordered(a.as_string::<i32>()) => out.push(path.clone()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        walk(&mut vec![f.name().clone()], c.as_ref(), &mut out);
    }
    out
}

/// Values sampled by [`unordered_text_leaves`] (sorting them takes well under a millisecond).
const ORDER_SAMPLE: usize = 4096;

/// Rows per run in [`unordered_text_leaves`].
const ORDER_RUN: usize = 256;

/// Rows sampled to judge a column's cardinality (from the batch given to [`open`]).
pub const CARDINALITY_SAMPLE: usize = 65536;

/// A leaf column found by [`high_cardinality_leaves`].
struct HighCardinality {
    path: Vec<String>,
    /// No dictionary. False for an integer leaf that fits one but is not constant in the
    /// sample: it is tried against deltas.
    high: bool,
    /// Strings: the mean bytes per value.
    mean_len: Option<f64>,
    /// Strings and integers: the first values (up to [`TRIAL_BYTES`]), for
    /// [`smallest_encoding`].
    sample: Option<arrow::array::ArrayRef>,
    /// Integers: the share of the chunk's dictionary page the sample's rows would bear
    /// ([`page_share`]).
    page_share: f64,
}

/// Leaf columns (struct paths; list elements are left alone) whose values are mostly distinct in
/// the first rows of a file, or whose distinct values there already overflow the dictionary
/// page: a dictionary cannot shrink them (uids, byte counts, durations), and parquet-rs would
/// build one for every row group, hashing every value, until it overflows the dictionary page
/// and falls back to plain anyway. No dictionary from the start (plain, or for text the layout
/// [`smallest_encoding`] picks) is smaller and costs no hashing;
/// columns that repeat keep their dictionary (proto, service, ports, hosts).
///
/// The sample is large (64Ki rows) because a pool larger than the sample looks unique in it: the
/// 30k client addresses of the generated web log hour are 78 % distinct in its first 4Ki rows,
/// 59 % in 16Ki and 33 % in 64Ki, and a dictionary makes them a third of their plain zstd size.
/// Estimating the distinct count from a small sample (Chao1) was tried and rejected: values that
/// repeat only close together in time (a connection's uid in a few DNS rows) look like a small
/// pool to it.
///
/// Returns each such column's path and, for strings, the mean bytes per value and a sample;
/// also integer columns that keep a dictionary but have many distinct values (`high` false),
/// with a sample, for the trial against deltas and plain values in [`apply`]. `project_to`: the
/// rows a number column's dictionary is projected to (0: none); `chunk_rows`: the rows of a
/// column chunk, for [`page_share`].
fn high_cardinality_leaves(
    batch: &RecordBatch,
    (string_dict_page, dict_page): (usize, usize),
    project_to: usize,
    chunk_rows: usize,
) -> Vec<HighCardinality> {
    use arrow::array::{Array, AsArray};
    // hashbrown's default hasher (foldhash), not std's SipHash: this runs on the first 64Ki
    // rows of every column of every file, several times a second in `silt serve` (SipHash was
    // a quarter of the serve flush thread's time in `perf`).
    use hashbrown::HashSet;
    /// Whether a dictionary is not worth it (distinct values over half the rows, or more bytes
    /// than the dictionary page holds), the mean value length, and the distinct values in the
    /// first half of the values and in all of them.
    ///
    /// `rows` (numbers only; 0 for text, and without an entropy-coding codec) are the rows
    /// expected in the file: the dictionary the column would need there is projected from the
    /// sample. A number column whose distinct values keep growing with the rows (durations,
    /// byte counts, a flow id that two DNS rows share) overflows the dictionary page later in the
    /// chunk, and parquet-rs then writes the rest plain, after a dictionary that bought nothing
    /// (generated conn `duration`: 3.24 B/row that way, 2.91 plain; EVE dns `flow_id` 4.0 and
    /// 3.3). The projection follows Heaps' law,
    /// distinct(N) = distinct(n) * (N/n)^b, with b measured between the sample's first half and
    /// the whole sample: a pool of values that the sample already mostly covers (ports, packet
    /// counts, 30k hosts) grows little and keeps its dictionary, values that keep coming grow
    /// linearly and lose it.
    /// `n` is the number of `values` (the sample's valid values).
    fn unique<'a>(
        values: impl Iterator<Item = &'a [u8]>,
        n: usize,
        overhead: usize,
        page: usize,
        rows: usize,
    ) -> (bool, f64, usize, usize) {
        let mut seen: HashSet<&[u8]> = HashSet::with_capacity(n.min(4096));
        let (mut bytes, mut dict_bytes, mut half_distinct) = (0usize, 0usize, 0usize);
        for (i, v) in values.enumerate() {
            if i == n / 2 {
                half_distinct = seen.len();
            }
            bytes += v.len();
            if seen.insert(v) {
                dict_bytes += v.len() + overhead;
            }
        }
        let mean = bytes as f64 / n.max(1) as f64;
        let mut projected = dict_bytes as f64;
        if rows > n && half_distinct > 0 {
            let b = (seen.len() as f64 / half_distinct as f64)
                .log2()
                .clamp(0.0, 1.0);
            projected *= (rows as f64 / n as f64).powf(b);
        }
        (
            seen.len() * 2 > n || projected > page as f64,
            mean,
            half_distinct,
            seen.len(),
        )
    }
    type Out = Vec<HighCardinality>;
    /// `pages`: the dictionary page limits of string and of other columns.
    /// `rows`: the rows the dictionary's overflow is projected to (0: none); `chunk_rows`: the
    /// rows expected in a column chunk.
    fn walk(
        path: &mut Vec<String>,
        a: &dyn Array,
        pages: (usize, usize),
        (rows, chunk_rows): (usize, usize),
        out: &mut Out,
    ) {
        let n = a.len().min(CARDINALITY_SAMPLE);
        let valid = (0..n).filter(|&i| a.is_valid(i)).count();
        if valid < 64 {
            return;
        }
        // (no dictionary, mean text length, sample for trials, tried against deltas, page share)
        let (high, mean, sample, trial, share) = match a.data_type() {
            DataType::Struct(fields) => {
                let s = a.as_struct();
                for (f, c) in fields.iter().zip(s.columns()) {
                    path.push(f.name().clone());
                    walk(path, c.as_ref(), pages, (rows, chunk_rows), out);
                    path.pop();
                }
                return;
            }
            DataType::Utf8 => {
                let s = a.as_string::<i32>();
                let vals = (0..n)
                    .filter(|&i| s.is_valid(i))
                    .map(|i| s.value(i).as_bytes());
                // A dictionary entry is the value plus its 4-byte length.
                let (high, mean, _, _) = unique(vals, valid, 4, pages.0, 0);
                let offsets = s.value_offsets();
                let rows =
                    partition_point(1, n, |i| ((offsets[i] - offsets[0]) as usize) < TRIAL_BYTES);
                (high, Some(mean), Some(a.slice(0, rows.max(1))), false, 1.0)
            }
            // Decimals up to 18 digits are 4- or 8-byte integers in the file; counted as 8 bytes
            // (their low 8 bytes tell them apart), which errs towards plain for the 4-byte ones.
            // 32-bit numbers count 4 bytes: their dictionaries overflow like any other's. 16-bit
            // ones (ports) cannot overflow theirs (below). All are tried against deltas and
            // plain values (sFlow's sample pools and sequence numbers; real client ports, 3.4x
            // smaller plain through zstd than as indices in the real-derived conn benchmark).
            DataType::Int64
            | DataType::UInt64
            | DataType::Float64
            | DataType::Decimal128(..=18, _)
            | DataType::Int32
            | DataType::UInt32
            | DataType::Float32
            | DataType::Date32
            | DataType::UInt16
            | DataType::Int16 => {
                let d = a.to_data();
                let (width, key) = match a.data_type() {
                    DataType::Decimal128(..) => (16, 8),
                    DataType::UInt16 | DataType::Int16 => (2, 2),
                    DataType::Int32 | DataType::UInt32 | DataType::Float32 | DataType::Date32 => {
                        (4, 4)
                    }
                    _ => (8, 8),
                };
                let v = &d.buffers()[0].as_slice()[d.offset() * width..];
                let vals = (0..n)
                    .filter(|&i| a.is_valid(i))
                    .map(|i| &v[i * width..i * width + key]);
                let (high, _, half, distinct) = unique(vals, valid, 0, pages.1, rows);
                // The chunk's valid values, if it has the sample's share of nulls.
                let chunk_values = chunk_rows * valid / n;
                let share = page_share(half, distinct, valid, chunk_values);
                // Mostly distinct in the sample or not, a 16-bit dictionary (65,536 values at
                // most) fits its page and its indices are at most 16 bits: the trial against
                // plain values decides
                // (random client ports are 60 % distinct in 64Ki rows, and 12 % smaller as
                // indices over a 2M-row file).
                let high = high && key != 2;
                // Integers may pack smaller as deltas (counters, sequence numbers): without a
                // dictionary the trial in `smallest_encoding` decides, with one (many distinct
                // values that still fit) `apply` tries deltas against it.
                let sample = matches!(
                    a.data_type(),
                    DataType::Int64
                        | DataType::UInt64
                        | DataType::Int32
                        | DataType::UInt32
                        | DataType::UInt16
                        | DataType::Int16
                )
                .then(|| a.slice(0, n.min(TRIAL_BYTES / width)));
                // Every non-constant one is tried: how few distinct values a column has does not
                // say whether its indices are the smallest layout (real sFlow datagram sequence
                // numbers, six samples per datagram from four agents in step, are 1/24 distinct
                // in the sample, yet plain through zstd takes 0.42 of their indices' bytes), and
                // the trial keeps indices where they are smaller (ports, interfaces).
                let trial = sample.is_some() && distinct > 1;
                (high, None, sample, trial, share)
            }
            _ => return,
        };
        if high || trial {
            out.push(HighCardinality {
                path: path.clone(),
                high,
                mean_len: mean,
                sample,
                page_share: share,
            });
        }
    }
    let mut out = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        let mut p = vec![f.name().clone()];
        walk(
            &mut p,
            c.as_ref(),
            (string_dict_page, dict_page),
            (project_to, chunk_rows),
            &mut out,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::page_share;

    /// Draws `n` values uniformly from a pool of `k` and returns the distinct values among the
    /// first half and among all.
    fn drawn(k: u64, n: usize) -> (usize, usize) {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut seen = std::collections::HashSet::new();
        let mut half = 0;
        for i in 0..n {
            if i == n / 2 {
                half = seen.len();
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            seen.insert(x % k);
        }
        (half, seen.len())
    }

    #[test]
    fn the_page_share_follows_the_pool() {
        let (n, chunk) = (65_536, 1 << 20);
        // Client ports: a pool of 32k the sample nearly covers. The chunk's page holds about as
        // many values as the sample's, spread over 16 times the rows.
        let (h, w) = drawn(32_768, n);
        let s = page_share(h, w, n, chunk);
        let covered = 32_768.0 / w as f64 * n as f64 / chunk as f64;
        assert!((s - covered).abs() < 0.02, "{s} against {covered}");
        // Values that keep coming: every sampled row bears its own entry.
        let (h, w) = drawn(u64::MAX, n);
        assert_eq!(page_share(h, w, n, chunk), 1.0);
        // A pool much larger than the sample grows almost linearly.
        let (h, w) = drawn(10_000_000, n);
        assert!(page_share(h, w, n, chunk) > 0.9);
        // No new values in the second half: the page stays as it is.
        assert_eq!(page_share(100, 100, n, chunk), n as f64 / chunk as f64);
        // The sample is the chunk, or too small to tell: all of it.
        assert_eq!(page_share(h, w, n, n), 1.0);
        assert_eq!(page_share(0, 5, n, chunk), 1.0);
    }
}
