//! Schema evolution end to end (issue 21): random sequences of records whose nested shapes
//! evolve go through the real import (`silt_ingest::jobs::import`, `WriterConfig` defaults)
//! into a lake, once as **one import** (the records split over one to three files of one run)
//! and once as **several imports** into one lake (two to four files, each its own run), for
//! Suricata EVE (`suricata`), Zeek JSON (`zeek`, with `_path`), NDJSON (`json`) and MessagePack
//! (`msgpack`). Then every record must come back from a SQL query (`silt_query`) with its values.
//!
//! What evolves (from a random *sketch* per top-level field): fields that appear late (absent
//! from the first records), null versus absent, structs nested up to three levels whose children
//! come and go and arrive in any order, integers that turn into floats, scalars that turn into
//! lists, lists of structs, and "wild" values of any kind (true conflicts). Reader batches are
//! small (1 to 8 rows) so shapes change between batches of one input as well as between inputs.
//!
//! ## The expected value model
//!
//! The rule book is `silt_core::schema` (module documentation): a column's type is the
//! unification of the types of all its values, and a value is kept under that type:
//!
//! - absent and `null` are null, and stay null (never a list, never text);
//! - `{}` and an object whose children are all null read as null too (Parquet has no empty
//!   groups, and a struct of nulls is what a missing struct reads as), but they are values: in
//!   a list column one may be a one-element list of it, in a text column its JSON text;
//! - an integer in a float column is that float (integers here stay within ±2^53, where a
//!   `Float64` holds them exactly: beyond that the int→float rule rounds, as documented);
//! - a scalar or struct in a list column is a one-element list (rule 5), also inside lists and
//!   structs;
//! - in a text column (rule 6, any other conflict) a string is itself and any other value is its
//!   text: the number or boolean as written, a struct or list as JSON. JSON text is compared by
//!   meaning (object keys in any order, `3` equals `3.0`, the rules above apply inside it),
//!   because the text is made from whatever shape a file had (a struct's fields widened in that
//!   file, say);
//! - struct children are matched by name, never by position.
//!
//! For EVE, JSON and MessagePack the column types must also be exactly the rule book's: the
//! unification (`silt_core::schema::unify_types`) of each value's type as the EVE inference
//! documents it (`null` and `{}` no type, integers `Int64`, other numbers `Float64`, strings
//! `Utf8`, arrays `List` of their elements, objects `Struct`), whatever the batches, files and
//! imports were; field order, nullability and metadata aside. Zeek JSON types unknown fields
//! per batch by its own documented rules (objects are JSON text; the registry knows `ts`), and
//! its nested records arrive flattened (`f1.a.b`), as Zeek writes them; there only the values
//! are checked.
//!
//! Besides: no record is rejected, no table fails, the summary counts every record, the query
//! returns each id exactly once and nothing but the fed columns (plus the format's own and the
//! partition columns), the time column holds each record's time, and a filter on the id finds
//! the same row as the full scan.
//!
//! Cases: a fixed seed and `tests/schema_evolution.proptest-regressions` (failures found
//! earlier, replayed first), so a run is reproducible. The deterministic tests at the end are
//! regressions of bugs this test found.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use arrow::record_batch::RecordBatch;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use serde_json::{Map, Number, Value as J};
use silt_core::schema::unify_types;
use silt_core::{FormatOptions, ReadOptions, TableName};
use silt_ingest::jobs::{self, ImportOutcome};
use silt_ingest::pipeline::Quiet;
use silt_ingest::{FormatChoice, Input, Pipeline, Reimport};
use silt_lake::WriterConfig;

// ------------------------------------------------------------------------------------ model

/// A generated value. `Obj(_, true)` is a record of a struct sketch (Zeek writes those
/// flattened into dotted names when they hang off the top level); `Obj(_, false)` is any other
/// object (a wild value), which every format writes as an object.
#[derive(Debug, Clone, PartialEq)]
enum V {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<V>),
    Obj(Vec<(String, V)>, bool),
}

