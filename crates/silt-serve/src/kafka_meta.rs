//! `--kafka-meta`: a Kafka message's own attributes (topic, partition, offset, timestamp, key,
//! headers) as columns of the rows decoded from it: `_kafka_topic` (Utf8), `_kafka_partition`
//! (Int32), `_kafka_offset` (Int64), `_kafka_timestamp` (Timestamp(µs, UTC), the message's
//! create or log-append time), `_kafka_key` (Utf8) and `_kafka_headers` (Map<Utf8, Utf8>, in
//! the message's order; map keys are unique, so a repeated header keeps its first place and its
//! last value, as Flink's and Vector's Kafka sources do). Bytes of a key or header value
//! that are not UTF-8 are written `\xNN`, as Zeek writes them; a missing key or header value is
//! null.
//!
//! How rows find their message: decoders know nothing of Kafka, and an entry's messages are
//! decoded together (a message may make several rows, none, or a reject, and EVE spreads rows
//! over tables). So the consumer numbers each message of an entry and [`splice`]s the number
//! into the message before decoding, as an ordinary field every reader keeps as an integer
//! column, [`ROW_FIELD`]: the first member of a JSON object (Zeek JSON, EVE, NDJSON), the first
//! entry of a MessagePack map, a last field of a CSV/TSV row (whose `--topic-columns` gain the
//! name). After decoding, [`attach`] replaces that column with the metadata columns of each
//! row's message, and [`unsplice`] gives a reject its message's original bytes back. Rows whose
//! message could not be numbered (a line that is not a JSON object, a MessagePack value that is
//! not a map) get null metadata and are counted. A batch that already has a column of one of
//! these names keeps its own, and the log says so once.
//!
//! Pure functions over bytes and batches; touches nothing else.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Int32Array, Int64Array, MapBuilder, StringArray, StringBuilder,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use silt_kafka::MetaColumns;

/// The field spliced into each message: its number within the entry.
pub const ROW_FIELD: &str = "__silt_kafka_row";

/// How a topic's messages carry [`ROW_FIELD`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Splice {
    /// Each line that is a JSON object gets a first member.
    Json,
    /// A MessagePack map gets a first entry.
    Msgpack,
    /// Each non-blank row gets a last field after this separator.
    Delimited(u8),
}

impl Splice {
    /// The splice for a topic of `format` (a registry name); `columns` says whether its rows
    /// come without a header (`--topic-columns`), which delimited topics need (a header inside
    /// the messages would not gain the field).
    pub fn for_format(format: &str, columns: bool) -> Result<Self, String> {
        match format {
            "zeek" | "suricata" | "json" => Ok(Splice::Json),
            "msgpack" => Ok(Splice::Msgpack),
            "csv" | "tsv" if columns => Ok(Splice::Delimited(if format == "csv" {
                b','
            } else {
                b'\t'
            })),
            "csv" | "tsv" => Err(format!(
                "{format} topics take --kafka-meta only with --topic-columns (rows without a header)"
            )),
            other => Err(format!(
                "--kafka-meta is not available for {other} topics: their records have no field to \
                 carry the message's place (it works for zeek, suricata, json, msgpack, and csv/tsv \
                 with --topic-columns)"
            )),
        }
    }

    /// The header line of a delimited topic, with the field's name added.
    pub fn header(&self, columns: &str) -> String {
        match self {
            Splice::Delimited(sep) => format!("{columns}{}{ROW_FIELD}", *sep as char),
            _ => columns.to_string(),
        }
    }
}

/// What `--kafka-meta` keeps of one message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageMeta {
    pub offset: i64,
    /// Milliseconds since the epoch, when the message has a timestamp.
    pub timestamp: Option<i64>,
    pub key: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// The metadata of an entry's messages, in the order [`splice`] numbered them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryMeta {
    pub columns: MetaColumns,
    pub splice: Splice,
    pub messages: Vec<MessageMeta>,
}

