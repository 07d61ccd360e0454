//! In-memory IP range maps loaded from CSV: MaxMind GeoLite2 CSV (ASN blocks; Country or City
//! blocks joined with their `*-Locations-en.csv` by `geoname_id`) and the "RASP-style"
//! `ipIntStart,ipIntEnd,AS name` CSV (IPv4 as integers).
//!
//! Touches only the files it is asked to load (plain or gzip, detected by the gzip magic bytes,
//! not the name). Lookups are a binary search over sorted, disjoint ranges (IPv4 and IPv6 kept
//! apart). Input ranges may overlap: **the most specific range wins**, i.e. at every address
//! the smallest input range containing it gives the answer; among equally small ranges the one
//! loaded last wins. Adjacent output pieces with the same record are merged. Lines that cannot
//! be used are counted with their line numbers (first [`MAX_SAMPLES`] kept) in a
//! [`LoadReport`]; they never stop a load, but a file with no usable line is an error.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};

use crate::databases::Info;

/// (country ISO code, city name) of a GeoLite2 location.
type CountryCity = (Option<Arc<str>>, Option<Arc<str>>);

/// How many bad lines a [`LoadReport`] keeps verbatim.
pub const MAX_SAMPLES: usize = 20;

/// The fields of one range.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RangeRecord {
    pub asn: Option<u32>,
    pub as_org: Option<Arc<str>>,
    pub country: Option<Arc<str>>,
    pub city: Option<Arc<str>>,
}

/// What a range map can answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Provides {
    pub asn: bool,
    pub country: bool,
    pub city: bool,
}

/// One unusable input line.
#[derive(Debug, Clone)]
pub struct BadLine {
    pub line: u64,
    pub reason: String,
}

/// What loading one file did.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub path: PathBuf,
    /// Data lines read (header excluded).
    pub lines: u64,
    /// Ranges taken from the file.
    pub ranges: u64,
    /// Lines that could not be used.
    pub bad: u64,
    /// The first [`MAX_SAMPLES`] bad lines.
    pub samples: Vec<BadLine>,
}

