//! Zeek types, their Arrow representation, and the column builders both Zeek readers fill.
//!
//! Mapping (fixed for silt, see `docs/zeek.md`): bool -> Boolean, count -> Int64 (at most
//! 2^63 - 1, see [`count_value`]), int -> Int64,
//! double -> Float64, time -> Timestamp(us, UTC), interval -> Decimal128(18, 6) seconds,
//! string/enum/file/pattern/func -> Utf8, addr/subnet -> Utf8 (canonical text), port -> UInt16,
//! set[T]/vector[T]/table[T] -> List<T> (item field `item`). Every field is nullable and carries
//! its Zeek type string in the field metadata `silt.source_type`.
//!
//! The builders ([`Col`]) are hand-written rather than arrow's `ArrayBuilder`s because the readers
//! need to roll a half-parsed line back ([`Col::truncate`]) when one of its fields turns out to be
//! bad: a line is all-or-nothing. Plain `Vec`s also turn into Arrow buffers without a copy.
//!
//! Strings: [`canon_into`] produces silt's one canonical in-lake text for Zeek strings, the text
//! Zeek's own JSON writer produces for the same bytes (see the function for the rule).
//!
//! This module touches nothing but the values handed to it.

/// Precision and scale of interval columns: seconds with Zeek's six decimals.
pub const INTERVAL_PRECISION: u8 = 18;
pub const INTERVAL_SCALE: i8 = 6;

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::builder::{BooleanBufferBuilder, NullBufferBuilder};
use arrow::array::{
    ArrayRef, BooleanArray, Decimal128Array, Float64Array, Int64Array, ListArray, NullArray,
    RecordBatch, RecordBatchOptions, StringArray, StructArray, TimestampMicrosecondArray,
    UInt16Array,
};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use silt_core::{meta, TableName};

/// A Zeek type as far as storage is concerned. `enum`, `file`, `pattern`, `func` and any type name
/// silt does not know are all [`ZType::String`]; the exact Zeek name is kept separately as the
/// field's `silt.source_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZType {
    Bool,
    Count,
    Int,
    Double,
    Time,
    Interval,
    String,
    Addr,
    Subnet,
    Port,
    /// `set[T]`, `vector[T]` or Bro 2.x `table[T]`; `T` is never a container.
    List(Box<ZType>),
    /// Not a Zeek type: a JSON field of an unknown log never seen with a value (Arrow `Null`,
    /// which silt-core's unification lets any later type replace).
    Null,
}

impl ZType {
    /// Parses a Zeek type name as written in a `#types` header. Never fails: an unknown scalar
    /// name is a string (its text is kept as is), and a container of containers (which Zeek's
    /// ASCII writer cannot log anyway) is treated as one string.
    pub fn parse(s: &str) -> ZType {
        let s = s.trim();
        for prefix in ["set[", "vector[", "table["] {
            if let Some(inner) = s.strip_prefix(prefix).and_then(|r| r.strip_suffix(']')) {
                let inner = inner.trim();
                if inner.contains('[') {
                    return ZType::String;
                }
                return ZType::List(Box::new(Self::parse_scalar(inner)));
            }
        }
        Self::parse_scalar(s)
    }

    fn parse_scalar(s: &str) -> ZType {
        match s {
            "bool" => ZType::Bool,
            // `counter` is Bro 1.x/2.x's name for a count.
            "count" | "counter" => ZType::Count,
            "int" => ZType::Int,
            "double" => ZType::Double,
            "time" => ZType::Time,
            "interval" => ZType::Interval,
            "addr" => ZType::Addr,
            "subnet" => ZType::Subnet,
            "port" => ZType::Port,
            _ => ZType::String,
        }
    }

