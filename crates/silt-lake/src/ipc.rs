//! Reading Feather (Arrow IPC) files whose bytes may be damaged, as errors instead of panics or
//! aborts.
//!
//! arrow-ipc (59) trusts the flatbuffers of a file's footer: a schema whose type tag or integer
//! width a flipped byte changed panics (`not implemented: Type NONE not supported`, `Int type
//! with bit width of 1291845696 ... not supported`) instead of failing. A lake's file damaged
//! that way (a disk's bit rot, a copy cut short and patched) then killed `silt tables`, `silt
//! inspect`, `silt compact` and every query over the lake, even one naming another table. Every
//! silt reader of a Feather file opens it through [`open`], which turns such a panic into an
//! error that names the damage, so the file is skipped or reported like any other unreadable
//! file; [`Reader`] does the same for each record batch.
//!
//! Worse than a panic, arrow-ipc reserves memory at lengths the file gives before it reads
//! anything, which aborts the process when they are absurd (`memory allocation of 549755814464
//! bytes failed`): no `catch_unwind` stops that. Two such lengths:
//! - a record batch's block in the footer: [`open`] refuses a file whose blocks reach past its
//!   end;
//! - a compressed buffer's uncompressed length (the 8 bytes before its zstd or LZ4 data):
//!   [`Reader`] reads each block itself (as arrow-ipc's `FileReader` would, once) and checks it
//!   with [`silt_core::ipc_check`] before arrow-ipc's `FileDecoder` decodes it.
//!
//! Touches nothing but the reader it is given.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::buffer::{Buffer, MutableBuffer};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ipc::reader::FileDecoder;
use arrow::ipc::Block;

/// A Feather file's reader: its record batches in order, each checked before arrow-ipc decodes
/// it, with a panic of arrow-ipc's returned as an error, after which the iteration ends.
pub struct Reader<R> {
    r: R,
    decoder: FileDecoder,
    schema: SchemaRef,
    blocks: Vec<Block>,
    next: usize,
    custom_metadata: HashMap<String, String>,
    failed: bool,
}

/// What [`open`] takes from a footer.
struct Footer {
    schema: SchemaRef,
    version: arrow::ipc::MetadataVersion,
    custom_metadata: HashMap<String, String>,
    batches: Vec<Block>,
    dictionaries: Vec<Block>,
}

/// Opens the Feather (Arrow IPC file) `r`: its footer, schema and dictionaries read, or an error
/// saying they are damaged (also when arrow-ipc panicked on them, or when the footer's blocks
/// reach past the file's end).
pub fn open<R: Read + Seek>(mut r: R) -> Result<Reader<R>, ArrowError> {
    let len = r.seek(SeekFrom::End(0))?;
    if len < 10 {
        return Err(ArrowError::ParseError(format!(
            "not an Arrow IPC file: {len} bytes, too short for a footer"
        )));
    }
    r.seek(SeekFrom::End(-10))?;
    let mut tail = [0u8; 10];
    r.read_exact(&mut tail)?;
    let footer_len = arrow::ipc::reader::read_footer_length(tail)? as u64;
    if footer_len + 10 > len {
        return Err(ArrowError::IpcError(format!(
            "damaged Arrow IPC footer: it says it is {footer_len} bytes long, in a file of {len}"
        )));
    }
    r.seek(SeekFrom::Start(len - 10 - footer_len))?;
    let mut buf = vec![0u8; footer_len as usize];
    r.read_exact(&mut buf)?;
    let footer = match silt_core::panics::catch(|| read_footer(&buf)) {
        Ok(f) => f?,
        Err(p) => {
            return Err(ArrowError::IpcError(format!(
                "damaged Arrow IPC footer (the reader panicked on it: {p})"
            )))
        }
    };
    for b in footer.batches.iter().chain(&footer.dictionaries) {
        let (offset, meta, body) = (b.offset(), b.metaDataLength() as i64, b.bodyLength());
        let end = offset.checked_add(meta).and_then(|e| e.checked_add(body));
        if offset < 0 || meta < 8 || body < 0 || end.is_none_or(|e| e as u64 > len) {
            return Err(ArrowError::IpcError(format!(
                "damaged Arrow IPC footer: it lists a block of {meta} + {body} bytes at offset \
                 {offset}, past the end of the file's {len} bytes"
            )));
        }
    }
    let mut decoder = FileDecoder::new(footer.schema.clone(), footer.version);
    for block in &footer.dictionaries {
        let buf = read_block(&mut r, block)?;
        guarded("dictionary", || decoder.read_dictionary(block, &buf))?;
    }
    Ok(Reader {
        r,
        decoder,
        schema: footer.schema,
        blocks: footer.batches,
        next: 0,
        custom_metadata: footer.custom_metadata,
        failed: false,
    })
}

