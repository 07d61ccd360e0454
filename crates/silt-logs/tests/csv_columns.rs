//! The columnar path of CSV/TSV (`silt_logs::text_columns`, the default) against the `Value`
//! path (`DelimitedDecoder::use_columns(false)`): on random documents, fed in random pieces with
//! flushes between some of them, both give the same output event for event: the same batches
//! (schemas with their metadata, field types and nullability, values), the same rejects (line,
//! reason, raw bytes) and the same bytes per table, in the same order.
//!
//! Documents: CSV (`,` or `;`) or TSV, with a header (names repeated, empty, padded, time
//! candidates, sometimes `_unparsed`) or without; columns whose values mix a few kinds (empty,
//! booleans, integers including `-0`, leading zeros and out-of-range ones, numbers including
//! infinite ones, ISO times valid or not, epoch times, text with delimiters, quotes, newlines
//! and non-ASCII, invalid UTF-8 and halves of one character), so that types change from batch to
//! batch (`batch_rows` of 1 to 6); rows with a field too many or too few, blank lines, CRLF;
//! `--time-field` naming a column or none, `--time-unit`.

use proptest::prelude::*;

use arrow::record_batch::RecordBatch;
use silt_core::{Decoder, Emit, ReadOptions, Reject, SourceInfo, TableName};
use silt_logs::delimited::DelimitedDecoder;
use silt_logs::{LogFormat, LogOptions, TimeUnit};

#[derive(Debug, PartialEq)]
enum Event {
    Batch(TableName, RecordBatch),
    Reject(Reject),
    Bytes(TableName, u64),
}

#[derive(Default)]
struct Record(Vec<Event>);

impl Emit for Record {
    fn batch(&mut self, t: &TableName, b: RecordBatch) -> anyhow::Result<()> {
        self.0.push(Event::Batch(t.clone(), b));
        Ok(())
    }
    fn reject(&mut self, r: Reject) -> anyhow::Result<()> {
        self.0.push(Event::Reject(r));
        Ok(())
    }
    fn table_bytes(&mut self, t: &TableName, bytes: u64) {
        self.0.push(Event::Bytes(t.clone(), bytes));
    }
}

/// Values by kind.
const KINDS: &[&[&[u8]]] = &[
    &[b""],
    &[b"true", b"FALSE", b"True", b""],
    &[
        b"0",
        b"-0",
        b"1",
        b"42",
        b"-17",
        b"9223372036854775807",
        b"-9223372036854775808",
        b"9223372036854775808",
        b"123456789012345678901",
        b"007",
        b"",
    ],
    &[
        b"1.5", b"-2.25", b"1e3", b"2E-2", b"0.1", b"-0.0", b"1.", b"3.0e+2", b"0.5", b"1e400",
        b"1.2.3", b"-.5",
    ],
    &[
        b"2020-01-01T00:00:00Z",
        b"2020-01-02 00:00:00",
        b"2024-03-24T17:00:00.123456789+01:00",
        b"2020-13-01T00:00:00Z",
        b" 2020-01-01T00:00:00Z",
    ],
    &[
        b"1711299600.000",
        b"1711299600123",
        b"1711299600",
        b"-1.5",
        b"1e9",
    ],
    &[
        b"abc",
        b"a,b",
        b"a;b",
        b"say \"hi\"",
        b"two\nlines",
        b"cr\r\nlf",
        b" 1",
        b"\xc3\xa9t\xc3\xa9",
        b"10.0.0.1",
        b"null",
        b"{\"a\":1}",
        b"\"",
    ],
    &[b"\xff", b"x\xc3", b"\xa9y", b"\xc3", b"\xa9"],
];

const NAMES: &[&str] = &[
    "ts",
    "time",
    "timestamp",
    "a",
    "b",
    "a_2",
    "",
    " c ",
    "x",
    "y",
    "z",
    "date",
    "_unparsed",
];

#[derive(Debug, Clone)]
struct Row {
    /// The field count change: -1, 0 or +1.
    change: i8,
    /// Per field, the kind (of the column's kinds) and the value (of the kind's values).
    picks: Vec<(usize, usize)>,
    /// A blank line before the row.
    blank: bool,
    crlf: bool,
}

