//! Deriving an event-time interval from a scan's filters, so that the user's predicate on the
//! time column (`ts >= TIMESTAMP '...'`) prunes `dt=`/`hour=` directories and whole files by
//! itself; the user never writes `dt=`.
//!
//! Understood (each a top-level conjunct, or inside `AND`/`OR`): `t op literal` and
//! `literal op t` for `= < <= > >=`, `t BETWEEN a AND b`, `t IN (a, b, ...)`; `OR` yields the
//! hull of both sides. `t` is the time column, possibly under a cast to a timestamp of the same
//! or a finer unit (type coercion adds those). Literals are timestamps of any unit (with or
//! without zone: Arrow stores UTC instants either way), dates, or ISO 8601 strings.
//! `now() - INTERVAL '1 hour'` arrives already folded to a literal by DataFusion's simplifier.
//! Anything else contributes no bound; the interval is only used to skip files, the predicate
//! itself is still evaluated on every row read, so a missed bound costs speed, never answers.
//!
//! Every understood predicate rejects null times, so files holding only null times are pruned
//! whenever an interval was derived.
//!
//! Pure functions over DataFusion expressions; touches nothing else.

use datafusion::common::ScalarValue;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};

use arrow::datatypes::{DataType, TimeUnit};

/// An interval of UTC microseconds, bounds inclusive, `None` = unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    pub lo: Option<i64>,
    pub hi: Option<i64>,
}

impl TimeRange {
    pub const ALL: TimeRange = TimeRange { lo: None, hi: None };

    /// True when no instant satisfies the range.
    pub fn is_empty(&self) -> bool {
        matches!((self.lo, self.hi), (Some(l), Some(h)) if l > h)
    }

    pub fn intersect(self, o: TimeRange) -> TimeRange {
        TimeRange {
            lo: max_opt(self.lo, o.lo),
            hi: min_opt(self.hi, o.hi),
        }
    }

    /// Smallest range holding both (for `OR`).
    pub fn hull(self, o: TimeRange) -> TimeRange {
        if self.is_empty() {
            return o;
        }
        if o.is_empty() {
            return self;
        }
        TimeRange {
            lo: self.lo.zip(o.lo).map(|(a, b)| a.min(b)),
            hi: self.hi.zip(o.hi).map(|(a, b)| a.max(b)),
        }
    }

    /// Whether `[lo, hi]` (inclusive) may hold an instant of this range.
    pub fn overlaps(&self, lo: i64, hi: i64) -> bool {
        !self.is_empty() && self.lo.is_none_or(|l| hi >= l) && self.hi.is_none_or(|h| lo <= h)
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The interval implied by the conjunction of `filters` on column `time_col`; `None` when no
/// filter bounds it.
pub fn time_range(filters: &[Expr], time_col: &str) -> Option<TimeRange> {
    filters
        .iter()
        .filter_map(|f| range_of(f, time_col))
        .reduce(TimeRange::intersect)
}

fn range_of(e: &Expr, tc: &str) -> Option<TimeRange> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => match (range_of(left, tc), range_of(right, tc)) {
                (Some(a), Some(b)) => Some(a.intersect(b)),
                (a, b) => a.or(b),
            },
            Operator::Or => Some(range_of(left, tc)?.hull(range_of(right, tc)?)),
            _ => {
                if is_time_col(left, tc) {
                    bound(*op, literal_micros(right)?)
                } else if is_time_col(right, tc) {
                    bound(op.swap()?, literal_micros(left)?)
                } else {
                    None
                }
            }
        },
        Expr::Between(b) if !b.negated && is_time_col(&b.expr, tc) => {
            let lo = bound(Operator::GtEq, literal_micros(&b.low)?)?;
            let hi = bound(Operator::LtEq, literal_micros(&b.high)?)?;
            Some(lo.intersect(hi))
        }
        Expr::InList(l) if !l.negated && is_time_col(&l.expr, tc) && !l.list.is_empty() => l
            .list
            .iter()
            .map(|v| bound(Operator::Eq, literal_micros(v)?))
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .reduce(TimeRange::hull),
        _ => None,
    }
}

/// The column itself, or a cast of it that keeps every microsecond distinct.
fn is_time_col(e: &Expr, tc: &str) -> bool {
    match e {
        Expr::Column(c) => c.name == tc,
        Expr::Cast(c) => keeps_micros(c.field.data_type()) && is_time_col(&c.expr, tc),
        Expr::TryCast(c) => keeps_micros(c.field.data_type()) && is_time_col(&c.expr, tc),
        _ => false,
    }
}

