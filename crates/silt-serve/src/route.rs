//! Routes: which table a Forward tag goes to (`--route 'docker.**=docker.nginx'`).
//!
//! Patterns follow fluentd's `<match>`: parts separated by `.`, `*` matches one part, `**` zero or
//! more parts, `{a,b}` one of several patterns. The first route that matches wins. A tag no route
//! matches goes to the table named like it: lower-cased, characters other than `[a-z0-9_]` as
//! `_`, the first part the module and the rest joined with `_` (`app.web.access` →
//! `app.web_access`, a one-part tag `nginx` → `forward.nginx`).
//!
//! Touches nothing.

use silt_core::TableName;

/// One `PATTERN=TABLE` route.
#[derive(Debug, Clone)]
pub struct Route {
    pub pattern: String,
    pub table: TableName,
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
        Ok(Self {
            pattern: pattern.trim().to_string(),
            table,
        })
    }
}

/// The table for `tag` (see the module documentation).
pub fn resolve(routes: &[Route], tag: &str) -> TableName {
    let parts: Vec<&str> = tag.split('.').collect();
    for r in routes {
        if matches(&r.pattern, &parts) {
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

fn matches(pattern: &str, tag: &[&str]) -> bool {
    if let Some(inner) = pattern.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
        return inner.split(',').any(|p| matches(p.trim(), tag));
    }
    let pat: Vec<&str> = pattern.split('.').collect();
    match_parts(&pat, tag)
}

fn match_parts(pat: &[&str], tag: &[&str]) -> bool {
    match pat.split_first() {
        None => tag.is_empty(),
        Some((&"**", rest)) => (0..=tag.len()).any(|i| match_parts(rest, &tag[i..])),
        Some((p, rest)) => match tag.split_first() {
            Some((t, trest)) => (*p == "*" || p == t) && match_parts(rest, trest),
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
    }
}
