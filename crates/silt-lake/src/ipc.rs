//! Reading Feather (Arrow IPC) files whose bytes may be damaged, as errors instead of panics.
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
//! Worse than a panic, arrow-ipc allocates what a damaged footer says a record batch's block
//! holds (`memory allocation of 549755814464 bytes failed`), which aborts the process: no
//! `catch_unwind` stops that. [`open`] therefore reads the footer's block list first and
//! refuses a file whose blocks reach past its end, so that no allocation exceeds the file's
//! size.
//!
//! Touches nothing but the reader it is given.

use std::io::{Read, Seek, SeekFrom};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ipc::reader::FileReader;

/// A Feather file's reader: [`FileReader`] with a panic on a damaged record batch returned as
/// an error, after which the iteration ends.
pub struct Reader<R> {
    inner: FileReader<R>,
    failed: bool,
}

/// Opens the Feather (Arrow IPC file) `r`: its footer and schema read, or an error saying they
/// are damaged (also when the reader panicked on them, or when the footer's blocks reach past
/// the file's end).
pub fn open<R: Read + Seek>(mut r: R) -> Result<Reader<R>, ArrowError> {
    check_blocks(&mut r)?;
    r.seek(SeekFrom::Start(0))?;
    match silt_core::panics::catch(|| FileReader::try_new(r, None)) {
        Ok(inner) => Ok(Reader {
            inner: inner?,
            failed: false,
        }),
        Err(p) => Err(ArrowError::IpcError(format!(
            "damaged Arrow IPC footer (the reader panicked on it: {p})"
        ))),
    }
}

/// Checks that every record batch and dictionary block the footer of `r` lists lies within the
/// file. A file too short for a footer, or whose footer does not parse, is left to
/// [`FileReader`], which says what is wrong with it.
fn check_blocks<R: Read + Seek>(r: &mut R) -> Result<(), ArrowError> {
    let len = r.seek(SeekFrom::End(0))?;
    if len < 10 {
        return Ok(());
    }
    r.seek(SeekFrom::End(-10))?;
    let mut tail = [0u8; 10];
    r.read_exact(&mut tail)?;
    let Ok(footer_len) = arrow::ipc::reader::read_footer_length(tail) else {
        return Ok(());
    };
    let footer_len = footer_len as u64;
    if footer_len + 10 > len {
        return Err(ArrowError::IpcError(format!(
            "damaged Arrow IPC footer: it says it is {footer_len} bytes long, in a file of {len}"
        )));
    }
    r.seek(SeekFrom::Start(len - 10 - footer_len))?;
    let mut buf = vec![0u8; footer_len as usize];
    r.read_exact(&mut buf)?;
    let Ok(footer) = arrow::ipc::root_as_footer(&buf) else {
        return Ok(());
    };
    let blocks = footer.recordBatches().into_iter().flatten();
    for b in blocks.chain(footer.dictionaries().into_iter().flatten()) {
        let (offset, meta, body) = (b.offset(), b.metaDataLength() as i64, b.bodyLength());
        let end = offset.checked_add(meta).and_then(|e| e.checked_add(body));
        if offset < 0 || meta < 0 || body < 0 || end.is_none_or(|e| e as u64 > len) {
            return Err(ArrowError::IpcError(format!(
                "damaged Arrow IPC footer: it lists a block of {meta} + {body} bytes at offset \
                 {offset}, past the end of the file's {len} bytes"
            )));
        }
    }
    Ok(())
}

impl<R: Read + Seek> Reader<R> {
    pub fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    pub fn num_batches(&self) -> usize {
        self.inner.num_batches()
    }

    /// The footer's own key-value metadata (where silt keeps the file's checksum).
    pub fn custom_metadata(&self) -> &std::collections::HashMap<String, String> {
        self.inner.custom_metadata()
    }
}

impl<R: Read + Seek> Iterator for Reader<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match silt_core::panics::catch(|| self.inner.next()) {
            Ok(b) => b,
            // The reader's state is not to be trusted after a panic: no batch after this one.
            Err(p) => {
                self.failed = true;
                Some(Err(ArrowError::IpcError(format!(
                    "damaged Arrow IPC record batch (the reader panicked on it: {p})"
                ))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int16Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
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
