//! Avro object container files, decoded with `apache-avro`. The file's own (writer) schema gives
//! the table schema (mapping in [`crate::schema_file`]); `--schema` replaces it (records are then
//! conformed to it by field name). Every compression codec the crate is built with is read
//! (null and deflate).
//!
//! Values: long/int -> integers, float/double -> numbers, string/enum/uuid -> text,
//! bytes/fixed -> lowercase hex text, decimal -> exact decimal text (-> Decimal128), date ->
//! Date32, time-millis/micros -> Time64(us), timestamp-millis/micros/nanos and the local-timestamp
//! variants -> Timestamp(us, UTC) (nanoseconds truncated), maps -> JSON text, unions -> the
//! branch's value. Rejects carry the record number: a record that does not fit `--schema`.
//! A file that is not Avro, a corrupt header or block (a wrong sync marker, a record that does not
//! decode, a block larger than [`MAX_BLOCK_BYTES`]) or a file cut short ends the stream with
//! `Err`, after the records before it were emitted. Each record's share of its block's bytes
//! counts as the table's input bytes.
//!
//! [`AvroDecoder`] is the decoder: it frames the header, then each whole block (count, size,
//! data, 16-byte sync marker) as it completes in the pieces it is fed, and decodes the block with
//! an `apache_avro::Reader` over the header and that one block; between pieces it holds at most
//! the unfinished block. [`FORMAT`] declares the format `avro`. Touches nothing but the bytes it
//! is fed and `out`.

use std::io::Read;

use anyhow::{anyhow, bail, Context};
use apache_avro::schema::Schema as Avro;
use apache_avro::types::Value as AV;
use silt_core::format::Confidence;
use silt_core::{
    Decoder, Emit, FormatOptions, FormatSpec, Probe, ReadOptions, SourceInfo, TableName,
};
use silt_readers::json::Value;

use crate::schema_file::TargetSchema;
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

/// The magic number of an object container file.
pub const MAGIC: &[u8; 4] = b"Obj\x01";

/// A larger block is refused (a corrupt size, or a file no writer silt knows makes).
pub const MAX_BLOCK_BYTES: usize = 256 << 20;

/// A larger header (magic, metadata, sync marker) is refused.
pub const MAX_HEADER_BYTES: usize = 16 << 20;

/// The `avro` format (object container files).
pub static FORMAT: FormatSpec = FormatSpec {
    name: "avro",
    aliases: &[],
    summary: "Avro object container files, the file's schema kept; table avro.<file stem>",
    extensions: &["avro"],
    sniff,
    open,
    text_fields: true,
    text: false,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let lo = opts.get_or_default::<LogOptions>();
    Ok(Box::new(AvroDecoder::new(source, &opts.read, &lo)?))
}

/// 100 for the magic number `Obj\x01`.
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    p.head.starts_with(MAGIC).then_some(100)
}

/// A zigzag varint `long` at `buf[*pos..]`; `Ok(None)` when `buf` ends inside it.
fn read_long(buf: &[u8], pos: &mut usize) -> Result<Option<i64>, String> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let Some(&b) = buf.get(*pos + i) else {
            return Ok(None);
        };
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            *pos += i + 1;
            return Ok(Some(((v >> 1) as i64) ^ -((v & 1) as i64)));
        }
    }
    Err("a variable-length integer longer than 10 bytes".into())
}

/// A length (a non-negative `long`), `what` naming it for the error.
fn read_len(buf: &[u8], pos: &mut usize, what: &str) -> Result<Option<usize>, String> {
    match read_long(buf, pos)? {
        None => Ok(None),
        Some(n) if n < 0 => Err(format!("negative {what} {n}")),
        Some(n) => usize::try_from(n)
            .map(Some)
            .map_err(|_| format!("{what} {n} is too large")),
    }
}

