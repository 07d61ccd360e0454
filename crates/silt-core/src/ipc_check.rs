//! Arrow IPC messages from bytes silt does not trust (a lake file that may be damaged, what a
//! client sends) checked before arrow-ipc decodes them.
//!
//! arrow-ipc (59) reserves what a compressed body buffer's 8-byte prefix says its uncompressed
//! length is (`Vec::with_capacity` in its LZ4 and zstd paths) before it decompresses anything.
//! One flipped byte in that prefix of a zstd-compressed Feather file made silt allocate
//! 432,345,564,227,567,615 bytes, which aborts the process: an allocation failure is not a panic,
//! and no `catch_unwind` stops it. A Flight SQL client could do the same to `silt serve` on
//! purpose with the parameter values it binds. [`check_body`] refuses such a message first.
//!
//! A prefix is refused when it is more than [`MAX_RATIO`] times the compressed bytes that follow
//! it (neither codec can expand that much: a zstd block of 128 KiB takes at least 4 bytes, an
//! LZ4 frame far more) or more than [`MAX_BUFFER`] (no batch silt writes or accepts holds a
//! single buffer that large; the first rule alone would let a 128 KiB buffer ask for 4 GiB). A
//! smaller wrong prefix is harmless here: arrow-ipc then finds that the decompressed length
//! differs and returns an error.
//!
//! Touches nothing: it reads the message and body it is given.

use arrow::ipc::Message;

/// How many times its compressed bytes a buffer may say it holds uncompressed.
pub const MAX_RATIO: u64 = 1 << 15;

/// The most bytes one body buffer may say it holds uncompressed (4 GiB).
pub const MAX_BUFFER: u64 = 1 << 32;

/// Checks the record batch (or dictionary batch) `message` against its `body`: every buffer lies
/// within the body, and every compressed buffer's uncompressed length is one arrow-ipc can be
/// trusted to reserve (see the module documentation). Other messages (a schema) pass. The
/// error says which buffer is wrong and how.
pub fn check_body(message: &Message<'_>, body: &[u8]) -> Result<(), String> {
    check_buffers(message, body.len() as u64, |at| {
        Some(
            body[at as usize..at as usize + 8]
                .try_into()
                .expect("8 bytes"),
        )
    })
}

/// [`check_body`] for a body that is not in memory: `len` is its length, and `prefix(at)` reads
/// its 8 bytes at `at` (a buffer's start, known to lie within the body); `None` (a failed read)
/// is an error.
pub fn check_buffers(
    message: &Message<'_>,
    len: u64,
    mut prefix: impl FnMut(u64) -> Option<[u8; 8]>,
) -> Result<(), String> {
    let batch = match message.header_as_record_batch() {
        Some(b) => b,
        None => match message.header_as_dictionary_batch().and_then(|d| d.data()) {
            Some(b) => b,
            None => return Ok(()),
        },
    };
    let compressed = batch.compression().is_some();
    for (i, b) in batch.buffers().into_iter().flatten().enumerate() {
        let (offset, size) = (b.offset(), b.length());
        let end = u64::try_from(offset)
            .ok()
            .zip(u64::try_from(size).ok())
            .and_then(|(o, s)| o.checked_add(s));
        if end.is_none_or(|e| e > len) {
            return Err(format!(
                "buffer {i} of {size} bytes at offset {offset} lies outside the message body \
                 of {len} bytes"
            ));
        }
        if !compressed || size < 8 {
            continue;
        }
        let bytes = prefix(offset as u64)
            .ok_or_else(|| format!("cannot read buffer {i} at offset {offset} of the body"))?;
        // -1: stored uncompressed; 0: empty; other negatives: arrow-ipc refuses them itself.
        let Ok(claimed) = u64::try_from(i64::from_le_bytes(bytes)) else {
            continue;
        };
        let most = (size as u64 - 8).saturating_mul(MAX_RATIO).min(MAX_BUFFER);
        if claimed > most {
            return Err(format!(
                "compressed buffer {i} ({} bytes) says it holds {claimed} bytes uncompressed, more \
                 than {most} (the most it can, {MAX_RATIO} times its size, at most \
                 {MAX_BUFFER}): a damaged or forged length",
                size - 8
            ));
        }
    }
    Ok(())
}

