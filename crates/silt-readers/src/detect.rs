//! Guessing an input's format from its first bytes (for `silt import auto` and `import zeek`).

use std::io::BufRead;

use crate::Format;

/// Looks at the buffered start of `input` without consuming it. Recognises Zeek TSV (`#`
/// directives, a custom meta prefix, or a bare `ts<TAB>...` column header), Suricata EVE (JSON
/// objects with `event_type`) and Zeek JSON (other JSON objects). `None` if it cannot tell.
pub fn sniff(input: &mut dyn BufRead) -> std::io::Result<Option<Format>> {
    let buf = input.fill_buf()?;
    let head = &buf[..buf.len().min(64 * 1024)];
    let start = head
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(head.len());
    let head = &head[start..];
    let line = head.split(|&c| c == b'\n').next().unwrap_or(head);
    let has = |k: &[u8]| memchr::memmem::find(line, k).is_some();
    // Zeek ASCII logs: a `#` directive (`#separator`, `#fields`, or a `#file` note before the
    // header), a custom meta prefix before `separator` (LogAscii::meta_prefix), or a bare
    // tab-separated column header starting with `ts` (LogAscii::include_meta=F).
    if head.first() == Some(&b'#') || has(b"separator ") || line.starts_with(b"ts\t") {
        return Ok(Some(Format::ZeekTsv));
    }
    if head.first() == Some(&b'{') {
        // Suricata always writes event_type; every other JSON object log is taken as Zeek JSON,
        // whose reader names the log from `_path` or the file name.
        if has(b"\"event_type\"") {
            return Ok(Some(Format::Suricata));
        }
        return Ok(Some(Format::ZeekJson));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sniff_str(s: &str) -> Option<Format> {
        sniff(&mut std::io::Cursor::new(s.as_bytes().to_vec())).unwrap()
    }

    #[test]
    fn detects_formats() {
        assert_eq!(
            sniff_str("#separator \\x09\n#fields\tts\n"),
            Some(Format::ZeekTsv)
        );
        assert_eq!(
            sniff_str("#file dhe.pcap\n#separator \\x09\n"),
            Some(Format::ZeekTsv)
        );
        assert_eq!(sniff_str("PREFIX<>separator |\n"), Some(Format::ZeekTsv));
        assert_eq!(
            sniff_str("ts\tuid\tid.orig_h\n1.0\tC\t1.2.3.4\n"),
            Some(Format::ZeekTsv)
        );
        assert_eq!(
            sniff_str("{\"timestamp\":\"x\",\"event_type\":\"dns\"}\n"),
            Some(Format::Suricata)
        );
        assert_eq!(
            sniff_str("  {\"_path\":\"conn\"}\n"),
            Some(Format::ZeekJson)
        );
        assert_eq!(sniff_str("{\"d\":1.5}\n"), Some(Format::ZeekJson));
        assert_eq!(sniff_str("hello world\n"), None);
        assert_eq!(sniff_str(""), None);
    }
}
