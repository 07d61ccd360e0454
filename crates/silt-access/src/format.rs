//! Compiling an access-log format (nginx `log_format`, Apache `LogFormat`, or a preset) into a
//! matcher that splits one line into field spans.
//!
//! Pure computation on byte slices; touches nothing else.
//!
//! Hand-written instead of a regular expression because this is the hot path (the Docker/nginx
//! benchmark parses ~800k lines inside a sub-second budget) and because an access log format is
//! just "literal, field, literal, field, ...": every field ends at the next occurrence of the
//! literal that follows it, so one `memchr`/`memmem` scan per field does the job. A regex with
//! the same meaning (lazy groups between literals) runs several times slower and cannot express
//! "a quoted field ends at the first unescaped quote that is followed by the rest of the
//! literal" without backtracking.
//!
//! ## Matching rules
//! - The whole line must match (a trailing `\r`/`\n` is ignored).
//! - A field ends at the first occurrence of the literal that follows it. A field between
//!   double quotes (the literal before it ends with `"`, the one after starts with `"`) skips
//!   backslash escapes (`\"`, `\\`) and only ends at a `"` followed by the rest of the literal,
//!   so unescaped quotes inside a user agent (old Apache versions) still match.
//!   A literal that ends the format is anchored at the end of the line; a quoted last field may
//!   then hold unescaped quotes, but not `" "` (which means the line has one more quoted field
//!   than the format: a `main` line read as `combined` is a reject, not a polluted user agent).
//! - The last field of a format runs to the end of the line.
//! - `-` in any field means "no value": null.
//!
//! ## Presets
//! `combined`, `common`, `main` (nginx's default: combined + `"$http_x_forwarded_for"`),
//! `vhost_combined` (Apache) and `auto` (tries main, then combined, then common per line; all
//! three give the same columns, with referer/user agent/x-forwarded-for null when absent).
//! main comes first because combined's final quoted field, anchored at the end of the line,
//! would otherwise swallow main's `" "$http_x_forwarded_for`.
//! The presets use nginx's definitions: the identity field after the client address is the
//! literal `-` (Apache's `%l` is practically always `-`; a custom format with `%l` keeps it).

use memchr::memmem::Finder;

/// How a field's text becomes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A client address: canonical IP text, or the text as written when it is a host name.
    Addr,
    /// Text, with `\"`, `\\` and printable `\xHH` escapes decoded.
    Text,
    /// `dd/Mon/yyyy:HH:MM:SS +zzzz` (`$time_local`, `%t`) to UTC microseconds.
    TimeLocal,
    /// ISO 8601 (`$time_iso8601`).
    TimeIso,
    /// Epoch seconds with a fraction (`$msec`).
    TimeEpoch,
    /// The request line, split into method, path, protocol (and the raw line when it does not split).
    Request,
    /// An unsigned 16-bit number (status, port).
    UInt16,
    /// An unsigned 64-bit number (bytes, microseconds).
    UInt64,
    /// A decimal number (`$request_time`).
    Float64,
}

/// One field of a format: the column it feeds and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDef {
    /// Output column name (`status`); for [`FieldKind::Request`] the four columns are named
    /// `method`, `path`, `protocol`, `request` instead.
    pub name: String,
    pub kind: FieldKind,
    /// The variable as written in the format (`$status`, `%>s`), stored as `silt.source_type`.
    pub source: String,
}

#[derive(Debug, Clone)]
enum Token {
    Literal(Vec<u8>, Option<Box<Finder<'static>>>),
    /// Index into [`LogFormat::fields`], and whether the field is between double quotes.
    Field(usize, bool),
}

#[derive(Debug, Clone)]
struct Alt {
    tokens: Vec<Token>,
}

/// Why a line did not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchError<'a> {
    /// Byte offset in the line where matching failed.
    pub pos: usize,
    /// What was expected there.
    pub expected: Expected<'a>,
}

/// What a line should have had where matching failed; its text is only built when shown (with
/// several alternatives, most lines fail one before another matches, and formatting the reason
/// every time showed in conversion profiles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected<'a> {
    /// This literal text.
    Literal(&'a [u8]),
    /// A field, ended by this literal text.
    FieldBefore(&'a [u8]),
    EndOfLine,
    /// The format has no alternatives.
    AFormat,
}

impl std::fmt::Display for Expected<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expected::Literal(l) => write!(f, "{:?}", String::from_utf8_lossy(l)),
            Expected::FieldBefore(l) => {
                write!(f, "a field followed by {:?}", String::from_utf8_lossy(l))
            }
            Expected::EndOfLine => f.write_str("the end of the line"),
            Expected::AFormat => f.write_str("a format"),
        }
    }
}

