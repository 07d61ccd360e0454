//! [`Enricher`]: the [`silt_core::Transform`] that adds ASN / geo / reverse-DNS columns next to
//! address columns, and [`EnrichHandle`], which swaps the [`Databases`] of a running enricher.
//!
//! Touches only the batches it is given and its own cache; lookups go to the [`Databases`] it
//! holds. Per batch: each address column's values are parsed from their bytes, looked up in a
//! cache of address -> result (a hashbrown map, shared by all columns and tables, so a batch's
//! distinct addresses are resolved once), the addresses not yet cached are resolved together
//! (reverse DNS in one [`crate::NameLookup::lookup_many`] call), and the output arrays are built
//! from per-row result indices with strings copied from one interned table. The cache is
//! emptied when, at the start of a batch, it holds `cache_capacity` addresses or more, and when
//! the databases are reloaded. See `ENRICH.md` for the naming rule and defaults.

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use anyhow::{anyhow, bail, Context};
use arrow::array::builder::NullBufferBuilder;
use arrow::array::{
    Array, ArrayAccessor, ArrayRef, AsArray, ListArray, RecordBatch, RecordBatchOptions,
    StringArray, UInt32Array,
};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use hashbrown::hash_map::Entry;
use hashbrown::HashMap;
use silt_core::meta::SOURCE_TYPE;
use silt_core::{TableName, Transform};

use crate::columns::{default_columns, output_prefix, resolve_column, ColumnPath};
use crate::databases::{Databases, Source};
use crate::ipparse::{key, lookup_addr, parse_ip};

/// Default bound of the address cache (distinct address texts). Each costs about 100 bytes
/// (text, hash entries, result slot), plus the interned names it brings.
pub const DEFAULT_CACHE_CAPACITY: usize = 1 << 19;

const NONE: u32 = u32::MAX;

/// Which attributes to add; parsed from the CLI spelling `asn,geo,rdns`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attrs {
    /// `_asn` (UInt32) and `_as_org` (Utf8).
    pub asn: bool,
    /// `_country` (Utf8, ISO 3166-1 alpha-2) and, when a City database is given, `_city`.
    pub geo: bool,
    /// `_rdns` (Utf8).
    pub rdns: bool,
}

impl Attrs {
    pub const KNOWN: &'static [&'static str] = &["asn", "geo", "rdns"];

    /// Every attribute of either.
    pub fn union(self, o: Attrs) -> Attrs {
        Attrs {
            asn: self.asn || o.asn,
            geo: self.geo || o.geo,
            rdns: self.rdns || o.rdns,
        }
    }

    pub fn all() -> Self {
        Attrs {
            asn: true,
            geo: true,
            rdns: true,
        }
    }

    pub fn is_empty(&self) -> bool {
        !(self.asn || self.geo || self.rdns)
    }
}

impl FromStr for Attrs {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Attrs> {
        let mut a = Attrs::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.to_ascii_lowercase().as_str() {
                "asn" => a.asn = true,
                "geo" => a.geo = true,
                "rdns" => a.rdns = true,
                _ => bail!(
                    "unknown enrichment attribute {part:?} in {s:?} (known: {})",
                    Attrs::KNOWN.join(", ")
                ),
            }
        }
        if a.is_empty() {
            bail!(
                "no enrichment attribute in {s:?} (known: {})",
                Attrs::KNOWN.join(", ")
            );
        }
        Ok(a)
    }
}

impl fmt::Display for Attrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v: Vec<&str> = [(self.asn, "asn"), (self.geo, "geo"), (self.rdns, "rdns")]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
        f.write_str(&v.join(","))
    }
}

/// How an [`Enricher`] is set up.
#[derive(Debug, Clone)]
pub struct EnrichConfig {
    pub attrs: Attrs,
    /// Columns to enrich (flat names, or dotted paths into structs); `None`: the defaults
    /// (see [`crate::columns`]). A listed column missing from a table is skipped (noted in the
    /// report); one that is not a string column is an error.
    pub columns: Option<Vec<String>>,
    /// Bound of the address cache, in addresses.
    pub cache_capacity: usize,
}

impl EnrichConfig {
    pub fn new(attrs: Attrs) -> Self {
        Self {
            attrs,
            columns: None,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
        }
    }
}

/// One kind of output column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutKind {
    Asn,
    AsOrg,
    Country,
    City,
    Rdns,
}

