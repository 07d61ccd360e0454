//! One whole frame (a top-level MessagePack value) -> what it carries. The shapes accepted:
//!
//! | mode | frame | entries handed over |
//! |---|---|---|
//! | Message | `[tag, time, record]`, `[tag, time, record, option]` | `[time, record]` rebuilt from the raw bytes of both |
//! | Forward | `[tag, [[time, record], ...]]`, `+ option` | the array's contents as received |
//! | PackedForward | `[tag, bin\|str entries]`, `+ option` | the bytes as received |
//! | CompressedPackedForward | the same with option `compressed: "gzip"` | decompressed (gzip members back to back) |
//!
//! A top-level `nil` is a keepalive (fluentd ignores it too). `tag` is a string (or binary)
//! of valid UTF-8; `time` an integer, a float, an extension (EventTime is ext 0) or an array
//! (fluent-bit's `[time, metadata]`), passed through as received; `record` a map. `option` is a
//! map (or nil): `chunk` (string, acked), `size` (the number of events, checked),
//! `compressed` (`gzip`, or `text` for none); other keys are ignored. Anything else is a bad
//! frame, with a reason for the log.
//!
//! [`parse`] looks at the frame's structure only; [`Raw::finish`] decompresses and counts the
//! entries of the packed modes (a scan over their headers, see [`crate::scan`]), which the
//! connection runs off the async threads when the entries are large.
//!
//! Touches only the bytes it is given.

use std::io::Read;

use bytes::{BufMut, Bytes, BytesMut};

use crate::scan::{header, skip_value, Header, Kind, SkipError};

/// The event mode a frame came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Message,
    Forward,
    PackedForward,
    CompressedPackedForward,
}

/// What a frame carries.
#[derive(Debug)]
pub enum Parsed {
    /// A `nil`: nothing to do, no reply.
    Keepalive,
    Events(Raw),
}

/// A frame's events before the packed modes were decompressed and counted.
#[derive(Debug)]
pub struct Raw {
    pub tag: String,
    pub mode: Mode,
    /// The entries (still compressed for CompressedPackedForward).
    pub entries: Bytes,
    /// Known for Message and Forward; counted by [`Raw::finish`] for the packed modes.
    pub events: Option<usize>,
    pub chunk: Option<String>,
    /// The `size` option.
    pub size: Option<u64>,
}

struct Cur<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cur<'a> {
    fn peek(&self) -> Result<Header, String> {
        match header(&self.buf[self.pos..]) {
            Ok(Some(h)) if self.pos + h.size() <= self.buf.len() => Ok(h),
            Ok(_) => Err(format!("truncated value at byte {}", self.pos)),
            Err(e) => Err(format!("{e} at byte {}", self.pos)),
        }
    }

    /// The payload of a string or binary.
    fn text(&mut self, what: &str) -> Result<&'a [u8], String> {
        let h = self.peek()?;
        if !matches!(h.kind, Kind::Str | Kind::Bin) {
            return Err(format!("{what} is {:?}, not a string", h.kind));
        }
        let start = self.pos + h.head;
        self.pos += h.size();
        Ok(&self.buf[start..self.pos])
    }

    fn skip(&mut self) -> Result<(usize, usize), String> {
        let start = self.pos;
        self.pos = skip_value(self.buf, self.pos).map_err(|e| skip_reason(e, start))?;
        Ok((start, self.pos))
    }

    fn uint(&mut self, what: &str) -> Result<u64, String> {
        let mut rest = &self.buf[self.pos..];
        let before = rest.len();
        let n = rmp::decode::read_int::<u64, _>(&mut rest)
            .map_err(|e| format!("{what} is not a non-negative integer: {e}"))?;
        self.pos += before - rest.len();
        Ok(n)
    }
}

fn skip_reason(e: SkipError, start: usize) -> String {
    match e {
        SkipError::Truncated => format!("truncated value at byte {start}"),
        SkipError::Invalid(at) => format!("invalid marker at byte {at}"),
    }
}