impl V {
    fn json(&self) -> J {
        match self {
            V::Null => J::Null,
            V::Bool(b) => J::Bool(*b),
            V::Int(i) => J::from(*i),
            V::Float(f) => J::Number(Number::from_f64(*f).expect("finite")),
            V::Str(s) => J::String(s.clone()),
            V::List(l) => J::Array(l.iter().map(V::json).collect()),
            V::Obj(kv, _) => J::Object(kv.iter().map(|(k, v)| (k.clone(), v.json())).collect()),
        }
    }
}

/// How one field's values look over the whole sequence.
#[derive(Debug, Clone)]
enum Sketch {
    /// Integers and floats mixed (int -> float).
    Num,
    Int,
    Str,
    Bool,
    /// A single value or a list of them (scalar -> list; of a struct: list of structs).
    MaybeList(Box<Sketch>),
    /// A struct: each child absent, null or a value, children in any order.
    Obj(Vec<(String, Sketch)>),
    /// Anything at all (true conflicts).
    Wild,
}

const CHILDREN: [&str; 3] = ["a", "b", "c"];

fn sketch() -> impl Strategy<Value = Sketch> {
    let leaf = prop_oneof![
        3 => Just(Sketch::Num),
        2 => Just(Sketch::Int),
        2 => Just(Sketch::Str),
        1 => Just(Sketch::Bool),
        1 => Just(Sketch::Wild),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|s| Sketch::MaybeList(Box::new(s))),
            prop::collection::vec(inner, 1..=3).prop_map(|cs| {
                Sketch::Obj(
                    cs.into_iter()
                        .zip(CHILDREN)
                        .map(|(s, n)| (n.to_string(), s))
                        .collect(),
                )
            }),
        ]
    })
}

/// Integers: mostly small, some up to ±2^53 (exact in a Float64).
fn int() -> BoxedStrategy<V> {
    prop_oneof![
        4 => -50i64..50,
        1 => -(1i64 << 53)..=(1i64 << 53),
    ]
    .prop_map(V::Int)
    .boxed()
}

/// Floats that are never integral and exact in binary (so text round trips are exact).
fn float() -> BoxedStrategy<V> {
    (-4000i64..4000)
        .prop_map(|k| V::Float(k as f64 * 0.5 + 0.25))
        .boxed()
}

fn string() -> BoxedStrategy<V> {
    "[a-z]{0,3}".prop_map(V::Str).boxed()
}

fn wild() -> BoxedStrategy<V> {
    let leaf = prop_oneof![
        Just(V::Null),
        any::<bool>().prop_map(V::Bool),
        int(),
        float(),
        string(),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..=3).prop_map(V::List),
            prop::collection::vec((prop_oneof![Just("x"), Just("y")], inner), 0..=2).prop_map(
                |kv| {
                    let mut m: Vec<(String, V)> = Vec::new();
                    for (k, v) in kv {
                        if !m.iter().any(|(n, _)| n == k) {
                            m.push((k.to_string(), v));
                        }
                    }
                    V::Obj(m, false)
                }
            ),
        ]
    })
    .boxed()
}

/// One value of a sketch (never null at this level; callers add null and absence).
fn value(s: &Sketch) -> BoxedStrategy<V> {
    match s {
        Sketch::Num => prop_oneof![int(), float()].boxed(),
        Sketch::Int => int(),
        Sketch::Str => string(),
        Sketch::Bool => any::<bool>().prop_map(V::Bool).boxed(),
        Sketch::Wild => wild(),
        Sketch::MaybeList(inner) => {
            let one = value(inner);
            let item = prop_oneof![1 => Just(V::Null), 5 => one.clone()];
            prop_oneof![
                2 => one,
                3 => prop::collection::vec(item, 0..=3).prop_map(V::List),
            ]
            .boxed()
        }
        Sketch::Obj(children) => {
            let parts: Vec<BoxedStrategy<Option<(String, V)>>> = children
                .iter()
                .map(|(n, s)| {
                    let n1 = n.clone();
                    let n2 = n.clone();
                    prop_oneof![
                        1 => Just(None),
                        1 => Just(Some((n1, V::Null))),
                        4 => value(s).prop_map(move |v| Some((n2.clone(), v))),
                    ]
                    .boxed()
                })
                .collect();
            parts
                .prop_map(|kv| kv.into_iter().flatten().collect::<Vec<_>>())
                .prop_shuffle()
                .prop_map(|kv| V::Obj(kv, true))
                .boxed()
        }
    }
}