/// A compiled access-log format.
#[derive(Debug, Clone)]
pub struct LogFormat {
    /// The fields of all alternatives, in output order.
    pub fields: Vec<FieldDef>,
    alts: Vec<Alt>,
    /// The format as the user gave it (a preset name or the format string).
    pub spec: String,
}

pub const NGINX_COMBINED: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent""#;
pub const NGINX_MAIN: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_forwarded_for""#;
pub const NGINX_COMMON: &str =
    r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent"#;
pub const APACHE_VHOST_COMBINED: &str =
    r#"%v:%p %h %l %u %t "%r" %>s %O "%{Referer}i" "%{User-Agent}i""#;

impl LogFormat {
    /// Compiles a preset name (`auto`, `combined`, `common`, `main`, `vhost_combined`), an nginx
    /// `log_format` string (contains `$`), or an Apache `LogFormat` string (contains `%`).
    pub fn parse(spec: &str) -> anyhow::Result<Self> {
        let alts_src: Vec<&str> = match spec.trim() {
            "auto" | "access" => vec![NGINX_MAIN, NGINX_COMBINED, NGINX_COMMON],
            "combined" => vec![NGINX_COMBINED],
            "common" | "clf" => vec![NGINX_COMMON],
            "main" => vec![NGINX_MAIN],
            "vhost_combined" => vec![APACHE_VHOST_COMBINED],
            _ => vec![spec],
        };
        let mut fields: Vec<FieldDef> = Vec::new();
        let mut alts = Vec::new();
        for src in alts_src {
            let parts = if src.contains('$') {
                tokenize_nginx(src)?
            } else if src.contains('%') {
                tokenize_apache(src)?
            } else {
                anyhow::bail!(
                    "log format {spec:?} is not a preset (auto, combined, common, main, \
                     vhost_combined) and has no $variable (nginx) or %directive (Apache)"
                );
            };
            // Fields with the same name and source in several alternatives share one column;
            // a name used twice within one format gets a numeric suffix.
            let mut used_here: Vec<usize> = Vec::new();
            let mut tokens: Vec<Token> = Vec::new();
            for p in parts {
                match p {
                    Part::Lit(l) => match tokens.last_mut() {
                        Some(Token::Literal(prev, _)) => prev.extend_from_slice(&l),
                        _ => tokens.push(Token::Literal(l, None)),
                    },
                    Part::Field(f) => {
                        if matches!(tokens.last(), Some(Token::Field(..))) {
                            anyhow::bail!(
                                "log format {spec:?}: {} follows another variable without a \
                                 separator; the two cannot be told apart",
                                f.source
                            );
                        }
                        let existing = fields.iter().position(|g| *g == f);
                        let idx = match existing {
                            Some(i) if !used_here.contains(&i) => i,
                            _ => {
                                let mut f = f;
                                let base = f.name.clone();
                                let mut n = 2;
                                while fields.iter().any(|g| g.name == f.name) {
                                    f.name = format!("{base}_{n}");
                                    n += 1;
                                }
                                fields.push(f);
                                fields.len() - 1
                            }
                        };
                        used_here.push(idx);
                        tokens.push(Token::Field(idx, false));
                    }
                }
            }
            // Mark quoted fields and build the literal finders.
            for i in 0..tokens.len() {
                let before_quote =
                    i > 0 && matches!(&tokens[i - 1], Token::Literal(l, _) if l.ends_with(b"\""));
                let after_quote =
                    matches!(tokens.get(i + 1), Some(Token::Literal(l, _)) if l.starts_with(b"\""));
                if let Token::Field(_, q) = &mut tokens[i] {
                    *q = before_quote && after_quote;
                }
                if let Token::Literal(l, finder) = &mut tokens[i] {
                    *finder = Some(Box::new(Finder::new(l.as_slice()).into_owned()));
                }
            }
            alts.push(Alt { tokens });
        }
        Ok(LogFormat {
            fields,
            alts,
            spec: spec.to_string(),
        })
    }

