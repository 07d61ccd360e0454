//! A checksum of each data file's contents, kept in the file itself, so that damage which still
//! decodes (a flipped byte inside a compressed or plain page) is found instead of read as data.
//!
//! Why silt keeps one of its own: parquet-rs writes no page checksums (the `crc` field of a
//! Parquet page header), zstd frames as parquet-rs writes them carry none either, and Arrow IPC
//! has none at all. Zeroed or flipped bytes inside a page can therefore decode into other values
//! with no error, and compaction would write those values into its output and remove the
//! original (measured in the exploratory run of 2026-12-07: 3 of 120 zeroed ranges with zstd,
//! 9 of 75 with snappy, 12 of 75 with lz4, 3 of 75 uncompressed).
//!
//! **What is summed.** Every data file silt writes ([`crate::store`]'s sinks) carries the key
//! [`KEY`] in its footer's key-value metadata (Parquet) or custom metadata (Arrow IPC footer):
//! `<crc>:<size>`, 8 and 16 hex digits, where `<size>` is the file's size and `<crc>` the CRC-32
//! (IEEE, as `crc32fast` and zlib compute it) of the whole file as it would read with the value
//! itself written as [`PLACEHOLDER`]. So every byte is covered: pages, dictionaries, bloom
//! filters, the page index and the footer (its statistics, which prune row groups and pages,
//! included). The sinks write the placeholder, keep the bytes written after the pages (the page
//! index and footer, small) to find where it landed, and write the value over it once the file
//! is complete.
//!
//! **Another tool's copy.** Readers (parquet-rs, pyarrow) surface a Parquet file's key-value
//! metadata as its Arrow schema's metadata, so a tool that reads a silt file and writes another
//! (a pyarrow rewrite, `silt query -o x.parquet`) can copy the key into a file it does not
//! describe. A value whose `<size>` is not the file's is taken for such a copy: the file counts
//! as one without a sum ([`Check::Foreign`]). Damage that changes a file's size breaks its
//! footer (read from the end) anyway.
//!
//! **Who checks.** Compaction checks a file's sum before decoding it ([`crate::compact`]'s
//! reads, which the damage search after a failed query also uses), and `silt verify`
//! ([`crate::verify`]) checks every file of a lake. Files without the key (written by another
//! tool, or by silt before the key existed) are decoded whole instead. Queries do not check
//! sums: that would read every byte of every file a query touches.
//!
//! Touches nothing but the bytes it is given.

use std::io::{self, Read, Seek, SeekFrom, Write};

use arrow::ipc::reader::read_footer_length;
use arrow::ipc::root_as_footer;
use parquet::file::metadata::ParquetMetaDataReader;
use parquet::file::reader::ChunkReader;

use crate::config::StoreKind;

/// The footer key that holds a file's checksum (see the module documentation).
pub const KEY: &str = "silt.crc32";

/// What silt's Parquet files end their `created_by` with: a file that says it and has no
/// [`KEY`] lost it to damage (a flip in the key's name or in the footer's structure around it).
pub const CREATED_BY_MARK: &str = "(silt.crc32)";

/// What the sinks write as the key's value until the file is complete; its length is the
/// value's.
pub const PLACEHOLDER: &str = "00000000:0000000000000000";

/// A writer that sums what passes through it (and, once [`Summing::watch`] is called, looks for
/// the [`PLACEHOLDER`] in what follows: the page index and footer).
pub struct Summing<W> {
    inner: W,
    hasher: crc32fast::Hasher,
    len: u64,
    /// Set by [`Summing::watch`].
    watch: Option<Watch>,
}

/// Where the placeholder was last seen, and the last bytes written (one fewer than the
/// placeholder has, for one that spans two writes): memory stays constant however large the
/// page index is.
#[derive(Default)]
struct Watch {
    found: Option<u64>,
    carry: Vec<u8>,
}

impl Watch {
    /// Looks at `data`, written at offset `at`.
    fn see(&mut self, at: u64, data: &[u8]) {
        let p = PLACEHOLDER.as_bytes();
        let keep = p.len() - 1;
        let mut edge = self.carry.clone();
        edge.extend_from_slice(&data[..data.len().min(keep)]);
        if let Some(i) = edge.windows(p.len()).rposition(|w| w == p) {
            self.found = Some(at - self.carry.len() as u64 + i as u64);
        }
        // One wholly in `data` comes after any that starts before it.
        if let Some(i) = data.windows(p.len()).rposition(|w| w == p) {
            self.found = Some(at + i as u64);
        }
        self.carry
            .extend_from_slice(&data[data.len().saturating_sub(keep)..]);
        let cut = self.carry.len().saturating_sub(keep);
        self.carry.drain(..cut);
    }
}