    /// The Arrow type silt stores this Zeek type as.
    pub fn arrow(&self) -> DataType {
        match self {
            ZType::Bool => DataType::Boolean,
            ZType::Count => DataType::Int64,
            ZType::Int => DataType::Int64,
            ZType::Double => DataType::Float64,
            // Exact: Zeek writes intervals with six decimals; DECIMAL(18,6) keeps them exactly, is
            // read as a decimal by DuckDB, Spark, Trino and Athena, and stores as INT64 (half the
            // size of a double's noisy mantissa after compression).
            ZType::Interval => DataType::Decimal128(INTERVAL_PRECISION, INTERVAL_SCALE),
            ZType::Time => silt_core::time::timestamp_type(),
            ZType::String | ZType::Addr | ZType::Subnet => DataType::Utf8,
            ZType::Port => DataType::UInt16,
            ZType::List(t) => DataType::List(Arc::new(Field::new("item", t.arrow(), true))),
            ZType::Null => DataType::Null,
        }
    }

    /// A short name for messages (`port`, `vector[addr]`).
    pub fn name(&self) -> String {
        match self {
            ZType::Bool => "bool".into(),
            ZType::Count => "count".into(),
            ZType::Int => "int".into(),
            ZType::Double => "double".into(),
            ZType::Time => "time".into(),
            ZType::Interval => "interval".into(),
            ZType::String => "string".into(),
            ZType::Addr => "addr".into(),
            ZType::Subnet => "subnet".into(),
            ZType::Port => "port".into(),
            ZType::List(t) => format!("vector[{}]", t.name()),
            ZType::Null => "null".into(),
        }
    }
}

/// One column being built: validity plus typed values.
#[derive(Debug)]
pub struct Col {
    nulls: NullBufferBuilder,
    data: Data,
}

#[derive(Debug)]
enum Data {
    Bool(BooleanBufferBuilder),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Ts(Vec<i64>),
    /// Interval in microseconds (Decimal128(18, 6) seconds).
    Dec(Vec<i64>),
    U16(Vec<u16>),
    Str {
        offsets: Vec<i32>,
        bytes: Vec<u8>,
    },
    List {
        offsets: Vec<i32>,
        item: Box<Col>,
    },
    Null,
}

impl Col {
    /// An empty column for values of type `t`.
    pub fn new(t: &ZType, capacity: usize) -> Col {
        let data = match t {
            ZType::Bool => Data::Bool(BooleanBufferBuilder::new(capacity)),
            ZType::Count => Data::I64(Vec::with_capacity(capacity)),
            ZType::Int => Data::I64(Vec::with_capacity(capacity)),
            ZType::Double => Data::F64(Vec::with_capacity(capacity)),
            ZType::Interval => Data::Dec(Vec::with_capacity(capacity)),
            ZType::Time => Data::Ts(Vec::with_capacity(capacity)),
            ZType::Port => Data::U16(Vec::with_capacity(capacity)),
            ZType::String | ZType::Addr | ZType::Subnet => {
                let mut offsets = Vec::with_capacity(capacity + 1);
                offsets.push(0);
                Data::Str {
                    offsets,
                    bytes: Vec::with_capacity(capacity * 8),
                }
            }
            ZType::List(inner) => {
                let mut offsets = Vec::with_capacity(capacity + 1);
                offsets.push(0);
                Data::List {
                    offsets,
                    item: Box::new(Col::new(inner, capacity)),
                }
            }
            ZType::Null => Data::Null,
        };
        Col {
            nulls: NullBufferBuilder::new(capacity),
            data,
        }
    }

    /// Number of values (null or not).
    pub fn len(&self) -> usize {
        self.nulls.len()
    }

    /// Whether the column holds no value yet.
    pub fn is_empty(&self) -> bool {
        self.nulls.is_empty()
    }

    /// Drops every value from index `len` on (rolls back a half-parsed line), including string
    /// bytes or list elements appended for a value that was never committed.
    pub fn truncate(&mut self, len: usize) {
        if len > self.len() {
            return;
        }
        if len < self.len() {
            self.nulls.truncate(len);
        }
        match &mut self.data {
            Data::Bool(v) => v.truncate(len),
            Data::I64(v) | Data::Ts(v) | Data::Dec(v) => v.truncate(len),
            Data::F64(v) => v.truncate(len),
            Data::U16(v) => v.truncate(len),
            Data::Str { offsets, bytes } => {
                offsets.truncate(len + 1);
                bytes.truncate(offsets[len] as usize);
            }
            Data::List { offsets, item } => {
                offsets.truncate(len + 1);
                let keep = offsets[len] as usize;
                item.truncate(keep);
            }
            Data::Null => {}
        }
    }