impl OutKind {
    pub fn suffix(self) -> &'static str {
        match self {
            OutKind::Asn => "_asn",
            OutKind::AsOrg => "_as_org",
            OutKind::Country => "_country",
            OutKind::City => "_city",
            OutKind::Rdns => "_rdns",
        }
    }

    /// The `silt.source_type` field metadata of the new column.
    pub fn source_type(self) -> &'static str {
        match self {
            OutKind::Asn => "enrich:asn",
            OutKind::AsOrg => "enrich:as_org",
            OutKind::Country => "enrich:country",
            OutKind::City => "enrich:city",
            OutKind::Rdns => "enrich:rdns",
        }
    }

    pub fn data_type(self) -> DataType {
        match self {
            OutKind::Asn => DataType::UInt32,
            _ => DataType::Utf8,
        }
    }
}

/// Checks that `dbs` can serve `attrs`.
pub fn check_databases(attrs: Attrs, dbs: &Databases) -> anyhow::Result<()> {
    let mut missing = Vec::new();
    if attrs.asn && dbs.asn_source().is_none() {
        missing
            .push("asn needs an ASN database (GeoLite2-ASN .mmdb, GeoIP2-ISP .mmdb or an ASN CSV)");
    }
    if attrs.geo && dbs.country_source().is_none() {
        missing.push("geo needs a Country or City database (.mmdb or GeoLite2 CSV)");
    }
    if attrs.rdns && dbs.names().is_none() {
        missing.push("rdns needs a reverse-DNS index");
    }
    if !missing.is_empty() {
        bail!("enrich: {}", missing.join("; "));
    }
    Ok(())
}

struct Shared {
    attrs: Attrs,
    dbs: RwLock<Arc<Databases>>,
    generation: AtomicU64,
}

/// Swaps the databases of a running [`Enricher`] (cheap to clone, `Send + Sync`).
#[derive(Clone)]
pub struct EnrichHandle {
    shared: Arc<Shared>,
}

impl EnrichHandle {
    /// The databases of enrichers that share them ([`Enricher::sharing`], one per table with
    /// attributes of its own): `attrs` are all the attributes they ask for, which `dbs`, and
    /// every set reloaded later, must serve.
    pub fn new(attrs: Attrs, dbs: Databases) -> anyhow::Result<Self> {
        check_databases(attrs, &dbs)?;
        Ok(EnrichHandle {
            shared: Arc::new(Shared {
                attrs,
                dbs: RwLock::new(Arc::new(dbs)),
                generation: AtomicU64::new(0),
            }),
        })
    }

    /// A handle without an enricher, for the databases of the SQL functions alone (any set
    /// serves them).
    pub fn standalone(dbs: Databases) -> Self {
        EnrichHandle {
            shared: Arc::new(Shared {
                attrs: Attrs::default(),
                dbs: RwLock::new(Arc::new(dbs)),
                generation: AtomicU64::new(0),
            }),
        }
    }

