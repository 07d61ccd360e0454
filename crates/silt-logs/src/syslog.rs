//! Syslog lines, RFC 5424 (`<165>1 2003-10-11T22:14:15.003Z host app 1234 ID47 [sd@1 a="b"] msg`)
//! and RFC 3164 / BSD (`<34>Oct 11 22:14:15 host su[123]: msg`, or without the priority as
//! files in /var/log hold them), parsed with the `syslog_loose` crate (maintained by the Vector
//! project; it handles the many real-world variants of 3164).
//!
//! Columns: `timestamp` (the time column), `facility` and `severity` (names such as `auth`,
//! `err`, from the priority; null without one), `hostname`, `appname`, `procid`, `msgid`,
//! `structured_data` (JSON text `{"id":{"param":"value"}}` with RFC 5424's `\"`, `\\` and `\]`
//! escapes undone, null when absent), `message` (without RFC 5424's leading byte order mark).
//! syslogd's own `last message repeated N times` notes keep that text as the message, with no
//! program (and no host in BSD's `--- ... ---` form).
//! RFC 3164 timestamps have no year and no zone: they are taken as UTC in `LogOptions::syslog_year`
//! or else the current year (the previous year when that would put them more than a day in
//! the future). Table `syslog.<file stem>`.
//!
//! Rejected: lines that are not valid UTF-8 and lines `syslog_loose` cannot parse at all.
//!
//! [`SyslogDecoder`] is the decoder (a [`LineDecoder`]); [`FORMAT`] declares the format `syslog`.
//! Touches nothing but the bytes it is fed and `out`.

use chrono::{Datelike, Utc};
use silt_core::format::Confidence;
use silt_core::{Decoder, Emit, FormatOptions, FormatSpec, Probe, ReadOptions, SourceInfo};
use silt_readers::json::Value;
use syslog_loose::{parse_message_with_year_exact_tz, ProcId, Variant};

use crate::lines::{utf8_or_reject, LineDecoder, LineRecords};
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

/// The time column of syslog tables.
pub const TIME_FIELD: &str = "timestamp";

/// The `syslog` format.
pub static FORMAT: FormatSpec = FormatSpec {
    name: "syslog",
    aliases: &[],
    summary: "syslog lines, RFC 5424 or RFC 3164 (/var/log files); table syslog.<file stem>",
    // `.log` is shared with access logs and Zeek: not a claim, the registry sniffs content.
    extensions: &[],
    sniff,
    open,
    text_fields: true,
    text: true,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let lo = opts.get_or_default::<LogOptions>();
    Ok(Box::new(SyslogDecoder::new(source, &opts.read, &lo)?))
}

const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// 80 when the first non-blank line starts with a priority `<0>`..`<191>`, or with an RFC 3164
/// time `Mmm dd hh:mm:ss` (the day space-padded or not).
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    let line = *p.lines(1).first()?;
    if let Some(rest) = line.strip_prefix(b"<") {
        let end = rest.iter().position(|c| !c.is_ascii_digit())?;
        let pri = std::str::from_utf8(&rest[..end])
            .ok()?
            .parse::<u32>()
            .ok()?;
        let ok = (1..=3).contains(&end) && rest.get(end) == Some(&b'>') && pri <= 191;
        return ok.then_some(80);
    }
    bsd_time_start(line).then_some(80)
}

/// `Mmm dd hh:mm:ss ` / `Mmm  d hh:mm:ss ` at the start of `line`.
fn bsd_time_start(line: &[u8]) -> bool {
    if line.len() < 16 || !MONTHS.contains(&&line[..3]) || line[3] != b' ' {
        return false;
    }
    let day = match &line[4..6] {
        [b' ', d] if d.is_ascii_digit() => d - b'0',
        [a, b] if a.is_ascii_digit() && b.is_ascii_digit() => (a - b'0') * 10 + (b - b'0'),
        _ => 0,
    };
    let day_ok = (1..=31).contains(&day);
    let num = |r: &[u8]| {
        (r[0].is_ascii_digit() && r[1].is_ascii_digit()).then(|| (r[0] - b'0') * 10 + (r[1] - b'0'))
    };
    let t = &line[7..15];
    day_ok
        && line[6] == b' '
        && num(&t[0..2]).is_some_and(|h| h <= 23)
        && t[2] == b':'
        && num(&t[3..5]).is_some_and(|m| m <= 59)
        && t[5] == b':'
        && num(&t[6..8]).is_some_and(|s| s <= 60)
        && line[15] == b' '
}