#[derive(Debug, Clone)]
struct Doc {
    format: LogFormat,
    delimiter: Option<u8>,
    no_header: bool,
    names: Vec<usize>,
    /// Per column, the kinds its values are drawn from.
    kinds: Vec<Vec<usize>>,
    rows: Vec<Row>,
    final_newline: bool,
    time_field: Option<&'static str>,
    unit: Option<TimeUnit>,
    batch_rows: usize,
    /// Piece sizes, and whether the decoder is flushed after the piece.
    pieces: Vec<(usize, bool)>,
}

fn doc() -> impl Strategy<Value = Doc> {
    let cols = 1usize..6;
    cols.prop_flat_map(|k| {
        let kind_set = prop::collection::vec(
            prop_oneof![
                3 => 0..KINDS.len() - 1,
                1 => Just(KINDS.len() - 1),
            ],
            1..3,
        );
        let pick = (0usize..8, 0usize..64);
        let row = (
            prop_oneof![10 => Just(0i8), 1 => Just(-1i8), 1 => Just(1i8)],
            prop::collection::vec(pick, k + 1),
            prop::bool::weighted(0.1),
            any::<bool>(),
        )
            .prop_map(|(change, picks, blank, crlf)| Row {
                change,
                picks,
                blank,
                crlf,
            });
        (
            prop_oneof![
                2 => Just((LogFormat::Csv, None)),
                1 => Just((LogFormat::Csv, Some(b';'))),
                1 => Just((LogFormat::Tsv, None)),
            ],
            prop::bool::weighted(0.2),
            prop::collection::vec(0..NAMES.len(), k),
            prop::collection::vec(kind_set, k),
            prop::collection::vec(row, 0..30),
            any::<bool>(),
            prop_oneof![
                4 => Just(None),
                1 => Just(Some("a")),
                1 => Just(Some("nope")),
            ],
            prop_oneof![3 => Just(None), 1 => Just(Some(TimeUnit::Seconds))],
            1usize..7,
            prop::collection::vec((1usize..200, prop::bool::weighted(0.2)), 1..8),
        )
    })
    .prop_map(
        |(
            (format, delimiter),
            no_header,
            names,
            kinds,
            rows,
            final_newline,
            time_field,
            unit,
            batch_rows,
            pieces,
        )| Doc {
            format,
            delimiter,
            no_header,
            names,
            kinds,
            rows,
            final_newline,
            time_field,
            unit,
            batch_rows,
            pieces,
        },
    )
}

fn field(out: &mut Vec<u8>, v: &[u8], doc: &Doc, quote: bool) {
    if doc.format == LogFormat::Tsv {
        // No quoting: a field cannot hold a tab or a line end.
        out.extend(v.iter().map(|&c| match c {
            b'\t' | b'\n' | b'\r' => b' ',
            c => c,
        }));
        return;
    }
    let delim = doc.delimiter.unwrap_or(b',');
    let needs = v
        .iter()
        .any(|&c| matches!(c, b'"' | b'\n' | b'\r') || c == delim);
    if needs || quote {
        out.push(b'"');
        for &c in v {
            if c == b'"' {
                out.push(b'"');
            }
            out.push(c);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(v);
    }
}

fn text(doc: &Doc) -> Vec<u8> {
    let delim = match doc.format {
        LogFormat::Tsv => b'\t',
        _ => doc.delimiter.unwrap_or(b','),
    };
    let k = doc.names.len();
    let mut out = Vec::new();
    if !doc.no_header {
        for (i, &n) in doc.names.iter().enumerate() {
            if i > 0 {
                out.push(delim);
            }
            field(&mut out, NAMES[n].as_bytes(), doc, false);
        }
        out.push(b'\n');
    }
    for (r, row) in doc.rows.iter().enumerate() {
        let eol: &[u8] = if row.crlf { b"\r\n" } else { b"\n" };
        if row.blank {
            out.extend_from_slice(eol);
        }
        let n = (k as isize + row.change as isize).max(1) as usize;
        for (c, &(kind, value)) in row.picks.iter().take(n).enumerate() {
            if c > 0 {
                out.push(delim);
            }
            let set = &doc.kinds[c.min(k - 1)];
            let values = KINDS[set[kind % set.len()]];
            field(&mut out, values[value % values.len()], doc, value % 7 == 0);
        }
        let last = r + 1 == doc.rows.len();
        if !last || doc.final_newline {
            out.extend_from_slice(eol);
        }
    }
    out
}

fn decode(doc: &Doc, data: &[u8], columns: bool) -> Vec<Event> {
    let lo = LogOptions {
        time_field: doc.time_field.map(str::to_string),
        time_unit: doc.unit,
        delimiter: doc.delimiter,
        no_header: doc.no_header,
        ..LogOptions::default()
    };
    let ro = ReadOptions {
        batch_rows: doc.batch_rows,
    };
    let source = SourceInfo {
        display: "t.csv".into(),
        file_name: Some("t.csv".into()),
    };
    let mut d = DelimitedDecoder::new(doc.format, &source, &ro, &lo).unwrap();
    d.use_columns(columns);
    let mut out = Record::default();
    let mut rest = data;
    for &(n, flush) in doc.pieces.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, r) = rest.split_at(n.min(rest.len()));
        rest = r;
        d.feed(piece, &mut out).unwrap();
        if flush {
            d.flush(&mut out).unwrap();
        }
    }
    d.finish(&mut out).unwrap();
    out.0
}

