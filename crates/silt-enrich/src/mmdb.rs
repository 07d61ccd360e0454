//! MaxMind DB files (GeoLite2/GeoIP2 ASN, Country, City, ISP; also DB-IP's `*-ASN`/`*-City`/
//! `*-Country` files, which use the same format and field names) read through the `maxminddb`
//! crate.
//!
//! Touches only the file it is asked to open, which it reads whole into memory once (so a file
//! replaced on disk later does not affect a running reader; reloading opens the new file). The
//! kind of database comes from its metadata `database_type`. [`MmdbDb::open`] runs
//! `maxminddb`'s full `verify()` and a few sanity lookups, so a truncated, corrupt, empty or
//! non-MMDB file fails at open with the file name and the reason, never later and never with a
//! panic (a panic inside the reader is caught and turned into an error as well).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use maxminddb::{geoip2, LookupResult, Reader};
use serde::Deserialize;

use crate::databases::Info;

/// What a MaxMind DB file holds, from its `database_type` metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmdbKind {
    /// `GeoLite2-ASN`, `DBIP-ASN-Lite`...: ASN and AS organization.
    Asn,
    /// `GeoLite2-Country`, `GeoIP2-Country`...: country ISO code.
    Country,
    /// `GeoLite2-City`, `GeoIP2-City`, `GeoIP2-Enterprise`...: country ISO code and city name.
    City,
    /// `GeoIP2-ISP`: ASN, AS organization, ISP and organization.
    Isp,
}

impl MmdbKind {
    /// The kind for a `database_type`; `None` when silt cannot use it.
    pub fn from_database_type(t: &str) -> Option<MmdbKind> {
        let l = t.to_ascii_lowercase();
        if l.contains("isp") {
            Some(MmdbKind::Isp)
        } else if l.contains("asn") {
            Some(MmdbKind::Asn)
        } else if l.contains("city") || l.contains("enterprise") {
            Some(MmdbKind::City)
        } else if l.contains("country") {
            Some(MmdbKind::Country)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MmdbKind::Asn => "ASN",
            MmdbKind::Country => "Country",
            MmdbKind::City => "City",
            MmdbKind::Isp => "ISP",
        }
    }
}

/// One opened and verified MaxMind DB file.
pub struct MmdbDb {
    path: PathBuf,
    kind: MmdbKind,
    reader: Reader<Vec<u8>>,
}

impl std::fmt::Debug for MmdbDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmdbDb")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("database_type", &self.reader.metadata().database_type)
            .finish()
    }
}

#[derive(Deserialize)]
struct IsoOnly<'a> {
    #[serde(borrow, default)]
    iso_code: Option<&'a str>,
}

#[derive(Deserialize)]
struct CountryLite<'a> {
    #[serde(borrow, default)]
    country: Option<IsoOnly<'a>>,
}

#[derive(Deserialize)]
struct EnName<'a> {
    #[serde(borrow, default)]
    en: Option<&'a str>,
}

#[derive(Deserialize)]
struct CityNames<'a> {
    #[serde(borrow, default)]
    names: Option<EnName<'a>>,
}

#[derive(Deserialize)]
struct CityLite<'a> {
    #[serde(borrow, default)]
    country: Option<IsoOnly<'a>>,
    #[serde(borrow, default)]
    city: Option<CityNames<'a>>,
}

/// A found record: its identity (the data-section offset, equal for every address that shares
/// the record) and a way to decode it.
pub struct MmdbHit<'a> {
    kind: MmdbKind,
    result: LookupResult<'a, Vec<u8>>,
}

impl<'a> MmdbHit<'a> {
    /// The record's identity within its database.
    pub fn key(&self) -> u64 {
        self.result.offset().unwrap_or(0) as u64
    }

    /// Decodes the fields silt uses.
    pub fn info(&self) -> anyhow::Result<Info<'a>> {
        let mut info = Info::default();
        match self.kind {
            MmdbKind::Asn => {
                if let Some(r) = self.result.decode::<geoip2::Asn<'a>>()? {
                    info.asn = r.autonomous_system_number;
                    info.as_org = r.autonomous_system_organization;
                }
            }
            MmdbKind::Isp => {
                if let Some(r) = self.result.decode::<geoip2::Isp<'a>>()? {
                    info.asn = r.autonomous_system_number;
                    info.as_org = r.autonomous_system_organization;
                    info.isp = r.isp;
                    info.organization = r.organization;
                }
            }
            MmdbKind::Country => {
                if let Some(r) = self.result.decode::<CountryLite<'a>>()? {
                    info.country = r.country.and_then(|c| c.iso_code);
                }
            }
            MmdbKind::City => {
                if let Some(r) = self.result.decode::<CityLite<'a>>()? {
                    info.country = r.country.and_then(|c| c.iso_code);
                    info.city = r.city.and_then(|c| c.names).and_then(|n| n.en);
                }
            }
        }
        Ok(info)
    }
}