/// The footer flatbuffer `buf` read as arrow-ipc's `FileReader` reads it (which may panic on
/// a damaged one).
fn read_footer(buf: &[u8]) -> Result<Footer, ArrowError> {
    let footer = arrow::ipc::root_as_footer(buf)
        .map_err(|e| ArrowError::ParseError(format!("Unable to get root as footer: {e:?}")))?;
    let ipc_schema = footer
        .schema()
        .ok_or_else(|| ArrowError::IpcError("damaged Arrow IPC footer: no schema".into()))?;
    if !ipc_schema.endianness().equals_to_target_endianness() {
        return Err(ArrowError::IpcError(
            "the Arrow IPC file's endianness is not this machine's".into(),
        ));
    }
    let schema = Arc::new(arrow::ipc::convert::fb_to_schema(ipc_schema));
    let custom_metadata = footer
        .custom_metadata()
        .into_iter()
        .flatten()
        .filter_map(|kv| Some((kv.key()?.to_string(), kv.value()?.to_string())))
        .collect();
    let batches = footer
        .recordBatches()
        .ok_or_else(|| {
            ArrowError::ParseError("Unable to get record batches from IPC Footer".into())
        })?
        .iter()
        .copied()
        .collect();
    let dictionaries = footer
        .dictionaries()
        .into_iter()
        .flatten()
        .copied()
        .collect();
    Ok(Footer {
        schema,
        version: footer.version(),
        custom_metadata,
        batches,
        dictionaries,
    })
}

/// The block `b` of `r` (within the file: [`open`] checked), checked by
/// [`silt_core::ipc_check`]. The buffer is allocated as arrow-ipc allocates it (aligned, so the
/// decoded arrays use it without a copy).
fn read_block<R: Read + Seek>(r: &mut R, b: &Block) -> Result<Buffer, ArrowError> {
    r.seek(SeekFrom::Start(b.offset() as u64))?;
    let meta = b.metaDataLength() as usize;
    let mut buf = MutableBuffer::from_len_zeroed(meta + b.bodyLength() as usize);
    r.read_exact(&mut buf)?;
    silt_core::ipc_check::check_block(&buf, meta).map_err(|e| {
        ArrowError::IpcError(format!(
            "damaged Arrow IPC block at offset {}: {e}",
            b.offset()
        ))
    })?;
    Ok(buf.into())
}

/// `f()` (decoding a `what` block), with a panic of arrow-ipc's as an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, ArrowError>) -> Result<T, ArrowError> {
    silt_core::panics::catch(f).unwrap_or_else(|p| {
        Err(ArrowError::IpcError(format!(
            "damaged Arrow IPC {what} (the reader panicked on it: {p})"
        )))
    })
}

impl<R: Read + Seek> Reader<R> {
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    pub fn num_batches(&self) -> usize {
        self.blocks.len()
    }

    /// The footer's own key-value metadata (where silt keeps the file's checksum).
    pub fn custom_metadata(&self) -> &HashMap<String, String> {
        &self.custom_metadata
    }