/// [`check_body`] on an encapsulated message as an Arrow IPC file block holds it: `block` is
/// the whole block, whose first `meta_len` bytes are its metadata (an optional 0xFFFFFFFF
/// continuation marker, the flatbuffer's length, the flatbuffer and padding) and the rest its
/// body. The flatbuffer is read from the whole block, as arrow-ipc's `FileDecoder` reads it (a
/// damaged one may point past the metadata, and must mean here what it means there). Metadata
/// that does not parse passes: arrow-ipc says itself what is wrong with it.
pub fn check_block(block: &[u8], meta_len: usize) -> Result<(), String> {
    match (
        flatbuffer(block).map(arrow::ipc::root_as_message),
        block.get(meta_len..),
    ) {
        (Some(Ok(m)), Some(body)) => check_body(&m, body),
        _ => Ok(()),
    }
}

/// The bytes from an encapsulated message's flatbuffer on: after the 0xFFFFFFFF continuation
/// marker and the length, or after the length alone (the format before Arrow 0.15), as arrow-ipc
/// reads them. `None` when there are not enough bytes.
pub fn flatbuffer(encapsulated: &[u8]) -> Option<&[u8]> {
    encapsulated.get(prefix(encapsulated)?.0..)
}

/// An encapsulated message's prefix: the bytes it takes (8 with the 0xFFFFFFFF continuation
/// marker, 4 without, the format before Arrow 0.15) and the flatbuffer length it gives, padding
/// included (0 marks a stream's end). `None` when there are not enough bytes.
pub fn prefix(encapsulated: &[u8]) -> Option<(usize, i32)> {
    let word = |at: usize| {
        encapsulated
            .get(at..at + 4)
            .map(|w| i32::from_le_bytes(w.try_into().expect("4 bytes")))
    };
    match word(0)? {
        -1 => Some((8, word(4)?)),
        len => Some((4, len)),
    }
}