/// Parses one line into a record; `None` when it is not syslog at all.
pub fn parse_line(line: &str, year: Option<i32>) -> Option<Value> {
    let now = Utc::now();
    let this_year = now.year();
    let (now_month, now_day) = (now.month(), now.day());
    let get_year = move |(month, day, _h, _m, _s): (u32, u32, u32, u32, u32)| -> i32 {
        if let Some(y) = year {
            return y;
        }
        // More than a day ahead of today: the line is from last year (December read in January).
        if (month, day) > (now_month, now_day + 1) {
            this_year - 1
        } else {
            this_year
        }
    };
    let m = parse_message_with_year_exact_tz(line, get_year, Some(Utc), Variant::Either).ok()?;
    let s = |x: Option<&str>| x.map_or(Value::Null, |v| Value::Str(v.to_string()));
    let sd = if m.structured_data.is_empty() {
        Value::Null
    } else {
        // An SD-ID twice in one message (RFC 5424 forbids it, senders do it): one JSON member
        // with the parameters of both, not a duplicate key.
        let mut o: Vec<(String, Value)> = Vec::new();
        for e in &m.structured_data {
            let params = e
                .params
                .iter()
                .map(|(k, v)| (k.to_string(), Value::Str(sd_unescape(v))));
            match o.iter_mut().find(|(id, _)| id == e.id) {
                Some((_, Value::Object(have))) => have.extend(params),
                _ => o.push((e.id.to_string(), Value::Object(params.collect()))),
            }
        }
        Value::Str(Value::Object(o).to_json())
    };
    let procid = match &m.procid {
        Some(ProcId::PID(p)) => Value::Str(p.to_string()),
        Some(ProcId::Name(n)) => Value::Str(n.to_string()),
        None => Value::Null,
    };
    // RFC 5424 lets MSG start with a byte order mark to say it is UTF-8; it is not text.
    let mut message = m.msg.strip_prefix('\u{feff}').unwrap_or(m.msg).to_string();
    let (mut hostname, mut appname) = (m.hostname, m.appname);
    // syslogd's own notes, which have no program: BSD's `--- last message repeated 2 times ---`
    // (no host either) and sysklogd's `host last message repeated 2 times`.
    if hostname == Some("---") || appname == Some("---") {
        if let Some(at) = line.find("--- ") {
            if hostname == Some("---") {
                hostname = None;
            }
            (appname, message) = (None, line[at..].to_string());
        }
    } else if appname == Some("last") && message.starts_with("message repeated ") {
        appname = None;
        message.insert_str(0, "last ");
    }
    Some(Value::Object(vec![
        (
            TIME_FIELD.into(),
            m.timestamp
                .map_or(Value::Null, |t| Value::Time(t.timestamp_micros())),
        ),
        ("facility".into(), s(m.facility.map(|f| f.as_str()))),
        ("severity".into(), s(m.severity.map(|f| f.as_str()))),
        ("hostname".into(), s(hostname)),
        ("appname".into(), s(appname)),
        ("procid".into(), procid),
        ("msgid".into(), s(m.msgid)),
        ("structured_data".into(), sd),
        ("message".into(), Value::Str(message)),
    ]))
}