impl<W: Write> Summing<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: crc32fast::Hasher::new(),
            len: 0,
            watch: None,
        }
    }

    /// Looks for the placeholder in every byte written from now on (call it once the pages are
    /// out, before the footer with the [`PLACEHOLDER`] is written).
    pub fn watch(&mut self) {
        self.watch = Some(Watch::default());
    }
}

impl<W: Write + Seek> Summing<W> {
    /// The finished file: the value written over the placeholder (the last one written since
    /// [`Summing::watch`]), and the writer at the file's end.
    pub fn seal(mut self) -> io::Result<W> {
        let at = self
            .watch
            .take()
            .and_then(|w| w.found)
            .ok_or_else(|| io::Error::other("the checksum placeholder was not written"))?;
        let value = format_value(self.hasher.finalize(), self.len);
        self.inner.flush()?;
        self.inner.seek(SeekFrom::Start(at))?;
        self.inner.write_all(value.as_bytes())?;
        self.inner.seek(SeekFrom::End(0))?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for Summing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        if let Some(w) = &mut self.watch {
            w.see(self.len, &buf[..n]);
        }
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn format_value(crc: u32, size: u64) -> String {
    format!("{crc:08x}:{size:016x}")
}

/// `<crc>:<size>` parsed; `None` if it is not that.
fn parse_value(v: &str) -> Option<(u32, u64)> {
    let (crc, size) = v.split_once(':')?;
    if crc.len() != 8 || size.len() != 16 {
        return None;
    }
    Some((
        u32::from_str_radix(crc, 16).ok()?,
        u64::from_str_radix(size, 16).ok()?,
    ))
}

/// What checking a file's sum found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The file sums to what its footer says.
    Match,
    /// The footer holds no sum (another tool's file, or an older silt's).
    Absent,
    /// The footer holds a sum written for another file (see the module documentation): why.
    Foreign(String),
    /// The file is damaged; the reason says how, in words for an error message.
    Damaged(String),
}

/// Checks the sum of the data file `src` (a [`StoreKind`] file). `Err` when its footer does
/// not read (the file is damaged there: its reader's own error says how) or reading fails.
pub fn check<R: ChunkReader>(src: &R, store: StoreKind) -> anyhow::Result<Check> {
    let size = src.len();
    let (value, footer) = match store {
        StoreKind::Parquet => {
            // The footer reader panics on some damage (as the page readers do).
            let md =
                silt_core::panics::catch(|| ParquetMetaDataReader::new().parse_and_finish(src))
                    .map_err(|p| anyhow::anyhow!("the footer reader panicked on it: {p}"))??;
            let value = md
                .file_metadata()
                .key_value_metadata()
                // The last one: the sink appends it after any the writer's properties hold.
                .and_then(|kv| kv.iter().rfind(|k| k.key == KEY))
                .map(|k| k.value.clone().unwrap_or_default());
            let marked = md
                .file_metadata()
                .created_by()
                .is_some_and(|c| c.ends_with(CREATED_BY_MARK));
            if value.is_none() && marked {
                return Ok(Check::Damaged(format!(
                    "its footer says silt wrote it with a checksum, but its {KEY} key is gone: \
                     the footer is damaged"
                )));
            }
            // The footer: its length and `PAR1` end the file.
            let tail: [u8; 8] = src.get_bytes(size - 8, 8)?.as_ref().try_into()?;
            let len = u32::from_le_bytes(tail[..4].try_into()?) as u64;
            (value, size - 8 - len..size - 8)
        }
        StoreKind::Feather => feather_value(src)?,
    };
    let region = src.get_bytes(footer.start, (footer.end - footer.start) as usize)?;
    let Some(value) = value else {
        // The key's bytes are there but its reader does not see them: the footer's structure
        // around them is damaged (a flip in the key's own name is what `created_by` tells).
        // In Parquet's footer the key is followed by its value's Thrift header (a binary
        // field, of the placeholder's length), which `created_by`'s mark is not.
        let mut written = KEY.as_bytes().to_vec();
        if store == StoreKind::Parquet {
            written.extend([0x18, PLACEHOLDER.len() as u8]);
        }
        if region.windows(written.len()).any(|w| w == written) {
            return Ok(Check::Damaged(format!(
                "its footer holds a {KEY} key its reader does not see: the footer is damaged"
            )));
        }
        return Ok(Check::Absent);
    };
    let Some((expected, written_size)) = parse_value(&value) else {
        return Ok(Check::Damaged(format!(
            "its footer's {KEY} value {value:?} is not <8 hex digits>:<16 hex digits>"
        )));
    };
    if written_size != size {
        return Ok(Check::Foreign(format!(
            "its footer's {KEY} was written for a file of {written_size} bytes, and it has \
             {size}: a tool that rewrote a silt file copied the key"
        )));
    }
    let Some(at) = region
        .windows(value.len())
        .rposition(|w| w == value.as_bytes())
    else {
        return Ok(Check::Damaged(format!(
            "its footer's {KEY} value is not where its footer's bytes are"
        )));
    };
    let at = footer.start + at as u64;
    let mut hasher = crc32fast::Hasher::new();
    let mut read = sum_range(src, 0, at, &mut hasher)?;
    hasher.update(PLACEHOLDER.as_bytes());
    let after = at + PLACEHOLDER.len() as u64;
    read += PLACEHOLDER.len() as u64 + sum_range(src, after, size - after, &mut hasher)?;
    if read != size {
        return Ok(Check::Damaged(format!(
            "it has {size} bytes but only {read} could be read"
        )));
    }
    let actual = hasher.finalize();
    Ok(if actual == expected {
        Check::Match
    } else {
        Check::Damaged(format!(
            "checksum mismatch: its bytes sum to CRC-32 {actual:08x}, not the {expected:08x} \
             silt wrote in its footer ({KEY}); the file changed after it was written"
        ))
    })
}

/// Feeds bytes `start..start + len` of `src` to `hasher`; returns how many there were.
fn sum_range<R: ChunkReader>(
    src: &R,
    start: u64,
    len: u64,
    hasher: &mut crc32fast::Hasher,
) -> anyhow::Result<u64> {
    let mut r = src.get_read(start)?.take(len);
    let mut buf = vec![0u8; 1 << 20];
    let mut read = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(read),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        hasher.update(&buf[..n]);
        read += n as u64;
    }
}