/// The length of the header (magic, metadata map, sync marker) at the start of `buf`, `Ok(None)`
/// when `buf` ends inside it.
fn header_len(buf: &[u8]) -> Result<Option<usize>, String> {
    let m = buf.len().min(MAGIC.len());
    if buf[..m] != MAGIC[..m] {
        return Err("it does not start with the magic number Obj\\x01".into());
    }
    let mut pos = MAGIC.len();
    macro_rules! need {
        ($e:expr) => {
            match $e? {
                Some(v) => v,
                None => return Ok(None),
            }
        };
    }
    loop {
        let count = need!(read_long(buf, &mut pos));
        if count == 0 {
            break;
        }
        if count < 0 {
            need!(read_len(buf, &mut pos, "metadata block size"));
        }
        for _ in 0..count.unsigned_abs() {
            for what in ["metadata key length", "metadata value length"] {
                let n = need!(read_len(buf, &mut pos, what));
                pos = pos.checked_add(n).ok_or("metadata too large")?;
                if pos > buf.len() {
                    return Ok(None);
                }
            }
        }
    }
    let end = pos + 16;
    Ok((end <= buf.len()).then_some(end))
}

/// What [`AvroDecoder::block_len`] found at the start of the undecoded bytes.
enum Frame {
    /// The block is not complete yet.
    Partial,
    /// A whole block: its length (with the sync marker), record count and data size.
    Block { len: usize, count: usize },
}

/// The header once read.
struct Header {
    bytes: Vec<u8>,
    sync: [u8; 16],
    schema: Avro,
}

/// The Avro decoder for one stream; see the module documentation.
pub struct AvroDecoder {
    source: SourceInfo,
    ro: ReadOptions,
    lo: LogOptions,
    table: TableName,
    header: Option<Header>,
    sink: Option<Sink>,
    /// Bytes not framed yet (the unfinished header or block).
    carry: Vec<u8>,
    /// Stream offset of the first byte not framed yet.
    offset: u64,
    records: u64,
    /// The stream ended in an error: nothing more is read.
    failed: bool,
}

impl AvroDecoder {
    pub fn new(source: &SourceInfo, ro: &ReadOptions, lo: &LogOptions) -> anyhow::Result<Self> {
        let table = lo.table_for(LogFormat::Avro, source);
        if let Some(ts) = &lo.schema {
            // `--schema` decides the table's schema whatever the file holds: check the options
            // with it now (the file's own schema is known only once its header is read).
            Sink::new(
                source,
                table.clone(),
                ro,
                lo,
                false,
                Some(ts.as_ref().clone()),
            )?;
        }
        Ok(Self {
            source: source.clone(),
            ro: ro.clone(),
            lo: lo.clone(),
            table,
            header: None,
            sink: None,
            carry: Vec::new(),
            offset: 0,
            records: 0,
            failed: false,
        })
    }

    /// Frames and decodes what lies whole in `buf` (which starts at `self.offset`); returns the
    /// bytes used.
    fn frame(&mut self, buf: &[u8], out: &mut dyn Emit) -> anyhow::Result<usize> {
        let mut pos = 0;
        if self.header.is_none() {
            let len = match header_len(buf) {
                Ok(Some(len)) => len,
                Ok(None) if buf.len() > MAX_HEADER_BYTES => bail!(
                    "{}: not an Avro object container file: no header within the first {MAX_HEADER_BYTES} bytes",
                    self.source.display
                ),
                Ok(None) => return Ok(0),
                Err(why) => bail!(
                    "{}: not an Avro object container file: {why}",
                    self.source.display
                ),
            };
            self.start(&buf[..len])?;
            pos = len;
        }
        loop {
            let offset = self.offset + pos as u64;
            match self.block_len(&buf[pos..]).map_err(|why| {
                anyhow!(
                    "{}: the block at byte offset {offset} (record {} on) is corrupt: {why}",
                    self.source.display,
                    self.records + 1
                )
            })? {
                Frame::Partial => return Ok(pos),
                Frame::Block { len, count } => {
                    self.block(&buf[pos..pos + len], count, out)?;
                    pos += len;
                }
            }
        }
    }

    /// Reads the header: the writer schema, and the sink for the table.
    fn start(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        let reader = apache_avro::Reader::new(bytes)
            .map_err(|e| anyhow!("{e}"))
            .with_context(|| {
                format!("{}: not an Avro object container file", self.source.display)
            })?;
        let schema = reader.writer_schema().clone();
        drop(reader);
        if let Some(name) = recursive_type(&schema, &mut Vec::new()) {
            bail!(
                "{}: the Avro schema is recursive (type {name:?} contains itself), which silt \
                 does not read: decoding such records nests as deep as the data says (a record \
                 that must contain itself never ends), and the columns could not hold them",
                self.source.display
            );
        }
        let file_schema = TargetSchema::from_avro(&schema)?;
        let sink = Sink::new(
            &self.source,
            self.table.clone(),
            &self.ro,
            &self.lo,
            false,
            Some(file_schema),
        )?;
        let mut sync = [0u8; 16];
        sync.copy_from_slice(&bytes[bytes.len() - 16..]);
        self.header = Some(Header {
            bytes: bytes.to_vec(),
            sync,
            schema,
        });
        self.sink = Some(sink);
        Ok(())
    }

