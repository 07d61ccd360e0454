//! Exact timestamp parsing to microseconds since the Unix epoch (UTC).
//!
//! silt stores every event time as `Timestamp(Microsecond, "UTC")` (Parquet INT64
//! TIMESTAMP(MICROS, isAdjustedToUTC=true), which Spark, Trino, Athena and DuckDB all read).
//! Zeek writes times with six decimals, so microseconds hold them exactly; parsing the decimal
//! text with integers (not through `f64`) keeps `1521911721.123456` exact.
//! Hand-written rather than chrono's parsers because sensors write offsets without a colon
//! (`+0200`, Suricata) that RFC 3339 parsers refuse, and because this is on every row's path.

use arrow::datatypes::{DataType, TimeUnit};

/// The Arrow type of every silt time column and Zeek `time` field.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// Parses decimal epoch seconds (`1521911721.123456`, `-1.5`, `0`, `1.5e9`) to microseconds.
/// Digits past the sixth decimal are truncated toward negative infinity. `None` for anything
/// that is not a number (`XXXXXXXXXX.XXXXXX`, `-`, empty) or out of range.
pub fn parse_epoch_seconds(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let (neg, digits) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let mut int: i64 = 0;
    let mut i = 0;
    while i < digits.len() && digits[i].is_ascii_digit() {
        int = int
            .checked_mul(10)?
            .checked_add((digits[i] - b'0') as i64)?;
        i += 1;
    }
    let int_digits = i;
    let mut frac: i64 = 0;
    let mut frac_digits = 0;
    let mut more_nonzero = false;
    if i < digits.len() && digits[i] == b'.' {
        i += 1;
        while i < digits.len() && digits[i].is_ascii_digit() {
            if frac_digits < 6 {
                frac = frac * 10 + (digits[i] - b'0') as i64;
                frac_digits += 1;
            } else if digits[i] != b'0' {
                more_nonzero = true;
            }
            i += 1;
        }
    }
    if i != digits.len() {
        // Exponent notation or garbage: fall back to a float when it is a number at all.
        let f: f64 = s.parse().ok()?;
        return float_seconds_to_micros(f);
    }
    if int_digits == 0 && frac_digits == 0 {
        return None;
    }
    while frac_digits < 6 {
        frac *= 10;
        frac_digits += 1;
    }
    let micros = int.checked_mul(1_000_000)?.checked_add(frac)?;
    Some(if neg {
        -micros - i64::from(more_nonzero)
    } else {
        micros
    })
}

/// Converts float epoch seconds to microseconds, rounding to the nearest microsecond
/// (a JSON number has already lost exactness; rounding undoes binary representation error).
pub fn float_seconds_to_micros(f: f64) -> Option<i64> {
    let m = (f * 1e6).round();
    (m.is_finite() && m.abs() < 9.2e18).then_some(m as i64)
}