    /// How many times the databases were replaced.
    pub fn reloads(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// Replaces the databases; the enricher uses them from its next batch on (and empties its
    /// cache then). Fails, leaving the old set in place, when the new set cannot serve the
    /// configured attributes.
    pub fn reload(&self, new: Databases) -> anyhow::Result<()> {
        check_databases(self.shared.attrs, &new).context("reload refused")?;
        let mut g = self.shared.dbs.write().unwrap_or_else(|e| e.into_inner());
        *g = Arc::new(new);
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// The current set (for SQL UDFs, which should share it).
    pub fn databases(&self) -> Arc<Databases> {
        self.shared
            .dbs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[derive(Clone, Copy)]
struct Slot {
    asn: u32,
    org: u32,
    country: u32,
    city: u32,
    rdns: u32,
    /// Bit 0: asn or as_org found; bit 1: country or city found; bit 2: rdns found.
    found: u8,
}

impl Slot {
    const EMPTY: Slot = Slot {
        asn: NONE,
        org: NONE,
        country: NONE,
        city: NONE,
        rdns: NONE,
        found: 0,
    };
}

#[derive(Default)]
struct Interner {
    map: HashMap<Box<str>, u32>,
    bytes: Vec<u8>,
    spans: Vec<(u32, u32)>,
}

impl Interner {
    fn intern(&mut self, s: Option<&str>) -> u32 {
        let Some(s) = s else { return NONE };
        if let Some(&i) = self.map.get(s) {
            return i;
        }
        let i = self.spans.len() as u32;
        self.spans.push((self.bytes.len() as u32, s.len() as u32));
        self.bytes.extend_from_slice(s.as_bytes());
        self.map.insert(s.into(), i);
        i
    }

    #[inline]
    fn get(&self, id: u32) -> &[u8] {
        let (s, l) = self.spans[id as usize];
        &self.bytes[s as usize..(s + l) as usize]
    }
}

/// Address text -> result slot, so a repeated value is parsed once. Texts of up to 16 bytes
/// (every IPv4 address, short IPv6 ones) are kept inside the table entry and compared as one
/// 128-bit value; longer ones are also kept in an arena and compared there.
#[derive(Default)]
struct TextCache {
    table: hashbrown::HashTable<TextEntry>,
    hasher: hashbrown::DefaultHashBuilder,
    long: Vec<u8>,
    long_spans: Vec<(u32, u32)>,
}

#[derive(Clone, Copy)]
struct TextEntry {
    /// The first 16 bytes, zero-padded, little-endian.
    head: u128,
    len: u32,
    /// The result slot; `NONE` for text that is not an address.
    slot: u32,
    /// Index into `long_spans` when `len > 16`.
    long: u32,
}

impl TextCache {
    /// (hash, head) of a text.
    #[inline]
    fn key(&self, b: &[u8]) -> (u64, u128) {
        let mut k = [0u8; 16];
        let n = b.len().min(16);
        k[..n].copy_from_slice(&b[..n]);
        let head = u128::from_le_bytes(k);
        let h = if b.len() <= 16 {
            std::hash::BuildHasher::hash_one(&self.hasher, (head, b.len() as u32))
        } else {
            std::hash::BuildHasher::hash_one(&self.hasher, b)
        };
        (h, head)
    }

    #[inline]
    fn get(&self, hash: u64, head: u128, b: &[u8]) -> Option<u32> {
        let len = b.len() as u32;
        self.table
            .find(hash, |e| {
                e.len == len
                    && e.head == head
                    && (len <= 16 || {
                        let (s, l) = self.long_spans[e.long as usize];
                        &self.long[s as usize..(s + l) as usize] == b
                    })
            })
            .map(|e| e.slot)
    }

    fn insert(&mut self, hash: u64, head: u128, b: &[u8], slot: u32) {
        let mut long = NONE;
        if b.len() > 16 {
            long = self.long_spans.len() as u32;
            self.long_spans
                .push((self.long.len() as u32, b.len() as u32));
            self.long.extend_from_slice(b);
        }
        let e = TextEntry {
            head,
            len: b.len() as u32,
            slot,
            long,
        };
        let (hasher, bytes, spans) = (&self.hasher, &self.long, &self.long_spans);
        self.table.insert_unique(hash, e, |e| {
            if e.len <= 16 {
                std::hash::BuildHasher::hash_one(hasher, (e.head, e.len))
            } else {
                let (s, l) = spans[e.long as usize];
                std::hash::BuildHasher::hash_one(hasher, &bytes[s as usize..(s + l) as usize])
            }
        });
    }

    fn len(&self) -> usize {
        self.table.len()
    }
}

#[derive(Default)]
struct State {
    texts: TextCache,
    cache: HashMap<u128, u32>,
    slots: Vec<Slot>,
    strings: Interner,
    memo_asn: HashMap<u64, (u32, u32)>,
    memo_country: HashMap<u64, u32>,
    memo_city: HashMap<u64, (u32, u32)>,
    pending: Vec<(u32, IpAddr)>,
    row_slots: Vec<u32>,
    names: Vec<Option<Arc<str>>>,
}

impl State {
    fn reset(&mut self) {
        self.texts = TextCache::default();
        self.cache.clear();
        self.slots.clear();
        self.strings = Interner::default();
        self.memo_asn.clear();
        self.memo_country.clear();
        self.memo_city.clear();
        self.pending.clear();
    }

    fn over(&self, capacity: usize) -> bool {
        self.cache.len() >= capacity
            || self.texts.len() >= capacity
            || self.strings.bytes.len() >= (1 << 30)
            || self.texts.long.len() >= (1 << 30)
    }
}

#[derive(Default)]
struct Stats {
    lookups: u64,
    hits: u64,
    unparsable: u64,
    found: [u64; 3],
    errors: u64,
    first_error: Option<String>,
    notes: BTreeSet<String>,
    reloads: u64,
    resets: u64,
}

impl Stats {
    fn error(&mut self, e: anyhow::Error) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(format!("{e:#}"));
        }
    }
}

struct Target {
    path: ColumnPath,
    kinds: Vec<OutKind>,
}

enum Col {
    In(usize),
    Out(usize, usize),
}

struct Plan {
    table: TableName,
    schema: SchemaRef,
    with_city: bool,
    targets: Vec<Target>,
    layout: Vec<Col>,
    out_schema: SchemaRef,
}

/// The enrichment transform; see the module documentation.
pub struct Enricher {
    config: EnrichConfig,
    shared: Arc<Shared>,
    dbs: Arc<Databases>,
    generation: u64,
    state: State,
    stats: Stats,
    plans: Vec<Plan>,
}

impl Enricher {
    /// Fails when `dbs` cannot serve `config.attrs` or no attribute is asked for.
    pub fn new(config: EnrichConfig, dbs: Databases) -> anyhow::Result<Enricher> {
        if config.attrs.is_empty() {
            bail!("enrich: no attribute asked for");
        }
        let handle = EnrichHandle::new(config.attrs, dbs)?;
        Enricher::sharing(config, &handle)
    }

    /// An enricher on `handle`'s databases: a reload through the handle reaches it. Fails when
    /// the handle was not made for `config.attrs`.
    pub fn sharing(config: EnrichConfig, handle: &EnrichHandle) -> anyhow::Result<Enricher> {
        if config.attrs.is_empty() {
            bail!("enrich: no attribute asked for");
        }
        let served = handle.shared.attrs;
        if served.union(config.attrs) != served {
            bail!(
                "enrich: {} asked of databases checked for {served} only",
                config.attrs
            );
        }
        let shared = handle.shared.clone();
        let generation = shared.generation.load(Ordering::Acquire);
        let dbs = handle.databases();
        Ok(Enricher {
            config,
            shared,
            dbs,
            generation,
            state: State::default(),
            stats: Stats::default(),
            plans: Vec::new(),
        })
    }

    /// A handle to reload the databases while the enricher runs.
    pub fn handle(&self) -> EnrichHandle {
        EnrichHandle {
            shared: self.shared.clone(),
        }
    }

    /// The databases the next batch will use.
    pub fn databases(&self) -> Arc<Databases> {
        self.handle().databases()
    }

    fn sync(&mut self) {
        let g = self.shared.generation.load(Ordering::Acquire);
        if g != self.generation {
            self.dbs = self
                .shared
                .dbs
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            self.generation = g;
            self.state.reset();
            self.plans.clear();
            self.stats.reloads += 1;
        }
    }

    fn kinds(&self, with_city: bool) -> Vec<OutKind> {
        let a = self.config.attrs;
        let mut k = Vec::new();
        if a.asn {
            k.extend([OutKind::Asn, OutKind::AsOrg]);
        }
        if a.geo {
            k.push(OutKind::Country);
            if with_city {
                k.push(OutKind::City);
            }
        }
        if a.rdns {
            k.push(OutKind::Rdns);
        }
        k
    }

    fn plan(
        &mut self,
        table: &TableName,
        schema: &SchemaRef,
        with_city: bool,
    ) -> anyhow::Result<usize> {
        if let Some(i) = self.plans.iter().position(|p| {
            p.with_city == with_city
                && p.table == *table
                && (Arc::ptr_eq(&p.schema, schema) || p.schema == *schema)
        }) {
            return Ok(i);
        }
        let fields = schema.fields();
        let explicit = self.config.columns.is_some();
        let candidates: Vec<ColumnPath> = match &self.config.columns {
            None => default_columns(fields),
            Some(cols) => {
                let mut v = Vec::new();
                for c in cols {
                    match resolve_column(fields, c).map_err(|e| anyhow!("enrich {table}: {e}"))? {
                        Some(p) => v.push(p),
                        None => {
                            self.stats.notes.insert(format!(
                                "enrich: column {c} is not in {table}, not enriched"
                            ));
                        }
                    }
                }
                v
            }
        };
        let kinds = self.kinds(with_city);
        let existing: hashbrown::HashSet<&str> = fields.iter().map(|f| f.name().as_str()).collect();
        let mut used: HashMap<String, String> = HashMap::new();
        let mut targets = Vec::new();
        'cand: for c in candidates {
            let prefix = output_prefix(&c.leaf).to_string();
            let names: Vec<String> = kinds
                .iter()
                .map(|k| format!("{prefix}{}", k.suffix()))
                .collect();
            for n in &names {
                if existing.contains(n.as_str()) {
                    bail!(
                        "enrich {table}: the new column {n:?} for address column {:?} would collide with an existing column; name the columns to enrich explicitly",
                        c.display
                    );
                }
                if let Some(owner) = used.get(n) {
                    if explicit {
                        bail!(
                            "enrich {table}: address columns {owner:?} and {:?} would both get a column {n:?}",
                            c.display
                        );
                    }
                    self.stats.notes.insert(format!(
                        "enrich: {} in {table} not enriched by default: its column {n} would collide with {owner}'s",
                        c.display
                    ));
                    continue 'cand;
                }
            }
            for n in names {
                used.insert(n, c.display.clone());
            }
            targets.push(Target {
                path: c,
                kinds: kinds.clone(),
            });
        }
        let mut layout = Vec::new();
        let mut out_fields: Vec<FieldRef> = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            layout.push(Col::In(i));
            out_fields.push(f.clone());
            for (t, tg) in targets.iter().enumerate().filter(|(_, t)| t.path.top == i) {
                let prefix = output_prefix(&tg.path.leaf);
                for (o, k) in tg.kinds.iter().enumerate() {
                    layout.push(Col::Out(t, o));
                    let md = std::collections::HashMap::from([(
                        SOURCE_TYPE.to_string(),
                        k.source_type().to_string(),
                    )]);
                    let dt = if tg.path.list {
                        DataType::List(Arc::new(Field::new_list_field(k.data_type(), true)))
                    } else {
                        k.data_type()
                    };
                    out_fields.push(Arc::new(
                        Field::new(format!("{prefix}{}", k.suffix()), dt, true).with_metadata(md),
                    ));
                }
            }
        }
        let out_schema = Arc::new(Schema::new_with_metadata(
            out_fields,
            schema.metadata().clone(),
        ));
        if self.plans.len() >= 256 {
            self.plans.clear();
        }
        self.plans.push(Plan {
            table: table.clone(),
            schema: schema.clone(),
            with_city,
            targets,
            layout,
            out_schema,
        });
        Ok(self.plans.len() - 1)
    }
}