/// The structure of one whole frame.
pub fn parse(frame: &Bytes) -> Result<Parsed, String> {
    let mut c = Cur { buf: frame, pos: 0 };
    let top = c.peek()?;
    match top.kind {
        Kind::Nil => return Ok(Parsed::Keepalive),
        Kind::Array => {}
        k => return Err(format!("frame is {k:?}, not an array")),
    }
    let n = top.children;
    if !(2..=4).contains(&n) {
        return Err(format!("frame is an array of {n}, not 2 to 4"));
    }
    c.pos += top.head;
    let tag = c.text("tag")?;
    let tag = std::str::from_utf8(tag)
        .map_err(|_| "tag is not valid UTF-8".to_string())?
        .to_string();
    let second = c.peek()?;
    let (mode, entries, events, options_at) = match second.kind {
        Kind::Array => {
            let (start, end) = c.skip()?;
            let body = frame.slice(start + second.head..end);
            let counted = count_entries(&body)?;
            if counted as u64 != second.children {
                return Err("forward entries do not match their array".into());
            }
            (Mode::Forward, body, Some(counted), 2)
        }
        Kind::Str | Kind::Bin => {
            let start = c.pos + second.head;
            c.pos += second.size();
            (Mode::PackedForward, frame.slice(start..c.pos), None, 2)
        }
        Kind::Int | Kind::Float | Kind::Ext(_) => {
            if n < 3 {
                return Err("message without a record".into());
            }
            let (t0, t1) = c.skip()?;
            let record = c.peek()?;
            if record.kind != Kind::Map {
                return Err(format!("record is {:?}, not a map", record.kind));
            }
            let (r0, r1) = c.skip()?;
            let mut entry = BytesMut::with_capacity(1 + (t1 - t0) + (r1 - r0));
            entry.put_u8(0x92);
            entry.extend_from_slice(&frame[t0..t1]);
            entry.extend_from_slice(&frame[r0..r1]);
            (Mode::Message, entry.freeze(), Some(1), 3)
        }
        k => {
            return Err(format!(
                "second element is {k:?}: not a time, entries or packed entries"
            ))
        }
    };
    let mut raw = Raw {
        tag,
        mode,
        entries,
        events,
        chunk: None,
        size: None,
    };
    if n > options_at {
        if n > options_at + 1 {
            return Err(format!("{mode:?} frame with {n} elements"));
        }
        options(&mut c, &mut raw)?;
    }
    if c.pos != frame.len() {
        return Err("bytes after the frame".into());
    }
    Ok(Parsed::Events(raw))
}

fn options(c: &mut Cur<'_>, raw: &mut Raw) -> Result<(), String> {
    let h = c.peek()?;
    match h.kind {
        Kind::Nil => {
            c.pos += h.head;
            return Ok(());
        }
        Kind::Map => c.pos += h.head,
        k => return Err(format!("option is {k:?}, not a map")),
    }
    for _ in 0..h.children / 2 {
        let key = match c.peek()?.kind {
            Kind::Str | Kind::Bin => c.text("option key")?,
            _ => {
                c.skip()?;
                c.skip()?;
                continue;
            }
        };
        match key {
            b"chunk" => {
                let v = c.text("chunk")?;
                let v =
                    std::str::from_utf8(v).map_err(|_| "chunk is not valid UTF-8".to_string())?;
                raw.chunk = Some(v.to_string());
            }
            b"size" => raw.size = Some(c.uint("size")?),
            b"compressed" => match c.text("compressed")? {
                b"gzip" => {
                    if raw.mode != Mode::PackedForward {
                        return Err(format!("compressed {:?} frame", raw.mode));
                    }
                    raw.mode = Mode::CompressedPackedForward;
                }
                b"text" => {}
                other => {
                    return Err(format!(
                        "unknown compression {:?}",
                        String::from_utf8_lossy(other)
                    ))
                }
            },
            _ => {
                c.skip()?;
            }
        }
    }
    Ok(())
}