/// A field of one record: absent, null, or a value.
fn slot(s: &Sketch) -> BoxedStrategy<Option<V>> {
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(V::Null)),
        5 => value(s).prop_map(Some),
    ]
    .boxed()
}

/// One record as generated: its fields (absent ones left out) in the order it lists them, and
/// its time as seconds after 2024-03-01T00:00:00Z plus microseconds.
#[derive(Debug, Clone)]
struct Rec {
    rid: String,
    secs: u32,
    micros: u32,
    fields: Vec<(String, V)>,
}

/// 2024-03-01T00:00:00Z in Unix seconds.
const BASE: i64 = 1_709_251_200;

impl Rec {
    fn ts_us(&self) -> i64 {
        (BASE + self.secs as i64) * 1_000_000 + self.micros as i64
    }

    /// `2024-03-03T05:06:07.000123` (no offset).
    fn iso(&self) -> String {
        let (d, s) = (self.secs / 86_400, self.secs % 86_400);
        format!(
            "2024-03-{:02}T{:02}:{:02}:{:02}.{:06}",
            1 + d,
            s / 3600,
            s / 60 % 60,
            s % 60,
            self.micros
        )
    }

    fn get(&self, name: &str) -> Option<&V> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fmt {
    Eve,
    Zeek,
    Json,
    Msgpack,
}

impl Fmt {
    fn format(self) -> &'static str {
        match self {
            Fmt::Eve => "suricata",
            Fmt::Zeek => "zeek",
            Fmt::Json => "json",
            Fmt::Msgpack => "msgpack",
        }
    }

    fn table(self) -> TableName {
        match self {
            Fmt::Eve => TableName::new("suricata", "evolve"),
            Fmt::Zeek => TableName::new("zeek", "evolve"),
            // `<format>.<file stem>`: every input file is named `ev.<ext>`.
            Fmt::Json => TableName::new("json", "ev"),
            Fmt::Msgpack => TableName::new("msgpack", "ev"),
        }
    }

    fn file_name(self) -> &'static str {
        match self {
            Fmt::Eve => "eve.json",
            Fmt::Zeek => "evolve.log",
            Fmt::Json => "ev.json",
            Fmt::Msgpack => "ev.msgpack",
        }
    }

    fn time_column(self) -> &'static str {
        match self {
            Fmt::Eve => "timestamp",
            _ => "ts",
        }
    }

    /// Columns the format adds itself.
    fn own_columns(self) -> &'static [&'static str] {
        match self {
            Fmt::Eve => &["event_type"],
            _ => &[],
        }
    }

    /// The record as the format writes it.
    fn object(self, r: &Rec) -> Map<String, J> {
        let mut m = Map::new();
        match self {
            Fmt::Eve => {
                m.insert("timestamp".into(), J::String(format!("{}+0000", r.iso())));
                m.insert("event_type".into(), J::String("evolve".into()));
            }
            Fmt::Zeek => {
                m.insert("_path".into(), J::String("evolve".into()));
                m.insert("ts".into(), J::String(format!("{}Z", r.iso())));
            }
            Fmt::Json | Fmt::Msgpack => {
                m.insert("ts".into(), J::String(format!("{}Z", r.iso())));
            }
        }
        m.insert("rid".into(), J::String(r.rid.clone()));
        for (k, v) in &r.fields {
            match (self, v) {
                // Zeek's JSON writer flattens records into dotted names and leaves out unset
                // fields (a null record has no keys at all).
                (Fmt::Zeek, V::Obj(_, true) | V::Null) => flatten(k, v, &mut m),
                _ => {
                    m.insert(k.clone(), v.json());
                }
            }
        }
        m
    }

    fn encode(self, recs: &[Rec]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in recs {
            let o = J::Object(self.object(r));
            match self {
                Fmt::Msgpack => out.extend(rmp_serde::to_vec(&o).expect("msgpack")),
                _ => {
                    out.extend(serde_json::to_vec(&o).expect("json"));
                    out.push(b'\n');
                }
            }
        }
        out
    }
}