    /// Checks every record batch block as [`Reader`] checks the one it reads, reading only the
    /// blocks' metadata and their compressed buffers' length prefixes, not the data: for files
    /// another reader decodes (DataFusion's scan of a lake's Feather files, whose arrow-ipc
    /// would reserve a damaged length and abort). One rule is stricter than [`Reader`]'s: a
    /// block's metadata must parse on its own (a flatbuffer pointing past it, into the body, is
    /// damage no writer makes).
    pub fn check_batches(&mut self) -> Result<(), ArrowError> {
        let Reader { r, blocks, .. } = self;
        for b in blocks.iter() {
            let damaged = |e: String| {
                ArrowError::IpcError(format!(
                    "damaged Arrow IPC block at offset {}: {e}",
                    b.offset()
                ))
            };
            let meta_len = b.metaDataLength() as u64;
            r.seek(SeekFrom::Start(b.offset() as u64))?;
            let mut meta = vec![0u8; meta_len as usize];
            r.read_exact(&mut meta)?;
            // At least 8 bytes: `open` checked.
            let fb = silt_core::ipc_check::flatbuffer(&meta).unwrap_or_default();
            let m = arrow::ipc::root_as_message(fb)
                .map_err(|e| damaged(format!("its metadata does not parse ({e})")))?;
            let body_at = b.offset() as u64 + meta_len;
            silt_core::ipc_check::check_buffers(&m, b.bodyLength() as u64, |at| {
                r.seek(SeekFrom::Start(body_at + at)).ok()?;
                let mut p = [0u8; 8];
                r.read_exact(&mut p).ok()?;
                Some(p)
            })
            .map_err(damaged)?;
        }
        Ok(())
    }
}