    /// Appends a null.
    pub fn push_null(&mut self) {
        self.nulls.append_null();
        match &mut self.data {
            Data::Bool(v) => v.append(false),
            Data::I64(v) | Data::Ts(v) | Data::Dec(v) => v.push(0),
            Data::F64(v) => v.push(0.0),
            Data::U16(v) => v.push(0),
            Data::Str { offsets, bytes } => offsets.push(bytes.len() as i32),
            Data::List { offsets, item } => offsets.push(item.len() as i32),
            Data::Null => {}
        }
    }

    #[inline(always)]
    pub fn push_bool(&mut self, b: bool) {
        if let Data::Bool(v) = &mut self.data {
            v.append(b);
            self.nulls.append_non_null();
        } else {
            unreachable!("push_bool on a non-bool column")
        }
    }

    #[inline(always)]
    pub fn push_i64(&mut self, x: i64) {
        match &mut self.data {
            Data::I64(v) | Data::Ts(v) | Data::Dec(v) => {
                v.push(x);
                self.nulls.append_non_null();
            }
            _ => unreachable!("push_i64 on a non-int/time column"),
        }
    }

    #[inline(always)]
    pub fn push_f64(&mut self, x: f64) {
        if let Data::F64(v) = &mut self.data {
            v.push(x);
            self.nulls.append_non_null();
        } else {
            unreachable!("push_f64 on a non-double column")
        }
    }

    #[inline(always)]
    pub fn push_u16(&mut self, x: u16) {
        if let Data::U16(v) = &mut self.data {
            v.push(x);
            self.nulls.append_non_null();
        } else {
            unreachable!("push_u16 on a non-port column")
        }
    }

    /// The byte buffer of a string column: append the value's bytes to it, then call
    /// [`Col::str_commit`] (or [`Col::str_abort`] to drop what was appended).
    #[inline(always)]
    pub fn str_bytes(&mut self) -> &mut Vec<u8> {
        match &mut self.data {
            Data::Str { bytes, .. } => bytes,
            _ => unreachable!("str_bytes on a non-string column"),
        }
    }

    /// Ends the string value appended to [`Col::str_bytes`].
    #[inline(always)]
    pub fn str_commit(&mut self) {
        if let Data::Str { offsets, bytes } = &mut self.data {
            offsets.push(bytes.len() as i32);
            self.nulls.append_non_null();
        }
    }

    /// Drops bytes appended to [`Col::str_bytes`] since the last value.
    pub fn str_abort(&mut self) {
        if let Data::Str { offsets, bytes } = &mut self.data {
            bytes.truncate(*offsets.last().unwrap_or(&0) as usize);
        }
    }

    /// Appends a complete string value.
    #[inline(always)]
    pub fn push_str(&mut self, s: &[u8]) {
        extend_short(self.str_bytes(), s);
        self.str_commit();
    }

    /// The element column of a list column: append the elements to it, then call
    /// [`Col::list_commit`].
    #[inline(always)]
    pub fn list_item(&mut self) -> &mut Col {
        match &mut self.data {
            Data::List { item, .. } => item,
            _ => unreachable!("list_item on a non-list column"),
        }
    }

    /// Length of the element column (to roll back a partly appended list).
    pub fn list_mark(&self) -> usize {
        match &self.data {
            Data::List { offsets, .. } => *offsets.last().unwrap_or(&0) as usize,
            _ => 0,
        }
    }

    /// Ends the list whose elements were appended to [`Col::list_item`].
    #[inline(always)]
    pub fn list_commit(&mut self) {
        if let Data::List { offsets, item } = &mut self.data {
            offsets.push(item.len() as i32);
            self.nulls.append_non_null();
        }
    }

