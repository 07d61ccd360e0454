//! MessagePack: a stream of maps, one record each, back to back (what fluentd's buffer and
//! `msgpack` outputs write). Decoded straight into `silt_readers::json::Value` (no JSON text in
//! between: this is the hot path of the Docker/nginx benchmark), then inferred like NDJSON.
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

use std::io::BufRead;

use anyhow::Context;
use rmp::Marker;
use silt_core::{Emit, ReadOptions, SourceInfo};
use silt_readers::json::Value;

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
        |sink, out| read_stream(input, source, sink, out),
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

fn read_stream(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    sink: &mut Sink,
    out: &mut dyn Emit,
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
        match d.value(0) {
            Ok(v) => {
                record += 1;
                want = CHUNK;
                let start = pos;
                let end = d.pos;
                let bad = d.bad.take();
                pos = end;
                let offset = base + start as u64;
                let raw = &buf[start..end];
                if let Some(reason) = bad {
                    sink.reject(
                        out,
                        record,
                        format!("{reason} (record at byte offset {offset})"),
                        raw.to_vec(),
                    )?;
                    continue;
                }
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
