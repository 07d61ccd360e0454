//! [`Databases`]: the set of lookup sources one enricher (or one SQL session) uses, and the
//! public per-address functions the SQL UDFs call.
//!
//! Touches nothing by itself: the sources are opened by [`crate::mmdb`] and [`crate::ranges`]
//! (which read the files they are given) and the reverse-DNS index is whatever
//! [`NameLookup`] the caller hands in. A `Databases` is immutable once built; the enricher
//! swaps whole sets on reload ([`crate::EnrichHandle::reload`]).
//!
//! Roles: `asn`/`as_org` come from an ASN database, or from an ISP database when no ASN
//! database is given, or from a range map that has ASNs; `country` from a Country database,
//! else a City database, else a range map with countries; `city` only from a City database or
//! a range map built from GeoLite2 City CSV; `isp`/`organization` only from an ISP database.
//! Giving two sources for the same role is an error.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::bail;

use crate::ipparse::{lookup_addr, parse_ip};
use crate::mmdb::{MmdbDb, MmdbHit, MmdbKind};
use crate::names::NameLookup;
use crate::ranges::RangeDb;

/// The fields silt reads for one address, borrowed from the database.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Info<'a> {
    pub asn: Option<u32>,
    pub as_org: Option<&'a str>,
    pub country: Option<&'a str>,
    pub city: Option<&'a str>,
    pub isp: Option<&'a str>,
    pub organization: Option<&'a str>,
}

/// One lookup source: a MaxMind DB file or an in-memory range map.
#[derive(Debug)]
pub enum Source {
    Mmdb(MmdbDb),
    Ranges(RangeDb),
}

/// A found record of a [`Source`]; see [`Source::locate`].
pub enum Hit<'a> {
    Mmdb(MmdbHit<'a>),
    Range(&'a RangeDb, u32),
}

impl<'a> Hit<'a> {
    /// The record's identity within its source: equal keys mean equal [`Hit::info`].
    pub fn key(&self) -> u64 {
        match self {
            Hit::Mmdb(h) => h.key(),
            Hit::Range(_, r) => u64::from(*r),
        }
    }

    pub fn info(&self) -> anyhow::Result<Info<'a>> {
        match self {
            Hit::Mmdb(h) => h.info(),
            Hit::Range(db, r) => Ok(db.record_info(*r)),
        }
    }
}

impl Source {
    /// Finds the record for `ip` (already folded by [`lookup_addr`]).
    pub fn locate(&self, ip: IpAddr) -> anyhow::Result<Option<Hit<'_>>> {
        match self {
            Source::Mmdb(m) => Ok(m.locate(ip)?.map(Hit::Mmdb)),
            Source::Ranges(r) => Ok(r.locate(ip).map(|i| Hit::Range(r, i))),
        }
    }

    pub fn info(&self, ip: IpAddr) -> anyhow::Result<Option<Info<'_>>> {
        match self.locate(ip)? {
            Some(h) => h.info().map(Some),
            None => Ok(None),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Source::Mmdb(m) => m.describe(),
            Source::Ranges(r) => r.describe(),
        }
    }
}

/// The lookup sources for each role; see the module documentation.
#[derive(Default, Clone)]
pub struct Databases {
    asn: Option<Arc<Source>>,
    isp: Option<Arc<Source>>,
    country: Option<Arc<Source>>,
    city: Option<Arc<Source>>,
    names: Option<Arc<dyn NameLookup>>,
}

impl std::fmt::Debug for Databases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe().join("; "))
    }
}

fn set(slot: &mut Option<Arc<Source>>, role: &str, src: Arc<Source>) -> anyhow::Result<()> {
    if let Some(old) = slot {
        bail!(
            "two {role} databases given: {} and {}",
            old.describe(),
            src.describe()
        );
    }
    *slot = Some(src);
    Ok(())
}

impl Databases {
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a MaxMind DB file and files it under the role its `database_type` says.
    pub fn add_mmdb(&mut self, path: &Path) -> anyhow::Result<MmdbKind> {
        let db = MmdbDb::open(path)?;
        let kind = db.kind();
        self.add_source(Source::Mmdb(db))?;
        Ok(kind)
    }

    /// Adds one file, for a CLI option such as `--enrich-db FILE`: a MaxMind DB (told by its
    /// content, not its name) or a CSV range map ([`crate::ranges::RangeDbBuilder::add_csv_auto`]).
    /// Returns what was loaded, one line per file (with bad-line counts for CSV).
    pub fn add_file(&mut self, path: &Path) -> anyhow::Result<Vec<String>> {
        let bytes = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let is_mmdb = bytes
            .windows(14)
            .rev()
            .take(128 * 1024)
            .any(|w| w == b"\xab\xcd\xefMaxMind.com");
        if is_mmdb || path.extension().is_some_and(|e| e == "mmdb") {
            let db = MmdbDb::from_bytes(path, bytes)?;
            let line = db.describe();
            self.add_source(Source::Mmdb(db))?;
            return Ok(vec![line]);
        }
        drop(bytes);
        let mut b = crate::ranges::RangeDbBuilder::new();
        let reports = b.add_csv_auto(path)?;
        self.add_source(Source::Ranges(b.build()))?;
        Ok(reports.iter().map(|r| r.to_string()).collect())
    }