    /// Bytes held by string data (including in list elements); readers emit a batch early when
    /// this grows large so that 32-bit Arrow offsets never overflow.
    pub fn heavy_bytes(&self) -> usize {
        match &self.data {
            Data::Str { bytes, .. } => bytes.len(),
            Data::List { item, .. } => item.heavy_bytes(),
            _ => 0,
        }
    }

    /// Turns the values into an Arrow array of `t.arrow()` and leaves the column empty.
    pub fn finish(&mut self, t: &ZType) -> ArrayRef {
        let len = self.len();
        let nulls = self.nulls.finish();
        // The buffers go to Arrow without a copy; the next batch starts with buffers of this
        // batch's size (an eighth more, for text that runs a little longer), so that it does
        // not grow them again from nothing. A buffer that holds much less than its capacity (a
        // stream's or a block's last batch, a batch whose text doubled its buffer) is copied
        // to its size first: the sink counts capacity against its memory budget, and a budget
        // filled by empty capacity made it cut sorted files early (9 files instead of 1 for a
        // generated dns log decoded in blocks, `silt_core::split`).
        fn take<T>(v: &mut Vec<T>) -> Vec<T> {
            let len = v.len();
            let mut out = std::mem::replace(v, Vec::with_capacity(len + len / 8));
            if out.capacity() > len + len / 2 + 64 {
                out.shrink_to_fit();
            }
            out
        }
        match (&mut self.data, t) {
            (Data::Bool(v), _) => Arc::new(BooleanArray::new(v.finish(), nulls)),
            (Data::I64(v), _) => Arc::new(Int64Array::new(ScalarBuffer::from(take(v)), nulls)),
            (Data::Dec(v), _) => {
                let values: Vec<i128> = take(v).into_iter().map(i128::from).collect();
                Arc::new(
                    Decimal128Array::new(ScalarBuffer::from(values), nulls)
                        .with_precision_and_scale(INTERVAL_PRECISION, INTERVAL_SCALE)
                        .expect("valid decimal precision and scale"),
                )
            }
            (Data::Ts(v), _) => Arc::new(
                TimestampMicrosecondArray::new(ScalarBuffer::from(take(v)), nulls)
                    .with_timezone("UTC"),
            ),
            (Data::F64(v), _) => Arc::new(Float64Array::new(ScalarBuffer::from(take(v)), nulls)),
            (Data::U16(v), _) => Arc::new(UInt16Array::new(ScalarBuffer::from(take(v)), nulls)),
            (Data::Str { offsets, bytes }, _) => {
                let mut offs = take(offsets);
                offsets.push(0);
                if offs.is_empty() {
                    offs.push(0);
                }
                let bytes = take(bytes);
                // Offsets come from our own monotonic pushes and the bytes are canonical UTF-8;
                // the checked constructor still verifies both (cheap next to parsing).
                Arc::new(
                    StringArray::try_new(
                        OffsetBuffer::new(ScalarBuffer::from(offs)),
                        Buffer::from_vec(bytes),
                        nulls,
                    )
                    .expect("string column: canonical text is valid UTF-8"),
                )
            }
            (Data::List { offsets, item }, ZType::List(inner)) => {
                let mut offs = take(offsets);
                offsets.push(0);
                if offs.is_empty() {
                    offs.push(0);
                }
                let values = item.finish(inner);
                let field = Arc::new(Field::new("item", inner.arrow(), true));
                Arc::new(
                    ListArray::try_new(
                        field,
                        OffsetBuffer::new(ScalarBuffer::from(offs)),
                        values,
                        nulls,
                    )
                    .expect("list column offsets are consistent"),
                )
            }
            (Data::List { .. }, _) => unreachable!("list column finished with a scalar type"),
            (Data::Null, _) => Arc::new(NullArray::new(len)),
        }
    }
}