/// An RFC 5424 PARAM-VALUE with its escapes (`\"`, `\\`, `\]`) undone; a backslash before
/// anything else stays, as the RFC says.
fn sd_unescape(v: &str) -> String {
    if !v.contains('\\') {
        return v.to_string();
    }
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&n @ ('"' | '\\' | ']')) = chars.peek() {
                out.push(n);
                chars.next();
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// The syslog decoder for one stream.
pub type SyslogDecoder = LineDecoder<SyslogLines>;

impl SyslogDecoder {
    pub fn new(source: &SourceInfo, ro: &ReadOptions, lo: &LogOptions) -> anyhow::Result<Self> {
        let mut lo = lo.clone();
        lo.time_field = Some(TIME_FIELD.to_string());
        let table = lo.table_for(LogFormat::Syslog, source);
        let sink = Sink::new(source, table, ro, &lo, false, None)?;
        Ok(LineDecoder::from_records(SyslogLines {
            sink,
            year: lo.syslog_year,
        }))
    }
}

/// What syslog does with a line.
pub struct SyslogLines {
    sink: Sink,
    year: Option<i32>,
}

impl LineRecords for SyslogLines {
    fn sink(&mut self) -> &mut Sink {
        &mut self.sink
    }

    fn record(&mut self, n: u64, buf: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        let Some(text) = utf8_or_reject(n, buf, &mut self.sink, out)? else {
            return Ok(());
        };
        match parse_line(text, self.year) {
            Some(v) => self.sink.push(v, n, &|| buf.to_vec(), buf.len(), out),
            None => {
                let reason = "not a syslog line (RFC 5424 or 3164)".to_string();
                self.sink.reject(out, n, reason, buf.to_vec())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(head: &[u8]) -> Option<Confidence> {
        sniff(&Probe {
            head,
            file_name: Some("messages"),
        })
    }

    #[test]
    fn sniffs_syslog_only() {
        for yes in [
            &b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed\n"[..],
            b"<165>1 2003-10-11T22:14:15.003Z host app - ID47 - msg\n",
            b"<0>1 - - - - - -\n",
            b"Mar 24 17:00:00 host sshd[123]: Accepted publickey for root\n",
            b"Jan  3 09:47:02 veridian sudo: timstack : TTY=pts/6\n",
            b"\n\nDec 31 23:59:60 h k: leap\n",
        ] {
            assert_eq!(probe(yes), Some(80), "{}", String::from_utf8_lossy(yes));
        }
        for no in [
            &b"<192>bad priority\n"[..],
            b"<html><body>\n",
            b"<1234>x\n",
            b"March 24 17:00:00 host x\n",
            b"Mar 24 2024 host x\n",
            b"Mar 32 17:00:00 host x\n",
            b"Mar 24 25:00:00 host x\n",
            // Other formats' first lines.
            b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612\n",
            b"{\"a\":1}\n",
            b"time:2024-03-24T17:00:00Z\thost:a\n",
            b"#separator \\x09\n",
            b"a,b\n1,2\n",
            b"\x82\xa1a\x01\xa1b\x02",
            b"",
        ] {
            assert_eq!(probe(no), None, "{}", String::from_utf8_lossy(no));
        }
    }

    #[test]
    fn escapes_bom_and_syslogd_notes() {
        let get = |l: &str, k: &str| {
            let Some(Value::Object(o)) = parse_line(l, Some(2024)) else {
                panic!("{l}")
            };
            o.into_iter().find(|(n, _)| n == k).unwrap().1
        };
        let l = "<165>1 2003-10-11T22:14:15.003Z host app - ID47 [ex@1 a=\"q\\\"x\\\\y\\]z\\n\"] \u{feff}msg";
        assert_eq!(
            get(l, "structured_data"),
            Value::Str(r#"{"ex@1":{"a":"q\"x\\y]z\\n"}}"#.into())
        );
        assert_eq!(get(l, "message"), Value::Str("msg".into()));
        let l = "<165>1 2003-10-11T22:14:15.003Z host app - - [ex@1 a=\"x\"][ex@1 b=\"y\"] m";
        assert_eq!(
            get(l, "structured_data"),
            Value::Str(r#"{"ex@1":{"a":"x","b":"y"}}"#.into())
        );
        let l = "Mar 24 17:00:00 --- last message repeated 2 times ---";
        assert_eq!(get(l, "hostname"), Value::Null);
        assert_eq!(get(l, "appname"), Value::Null);
        assert_eq!(
            get(l, "message"),
            Value::Str("--- last message repeated 2 times ---".into())
        );
        let l = "<13>Mar 24 17:00:05 host2 --- last message repeated 3 times ---";
        assert_eq!(get(l, "hostname"), Value::Str("host2".into()));
        assert_eq!(get(l, "appname"), Value::Null);
        assert_eq!(
            get(l, "message"),
            Value::Str("--- last message repeated 3 times ---".into())
        );
        let l = "Mar 24 17:00:00 gw last message repeated 3 times";
        assert_eq!(get(l, "hostname"), Value::Str("gw".into()));
        assert_eq!(get(l, "appname"), Value::Null);
        assert_eq!(
            get(l, "message"),
            Value::Str("last message repeated 3 times".into())
        );
        // A program really named `last` keeps its name.
        let l = "Mar 24 17:00:00 gw last: wtmp begins";
        assert_eq!(get(l, "appname"), Value::Str("last".into()));
    }
}