impl MmdbDb {
    /// Opens, verifies and sanity-checks a MaxMind DB file; see the module documentation.
    pub fn open(path: &Path) -> anyhow::Result<MmdbDb> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read MaxMind DB file {}", path.display()))?;
        Self::from_bytes(path, bytes)
    }

    /// Like [`MmdbDb::open`] on bytes already read; `path` is only used in messages.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> anyhow::Result<MmdbDb> {
        let shown = path.display();
        if bytes.is_empty() {
            bail!("MaxMind DB file {shown} is empty");
        }
        let len = bytes.len();
        let opened = catch_unwind(AssertUnwindSafe(move || open_checked(bytes)))
            .map_err(|p| anyhow!("the MaxMind DB reader panicked: {}", panic_text(&p)));
        let (reader, kind) = opened
            .and_then(|r| r)
            .with_context(|| format!("bad MaxMind DB file {shown} ({len} bytes)"))?;
        Ok(MmdbDb {
            path: path.to_path_buf(),
            kind,
            reader,
        })
    }

    pub fn kind(&self) -> MmdbKind {
        self.kind
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `database_type` metadata (`GeoLite2-ASN`).
    pub fn database_type(&self) -> &str {
        &self.reader.metadata().database_type
    }

    /// The build time (seconds since the epoch) from the metadata.
    pub fn build_epoch(&self) -> u64 {
        self.reader.metadata().build_epoch
    }

    /// `file (GeoLite2-ASN, built 1700000000)` for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, built {})",
            self.path.display(),
            self.database_type(),
            self.build_epoch()
        )
    }

    /// Looks `ip` up as given (callers fold IPv4-mapped IPv6 to IPv4 first, see
    /// [`crate::ipparse::lookup_addr`]). An IPv6 address in an IPv4-only database is not
    /// found, not an error.
    pub fn locate(&self, ip: IpAddr) -> anyhow::Result<Option<MmdbHit<'_>>> {
        if ip.is_ipv6() && self.reader.metadata().ip_version == 4 {
            return Ok(None);
        }
        let result = self
            .reader
            .lookup(ip)
            .with_context(|| format!("lookup of {ip} in {}", self.path.display()))?;
        Ok(result.has_data().then_some(MmdbHit {
            kind: self.kind,
            result,
        }))
    }

    /// The fields for `ip`, `None` when not found.
    pub fn info(&self, ip: IpAddr) -> anyhow::Result<Option<Info<'_>>> {
        match self.locate(ip)? {
            Some(h) => h.info().map(Some),
            None => Ok(None),
        }
    }
}

fn open_checked(bytes: Vec<u8>) -> anyhow::Result<(Reader<Vec<u8>>, MmdbKind)> {
    let reader = Reader::from_source(bytes).map_err(|e| anyhow!("not a valid MaxMind DB: {e}"))?;
    // Verify before looking at the type, so a corrupt file is reported as corrupt.
    reader
        .verify()
        .map_err(|e| anyhow!("verification failed: {e}"))?;
    let md = reader.metadata();
    let kind = MmdbKind::from_database_type(&md.database_type).ok_or_else(|| {
        anyhow!(
            "database_type {:?} is not one silt uses (expected an ASN, ISP, Country or City database)",
            md.database_type
        )
    })?;
    // Sanity lookups: verify() walks the whole file, but decoding our own record shapes is
    // what the enricher will do, so do it once for a few addresses.
    let mut probes: Vec<IpAddr> = vec![
        IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1)),
        IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8)),
        IpAddr::V4(Ipv4Addr::new(81, 2, 69, 142)),
    ];
    if md.ip_version == 6 {
        probes.push(IpAddr::V6(Ipv6Addr::new(0x2001, 0x4860, 0, 0, 0, 0, 0, 1)));
        probes.push(IpAddr::V6(Ipv6Addr::new(0x2a02, 0xcf40, 0, 0, 0, 0, 0, 1)));
    }
    for ip in probes {
        let r = reader
            .lookup(ip)
            .map_err(|e| anyhow!("sanity lookup of {ip} failed: {e}"))?;
        if r.has_data() {
            let hit = MmdbHit { kind, result: r };
            hit.info()
                .map_err(|e| anyhow!("sanity lookup of {ip} failed to decode: {e}"))?;
        }
    }
    Ok((reader, kind))
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}