fn keeps_micros(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, _)
    )
}

/// A literal instant as `(ceil, floor)` in microseconds: equal unless the literal has
/// sub-microsecond digits.
fn literal_micros(e: &Expr) -> Option<(i64, i64)> {
    let v = match e {
        Expr::Literal(v, _) => v,
        // A cast to a coarser unit would truncate the literal: only look through exact ones.
        Expr::Cast(c) if keeps_micros(c.field.data_type()) => return literal_micros(&c.expr),
        Expr::TryCast(c) if keeps_micros(c.field.data_type()) => return literal_micros(&c.expr),
        _ => return None,
    };
    let exact = |m: i64| Some((m, m));
    match v {
        ScalarValue::TimestampSecond(Some(s), _) => exact(s.checked_mul(1_000_000)?),
        ScalarValue::TimestampMillisecond(Some(ms), _) => exact(ms.checked_mul(1_000)?),
        ScalarValue::TimestampMicrosecond(Some(us), _) => exact(*us),
        ScalarValue::TimestampNanosecond(Some(ns), _) => {
            let floor = ns.div_euclid(1_000);
            let ceil = if ns.rem_euclid(1_000) == 0 {
                floor
            } else {
                floor + 1
            };
            Some((ceil, floor))
        }
        ScalarValue::Date32(Some(d)) => exact((*d as i64) * 86_400_000_000),
        ScalarValue::Date64(Some(ms)) => exact(ms.checked_mul(1_000)?),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => exact(silt_core::time::parse_iso8601(s)?),
        _ => None,
    }
}

/// The range of microsecond instants `t` satisfying `t op v`, where `v` lies in
/// `[floor, ceil]` (`ceil - floor` is 0 or 1).
fn bound(op: Operator, (ceil, floor): (i64, i64)) -> Option<TimeRange> {
    let r = |lo, hi| Some(TimeRange { lo, hi });
    match op {
        Operator::Eq => r(Some(ceil), Some(floor)),
        Operator::GtEq => r(Some(ceil), None),
        Operator::Gt => r(Some(floor.checked_add(1)?), None),
        Operator::LtEq => r(None, Some(floor)),
        Operator::Lt => r(None, Some(ceil.checked_sub(1)?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn ts(us: i64) -> Expr {
        lit(ScalarValue::TimestampMicrosecond(
            Some(us),
            Some("UTC".into()),
        ))
    }

    #[test]
    fn derives_bounds() {
        let f = vec![col("ts").gt_eq(ts(10)), col("ts").lt(ts(20))];
        assert_eq!(
            time_range(&f, "ts"),
            Some(TimeRange {
                lo: Some(10),
                hi: Some(19)
            })
        );
        let f = vec![ts(10).lt(col("ts"))];
        assert_eq!(time_range(&f, "ts").unwrap().lo, Some(11));
        let f = vec![col("ts").between(ts(5), ts(7))];
        assert_eq!(
            time_range(&f, "ts"),
            Some(TimeRange {
                lo: Some(5),
                hi: Some(7)
            })
        );
        let f = vec![col("ts").eq(ts(5)).or(col("ts").eq(ts(9)))];
        assert_eq!(
            time_range(&f, "ts"),
            Some(TimeRange {
                lo: Some(5),
                hi: Some(9)
            })
        );
        // An OR with an unbounded side bounds nothing.
        let f = vec![col("ts").eq(ts(5)).or(col("x").eq(lit(1)))];
        assert_eq!(time_range(&f, "ts"), None);
        // Other columns are ignored.
        let f = vec![col("other").gt(ts(5))];
        assert_eq!(time_range(&f, "ts"), None);
        // Nanosecond literals between two microseconds.
        let ns = lit(ScalarValue::TimestampNanosecond(Some(10_500), None));
        let f = vec![col("ts").gt_eq(ns.clone()), col("ts").lt_eq(ns)];
        assert!(time_range(&f, "ts").unwrap().is_empty());
        let f = vec![col("ts").gt_eq(lit("1970-01-01T00:00:01Z"))];
        assert_eq!(time_range(&f, "ts").unwrap().lo, Some(1_000_000));
    }

    #[test]
    fn overlap() {
        let r = TimeRange {
            lo: Some(10),
            hi: Some(20),
        };
        assert!(r.overlaps(0, 10));
        assert!(r.overlaps(20, 30));
        assert!(!r.overlaps(21, 30));
        assert!(!r.overlaps(0, 9));
        assert!(TimeRange::ALL.overlaps(0, 0));
    }
}