    /// The block at the start of `buf`: complete or not; `Err` when it cannot be one.
    fn block_len(&self, buf: &[u8]) -> Result<Frame, String> {
        let mut pos = 0;
        let Some(count) = read_len(buf, &mut pos, "record count")? else {
            return Ok(Frame::Partial);
        };
        let Some(size) = read_len(buf, &mut pos, "block size")? else {
            return Ok(Frame::Partial);
        };
        if size > MAX_BLOCK_BYTES {
            return Err(format!(
                "{size} bytes, more than the limit of {MAX_BLOCK_BYTES}"
            ));
        }
        let len = pos + size + 16;
        if buf.len() < len {
            return Ok(Frame::Partial);
        }
        let sync = &self.header.as_ref().expect("header read").sync;
        if buf[len - 16..len] != sync[..] {
            return Err("it does not end with the file's sync marker".into());
        }
        Ok(Frame::Block { len, count })
    }

    /// Decodes one whole block (`count` records) into the sink.
    fn block(&mut self, block: &[u8], count: usize, out: &mut dyn Emit) -> anyhow::Result<()> {
        let header = self.header.as_ref().expect("header read");
        let sink = self.sink.as_mut().expect("made with the header");
        let reader = apache_avro::Reader::new(header.bytes.as_slice().chain(block))
            .map_err(|e| anyhow!("{}: {e}", self.source.display))?;
        // The block's bytes are shared among its records (the last takes the remainder).
        let share = block.len() / count.max(1);
        let mut given = 0;
        for (i, item) in reader.enumerate() {
            self.records += 1;
            let v =
                item.map_err(|e| anyhow!("{}: record {}: {e}", self.source.display, self.records))?;
            let bytes = if i + 1 == count {
                block.len() - given
            } else {
                share
            };
            given += bytes;
            let rec = to_value(v, &header.schema);
            sink.push(rec, self.records, &Vec::new, bytes, out)?;
        }
        Ok(())
    }

    fn fail(&mut self, e: anyhow::Error, out: &mut dyn Emit) -> anyhow::Error {
        // What was read before is kept.
        self.failed = true;
        self.carry = Vec::new();
        if let Some(s) = self.sink.as_mut() {
            if let Err(f) = s.flush(out) {
                return e.context(f);
            }
        }
        e
    }
}

impl Decoder for AvroDecoder {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        if self.failed {
            return Ok(());
        }
        let res = if self.carry.is_empty() {
            self.frame(bytes, out).map(|used| {
                self.offset += used as u64;
                self.carry.extend_from_slice(&bytes[used..]);
            })
        } else {
            self.carry.extend_from_slice(bytes);
            let carry = std::mem::take(&mut self.carry);
            self.frame(&carry, out).map(|used| {
                self.offset += used as u64;
                self.carry = carry;
                self.carry.drain(..used);
            })
        };
        res.map_err(|e| self.fail(e, out))
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        match self.sink.as_mut() {
            Some(s) => s.flush(out),
            None => Ok(()),
        }
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        if self.failed {
            return Ok(());
        }
        let end = if self.header.is_none() {
            let why = if self.carry.is_empty() {
                "the input is empty".to_string()
            } else {
                format!(
                    "the input ends inside the header ({} bytes)",
                    self.carry.len()
                )
            };
            Err(anyhow!(
                "{}: not an Avro object container file: {why}",
                self.source.display
            ))
        } else if !self.carry.is_empty() {
            Err(anyhow!(
                "{}: the file is cut short: it ends inside the block at byte offset {} (record {} on; {} bytes of it)",
                self.source.display,
                self.offset,
                self.records + 1,
                self.carry.len()
            ))
        } else {
            Ok(())
        };
        let flushed = self.flush(out);
        self.carry = Vec::new();
        end.and(flushed)
    }
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// Decimal text of a big-endian two's complement unscaled value with `scale` decimals.
fn decimal_text(bytes: &[u8], scale: usize) -> String {
    if bytes.len() > 16 {
        return hex(bytes);
    }
    let neg = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut v: i128 = if neg { -1 } else { 0 };
    for b in bytes {
        v = (v << 8) | *b as i128;
    }
    let digits = v.unsigned_abs().to_string();
    let digits = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (i, f) = digits.split_at(digits.len() - scale);
    let sign = if v < 0 { "-" } else { "" };
    if scale == 0 {
        format!("{sign}{i}")
    } else {
        format!("{sign}{i}.{f}")
    }
}