/// Parses an ISO 8601 / RFC 3339 date-time to UTC microseconds: `2018-03-24T17:15:21Z`,
/// `2018-03-24T17:15:21.123456Z`, `2017-06-19T14:01:38.082123+0200`, `...+02:00`, `... 17:15:21`
/// (space separator), fractions of any length (truncated to microseconds). No zone means UTC.
pub fn parse_iso8601(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    if b.len() < 19 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut v = 0i64;
        for &c in b.get(r)? {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (c - b'0') as i64;
        }
        Some(v)
    };
    let (neg_year, off) = if b[0] == b'-' { (true, 1) } else { (false, 0) };
    if b.len() < 19 + off {
        return None;
    }
    let mut year = num(off..off + 4)?;
    if neg_year {
        year = -year;
    }
    let o = off + 4;
    if b[o] != b'-'
        || b[o + 3] != b'-'
        || !(b[o + 6] == b'T' || b[o + 6] == b't' || b[o + 6] == b' ')
    {
        return None;
    }
    if b[o + 9] != b':' || b[o + 12] != b':' {
        return None;
    }
    let month = num(o + 1..o + 3)?;
    let day = num(o + 4..o + 6)?;
    let hour = num(o + 7..o + 9)?;
    let min = num(o + 10..o + 12)?;
    let sec = num(o + 13..o + 15)?;
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || min > 59
        || sec > 60
    {
        return None;
    }
    let mut i = o + 15;
    let mut frac = 0i64;
    if i < b.len() && (b[i] == b'.' || b[i] == b',') {
        i += 1;
        let start = i;
        let mut n = 0;
        while i < b.len() && b[i].is_ascii_digit() {
            if n < 6 {
                frac = frac * 10 + (b[i] - b'0') as i64;
                n += 1;
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        while n < 6 {
            frac *= 10;
            n += 1;
        }
    }
    let offset_secs = match b.get(i) {
        None => 0,
        Some(b'Z') | Some(b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let rest = &b[i + 1..];
            let (h, m) = match rest.len() {
                2 => (num(i + 1..i + 3)?, 0),
                4 => (num(i + 1..i + 3)?, num(i + 3..i + 5)?),
                5 if rest[2] == b':' => (num(i + 1..i + 3)?, num(i + 4..i + 6)?),
                _ => return None,
            };
            if h > 23 || m > 59 {
                return None;
            }
            let o = h * 3600 + m * 60;
            if sign == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset_secs;
    secs.checked_mul(1_000_000)?.checked_add(frac)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats UTC microseconds as `YYYY-MM-DD` and hour `HH` (for partition directories).
pub fn date_hour(micros: i64) -> (String, u32) {
    let secs = micros.div_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let hour = (secs.rem_euclid(86_400) / 3600) as u32;
    let (y, m, d) = civil_from_days(days);
    (format!("{y:04}-{m:02}-{d:02}"), hour)
}

/// Inverse of [`days_from_civil`].
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_decimal_is_exact() {
        assert_eq!(
            parse_epoch_seconds("1521911721.123456"),
            Some(1_521_911_721_123_456)
        );
        assert_eq!(
            parse_epoch_seconds("1521911721"),
            Some(1_521_911_721_000_000)
        );
        assert_eq!(parse_epoch_seconds("0.000001"), Some(1));
        assert_eq!(parse_epoch_seconds("-1.5"), Some(-1_500_000));
        assert_eq!(parse_epoch_seconds("-0.0000001"), Some(-1));
        assert_eq!(parse_epoch_seconds("1.5e9"), Some(1_500_000_000_000_000));
        assert_eq!(parse_epoch_seconds("XXXXXXXXXX.XXXXXX"), None);
        assert_eq!(parse_epoch_seconds("-"), None);
        assert_eq!(parse_epoch_seconds(""), None);
        assert_eq!(parse_epoch_seconds("."), None);
    }

    #[test]
    fn iso8601_variants() {
        let base = 1_521_911_721_000_000; // 2018-03-24T17:15:21Z
        assert_eq!(parse_iso8601("2018-03-24T17:15:21Z"), Some(base));
        assert_eq!(
            parse_iso8601("2018-03-24T17:15:21.5Z"),
            Some(base + 500_000)
        );
        assert_eq!(
            parse_iso8601("2018-03-24T17:15:21.123456789Z"),
            Some(base + 123_456)
        );
        assert_eq!(parse_iso8601("2018-03-24T19:15:21+0200"), Some(base));
        assert_eq!(parse_iso8601("2018-03-24T19:15:21+02:00"), Some(base));
        assert_eq!(parse_iso8601("2018-03-24T12:15:21-05"), Some(base));
        assert_eq!(parse_iso8601("2018-03-24 17:15:21"), Some(base));
        assert_eq!(parse_iso8601("1969-12-31T23:59:59.600000Z"), Some(-400_000));
        assert_eq!(
            parse_iso8601("1960-01-01T00:00:00.000000Z"),
            Some(-315_619_200_000_000)
        );
        assert_eq!(parse_iso8601("2018-02-30T00:00:00Z"), None);
        assert_eq!(parse_iso8601("2018-03-24T17:15:21Zjunk"), None);
        assert_eq!(parse_iso8601("not a time"), None);
    }

    #[test]
    fn date_hour_round_trip() {
        assert_eq!(
            date_hour(1_521_911_721_000_000),
            ("2018-03-24".to_string(), 17)
        );
        assert_eq!(date_hour(-1), ("1969-12-31".to_string(), 23));
        for d in [-800_000i64, -1, 0, 1, 17_614, 2_932_896] {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m as i64, dd as i64), d);
        }
    }
}
