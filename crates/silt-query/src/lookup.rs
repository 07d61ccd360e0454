//! After-the-fact enrichment in SQL: `asn(ip) -> INT UNSIGNED`, `as_org(ip)`,
//! `geo_country(ip)`, `geo_city(ip)` and `rdns(ip) -> VARCHAR`, looked up in the databases given
//! to `silt query` / `silt serve` (`--mmdb`, `--ip-ranges`, `--rdns`; see `docs/enrich.md`), the
//! same lookups `--enrich` does at ingest (`silt_enrich::Databases`).
//!
//! - The argument is address text of any string type; NULL, a non-address or an address not
//!   found gives NULL. IPv4-mapped IPv6 addresses are looked up as IPv4.
//! - A function whose database was not given is an error naming the option to add (never a
//!   column of NULLs that looks like "not found").
//! - Each distinct address of a batch is looked up once; `rdns` goes to the index one batch at a
//!   time (sorted lookups, one block read per batch).
//!
//! Touches nothing but its arguments and the (read-only) databases.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, StringBuilder, UInt32Builder};
use arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use silt_enrich::Databases;

use crate::cidr::strings;

/// What a function returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Asn,
    AsOrg,
    Country,
    City,
    Rdns,
}

impl Kind {
    const ALL: [(Kind, &'static str); 5] = [
        (Kind::Asn, "asn"),
        (Kind::AsOrg, "as_org"),
        (Kind::Country, "geo_country"),
        (Kind::City, "geo_city"),
        (Kind::Rdns, "rdns"),
    ];

    /// `None` when the databases can answer; else what to give.
    fn missing(self, dbs: &Databases) -> Option<&'static str> {
        match self {
            Kind::Asn | Kind::AsOrg => dbs
                .asn_source()
                .is_none()
                .then_some("an ASN database: --mmdb GeoLite2-ASN.mmdb (or an ISP .mmdb, or --ip-ranges with AS numbers)"),
            Kind::Country => dbs
                .country_source()
                .is_none()
                .then_some("a Country or City database: --mmdb GeoLite2-Country.mmdb"),
            Kind::City => dbs
                .city_source()
                .is_none()
                .then_some("a City database: --mmdb GeoLite2-City.mmdb"),
            Kind::Rdns => dbs
                .names()
                .is_none()
                .then_some("a reverse-DNS index: --rdns INDEX (built by `silt index rdns`)"),
        }
    }
}

/// One lookup function; see the module documentation.
#[derive(Debug)]
struct Lookup {
    name: &'static str,
    kind: Kind,
    dbs: Arc<Databases>,
    signature: Signature,
}

impl PartialEq for Lookup {
    fn eq(&self, o: &Self) -> bool {
        self.kind == o.kind && Arc::ptr_eq(&self.dbs, &o.dbs)
    }
}
impl Eq for Lookup {}
impl std::hash::Hash for Lookup {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.kind.hash(h);
        (Arc::as_ptr(&self.dbs) as usize).hash(h);
    }
}

/// The five lookup functions over `dbs`, ready to register.
pub fn lookup_udfs(dbs: Arc<Databases>) -> Vec<ScalarUDF> {
    Kind::ALL
        .iter()
        .map(|&(kind, name)| {
            ScalarUDF::new_from_impl(Lookup {
                name,
                kind,
                dbs: dbs.clone(),
                signature: Signature::string(1, Volatility::Immutable),
            })
        })
        .collect()
}

impl ScalarUDFImpl for Lookup {
    fn name(&self) -> &str {
        self.name
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            Kind::Asn => DataType::UInt32,
            _ => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if let Some(what) = self.kind.missing(&self.dbs) {
            return exec_err!("{}() needs {what}", self.name);
        }
        let [arg] = args.args.as_slice() else {
            return exec_err!("{}() takes one address", self.name);
        };
        let scalar = matches!(arg, ColumnarValue::Scalar(_));
        let array = arg.to_array(args.number_rows)?;
        let out = self.lookup(&array)?;
        Ok(if scalar {
            ColumnarValue::Scalar(datafusion::common::ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

impl Lookup {
    fn lookup(&self, a: &ArrayRef) -> Result<ArrayRef> {
        let values: Vec<Option<&str>> = strings(a)?.collect();
        let dbs = &self.dbs;
        match self.kind {
            Kind::Asn => {
                let mut seen: HashMap<&str, Option<u32>> = HashMap::new();
                let mut b = UInt32Builder::with_capacity(values.len());
                for v in &values {
                    b.append_option(v.and_then(|s| *seen.entry(s).or_insert_with(|| dbs.asn(s))));
                }
                Ok(Arc::new(b.finish()))
            }
            Kind::Rdns => {
                let mut names = Vec::with_capacity(values.len());
                dbs.rdns_many(&values, &mut names).map_err(|e| {
                    datafusion::error::DataFusionError::Execution(format!("rdns(): {e:#}"))
                })?;
                let mut b = StringBuilder::with_capacity(values.len(), 32 * values.len());
                for n in &names {
                    b.append_option(n.as_deref());
                }
                Ok(Arc::new(b.finish()))
            }
            kind => {
                let get = |s: &str| -> Option<String> {
                    match kind {
                        Kind::AsOrg => dbs.as_org(s),
                        Kind::Country => dbs.country(s),
                        _ => dbs.city(s),
                    }
                    .map(str::to_string)
                };
                let mut seen: HashMap<&str, Option<String>> = HashMap::new();
                let mut b = StringBuilder::with_capacity(values.len(), 16 * values.len());
                for v in &values {
                    match v {
                        Some(s) => {
                            b.append_option(seen.entry(s).or_insert_with(|| get(s)).as_deref())
                        }
                        None => b.append_null(),
                    }
                }
                Ok(Arc::new(b.finish()))
            }
        }
    }
}