/// The leaf array at `path` and its nulls, including those of enclosing structs.
fn column_at(batch: &RecordBatch, path: &ColumnPath) -> (ArrayRef, Option<NullBuffer>) {
    let mut arr = batch.column(path.top).clone();
    let mut nulls = arr.logical_nulls();
    for &c in &path.children {
        let child = arr.as_struct().column(c).clone();
        nulls = NullBuffer::union(nulls.as_ref(), child.logical_nulls().as_ref());
        arr = child;
    }
    (arr, nulls)
}

fn scan<'a, A: ArrayAccessor<Item = &'a str>>(
    arr: A,
    nulls: Option<&NullBuffer>,
    st: &mut State,
    stats: &mut Stats,
) {
    let n = arr.len();
    st.row_slots.clear();
    st.row_slots.reserve(n);
    let (mut lookups, mut hits, mut bad) = (0u64, 0u64, 0u64);
    for i in 0..n {
        if nulls.is_some_and(|nb| nb.is_null(i)) {
            st.row_slots.push(NONE);
            continue;
        }
        let b = arr.value(i).as_bytes();
        if b.is_empty() {
            st.row_slots.push(NONE);
            continue;
        }
        let (h, head) = st.texts.key(b);
        if let Some(id) = st.texts.get(h, head, b) {
            if id == NONE {
                bad += 1;
            } else {
                lookups += 1;
                hits += 1;
            }
            st.row_slots.push(id);
            continue;
        }
        let Some(ip) = parse_ip(b) else {
            bad += 1;
            st.texts.insert(h, head, b, NONE);
            st.row_slots.push(NONE);
            continue;
        };
        let ip = lookup_addr(ip);
        lookups += 1;
        // Another spelling of a cached address (`::ffff:1.2.3.4` and `1.2.3.4`) shares its slot.
        let id = match st.cache.entry(key(ip)) {
            Entry::Occupied(e) => {
                hits += 1;
                *e.get()
            }
            Entry::Vacant(v) => {
                let id = st.slots.len() as u32;
                st.slots.push(Slot::EMPTY);
                v.insert(id);
                st.pending.push((id, ip));
                id
            }
        };
        st.texts.insert(h, head, b, id);
        st.row_slots.push(id);
    }
    stats.lookups += lookups;
    stats.hits += hits;
    stats.unparsable += bad;
}

