//! IP enrichment for silt: adds ASN, AS organization, country, city and reverse-DNS columns
//! next to the address columns of record batches (`--enrich asn,geo,rdns`), and exposes the
//! same lookups for SQL functions.
//!
//! Modules:
//! - [`mmdb`]: MaxMind DB files (ASN, Country, City, ISP), verified at open;
//! - [`ranges`]: in-memory range maps from GeoLite2 CSV or `ipIntStart,ipIntEnd,AS name` CSV;
//! - [`names`]: the reverse-DNS seam [`NameLookup`] and a `HashMap` implementation;
//! - [`databases`]: [`Databases`], the set of sources, and the per-address functions for UDFs;
//! - [`columns`]: which columns are enriched by default and the naming rule;
//! - [`enricher`]: [`Enricher`] (a [`silt_core::Transform`]) and its reload [`EnrichHandle`];
//! - [`ipparse`]: fast address parsing from column bytes;
//! - [`rdns`]: [`RdnsNames`], the `silt-rdns` index behind [`NameLookup`].
//!
//! The crate reads only the database files it is given; it writes nothing. See `ENRICH.md`.

pub mod columns;
pub mod databases;
pub mod enricher;
pub mod ipparse;
pub mod mmdb;
pub mod names;
pub mod ranges;
pub mod rdns;

pub use databases::{Databases, Info, Source};
pub use enricher::{Attrs, EnrichConfig, EnrichHandle, Enricher, OutKind};
pub use mmdb::{MmdbDb, MmdbKind};
pub use names::{MapNames, NameLookup};
pub use ranges::{LoadReport, RangeDb, RangeDbBuilder, RangeRecord};
pub use rdns::RdnsNames;

#[cfg(test)]
mod tests {
    #[test]
    fn shared_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<crate::Databases>();
        send_sync::<crate::EnrichHandle>();
        send::<crate::Enricher>();
    }
}
