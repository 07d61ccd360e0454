//! Syslog lines, RFC 5424 (`<165>1 2003-10-11T22:14:15.003Z host app 1234 ID47 [sd@1 a="b"] msg`)
//! and RFC 3164 / BSD (`<34>Oct 11 22:14:15 host su[123]: msg`, or without the priority as
//! files in /var/log hold them), parsed with the `syslog_loose` crate (maintained by the Vector
//! project; it handles the many real-world variants of 3164).
//!
//! Columns: `timestamp` (the time column), `facility` and `severity` (names such as `auth`,
//! `err`, from the priority; null without one), `hostname`, `appname`, `procid`, `msgid`,
//! `structured_data` (JSON text `{"id":{"param":"value"}}`, null when absent), `message`.
//! RFC 3164 timestamps have no year and no zone: they are taken as UTC in `LogOptions::syslog_year`
//! or else the current year (the previous year when that would put them more than a day in
//! the future). Table `syslog.<file stem>`.
//!
//! Rejected: lines that are not valid UTF-8 and lines `syslog_loose` cannot parse at all.
//! Touches nothing but `input` and `out`.

use std::io::BufRead;

use chrono::{Datelike, Utc};
use silt_core::{Emit, ReadOptions, SourceInfo};
use silt_readers::json::Value;
use syslog_loose::{parse_message_with_year_exact_tz, ProcId, Variant};

use crate::lines::{for_each_line, utf8_or_reject};
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

/// The time column of syslog tables.
pub const TIME_FIELD: &str = "timestamp";

pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let mut lo = lo.clone();
    lo.time_field = Some(TIME_FIELD.to_string());
    Sink::run(
        LogFormat::Syslog,
        false,
        source,
        ro,
        &lo,
        out,
        |sink, out| read_lines(input, source, sink, lo.syslog_year, out),
    )
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
        let o: Vec<(String, Value)> = m
            .structured_data
            .iter()
            .map(|e| {
                let params = e
                    .params
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::Str(v.to_string())))
                    .collect();
                (e.id.to_string(), Value::Object(params))
            })
            .collect();
        Value::Str(Value::Object(o).to_json())
    };
    let procid = match &m.procid {
        Some(ProcId::PID(p)) => Value::Str(p.to_string()),
        Some(ProcId::Name(n)) => Value::Str(n.to_string()),
        None => Value::Null,
    };
    Some(Value::Object(vec![
        (
            TIME_FIELD.into(),
            m.timestamp
                .map_or(Value::Null, |t| Value::Time(t.timestamp_micros())),
        ),
        ("facility".into(), s(m.facility.map(|f| f.as_str()))),
        ("severity".into(), s(m.severity.map(|f| f.as_str()))),
        ("hostname".into(), s(m.hostname)),
        ("appname".into(), s(m.appname)),
        ("procid".into(), procid),
        ("msgid".into(), s(m.msgid)),
        ("structured_data".into(), sd),
        ("message".into(), Value::Str(m.msg.to_string())),
    ]))
}

fn read_lines(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    sink: &mut Sink,
    year: Option<i32>,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    for_each_line(input, source, sink, out, |n, buf, sink, out| {
        let Some(text) = utf8_or_reject(n, buf, sink, out)? else {
            return Ok(());
        };
        match parse_line(text, year) {
            Some(v) => sink.push(v, n, &|| buf.to_vec(), buf.len(), out),
            None => {
                let reason = "not a syslog line (RFC 5424 or 3164)".to_string();
                sink.reject(out, n, reason, buf.to_vec())
            }
        }
    })
}