impl LoadReport {
    fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            ..Default::default()
        }
    }

    fn bad(&mut self, line: u64, reason: impl Into<String>) {
        self.bad += 1;
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push(BadLine {
                line,
                reason: reason.into(),
            });
        }
    }
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} ranges from {} lines",
            self.path.display(),
            self.ranges,
            self.lines
        )?;
        if self.bad > 0 {
            write!(f, ", {} bad lines (", self.bad)?;
            for (i, b) in self.samples.iter().enumerate() {
                if i > 0 {
                    f.write_str("; ")?;
                }
                write!(f, "line {}: {}", b.line, b.reason)?;
            }
            if self.bad as usize > self.samples.len() {
                f.write_str("; ...")?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// An integer address type a range map is keyed by (`u32` for IPv4, `u128` for IPv6).
trait RangeInt: Copy + Ord + std::fmt::Debug {
    fn succ(self) -> Option<Self>;
    fn pred(self) -> Self;
    fn width(self, end: Self) -> u128;
}

impl RangeInt for u32 {
    fn succ(self) -> Option<Self> {
        self.checked_add(1)
    }
    fn pred(self) -> Self {
        self - 1
    }
    fn width(self, end: Self) -> u128 {
        u128::from(end - self)
    }
}

impl RangeInt for u128 {
    fn succ(self) -> Option<Self> {
        self.checked_add(1)
    }
    fn pred(self) -> Self {
        self - 1
    }
    fn width(self, end: Self) -> u128 {
        end - self
    }
}

#[derive(Debug, Clone, Copy)]
struct Raw<T> {
    start: T,
    end: T,
    rec: u32,
}

/// Turns possibly overlapping ranges (in load order) into sorted disjoint `(start, end, rec)`
/// pieces where the smallest containing range wins (ties: the later one).
fn flatten<T: RangeInt>(raw: &[Raw<T>]) -> Vec<(T, T, u32)> {
    // Events at a point: ranges starting there, and ranges that ended just before it.
    let mut events: Vec<(T, bool, usize)> = Vec::with_capacity(raw.len() * 2);
    for (i, r) in raw.iter().enumerate() {
        events.push((r.start, true, i));
        if let Some(after) = r.end.succ() {
            events.push((after, false, i));
        }
    }
    events.sort_unstable_by_key(|e| e.0);
    // Active ranges ordered best first: smallest width, then latest load order.
    let mut active: BTreeSet<(u128, std::cmp::Reverse<usize>)> = BTreeSet::new();
    let mut out: Vec<(T, T, u32)> = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < events.len() {
        let at = events[i].0;
        while i < events.len() && events[i].0 == at {
            let (_, add, idx) = events[i];
            let r = &raw[idx];
            let k = (r.start.width(r.end), std::cmp::Reverse(idx));
            if add {
                active.insert(k);
            } else {
                active.remove(&k);
            }
            i += 1;
        }
        let Some(&(_, std::cmp::Reverse(best))) = active.first() else {
            continue;
        };
        let end = if i < events.len() {
            events[i].0.pred()
        } else {
            // No later event: the winner runs to the end of the address space.
            raw[best].end
        };
        let rec = raw[best].rec;
        match out.last_mut() {
            Some(last) if last.2 == rec && last.1.succ() == Some(at) => last.1 = end,
            _ => out.push((at, end, rec)),
        }
    }
    out
}

fn find<T: RangeInt>(v: &[(T, T, u32)], x: T) -> Option<u32> {
    let i = v.partition_point(|r| r.0 <= x);
    let r = v.get(i.checked_sub(1)?)?;
    (x <= r.1).then_some(r.2)
}

/// A loaded range map; build one with [`RangeDbBuilder`].
#[derive(Debug, Clone, Default)]
pub struct RangeDb {
    name: String,
    v4: Vec<(u32, u32, u32)>,
    v6: Vec<(u128, u128, u32)>,
    records: Vec<RangeRecord>,
    provides: Provides,
    reports: Vec<LoadReport>,
}

impl RangeDb {
    /// The record index for `ip` (IPv4-mapped IPv6 must be folded to IPv4 by the caller).
    pub fn locate(&self, ip: IpAddr) -> Option<u32> {
        match ip {
            IpAddr::V4(a) => find(&self.v4, u32::from(a)),
            IpAddr::V6(a) => find(&self.v6, u128::from(a)),
        }
    }

    pub fn record(&self, rec: u32) -> &RangeRecord {
        &self.records[rec as usize]
    }

    pub fn record_info(&self, rec: u32) -> Info<'_> {
        let r = self.record(rec);
        Info {
            asn: r.asn,
            as_org: r.as_org.as_deref(),
            country: r.country.as_deref(),
            city: r.city.as_deref(),
            ..Info::default()
        }
    }

    /// The fields for `ip`, `None` when no range contains it.
    pub fn lookup(&self, ip: IpAddr) -> Option<&RangeRecord> {
        self.locate(ip.to_canonical()).map(|r| self.record(r))
    }

    pub fn provides(&self) -> Provides {
        self.provides
    }

    /// Disjoint ranges after flattening (IPv4, IPv6).
    pub fn range_counts(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }

    /// One report per loaded file.
    pub fn reports(&self) -> &[LoadReport] {
        &self.reports
    }

    pub fn describe(&self) -> String {
        format!(
            "range map {} ({} IPv4 + {} IPv6 ranges)",
            self.name,
            self.v4.len(),
            self.v6.len()
        )
    }
}

/// Collects ranges from one or more files (or by hand) and builds a [`RangeDb`].
#[derive(Debug, Default)]
pub struct RangeDbBuilder {
    names: Vec<String>,
    raw4: Vec<Raw<u32>>,
    raw6: Vec<Raw<u128>>,
    records: Vec<RangeRecord>,
    record_ids: HashMap<RangeRecord, u32>,
    strings: HashMap<String, Arc<str>>,
    provides: Provides,
    reports: Vec<LoadReport>,
}

/// Opens a file, decompressing it when it starts with the gzip magic bytes.
pub fn open_maybe_gz(path: &Path) -> anyhow::Result<Box<dyn Read>> {
    let mut f = BufReader::new(
        File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
    );
    let mut magic = [0u8; 2];
    let n = read_up_to(&mut f, &mut magic)?;
    let head = std::io::Cursor::new(magic[..n].to_vec());
    let chained = head.chain(f);
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(
            chained,
        ))))
    } else {
        Ok(Box::new(chained))
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn csv_reader(path: &Path) -> anyhow::Result<csv::Reader<Box<dyn Read>>> {
    Ok(csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(open_maybe_gz(path)?))
}

/// Parses `addr/len` into an inclusive range.
pub fn parse_network(s: &str) -> Result<(IpAddr, IpAddr), String> {
    let (a, l) = s
        .trim()
        .split_once('/')
        .ok_or_else(|| format!("network {s:?} has no /prefix"))?;
    let ip: IpAddr = a.parse().map_err(|_| format!("bad address {a:?}"))?;
    let len: u32 = l.parse().map_err(|_| format!("bad prefix length {l:?}"))?;
    match ip {
        IpAddr::V4(v4) => {
            if len > 32 {
                return Err(format!("prefix length {len} > 32"));
            }
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            let s = u32::from(v4) & mask;
            Ok((
                IpAddr::V4(Ipv4Addr::from(s)),
                IpAddr::V4(Ipv4Addr::from(s | !mask)),
            ))
        }
        IpAddr::V6(v6) => {
            if len > 128 {
                return Err(format!("prefix length {len} > 128"));
            }
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            let s = u128::from(v6) & mask;
            Ok((
                IpAddr::V6(Ipv6Addr::from(s)),
                IpAddr::V6(Ipv6Addr::from(s | !mask)),
            ))
        }
    }
}

fn column(header: &csv::StringRecord, name: &str, path: &Path) -> anyhow::Result<usize> {
    header
        .iter()
        .position(|h| h.trim().trim_start_matches('\u{feff}') == name)
        .ok_or_else(|| {
            anyhow!(
                "{}: header has no column {name:?} (header: {:?})",
                path.display(),
                header.iter().collect::<Vec<_>>().join(",")
            )
        })
}

fn read_header(
    rdr: &mut csv::Reader<Box<dyn Read>>,
    path: &Path,
) -> anyhow::Result<csv::StringRecord> {
    let mut header = csv::StringRecord::new();
    if !rdr
        .read_record(&mut header)
        .with_context(|| format!("cannot read {}", path.display()))?
    {
        bail!("{} is empty", path.display());
    }
    Ok(header)
}

fn opt(s: Option<&str>) -> Option<&str> {
    s.map(str::trim).filter(|s| !s.is_empty())
}

impl RangeDbBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    fn intern(&mut self, s: Option<&str>) -> Option<Arc<str>> {
        let s = opt(s)?;
        if let Some(a) = self.strings.get(s) {
            return Some(a.clone());
        }
        let a: Arc<str> = Arc::from(s);
        self.strings.insert(s.to_string(), a.clone());
        Some(a)
    }

    fn record_id(&mut self, rec: RangeRecord) -> u32 {
        if let Some(&i) = self.record_ids.get(&rec) {
            return i;
        }
        let i = self.records.len() as u32;
        self.records.push(rec.clone());
        self.record_ids.insert(rec, i);
        i
    }

    /// Adds one inclusive range by hand. Both ends must be the same family; IPv4-mapped IPv6
    /// ends are folded to IPv4.
    pub fn add_range(
        &mut self,
        start: IpAddr,
        end: IpAddr,
        rec: RangeRecord,
    ) -> anyhow::Result<()> {
        self.provides.asn |= rec.asn.is_some() || rec.as_org.is_some();
        self.provides.country |= rec.country.is_some();
        self.provides.city |= rec.city.is_some();
        let rec = self.record_id(rec);
        match (start.to_canonical(), end.to_canonical()) {
            (IpAddr::V4(s), IpAddr::V4(e)) if s <= e => self.raw4.push(Raw {
                start: u32::from(s),
                end: u32::from(e),
                rec,
            }),
            (IpAddr::V6(s), IpAddr::V6(e)) if s <= e => self.raw6.push(Raw {
                start: u128::from(s),
                end: u128::from(e),
                rec,
            }),
            (s, e) => bail!("bad range {s} - {e}: ends of different families or reversed"),
        }
        Ok(())
    }

    /// Loads a GeoLite2 ASN blocks CSV (`GeoLite2-ASN-Blocks-IPv4.csv` or `-IPv6.csv`):
    /// `network,autonomous_system_number,autonomous_system_organization`.
    pub fn add_geolite2_asn(&mut self, path: &Path) -> anyhow::Result<&LoadReport> {
        let mut rdr = csv_reader(path)?;
        let header = read_header(&mut rdr, path)?;
        let c_net = column(&header, "network", path)?;
        let c_asn = column(&header, "autonomous_system_number", path)?;
        let c_org = column(&header, "autonomous_system_organization", path)?;
        let mut rep = LoadReport::new(path);
        let mut rec = csv::StringRecord::new();
        loop {
            let line = rdr.position().line();
            match rdr.read_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    rep.lines += 1;
                    rep.bad(line, format!("unreadable: {e}"));
                    if e.is_io_error() {
                        break;
                    }
                    continue;
                }
            }
            rep.lines += 1;
            let res = (|| -> Result<(), String> {
                let (s, e) = parse_network(rec.get(c_net).unwrap_or(""))?;
                let asn = match opt(rec.get(c_asn)) {
                    None => None,
                    Some(a) => Some(a.parse::<u32>().map_err(|_| format!("bad ASN {a:?}"))?),
                };
                let org = rec.get(c_org);
                let r = RangeRecord {
                    asn,
                    as_org: self.intern(org),
                    ..Default::default()
                };
                self.add_range(s, e, r).map_err(|e| e.to_string())
            })();
            match res {
                Ok(()) => rep.ranges += 1,
                Err(e) => rep.bad(line, e),
            }
        }
        self.finish_report(rep)
    }

    /// Loads GeoLite2 Country or City blocks CSVs (`network,geoname_id,...`) joined with the
    /// locations CSV (`geoname_id,...,country_iso_code,...[,city_name]`). The country is the
    /// one of `geoname_id` (where MaxMind locates the address), as in the MMDB `country` field;
    /// a block without `geoname_id` has no country (not the registered country). City names
    /// are taken when the locations file has a `city_name` column.
    pub fn add_geolite2_geo(
        &mut self,
        blocks: &[&Path],
        locations: &Path,
    ) -> anyhow::Result<Vec<LoadReport>> {
        // geoname_id -> (country, city)
        let mut loc: HashMap<u32, CountryCity> = HashMap::new();
        let mut rdr = csv_reader(locations)?;
        let header = read_header(&mut rdr, locations)?;
        let c_id = column(&header, "geoname_id", locations)?;
        let c_cc = column(&header, "country_iso_code", locations)?;
        let c_city = column(&header, "city_name", locations).ok();
        let mut lrep = LoadReport::new(locations);
        let mut rec = csv::StringRecord::new();
        loop {
            let line = rdr.position().line();
            match rdr.read_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    lrep.lines += 1;
                    lrep.bad(line, format!("unreadable: {e}"));
                    if e.is_io_error() {
                        break;
                    }
                    continue;
                }
            }
            lrep.lines += 1;
            let Some(id) = opt(rec.get(c_id)).and_then(|s| s.parse::<u32>().ok()) else {
                lrep.bad(
                    line,
                    format!("bad geoname_id {:?}", rec.get(c_id).unwrap_or("")),
                );
                continue;
            };
            let cc = self.intern(rec.get(c_cc));
            let city = c_city.and_then(|c| self.intern(rec.get(c)));
            loc.insert(id, (cc, city));
            lrep.ranges += 1;
        }
        if loc.is_empty() {
            bail!("{}: no usable locations ({lrep})", locations.display());
        }
        let mut reports = vec![lrep.clone()];
        self.reports.push(lrep);
        for &path in blocks {
            let mut rdr = csv_reader(path)?;
            let header = read_header(&mut rdr, path)?;
            let c_net = column(&header, "network", path)?;
            let c_geo = column(&header, "geoname_id", path)?;
            let mut rep = LoadReport::new(path);
            loop {
                let line = rdr.position().line();
                match rdr.read_record(&mut rec) {
                    Ok(false) => break,
                    Ok(true) => {}
                    Err(e) => {
                        rep.lines += 1;
                        rep.bad(line, format!("unreadable: {e}"));
                        if e.is_io_error() {
                            break;
                        }
                        continue;
                    }
                }
                rep.lines += 1;
                let res = (|| -> Result<(), String> {
                    let (s, e) = parse_network(rec.get(c_net).unwrap_or(""))?;
                    let (country, city) = match opt(rec.get(c_geo)) {
                        None => (None, None),
                        Some(g) => {
                            let id: u32 = g.parse().map_err(|_| format!("bad geoname_id {g:?}"))?;
                            loc.get(&id).cloned().ok_or_else(|| {
                                format!("geoname_id {id} not in {}", locations.display())
                            })?
                        }
                    };
                    let r = RangeRecord {
                        country,
                        city,
                        ..Default::default()
                    };
                    self.add_range(s, e, r).map_err(|e| e.to_string())
                })();
                match res {
                    Ok(()) => rep.ranges += 1,
                    Err(e) => rep.bad(line, e),
                }
            }
            // A geo map answers country even when the file's rows all lack one.
            self.provides.country = true;
            if c_city.is_some() {
                self.provides.city = true;
            }
            reports.push(self.finish_report(rep)?.clone());
        }
        Ok(reports)
    }

    /// Loads a `ipIntStart,ipIntEnd,AS name` CSV (IPv4 as unsigned integers, inclusive ends).
    /// A first line whose first field is not a number is a header. When the name starts with
    /// `AS<digits>` followed by a space (or is only that), the digits are the ASN and the rest
    /// the organization; otherwise the whole name is the organization. Unquoted commas in the
    /// name are kept.
    pub fn add_int_ranges(&mut self, path: &Path) -> anyhow::Result<&LoadReport> {
        let mut rdr = csv_reader(path)?;
        let mut rep = LoadReport::new(path);
        let mut rec = csv::StringRecord::new();
        let mut first = true;
        loop {
            let line = rdr.position().line();
            match rdr.read_record(&mut rec) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    rep.lines += 1;
                    rep.bad(line, format!("unreadable: {e}"));
                    if e.is_io_error() {
                        break;
                    }
                    continue;
                }
            }
            let is_header = first
                && rec.get(0).is_some_and(|f| {
                    f.trim()
                        .trim_start_matches('\u{feff}')
                        .parse::<u64>()
                        .is_err()
                });
            first = false;
            if is_header {
                continue;
            }
            rep.lines += 1;
            let res = (|| -> Result<(), String> {
                if rec.len() < 3 {
                    return Err(format!("{} fields, expected 3", rec.len()));
                }
                let p = |i: usize| -> Result<u32, String> {
                    let f = rec.get(i).unwrap_or("").trim();
                    f.parse::<u32>()
                        .map_err(|_| format!("bad IPv4 integer {f:?}"))
                };
                let (s, e) = (p(0)?, p(1)?);
                if s > e {
                    return Err(format!("start {s} > end {e}"));
                }
                let name = rec.iter().skip(2).collect::<Vec<_>>().join(",");
                let (asn, org) = split_as_name(&name);
                let r = RangeRecord {
                    asn,
                    as_org: self.intern(org),
                    ..Default::default()
                };
                self.add_range(
                    IpAddr::V4(Ipv4Addr::from(s)),
                    IpAddr::V4(Ipv4Addr::from(e)),
                    r,
                )
                .map_err(|e| e.to_string())
            })();
            match res {
                Ok(()) => rep.ranges += 1,
                Err(e) => rep.bad(line, e),
            }
        }
        self.provides.asn = true;
        self.finish_report(rep)
    }

    /// Loads a CSV whose kind is told by its first line: a GeoLite2 ASN header, a GeoLite2
    /// Country/City blocks header (the locations file is the sibling
    /// `<Edition>-Locations-en.csv[.gz]`), or integer ranges.
    pub fn add_csv_auto(&mut self, path: &Path) -> anyhow::Result<Vec<LoadReport>> {
        let mut rdr = csv_reader(path)?;
        let header = read_header(&mut rdr, path)?;
        let has = |n: &str| {
            header
                .iter()
                .any(|h| h.trim().trim_start_matches('\u{feff}') == n)
        };
        if has("autonomous_system_number") {
            Ok(vec![self.add_geolite2_asn(path)?.clone()])
        } else if has("geoname_id") && has("network") {
            let locations = sibling_locations(path)?;
            self.add_geolite2_geo(&[path], &locations)
        } else {
            Ok(vec![self.add_int_ranges(path)?.clone()])
        }
    }

    fn finish_report(&mut self, rep: LoadReport) -> anyhow::Result<&LoadReport> {
        if rep.ranges == 0 {
            bail!("{}: no usable ranges ({rep})", rep.path.display());
        }
        self.names.push(rep.path.display().to_string());
        self.reports.push(rep);
        Ok(self.reports.last().expect("just pushed"))
    }

    /// Builds the map (flattening overlaps; see the module documentation).
    pub fn build(self) -> RangeDb {
        RangeDb {
            name: self.names.join(", "),
            v4: flatten(&self.raw4),
            v6: flatten(&self.raw6),
            records: self.records,
            provides: self.provides,
            reports: self.reports,
        }
    }
}