    /// Matches `line` (its trailing `\r`/`\n` already removed or not) and fills `spans` (one
    /// entry per [`LogFormat::fields`]) with the byte range of each field; fields the matching
    /// alternative does not have are `None`.
    pub fn match_line(
        &self,
        line: &[u8],
        spans: &mut Vec<Option<(usize, usize)>>,
    ) -> Result<(), MatchError<'_>> {
        let line = trim_eol(line);
        let mut best: Option<MatchError> = None;
        for alt in &self.alts {
            spans.clear();
            spans.resize(self.fields.len(), None);
            match match_alt(alt, line, spans) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if best.as_ref().is_none_or(|b| e.pos > b.pos) {
                        best = Some(e);
                    }
                }
            }
        }
        Err(best.unwrap_or(MatchError {
            pos: 0,
            expected: Expected::AFormat,
        }))
    }
}

/// Removes trailing `\n` and `\r`.
pub fn trim_eol(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., b'\n' | b'\r'] = line {
        line = rest;
    }
    line
}

fn match_alt<'a>(
    alt: &'a Alt,
    line: &[u8],
    spans: &mut [Option<(usize, usize)>],
) -> Result<(), MatchError<'a>> {
    let mut pos = 0usize;
    let n = alt.tokens.len();
    for (ti, tok) in alt.tokens.iter().enumerate() {
        match tok {
            Token::Literal(l, _) => {
                if !line[pos..].starts_with(l) {
                    return Err(MatchError {
                        pos,
                        expected: Expected::Literal(l),
                    });
                }
                pos += l.len();
            }
            Token::Field(fi, quoted) => {
                let end = match alt.tokens.get(ti + 1) {
                    None => line.len(),
                    Some(Token::Literal(l, finder)) => {
                        let found = if ti + 2 == n {
                            // The literal ends the format: anchor it at the end of the line.
                            let end = (line.len() >= pos + l.len() && line.ends_with(l))
                                .then(|| line.len() - l.len());
                            if *quoted && end.is_some() {
                                // Tolerate unescaped quotes inside the last quoted field (old
                                // Apache), but not a further quoted field (`" "`): a combined
                                // format must not swallow nginx main's x-forwarded-for.
                                let e = end.unwrap_or(0);
                                let first = find_quoted_end(line, pos, l);
                                (first == end
                                    || memchr::memmem::find(&line[pos..e], b"\" \"").is_none())
                                .then_some(e)
                            } else {
                                end
                            }
                        } else if *quoted {
                            find_quoted_end(line, pos, l)
                        } else {
                            finder
                                .as_ref()
                                .and_then(|f| f.find(&line[pos..]))
                                .map(|k| pos + k)
                        };
                        match found {
                            Some(e) => e,
                            None => {
                                return Err(MatchError {
                                    pos,
                                    expected: Expected::FieldBefore(l),
                                })
                            }
                        }
                    }
                    Some(Token::Field(..)) => unreachable!("rejected when compiling"),
                };
                spans[*fi] = Some((pos, end));
                pos = end;
            }
        }
    }
    if pos != line.len() {
        return Err(MatchError {
            pos,
            expected: Expected::EndOfLine,
        });
    }
    Ok(())
}

/// The end of a quoted field starting at `pos`: the first `"` not escaped by a backslash at
/// which `lit` (which starts with `"`) matches.
fn find_quoted_end(line: &[u8], pos: usize, lit: &[u8]) -> Option<usize> {
    let mut j = pos;
    while j < line.len() {
        let k = j + memchr::memchr2(b'"', b'\\', &line[j..])?;
        if line[k] == b'\\' {
            j = k + 2;
            continue;
        }
        if line[k..].starts_with(lit) {
            return Some(k);
        }
        j = k + 1;
    }
    None
}

enum Part {
    Lit(Vec<u8>),
    Field(FieldDef),
}

fn def(name: &str, kind: FieldKind, source: &str) -> FieldDef {
    FieldDef {
        name: name.to_string(),
        kind,
        source: source.to_string(),
    }
}

/// What an nginx variable becomes.
fn nginx_field(var: &str) -> FieldDef {
    use FieldKind::*;
    let src = format!("${var}");
    match var {
        "remote_addr" | "realip_remote_addr" => def("remote_addr", Addr, &src),
        "remote_user" => def("remote_user", Text, &src),
        "time_local" => def("time", TimeLocal, &src),
        "time_iso8601" => def("time", TimeIso, &src),
        "msec" => def("time", TimeEpoch, &src),
        "request" => def("request", Request, &src),
        "status" => def("status", UInt16, &src),
        "body_bytes_sent" => def("bytes", UInt64, &src),
        "http_referer" => def("referer", Text, &src),
        "http_user_agent" => def("user_agent", Text, &src),
        "http_x_forwarded_for" => def("x_forwarded_for", Text, &src),
        "bytes_sent" | "request_length" | "connection" | "connection_requests" | "pid" => {
            def(var, UInt64, &src)
        }
        "server_port" | "remote_port" => def(var, UInt16, &src),
        "request_time" => def(var, Float64, &src),
        _ => def(var, Text, &src),
    }
}