/// Counts the `[time, record]` entries of a stream of them, checking their shape.
pub fn count_entries(buf: &[u8]) -> Result<usize, String> {
    let mut pos = 0;
    let mut n = 0usize;
    while pos < buf.len() {
        let bad = |what: String| format!("event {}: {what}", n + 1);
        let pair = header(&buf[pos..])
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("truncated".into()))?;
        if pair.kind != Kind::Array || pair.children != 2 {
            return Err(bad(format!(
                "{:?} of {}, not a [time, record] pair",
                pair.kind, pair.children
            )));
        }
        pos += pair.head;
        let time = header(&buf[pos..])
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("truncated".into()))?;
        if !matches!(
            time.kind,
            Kind::Int | Kind::Float | Kind::Ext(_) | Kind::Array
        ) {
            return Err(bad(format!("time is {:?}", time.kind)));
        }
        pos = skip_value(buf, pos).map_err(|e| bad(skip_reason(e, pos)))?;
        let record = header(&buf[pos..])
            .map_err(|e| bad(e.to_string()))?
            .ok_or_else(|| bad("truncated".into()))?;
        if record.kind != Kind::Map {
            return Err(bad(format!("record is {:?}, not a map", record.kind)));
        }
        pos = skip_value(buf, pos).map_err(|e| bad(skip_reason(e, pos)))?;
        n += 1;
    }
    Ok(n)
}

/// Decompresses gzip members back to back, refusing output over `limit` bytes.
pub fn gunzip(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity((data.len() * 4).min(limit));
    let mut dec = flate2::read::MultiGzDecoder::new(data).take(limit as u64 + 1);
    dec.read_to_end(&mut out)
        .map_err(|e| format!("gzip: {e}"))?;
    if out.len() > limit {
        return Err(format!(
            "gzip entries decompress to more than {limit} bytes"
        ));
    }
    Ok(out)
}

/// Entries at least this large are decompressed and counted off the async threads.
pub const BLOCKING_THRESHOLD: usize = 256 << 10;