fn flatten(prefix: &str, v: &V, m: &mut Map<String, J>) {
    match v {
        V::Null => {}
        V::Obj(kv, true) => {
            for (k, c) in kv {
                flatten(&format!("{prefix}.{k}"), c, m);
            }
        }
        other => {
            m.insert(prefix.to_string(), other.json());
        }
    }
}

/// One generated case: the format, the records, how (a) and (b) split them, reader batch rows.
#[derive(Debug, Clone)]
struct Case {
    fmt: Fmt,
    recs: Vec<Rec>,
    /// Cut points of the one import's files (1 to 3 files).
    one: Vec<usize>,
    /// Cut points of the several imports (2 to 4 files, one run each).
    many: Vec<usize>,
    batch_rows: usize,
}

fn case(fmt: Fmt) -> impl Strategy<Value = Case> {
    (prop::collection::vec(sketch(), 1..=4), 2usize..=28)
        .prop_flat_map(move |(sketches, n)| {
            let names: Vec<String> = (0..sketches.len()).map(|i| format!("f{i}")).collect();
            let rows: Vec<BoxedStrategy<Vec<Option<V>>>> = (0..n)
                .map(|_| sketches.iter().map(slot).collect::<Vec<_>>().boxed())
                .collect();
            (
                Just(names),
                rows,
                prop::collection::vec(0..n, sketches.len()),
                prop::collection::vec((0u32..3 * 86_400, 0u32..1_000_000), n),
                prop::collection::vec(any::<u64>(), n),
                prop::collection::vec(0..=n, 0..=2),
                prop::collection::vec(0..=n, 1..=3),
                1usize..=8,
            )
        })
        .prop_map(
            move |(names, rows, starts, times, orders, one, many, batch_rows)| {
                let recs = rows
                    .into_iter()
                    .zip(times)
                    .zip(orders)
                    .enumerate()
                    .map(|(i, ((row, (secs, micros)), order))| {
                        let mut fields: Vec<(String, V)> = row
                            .into_iter()
                            .zip(&names)
                            .zip(&starts)
                            // A field appears late: absent before its start.
                            .filter(|(_, &start)| i >= start)
                            .filter_map(|((v, n), _)| v.map(|v| (n.clone(), v)))
                            .collect();
                        // The record lists its fields in an order of its own.
                        fields.sort_by_key(|(n, _)| {
                            (order.rotate_left(n.len() as u32 * 7 + n.as_bytes()[1] as u32)) % 1009
                        });
                        Rec {
                            rid: format!("r{i:03}"),
                            secs,
                            micros,
                            fields,
                        }
                    })
                    .collect();
                let sorted = |mut v: Vec<usize>| {
                    v.sort();
                    v
                };
                Case {
                    fmt,
                    recs,
                    one: sorted(one),
                    many: sorted(many),
                    batch_rows,
                }
            },
        )
}

// ----------------------------------------------------------------------------- import, query

/// Splits `recs` at `cuts` (empty pieces left out) and writes each piece to `dir/pN/<file>`.
fn write_parts(fmt: Fmt, recs: &[Rec], cuts: &[usize], dir: &Path) -> Vec<(PathBuf, usize)> {
    let mut bounds = vec![0];
    bounds.extend(cuts.iter().copied());
    bounds.push(recs.len());
    let mut out = Vec::new();
    for (i, w) in bounds.windows(2).enumerate() {
        if w[0] >= w[1] {
            continue;
        }
        let d = dir.join(format!("p{i}"));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join(fmt.file_name());
        std::fs::write(&f, fmt.encode(&recs[w[0]..w[1]])).unwrap();
        out.push((f, w[1] - w[0]));
    }
    out
}

fn import(fmt: Fmt, files: &[PathBuf], lake: &Path, batch_rows: usize) -> ImportOutcome {
    let spec = silt_ingest::registry::require(fmt.format()).unwrap();
    let pipeline = Pipeline::new(
        FormatChoice::Fixed(spec),
        FormatOptions::new(ReadOptions { batch_rows }),
    );
    let inputs = files.iter().map(|f| Input::File(f.clone())).collect();
    jobs::import(
        inputs,
        pipeline,
        lake,
        WriterConfig::default(),
        Reimport::Skip,
        &mut Quiet,
    )
    .unwrap_or_else(|e| panic!("import {files:?}: {e:#}"))
}