/// `AS1234 Foo` -> (1234, "Foo"); `AS1234` -> (1234, None); anything else -> (None, name).
pub fn split_as_name(name: &str) -> (Option<u32>, Option<&str>) {
    let n = name.trim();
    if let Some(rest) = n.strip_prefix("AS").or_else(|| n.strip_prefix("as")) {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            let after = &rest[digits..];
            if after.is_empty() || after.starts_with(' ') || after.starts_with('\t') {
                if let Ok(asn) = rest[..digits].parse::<u32>() {
                    let org = opt(Some(after));
                    return (Some(asn), org);
                }
            }
        }
    }
    (None, opt(Some(n)))
}

fn sibling_locations(blocks: &Path) -> anyhow::Result<PathBuf> {
    let file = blocks
        .file_name()
        .and_then(|f| f.to_str())
        .ok_or_else(|| anyhow!("{}: no file name", blocks.display()))?;
    let edition = file
        .split("-Blocks-")
        .next()
        .filter(|e| *e != file)
        .ok_or_else(|| anyhow!("{}: cannot tell the locations file from the name (expected <Edition>-Blocks-IPv4.csv)", blocks.display()))?;
    let dir = blocks.parent().unwrap_or(Path::new("."));
    for cand in [
        format!("{edition}-Locations-en.csv"),
        format!("{edition}-Locations-en.csv.gz"),
    ] {
        let p = dir.join(cand);
        if p.exists() {
            return Ok(p);
        }
    }
    bail!(
        "{}: needs {edition}-Locations-en.csv next to it to join geoname_id",
        blocks.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_names() {
        assert_eq!(
            split_as_name("AS15169 Google LLC"),
            (Some(15169), Some("Google LLC"))
        );
        assert_eq!(split_as_name("AS7"), (Some(7), None));
        assert_eq!(split_as_name("ASTRO Corp"), (None, Some("ASTRO Corp")));
        assert_eq!(split_as_name("AS12x Foo"), (None, Some("AS12x Foo")));
        assert_eq!(split_as_name("Not routed"), (None, Some("Not routed")));
        assert_eq!(split_as_name(""), (None, None));
    }

    #[test]
    fn networks() {
        let (s, e) = parse_network("10.1.2.3/8").unwrap();
        assert_eq!(s.to_string(), "10.0.0.0");
        assert_eq!(e.to_string(), "10.255.255.255");
        let (s, e) = parse_network("2001:db8::/32").unwrap();
        assert_eq!(s.to_string(), "2001:db8::");
        assert_eq!(e.to_string(), "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff");
        assert_eq!(
            parse_network("0.0.0.0/0").unwrap().1.to_string(),
            "255.255.255.255"
        );
        assert!(parse_network("10.0.0.0/33").is_err());
        assert!(parse_network("10.0.0.0").is_err());
    }

    #[test]
    fn flatten_nested_and_edges() {
        let raw = vec![
            Raw {
                start: 0u32,
                end: u32::MAX,
                rec: 0,
            },
            Raw {
                start: 10,
                end: 20,
                rec: 1,
            },
            Raw {
                start: 15,
                end: 15,
                rec: 2,
            },
            Raw {
                start: 21,
                end: 30,
                rec: 1,
            },
        ];
        let f = flatten(&raw);
        assert_eq!(
            f,
            vec![
                (0, 9, 0),
                (10, 14, 1),
                (15, 15, 2),
                (16, 20, 1),
                // 21..=30 has the same record but a different input range: merged.
                (21, 30, 1),
                (31, u32::MAX, 0)
            ]
            .into_iter()
            .fold(Vec::new(), |mut v: Vec<(u32, u32, u32)>, r| {
                match v.last_mut() {
                    Some(l) if l.2 == r.2 && l.1 + 1 == r.0 => l.1 = r.1,
                    _ => v.push(r),
                }
                v
            })
        );
        assert_eq!(find(&f, 15), Some(2));
        assert_eq!(find(&f, u32::MAX), Some(0));
        let f6 = flatten(&[Raw {
            start: u128::MAX - 1,
            end: u128::MAX,
            rec: 3,
        }]);
        assert_eq!(find(&f6, u128::MAX), Some(3));
        assert_eq!(find(&f6, 5), None);
    }
}
