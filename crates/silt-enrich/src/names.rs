//! The reverse-DNS seam: [`NameLookup`], which another crate implements over its mmapped
//! index, and [`MapNames`], a `HashMap`-backed implementation for tests and small tables.
//!
//! Touches nothing but what an implementation holds; the enricher calls it once per batch with
//! the batch's addresses that were not in its cache (already deduplicated).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// Address -> host name, batch-oriented so an implementation can sort and deduplicate.
///
/// `lookup_many` must clear `out` and push exactly one entry per element of `ips`, in order:
/// `None` for a `None` address or an address without a name. An `Err` means the index itself
/// failed (I/O, corruption), not that a name is missing.
pub trait NameLookup: Send + Sync {
    fn lookup_many(
        &self,
        ips: &[Option<IpAddr>],
        out: &mut Vec<Option<Arc<str>>>,
    ) -> anyhow::Result<()>;

    /// A short description for messages (`rdns index /var/lib/silt/rdns.idx`).
    fn describe(&self) -> String {
        "reverse DNS".to_string()
    }

    /// One address; the default goes through [`NameLookup::lookup_many`].
    fn lookup_one(&self, ip: IpAddr) -> anyhow::Result<Option<Arc<str>>> {
        let mut out = Vec::with_capacity(1);
        self.lookup_many(&[Some(ip)], &mut out)?;
        Ok(out.pop().flatten())
    }
}

/// A [`NameLookup`] over a `HashMap`. IPv4-mapped IPv6 keys and queries are folded to IPv4.
#[derive(Debug, Default, Clone)]
pub struct MapNames {
    map: HashMap<IpAddr, Arc<str>>,
}

impl MapNames {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces the name of `ip`.
    pub fn insert(&mut self, ip: IpAddr, name: &str) {
        self.map.insert(ip.to_canonical(), Arc::from(name));
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl FromIterator<(IpAddr, String)> for MapNames {
    fn from_iter<T: IntoIterator<Item = (IpAddr, String)>>(iter: T) -> Self {
        let mut m = MapNames::new();
        for (ip, n) in iter {
            m.insert(ip, &n);
        }
        m
    }
}

impl NameLookup for MapNames {
    fn lookup_many(
        &self,
        ips: &[Option<IpAddr>],
        out: &mut Vec<Option<Arc<str>>>,
    ) -> anyhow::Result<()> {
        out.clear();
        out.extend(
            ips.iter()
                .map(|ip| ip.and_then(|ip| self.map.get(&ip.to_canonical()).cloned())),
        );
        Ok(())
    }

    fn describe(&self) -> String {
        format!("in-memory name map ({} names)", self.map.len())
    }
}