/// The import wrote every record of `files` into `table` and nothing failed.
fn check_outcome(o: &ImportOutcome, table: &TableName, records: usize) -> Result<(), String> {
    let s = &o.summary;
    let failed: Vec<_> = s.failed_tables().map(|(t, f)| (t, &f.error)).collect();
    if !failed.is_empty() {
        return Err(format!("tables failed: {failed:?}"));
    }
    if s.total_rejects() > 0 {
        return Err(format!("rejects: {:?}", s.sample_rejects));
    }
    if !o.skipped.is_empty() {
        return Err(format!("inputs skipped: {:?}", o.skipped));
    }
    let t = s
        .tables
        .get(table)
        .ok_or_else(|| format!("no {table} in the summary: {:?}", s.tables.keys()))?;
    if t.events != records as u64 || t.rows_written != records as u64 {
        return Err(format!(
            "{table}: {} events, {} rows written, {records} records fed",
            t.events, t.rows_written
        ));
    }
    if s.tables.len() != 1 {
        return Err(format!("other tables: {:?}", s.tables.keys()));
    }
    Ok(())
}

/// Every row of a query result as (column name -> JSON value), with the time column as UTC
/// microseconds.
fn rows(batches: &[RecordBatch]) -> Vec<BTreeMap<String, J>> {
    let mut out = Vec::new();
    for b in batches {
        for i in 0..b.num_rows() {
            let mut row = BTreeMap::new();
            for (f, c) in b.schema().fields().iter().zip(b.columns()) {
                row.insert(f.name().clone(), cell(c.as_ref(), i));
            }
            out.push(row);
        }
    }
    out
}

/// One Arrow value as JSON (every type these tables can have; a timestamp as microseconds).
fn cell(a: &dyn Array, i: usize) -> J {
    if a.is_null(i) {
        return J::Null;
    }
    match a.data_type() {
        DataType::Null => J::Null,
        DataType::Boolean => J::Bool(a.as_boolean().value(i)),
        DataType::Int64 => J::from(a.as_primitive::<arrow::datatypes::Int64Type>().value(i)),
        DataType::UInt64 => J::from(a.as_primitive::<arrow::datatypes::UInt64Type>().value(i)),
        DataType::Float64 => J::Number(
            Number::from_f64(a.as_primitive::<arrow::datatypes::Float64Type>().value(i))
                .expect("finite"),
        ),
        DataType::Timestamp(TimeUnit::Microsecond, _) => J::from(
            a.as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(i),
        ),
        DataType::Utf8 => J::String(a.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => J::String(a.as_string::<i64>().value(i).to_string()),
        DataType::Utf8View => J::String(a.as_string_view().value(i).to_string()),
        DataType::Dictionary(_, _) => {
            let d = a.as_any_dictionary();
            let k = d.normalized_keys()[i];
            cell(d.values().as_ref(), k)
        }
        DataType::List(_) => {
            let v = a.as_list::<i32>().value(i);
            J::Array((0..v.len()).map(|j| cell(v.as_ref(), j)).collect())
        }
        DataType::LargeList(_) => {
            let v = a.as_list::<i64>().value(i);
            J::Array((0..v.len()).map(|j| cell(v.as_ref(), j)).collect())
        }
        DataType::Struct(fields) => {
            let s = a.as_struct();
            J::Object(
                fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| (f.name().clone(), cell(c.as_ref(), i)))
                    .collect(),
            )
        }
        t => panic!("no JSON form for {t}"),
    }
}

fn sql_table(t: &TableName) -> String {
    format!("\"{}\".\"{}\"", t.module(), t.name())
}