/// Appends `payload`, message number `n`, to `body` with [`ROW_FIELD`] spliced in; the caller
/// keeps the line accounting (lines are neither added nor removed; a payload is given a final
/// newline unless it is MessagePack).
pub fn splice(splice: Splice, n: u32, payload: &[u8], body: &mut Vec<u8>) {
    match splice {
        Splice::Json => {
            for line in payload.split_inclusive(|b| *b == b'\n') {
                let start = line.iter().position(|b| !b.is_ascii_whitespace());
                match start {
                    Some(i) if line[i] == b'{' => {
                        body.extend_from_slice(&line[..=i]);
                        body.extend_from_slice(format!("\"{ROW_FIELD}\":{n}").as_bytes());
                        let rest = &line[i + 1..];
                        let next = rest.iter().find(|b| !b.is_ascii_whitespace());
                        if next.is_some_and(|b| *b != b'}') {
                            body.push(b',');
                        }
                        body.extend_from_slice(rest);
                    }
                    _ => body.extend_from_slice(line),
                }
            }
            if !payload.ends_with(b"\n") {
                body.push(b'\n');
            }
        }
        Splice::Delimited(sep) => {
            for line in payload.split(|b| *b == b'\n') {
                let (text, cr) = match line.strip_suffix(b"\r") {
                    Some(t) => (t, true),
                    None => (line, false),
                };
                body.extend_from_slice(text);
                if !text.trim_ascii().is_empty() {
                    body.push(sep);
                    body.extend_from_slice(n.to_string().as_bytes());
                }
                if cr {
                    body.push(b'\r');
                }
                body.push(b'\n');
            }
            // `split` yields an empty piece after a final newline: drop the extra one.
            if payload.ends_with(b"\n") {
                body.pop();
            }
        }
        Splice::Msgpack => {
            let kv = msgpack_entry(n);
            match map_header(payload) {
                Some((len, hl)) => {
                    write_map_header(len + 1, body);
                    body.extend_from_slice(&kv);
                    body.extend_from_slice(&payload[hl..]);
                }
                None => body.extend_from_slice(payload),
            }
        }
    }
}