fn assert_same(doc: &Doc) {
    let data = text(doc);
    let old = decode(doc, &data, false);
    let new = decode(doc, &data, true);
    let shown = String::from_utf8_lossy(&data);
    assert_eq!(old.len(), new.len(), "{shown}\n{old:#?}\n{new:#?}");
    for (a, b) in old.iter().zip(&new) {
        if let (Event::Batch(_, x), Event::Batch(_, y)) = (a, b) {
            // Field metadata and nullability included (`Schema` equality compares them), and
            // spelled out for a readable failure.
            assert_eq!(x.schema(), y.schema(), "{shown}");
            for (f, g) in x.schema().fields().iter().zip(y.schema().fields()) {
                assert_eq!(f.metadata(), g.metadata(), "{shown}");
                assert_eq!(f.is_nullable(), g.is_nullable(), "{shown}");
            }
            for (c, d) in x.columns().iter().zip(y.columns()) {
                assert_eq!(c.to_data(), d.to_data(), "{shown}");
            }
        }
        assert_eq!(a, b, "{shown}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]
    #[test]
    fn columns_give_what_values_give(doc in doc()) {
        assert_same(&doc);
    }
}

/// A hand-picked document: types that change between batches (integers, then numbers, then
/// booleans in one column), `-0` as an integer and as a number, times that do not parse
/// (`_unparsed`), invalid UTF-8 (also as the halves of one character in two fields, which
/// together would be valid), a wrong field count, and a column that is null in a whole batch.
#[test]
fn known_document() {
    let mut data: Vec<u8> = b"ts,n,b,s,e\n".to_vec();
    data.extend_from_slice(b"1711299600.000,1,true,x,\n");
    data.extend_from_slice(b"1711299600.001,-0,false,\"y,z\",\n");
    data.extend_from_slice(b"yesterday,-0,TRUE,10.0.0.1,\n");
    data.extend_from_slice(b",2.5,1,\"q\"\"\",\n");
    data.extend_from_slice(b"2024-03-24T17:00:00Z,3,,\xc3,\xa9\n");
    data.extend_from_slice(b"1711299600,3,,\xc3\xa9,1\n");
    data.extend_from_slice(b"1711299600,only three,fields\n");
    data.extend_from_slice(b"1711299600,true,2020-01-01 00:00:00,,\n");
    for batch_rows in [1, 2, 3, 100] {
        let doc = Doc {
            format: LogFormat::Csv,
            delimiter: None,
            no_header: false,
            names: vec![],
            kinds: vec![],
            rows: vec![],
            final_newline: true,
            time_field: None,
            unit: None,
            batch_rows,
            pieces: vec![(7, false), (13, true)],
        };
        let old = decode(&doc, &data, false);
        let new = decode(&doc, &data, true);
        assert_eq!(old, new, "batch_rows {batch_rows}");
        let rejects: Vec<u64> = new
            .iter()
            .filter_map(|e| match e {
                Event::Reject(r) => Some(r.line),
                _ => None,
            })
            .collect();
        assert_eq!(rejects, [6, 8], "batch_rows {batch_rows}");
    }
}
