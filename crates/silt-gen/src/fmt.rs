//! Fast text formatting for generated records: integers, fixed six-decimal seconds, Zeek uids,
//! hex digests, Suricata timestamps.
//!
//! Touches nothing but the byte buffers it is handed. Generated values are integers
//! (microseconds, byte counts), so fixed-point text is produced with integer arithmetic and
//! `itoa`, never through `f64` formatting: it is exact (the readers parse these back exactly) and
//! several times faster than `format!("{:.6}")`, which matters at millions of rows per second.

use chrono::{DateTime, Datelike, Timelike};

/// Appends the decimal text of an unsigned integer.
#[inline]
pub fn u64(buf: &mut Vec<u8>, v: u64) {
    let mut b = itoa::Buffer::new();
    buf.extend_from_slice(b.format(v).as_bytes());
}

/// Appends microseconds as seconds with exactly six decimals (`1521911720.865716`, `0.000870`).
/// This is how Zeek writes `time` and `interval` values.
#[inline]
pub fn micros_as_secs(buf: &mut Vec<u8>, micros: i64) {
    if micros < 0 {
        buf.push(b'-');
    }
    let m = micros.unsigned_abs();
    u64(buf, m / 1_000_000);
    buf.push(b'.');
    let frac = (m % 1_000_000) as u32;
    let mut digits = [b'0'; 6];
    let mut f = frac;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (f % 10) as u8;
        f /= 10;
    }
    buf.extend_from_slice(&digits);
}

const B62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn base62(buf: &mut Vec<u8>, mut v: u64) {
    // Least significant digit first, like Zeek's `uitoa_n`; leading zeros are dropped, which is
    // why real uids are 17 or 18 characters long and occasionally shorter.
    loop {
        buf.push(B62[(v % 62) as usize]);
        v /= 62;
        if v == 0 {
            break;
        }
    }
}

/// Appends a Zeek-style unique id: `prefix` (`C` for connections, `F` for files) followed by the
/// base62 text of 96 random bits (one 64-bit word, one 32-bit word), as Zeek's `UID::Base62` does.
pub fn zeek_uid(buf: &mut Vec<u8>, prefix: u8, hi: u64, lo: u32) {
    buf.push(prefix);
    base62(buf, hi);
    base62(buf, lo as u64);
}

/// Appends lowercase hex of `bytes`.
pub fn hex(buf: &mut Vec<u8>, bytes: &[u8]) {
    const H: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        buf.push(H[(b >> 4) as usize]);
        buf.push(H[(b & 15) as usize]);
    }
}

/// Formats `YYYY-MM-DD-HH-MM-SS` (UTC), Zeek's `#open`/`#close` header format.
pub fn zeek_header_time(micros: i64) -> String {
    let dt = DateTime::from_timestamp_micros(micros).unwrap_or_default();
    format!(
        "{:04}-{:02}-{:02}-{:02}-{:02}-{:02}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    )
}

/// Suricata EVE timestamps (`2018-03-24T17:00:00.123456+0000`). The date/time part is cached
/// per second because generated timestamps move forward slowly; only the fraction changes.
#[derive(Default)]
pub struct EveClock {
    sec: i64,
    prefix: Vec<u8>,
}

impl EveClock {
    /// Appends the timestamp of `micros` (UTC, `+0000` offset as Suricata writes when TZ=UTC).
    pub fn write(&mut self, buf: &mut Vec<u8>, micros: i64) {
        let sec = micros.div_euclid(1_000_000);
        let frac = micros.rem_euclid(1_000_000) as u32;
        if self.prefix.is_empty() || sec != self.sec {
            let dt = DateTime::from_timestamp(sec, 0).unwrap_or_default();
            self.prefix.clear();
            self.prefix.extend_from_slice(
                format!(
                    "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.",
                    dt.year(),
                    dt.month(),
                    dt.day(),
                    dt.hour(),
                    dt.minute(),
                    dt.second()
                )
                .as_bytes(),
            );
            self.sec = sec;
        }
        buf.extend_from_slice(&self.prefix);
        let mut digits = [b'0'; 6];
        let mut f = frac;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (f % 10) as u8;
            f /= 10;
        }
        buf.extend_from_slice(&digits);
        buf.extend_from_slice(b"+0000");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_decimals() {
        let mut b = Vec::new();
        micros_as_secs(&mut b, 1_521_911_720_865_716);
        assert_eq!(b, b"1521911720.865716");
        b.clear();
        micros_as_secs(&mut b, 870);
        assert_eq!(b, b"0.000870");
        b.clear();
        micros_as_secs(&mut b, 2_230_000_000);
        assert_eq!(b, b"2230.000000");
    }

    #[test]
    fn eve_time() {
        let mut c = EveClock::default();
        let mut b = Vec::new();
        c.write(&mut b, 1_521_910_800_000_001);
        assert_eq!(b, b"2018-03-24T17:00:00.000001+0000");
        b.clear();
        c.write(&mut b, 1_521_910_861_500_000);
        assert_eq!(b, b"2018-03-24T17:01:01.500000+0000");
    }

    #[test]
    fn uid_shape() {
        let mut b = Vec::new();
        zeek_uid(&mut b, b'C', u64::MAX, u32::MAX);
        assert_eq!(b.len(), 1 + 11 + 6);
        assert!(b.iter().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(
            zeek_header_time(1_521_910_800_000_000),
            "2018-03-24-17-00-00"
        );
    }
}