fn tokenize_nginx(src: &str) -> anyhow::Result<Vec<Part>> {
    let b = src.as_bytes();
    let mut parts = Vec::new();
    let mut lit = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            let (name, next) = if b.get(i + 1) == Some(&b'{') {
                let close = src[i + 2..]
                    .find('}')
                    .ok_or_else(|| anyhow::anyhow!("unclosed ${{ in log format {src:?}"))?;
                (&src[i + 2..i + 2 + close], i + 3 + close)
            } else {
                let mut j = i + 1;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                    j += 1;
                }
                (&src[i + 1..j], j)
            };
            if name.is_empty() {
                lit.push(b'$');
                i += 1;
                continue;
            }
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            parts.push(Part::Field(nginx_field(name)));
            i = next;
        } else {
            lit.push(b[i]);
            i += 1;
        }
    }
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    Ok(parts)
}

/// What an Apache `%` directive (with its `{name}` argument, if any) becomes.
fn apache_field(d: char, arg: Option<&str>, src: &str) -> FieldDef {
    use FieldKind::*;
    match (d, arg) {
        ('h' | 'a', _) => def("remote_addr", Addr, src),
        ('l', _) => def("ident", Text, src),
        ('u', _) => def("remote_user", Text, src),
        ('t', None) => def("time", TimeLocal, src),
        ('r', _) => def("request", Request, src),
        ('s', _) => def("status", UInt16, src),
        ('b' | 'B', _) => def("bytes", UInt64, src),
        ('O', _) => def("bytes_sent", UInt64, src),
        ('I', _) => def("bytes_received", UInt64, src),
        ('D', _) => def("request_time_us", UInt64, src),
        ('T', None) => def("request_time_s", UInt64, src),
        ('v' | 'V', _) => def("server_name", Text, src),
        ('p', _) => def("server_port", UInt16, src),
        ('m', _) => def("method", Text, src),
        ('U', _) => def("path", Text, src),
        ('q', _) => def("query", Text, src),
        ('H', _) => def("protocol", Text, src),
        ('i', Some(h)) => {
            let h = h.to_ascii_lowercase().replace('-', "_");
            match h.as_str() {
                "referer" => def("referer", Text, src),
                "user_agent" => def("user_agent", Text, src),
                "x_forwarded_for" => def("x_forwarded_for", Text, src),
                _ => def(&format!("http_{h}"), Text, src),
            }
        }
        (c, Some(a)) => def(
            &format!(
                "{c}_{}",
                a.to_ascii_lowercase()
                    .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
            ),
            Text,
            src,
        ),
        (c, None) => def(&format!("f_{c}"), Text, src),
    }
}

