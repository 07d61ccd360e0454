//! `cidr_contains(cidr, addr) -> BOOLEAN`: whether address text `addr` lies in subnet `cidr`.
//!
//! - Arguments are strings (`Utf8`, `LargeUtf8` or `Utf8View`; DataFusion coerces both to one
//!   type). IPv4 and IPv6. A bare address as `cidr` means a single host (`/32`, `/128`). Host
//!   bits in `cidr` are ignored (`10.1.2.3/8` is `10.0.0.0/8`).
//! - An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, as Zeek prints some addresses) is also
//!   matched against IPv4 subnets; an IPv4 address never matches an IPv6 subnet otherwise.
//! - NULL in either argument gives NULL.
//! - An address that is not an IP address (a `-`, an empty string) gives `false`: data is never
//!   an error. A `cidr` that is not a subnet gives `false` too when it comes from a column, but
//!   is an error when it is a constant, because a typo in a query (`10.0.0/8`) would otherwise
//!   silently match nothing.
//! - A constant `cidr` (the usual case) is parsed once per batch; the address column is then
//!   tested with two integer operations per row.
//!
//! Written by hand (on top of `ipnet` for parsing) because DataFusion has no IP functions.
//! Touches nothing but its arguments.

use std::net::IpAddr;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use ipnet::IpNet;

/// The SQL name of the function.
pub const NAME: &str = "cidr_contains";

/// The `cidr_contains` UDF, ready to register.
pub fn cidr_contains_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(CidrContains::new())
}

/// A parsed subnet reduced to integers: `addr & mask == net`.
#[derive(Debug, Clone, Copy)]
enum Net {
    V4 { net: u32, mask: u32 },
    V6 { net: u128, mask: u128 },
}

impl Net {
    /// Parses `a.b.c.d/len`, `x::y/len` or a bare address.
    pub fn parse(s: &str) -> Option<Net> {
        let s = s.trim();
        let n: IpNet = match s.parse() {
            Ok(n) => n,
            Err(_) => IpNet::from(s.parse::<IpAddr>().ok()?),
        };
        Some(match n {
            IpNet::V4(n) => {
                let mask = u32::from(n.netmask());
                Net::V4 {
                    net: u32::from(n.addr()) & mask,
                    mask,
                }
            }
            IpNet::V6(n) => {
                let mask = u128::from(n.netmask());
                Net::V6 {
                    net: u128::from(n.addr()) & mask,
                    mask,
                }
            }
        })
    }

    pub fn contains_text(&self, addr: &str) -> bool {
        match addr.trim().parse::<IpAddr>() {
            Ok(a) => self.contains(a),
            Err(_) => false,
        }
    }

    fn contains(&self, a: IpAddr) -> bool {
        match (*self, a) {
            (Net::V4 { net, mask }, IpAddr::V4(a)) => u32::from(a) & mask == net,
            (Net::V4 { net, mask }, IpAddr::V6(a)) => a
                .to_ipv4_mapped()
                .is_some_and(|a| u32::from(a) & mask == net),
            (Net::V6 { net, mask }, IpAddr::V6(a)) => u128::from(a) & mask == net,
            (Net::V6 { .. }, IpAddr::V4(_)) => false,
        }
    }
}

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CidrContains {
    signature: Signature,
}

impl Default for CidrContains {
    fn default() -> Self {
        Self::new()
    }
}

impl CidrContains {
    pub fn new() -> Self {
        Self {
            signature: Signature::string(2, Volatility::Immutable),
        }
    }
}

/// The values of a string array of any of the three string types.
pub(crate) fn strings(a: &ArrayRef) -> Result<Box<dyn Iterator<Item = Option<&str>> + '_>> {
    Ok(match a.data_type() {
        DataType::Utf8 => Box::new(a.as_string::<i32>().iter()),
        DataType::LargeUtf8 => Box::new(a.as_string::<i64>().iter()),
        DataType::Utf8View => Box::new(a.as_string_view().iter()),
        DataType::Null => Box::new(std::iter::repeat_n(None, a.len())),
        t => return exec_err!("{NAME} expects strings, got {t}"),
    })
}

fn scalar_str(v: &ScalarValue) -> Result<Option<&str>> {
    match v {
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s) => {
            Ok(s.as_deref())
        }
        ScalarValue::Null => Ok(None),
        v => exec_err!("{NAME} expects strings, got {}", v.data_type()),
    }
}

impl ScalarUDFImpl for CidrContains {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [cidr, addr] = args.args.as_slice() else {
            return exec_err!("{NAME} takes two arguments: cidr, addr");
        };
        match (cidr, addr) {
            (ColumnarValue::Scalar(c), _) => {
                let Some(c) = scalar_str(c)? else {
                    return Ok(ColumnarValue::Scalar(ScalarValue::Boolean(None)));
                };
                let Some(net) = Net::parse(c) else {
                    return exec_err!("{NAME}: '{c}' is not a CIDR subnet or IP address");
                };
                match addr {
                    ColumnarValue::Scalar(a) => Ok(ColumnarValue::Scalar(ScalarValue::Boolean(
                        scalar_str(a)?.map(|a| net.contains_text(a)),
                    ))),
                    ColumnarValue::Array(a) => {
                        let out: BooleanArray = strings(a)?
                            .map(|v| v.map(|v| net.contains_text(v)))
                            .collect();
                        Ok(ColumnarValue::Array(Arc::new(out)))
                    }
                }
            }
            (ColumnarValue::Array(c), _) => {
                let a = addr.to_array(c.len())?;
                let out: BooleanArray = strings(c)?
                    .zip(strings(&a)?)
                    .map(|(c, a)| {
                        let (c, a) = (c?, a?);
                        Some(Net::parse(c).is_some_and(|n| n.contains_text(a)))
                    })
                    .collect();
                Ok(ColumnarValue::Array(Arc::new(out)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment() {
        let n = Net::parse("10.0.0.0/8").unwrap();
        assert!(n.contains_text("10.1.2.3"));
        assert!(!n.contains_text("11.0.0.1"));
        assert!(n.contains_text("::ffff:10.0.0.1"));
        assert!(!n.contains_text("-"));
        let n = Net::parse("2001:db8::/32").unwrap();
        assert!(n.contains_text("2001:db8:0:1::5"));
        assert!(!n.contains_text("2001:db9::1"));
        assert!(!n.contains_text("10.0.0.1"));
        let n = Net::parse("192.168.1.7").unwrap();
        assert!(n.contains_text("192.168.1.7"));
        assert!(!n.contains_text("192.168.1.8"));
        let n = Net::parse("10.1.2.3/8").unwrap();
        assert!(n.contains_text("10.200.0.1"));
        let n = Net::parse("0.0.0.0/0").unwrap();
        assert!(n.contains_text("1.2.3.4"));
        assert!(Net::parse("10.0.0/8").is_none());
        assert!(Net::parse("10.0.0.0/33").is_none());
    }
}