/// Queries the lake and checks every record (see the module documentation).
fn check_lake(
    rt: &tokio::runtime::Runtime,
    lake: &Path,
    c: &Case,
    what: &str,
) -> Result<(), String> {
    let fmt = c.fmt;
    let table = fmt.table();
    rt.block_on(async {
        let s = silt_query::open(lake).await.map_err(|e| format!("{e:#}"))?;
        if !s.warnings().is_empty() {
            return Err(format!("lake warnings: {:?}", s.warnings()));
        }
        let q = |sql: String| {
            let s = &s;
            async move {
                s.query(&sql)
                    .await
                    .map_err(|e| format!("{what}: {sql}: {e:#}"))
            }
        };
        let all = q(format!("SELECT * FROM {}", sql_table(&table))).await?;
        let got = rows(&all.batches);
        if got.len() != c.recs.len() {
            return Err(format!(
                "{what}: {} rows for {} records",
                got.len(),
                c.recs.len()
            ));
        }
        let mut by_rid: HashMap<String, &BTreeMap<String, J>> = HashMap::new();
        for r in &got {
            let rid = r.get("rid").and_then(J::as_str).unwrap_or_default();
            if by_rid.insert(rid.to_string(), r).is_some() {
                return Err(format!("{what}: id {rid:?} twice"));
            }
        }
        // Nothing but the fed columns, the format's own and partition columns.
        let fed: Vec<&str> = c
            .recs
            .iter()
            .flat_map(|r| r.fields.iter().map(|(n, _)| n.as_str()))
            .collect();
        for f in all.schema.fields() {
            let n = f.name().as_str();
            let known = n == "rid"
                || n == fmt.time_column()
                || fmt.own_columns().contains(&n)
                || ["dt", "hour", "month"].contains(&n)
                || fed.contains(&n)
                // Zeek writes a record's fields flattened (`f1.a`); one that cannot nest into
                // its parent's column (a list there) stays a column of that name.
                || (fmt == Fmt::Zeek
                    && fed
                        .iter()
                        .any(|f| n.strip_prefix(f).is_some_and(|r| r.starts_with('.'))));
            if !known {
                return Err(format!("{what}: unexpected column {n} ({})", f.data_type()));
            }
        }
        for rec in &c.recs {
            let row = by_rid
                .get(&rec.rid)
                .ok_or_else(|| format!("{what}: record {} is missing", rec.rid))?;
            check_row(fmt, rec, row, &all.schema).map_err(|e| format!("{what}: {e}"))?;
        }
        // For EVE, JSON and MessagePack the types are the rule book's.
        if fmt != Fmt::Zeek {
            for (name, want) in expected_types(&c.recs) {
                let got = all
                    .schema
                    .field_with_name(&name)
                    .map_err(|_| format!("{what}: no column {name}"))?;
                if !same_type(got.data_type(), &want) {
                    return Err(format!(
                        "{what}: column {name} is {} but the rules give {want}",
                        got.data_type()
                    ));
                }
            }
        }
        // A filter on the id finds the same row (predicates over evolved files).
        for rec in c.recs.iter().step_by(c.recs.len().div_ceil(3)) {
            let one = q(format!(
                "SELECT * FROM {} WHERE rid = '{}'",
                sql_table(&table),
                rec.rid
            ))
            .await?;
            let one = rows(&one.batches);
            if one.len() != 1 || &one[0] != by_rid[&rec.rid] {
                return Err(format!(
                    "{what}: WHERE rid = '{}' gave {one:?}, the scan {:?}",
                    rec.rid, by_rid[&rec.rid]
                ));
            }
        }
        Ok(())
    })
}

fn check_row(
    fmt: Fmt,
    rec: &Rec,
    row: &BTreeMap<String, J>,
    schema: &arrow::datatypes::SchemaRef,
) -> Result<(), String> {
    let ts = row.get(fmt.time_column()).and_then(J::as_i64);
    if ts != Some(rec.ts_us()) {
        return Err(format!(
            "{}: time {ts:?}, fed {} ({})",
            rec.rid,
            rec.ts_us(),
            rec.iso()
        ));
    }
    // Zeek: a flattened field that could not nest into its parent's column (`f1.a` beside a list
    // column `f1`) is read back into its parent's value.
    let unflat;
    let row = if fmt == Fmt::Zeek {
        let J::Object(m) = unflatten(J::Object(row.clone().into_iter().collect())) else {
            unreachable!("an object stays an object")
        };
        unflat = m.into_iter().collect::<BTreeMap<String, J>>();
        &unflat
    } else {
        row
    };
    for f in schema.fields() {
        let n = f.name().as_str();
        if n == "rid" || n == fmt.time_column() || fmt.own_columns().contains(&n) {
            continue;
        }
        if fmt == Fmt::Zeek && !row.contains_key(n) {
            // Merged into its parent above.
            continue;
        }
        if ["dt", "hour", "month"].contains(&n) {
            continue;
        }
        let fed = rec.get(n).map(V::json).unwrap_or(J::Null);
        let got = row.get(n).cloned().unwrap_or(J::Null);
        if !equiv(&fed, &got) {
            return Err(format!(
                "{}: column {n} ({}) holds {got}, fed {fed}",
                rec.rid,
                f.data_type()
            ));
        }
    }
    // A fed field with no column at all must have been null.
    for (n, v) in &rec.fields {
        if schema.field_with_name(n).is_err() && !null_like(&v.json()) {
            return Err(format!(
                "{}: field {n} = {} has no column",
                rec.rid,
                v.json()
            ));
        }
    }
    Ok(())
}