impl Raw {
    /// Decompresses (CompressedPackedForward), counts the entries of the packed modes, checks
    /// `size`. `limit` bounds the decompressed size.
    pub fn finish(mut self, limit: usize) -> Result<Raw, String> {
        if self.mode == Mode::CompressedPackedForward {
            self.entries = Bytes::from(gunzip(&self.entries, limit)?);
        }
        let events = match self.events {
            Some(n) => n,
            None => count_entries(&self.entries)?,
        };
        self.events = Some(events);
        if let Some(size) = self.size {
            if size != events as u64 {
                return Err(format!("option size {size} but {events} events"));
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmpv::Value as V;

    fn enc(v: &V) -> Vec<u8> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, v).unwrap();
        out
    }

    fn event_time(s: u32, ns: u32) -> V {
        let mut b = s.to_be_bytes().to_vec();
        b.extend(ns.to_be_bytes());
        V::Ext(0, b)
    }

    fn rec(i: i64) -> V {
        V::Map(vec![
            (V::from("i"), V::from(i)),
            (
                V::from("nested"),
                V::Map(vec![(V::from("a"), V::Array(vec![V::from(1), V::Nil]))]),
            ),
            (V::from("bin"), V::Binary(vec![0, 255])),
        ])
    }

    fn entries(n: i64) -> Vec<V> {
        (0..n)
            .map(|i| {
                V::Array(vec![
                    if i % 2 == 0 {
                        V::from(1_700_000_000 + i)
                    } else {
                        event_time(1_700_000_000, i as u32)
                    },
                    rec(i),
                ])
            })
            .collect()
    }

    fn packed(es: &[V]) -> Vec<u8> {
        es.iter().flat_map(enc).collect()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn run(frame: &V) -> Result<Raw, String> {
        let bytes = Bytes::from(enc(frame));
        match parse(&bytes)? {
            Parsed::Keepalive => Err("keepalive".into()),
            Parsed::Events(raw) => raw.finish(1 << 20),
        }
    }

    fn decoded(raw: &Raw) -> Vec<V> {
        let mut r = &raw.entries[..];
        let mut out = Vec::new();
        while !r.is_empty() {
            out.push(rmpv::decode::read_value(&mut r).unwrap());
        }
        out
    }

    fn opt(pairs: &[(&str, V)]) -> V {
        V::Map(
            pairs
                .iter()
                .map(|(k, v)| (V::from(*k), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn message_mode() {
        let t = event_time(1_700_000_000, 123);
        let raw = run(&V::Array(vec![V::from("app.log"), t.clone(), rec(7)])).unwrap();
        assert_eq!(
            (raw.mode, raw.events, raw.chunk.as_deref()),
            (Mode::Message, Some(1), None)
        );
        assert_eq!(decoded(&raw), vec![V::Array(vec![t, rec(7)])]);
        let raw = run(&V::Array(vec![
            V::from("app.log"),
            V::from(1_700_000_000),
            rec(1),
            opt(&[("chunk", V::from("abc")), ("size", V::from(1))]),
        ]))
        .unwrap();
        assert_eq!(raw.chunk.as_deref(), Some("abc"));
        assert_eq!(
            decoded(&raw),
            vec![V::Array(vec![V::from(1_700_000_000), rec(1)])]
        );
    }

    #[test]
    fn forward_mode() {
        let es = entries(5);
        let raw = run(&V::Array(vec![
            V::from("t"),
            V::Array(es.clone()),
            opt(&[("chunk", V::from("c1"))]),
        ]))
        .unwrap();
        assert_eq!((raw.mode, raw.events), (Mode::Forward, Some(5)));
        assert_eq!(decoded(&raw), es);
        let raw = run(&V::Array(vec![V::from("t"), V::Array(vec![])])).unwrap();
        assert_eq!(raw.events, Some(0));
    }

    #[test]
    fn packed_forward_mode_is_the_bytes_received() {
        let es = entries(100);
        let body = packed(&es);
        let raw = run(&V::Array(vec![
            V::from("t"),
            V::Binary(body.clone()),
            opt(&[("size", V::from(100)), ("chunk", V::from("x"))]),
        ]))
        .unwrap();
        assert_eq!((raw.mode, raw.events), (Mode::PackedForward, Some(100)));
        assert_eq!(&raw.entries[..], &body[..]);
        // Entries as a str (what older clients send): the same.
        let mut frame = Vec::new();
        rmp::encode::write_array_len(&mut frame, 2).unwrap();
        rmp::encode::write_str(&mut frame, "t").unwrap();
        rmp::encode::write_str_len(&mut frame, body.len() as u32).unwrap();
        frame.extend_from_slice(&body);
        let frame = Bytes::from(frame);
        let Parsed::Events(raw) = parse(&frame).unwrap() else {
            panic!("keepalive")
        };
        let raw = raw.finish(1 << 20).unwrap();
        assert_eq!((raw.mode, raw.events), (Mode::PackedForward, Some(100)));
        assert_eq!(&raw.entries[..], &body[..]);
    }

    #[test]
    fn compressed_packed_forward_with_several_members() {
        let es = entries(50);
        let body = packed(&es);
        let mut gz = gzip(&body[..body.len() / 3]);
        gz.extend(gzip(&body[body.len() / 3..]));
        let raw = run(&V::Array(vec![
            V::from("t"),
            V::Binary(gz),
            opt(&[("compressed", V::from("gzip")), ("size", V::from(50))]),
        ]))
        .unwrap();
        assert_eq!(
            (raw.mode, raw.events),
            (Mode::CompressedPackedForward, Some(50))
        );
        assert_eq!(&raw.entries[..], &body[..]);
        // Not gzip, too large once decompressed.
        let bad = run(&V::Array(vec![
            V::from("t"),
            V::Binary(body.clone()),
            opt(&[("compressed", V::from("gzip"))]),
        ]));
        assert!(bad.unwrap_err().contains("gzip"));
        let bytes = Bytes::from(enc(&V::Array(vec![
            V::from("t"),
            V::Binary(gzip(&body)),
            opt(&[("compressed", V::from("gzip"))]),
        ])));
        let Parsed::Events(raw) = parse(&bytes).unwrap() else {
            panic!()
        };
        assert!(raw
            .finish(body.len() - 1)
            .unwrap_err()
            .contains("more than"));
    }

    #[test]
    fn keepalive_and_bad_shapes() {
        assert!(matches!(
            parse(&Bytes::from_static(&[0xc0])),
            Ok(Parsed::Keepalive)
        ));
        let cases: Vec<(V, &str)> = vec![
            (V::from(5), "not an array"),
            (V::Array(vec![V::from("t")]), "array of 1"),
            (
                V::Array(vec![V::from(1), V::from(2), V::Map(vec![])]),
                "tag is Int",
            ),
            (
                V::Array(vec![
                    V::Binary(vec![0xff, 0xfe]),
                    V::from(1),
                    V::Map(vec![]),
                ]),
                "UTF-8",
            ),
            (V::Array(vec![V::from("t"), V::from(1)]), "without a record"),
            (
                V::Array(vec![V::from("t"), V::from(1), V::from("x")]),
                "not a map",
            ),
            (
                V::Array(vec![V::from("t"), V::Nil, V::Map(vec![])]),
                "second element",
            ),
            (
                V::Array(vec![V::from("t"), V::Array(vec![V::from(1)])]),
                "not a [time, record]",
            ),
            (
                V::Array(vec![
                    V::from("t"),
                    V::Array(vec![V::Array(vec![V::from("x"), V::Map(vec![])])]),
                ]),
                "time is Str",
            ),
            (
                V::Array(vec![V::from("t"), V::Binary(vec![0x92, 0x01])]),
                "truncated",
            ),
            (
                V::Array(vec![
                    V::from("t"),
                    V::Binary(packed(&entries(3))),
                    opt(&[("size", V::from(4))]),
                ]),
                "size 4 but 3",
            ),
            (
                V::Array(vec![V::from("t"), V::Array(entries(1)), V::from(3)]),
                "option is Int",
            ),
            (
                V::Array(vec![V::from("t"), V::Array(entries(1)), V::Nil, V::Nil]),
                "4 elements",
            ),
            (
                V::Array(vec![
                    V::from("t"),
                    V::Array(entries(1)),
                    opt(&[("compressed", V::from("gzip"))]),
                ]),
                "compressed Forward",
            ),
            (
                V::Array(vec![
                    V::from("t"),
                    V::Binary(vec![]),
                    opt(&[("compressed", V::from("zstd"))]),
                ]),
                "unknown compression",
            ),
            (
                V::Array(vec![
                    V::from("t"),
                    V::Array(entries(1)),
                    opt(&[("chunk", V::Binary(vec![0xff]))]),
                ]),
                "chunk is not valid UTF-8",
            ),
        ];
        for (v, want) in cases {
            let err = run(&v).unwrap_err();
            assert!(err.contains(want), "{v:?}: {err}");
        }
    }

    #[test]
    fn other_options_are_ignored() {
        let raw = run(&V::Array(vec![
            V::from("t"),
            V::Binary(packed(&entries(2))),
            V::Map(vec![
                (V::from("fluent_signal"), V::from(0)),
                (V::from(5), V::Array(vec![V::from(1)])),
                (V::from("compressed"), V::from("text")),
                (V::from("chunk"), V::from("q")),
            ]),
        ]))
        .unwrap();
        assert_eq!(
            (raw.mode, raw.events, raw.chunk.as_deref()),
            (Mode::PackedForward, Some(2), Some("q"))
        );
        let raw = run(&V::Array(vec![
            V::from("t"),
            V::Binary(packed(&entries(2))),
            V::Nil,
        ]))
        .unwrap();
        assert_eq!(raw.events, Some(2));
    }
}