impl<R: Read + Seek> Iterator for Reader<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let block = *self.blocks.get(self.next)?;
        self.next += 1;
        let r = read_block(&mut self.r, &block).and_then(|buf| {
            guarded("record batch", || {
                self.decoder.read_record_batch(&block, &buf)
            })
        });
        match r {
            // A message without a header ends the file, as for arrow-ipc's `FileReader`.
            Ok(b) => b.map(Ok),
            // Nothing after a damaged batch is to be trusted (the decoder's state, the blocks'
            // order): no batch after this one.
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int16Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::ipc::reader::FileReader;
    use arrow::ipc::writer::FileWriter;
    use std::io::Cursor;
    use std::sync::Arc;

    fn file() -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int16, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int16Array::from(vec![Some(1), None, Some(3)])),
                Arc::new(StringArray::from(vec![Some("a"), Some("bb"), None])),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = FileWriter::try_new(&mut out, &schema).unwrap();
        w.write(&batch).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        out
    }

    /// Leaves out the "thread panicked" lines of the panics these tests provoke and catch (as
    /// the `silt` binary's hook does); other panics are printed as before.
    fn quiet_hook() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let default = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if !silt_core::panics::quiet() {
                    default(info);
                }
            }));
        });
    }

    /// Every single-byte change of the file, read whole through [`open`] and [`Reader`]: no
    /// panic escapes, whatever arrow-ipc does. Also checks that arrow-ipc itself still panics
    /// on some of them, so this test covers what the module is for (when a newer arrow-ipc
    /// panics on none, the panic half of the module can go; the allocation check stays until
    /// arrow-ipc bounds its reads itself).
    #[test]
    fn no_byte_change_makes_a_read_panic() {
        quiet_hook();
        let good = file();
        assert_eq!(
            open(Cursor::new(good.clone()))
                .unwrap()
                .map(|b| b.unwrap().num_rows())
                .sum::<usize>(),
            6
        );
        let mut raw_panics = 0;
        let mut errors = 0;
        // Changes that would have made arrow-ipc allocate what the footer says (and abort).
        let mut past_end = 0;
        for i in 0..good.len() {
            for x in [0x01u8, 0x80, 0xff, 0x4d] {
                let mut bad = good.clone();
                bad[i] ^= x;
                let ours = std::panic::catch_unwind(|| match open(Cursor::new(bad.clone())) {
                    Ok(r) => r.map(|b| b.map(|b| b.num_rows())).collect::<Vec<_>>(),
                    Err(e) => vec![Err(e)],
                });
                let results =
                    ours.unwrap_or_else(|_| panic!("a panic escaped at byte {i} ^ {x:#x}"));
                errors += results.iter().filter(|r| r.is_err()).count();
                past_end += results.iter().any(|r| {
                    r.as_ref()
                        .is_err_and(|e| e.to_string().contains("past the end"))
                }) as usize;
                // Only opened: reading on could abort the test (the allocation `open` prevents).
                let raw = silt_core::panics::catch(|| FileReader::try_new(Cursor::new(bad), None));
                raw_panics += raw.is_err() as usize;
            }
        }
        assert!(raw_panics > 0, "arrow-ipc panicked on no damaged file");
        assert!(errors > 0);
        assert!(past_end > 0, "no change reached the block check");
    }

    /// A Feather file of two batches with a dictionary column, compressed with `c`.
    fn compressed_file(c: arrow::ipc::CompressionType) -> Vec<u8> {
        use arrow::array::DictionaryArray;
        use arrow::datatypes::Int32Type;
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int16, true),
            Field::new("s", DataType::Utf8, true),
            Field::new(
                "d",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                true,
            ),
        ]));
        let rows = 300;
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int16Array::from_iter((0..rows).map(|i| Some(i as i16 % 7)))),
                Arc::new(StringArray::from_iter(
                    (0..rows).map(|i| Some(format!("v{}", i % 5))),
                )),
                Arc::new(DictionaryArray::<Int32Type>::from_iter(
                    (0..rows).map(|i| Some(["tcp", "udp"][i % 2])),
                )),
            ],
        )
        .unwrap();
        let opts = arrow::ipc::writer::IpcWriteOptions::default()
            .try_with_compression(Some(c))
            .unwrap();
        let mut out = Vec::new();
        let mut w = FileWriter::try_new_with_options(&mut out, &schema, opts).unwrap();
        w.write(&batch).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        out
    }

    /// Every single-byte change of a zstd- and an LZ4-compressed file, read whole: no panic
    /// escapes and nothing aborts. Some changes make a compressed buffer claim an uncompressed
    /// length arrow-ipc would have failed to reserve (the process aborted on them before the
    /// check in `read_block`); the test counts that it met some.
    #[test]
    fn no_byte_change_of_a_compressed_file_panics_or_aborts() {
        quiet_hook();
        for c in [
            arrow::ipc::CompressionType::ZSTD,
            arrow::ipc::CompressionType::LZ4_FRAME,
        ] {
            let good = compressed_file(c);
            let rows = |b: Vec<u8>| match open(Cursor::new(b)) {
                Ok(r) => r.map(|b| b.map(|b| b.num_rows())).collect::<Vec<_>>(),
                Err(e) => vec![Err(e)],
            };
            let intact: Vec<usize> = rows(good.clone()).into_iter().map(Result::unwrap).collect();
            assert_eq!(intact, [300, 300], "{c:?}");
            open(Cursor::new(good.clone()))
                .unwrap()
                .check_batches()
                .unwrap();
            let mut forged = 0;
            for i in 0..good.len() {
                for x in [0x01u8, 0x80, 0xff, 0x4d] {
                    let mut bad = good.clone();
                    bad[i] ^= x;
                    let results = std::panic::catch_unwind(|| rows(bad.clone()))
                        .unwrap_or_else(|_| panic!("{c:?}: a panic escaped at byte {i} ^ {x:#x}"));
                    let hit = results.iter().any(|r| {
                        r.as_ref()
                            .is_err_and(|e| e.to_string().contains("damaged or forged length"))
                    });
                    forged += hit as usize;
                    // What another decoder of the file relies on: the metadata-only check finds
                    // every such length too.
                    if hit {
                        let checked = open(Cursor::new(bad)).and_then(|mut r| r.check_batches());
                        assert!(
                            checked.is_err(),
                            "{c:?}: byte {i} ^ {x:#x} passed check_batches"
                        );
                    }
                }
            }
            assert!(forged > 0, "{c:?}: no change reached the length check");
        }
    }

    #[test]
    fn a_damaged_schema_type_is_an_error_naming_the_footer() {
        quiet_hook();
        let good = file();
        // The footer's copy of the schema: find the byte whose change arrow-ipc panics on.
        let hit = (0..good.len()).find_map(|i| {
            let mut bad = good.clone();
            bad[i] ^= 0x4d;
            silt_core::panics::catch(|| FileReader::try_new(Cursor::new(bad.clone()), None).is_ok())
                .is_err()
                .then_some(bad)
        });
        let bad = hit.expect("some byte change makes arrow-ipc panic");
        let e = open(Cursor::new(bad)).err().expect("an error");
        assert!(e.to_string().contains("damaged Arrow IPC footer"), "{e}");
    }
}