/// Whether every message of the Arrow IPC stream `b` lies within `b`, with the lengths its
/// prefixes and headers give, and passes [`check_body`]. For a stream held whole from someone
/// silt does not trust (a Flight SQL client's bound values, a server's answer to `silt query
/// --server`): arrow-ipc's `StreamReader` reserves a message's body at the length its header
/// says before it reads it, and a compressed buffer's at the length its prefix says.
pub fn check_stream(mut b: &[u8]) -> Result<(), String> {
    let whole = b.len();
    loop {
        let at = whole - b.len();
        if b.is_empty() {
            return Ok(());
        }
        let (skip, len) = prefix(b).ok_or(format!("a message's length is cut off at byte {at}"))?;
        b = &b[skip..];
        // End of stream.
        if len == 0 {
            return Ok(());
        }
        let meta = usize::try_from(len)
            .ok()
            .and_then(|l| b.get(..l))
            .ok_or(format!(
                "the message at byte {at} says its header takes {len} bytes; {} are left",
                b.len()
            ))?;
        let message = arrow::ipc::root_as_message(meta)
            .map_err(|e| format!("the message header at byte {at} does not parse: {e}"))?;
        b = &b[meta.len()..];
        let body = usize::try_from(message.bodyLength())
            .ok()
            .filter(|&n| n <= b.len())
            .ok_or(format!(
                "the message at byte {at} says its body takes {} bytes; {} are left",
                message.bodyLength(),
                b.len()
            ))?;
        check_body(&message, &b[..body])?;
        b = &b[body..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::ipc::writer::{IpcWriteOptions, StreamWriter};
    use arrow::ipc::CompressionType;
    use std::sync::Arc;

    /// The batch message of a one-batch IPC stream compressed with `c`: (metadata, body), as a
    /// file block holds them.
    fn message(c: Option<CompressionType>) -> (Vec<u8>, Vec<u8>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![7; 5000])),
                Arc::new(StringArray::from(vec!["abc"; 5000])),
            ],
        )
        .unwrap();
        let opts = IpcWriteOptions::default().try_with_compression(c).unwrap();
        let mut out = Vec::new();
        let mut w = StreamWriter::try_new_with_options(&mut out, &schema, opts).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        drop(w);
        // Skip the schema message; the batch's follows it.
        let mut at = 0;
        let mut msgs = Vec::new();
        while at + 8 <= out.len() {
            let len = i32::from_le_bytes(out[at + 4..at + 8].try_into().unwrap()) as usize;
            if len == 0 {
                break;
            }
            let meta = out[at..at + 8 + len].to_vec();
            let m = arrow::ipc::root_as_message(&meta[8..]).unwrap();
            let body_len = m.bodyLength() as usize;
            msgs.push((meta, out[at + 8 + len..at + 8 + len + body_len].to_vec()));
            at += 8 + len + body_len;
        }
        msgs.pop().unwrap()
    }

    /// [`check_block`] on the block of `meta` and `body`.
    fn block(meta: &[u8], body: &[u8]) -> Result<(), String> {
        check_block(&[meta, body].concat(), meta.len())
    }

    /// The offsets in `body` of the prefixes of the buffers stored compressed (arrow-ipc stores
    /// a buffer that does not shrink as it is, prefix -1).
    fn prefixes(meta: &[u8], body: &[u8]) -> Vec<usize> {
        let m = arrow::ipc::root_as_message(&meta[8..]).unwrap();
        let b = m.header_as_record_batch().unwrap();
        b.buffers()
            .unwrap()
            .iter()
            .filter(|b| b.length() >= 8)
            .map(|b| b.offset() as usize)
            .filter(|&o| i64::from_le_bytes(body[o..o + 8].try_into().unwrap()) > 0)
            .collect()
    }

    #[test]
    fn intact_messages_pass_with_and_without_compression() {
        for c in [
            None,
            Some(CompressionType::ZSTD),
            Some(CompressionType::LZ4_FRAME),
        ] {
            let (meta, body) = message(c);
            assert_eq!(block(&meta, &body), Ok(()), "{c:?}");
        }
    }

    #[test]
    fn a_huge_uncompressed_length_is_refused_and_a_plausible_one_passes() {
        for c in [CompressionType::ZSTD, CompressionType::LZ4_FRAME] {
            let (meta, body) = message(Some(c));
            let at = prefixes(&meta, &body);
            assert!(!at.is_empty());
            for &p in &at {
                let mut bad = body.clone();
                bad[p + 5] ^= 0x80;
                let e = block(&meta, &bad).unwrap_err();
                assert!(e.contains("damaged or forged length"), "{e}");
                // Wrong but small: left to arrow-ipc, which compares it with what it decompressed.
                let mut small = body.clone();
                small[p] ^= 0x01;
                assert_eq!(block(&meta, &small), Ok(()));
            }
        }
    }

    #[test]
    fn a_buffer_past_the_body_is_refused() {
        let (meta, body) = message(Some(CompressionType::ZSTD));
        let m = arrow::ipc::root_as_message(&meta[8..]).unwrap();
        let b = m.header_as_record_batch().unwrap();
        let end = b
            .buffers()
            .unwrap()
            .iter()
            .map(|b| b.offset() + b.length())
            .max();
        let e = block(&meta, &body[..end.unwrap() as usize - 1]).unwrap_err();
        assert!(e.contains("outside the message body"), "{e}");
    }

    #[test]
    fn unparsable_metadata_is_left_to_arrow() {
        assert_eq!(check_block(b"\xff\xff\xff\xff\x04\0\0\0junk", 12), Ok(()));
        assert_eq!(check_block(b"", 0), Ok(()));
        assert_eq!(check_block(b"\xff\xff", 8), Ok(()));
    }
}