    /// Adds a source under the roles it can fill (a range map with ASNs and countries fills
    /// both).
    pub fn add_source(&mut self, src: Source) -> anyhow::Result<()> {
        let src = Arc::new(src);
        match &*src {
            Source::Mmdb(m) => match m.kind() {
                MmdbKind::Asn => set(&mut self.asn, "ASN", src),
                MmdbKind::Isp => set(&mut self.isp, "ISP", src),
                MmdbKind::Country => set(&mut self.country, "Country", src),
                MmdbKind::City => set(&mut self.city, "City", src),
            },
            Source::Ranges(r) => {
                let p = r.provides();
                if !(p.asn || p.country || p.city) {
                    bail!("range map {} provides nothing", r.describe());
                }
                if p.asn {
                    set(&mut self.asn, "ASN", src.clone())?;
                }
                if p.city {
                    set(&mut self.city, "City", src)
                } else if p.country {
                    set(&mut self.country, "Country", src)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Sets the reverse-DNS index.
    pub fn set_names(&mut self, names: Arc<dyn NameLookup>) {
        self.names = Some(names);
    }

    /// The source of `asn`/`as_org`.
    pub fn asn_source(&self) -> Option<&Arc<Source>> {
        self.asn.as_ref().or(self.isp.as_ref())
    }

    /// The source of `country`.
    pub fn country_source(&self) -> Option<&Arc<Source>> {
        self.country.as_ref().or(self.city.as_ref())
    }

    /// The source of `city` (a City database or a range map with cities).
    pub fn city_source(&self) -> Option<&Arc<Source>> {
        self.city.as_ref()
    }

    /// The ISP database.
    pub fn isp_source(&self) -> Option<&Arc<Source>> {
        self.isp.as_ref()
    }

    pub fn names(&self) -> Option<&Arc<dyn NameLookup>> {
        self.names.as_ref()
    }

    /// One line per configured source, for messages.
    pub fn describe(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (role, s) in [
            ("asn", &self.asn),
            ("isp", &self.isp),
            ("country", &self.country),
            ("city", &self.city),
        ] {
            if let Some(s) = s {
                v.push(format!("{role}: {}", s.describe()));
            }
        }
        if let Some(n) = &self.names {
            v.push(format!("rdns: {}", n.describe()));
        }
        v
    }

    fn info_of<'a>(src: Option<&'a Arc<Source>>, ip: &str) -> Option<Info<'a>> {
        let ip = lookup_addr(parse_ip(ip.trim().as_bytes())?);
        src?.info(ip).ok().flatten()
    }

    /// The ASN of `ip` (address text), `None` when not found, not an address, or no source.
    pub fn asn(&self, ip: &str) -> Option<u32> {
        Self::info_of(self.asn_source(), ip)?.asn
    }

    /// The AS organization of `ip`.
    pub fn as_org(&self, ip: &str) -> Option<&str> {
        Self::info_of(self.asn_source(), ip)?.as_org
    }

    /// The ISO 3166-1 country code of `ip`.
    pub fn country(&self, ip: &str) -> Option<&str> {
        Self::info_of(self.country_source(), ip)?.country
    }

    /// The English city name of `ip` (needs a City database).
    pub fn city(&self, ip: &str) -> Option<&str> {
        Self::info_of(self.city_source(), ip)?.city
    }

    /// The ISP name of `ip` (needs an ISP database).
    pub fn isp(&self, ip: &str) -> Option<&str> {
        Self::info_of(self.isp_source(), ip)?.isp
    }

    /// The organization of `ip` (needs an ISP database).
    pub fn organization(&self, ip: &str) -> Option<&str> {
        Self::info_of(self.isp_source(), ip)?.organization
    }

    /// The reverse-DNS name of `ip`; `Ok(None)` when not found, not an address, or no index.
    pub fn rdns(&self, ip: &str) -> anyhow::Result<Option<Arc<str>>> {
        let (Some(n), Some(ip)) = (&self.names, parse_ip(ip.trim().as_bytes())) else {
            return Ok(None);
        };
        n.lookup_one(lookup_addr(ip))
    }

    /// The reverse-DNS names of many addresses at once (for a vectorized UDF).
    pub fn rdns_many(
        &self,
        ips: &[Option<&str>],
        out: &mut Vec<Option<Arc<str>>>,
    ) -> anyhow::Result<()> {
        out.clear();
        let Some(n) = &self.names else {
            out.resize(ips.len(), None);
            return Ok(());
        };
        let parsed: Vec<Option<IpAddr>> = ips
            .iter()
            .map(|s| {
                s.and_then(|s| parse_ip(s.trim().as_bytes()))
                    .map(lookup_addr)
            })
            .collect();
        n.lookup_many(&parsed, out)
    }
}