/// The [`KEY`] value of an Arrow IPC file's footer and where the footer's bytes are (its last
/// 10 bytes are the footer's length and `ARROW1`), read without the rest of the file.
type Found = (Option<String>, std::ops::Range<u64>);

fn feather_value<R: ChunkReader>(src: &R) -> anyhow::Result<Found> {
    let size = src.len();
    anyhow::ensure!(
        size >= 10,
        "an Arrow IPC file of {size} bytes has no footer"
    );
    let tail: [u8; 10] = src.get_bytes(size - 10, 10)?.as_ref().try_into()?;
    let len = read_footer_length(tail)? as u64;
    anyhow::ensure!(
        len + 10 <= size,
        "its footer length {len} is more than the file's {size} bytes"
    );
    let bytes = src.get_bytes(size - 10 - len, len as usize)?;
    let footer = root_as_footer(&bytes)
        .map_err(|e| anyhow::anyhow!("its Arrow IPC footer does not parse: {e}"))?;
    let value = footer.custom_metadata().and_then(|kvs| {
        kvs.iter()
            .rfind(|kv| kv.key() == Some(KEY))
            .map(|kv| kv.value().unwrap_or_default().to_string())
    });
    Ok((value, size - 10 - len..size - 10))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use bytes::Bytes;
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..1000)),
                Arc::new(StringArray::from_iter_values(
                    (0..1000).map(|i| format!("v{i}")),
                )),
            ],
        )
        .unwrap()
    }

    /// A Parquet file written as the Parquet sink writes one (page index included).
    fn parquet() -> Vec<u8> {
        let b = batch();
        let props = WriterProperties::builder()
            .set_compression(parquet::basic::Compression::UNCOMPRESSED)
            .set_created_by(format!("silt test {CREATED_BY_MARK}"))
            .build();
        let out = Summing::new(Cursor::new(Vec::new()));
        let mut w = ArrowWriter::try_new(out, b.schema(), Some(props)).unwrap();
        w.write(&b).unwrap();
        w.append_key_value_metadata(KeyValue::new(KEY.into(), PLACEHOLDER.to_string()));
        w.flush().unwrap();
        w.inner_mut().watch();
        w.into_inner().unwrap().seal().unwrap().into_inner()
    }

    /// An Arrow IPC file written as the Feather sink writes one.
    fn feather() -> Vec<u8> {
        let b = batch();
        let out = Summing::new(Cursor::new(Vec::new()));
        let mut w = arrow::ipc::writer::FileWriter::try_new(out, &b.schema()).unwrap();
        w.write(&b).unwrap();
        w.write_metadata(KEY, PLACEHOLDER);
        w.get_mut().watch();
        w.finish().unwrap();
        w.into_inner().unwrap().seal().unwrap().into_inner()
    }

    fn check_of(data: &[u8], store: StoreKind) -> Check {
        check(&Bytes::from(data.to_vec()), store).unwrap()
    }

    #[test]
    fn an_intact_file_matches_and_a_flipped_byte_anywhere_is_found() {
        for (data, store) in [
            (parquet(), StoreKind::Parquet),
            (feather(), StoreKind::Feather),
        ] {
            assert_eq!(check_of(&data, store), Check::Match, "{store:?}");
            // Every byte, the page index and footer included.
            for at in 0..data.len() {
                let mut bad = data.clone();
                bad[at] ^= 0x10;
                match check(&Bytes::from(bad), store) {
                    Ok(Check::Damaged(_)) | Err(_) => {}
                    // Feather has no `created_by`: a flip in the key's name reads as a file
                    // without a sum (it is then decoded whole).
                    Ok(Check::Absent) if store == StoreKind::Feather => {
                        let key = data
                            .windows(KEY.len())
                            .rposition(|w| w == KEY.as_bytes())
                            .unwrap();
                        assert!((key..key + KEY.len()).contains(&at), "{store:?} byte {at}");
                    }
                    other => panic!("{store:?} byte {at}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn the_placeholder_is_found_whatever_the_writes_it_spans() {
        let p = PLACEHOLDER.as_bytes();
        let mut stream = b"xx".to_vec();
        stream.extend_from_slice(p);
        stream.extend_from_slice(b"yyy");
        stream.extend_from_slice(p);
        stream.extend_from_slice(b"z");
        let last = (stream.len() - 1 - p.len()) as u64;
        for step in [1, 2, 7, 24, 25, 26, 100] {
            let mut w = Watch::default();
            let mut at = 0;
            for chunk in stream.chunks(step) {
                w.see(at, chunk);
                at += chunk.len() as u64;
            }
            assert_eq!(w.found, Some(last), "writes of {step}");
        }
    }

    #[test]
    fn a_file_without_a_sum_is_absent_and_a_copied_or_malformed_one_is_told() {
        let b = batch();
        let plain = |kv: Option<&str>| {
            let mut w = ArrowWriter::try_new(Vec::new(), b.schema(), None).unwrap();
            w.write(&b).unwrap();
            if let Some(v) = kv {
                w.append_key_value_metadata(KeyValue::new(KEY.into(), v.to_string()));
            }
            w.into_inner().unwrap()
        };
        assert_eq!(check_of(&plain(None), StoreKind::Parquet), Check::Absent);
        // The key's name among another tool's footer bytes (a column's statistics) is no key.
        let named = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, false)])),
            vec![Arc::new(StringArray::from(vec![KEY, KEY]))],
        )
        .unwrap();
        let mut w = ArrowWriter::try_new(Vec::new(), named.schema(), None).unwrap();
        w.write(&named).unwrap();
        let data = w.into_inner().unwrap();
        assert_eq!(check_of(&data, StoreKind::Parquet), Check::Absent);
        // Another file's value, copied by a tool that rewrote it.
        let Check::Foreign(why) = check_of(
            &plain(Some("0badcafe:0000000000001000")),
            StoreKind::Parquet,
        ) else {
            panic!()
        };
        assert!(why.contains("written for a file of 4096 bytes"), "{why}");
        let Check::Damaged(why) = check_of(&plain(Some("12:0000abcd")), StoreKind::Parquet) else {
            panic!()
        };
        assert!(why.contains("is not <8 hex digits>"), "{why}");
        assert_eq!(
            parse_value("0000abcd:0000000000000012"),
            Some((0xabcd, 0x12))
        );
        for v in [
            "12",
            "0000abcd:12",
            "0000abcg:0000000000000012",
            "0000abcd-0000000000000012",
        ] {
            assert_eq!(parse_value(v), None, "{v}");
        }
    }
}