/// Looks `ip` up in `src`, decoding a record only the first time its key is seen.
fn memo_lookup<V: Copy>(
    src: &Source,
    ip: IpAddr,
    memo: &mut HashMap<u64, V>,
    stats: &mut Stats,
    decode: impl FnOnce(crate::Info<'_>) -> V,
) -> Option<V> {
    match src.locate(ip) {
        Ok(Some(hit)) => {
            let k = hit.key();
            if let Some(v) = memo.get(&k) {
                return Some(*v);
            }
            match hit.info() {
                Ok(info) => {
                    let v = decode(info);
                    memo.insert(k, v);
                    Some(v)
                }
                Err(e) => {
                    stats.error(
                        e.context(format!("decoding the record of {ip} in {}", src.describe())),
                    );
                    None
                }
            }
        }
        Ok(None) => None,
        Err(e) => {
            stats.error(e);
            None
        }
    }
}

fn resolve(
    st: &mut State,
    dbs: &Databases,
    attrs: Attrs,
    with_city: bool,
    stats: &mut Stats,
) -> anyhow::Result<()> {
    if st.pending.is_empty() {
        return Ok(());
    }
    let pending = std::mem::take(&mut st.pending);
    let country_src = dbs.country_source();
    let city_src = if with_city { dbs.city_source() } else { None };
    let same_geo = match (country_src, city_src) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    };
    for &(slot, ip) in &pending {
        let mut s = Slot::EMPTY;
        let State {
            strings,
            memo_asn,
            memo_country,
            memo_city,
            ..
        } = st;
        if attrs.asn {
            if let Some(src) = dbs.asn_source() {
                if let Some((a, o)) = memo_lookup(src, ip, memo_asn, stats, |i| {
                    (i.asn.unwrap_or(NONE), strings.intern(i.as_org))
                }) {
                    s.asn = a;
                    s.org = o;
                }
            }
        }
        if attrs.geo {
            let mut city_pair = |strings: &mut Interner, stats: &mut Stats, src: &Source| {
                memo_lookup(src, ip, memo_city, stats, |i| {
                    (strings.intern(i.country), strings.intern(i.city))
                })
            };
            if same_geo {
                if let Some((c, y)) = city_pair(strings, stats, city_src.expect("same_geo")) {
                    s.country = c;
                    s.city = y;
                }
            } else {
                if let Some(src) = country_src {
                    if let Some(c) =
                        memo_lookup(src, ip, memo_country, stats, |i| strings.intern(i.country))
                    {
                        s.country = c;
                    }
                }
                if let Some(src) = city_src {
                    if let Some((_, y)) = city_pair(strings, stats, src) {
                        s.city = y;
                    }
                }
            }
        }
        s.found = u8::from(s.asn != NONE || s.org != NONE)
            | (u8::from(s.country != NONE || s.city != NONE) << 1);
        st.slots[slot as usize] = s;
    }
    if attrs.rdns {
        if let Some(names) = dbs.names() {
            let ips: Vec<Option<IpAddr>> = pending.iter().map(|&(_, ip)| Some(ip)).collect();
            let res = names
                .lookup_many(&ips, &mut st.names)
                .with_context(|| format!("enrich rdns: {} failed", names.describe()));
            let res = res.and_then(|()| {
                if st.names.len() != ips.len() {
                    bail!(
                        "enrich rdns: {} returned {} names for {} addresses",
                        names.describe(),
                        st.names.len(),
                        ips.len()
                    );
                }
                Ok(())
            });
            if let Err(e) = res {
                // The slots of this batch are incomplete: forget everything cached.
                st.reset();
                return Err(e);
            }
            for (&(slot, _), name) in pending.iter().zip(st.names.iter()) {
                let id = st.strings.intern(name.as_deref());
                let s = &mut st.slots[slot as usize];
                s.rdns = id;
                s.found |= u8::from(id != NONE) << 2;
            }
            st.names.clear();
        }
    }
    st.pending = pending;
    st.pending.clear();
    Ok(())
}

