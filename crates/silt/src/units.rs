//! Parsing sizes (`33554432`, `32MiB`, `32M`, `1.5GB`, `512k`) and durations (`250ms`, `60s`,
//! `10m`, `1h`) given on the command line.

/// Parses a byte size; binary (`KiB`, `MiB`, `GiB`) and decimal (`kB`, `MB`, `GB`) suffixes,
/// a bare `k`/`M`/`G` meaning binary.
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let (n, unit) = number_and_unit(s)
        .ok_or_else(|| format!("{s:?} is not a size: use e.g. 33554432, 32MiB, 64MB"))?;
    let mult: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "kb" => 1e3,
        "m" | "mib" => 1024.0 * 1024.0,
        "mb" => 1e6,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "gb" => 1e9,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {s:?}: use B, KiB, MiB, GiB, kB, MB or GB"
            ))
        }
    };
    let v = n * mult;
    if !(1.0..1e15).contains(&v) {
        return Err(format!("size {s:?} is out of range"));
    }
    Ok(v as usize)
}

/// `32MiB` -> (32.0, "MiB"): the leading number and the trimmed rest.
fn number_and_unit(s: &str) -> Option<(f64, &str)> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    Some((num.parse().ok()?, unit.trim()))
}

/// Parses a duration: `250ms`, `60s`, `10m`, `1h`, `1.5s`, or bare seconds.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let (n, unit) = number_and_unit(s)
        .ok_or_else(|| format!("{s:?} is not a duration: use e.g. 250ms, 60s, 10m, 1h"))?;
    let secs = match unit {
        "ms" => n / 1e3,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} in {s:?}: use ms, s, m, h or d"
            ))
        }
    };
    if !(0.0..1e9).contains(&secs) {
        return Err(format!("duration {s:?} is out of range"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// A retention window (`--keep 30d`): a duration whose unit is given. A bare number would be
/// seconds, and `--keep 30` meant as 30 days would drop nearly everything.
pub fn parse_window(s: &str) -> Result<std::time::Duration, String> {
    match number_and_unit(s) {
        Some((_, "")) => Err(format!(
            "{s:?} has no unit: give the window with one, e.g. {s}d for days or {s}h for hours"
        )),
        _ => parse_duration(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_need_a_unit() {
        assert_eq!(
            parse_window("30d"),
            Ok(std::time::Duration::from_secs(30 * 86400))
        );
        let e = parse_window("30").unwrap_err();
        assert!(e.contains("no unit") && e.contains("30d"), "{e}");
        assert!(parse_window("30x").is_err());
    }

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("5 fortnights").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("32MiB"), Ok(32 << 20));
        assert_eq!(parse_bytes("32M"), Ok(32 << 20));
        assert_eq!(parse_bytes("64MB"), Ok(64_000_000));
        assert_eq!(parse_bytes("1.5GiB"), Ok(1536 << 20));
        assert!(parse_bytes("abc").is_err());
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("5 parsecs").is_err());
    }
}
