//! MessagePack: a stream of maps, one record each, back to back (what fluentd's buffer and
//! `msgpack` outputs write). No JSON text in between (this is the hot path of the Docker/nginx
//! benchmark): once the first record has decided the time field, each map is decoded straight
//! into the batch's columns (`silt_readers::json::ColumnBatcher`, strings borrowed from the read
//! buffer); the first record, and anything that is not a map, becomes a
//! `silt_readers::json::Value`. Then inferred like NDJSON.
//!
//! Hand-written on top of `rmp`'s marker decoding because the record boundaries are needed (for
//! rejects and for reading a stream in chunks) and `rmp-serde` would go through serde's generic
//! visitor for every value. Mapping: nil -> null, bool, integers (exact, `u64` above `i64::MAX`),
//! float32/64 -> float, str -> text, bin -> text when valid UTF-8, arrays -> lists, maps ->
//! objects (keys: strings; integer keys as decimal text; a repeated key keeps its first
//! position and last value; an empty key becomes `_`), the timestamp extension (-1) and
//! fluentd's EventTime (ext 0, 8 bytes) -> timestamps, other extensions -> text
//! `ext:<type>:<hex>`. A top-level `[time, map]` pair (fluentd's event entry) is the map with
//! `time` added (when the map has no `time`).
//!
//! Rejects carry the record number (1-based) as their line and the byte offset in the reason:
//! a top-level value that is not a map, a string or binary key/value that is not valid UTF-8
//! (the whole record; its raw bytes are kept), a record that does not fit `--schema`. An
//! invalid marker (0xc1) or nesting deeper than 128 makes the rest of the stream unreadable: it
//! is rejected as one piece (first 64 KiB kept) and reading stops; so does a record truncated by
//! the end of input. Touches nothing but `input` and `out`.

use std::borrow::Cow;
use std::io::BufRead;

use anyhow::Context;
use rmp::Marker;
use silt_core::{Emit, ReadOptions, SourceInfo};
use silt_readers::json::columns::Entry;
use silt_readers::json::{ColumnBatcher, Value};

use crate::sink::{kind, Sink};
use crate::{LogFormat, LogOptions};

const MAX_DEPTH: usize = 128;
/// Bytes read from the input at a time (more when one record is larger).
const CHUNK: usize = 4 << 20;
const KEEP_RAW: usize = 64 << 10;

pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    Sink::run(
        LogFormat::Msgpack,
        false,
        source,
        ro,
        lo,
        out,
        |sink, out| read_stream(input, source, sink, out, true),
    )
}

enum DErr {
    /// The buffer ends inside the value.
    Eof,
    /// The bytes are not MessagePack; the stream cannot be resynchronised.
    Invalid(String),
}

struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
    /// A problem that spoils the record but not the stream (invalid UTF-8).
    bad: Option<String>,
}