/// The output arrays of one address column, built in one pass over its rows.
enum Builder {
    U32 {
        vals: Vec<u32>,
        nulls: NullBufferBuilder,
    },
    Utf8 {
        offsets: Vec<i32>,
        values: Vec<u8>,
        nulls: NullBufferBuilder,
    },
}

impl OutKind {
    #[inline]
    fn pick(self, s: &Slot) -> u32 {
        match self {
            OutKind::Asn => s.asn,
            OutKind::AsOrg => s.org,
            OutKind::Country => s.country,
            OutKind::City => s.city,
            OutKind::Rdns => s.rdns,
        }
    }
}

fn build_all(
    rows: &[u32],
    slots: &[Slot],
    strings: &Interner,
    kinds: &[OutKind],
) -> anyhow::Result<Vec<ArrayRef>> {
    let n = rows.len();
    let mut builders: Vec<Builder> = kinds
        .iter()
        .map(|k| match k {
            OutKind::Asn => Builder::U32 {
                vals: Vec::with_capacity(n),
                nulls: NullBufferBuilder::new(n),
            },
            _ => {
                let mut offsets = Vec::with_capacity(n + 1);
                offsets.push(0i32);
                Builder::Utf8 {
                    offsets,
                    values: Vec::with_capacity(n * 8),
                    nulls: NullBufferBuilder::new(n),
                }
            }
        })
        .collect();
    for &r in rows {
        let slot = if r == NONE {
            &Slot::EMPTY
        } else {
            &slots[r as usize]
        };
        for (k, b) in kinds.iter().zip(builders.iter_mut()) {
            let v = k.pick(slot);
            match b {
                Builder::U32 { vals, nulls } => {
                    if v == NONE {
                        nulls.append_null();
                        vals.push(0);
                    } else {
                        nulls.append_non_null();
                        vals.push(v);
                    }
                }
                Builder::Utf8 {
                    offsets,
                    values,
                    nulls,
                } => {
                    if v == NONE {
                        nulls.append_null();
                    } else {
                        nulls.append_non_null();
                        values.extend_from_slice(strings.get(v));
                    }
                    offsets.push(values.len() as i32);
                }
            }
        }
    }
    builders
        .into_iter()
        .map(|b| -> anyhow::Result<ArrayRef> {
            Ok(match b {
                Builder::U32 { vals, mut nulls } => {
                    Arc::new(UInt32Array::new(ScalarBuffer::from(vals), nulls.finish()))
                }
                Builder::Utf8 {
                    offsets,
                    values,
                    mut nulls,
                } => {
                    if values.len() > i32::MAX as usize {
                        bail!("enrich: an output column of one batch would exceed 2 GiB of text");
                    }
                    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
                    // SAFETY: every value is a whole `&str` copied from the interner, so the
                    // bytes are valid UTF-8 at every offset; the offsets are monotonic (checked
                    // by `OffsetBuffer::new`) and end at `values.len()`, which fits in i32.
                    Arc::new(unsafe {
                        StringArray::new_unchecked(
                            offsets,
                            Buffer::from_vec(values),
                            nulls.finish(),
                        )
                    })
                }
            })
        })
        .collect()
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 * 100.0 / b as f64
    }
}