/// A named type of `s` that refers to itself or to a type enclosing it, if any.
///
/// Checked before any record is decoded, because apache-avro 0.22 decodes recursive types by
/// recursion: a type that must contain itself (the fuzzer's `record r { r t0; }`) recursed until
/// the stack overflowed, and a legal recursive list nests one stack frame per list element.
fn recursive_type(s: &Avro, enclosing: &mut Vec<String>) -> Option<String> {
    match s {
        Avro::Ref { name } => enclosing
            .iter()
            .any(|e| e == name.name())
            .then(|| name.name().to_string()),
        Avro::Record(r) => {
            enclosing.push(r.name.name().to_string());
            let found = r
                .fields
                .iter()
                .find_map(|f| recursive_type(&f.schema, enclosing));
            enclosing.pop();
            found
        }
        Avro::Array(a) => recursive_type(&a.items, enclosing),
        Avro::Map(m) => recursive_type(&m.types, enclosing),
        Avro::Union(u) => u
            .variants()
            .iter()
            .find_map(|v| recursive_type(v, enclosing)),
        _ => None,
    }
}

/// Converts an Avro value (with its schema, for decimal scales and union branches).
pub fn to_value(v: AV, s: &Avro) -> Value {
    match v {
        AV::Null => Value::Null,
        AV::Boolean(b) => Value::Bool(b),
        AV::Int(i) => Value::Int(i as i64),
        AV::Long(i) => Value::Int(i),
        AV::Float(f) => Value::Float(f as f64),
        AV::Double(f) => Value::Float(f),
        AV::Bytes(b) | AV::Fixed(_, b) => Value::Str(hex(&b)),
        AV::String(s) => Value::Str(s),
        AV::Enum(_, s) => Value::Str(s),
        AV::Uuid(u) => Value::Str(u.to_string()),
        AV::Union(i, b) => {
            let branch = match s {
                Avro::Union(u) => u.variants().get(i as usize).unwrap_or(s),
                other => other,
            };
            to_value(*b, branch)
        }
        AV::Array(items) => {
            let item = match s {
                Avro::Array(a) => a.items.as_ref(),
                other => other,
            };
            Value::List(items.into_iter().map(|x| to_value(x, item)).collect())
        }
        AV::Map(m) => {
            let vs = match s {
                Avro::Map(m) => m.types.as_ref(),
                other => other,
            };
            let mut entries: Vec<(String, Value)> =
                m.into_iter().map(|(k, x)| (k, to_value(x, vs))).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries)
        }
        AV::Record(fields) => {
            let rs = match s {
                Avro::Record(r) => Some(r),
                _ => None,
            };
            Value::Object(
                fields
                    .into_iter()
                    .map(|(k, x)| {
                        let fs = rs
                            .and_then(|r| r.fields.iter().find(|f| f.name == k))
                            .map_or(&Avro::Null, |f| &f.schema);
                        (k, to_value(x, fs))
                    })
                    .collect(),
            )
        }
        AV::Date(d) => Value::Int(d as i64),
        AV::Decimal(d) => {
            let scale = match s {
                Avro::Decimal(ds) => ds.scale,
                _ => 0,
            };
            match Vec::<u8>::try_from(&d) {
                Ok(b) => Value::Str(decimal_text(&b, scale)),
                Err(_) => Value::Null,
            }
        }
        AV::BigDecimal(b) => Value::Str(b.to_string()),
        AV::TimeMillis(ms) => Value::Int(ms as i64 * 1000),
        AV::TimeMicros(us) => Value::Int(us),
        AV::TimestampMillis(ms) | AV::LocalTimestampMillis(ms) => {
            ms.checked_mul(1000).map_or(Value::Null, Value::Time)
        }
        AV::TimestampMicros(us) | AV::LocalTimestampMicros(us) => Value::Time(us),
        AV::TimestampNanos(ns) | AV::LocalTimestampNanos(ns) => Value::Time(ns.div_euclid(1000)),
        AV::Duration(d) => Value::Str(format!(
            "{{\"months\":{},\"days\":{},\"millis\":{}}}",
            u32::from(d.months()),
            u32::from(d.days()),
            u32::from(d.millis())
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_the_magic_number_only() {
        let probe = |head: &[u8]| {
            sniff(&Probe {
                head,
                file_name: Some("x.bin"),
            })
        };
        assert_eq!(probe(b"Obj\x01\x04\x16avro.schema"), Some(100));
        for no in [
            &b"Obj\x02"[..],
            b"Obj",
            b"{\"a\":1}\n",
            b"\x82\xa1a\x01\xa1b\x02",
            b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00",
            b"a,b\n1,2\n",
            b"",
        ] {
            assert_eq!(probe(no), None, "{no:02x?}");
        }
    }

    #[test]
    fn headers_are_framed_whole() {
        let schema = apache_avro::Schema::parse_str(
            r#"{"type":"record","name":"r","fields":[{"name":"a","type":"long"}]}"#,
        )
        .unwrap();
        let w = apache_avro::Writer::new(&schema, Vec::new()).unwrap();
        let file = w.into_inner().unwrap();
        assert_eq!(header_len(&file), Ok(Some(file.len())));
        for n in 0..file.len() {
            assert_eq!(header_len(&file[..n]), Ok(None), "{n} bytes");
        }
        assert!(header_len(b"Obx").is_err());
        assert!(header_len(b"Obj\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff").is_err());
    }

    #[test]
    fn recursive_schemas_are_refused_before_decoding() {
        let parse = |js: &str| apache_avro::Schema::parse_str(js).unwrap();
        // A linked list (legal, finite data, but one nesting level per element) and a record
        // that must contain itself (what the fuzzer found).
        for (js, name) in [
            (
                r#"{"type":"record","name":"node","fields":[{"name":"v","type":"long"},
                    {"name":"next","type":["null","node"]}]}"#,
                "node",
            ),
            (
                r#"{"type":"record","name":"r","fields":[{"name":"t0","type":"r"}]}"#,
                "r",
            ),
            (
                r#"{"type":"record","name":"a","fields":[{"name":"b","type":{"type":"record",
                    "name":"b","fields":[{"name":"xs","type":{"type":"array","items":"a"}}]}}]}"#,
                "a",
            ),
        ] {
            assert_eq!(
                recursive_type(&parse(js), &mut Vec::new()),
                Some(name.into())
            );
        }
        // A named type used twice side by side is not recursion.
        let twice = parse(
            r#"{"type":"record","name":"r","fields":[
                {"name":"a","type":{"type":"record","name":"p","fields":[{"name":"x","type":"int"}]}},
                {"name":"b","type":"p"}]}"#,
        );
        assert_eq!(recursive_type(&twice, &mut Vec::new()), None);

        // Through the decoder: the whole input is refused with the reason, nothing panics.
        let list = parse(
            r#"{"type":"record","name":"node","fields":[{"name":"v","type":"long"},
                {"name":"next","type":["null","node"]}]}"#,
        );
        let mut w = apache_avro::Writer::new(&list, Vec::new()).unwrap();
        let mut rec = apache_avro::types::Record::new(&list).unwrap();
        rec.put("v", 1i64);
        rec.put("next", AV::Union(0, Box::new(AV::Null)));
        w.append_value(rec).unwrap();
        let file = w.into_inner().unwrap();
        let src = SourceInfo::from_path(std::path::Path::new("list.avro"));
        let mut d =
            AvroDecoder::new(&src, &ReadOptions::default(), &LogOptions::default()).unwrap();
        let mut out = silt_core::CollectEmit::default();
        let r = d.feed(&file, &mut out).and_then(|_| d.finish(&mut out));
        let msg = match r {
            Err(e) => format!("{e:#}"),
            Ok(()) => format!("{:?}", out.rejects),
        };
        assert!(
            msg.contains("recursive (type \"node\" contains itself)"),
            "{msg}"
        );
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal_text(&[0x30, 0x39], 2), "123.45");
        assert_eq!(decimal_text(&[0xcf, 0xc7], 2), "-123.45");
        assert_eq!(decimal_text(&[0x05], 3), "0.005");
        assert_eq!(decimal_text(&[0x05], 0), "5");
    }
}