impl<'a> Dec<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DErr> {
        let end = self.pos.checked_add(n).ok_or(DErr::Eof)?;
        let s = self.buf.get(self.pos..end).ok_or(DErr::Eof)?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, DErr> {
        Ok(self.take(1)?[0])
    }
    fn be<const N: usize>(&mut self) -> Result<[u8; N], DErr> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn len8(&mut self) -> Result<usize, DErr> {
        Ok(self.u8()? as usize)
    }
    fn len16(&mut self) -> Result<usize, DErr> {
        Ok(u16::from_be_bytes(self.be()?) as usize)
    }
    fn len32(&mut self) -> Result<usize, DErr> {
        Ok(u32::from_be_bytes(self.be()?) as usize)
    }

    fn text(&mut self, n: usize, what: &str) -> Result<String, DErr> {
        let b = self.take(n)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => {
                if self.bad.is_none() {
                    self.bad = Some(format!(
                        "{what} is not valid UTF-8 (at byte {} of it)",
                        e.valid_up_to()
                    ));
                }
                Ok(String::from_utf8_lossy(b).into_owned())
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, DErr> {
        if depth > MAX_DEPTH {
            return Err(DErr::Invalid(format!("nesting deeper than {MAX_DEPTH}")));
        }
        let m = Marker::from_u8(self.u8()?);
        Ok(match m {
            Marker::Null => Value::Null,
            Marker::True => Value::Bool(true),
            Marker::False => Value::Bool(false),
            Marker::FixPos(v) => Value::Int(v as i64),
            Marker::FixNeg(v) => Value::Int(v as i64),
            Marker::U8 => Value::Int(self.u8()? as i64),
            Marker::U16 => Value::Int(u16::from_be_bytes(self.be()?) as i64),
            Marker::U32 => Value::Int(u32::from_be_bytes(self.be()?) as i64),
            Marker::U64 => {
                let u = u64::from_be_bytes(self.be()?);
                i64::try_from(u).map_or(Value::UInt(u), Value::Int)
            }
            Marker::I8 => Value::Int(i8::from_be_bytes(self.be()?) as i64),
            Marker::I16 => Value::Int(i16::from_be_bytes(self.be()?) as i64),
            Marker::I32 => Value::Int(i32::from_be_bytes(self.be()?) as i64),
            Marker::I64 => Value::Int(i64::from_be_bytes(self.be()?)),
            Marker::F32 => Value::Float(f32::from_be_bytes(self.be()?) as f64),
            Marker::F64 => Value::Float(f64::from_be_bytes(self.be()?)),
            Marker::FixStr(n) => Value::Str(self.text(n as usize, "a string")?),
            Marker::Str8 => {
                let n = self.len8()?;
                Value::Str(self.text(n, "a string")?)
            }
            Marker::Str16 => {
                let n = self.len16()?;
                Value::Str(self.text(n, "a string")?)
            }
            Marker::Str32 => {
                let n = self.len32()?;
                Value::Str(self.text(n, "a string")?)
            }
            Marker::Bin8 => {
                let n = self.len8()?;
                Value::Str(self.text(n, "a binary value")?)
            }
            Marker::Bin16 => {
                let n = self.len16()?;
                Value::Str(self.text(n, "a binary value")?)
            }
            Marker::Bin32 => {
                let n = self.len32()?;
                Value::Str(self.text(n, "a binary value")?)
            }
            Marker::FixArray(n) => self.array(n as usize, depth)?,
            Marker::Array16 => {
                let n = self.len16()?;
                self.array(n, depth)?
            }
            Marker::Array32 => {
                let n = self.len32()?;
                self.array(n, depth)?
            }
            Marker::FixMap(n) => self.map(n as usize, depth)?,
            Marker::Map16 => {
                let n = self.len16()?;
                self.map(n, depth)?
            }
            Marker::Map32 => {
                let n = self.len32()?;
                self.map(n, depth)?
            }
            Marker::FixExt1 => self.ext(1)?,
            Marker::FixExt2 => self.ext(2)?,
            Marker::FixExt4 => self.ext(4)?,
            Marker::FixExt8 => self.ext(8)?,
            Marker::FixExt16 => self.ext(16)?,
            Marker::Ext8 => {
                let n = self.len8()?;
                self.ext(n)?
            }
            Marker::Ext16 => {
                let n = self.len16()?;
                self.ext(n)?
            }
            Marker::Ext32 => {
                let n = self.len32()?;
                self.ext(n)?
            }
            Marker::Reserved => {
                return Err(DErr::Invalid("invalid MessagePack marker 0xc1".to_string()))
            }
        })
    }

    /// Decodes the entries of a top-level map of `n` entries (its marker already read) straight
    /// into the pending row of `b`, with the keys and values [`Dec::map`] would give.
    fn row_into(&mut self, b: &mut ColumnBatcher, n: usize) -> Result<(), DErr> {
        if n > (self.buf.len() - self.pos) / 2 {
            return Err(DErr::Eof);
        }
        b.discard_pending();
        for _ in 0..n {
            let key = match self.str_here()? {
                Some(k) => Cow::Borrowed(k),
                None => Cow::Owned(match self.value(1)? {
                    Value::Str(s) => s,
                    other => other.to_json(),
                }),
            };
            let entry = match self.str_here()? {
                Some(s) => Entry::Str(s),
                None => Entry::Value(self.value(1)?),
            };
            if let Err(e) = b.set(&key, entry) {
                self.bad.get_or_insert_with(|| e.to_string());
            }
        }
        Ok(())
    }

    /// A string value that is valid UTF-8, borrowed from the buffer; `None` (and nothing read)
    /// for anything else, which [`Dec::value`] then decodes.
    fn str_here(&mut self) -> Result<Option<&'a str>, DErr> {
        let start = self.pos;
        let n = match Marker::from_u8(self.u8()?) {
            Marker::FixStr(n) => n as usize,
            Marker::Str8 => self.len8()?,
            Marker::Str16 => self.len16()?,
            Marker::Str32 => self.len32()?,
            _ => {
                self.pos = start;
                return Ok(None);
            }
        };
        let text = std::str::from_utf8(self.take(n)?).ok();
        if text.is_none() {
            self.pos = start;
        }
        Ok(text)
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, DErr> {
        // Every element takes at least one byte: a length beyond the buffer is truncation, not
        // a reason to allocate.
        if n > self.buf.len() - self.pos {
            return Err(DErr::Eof);
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::List(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, DErr> {
        if n > (self.buf.len() - self.pos) / 2 {
            return Err(DErr::Eof);
        }
        let mut o: Vec<(String, Value)> = Vec::with_capacity(n);
        for _ in 0..n {
            let key = match self.value(depth + 1)? {
                Value::Str(s) if s.is_empty() => "_".to_string(),
                Value::Str(s) => s,
                other => other.to_json(),
            };
            let v = self.value(depth + 1)?;
            // Last value wins, first position stays (like the JSON reader).
            match o.iter_mut().find(|(k, _)| *k == key) {
                Some(e) => e.1 = v,
                None => o.push((key, v)),
            }
        }
        Ok(Value::Object(o))
    }

    fn ext(&mut self, n: usize) -> Result<Value, DErr> {
        let ty = self.u8()? as i8;
        let data = self.take(n)?;
        Ok(match (ty, n) {
            // The MessagePack timestamp extension.
            (-1, 4) => {
                Value::Time(u32::from_be_bytes(data.try_into().expect("4")) as i64 * 1_000_000)
            }
            (-1, 8) => {
                let v = u64::from_be_bytes(data.try_into().expect("8"));
                let nanos = (v >> 34) as i64;
                let secs = (v & 0x3_ffff_ffff) as i64;
                Value::Time(secs * 1_000_000 + nanos / 1000)
            }
            (-1, 12) => {
                let nanos = u32::from_be_bytes(data[..4].try_into().expect("4")) as i64;
                let secs = i64::from_be_bytes(data[4..].try_into().expect("8"));
                secs.checked_mul(1_000_000)
                    .and_then(|s| s.checked_add(nanos / 1000))
                    .map_or(Value::Null, Value::Time)
            }
            // fluentd's EventTime: seconds and nanoseconds, big-endian u32 each.
            (0, 8) => {
                let secs = u32::from_be_bytes(data[..4].try_into().expect("4")) as i64;
                let nanos = u32::from_be_bytes(data[4..].try_into().expect("4")) as i64;
                Value::Time(secs * 1_000_000 + nanos / 1000)
            }
            _ => {
                let mut s = format!("ext:{ty}:");
                for b in data {
                    s.push_str(&format!("{b:02x}"));
                }
                Value::Str(s)
            }
        })
    }
}

/// A fluentd `[time, record]` entry becomes the record (with `time` when it has none).
fn unwrap_event(v: Value) -> Value {
    match v {
        Value::List(mut items)
            if items.len() == 2
                && matches!(items[1], Value::Object(_))
                && matches!(
                    items[0],
                    Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Time(_)
                ) =>
        {
            let rec = items.pop().expect("2");
            let t = items.pop().expect("1");
            let Value::Object(mut o) = rec else {
                unreachable!("checked")
            };
            if !o.iter().any(|(k, _)| k == "time") {
                o.insert(0, ("time".to_string(), t));
            }
            Value::Object(o)
        }
        other => other,
    }
}

/// `columns`: maps go straight into the sink's columns when it takes them (always, but for the
/// test that compares this with the `Value` path).
fn read_stream(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    sink: &mut Sink,
    out: &mut dyn Emit,
    columns: bool,
) -> anyhow::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut pos = 0usize;
    let mut eof = false;
    // Bytes wanted in the buffer past `pos` before decoding (more after a record did not fit).
    let mut want = CHUNK;
    let mut need_more = false;
    let mut record: u64 = 0;
    let mut base: u64 = 0; // stream offset of buf[0]
    loop {
        // Refill when the buffer runs low.
        // Refill when less than half a chunk is left (amortised: one move per half chunk).
        if !eof && (need_more || buf.len() - pos < CHUNK / 2) {
            need_more = false;
            buf.drain(..pos);
            base += pos as u64;
            pos = 0;
            while buf.len() < want.max(CHUNK) && !eof {
                let chunk = input.fill_buf().with_context(|| {
                    format!("{}: read error after record {record}", source.display)
                })?;
                if chunk.is_empty() {
                    eof = true;
                    break;
                }
                let n = chunk.len();
                buf.extend_from_slice(chunk);
                input.consume(n);
                out.progress(n as u64);
            }
        }
        if pos >= buf.len() {
            return Ok(());
        }
        let mut d = Dec {
            buf: &buf,
            pos,
            bad: None,
        };
        // A map goes straight into the batch's columns once the sink takes them; anything
        // else (and the first record) is decoded into a `Value`.
        let map_len = match buf[pos] {
            m @ 0x80..=0x8f => Some(((m & 0x0f) as usize, 1)),
            0xde => buf
                .get(pos + 1..pos + 3)
                .map(|l| (u16::from_be_bytes([l[0], l[1]]) as usize, 3)),
            0xdf => buf
                .get(pos + 1..pos + 5)
                .map(|l| (u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize, 5)),
            _ => None,
        };
        let decoded = match (map_len, sink.columns().filter(|_| columns)) {
            (Some((n, header)), Some(b)) => {
                d.pos += header;
                d.row_into(b, n).map(|()| None)
            }
            _ => d.value(0).map(Some),
        };
        match decoded {
            Ok(decoded) => {
                record += 1;
                want = CHUNK;
                let (start, end) = (pos, d.pos);
                pos = end;
                let offset = base + start as u64;
                let raw = &buf[start..end];
                if let Some(reason) = d.bad.take() {
                    sink.reject(
                        out,
                        record,
                        format!("{reason} (record at byte offset {offset})"),
                        raw.to_vec(),
                    )?;
                    continue;
                }
                let Some(v) = decoded else {
                    sink.commit_pending(raw.len(), out)?;
                    continue;
                };
                let v = unwrap_event(v);
                if !matches!(v, Value::Object(_)) {
                    let reason = format!(
                        "not a map but {} (record at byte offset {offset})",
                        kind(&v)
                    );
                    sink.reject(out, record, reason, raw.to_vec())?;
                    continue;
                }
                sink.push(v, record, &|| raw.to_vec(), raw.len(), out)?;
            }
            Err(DErr::Eof) if !eof => {
                // The record continues beyond the buffer: read at least twice as much.
                want = (buf.len() - pos).saturating_mul(2).max(CHUNK);
                need_more = true;
            }
            Err(e) => {
                record += 1;
                let offset = base + pos as u64;
                let reason = match e {
                    DErr::Eof => format!(
                        "truncated record at byte offset {offset}: the input ends inside it ({} bytes)",
                        buf.len() - pos
                    ),
                    DErr::Invalid(why) => format!(
                        "{why} in the record at byte offset {offset}; the rest of the input ({} bytes) cannot be read",
                        buf.len() - pos
                    ),
                };
                let raw = buf[pos..buf.len().min(pos + KEEP_RAW)].to_vec();
                sink.reject(out, record, reason, raw)?;
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use silt_core::{CollectEmit, ReadOptions, SourceInfo};

    use super::*;

    fn str8(out: &mut Vec<u8>, s: &[u8]) {
        rmp::encode::write_str_len(out, s.len() as u32).unwrap();
        out.extend_from_slice(s);
    }

    /// Records of every kind, straight into columns and through `Value`s: the same batches and
    /// rejects.
    #[test]
    fn columns_and_values_agree() {
        let mut data = Vec::new();
        for i in 0..40u32 {
            let mut m = Vec::new();
            let mut n = 0u32;
            let mut kv = |k: &[u8], v: &dyn Fn(&mut Vec<u8>)| {
                str8(&mut m, k);
                v(&mut m);
                n += 1;
            };
            kv(b"time", &|o| {
                rmp::encode::write_uint(o, 1_700_000_000_000 + i as u64)
                    .map(|_| ())
                    .unwrap()
            });
            kv(b"s", &|o| str8(o, format!("v{}", i % 3).as_bytes()));
            match i % 8 {
                0 => kv(b"x", &|o| rmp::encode::write_f64(o, 1.5).unwrap()),
                1 => kv(b"x", &|o| str8(o, b"text")),
                2 => kv(b"", &|o| rmp::encode::write_bool(o, true).unwrap()),
                3 => kv(b"s", &|o| {
                    rmp::encode::write_sint(o, -3).map(|_| ()).unwrap()
                }),
                4 => kv(b"bad", &|o| str8(o, b"\xff\xfe")),
                5 => kv(b"n", &|o| {
                    rmp::encode::write_array_len(o, 2).unwrap();
                    rmp::encode::write_uint(o, u64::MAX).unwrap();
                    rmp::encode::write_nil(o).unwrap();
                }),
                6 => kv(b"b", &|o| {
                    rmp::encode::write_bin(o, b"bin").unwrap();
                }),
                _ => kv(b"t", &|o| {
                    rmp::encode::write_ext_meta(o, 8, -1).unwrap();
                    o.extend_from_slice(&(1_700_000_000u64).to_be_bytes());
                }),
            }
            if i % 5 == 0 {
                // A map-typed key and a nested map value.
                rmp::encode::write_uint(&mut m, 7).unwrap();
                rmp::encode::write_map_len(&mut m, 1).unwrap();
                str8(&mut m, b"k");
                rmp::encode::write_uint(&mut m, 1).unwrap();
                n += 1;
            }
            if i % 7 == 3 {
                // fluentd's [time, record] entry, then something that is not a map at all.
                rmp::encode::write_array_len(&mut data, 2).unwrap();
                rmp::encode::write_uint(&mut data, 1_700_000_000).unwrap();
            }
            rmp::encode::write_map_len(&mut data, n).unwrap();
            data.extend_from_slice(&m);
            if i % 9 == 4 {
                rmp::encode::write_uint(&mut data, 42).unwrap();
            }
        }
        // A record cut off by the end of input.
        rmp::encode::write_map_len(&mut data, 2).unwrap();
        str8(&mut data, b"time");
        let run = |columns: bool| {
            let source = SourceInfo::stdin();
            let mut out = CollectEmit::default();
            let ro = ReadOptions { batch_rows: 7 };
            let lo = LogOptions::default();
            Sink::run(
                LogFormat::Msgpack,
                false,
                &source,
                &ro,
                &lo,
                &mut out,
                |sink, out| read_stream(&mut &data[..], &source, sink, out, columns),
            )
            .unwrap();
            out
        };
        let (a, b) = (run(true), run(false));
        assert_eq!(a.batches, b.batches);
        assert_eq!(format!("{:?}", a.rejects), format!("{:?}", b.rejects));
        assert_eq!(a.table_bytes, b.table_bytes);
        assert_eq!(a.rows("msgpack.stdin"), 35);
        assert_eq!(a.rejects.len(), 5 + 4 + 1);
    }
}