impl Transform for Enricher {
    fn name(&self) -> String {
        format!("enrich {}", self.config.attrs)
    }

    fn apply(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<RecordBatch> {
        self.sync();
        let attrs = self.config.attrs;
        let with_city = attrs.geo && self.dbs.city_source().is_some();
        let schema = batch.schema();
        let pi = self.plan(table, &schema, with_city)?;
        if self.plans[pi].targets.is_empty() {
            return Ok(batch);
        }
        if self.state.over(self.config.cache_capacity) {
            self.state.reset();
            self.stats.resets += 1;
        }
        let dbs = self.dbs.clone();
        let plan = &self.plans[pi];
        let st = &mut self.state;
        let stats = &mut self.stats;
        let mut outputs: Vec<Vec<ArrayRef>> = Vec::with_capacity(plan.targets.len());
        for t in &plan.targets {
            let (arr, nulls) = column_at(&batch, &t.path);
            // A list of addresses: its elements are enriched like a column, and each new column
            // gets the list's offsets and nulls.
            let (arr, nulls, lists) = match arr.data_type() {
                DataType::List(_) => {
                    let l = arr.as_list::<i32>();
                    let offsets = l.offsets().clone();
                    let (values, vnulls) = (l.values().clone(), l.values().logical_nulls());
                    (values, vnulls, Some((offsets, nulls)))
                }
                DataType::LargeList(_) => {
                    let l = arr.as_list::<i64>();
                    let offsets = OffsetBuffer::new(ScalarBuffer::from(
                        l.offsets()
                            .iter()
                            .map(|&o| i32::try_from(o))
                            .collect::<Result<Vec<i32>, _>>()
                            .map_err(|_| {
                                anyhow!(
                                    "enrich {table}: list column {} is over 2^31 elements",
                                    t.path.display
                                )
                            })?,
                    ));
                    let (values, vnulls) = (l.values().clone(), l.values().logical_nulls());
                    (values, vnulls, Some((offsets, nulls)))
                }
                _ => (arr, nulls, None),
            };
            match arr.data_type() {
                DataType::Utf8 => scan(arr.as_string::<i32>(), nulls.as_ref(), st, stats),
                DataType::LargeUtf8 => scan(arr.as_string::<i64>(), nulls.as_ref(), st, stats),
                DataType::Utf8View => scan(arr.as_string_view(), nulls.as_ref(), st, stats),
                other => bail!(
                    "enrich {table}: column {} is {other}, not a string",
                    t.path.display
                ),
            }
            resolve(st, &dbs, attrs, with_city, stats)?;
            for &r in &st.row_slots {
                if r != NONE {
                    let f = st.slots[r as usize].found;
                    stats.found[0] += u64::from(f & 1);
                    stats.found[1] += u64::from((f >> 1) & 1);
                    stats.found[2] += u64::from((f >> 2) & 1);
                }
            }
            let mut cols = build_all(&st.row_slots, &st.slots, &st.strings, &t.kinds)?;
            if let Some((offsets, list_nulls)) = lists {
                cols = cols
                    .into_iter()
                    .map(|c| -> anyhow::Result<ArrayRef> {
                        let item = Arc::new(Field::new_list_field(c.data_type().clone(), true));
                        Ok(Arc::new(ListArray::try_new(
                            item,
                            offsets.clone(),
                            c,
                            list_nulls.clone(),
                        )?))
                    })
                    .collect::<anyhow::Result<_>>()?;
            }
            outputs.push(cols);
        }
        let columns: Vec<ArrayRef> = plan
            .layout
            .iter()
            .map(|c| match *c {
                Col::In(i) => batch.column(i).clone(),
                Col::Out(t, o) => outputs[t][o].clone(),
            })
            .collect();
        let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(plan.out_schema.clone(), columns, &opts)
            .with_context(|| format!("enrich {table}: assembling the batch"))
    }

    fn report(&self) -> Vec<String> {
        let s = &self.stats;
        let mut v = Vec::new();
        let a = self.config.attrs;
        for (on, name, found) in [
            (a.asn, "asn", s.found[0]),
            (a.geo, "geo", s.found[1]),
            (a.rdns, "rdns", s.found[2]),
        ] {
            if on && s.lookups > 0 {
                v.push(format!(
                    "enrich {name}: {} lookups, {:.1} % found, cache hit {:.0} %",
                    thousands(s.lookups),
                    pct(found, s.lookups),
                    pct(s.hits, s.lookups)
                ));
            }
        }
        if s.unparsable > 0 {
            v.push(format!(
                "enrich: {} values were not IP addresses (enriched as NULL)",
                thousands(s.unparsable)
            ));
        }
        if s.errors > 0 {
            v.push(format!(
                "enrich: {} lookup errors (NULL); first: {}",
                thousands(s.errors),
                s.first_error.as_deref().unwrap_or("")
            ));
        }
        if s.reloads > 0 {
            v.push(format!("enrich: databases reloaded {} times", s.reloads));
        }
        if s.resets > 0 {
            v.push(format!(
                "enrich: cache emptied {} times (capacity {})",
                s.resets,
                thousands(self.config.cache_capacity as u64)
            ));
        }
        v.extend(s.notes.iter().cloned());
        v
    }
}