/// Writes the canonical in-lake text of the string `b` (raw bytes after format escapes were
/// decoded) to `out`. The rule is the one of Zeek's JSON writer (`json_escape_utf8`), so that the
/// TSV and the JSON log of the same traffic store identical strings:
/// - printable ASCII and the five "printable controls" `\b \f \n \r \t` are kept as they are;
/// - every other control byte (0x00-0x1f, 0x7f) becomes the four characters `\xNN` (lower-case hex);
/// - well-formed UTF-8 multi-byte characters are kept;
/// - each byte of an ill-formed UTF-8 sequence becomes `\xNN`.
///
/// The result is always valid UTF-8, and applying the rule to its own output changes nothing.
pub fn canon_into(b: &[u8], out: &mut Vec<u8>) {
    if is_plain(b) {
        extend_short(out, b);
        return;
    }
    for chunk in b.utf8_chunks() {
        for &c in chunk.valid().as_bytes() {
            if (c < 0x20 && !matches!(c, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d)) || c == 0x7f {
                push_hex_escape(c, out);
            } else {
                out.push(c);
            }
        }
        for &c in chunk.invalid() {
            push_hex_escape(c, out);
        }
    }
}

/// `v.extend_from_slice(s)` tuned for the short values of log fields: fixed-size 8-byte copies
/// compile to plain moves, where a variable-length copy is a call into libc's memmove (which
/// showed up at ~9% of the TSV profile).
#[inline(always)]
pub fn extend_short(v: &mut Vec<u8>, s: &[u8]) {
    if s.len() > 64 {
        v.extend_from_slice(s);
        return;
    }
    v.reserve(s.len());
    let (chunks, tail) = s.as_chunks::<8>();
    for c in chunks {
        v.extend_from_slice(c);
    }
    for &b in tail {
        v.push(b);
    }
}

/// True if every byte is printable ASCII (the common case: copy as is).
#[inline]
pub fn is_plain(b: &[u8]) -> bool {
    b.iter().all(|&c| c.wrapping_sub(0x20) < 0x5f)
}

