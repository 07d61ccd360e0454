//! The benchmark matrix: stores × codec/level × row-group size, parsed from the command-line
//! lists (`--stores parquet,feather`, `--codecs none,zstd:-5,zstd:1,zstd:9,zstd:19`,
//! `--row-group-size 32MiB,128MiB`). Combinations a store cannot do (feather with snappy) are
//! left out with a note. Touches nothing.

use silt_lake::{Codec, StoreKind, WriterConfig};

/// The default codec list: the study's levels (none, zstd -5, 1, 9, 19).
pub const DEFAULT_CODECS: &str = "none,zstd:-5,zstd:1,zstd:9,zstd:19";

/// The label of the configuration goal 3 compares with DuckDB and pyarrow: Parquet, zstd level
/// 1, the default 32 MiB row groups, silt's default writer.
pub const GOAL_CONFIG: &str = "parquet+zstd:1";

/// One codec with its optional level, as written on the command line (`zstd:1`, `lz4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecSpec {
    pub codec: Codec,
    pub level: Option<i32>,
}

impl CodecSpec {
    /// `zstd`, `zstd:-5`, `lz4`, `snappy`, `none`, `gzip:6`, `brotli:1`.
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        let s = s.trim();
        let (c, l) = match s.split_once(':') {
            Some((c, l)) => (c, Some(l.trim().parse::<i32>()?)),
            None => (s, None),
        };
        let codec: Codec = c.parse().map_err(anyhow::Error::msg)?;
        // zstd without a level means silt's default, 1; name it so rows compare.
        let level = match (codec, l) {
            (Codec::Zstd, None) => Some(1),
            (_, l) => l,
        };
        Ok(Self { codec, level })
    }

    pub fn codec_name(&self) -> &'static str {
        codec_name(self.codec)
    }

    /// `zstd:1`, `none`.
    pub fn label(&self) -> String {
        match self.level {
            Some(l) => format!("{}:{l}", self.codec_name()),
            None => self.codec_name().to_string(),
        }
    }
}

pub fn codec_name(c: Codec) -> &'static str {
    match c {
        Codec::Zstd => "zstd",
        Codec::Snappy => "snappy",
        Codec::Lz4 => "lz4",
        Codec::Gzip => "gzip",
        Codec::Brotli => "brotli",
        Codec::None => "none",
    }
}

pub fn store_name(s: StoreKind) -> &'static str {
    s.extension()
}

/// One configuration of the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchConfig {
    pub store: StoreKind,
    pub codec: CodecSpec,
    /// Parquet row-group target in bytes (ignored by Feather, recorded as 0 there).
    pub row_group_bytes: usize,
    /// A variant of silt's writer settings for the "what buys what" runs: `default`,
    /// `no-bloom`, `unsorted`, `by-host`, `no-dict`, `as-text`.
    pub variant: Variant,
}

/// Writer variants used to show what sorting, types, dictionaries and bloom filters cost or buy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// silt's writer as `silt import` runs it: rows sorted by the time column, bloom filters on
    /// lookup columns, dictionary chosen per column.
    Default,
    /// Without bloom filters.
    NoBloom,
    /// Rows in input order (not sorted by time).
    Unsorted,
    /// Rows sorted by the source address (`id.orig_h`, `src_ip`, `src`, `remote_addr`), then by
    /// time: the other sort order a security lake could choose (one host's rows together).
    /// Tables without a source address have no such row.
    ByHost,
    /// No dictionary encoding on any (non-list) column.
    NoDictionary,
    /// Every typed leaf (times, numbers, decimals, booleans) written as its text, as the
    /// original log carried it: what silt's types buy.
    AsText,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Default => "default",
            Variant::NoBloom => "no-bloom",
            Variant::Unsorted => "unsorted",
            Variant::ByHost => "by-host",
            Variant::NoDictionary => "no-dict",
            Variant::AsText => "as-text",
        }
    }
}

impl BenchConfig {
    /// `parquet zstd:1 32MiB`, short form for plots and tables.
    pub fn label(&self) -> String {
        let mut s = format!("{}+{}", store_name(self.store), self.codec.label());
        if self.store == StoreKind::Parquet && self.row_group_bytes != 32 << 20 {
            s.push_str(&format!(" rg{}MiB", self.row_group_bytes >> 20));
        }
        if self.variant != Variant::Default {
            s.push_str(&format!(" [{}]", self.variant.name()));
        }
        s
    }

    /// Parquet, zstd level 1, silt's default writer: the configuration goal 3 compares with
    /// DuckDB and pyarrow.
    pub fn is_goal_config(&self) -> bool {
        self.label() == GOAL_CONFIG
    }

    /// The writer configuration `silt import` would use for this configuration.
    pub fn writer_config(&self) -> WriterConfig {
        WriterConfig {
            store: self.store,
            codec: self.codec.codec,
            level: self.codec.level,
            row_group_bytes: self.row_group_bytes.max(1),
            bloom_lookup_columns: self.variant != Variant::NoBloom,
            ..WriterConfig::default()
        }
    }
}

/// Builds the matrix; returns the configurations and notes about combinations left out.
pub fn build(
    stores: &[StoreKind],
    codecs: &[CodecSpec],
    row_groups: &[usize],
) -> (Vec<BenchConfig>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    for &store in stores {
        for &codec in codecs {
            let rgs: Vec<usize> = if store == StoreKind::Parquet {
                row_groups.to_vec()
            } else {
                vec![0]
            };
            for rg in rgs {
                let c = BenchConfig {
                    store,
                    codec,
                    row_group_bytes: rg,
                    variant: Variant::Default,
                };
                match c.writer_config().validate() {
                    Ok(()) => out.push(c),
                    Err(e) => notes.push(format!("left out {}: {e}", c.label())),
                }
            }
        }
    }
    notes.dedup();
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_codecs_and_skips_impossible_combinations() {
        let codecs: Vec<CodecSpec> = "none,zstd:-5,zstd,snappy"
            .split(',')
            .map(|s| CodecSpec::parse(s).unwrap())
            .collect();
        assert_eq!(codecs[1].level, Some(-5));
        assert_eq!(codecs[2].level, Some(1));
        let (m, notes) = build(
            &[StoreKind::Parquet, StoreKind::Feather],
            &codecs,
            &[32 << 20, 128 << 20],
        );
        // parquet: 4 codecs × 2 row groups; feather: none, zstd:-5, zstd:1 (no snappy).
        assert_eq!(m.len(), 8 + 3);
        assert_eq!(notes.len(), 1);
        assert!(CodecSpec::parse("zstd:x").is_err());
    }
}
