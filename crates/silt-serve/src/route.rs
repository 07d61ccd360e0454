//! Routes: which table a Forward tag goes to (`--route 'docker.**=docker.nginx'`).
//!
//! Patterns follow fluentd's `<match>`: parts separated by `.`, `*` matches within one part
//! (`app.*`, `app.web*`), `**` zero or more parts, `{a,b}` one of several patterns, anywhere in
//! the pattern (`app.{web,api}.access`, `{sys.*,kern}`), and patterns separated by white space
//! are alternatives too (`a.** b.**`). A pattern with unbalanced braces or an
//! empty part is refused when the route is parsed. The first route that matches wins. A tag no
//! route matches goes to the table named like it: lower-cased, characters other than
//! `[a-z0-9_]` as `_`, the first part the module and the rest joined with `_` (`app.web.access`
//! → `app.web_access`, a one-part tag `nginx` → `forward.nginx`).
//!
//! Touches nothing.

use silt_core::TableName;

/// One `PATTERN=TABLE` route.
#[derive(Debug, Clone)]
pub struct Route {
    pub pattern: String,
    pub table: TableName,
    /// The pattern with its braces expanded: each alternative as its parts.
    alternatives: Vec<Vec<String>>,
}

/// The most alternatives one pattern's braces may expand to.
const MAX_ALTERNATIVES: usize = 1024;

/// `pattern` with every `{a,b}` expanded (nested ones too), or why it cannot be.
fn expand(pattern: &str) -> Result<Vec<String>, String> {
    let Some(open) = pattern.find('{') else {
        if pattern.contains('}') {
            return Err("a '}' without its '{'".into());
        }
        return Ok(vec![pattern.to_string()]);
    };
    if pattern[..open].contains('}') {
        return Err("a '}' without its '{'".into());
    }
    // The matching brace, and the top-level commas between.
    let (mut depth, mut close, mut cuts) = (0usize, None, vec![open]);
    for (i, c) in pattern[open..].char_indices().map(|(i, c)| (open + i, c)) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            ',' if depth == 1 => cuts.push(i),
            _ => {}
        }
    }
    let close = close.ok_or("a '{' without its '}'")?;
    cuts.push(close);
    let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
    let mut out = Vec::new();
    for w in cuts.windows(2) {
        let choice = pattern[w[0] + 1..w[1]].trim();
        for rest in expand(&format!("{head}{choice}{tail}"))? {
            out.push(rest);
            if out.len() > MAX_ALTERNATIVES {
                return Err(format!("more than {MAX_ALTERNATIVES} alternatives"));
            }
        }
    }
    Ok(out)
}

/// Whether one part matches a part of the pattern, `*` matching any run of characters.
fn glob(pat: &str, part: &str) -> bool {
    match pat.split_once('*') {
        None => pat == part,
        Some((pre, rest)) => {
            let Some(mut left) = part.strip_prefix(pre) else {
                return false;
            };
            // Greedy enough for patterns of a few stars: try every place the rest could start.
            loop {
                if glob(rest, left) {
                    return true;
                }
                let mut chars = left.chars();
                if chars.next().is_none() {
                    return false;
                }
                left = chars.as_str();
            }
        }
    }
}

impl Route {
    /// Parses `PATTERN=TABLE`.
    pub fn parse(spec: &str) -> anyhow::Result<Self> {
        let (pattern, table) = spec.split_once('=').ok_or_else(|| {
            anyhow::anyhow!("--route {spec:?}: use PATTERN=TABLE, e.g. 'docker.**=docker.nginx'")
        })?;
        let table = TableName::parse(table.trim()).ok_or_else(|| {
            anyhow::anyhow!(
                "--route {spec:?}: table {table:?} must be module.type with [a-z0-9_] in each part"
            )
        })?;
        anyhow::ensure!(
            !pattern.trim().is_empty(),
            "--route {spec:?}: empty pattern"
        );
        // Patterns separated by white space are alternatives, as in fluentd's `<match a b>`.
        let mut alternatives: Vec<Vec<String>> = Vec::new();
        for one in pattern.split_whitespace() {
            for a in
                expand(one).map_err(|e| anyhow::anyhow!("--route {spec:?}: the pattern has {e}"))?
            {
                alternatives.push(a.split('.').map(str::to_string).collect());
            }
        }
        anyhow::ensure!(
            alternatives
                .iter()
                .all(|parts: &Vec<String>| parts.iter().all(|p| !p.is_empty())),
            "--route {spec:?}: the pattern has an empty part (two dots, a dot at an end, or an \
             empty alternative in braces)"
        );
        Ok(Self {
            pattern: pattern.trim().to_string(),
            table,
            alternatives,
        })
    }
}