fn push_hex_escape(c: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(&[b'\\', b'x', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
}

/// Canonical text of an address written into `out`; false if `s` is not an address.
/// IPv4 in its canonical dotted-quad form (what Zeek writes) is checked and copied without
/// building an `IpAddr` (this is on every conn.log row twice); anything else goes through
/// [`silt_core::addr::canonical_addr_into`].
#[inline]
pub fn addr_into(s: &[u8], out: &mut Vec<u8>) -> bool {
    if is_canonical_ipv4(s) {
        extend_short(out, s);
        return true;
    }
    silt_core::addr::canonical_addr_into(s, out)
}

/// `a.b.c.d` with each part 0..=255 in decimal without leading zeros.
#[inline(always)]
fn is_canonical_ipv4(s: &[u8]) -> bool {
    let n = s.len();
    if !(7..=15).contains(&n) {
        return false;
    }
    let mut i = 0;
    for part in 0..4 {
        let start = i;
        let mut v: u32 = 0;
        while i < n && i - start < 3 {
            let d = s[i].wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            v = v * 10 + d as u32;
            i += 1;
        }
        let len = i - start;
        if len == 0 || v > 255 || (len > 1 && s[start] == b'0') {
            return false;
        }
        if part < 3 {
            if i >= n || s[i] != b'.' {
                return false;
            }
            i += 1;
        }
    }
    i == n
}

/// Parses unsigned decimal digits (no sign, no spaces). Hand-written rather than
/// `str::parse` because the field is raw bytes (no UTF-8 check needed) and this runs for most
/// fields of every TSV row.
#[inline(always)]
/// A Zeek `count` as stored: counts are written as signed 64-bit integers, the type Spark,
/// Trino, Athena and DuckDB all read as BIGINT (an unsigned INT64 reads as `decimal(20,0)` in
/// Spark). A count above 2^63 - 1 (no real counter gets there; it is a corrupt or sentinel value)
/// is an error, so its line goes to the rejects with this reason instead of being altered.
pub fn count_value(v: u64) -> Result<i64, String> {
    i64::try_from(v).map_err(|_| {
        format!(
            "count {v} is above 9223372036854775807 (2^63 - 1), the largest count silt stores (counts are \
             signed 64-bit so that Spark, Trino and Athena read them as BIGINT; docs/zeek.md)"
        )
    })
}

#[inline(always)]
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    if s.len() < 20 {
        // 19 digits cannot overflow: no checked arithmetic on the hot path.
        for &c in s {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + d as u64;
        }
        return Some(v);
    }
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Parses an optionally signed decimal integer.
#[inline]
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let m = parse_u64(digits)?;
    if neg {
        if m == 1 << 63 {
            Some(i64::MIN)
        } else {
            i64::try_from(m).ok().map(|v| -v)
        }
    } else {
        i64::try_from(m).ok()
    }
}

/// Parses a double as Zeek writes it (`3.14`, `-0.5`, `1e+308`, `inf`, `nan`).
#[inline]
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// One output column: its full Zeek name (`id.orig_h`), type and Zeek type string.
#[derive(Debug, Clone)]
pub struct LeafSpec {
    pub name: String,
    pub ztype: ZType,
    pub source_type: String,
}

/// How flat Zeek columns become a (possibly nested) Arrow schema, and how finished leaf arrays
/// are put together into a [`RecordBatch`].
///
/// Nesting rule: a name with dots (`id.orig_h`) becomes a struct path (`id` struct with child
/// `orig_h`), recursively, placed where the first member of the struct appears. When a name is
/// both a leaf and a prefix of others at the same level (Corelight's `logs.conn.entries` and
/// `logs.conn.entries.per-second`), the leaf keeps the plain name (`entries`) and the others stay
/// flat leaves named with the rest of their dotted name (`entries.per-second`) at that level. A
/// name with an empty component (`a..b`, `.a`, `a.`) is not split. Structs are never null; their
/// children are.
#[derive(Debug, Clone)]
pub struct Layout {
    schema: SchemaRef,
    nodes: Vec<Node>,
    /// Leaf specs in input order (index = leaf index).
    pub leaves: Vec<LeafSpec>,
}

#[derive(Debug, Clone)]
enum Node {
    Leaf(usize),
    Group(Fields, Vec<Node>),
}

/// The columns that get a bloom filter when present (`silt.lookup_columns`), in this order.
const LOOKUP_CANDIDATES: [&str; 5] = ["uid", "fuid", "community_id", "id.orig_h", "id.resp_h"];

impl Layout {
    /// Builds the schema of table `table` from leaves in column order. Fails on a duplicate
    /// column name.
    pub fn new(table: &TableName, leaves: Vec<LeafSpec>) -> Result<Layout, String> {
        let mut seen = HashMap::with_capacity(leaves.len());
        for (i, l) in leaves.iter().enumerate() {
            if let Some(j) = seen.insert(l.name.as_str(), i) {
                return Err(format!(
                    "column {:?} appears twice (fields {} and {})",
                    l.name,
                    j + 1,
                    i + 1
                ));
            }
        }
        let entries: Vec<(Vec<&str>, usize)> = leaves
            .iter()
            .enumerate()
            .map(|(i, l)| (split_name(&l.name), i))
            .collect();
        let (fields, nodes) = build_level(&entries, &leaves);
        let mut md = HashMap::new();
        md.insert(meta::TABLE.to_string(), table.to_string());
        if leaves
            .iter()
            .any(|l| l.name == "ts" && l.ztype == ZType::Time)
        {
            md.insert(meta::TIME_COLUMN.to_string(), "ts".to_string());
        }
        let lookups: Vec<&str> = LOOKUP_CANDIDATES
            .iter()
            .copied()
            .filter(|c| seen.contains_key(c))
            .collect();
        if !lookups.is_empty() {
            md.insert(meta::LOOKUP_COLUMNS.to_string(), lookups.join(","));
        }
        Ok(Layout {
            schema: Arc::new(Schema::new_with_metadata(fields, md)),
            nodes,
            leaves,
        })
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Assembles one batch from the finished leaf arrays (indexed like [`Layout::leaves`]).
    pub fn assemble(
        &self,
        mut leaves: Vec<Option<ArrayRef>>,
        rows: usize,
    ) -> arrow::error::Result<RecordBatch> {
        let cols = self
            .nodes
            .iter()
            .map(|n| assemble_node(n, &mut leaves))
            .collect::<arrow::error::Result<Vec<_>>>()?;
        let opts = RecordBatchOptions::new().with_row_count(Some(rows));
        RecordBatch::try_new_with_options(self.schema.clone(), cols, &opts)
    }
}

fn assemble_node(n: &Node, leaves: &mut [Option<ArrayRef>]) -> arrow::error::Result<ArrayRef> {
    match n {
        Node::Leaf(i) => Ok(leaves[*i].take().expect("each leaf is assembled once")),
        Node::Group(fields, children) => {
            let arrays = children
                .iter()
                .map(|c| assemble_node(c, leaves))
                .collect::<arrow::error::Result<Vec<_>>>()?;
            Ok(Arc::new(StructArray::try_new(
                fields.clone(),
                arrays,
                None,
            )?))
        }
    }
}

fn split_name(name: &str) -> Vec<&str> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        vec![name]
    } else {
        parts
    }
}