fn tokenize_apache(src: &str) -> anyhow::Result<Vec<Part>> {
    let chars: Vec<char> = src.chars().collect();
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            // As in httpd.conf: \" \t \n \\ inside the format string.
            match chars[i + 1] {
                'n' => lit.push('\n'),
                't' => lit.push('\t'),
                o => lit.push(o),
            }
            i += 2;
            continue;
        }
        if c != '%' {
            lit.push(c);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        if chars.get(i) == Some(&'%') {
            lit.push('%');
            i += 1;
            continue;
        }
        // Modifiers: status-code conditions (`400,501` or `!200`) and `<`/`>`.
        while i < chars.len()
            && (chars[i].is_ascii_digit() || matches!(chars[i], ',' | '!' | '<' | '>'))
        {
            i += 1;
        }
        let mut arg = None;
        if chars.get(i) == Some(&'{') {
            let close = chars[i..]
                .iter()
                .position(|&c| c == '}')
                .ok_or_else(|| anyhow::anyhow!("unclosed %{{ in log format {src:?}"))?;
            arg = Some(chars[i + 1..i + close].iter().collect::<String>());
            i += close + 1;
        }
        let d = *chars
            .get(i)
            .ok_or_else(|| anyhow::anyhow!("log format {src:?} ends inside a % directive"))?;
        i += 1;
        let text: String = chars[start..i].iter().collect();
        // Apache writes `%t` with its brackets: `[26/Jul/2023:00:01:26 -0700]`.
        let bracketed = d == 't' && arg.is_none();
        if bracketed {
            lit.push('[');
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(std::mem::take(&mut lit).into_bytes()));
        }
        parts.push(Part::Field(apache_field(d, arg.as_deref(), &text)));
        if bracketed {
            lit.push(']');
        }
    }
    if !lit.is_empty() {
        parts.push(Part::Lit(lit.into_bytes()));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(f: &LogFormat, line: &str) -> Vec<Option<String>> {
        let mut spans = Vec::new();
        f.match_line(line.as_bytes(), &mut spans).unwrap();
        spans
            .iter()
            .map(|s| s.map(|(a, b)| line[a..b].to_string()))
            .collect()
    }

    #[test]
    fn combined_splits() {
        let f = LogFormat::parse("combined").unwrap();
        let names: Vec<_> = f.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "remote_addr",
                "remote_user",
                "time",
                "request",
                "status",
                "bytes",
                "referer",
                "user_agent"
            ]
        );
        let v = fields(
            &f,
            r#"::1 - bob [20/Jul/2009:22:59:26 +0000] "GET /a\"b HTTP/1.0" 200 134 "-" "x \"q\" y""#,
        );
        assert_eq!(v[0].as_deref(), Some("::1"));
        assert_eq!(v[1].as_deref(), Some("bob"));
        assert_eq!(v[3].as_deref(), Some(r#"GET /a\"b HTTP/1.0"#));
        assert_eq!(v[7].as_deref(), Some(r#"x \"q\" y"#));
    }

    #[test]
    fn unescaped_quote_in_last_field() {
        let f = LogFormat::parse("combined").unwrap();
        let v = fields(
            &f,
            r#"1.2.3.4 - - [20/Jul/2009:22:59:26 +0000] "GET / HTTP/1.0" 200 1 "-" "a "b" c""#,
        );
        assert_eq!(v[7].as_deref(), Some(r#"a "b" c"#));
    }

    #[test]
    fn auto_takes_common_and_main() {
        let f = LogFormat::parse("auto").unwrap();
        assert_eq!(f.fields.len(), 9);
        let v = fields(
            &f,
            r#"1.2.3.4 - - [20/Jul/2009:22:59:26 +0000] "GET / HTTP/1.0" 500 2216"#,
        );
        assert_eq!(v[5].as_deref(), Some("2216"));
        assert_eq!(v[6], None);
        let v = fields(
            &f,
            r#"1.2.3.4 - - [20/Jul/2009:22:59:26 +0000] "GET / HTTP/1.0" 500 2216 "-" "ua" "9.9.9.9""#,
        );
        assert_eq!(v[8].as_deref(), Some("9.9.9.9"));
    }

    #[test]
    fn rejects_bad_lines_with_position() {
        let f = LogFormat::parse("combined").unwrap();
        let mut s = Vec::new();
        let e = f
            .match_line(
                br#"192.168.202.254 [20/Jul/2009:22:59:29 +0000] "GET / HTTP/1.0" 404 1 "-" "x""#,
                &mut s,
            )
            .unwrap_err();
        assert_eq!(e.pos, 0);
        assert!(e.expected.to_string().contains("\" - \""), "{}", e.expected);
    }

    #[test]
    fn apache_format() {
        let f = LogFormat::parse(
            r#"%v:%p %h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-agent}i\" %D"#,
        )
        .unwrap();
        let names: Vec<_> = f.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "server_name",
                "server_port",
                "remote_addr",
                "ident",
                "remote_user",
                "time",
                "request",
                "status",
                "bytes",
                "referer",
                "user_agent",
                "request_time_us"
            ]
        );
        let v = fields(
            &f,
            r#"localhost:443 178.20.184.42 1j0vhgd jsmith [26/Jul/2023:00:01:26 -0700] "GET /x HTTP/2.0" 200 17163 "-" "Mozilla/5.0" 116075"#,
        );
        assert_eq!(v[11].as_deref(), Some("116075"));
        assert_eq!(v[3].as_deref(), Some("1j0vhgd"));
    }

    #[test]
    fn adjacent_variables_are_refused() {
        assert!(LogFormat::parse("$remote_addr$status").is_err());
        assert!(LogFormat::parse("nothing here").is_err());
    }
}
