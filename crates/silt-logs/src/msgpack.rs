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
//! float32/64 -> float (NaN and infinities too; as text `NaN`, `inf`, `-inf`), str -> text,
//! bin -> text when valid UTF-8 and lower-case hex otherwise, arrays -> lists, maps -> objects (keys: strings; numbers,
//! booleans and nil as their JSON text, timestamps as RFC 3339; a repeated key keeps its first
//! position and last value, found in linear time; an empty key becomes `_`), the timestamp
//! extension (-1) and fluentd's EventTime (ext 0, 8 bytes) -> timestamps (one that is invalid or
//! beyond `i64` microseconds is kept as the text below), other extensions -> text
//! `ext:<type>:<hex>`. A top-level `[time, map]` pair (fluentd's event entry) is the map with
//! `time` added (when the map has no `time`).
//!
//! Rejects carry the record number (1-based) as their line and the byte offset in the reason:
//! a top-level value that is not a map, a string key/value that is not valid UTF-8
//! (the whole record; its raw bytes are kept), a map key that is itself a map or an array (at
//! any depth: see `Dec::key_text`), a record that does not fit `--schema`. Some
//! problems make the rest of the stream unreadable (MessagePack cannot be resynchronised): it
//! is skipped and rejected as ONE piece (its first 64 KiB kept, its length in the reason, the
//! reject given when the stream ends): an input that is not MessagePack at all (its first value
//! is not a map, as for a text file given with `--format msgpack`), an invalid marker (0xc1),
//! nesting deeper than 128, a record longer than [`MAX_RECORD_BYTES`]. A record truncated by the
//! end of input is one reject too.
//!
//! [`MsgpackDecoder`] is the decoder: fed in pieces split anywhere, it decodes the records that
//! lie whole in a piece where they are and keeps only the unfinished last record's bytes for the
//! next piece (at most [`MAX_RECORD_BYTES`]; it retries when they have doubled, so a large
//! record arriving in small pieces is not decoded over and over). [`FORMAT`] declares the
//! format `msgpack`. Touches nothing but the bytes it is fed and `out`.

use std::borrow::Cow;

use rmp::Marker;
use silt_core::format::Confidence;
use silt_core::{Decoder, Emit, FormatOptions, FormatSpec, Probe, ReadOptions, SourceInfo};
use silt_readers::json::columns::Entry;
use silt_readers::json::value::{format_micros, ObjectBuilder};
use silt_readers::json::{ColumnBatcher, Value};

use crate::sink::{kind, Sink};
use crate::{LogFormat, LogOptions};

const MAX_DEPTH: usize = 128;
/// A longer record makes the rest of the stream unreadable (it is not held in memory).
pub const MAX_RECORD_BYTES: usize = 64 << 20;
const KEEP_RAW: usize = 64 << 10;

/// The `msgpack` format.
pub static FORMAT: FormatSpec = FormatSpec {
    name: "msgpack",
    aliases: &[],
    summary: "MessagePack stream of maps (fluentd buffers, [time, map] entries); table msgpack.<file stem>",
    extensions: &["msgpack", "mpk", "mp"],
    sniff,
    open,
    text_fields: true,
    text: false,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let lo = opts.get_or_default::<LogOptions>();
    Ok(Box::new(MsgpackDecoder::new(source, &opts.read, &lo)?))
}

/// 60 when the stream starts with a map (or a fluentd `[time, map]` entry) that decodes whole
/// within the probe, with at least one key and every key a non-empty printable string, and so
/// does every record after it in the probe (the last may run past its end). Binary junk (an
/// ELF file, random bytes) and text are not taken.
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    let mut pos = sniff_record(p.head)?;
    while pos < p.head.len() {
        let rest = &p.head[pos..];
        match sniff_record(rest) {
            Some(n) => pos += n,
            None => {
                // Only a record that runs past the end of the probe is forgiven.
                let mut d = Dec {
                    buf: rest,
                    pos: 0,
                    bad: None,
                };
                let cut = starts_record(rest[0]) && matches!(d.value(0), Err(DErr::Eof));
                return cut.then_some(60);
            }
        }
    }
    Some(60)
}

/// A map marker, or a two-element array (a fluentd entry).
fn starts_record(b: u8) -> bool {
    matches!(b, 0x80..=0x8f | 0xde | 0xdf | 0x92)
}

