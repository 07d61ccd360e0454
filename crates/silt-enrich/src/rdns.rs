//! The reverse-DNS index of `silt-rdns` as this crate's [`NameLookup`]. Touches only the index
//! file it opens (memory-mapped, read-only).

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use crate::NameLookup;

/// A `silt index rdns` index, opened (and checked) once, shared by every batch.
pub struct RdnsNames(silt_rdns::RdnsIndex);

impl RdnsNames {
    /// Opens `path`; a missing, truncated or corrupt index is an error here, not at lookup.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let idx = silt_rdns::RdnsIndex::open(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot use the reverse-DNS index {}: {e:#} (build it with `silt index rdns FILE.csv.gz -o INDEX`)",
                path.display()
            )
        })?;
        Ok(Self(idx))
    }
}

impl NameLookup for RdnsNames {
    fn lookup_many(
        &self,
        ips: &[Option<IpAddr>],
        out: &mut Vec<Option<Arc<str>>>,
    ) -> anyhow::Result<()> {
        self.0
            .lookup_many(ips, out)
            .map_err(|e| anyhow::anyhow!("reverse-DNS index {}: {e:#}", self.0.path().display()))
    }

    fn describe(&self) -> String {
        format!("rdns index {}", self.0.path().display())
    }
}