/// A reject's raw bytes without what [`splice`] added (unchanged when it holds no splice).
pub fn unsplice(splice: Splice, raw: &[u8]) -> Vec<u8> {
    match splice {
        Splice::Json => {
            let pat = format!("\"{ROW_FIELD}\":");
            let Some(at) = memchr::memmem::find(raw, pat.as_bytes()) else {
                return raw.to_vec();
            };
            let digits = raw[at + pat.len()..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            let mut end = at + pat.len() + digits;
            if raw.get(end) == Some(&b',') {
                end += 1;
            }
            [&raw[..at], &raw[end..]].concat()
        }
        Splice::Delimited(sep) => {
            let (text, cr) = match raw.strip_suffix(b"\r") {
                Some(t) => (t, &b"\r"[..]),
                None => (raw, &b""[..]),
            };
            match memchr::memrchr(sep, text) {
                Some(i) if i + 1 < text.len() && text[i + 1..].iter().all(u8::is_ascii_digit) => {
                    [&text[..i], cr].concat()
                }
                _ => raw.to_vec(),
            }
        }
        Splice::Msgpack => {
            let Some((len, hl)) = map_header(raw) else {
                return raw.to_vec();
            };
            let rest = &raw[hl..];
            let key_len = 1 + ROW_FIELD.len();
            if len == 0 || rest.len() < key_len + 5 || rest[1..key_len] != *ROW_FIELD.as_bytes() {
                return raw.to_vec();
            }
            let mut out = Vec::with_capacity(raw.len());
            // The header had grown a size class at 16 and 65,536 entries: shrink it back.
            write_map_header(len - 1, &mut out);
            out.extend_from_slice(&rest[key_len + 5..]);
            out
        }
    }
}

/// `ROW_FIELD` as a fixstr key and `n` as a uint32 (always 5 bytes, so [`unsplice`] knows the
/// entry's length).
fn msgpack_entry(n: u32) -> Vec<u8> {
    let mut kv = Vec::with_capacity(ROW_FIELD.len() + 6);
    kv.push(0xa0 | ROW_FIELD.len() as u8);
    kv.extend_from_slice(ROW_FIELD.as_bytes());
    kv.push(0xce);
    kv.extend_from_slice(&n.to_be_bytes());
    kv
}

/// A MessagePack map's entry count and header length, if `b` starts with a map.
fn map_header(b: &[u8]) -> Option<(u32, usize)> {
    match *b.first()? {
        m @ 0x80..=0x8f => Some(((m & 0x0f) as u32, 1)),
        0xde => Some((u16::from_be_bytes(b.get(1..3)?.try_into().ok()?) as u32, 3)),
        0xdf => {
            let n = u32::from_be_bytes(b.get(1..5)?.try_into().ok()?);
            (n < u32::MAX).then_some((n, 5))
        }
        _ => None,
    }
}

/// The smallest map header for `n` entries.
fn write_map_header(n: u32, out: &mut Vec<u8>) {
    if n < 16 {
        out.push(0x80 | n as u8);
    } else if n <= u16::MAX as u32 {
        out.push(0xde);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdf);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// What [`attach`] did besides adding columns.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Attached {
    /// Rows whose message was not numbered (their metadata is null).
    pub unnumbered: usize,
    /// Metadata columns the batch already had (kept, not replaced).
    pub clashes: Vec<String>,
}

/// Replaces `b`'s [`ROW_FIELD`] column with the metadata columns of each row's message (see the
/// module documentation).
pub fn attach(
    b: &RecordBatch,
    topic: &str,
    partition: i32,
    meta: &EntryMeta,
) -> anyhow::Result<(RecordBatch, Attached)> {
    let mut done = Attached::default();
    let schema = b.schema();
    let rows: Vec<Option<&MessageMeta>> = match schema.index_of(ROW_FIELD) {
        Ok(i) => {
            let c = arrow::compute::cast(b.column(i), &DataType::Int64)?;
            let c = c
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("cast to Int64");
            (0..b.num_rows())
                .map(|r| {
                    (!c.is_null(r))
                        .then(|| usize::try_from(c.value(r)).ok())
                        .flatten()
                        .and_then(|n| meta.messages.get(n))
                })
                .collect()
        }
        Err(_) => vec![None; b.num_rows()],
    };
    done.unnumbered = rows.iter().filter(|r| r.is_none()).count();
    let mut fields: Vec<Arc<Field>> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (f, c) in schema.fields().iter().zip(b.columns()) {
        if f.name() != ROW_FIELD {
            fields.push(f.clone());
            columns.push(c.clone());
        }
    }
    let mut add = |name: &str, wanted: bool, make: &dyn Fn() -> ArrayRef| {
        if !wanted {
            return;
        }
        if fields.iter().any(|f| f.name() == name) {
            done.clashes.push(name.to_string());
            return;
        }
        let a = make();
        fields.push(Arc::new(Field::new(name, a.data_type().clone(), true)));
        columns.push(a);
    };
    let c = meta.columns;
    add("_kafka_topic", c.topic, &|| {
        Arc::new(
            rows.iter()
                .map(|r| r.map(|_| topic))
                .collect::<StringArray>(),
        )
    });
    add("_kafka_partition", c.partition, &|| {
        Arc::new(
            rows.iter()
                .map(|r| r.map(|_| partition))
                .collect::<Int32Array>(),
        )
    });
    add("_kafka_offset", c.offset, &|| {
        Arc::new(
            rows.iter()
                .map(|r| r.map(|m| m.offset))
                .collect::<Int64Array>(),
        )
    });
    add("_kafka_timestamp", c.timestamp, &|| {
        Arc::new(
            rows.iter()
                .map(|r| {
                    r.and_then(|m| m.timestamp)
                        .and_then(|ms| ms.checked_mul(1000))
                })
                .collect::<TimestampMicrosecondArray>()
                .with_timezone("UTC"),
        )
    });
    add("_kafka_key", c.key, &|| {
        Arc::new(
            rows.iter()
                .map(|r| r.and_then(|m| m.key.as_deref()).map(text))
                .collect::<StringArray>(),
        )
    });
    add("_kafka_headers", c.headers, &|| {
        let mut m = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        for r in &rows {
            match r {
                Some(msg) => {
                    // Map keys are unique (DuckDB refuses a Parquet map that repeats one): a
                    // repeated header keeps its first place and its last value.
                    let mut unique: Vec<(&str, Option<&[u8]>)> = Vec::new();
                    for (k, v) in &msg.headers {
                        match unique.iter_mut().find(|(u, _)| u == k) {
                            Some(u) => u.1 = v.as_deref(),
                            None => unique.push((k, v.as_deref())),
                        }
                    }
                    for (k, v) in unique {
                        m.keys().append_value(k);
                        m.values().append_option(v.map(text));
                    }
                    m.append(true).expect("keys and values appended together");
                }
                None => m.append(false).expect("keys and values appended together"),
            }
        }
        Arc::new(m.finish())
    });
    let schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    Ok((RecordBatch::try_new(schema, columns)?, done))
}

/// Bytes as text: UTF-8 as it is, other bytes as `\xNN`.
fn text(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        out.push_str(chunk.valid());
        for x in chunk.invalid() {
            out.push_str(&format!("\\x{x:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spliced(s: Splice, n: u32, payload: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        splice(s, n, payload, &mut body);
        body
    }

    #[test]
    fn json_objects_gain_a_first_member_and_lose_it_again() {
        let cases: [(&[u8], &[u8]); 5] = [
            (br#"{"a":1}"#, b"{\"__silt_kafka_row\":7,\"a\":1}\n"),
            (b"  {} \n", b"  {\"__silt_kafka_row\":7} \n"),
            (b"{ }", b"{\"__silt_kafka_row\":7 }\n"),
            (b"[1,2]", b"[1,2]\n"),
            (b"{\"broken", b"{\"__silt_kafka_row\":7,\"broken\n"),
        ];
        for (payload, want) in cases {
            let got = spliced(Splice::Json, 7, payload);
            assert_eq!(got, want, "{}", String::from_utf8_lossy(payload));
            let line = got.strip_suffix(b"\n").unwrap();
            assert_eq!(
                unsplice(Splice::Json, line),
                payload.strip_suffix(b"\n").unwrap_or(payload),
                "{}",
                String::from_utf8_lossy(payload)
            );
        }
        // Every line of a message gets the message's number.
        assert_eq!(
            spliced(Splice::Json, 2, b"{\"a\":1}\n{\"b\":2}\n"),
            b"{\"__silt_kafka_row\":2,\"a\":1}\n{\"__silt_kafka_row\":2,\"b\":2}\n"
        );
    }

    #[test]
    fn delimited_rows_gain_a_last_field() {
        let s = Splice::Delimited(b',');
        assert_eq!(spliced(s, 3, b"a,b"), b"a,b,3\n");
        assert_eq!(spliced(s, 3, b"a,b\r\n\nc,d\n"), b"a,b,3\r\n\nc,d,3\n");
        assert_eq!(unsplice(s, b"a,b,3"), b"a,b");
        assert_eq!(unsplice(s, b"a,b,3\r"), b"a,b\r");
        assert_eq!(unsplice(s, b"a,b"), b"a,b");
        assert_eq!(s.header("x,y"), "x,y,__silt_kafka_row");
        assert_eq!(
            Splice::Delimited(b'\t').header("x\ty"),
            "x\ty\t__silt_kafka_row"
        );
    }

    #[test]
    fn msgpack_maps_gain_a_first_entry_in_every_size_class() {
        for n in [0u32, 1, 14, 15, 16, 65_534, 65_535, 65_536] {
            let mut payload = Vec::new();
            write_map_header(n, &mut payload);
            for i in 0..n {
                // Keys as positive fixints and values as nil: 2 bytes per entry.
                payload.push((i % 128) as u8);
                payload.push(0xc0);
            }
            let body = spliced(Splice::Msgpack, 9, &payload);
            assert_eq!(map_header(&body).unwrap().0, n + 1, "{n}");
            assert_eq!(unsplice(Splice::Msgpack, &body), payload, "{n}");
        }
        // Not a map: left alone.
        assert_eq!(spliced(Splice::Msgpack, 1, &[0x92, 1, 2]), [0x92, 1, 2]);
        assert_eq!(
            unsplice(Splice::Msgpack, &[0x81, 0xa1, b'a', 1]),
            [0x81, 0xa1, b'a', 1]
        );
    }

    #[test]
    fn formats_without_a_field_are_refused_with_the_reason() {
        assert_eq!(Splice::for_format("zeek", false), Ok(Splice::Json));
        assert_eq!(
            Splice::for_format("tsv", true),
            Ok(Splice::Delimited(b'\t'))
        );
        assert!(Splice::for_format("csv", false)
            .unwrap_err()
            .contains("--topic-columns"));
        assert!(Splice::for_format("syslog", false)
            .unwrap_err()
            .contains("syslog"));
    }

    #[test]
    fn attach_maps_rows_to_their_messages() {
        let schema = Arc::new(Schema::new(vec![
            Field::new(ROW_FIELD, DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
            Field::new("_kafka_offset", DataType::Int64, true),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![
                    Some(1),
                    Some(0),
                    None,
                    Some(1),
                    Some(9),
                ])),
                Arc::new(StringArray::from(vec!["a", "b", "c", "d", "e"])),
                Arc::new(Int64Array::from(vec![5; 5])),
            ],
        )
        .unwrap();
        let meta = EntryMeta {
            columns: MetaColumns::parse("all").unwrap(),
            splice: Splice::Json,
            messages: vec![
                MessageMeta {
                    offset: 100,
                    timestamp: Some(1_700_000_000_123),
                    key: Some(b"k\xff".to_vec()),
                    headers: vec![
                        ("h".into(), Some(b"1".to_vec())),
                        ("n".into(), None),
                        ("h".into(), Some(b"2".to_vec())),
                    ],
                },
                MessageMeta {
                    offset: 101,
                    ..Default::default()
                },
            ],
        };
        let (out, done) = attach(&b, "t", 3, &meta).unwrap();
        assert_eq!(done.unnumbered, 2);
        assert_eq!(done.clashes, ["_kafka_offset"]);
        let names: Vec<String> = out
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            [
                "v",
                "_kafka_offset",
                "_kafka_topic",
                "_kafka_partition",
                "_kafka_timestamp",
                "_kafka_key",
                "_kafka_headers"
            ]
        );
        let key = out.column_by_name("_kafka_key").unwrap();
        let key = key.as_any().downcast_ref::<StringArray>().unwrap();
        assert!(key.is_null(0));
        assert_eq!(key.value(1), "k\\xff");
        assert!(key.is_null(2));
        let ts = out.column_by_name("_kafka_timestamp").unwrap();
        let ts = ts
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(ts.value(1), 1_700_000_000_123_000);
        let p = out.column_by_name("_kafka_partition").unwrap();
        assert_eq!(p.null_count(), 2);
        let h = out.column_by_name("_kafka_headers").unwrap();
        let h = h.as_any().downcast_ref::<arrow::array::MapArray>().unwrap();
        assert_eq!(h.value(1).len(), 2);
        let vals = h.value(1);
        let vals = vals
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(vals.value(0), "2", "a repeated header keeps its last value");
        assert!(vals.is_null(1));
        assert_eq!(h.value(0).len(), 0);
        assert!(h.is_null(2) && h.is_null(4));
    }
}