/// The length of a plausible first record at the start of `buf` (see [`sniff`]).
fn sniff_record(buf: &[u8]) -> Option<usize> {
    let mut d = Dec {
        buf,
        pos: 0,
        bad: None,
    };
    if buf.first() == Some(&0x92) {
        d.pos = 1;
        let t = d.value(1).ok()?;
        if !matches!(
            t,
            Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Time(_)
        ) {
            return None;
        }
    }
    let n = match Marker::from_u8(d.u8().ok()?) {
        Marker::FixMap(n) => n as usize,
        Marker::Map16 => d.len16().ok()?,
        Marker::Map32 => d.len32().ok()?,
        _ => return None,
    };
    if n == 0 {
        return None;
    }
    for _ in 0..n {
        let key = d.str_here().ok()??;
        if key.is_empty() || key.chars().any(char::is_control) {
            return None;
        }
        d.value(1).ok()?;
    }
    d.bad.is_none().then_some(d.pos)
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

    /// A binary value: its text when it is valid UTF-8 (older fluentd and msgpack libraries
    /// send strings as bin), otherwise its bytes as lower-case hex (never a reject: binary
    /// is allowed to hold anything).
    fn bin(&mut self, n: usize) -> Result<Value, DErr> {
        let b = self.take(n)?;
        Ok(Value::Str(match std::str::from_utf8(b) {
            Ok(s) => s.to_owned(),
            Err(_) => {
                use std::fmt::Write;
                let mut h = String::with_capacity(2 * b.len());
                for x in b {
                    let _ = write!(h, "{x:02x}");
                }
                h
            }
        }))
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
                self.bin(n)?
            }
            Marker::Bin16 => {
                let n = self.len16()?;
                self.bin(n)?
            }
            Marker::Bin32 => {
                let n = self.len32()?;
                self.bin(n)?
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
        b.discard_pending();
        for _ in 0..n {
            let key = match self.str_here()? {
                Some(k) => Cow::Borrowed(k),
                None => {
                    let k = self.value(1)?;
                    Cow::Owned(self.key_text(k))
                }
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
        // Every element takes at least one byte: a length beyond the buffer is no reason to
        // allocate (decoding then runs out of bytes: truncation, or more is to come).
        let mut items = Vec::with_capacity(n.min(self.buf.len() - self.pos));
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::List(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, DErr> {
        // Every entry takes at least two bytes (see `array`). Last value wins, first position
        // stays, `""` is `_` (like the JSON reader), in time linear in the entries.
        let mut o = ObjectBuilder::with_capacity(n.min((self.buf.len() - self.pos) / 2));
        for _ in 0..n {
            let key = self.value(depth + 1)?;
            let key = self.key_text(key);
            let v = self.value(depth + 1)?;
            o.insert(key, v);
        }
        Ok(Value::Object(o.finish()))
    }

    /// The name a decoded map key gives: a string as it is (`""` becomes `_` where the key is
    /// used), a timestamp as RFC 3339, a number, boolean or nil as its JSON text (a float JSON
    /// cannot hold as `NaN`, `inf`, `-inf`). A key that is itself a map or an
    /// array spoils the record (a reject): as JSON text, each level of such keys nested inside
    /// one another would escape the level below once more, so the name doubles in length per
    /// level (a 150-byte record of keys 25 deep took seconds and hundreds of megabytes: the
    /// first fuzz run's msgpack hangs). No MessagePack producer of logs writes such keys.
    fn key_text(&mut self, key: Value) -> String {
        match key {
            Value::Str(s) => s,
            Value::Time(t) => format_micros(t),
            Value::List(_) | Value::Object(_) => {
                let what = if matches!(key, Value::List(_)) {
                    "an array"
                } else {
                    "a map"
                };
                self.bad.get_or_insert_with(|| {
                    format!(
                        "a map key is {what} (a key must be a string, a number, a boolean or nil)"
                    )
                });
                "_".to_string()
            }
            other => other.to_json(),
        }
    }

    fn ext(&mut self, n: usize) -> Result<Value, DErr> {
        let ty = self.u8()? as i8;
        let data = self.take(n)?;
        // Seconds and nanoseconds to microseconds; `None` when the nanoseconds are not below one
        // second (the specification forbids it) or the time is beyond what `i64` microseconds
        // hold: such a value is kept as the extension's text, never made null.
        let micros = |secs: i64, nanos: u32| {
            (nanos < 1_000_000_000)
                .then_some(())
                .and(secs.checked_mul(1_000_000))
                .and_then(|s| s.checked_add(i64::from(nanos / 1000)))
        };
        let be32 = |b: &[u8]| u32::from_be_bytes(b.try_into().expect("4"));
        let time = match (ty, n) {
            // The MessagePack timestamp extension.
            (-1, 4) => micros(i64::from(be32(data)), 0),
            (-1, 8) => {
                let v = u64::from_be_bytes(data.try_into().expect("8"));
                micros((v & 0x3_ffff_ffff) as i64, (v >> 34) as u32)
            }
            (-1, 12) => {
                let secs = i64::from_be_bytes(data[4..].try_into().expect("8"));
                micros(secs, be32(&data[..4]))
            }
            // fluentd's EventTime: seconds and nanoseconds, big-endian u32 each.
            (0, 8) => micros(i64::from(be32(&data[..4])), be32(&data[4..])),
            _ => None,
        };
        Ok(match time {
            Some(t) => Value::Time(t),
            None => {
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

/// Why the rest of a stream is skipped (see the module documentation).
enum SkipWhy {
    /// The first value is not a map: the input is not MessagePack records at all.
    NotMsgpack(&'static str),
    /// An invalid marker or nesting too deep.
    Invalid(String),
    /// A record longer than the limit.
    TooLong,
}

/// The rest of a stream being skipped, rejected as one piece when the stream ends.
struct Skip {
    /// The record number of the reject.
    record: u64,
    why: SkipWhy,
    /// Stream offset where the skipped part starts.
    offset: u64,
    /// Its first [`KEEP_RAW`] bytes.
    raw: Vec<u8>,
    /// Its length so far.
    bytes: u64,
}

impl Skip {
    fn absorb(&mut self, bytes: &[u8]) {
        let room = KEEP_RAW.saturating_sub(self.raw.len());
        self.raw.extend_from_slice(&bytes[..room.min(bytes.len())]);
        self.bytes += bytes.len() as u64;
    }

    fn reason(&self, limit: usize) -> String {
        let (offset, n) = (self.offset, self.bytes);
        match &self.why {
            SkipWhy::NotMsgpack(what) => {
                let first = self.raw.first().copied().unwrap_or(0);
                let hint = if looks_like_text(&self.raw) {
                    " (it looks like text)"
                } else {
                    ""
                };
                format!(
                    "not MessagePack (a stream of maps): the input starts with {what} (byte \
                     0x{first:02x}), not a map{hint}; the whole input ({n} bytes) is skipped"
                )
            }
            SkipWhy::Invalid(why) => format!(
                "{why} in the record at byte offset {offset}; the rest of the input ({n} bytes) cannot be read"
            ),
            SkipWhy::TooLong => format!(
                "the record at byte offset {offset} is longer than {limit} bytes (or is not \
                 MessagePack); the rest of the input ({n} bytes) cannot be read"
            ),
        }
    }
}

/// The first bytes are printable UTF-8 text (a line-based file read as MessagePack).
fn looks_like_text(b: &[u8]) -> bool {
    let b = &b[..b.len().min(256)];
    let text = match std::str::from_utf8(b) {
        Ok(t) => t,
        // Cut inside a character at the end: the part before it.
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or("")
        }
        Err(_) => return false,
    };
    !text.is_empty()
        && text
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\t' | '\r' | '\n'))
}

/// The MessagePack decoder for one stream; see the module documentation.
pub struct MsgpackDecoder {
    sink: Sink,
    /// The bytes of the unfinished record (from `offset`).
    carry: Vec<u8>,
    /// Decode `carry` again once it holds this many bytes.
    retry_at: usize,
    /// Stream offset of the first byte not yet decoded (`carry[0]`, or the next piece's first).
    offset: u64,
    /// Records seen (the number of the last reject or row).
    record: u64,
    skip: Option<Skip>,
    /// Maps go straight into the sink's columns when it takes them (always, but for the test
    /// that compares this with the `Value` path).
    columns: bool,
    max_record: usize,
}

impl MsgpackDecoder {
    pub fn new(source: &SourceInfo, ro: &ReadOptions, lo: &LogOptions) -> anyhow::Result<Self> {
        let table = lo.table_for(LogFormat::Msgpack, source);
        let sink = Sink::new(source, table, ro, lo, false, None)?;
        Ok(Self {
            sink,
            carry: Vec::new(),
            retry_at: 0,
            offset: 0,
            record: 0,
            skip: None,
            columns: true,
            max_record: MAX_RECORD_BYTES,
        })
    }

    /// When to decode the carried bytes again: when they have doubled (so a large record in
    /// small pieces is decoded a logarithmic number of times), and at the latest once they
    /// exceed the record limit.
    fn next_retry(&self) -> usize {
        (self.carry.len() * 2)
            .min(self.max_record + 1)
            .max(self.carry.len() + 1)
    }

    fn start_skip(&mut self, why: SkipWhy, offset: u64, rest: &[u8]) {
        let mut s = Skip {
            record: self.record,
            why,
            offset,
            raw: Vec::new(),
            bytes: 0,
        };
        s.absorb(rest);
        self.skip = Some(s);
    }

    /// Decodes the records that lie whole in `buf` (which starts at stream offset
    /// `self.offset`); returns the bytes used (all of them when the rest is skipped). The
    /// unfinished record at the end is left for the next call, or, `at_end`, rejected.
    fn decode(&mut self, buf: &[u8], at_end: bool, out: &mut dyn Emit) -> anyhow::Result<usize> {
        let base = self.offset;
        let mut pos = 0;
        let res = self.decode_records(buf, base, &mut pos, at_end, out);
        self.offset = base + pos as u64;
        res.map(|()| pos)
    }

    fn decode_records(
        &mut self,
        buf: &[u8],
        base: u64,
        pos: &mut usize,
        at_end: bool,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        while *pos < buf.len() {
            let start = *pos;
            let offset = base + start as u64;
            let mut d = Dec {
                buf,
                pos: start,
                bad: None,
            };
            // A map goes straight into the batch's columns once the sink takes them; anything
            // else (and the first record) is decoded into a `Value`.
            let map_len = match buf[start] {
                m @ 0x80..=0x8f => Some(((m & 0x0f) as usize, 1)),
                0xde => buf
                    .get(start + 1..start + 3)
                    .map(|l| (u16::from_be_bytes([l[0], l[1]]) as usize, 3)),
                0xdf => buf
                    .get(start + 1..start + 5)
                    .map(|l| (u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize, 5)),
                _ => None,
            };
            let decoded = match (map_len, self.sink.columns().filter(|_| self.columns)) {
                (Some((n, header)), Some(b)) => {
                    d.pos += header;
                    d.row_into(b, n).map(|()| None)
                }
                _ => d.value(0).map(Some),
            };
            // However far decoding got, a record past the limit is not kept (the same
            // decision whichever pieces the stream came in).
            let too_long = d.pos - start > self.max_record
                || (matches!(decoded, Err(DErr::Eof)) && buf.len() - start > self.max_record);
            if too_long || matches!(decoded, Err(DErr::Invalid(_))) {
                if let Some(b) = self.sink.columns() {
                    b.discard_pending();
                }
                self.record += 1;
                let why = match decoded {
                    Err(DErr::Invalid(why)) if !too_long => SkipWhy::Invalid(why),
                    _ => SkipWhy::TooLong,
                };
                self.start_skip(why, offset, &buf[start..]);
                *pos = buf.len();
                return Ok(());
            }
            let decoded = match decoded {
                Ok(v) => v,
                Err(_) if !at_end => return Ok(()),
                Err(_) => {
                    self.record += 1;
                    let reason = format!(
                        "truncated record at byte offset {offset}: the input ends inside it ({} bytes)",
                        buf.len() - start
                    );
                    let raw = buf[start..buf.len().min(start + KEEP_RAW)].to_vec();
                    *pos = buf.len();
                    return self.sink.reject(out, self.record, reason, raw);
                }
            };
            self.record += 1;
            *pos = d.pos;
            let raw = &buf[start..d.pos];
            if let Some(reason) = d.bad.take() {
                if decoded.is_none() {
                    if let Some(b) = self.sink.columns() {
                        b.discard_pending();
                    }
                }
                let reason = format!("{reason} (record at byte offset {offset})");
                self.sink.reject(out, self.record, reason, raw.to_vec())?;
                continue;
            }
            let Some(v) = decoded else {
                self.sink.commit_pending(raw.len(), out)?;
                continue;
            };
            let v = unwrap_event(v);
            if !matches!(v, Value::Object(_)) {
                if self.record == 1 {
                    // Not a stream of maps at all (a text file, say): one reject, not one per
                    // byte.
                    self.start_skip(SkipWhy::NotMsgpack(kind(&v)), offset, &buf[start..]);
                    *pos = buf.len();
                    return Ok(());
                }
                let reason = format!(
                    "not a map but {} (record at byte offset {offset})",
                    kind(&v)
                );
                self.sink.reject(out, self.record, reason, raw.to_vec())?;
                continue;
            }
            self.sink
                .push(v, self.record, &|| raw.to_vec(), raw.len(), out)?;
        }
        Ok(())
    }
}

impl Decoder for MsgpackDecoder {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        if let Some(s) = &mut self.skip {
            s.absorb(bytes);
            return Ok(());
        }
        let mut rest = bytes;
        // An unfinished record from earlier pieces: complete it from this one, copying only as
        // much as it needs.
        while !self.carry.is_empty() && !rest.is_empty() {
            let take = self
                .retry_at
                .saturating_sub(self.carry.len())
                .clamp(1, rest.len());
            self.carry.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.carry.len() < self.retry_at {
                continue;
            }
            let old = self.carry.len() - take;
            let carry = std::mem::take(&mut self.carry);
            let used = self.decode(&carry, false, out)?;
            if let Some(s) = &mut self.skip {
                s.absorb(rest);
                return Ok(());
            }
            let left = carry.len() - used;
            self.carry = carry;
            if used >= old {
                // The next unfinished record starts in the bytes just taken: give them back
                // and decode the rest of the piece where it is.
                rest = &bytes[bytes.len() - rest.len() - left..];
                self.carry.clear();
            } else {
                self.carry.drain(..used);
                self.retry_at = self.next_retry();
            }
        }
        if !rest.is_empty() {
            let used = self.decode(rest, false, out)?;
            if self.skip.is_none() {
                self.carry.extend_from_slice(&rest[used..]);
                self.retry_at = self.next_retry();
            }
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.sink.flush(out)
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut res = Ok(0);
        if self.skip.is_none() && !self.carry.is_empty() {
            let carry = std::mem::take(&mut self.carry);
            res = self.decode(&carry, true, out);
        }
        if let Some(s) = self.skip.take() {
            let reason = s.reason(self.max_record);
            if res.is_ok() {
                res = self.sink.reject(out, s.record, reason, s.raw).map(|()| 0);
            }
        }
        let flushed = self.sink.flush(out);
        res.and(flushed)
    }
}

#[cfg(test)]
mod tests {
    use silt_core::CollectEmit;

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
            let mut d = MsgpackDecoder::new(&source, &ro, &lo).unwrap();
            d.columns = columns;
            silt_core::decode::decode_slice(&mut d, &data, &mut out).unwrap();
            out
        };
        let (a, b) = (run(true), run(false));
        assert_eq!(a.batches, b.batches);
        assert_eq!(format!("{:?}", a.rejects), format!("{:?}", b.rejects));
        assert_eq!(a.table_bytes, b.table_bytes);
        assert_eq!(a.rows("msgpack.stdin"), 35);
        assert_eq!(a.rejects.len(), 5 + 4 + 1);
    }

    fn probe(head: &[u8]) -> Option<Confidence> {
        sniff(&Probe {
            head,
            file_name: Some("fluentd.buffer"),
        })
    }

    #[test]
    fn sniffs_msgpack_maps_only() {
        let mut two = rmp_serde::to_vec_named(&serde_json::json!({"log": "x", "n": 1})).unwrap();
        two.extend(rmp_serde::to_vec_named(&serde_json::json!({"log": "y", "n": 2})).unwrap());
        let entry = rmp_serde::to_vec(&serde_json::json!([1_700_000_000, {"log": "x"}])).unwrap();
        // The second record cut off by the end of the probe.
        let cut = &two[..two.len() - 3];
        for yes in [&two[..], &entry, cut, b"\x81\xa1a\x01\x81\xa1b\x02"] {
            assert_eq!(probe(yes), Some(60), "{yes:02x?}");
        }
        let mut then_junk = two.clone();
        then_junk.extend_from_slice(b"\x01\x02");
        for no in [
            &then_junk[..],
            // A map marker followed by garbage; an empty map; a number key; a map cut short.
            b"\x8f\xff\xff\xff\x00\x01",
            b"\x80\x80",
            b"\x81\x01\x02",
            &two[..5],
            b"\x81\xa1\x07\x01",
            // Other formats' first bytes.
            b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00",
            b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00",
            b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00",
            b"Obj\x01\x04\x16avro.schema",
            b"{\"a\":1}\n",
            b"a,b\n1,2\n",
            b"#separator \\x09\n",
            b"<34>Oct 11 22:14:15 host su: x\n",
            b"",
        ] {
            assert_eq!(probe(no), None, "{no:02x?}");
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let junk: Vec<u8> = (0..256)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert_eq!(probe(&junk), None, "{junk:02x?}");
        }
    }

    fn run(data: &[u8], pieces: usize, max_record: usize) -> CollectEmit {
        let mut d = MsgpackDecoder::new(
            &SourceInfo::stdin(),
            &ReadOptions::default(),
            &LogOptions::default(),
        )
        .unwrap();
        d.max_record = max_record;
        let mut out = CollectEmit::default();
        for p in data.chunks(pieces) {
            d.feed(p, &mut out).unwrap();
        }
        d.finish(&mut out).unwrap();
        out
    }

    /// A record past the limit makes the rest one reject, whatever the pieces; records before it
    /// are kept, and nothing longer than the limit is carried between pieces.
    #[test]
    fn records_past_the_limit_end_the_stream() {
        let mut data = Vec::new();
        for i in 0..5 {
            data.extend(rmp_serde::to_vec_named(&serde_json::json!({"i": i})).unwrap());
        }
        let good = data.len();
        data.extend(rmp_serde::to_vec_named(&serde_json::json!({"big": "x".repeat(300)})).unwrap());
        data.extend(rmp_serde::to_vec_named(&serde_json::json!({"i": 9})).unwrap());
        let whole = run(&data, data.len(), 200);
        assert_eq!(whole.total_rows(), 5);
        assert_eq!(whole.rejects.len(), 1);
        let r = &whole.rejects[0];
        assert_eq!(r.line, 6);
        assert_eq!(
            r.reason,
            format!(
                "the record at byte offset {good} is longer than 200 bytes (or is not MessagePack); \
                 the rest of the input ({} bytes) cannot be read",
                data.len() - good
            )
        );
        assert_eq!(r.raw, &data[good..]);
        for pieces in [1, 2, 3, 7, 64, 199, 200, 201, 500] {
            let out = run(&data, pieces, 200);
            assert_eq!(out.batches, whole.batches, "pieces of {pieces}");
            assert_eq!(out.rejects, whole.rejects, "pieces of {pieces}");
        }
        // Within the limit, the same record is read.
        assert_eq!(run(&data, 3, 400).total_rows(), 7);
    }

    fn decoder(batch_rows: usize) -> MsgpackDecoder {
        let ro = ReadOptions { batch_rows };
        MsgpackDecoder::new(&SourceInfo::stdin(), &ro, &LogOptions::default()).unwrap()
    }

    /// The batches of one table, whatever its name, as (fields, columns): the MessagePack and
    /// the NDJSON readers name their tables differently.
    fn contents(out: &CollectEmit) -> Vec<(arrow::datatypes::Fields, Vec<arrow::array::ArrayRef>)> {
        assert!(out.batches.len() <= 1, "{:?}", out.batches.keys());
        out.batches
            .values()
            .flatten()
            .map(|b| (b.schema().fields().clone(), b.columns().to_vec()))
            .collect()
    }

    fn texts(out: &CollectEmit, batch: usize, col: &str) -> Vec<Option<String>> {
        use arrow::array::AsArray;
        let b = &out.batches.values().next().unwrap()[batch];
        let c = b
            .column_by_name(col)
            .unwrap_or_else(|| panic!("no {col}: {b:?}"));
        c.as_string::<i32>()
            .iter()
            .map(|v| v.map(str::to_string))
            .collect()
    }

    /// Binary values are never a reject: text when valid UTF-8, hex otherwise (what
    /// fluent-logger-golang sends for a `[]byte`).
    #[test]
    fn binary_values_are_text_or_hex() {
        let mut data = Vec::new();
        for b in [&b"\x00\x01\xff"[..], b"plain", b""] {
            let mut r = Vec::new();
            rmp::encode::write_map_len(&mut r, 1).unwrap();
            rmp::encode::write_str(&mut r, "bin").unwrap();
            rmp::encode::write_bin(&mut r, b).unwrap();
            data.extend(r);
        }
        let mut out = CollectEmit::default();
        decoder(100).read(&mut &data[..], &mut out).unwrap();
        assert!(out.rejects.is_empty(), "{:?}", out.rejects);
        assert_eq!(
            texts(&out, 0, "bin"),
            [Some("0001ff".into()), Some("plain".into()), Some("".into())]
        );
    }

    /// The first fuzz run's msgpack crashes: a key that only a rejected record had left a
    /// padding cell in its column, which made the key's first value in the next batch pass for
    /// already set: never folded into the batch type, then built as null (a mismatch) or not
    /// built at all (silently lost). NDJSON (an invalid line) gives the same batches.
    #[test]
    fn rejected_records_leave_no_column_behind() {
        let mut data = Vec::new();
        data.extend(rmp_serde::to_vec_named(&serde_json::json!({"a": 1})).unwrap());
        // {"a":2,"b":<not UTF-8>}: rejected after `b` was set in the pending row.
        data.extend_from_slice(b"\x82\xa1a\x02\xa1b\xa2\xff\xfe");
        for v in [
            serde_json::json!({"a": 3}),
            serde_json::json!({"b": "y"}),
            serde_json::json!({"b": 5}),
        ] {
            data.extend(rmp_serde::to_vec_named(&v).unwrap());
        }
        let mut out = CollectEmit::default();
        silt_core::decode::decode_slice(&mut decoder(2), &data, &mut out).unwrap();
        assert_eq!(out.total_rows(), 4);
        assert_eq!(out.rejects.len(), 1);
        assert!(out.rejects[0].reason.contains("not valid UTF-8"));
        assert_eq!(texts(&out, 1, "b"), [Some("y".into()), Some("5".into())]);

        let json = b"{\"a\":1}\n{\"a\":2,\"b\":\"x\n{\"a\":3}\n{\"b\":\"y\"}\n{\"b\":5}\n";
        let ro = ReadOptions { batch_rows: 2 };
        let mut nd =
            crate::ndjson::NdjsonDecoder::new(&SourceInfo::stdin(), &ro, &LogOptions::default())
                .unwrap();
        let mut by_json = CollectEmit::default();
        silt_core::decode::decode_slice(&mut nd, json, &mut by_json).unwrap();
        assert_eq!(by_json.rejects.len(), 1);
        assert_eq!(contents(&by_json), contents(&out));
    }

    /// The same through a record cut between two pieces with a flush in between (the pending
    /// row of its first part is dropped by the flush).
    #[test]
    fn a_record_cut_by_a_flush_keeps_its_values() {
        let mut data = rmp_serde::to_vec_named(&serde_json::json!({"a": 1})).unwrap();
        let cut = data.len() + 6;
        data.extend(rmp_serde::to_vec_named(&serde_json::json!({"a": 2, "b": "xyz"})).unwrap());
        let mut d = decoder(100);
        let mut out = CollectEmit::default();
        d.feed(&data[..cut], &mut out).unwrap();
        d.flush(&mut out).unwrap();
        d.feed(&data[cut..], &mut out).unwrap();
        d.finish(&mut out).unwrap();
        assert_eq!(out.total_rows(), 2);
        assert!(out.rejects.is_empty());
        assert_eq!(texts(&out, 1, "b"), [Some("xyz".into())]);
    }

    /// Records of many shapes, as MessagePack and as NDJSON: the same batches (types widened by
    /// the same rules, nothing null that was not), cut into batches of every size.
    #[test]
    fn the_same_records_as_ndjson_give_the_same_batches() {
        let records = [
            r#"{"time":1700000000,"n":1,"s":"a","l":[1,2],"o":{"x":1}}"#,
            r#"{"n":2.5,"s":7,"l":3,"o":{"y":"z"},"time":"2024-01-01T00:00:00Z"}"#,
            r#"{"n":-1,"u":18446744073709551615,"s":null,"o":"text","time":"soon"}"#,
            r#"{"u":-5,"l":[{"k":1}],"o":{},"e":{},"new":true}"#,
            r#"{"n":9007199254740993,"l":[],"s":{"deep":[[1],[2.5]]},"new":"x"}"#,
            r#"{"o":{"x":[1]},"e":[null],"time":1700000001500}"#,
        ];
        for batch_rows in [1, 2, 3, 100] {
            let mut mp = Vec::new();
            let mut json = Vec::new();
            for (i, r) in records.iter().enumerate() {
                let v: serde_json::Value = serde_json::from_str(r).unwrap();
                mp.extend(rmp_serde::to_vec_named(&v).unwrap());
                json.extend_from_slice(r.as_bytes());
                json.push(b'\n');
                if i == 2 {
                    // A rejected record with a key of its own.
                    mp.extend_from_slice(b"\x81\xa4only\xa1\xff");
                    json.extend_from_slice(b"{\"only\":\n");
                }
            }
            let ro = ReadOptions { batch_rows };
            let lo = LogOptions::default();
            let source = SourceInfo::stdin();
            let mut a = CollectEmit::default();
            let mut d = MsgpackDecoder::new(&source, &ro, &lo).unwrap();
            silt_core::decode::decode_slice(&mut d, &mp, &mut a).unwrap();
            let mut b = CollectEmit::default();
            let mut nd = crate::ndjson::NdjsonDecoder::new(&source, &ro, &lo).unwrap();
            silt_core::decode::decode_slice(&mut nd, &json, &mut b).unwrap();
            assert_eq!((a.total_rows(), a.rejects.len()), (records.len(), 1));
            assert_eq!(contents(&a), contents(&b), "batches of {batch_rows}");
        }
    }

    /// A map key that is itself a map or an array rejects its record, at any depth and at once
    /// (as JSON text, keys nested in keys doubled in length per level: the first fuzz run's
    /// msgpack hangs). Other keys become text.
    #[test]
    fn map_and_array_keys_reject_their_record() {
        let mut data = Vec::new();
        // {7: 1, nil: 2, true: 3, 1.5: 4, <timestamp>: 5, "": 6}
        data.extend_from_slice(b"\x86\x07\x01\xc0\x02\xc3\x03\xcb");
        data.extend_from_slice(&1.5f64.to_be_bytes());
        data.extend_from_slice(b"\x04\xd6\xff");
        data.extend_from_slice(&1_700_000_000u32.to_be_bytes());
        data.extend_from_slice(b"\x05\xa0\x06");
        let good = data.len();
        // {[1]: 1}
        data.extend_from_slice(b"\x81\x91\x01\x01");
        // {"k": {{"a": 1}: 2}}
        data.extend_from_slice(b"\x81\xa1k\x81\x81\xa1a\x01\x02");
        // Keys nested 100 deep: {{{...{0: 0}...: 0}: 0}: 0}.
        data.extend(std::iter::repeat_n(0x81u8, 100));
        data.extend(std::iter::repeat_n(0u8, 101));
        data.extend(rmp_serde::to_vec_named(&serde_json::json!({"7": "after"})).unwrap());
        let start = std::time::Instant::now();
        let mut out = CollectEmit::default();
        silt_core::decode::decode_slice(&mut decoder(100), &data, &mut out).unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(out.total_rows(), 2);
        let reasons: Vec<&str> = out.rejects.iter().map(|r| r.reason.as_str()).collect();
        let offsets = [good, good + 4, good + 13];
        assert_eq!(
            reasons,
            [
                format!("a map key is an array (a key must be a string, a number, a boolean or nil) (record at byte offset {})", offsets[0]),
                format!("a map key is a map (a key must be a string, a number, a boolean or nil) (record at byte offset {})", offsets[1]),
                format!("a map key is a map (a key must be a string, a number, a boolean or nil) (record at byte offset {})", offsets[2]),
            ]
        );
        assert_eq!(out.rejects[2].raw.len(), 201);
        let batch = &out.batches.values().next().unwrap()[0];
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "7",
                "null",
                "true",
                "1.5",
                "2023-11-14T22:13:20.000000Z",
                "_"
            ]
        );
        assert_eq!(
            texts(&out, 0, "7"),
            [Some("1".into()), Some("after".into())]
        );
    }

    /// A map of many keys (the first record goes through `Dec::map`) is decoded in linear time,
    /// repeated keys resolved as in JSON.
    #[test]
    fn maps_of_many_keys_are_linear() {
        let n = 60_000u32;
        let mut data = vec![0xdf];
        data.extend_from_slice(&(n + 1).to_be_bytes());
        for i in 0..n {
            rmp::encode::write_uint(&mut data, u64::from(i)).unwrap();
            rmp::encode::write_uint(&mut data, u64::from(i)).unwrap();
        }
        data.extend_from_slice(b"\x05\xa4last");
        let start = std::time::Instant::now();
        let mut d = decoder(10);
        let mut dec = Dec {
            buf: &data,
            pos: 0,
            bad: None,
        };
        let Ok(Value::Object(o)) = dec.value(0) else {
            panic!("not a map")
        };
        assert_eq!(o.len(), n as usize);
        assert_eq!(o[5], ("5".to_string(), Value::Str("last".into())));
        let mut out = CollectEmit::default();
        silt_core::decode::decode_slice(&mut d, &data, &mut out).unwrap();
        assert_eq!(out.total_rows(), 1);
        // Well under a second; with a linear search for repeated keys, minutes.
        let took = start.elapsed();
        assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    }

    /// Floats JSON cannot hold, and timestamps `i64` microseconds cannot: kept, never null.
    #[test]
    fn special_floats_and_timestamps_keep_their_values() {
        use arrow::array::AsArray;
        use arrow::datatypes::Float64Type;
        let mut data = Vec::new();
        let mut rec = |f: f64, g: Option<f64>, ts: &[u8]| {
            let n = 2 + u8::from(g.is_some());
            data.push(0x80 | n);
            data.extend_from_slice(b"\xa1f\xcb");
            data.extend_from_slice(&f.to_be_bytes());
            if let Some(g) = g {
                data.extend_from_slice(b"\xa1g\xcb");
                data.extend_from_slice(&g.to_be_bytes());
            }
            data.extend_from_slice(b"\xa1t");
            data.extend_from_slice(ts);
        };
        // The timestamp extension: 96-bit (seconds beyond i64 microseconds), 64-bit with
        // nanoseconds of a second or more (invalid), then a valid 32-bit one.
        let mut huge = b"\xc7\x0c\xff\x00\x00\x00\x00".to_vec();
        huge.extend_from_slice(&i64::MAX.to_be_bytes());
        let bad_nanos = [0xd7, 0xff, 0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 0];
        rec(f64::NAN, Some(1.0), &huge);
        rec(f64::INFINITY, None, &bad_nanos);
        rec(-1.5, Some(f64::NEG_INFINITY), b"\xd6\xff\x00\x00\x00\x01");
        // `g` becomes text: its infinity must not read `null`.
        data.extend(rmp_serde::to_vec_named(&serde_json::json!({"g": "text"})).unwrap());
        let mut out = CollectEmit::default();
        silt_core::decode::decode_slice(&mut decoder(100), &data, &mut out).unwrap();
        assert!(out.rejects.is_empty(), "{:?}", out.rejects);
        let batch = &out.batches.values().next().unwrap()[0];
        let f = batch
            .column_by_name("f")
            .unwrap()
            .as_primitive::<Float64Type>();
        assert!(f.value(0).is_nan());
        assert_eq!((f.value(1), f.value(2)), (f64::INFINITY, -1.5));
        assert_eq!(
            texts(&out, 0, "g"),
            [
                Some("1.0".into()),
                None,
                Some("-inf".into()),
                Some("text".into())
            ]
        );
        assert_eq!(
            texts(&out, 0, "t"),
            [
                Some(format!("ext:-1:00000000{:016x}", i64::MAX)),
                Some("ext:-1:fffffffc00000000".into()),
                Some("1970-01-01T00:00:01.000000Z".into()),
                None
            ]
        );
    }

    /// A text file read as MessagePack: one reject for all of it.
    #[test]
    fn text_is_one_reject() {
        let text =
            b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612\n".repeat(40);
        for pieces in [1, 5, text.len()] {
            let out = run(&text, pieces, MAX_RECORD_BYTES);
            assert_eq!(out.total_rows(), 0);
            assert_eq!(out.rejects.len(), 1, "{:?}", out.rejects);
            assert_eq!(out.rejects[0].line, 1);
            assert_eq!(
                out.rejects[0].reason,
                format!(
                    "not MessagePack (a stream of maps): the input starts with a number (byte 0x31), \
                     not a map (it looks like text); the whole input ({} bytes) is skipped",
                    text.len()
                )
            );
            assert_eq!(out.rejects[0].raw, text);
        }
    }
}
