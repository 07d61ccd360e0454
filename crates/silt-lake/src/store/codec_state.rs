//! The memory a Parquet file's compression codec holds while the file is open, so that the
//! writer can count it against `--memory`.
//!
//! parquet-rs gives every column writer a codec of its own for the whole row group, and zstd's
//! (a `zstd::bulk::Compressor`) keeps a compression context sized by the level and by the
//! largest page it has compressed. Measured with `ZSTD_sizeof_CCtx` after compressing one page
//! (zstd 1.5.7): 0.56 MiB per column at level 1, 1.2 MiB at 3, 10.5 MiB at 9 and 17 MiB at 19
//! for 1 MiB pages, 49 MiB at 19 for a 4 MiB dictionary page. A Zeek conn file has 20 columns:
//! 11 MiB per open file at the default level, up to a gigabyte at level 19, none of it in
//! parquet-rs's own `memory_size`. Before it was counted, an import of 2M real-derived conn
//! records into month partitions (nine open files) peaked at 405 MB with `--memory 256MiB`, and
//! at 906 MB with `--level 19`.
//!
//! A context grows with the pages it compresses, so the state is counted from the bytes each
//! column has been given ([`CodecState`]): a small file's small pages get small contexts.
//!
//! The figures come from zstd itself (`ZSTD_getCParams`, `ZSTD_estimateCCtxSize_usingCParams`,
//! its experimental API: the parameters a context of that level gets for a page of that size,
//! and the memory that context allocates), not from a table of our own.
//!
//! Touches nothing: pure functions of the codec, the level and the page size.

use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::SchemaDescriptor;

/// The codec state of a row group's column writers, as the row group grows.
///
/// A column's context is sized by the largest page it has compressed, and a page is at most the
/// column's page limit (its dictionary page's, when it has a dictionary) and at most the Arrow
/// bytes the column has been given in this row group (a page holds no more than its values:
/// plain text as Arrow holds it, dictionary indices and levels in less). So a file of a few
/// hundred rows is counted at the small context its small pages get, not at the largest one.
pub(super) struct CodecState {
    /// Each leaf's codec and largest page ([`largest_page`]).
    leaves: Vec<(Compression, usize)>,
    /// Arrow bytes each leaf has been given in the row group in progress.
    given: Vec<usize>,
    /// Each leaf's estimate, and the power of two of the page size it is for (zstd's
    /// parameters change only there, so most slices need no new estimate).
    estimates: Vec<(usize, usize)>,
    total: usize,
}

impl CodecState {
    pub(super) fn new(descr: &SchemaDescriptor, props: &WriterProperties) -> Self {
        let leaves: Vec<(Compression, usize)> = descr
            .columns()
            .iter()
            .map(|c| {
                let path = c.path();
                let dictionary = props
                    .dictionary_enabled(path)
                    .then(|| props.column_dictionary_page_size_limit(path));
                let page = largest_page(props.column_data_page_size_limit(path), dictionary);
                (props.compression(path), page)
            })
            .collect();
        let given = vec![0; leaves.len()];
        let estimates = vec![(0, 0); leaves.len()];
        Self {
            leaves,
            given,
            estimates,
            total: 0,
        }
    }

    /// Counts `bytes` more Arrow bytes given to each leaf (in leaf order).
    pub(super) fn give(&mut self, bytes: &[usize]) {
        for (g, b) in self.given.iter_mut().zip(bytes) {
            *g = g.saturating_add(*b);
        }
        self.total = 0;
        for ((&(codec, page), &given), (est, pow)) in
            self.leaves.iter().zip(&self.given).zip(&mut self.estimates)
        {
            let size = page.min(given);
            let p = match size {
                0 => 0,
                n => n.checked_next_power_of_two().unwrap_or(usize::MAX),
            };
            if p != *pow {
                // A page size's estimate is that of the power of two above it: an upper bound.
                *est = column_bytes(codec, p.min(page));
                *pow = p;
            }
            self.total += *est;
        }
    }

    /// A new row group: its column writers start with new codecs.
    pub(super) fn new_row_group(&mut self) {
        self.given.fill(0);
        self.estimates.fill((0, 0));
        self.total = 0;
    }

    /// The bytes the codecs hold now.
    pub(super) fn bytes(&self) -> usize {
        self.total
    }
}