/// The table for `tag` (see the module documentation).
pub fn resolve(routes: &[Route], tag: &str) -> TableName {
    let parts: Vec<&str> = tag.split('.').collect();
    for r in routes {
        if r.alternatives.iter().any(|a| match_parts(a, &parts)) {
            return r.table.clone();
        }
    }
    default_table(tag)
}

fn clean(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "_".into()
    } else {
        s
    }
}

fn default_table(tag: &str) -> TableName {
    let parts: Vec<String> = tag.split('.').map(clean).collect();
    let name = match parts.as_slice() {
        [one] => format!("forward.{one}"),
        [first, rest @ ..] => format!("{first}.{}", rest.join("_")),
        [] => "forward._".into(),
    };
    TableName::parse(&name).unwrap_or_else(|| TableName::parse("forward.unnamed").expect("valid"))
}

fn match_parts(pat: &[String], tag: &[&str]) -> bool {
    match pat.split_first() {
        None => tag.is_empty(),
        Some((p, rest)) if p == "**" => (0..=tag.len()).any(|i| match_parts(rest, &tag[i..])),
        Some((p, rest)) => match tag.split_first() {
            Some((t, trest)) => glob(p, t) && match_parts(rest, trest),
            None => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fluentd_patterns() {
        let routes = vec![
            Route::parse("docker.**=docker.nginx").unwrap(),
            Route::parse("app.*.access=web.access").unwrap(),
            Route::parse("{sys.*,kern}=os.syslog").unwrap(),
        ];
        let t = |tag: &str| resolve(&routes, tag).to_string();
        assert_eq!(t("docker"), "docker.nginx");
        assert_eq!(t("docker.abc.def"), "docker.nginx");
        assert_eq!(t("app.web.access"), "web.access");
        assert_eq!(t("app.web.error"), "app.web_error");
        assert_eq!(t("sys.auth"), "os.syslog");
        assert_eq!(t("kern"), "os.syslog");
        assert_eq!(t("Nginx"), "forward.nginx");
        assert_eq!(t("my-app.Web"), "my_app.web");
        assert!(Route::parse("nope").is_err());
        assert!(Route::parse("a=Bad Table").is_err());
        // Braces anywhere (nested too), stars within a part.
        let routes = vec![
            Route::parse("app.{web,api.{v1,v2}}.access=web.access").unwrap(),
            Route::parse("k8s.*-prod.**=k8s.prod").unwrap(),
        ];
        let t = |tag: &str| resolve(&routes, tag).to_string();
        assert_eq!(t("app.web.access"), "web.access");
        assert_eq!(t("app.api.v2.access"), "web.access");
        assert_eq!(t("app.api.v3.access"), "app.api_v3_access");
        assert_eq!(t("k8s.shop-prod"), "k8s.prod");
        assert_eq!(t("k8s.shop-prod.nginx.x"), "k8s.prod");
        assert_eq!(t("k8s.shop-dev"), "k8s.shop_dev");
        let routes = vec![Route::parse("a.** b.*=x.y").unwrap()];
        assert_eq!(resolve(&routes, "a.q.r").to_string(), "x.y");
        assert_eq!(resolve(&routes, "b.q").to_string(), "x.y");
        assert_eq!(resolve(&routes, "c.q").to_string(), "c.q");
        for bad in [
            "x.{a,b=a.b",
            "x.a,b}=a.b",
            "x.}{=a.b",
            "x..y=a.b",
            "x.=a.b",
            "{a,}=a.b",
            "{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}{o,p}{q,r}{s,t}{u,v}=a.b",
        ] {
            let e = Route::parse(bad).unwrap_err().to_string();
            assert!(e.contains("the pattern has"), "{bad}: {e}");
        }
    }
}