/// Moves the non-null values of dotted keys (`a.b`) into the object of their parent key (`a`)
/// when that is null or an object, at every depth; a dotted key whose parent holds another value
/// stays as it is.
fn unflatten(v: J) -> J {
    let J::Object(m) = v else {
        return v;
    };
    let mut out = Map::new();
    let mut dotted = Vec::new();
    for (k, v) in m {
        let v = unflatten(v);
        if k.contains('.') {
            dotted.push((k, v));
        } else {
            out.insert(k, v);
        }
    }
    for (k, v) in dotted {
        let (head, rest) = k.split_once('.').expect("dotted");
        match out.get_mut(head) {
            _ if v.is_null() => {}
            Some(J::Object(o)) => {
                o.insert(rest.to_string(), v);
            }
            Some(p @ J::Null) => {
                *p = J::Object(Map::from_iter([(rest.to_string(), v)]));
            }
            None => {
                out.insert(
                    head.to_string(),
                    J::Object(Map::from_iter([(rest.to_string(), v)])),
                );
            }
            Some(_) => {
                out.insert(k, v);
            }
        }
    }
    // A parent rebuilt from dotted keys may itself hold dotted keys.
    let rebuilt: Map<String, J> = out.into_iter().map(|(k, v)| (k, unflatten(v))).collect();
    J::Object(rebuilt)
}

// ------------------------------------------------------------------------------ value model

/// Absent, null, `{}` and objects of nulls are one value: null.
fn null_like(v: &J) -> bool {
    match v {
        J::Null => true,
        J::Object(m) => m.values().all(null_like),
        _ => false,
    }
}

/// Whether `got` (read back) holds `fed` under the rules of the module documentation.
fn equiv(fed: &J, got: &J) -> bool {
    // A null stays null: never a list, never text.
    if fed.is_null() {
        return null_like(got);
    }
    // `{}` and objects of nulls read as null, but they are values (an object: a struct of
    // nulls, or JSON text where objects are text), so rules 5 and 6 apply to them below.
    if null_like(fed) && null_like(got) {
        return true;
    }
    let direct = match (fed, got) {
        (J::String(a), J::String(b)) => a == b,
        // Rule 6: any other value in a text column is its text.
        // (std's float parsing, which is correctly rounded: serde_json's fast path may be one
        // unit in the last place off for 17 digits.)
        (J::Number(a), J::String(s)) if s.parse::<f64>().is_ok() => {
            a.as_f64() == s.parse::<f64>().ok()
        }
        (f, J::String(s)) => serde_json::from_str::<J>(s).is_ok_and(|p| equiv(f, &p)),
        (J::Bool(a), J::Bool(b)) => a == b,
        (J::Number(a), J::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => x == y,
            // Int -> float widening (exact within ±2^53).
            _ => a.as_f64() == b.as_f64(),
        },
        (J::Array(a), J::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equiv(x, y))
        }
        (J::Object(a), J::Object(b)) => a
            .keys()
            .chain(b.keys())
            .all(|k| equiv(a.get(k).unwrap_or(&J::Null), b.get(k).unwrap_or(&J::Null))),
        _ => false,
    };
    // Rule 5: a single value in a list column is a one-element list.
    direct || matches!(got, J::Array(b) if b.len() == 1 && equiv(fed, &b[0]))
}