/// Bytes of codec state a column writer holds once it has compressed pages of up to
/// `largest_page` bytes (nothing before its first page).
fn column_bytes(compression: Compression, largest_page: usize) -> usize {
    if largest_page == 0 {
        return 0;
    }
    match compression {
        Compression::ZSTD(level) => zstd_context_bytes(level.compression_level(), largest_page),
        // `snap::raw::Encoder`'s hash table: at most 2^14 u16 entries.
        Compression::SNAPPY => 32 << 10,
        // gzip, brotli and lz4 build their state per page and free it after.
        _ => 0,
    }
}

/// The bytes a zstd context allocates to compress `src` bytes (more than 0) in one shot at
/// `level`.
fn zstd_context_bytes(level: i32, src: usize) -> usize {
    // SAFETY: both functions only compute from their arguments (no pointers are passed).
    unsafe {
        let params = zstd_sys::ZSTD_getCParams(level, src as std::os::raw::c_ulonglong, 0);
        zstd_sys::ZSTD_estimateCCtxSize_usingCParams(params)
    }
}

/// The largest page a column writer compresses, with room for the overshoot of a page that is
/// cut only once its estimate has passed the limit (zstd sizes its window by the power of two
/// above the page size).
fn largest_page(data_page_limit: usize, dictionary_page_limit: Option<usize>) -> usize {
    let limit = data_page_limit.max(dictionary_page_limit.unwrap_or(0));
    limit.saturating_add(limit / 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::basic::ZstdLevel;

    fn zstd(level: i32) -> Compression {
        Compression::ZSTD(ZstdLevel::try_new(level).unwrap())
    }

    /// The estimate is what a context really allocates after compressing a page of that size,
    /// as parquet-rs compresses them (`zstd::bulk::Compressor`, one per column writer).
    #[test]
    fn estimates_match_what_zstd_allocates() {
        for level in [1, 3, 9, 19] {
            for page in [64usize << 10, 1 << 20] {
                let data: Vec<u8> = (0..page).map(|i| (i * 7919 % 251) as u8).collect();
                let mut c = zstd::bulk::Compressor::new(level).unwrap();
                c.compress(&data).unwrap();
                let real = c.context_mut().sizeof();
                let est = column_bytes(zstd(level), page);
                // Level 9 and up may use zstd's row match finder, which the estimate sizes for
                // the larger of its two layouts.
                assert!(
                    est >= real && est <= real + real / 4,
                    "level {level}, page {page}: estimated {est}, allocated {real}"
                );
            }
        }
    }

    #[test]
    fn state_follows_the_bytes_given_up_to_each_page_limit() {
        use arrow::datatypes::{DataType, Field, Schema};
        let schema = Schema::new(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("b", DataType::Int64, false),
        ]);
        let descr = parquet::arrow::ArrowSchemaConverter::new()
            .convert(&schema)
            .unwrap();
        let props = WriterProperties::builder()
            .set_compression(zstd(3))
            .set_data_page_size_limit(1 << 20)
            .set_dictionary_page_size_limit(4 << 20)
            .set_column_dictionary_enabled("b".into(), false)
            .build();
        let mut s = CodecState::new(&descr, &props);
        assert_eq!(s.bytes(), 0, "nothing compressed yet");
        s.give(&[1000, 1000]);
        // Counted at the power of two above what each column was given.
        assert_eq!(s.bytes(), 2 * column_bytes(zstd(3), 1024));
        s.give(&[10 << 20, 10 << 20]);
        // Then at most at each column's largest page: the dictionary page for `a`, a data page
        // for `b` (no dictionary), with a quarter's overshoot.
        assert_eq!(
            s.bytes(),
            column_bytes(zstd(3), 5 << 20) + column_bytes(zstd(3), (1 << 20) + (1 << 18))
        );
        s.new_row_group();
        assert_eq!(s.bytes(), 0, "a new row group's writers have new codecs");
    }

    #[test]
    fn grows_with_the_level_and_the_page() {
        let one = column_bytes(zstd(1), 1 << 20);
        assert!((400 << 10..1 << 20).contains(&one), "{one}");
        assert!(column_bytes(zstd(19), 1 << 20) > 10 * one);
        assert!(column_bytes(zstd(19), 4 << 20) > 2 * column_bytes(zstd(19), 1 << 20));
        assert_eq!(column_bytes(Compression::UNCOMPRESSED, 1 << 20), 0);
        assert_eq!(column_bytes(zstd(19), 0), 0, "no page compressed yet");
        assert_eq!(largest_page(1 << 20, None), (1 << 20) + (1 << 18));
        assert_eq!(largest_page(1 << 20, Some(4 << 20)), 5 << 20);
    }
}