fn leaf_field(name: &str, spec: &LeafSpec) -> FieldRef {
    let mut md = HashMap::new();
    md.insert(meta::SOURCE_TYPE.to_string(), spec.source_type.clone());
    Arc::new(Field::new(name, spec.ztype.arrow(), true).with_metadata(md))
}

fn build_level(entries: &[(Vec<&str>, usize)], specs: &[LeafSpec]) -> (Fields, Vec<Node>) {
    // Group by first component, in order of first appearance.
    let mut order: Vec<&str> = Vec::new();
    let mut groups: HashMap<&str, Vec<(Vec<&str>, usize)>> = HashMap::new();
    for (parts, i) in entries {
        let head = parts[0];
        let g = groups.entry(head).or_insert_with(|| {
            order.push(head);
            Vec::new()
        });
        g.push((parts[1..].to_vec(), *i));
    }
    let mut fields: Vec<FieldRef> = Vec::new();
    let mut nodes = Vec::new();
    for head in order {
        let members = &groups[head];
        let has_leaf = members.iter().any(|(rest, _)| rest.is_empty());
        if has_leaf {
            // A plain leaf, possibly with flat dotted siblings (leaf-also-prefix rule).
            for (rest, i) in members {
                let name = if rest.is_empty() {
                    head.to_string()
                } else {
                    format!("{head}.{}", rest.join("."))
                };
                fields.push(leaf_field(&name, &specs[*i]));
                nodes.push(Node::Leaf(*i));
            }
        } else {
            let (child_fields, child_nodes) = build_level(members, specs);
            fields.push(Arc::new(Field::new(
                head,
                DataType::Struct(child_fields.clone()),
                true,
            )));
            nodes.push(Node::Group(child_fields, child_nodes));
        }
    }
    (Fields::from(fields), nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(b: &[u8]) -> String {
        let mut out = Vec::new();
        canon_into(b, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn canonical_strings_follow_zeeks_json_writer() {
        assert_eq!(canon(b"plain"), "plain");
        assert_eq!(canon(b"\x08\x0c\n\r\t\x00\x15"), "\x08\x0c\n\r\t\\x00\\x15");
        assert_eq!(canon("ñ".as_bytes()), "ñ");
        assert_eq!(canon(b"\xc3("), "\\xc3(");
        assert_eq!(canon(b"\xe0\x80\xa1"), "\\xe0\\x80\\xa1");
        assert_eq!(canon(b"\xf0\x90(\xbc"), "\\xf0\\x90(\\xbc");
        assert_eq!(canon(b"\xed\xa0\xa1"), "\\xed\\xa0\\xa1");
        assert_eq!(canon(b"\x7f"), "\\x7f");
        // Idempotent.
        let once = canon(b"a\x00\xff\n");
        assert_eq!(canon(once.as_bytes()), once);
    }

    #[test]
    fn ipv4_fast_path() {
        let mut out = Vec::new();
        assert!(addr_into(b"10.0.0.1", &mut out));
        assert!(addr_into(b"255.255.255.255", &mut out));
        assert!(!is_canonical_ipv4(b"010.0.0.1"));
        assert!(!is_canonical_ipv4(b"1.2.3"));
        assert!(!is_canonical_ipv4(b"1.2.3.4.5"));
        assert!(!is_canonical_ipv4(b"256.1.1.1"));
        assert!(!is_canonical_ipv4(b"1..2.3"));
        assert!(!is_canonical_ipv4(b"1.2.3.4444"));
        assert!(!is_canonical_ipv4(b"1.2.3.4."));
        assert!(!is_canonical_ipv4(b"1.2.3.04"));
        assert!(is_canonical_ipv4(b"0.0.0.0"));
        // Agrees with the standard library on every short dotted string of these characters.
        let alphabet = b"0125.";
        let mut buf = Vec::new();
        for n in 7..=9u32 {
            for code in 0..alphabet.len().pow(n) {
                buf.clear();
                let mut c = code;
                for _ in 0..n {
                    buf.push(alphabet[c % alphabet.len()]);
                    c /= alphabet.len();
                }
                let s = std::str::from_utf8(&buf).unwrap();
                let std_ok = s
                    .parse::<std::net::Ipv4Addr>()
                    .is_ok_and(|a| a.to_string() == s);
                assert_eq!(is_canonical_ipv4(&buf), std_ok, "{s}");
            }
        }
        assert!(addr_into(
            b"2a03:b0c0:0002:00d0:0000:0000:0a7c:7001",
            &mut out
        ));
        assert!(!addr_into(b"nope", &mut out));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "10.0.0.1255.255.255.2552a03:b0c0:2:d0::a7c:7001"
        );
    }

    #[test]
    fn integers() {
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1a"), None);
        assert_eq!(parse_i64(b"-42"), Some(-42));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-"), None);
    }

    #[test]
    fn type_names() {
        assert_eq!(
            ZType::parse("set[addr]"),
            ZType::List(Box::new(ZType::Addr))
        );
        assert_eq!(
            ZType::parse("table[enum]"),
            ZType::List(Box::new(ZType::String))
        );
        assert_eq!(
            ZType::parse("vector[interval]"),
            ZType::List(Box::new(ZType::Interval))
        );
        assert_eq!(ZType::parse("vector[vector[count]]"), ZType::String);
        assert_eq!(ZType::parse("pattern"), ZType::String);
        assert_eq!(ZType::parse("counter"), ZType::Count);
    }

    #[test]
    fn nesting_and_leaf_prefix_rule() {
        let spec = |n: &str| LeafSpec {
            name: n.into(),
            ztype: ZType::Count,
            source_type: "count".into(),
        };
        let names = [
            "ts",
            "id.orig_h",
            "x",
            "id.resp_h",
            "a.b",
            "a.b.c",
            "a.d",
            "e..f",
        ];
        let l = Layout::new(
            &TableName::new("zeek", "t"),
            names.iter().map(|n| spec(n)).collect(),
        )
        .unwrap();
        let s = l.schema();
        let top: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(top, ["ts", "id", "x", "a", "e..f"]);
        let DataType::Struct(id) = s.field(1).data_type() else {
            panic!()
        };
        assert_eq!(
            id.iter().map(|f| f.name().as_str()).collect::<Vec<_>>(),
            ["orig_h", "resp_h"]
        );
        let DataType::Struct(a) = s.field(3).data_type() else {
            panic!()
        };
        assert_eq!(
            a.iter().map(|f| f.name().as_str()).collect::<Vec<_>>(),
            ["b", "b.c", "d"]
        );
        assert_eq!(
            s.metadata().get(meta::LOOKUP_COLUMNS).unwrap(),
            "id.orig_h,id.resp_h"
        );
        assert!(Layout::new(&TableName::new("zeek", "t"), vec![spec("a"), spec("a")]).is_err());
    }
}