/// The type EVE inference gives one value (`silt_readers::json::infer`'s documented rules).
fn infer(v: &J) -> DataType {
    match v {
        J::Null => DataType::Null,
        J::Bool(_) => DataType::Boolean,
        J::Number(n) if n.is_i64() => DataType::Int64,
        J::Number(n) if n.is_u64() => DataType::UInt64,
        J::Number(_) => DataType::Float64,
        J::String(_) => DataType::Utf8,
        J::Array(a) => {
            let item = a
                .iter()
                .fold(DataType::Null, |t, e| unify_types(&t, &infer(e)));
            DataType::List(Arc::new(Field::new("item", item, true)))
        }
        J::Object(m) if m.is_empty() => DataType::Null,
        J::Object(m) => DataType::Struct(
            m.iter()
                .map(|(k, v)| Field::new(k, infer(v), true))
                .collect::<Fields>(),
        ),
    }
}

/// Each fed field's type by the rule book: the unification of all its values' types.
fn expected_types(recs: &[Rec]) -> BTreeMap<String, DataType> {
    let mut out: BTreeMap<String, DataType> = BTreeMap::new();
    for r in recs {
        for (n, v) in &r.fields {
            let t = infer(&v.json());
            let e = out.entry(n.clone()).or_insert(DataType::Null);
            *e = unify_types(e, &t);
        }
    }
    out
}

/// Type equality up to struct child order, nullability, field metadata and list item names.
fn same_type(a: &DataType, b: &DataType) -> bool {
    use DataType::*;
    match (a, b) {
        (Struct(fa), Struct(fb)) => {
            fa.len() == fb.len()
                && fa.iter().all(|f| {
                    fb.iter()
                        .find(|g| g.name() == f.name())
                        .is_some_and(|g| same_type(f.data_type(), g.data_type()))
                })
        }
        (List(ea), List(eb)) => same_type(ea.data_type(), eb.data_type()),
        (Utf8 | Utf8View | LargeUtf8, Utf8 | Utf8View | LargeUtf8) => true,
        _ => a == b,
    }
}

// ------------------------------------------------------------------------------------ tests

/// Runs one case: (a) one import of all its files, (b) one import per file into one lake.
fn run_case(rt: &tokio::runtime::Runtime, c: &Case) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let table = c.fmt.table();

    let one_files = write_parts(c.fmt, &c.recs, &c.one, &dir.path().join("one"));
    let lake_one = dir.path().join("lake-one");
    let paths: Vec<PathBuf> = one_files.iter().map(|(p, _)| p.clone()).collect();
    let o = import(c.fmt, &paths, &lake_one, c.batch_rows);
    check_outcome(&o, &table, c.recs.len()).map_err(|e| format!("one import: {e}"))?;
    check_lake(rt, &lake_one, c, "one import")?;

    let many_files = write_parts(c.fmt, &c.recs, &c.many, &dir.path().join("many"));
    let lake_many = dir.path().join("lake-many");
    for (i, (f, n)) in many_files.iter().enumerate() {
        let o = import(c.fmt, std::slice::from_ref(f), &lake_many, c.batch_rows);
        check_outcome(&o, &table, *n).map_err(|e| format!("import {} of several: {e}", i + 1))?;
    }
    check_lake(rt, &lake_many, c, "several imports")
}

fn config(cases: u32, seed: u64) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        // Each case imports and queries twice; shrinking a failure may take a while, not forever.
        max_shrink_iters: 200,
        ..Config::default()
    }
}

/// Cases per format: enough to meet every rule, few enough for a debug run well under a minute.
const CASES: u32 = 64;

fn property(fmt: Fmt, seed: u64) {
    let rt = silt_query::runtime().unwrap();
    proptest::proptest!(config(CASES, seed), |(c in case(fmt))| {
        if let Err(e) = run_case(&rt, &c) {
            proptest::prop_assert!(false, "{}", e);
        }
    });
}

#[test]
fn evolving_eve_records_are_all_queryable() {
    property(Fmt::Eve, 0x5117_0001);
}

#[test]
fn evolving_zeek_json_records_are_all_queryable() {
    property(Fmt::Zeek, 0x5117_0002);
}

#[test]
fn evolving_ndjson_records_are_all_queryable() {
    property(Fmt::Json, 0x5117_0003);
}

#[test]
fn evolving_msgpack_records_are_all_queryable() {
    property(Fmt::Msgpack, 0x5117_0004);
}
