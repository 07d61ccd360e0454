//! Table names: `module.type`, e.g. `zeek.conn`, `suricata.alert`, `pcap.packet`.
//!
//! The name is also the table's directory in the lake and its SQL name (`module` is the SQL
//! schema, `type` the table), so both parts are restricted to `[a-z0-9_]`.

use std::fmt;

/// A table's name in the lake and in SQL.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableName {
    module: String,
    name: String,
}

impl TableName {
    /// Builds a name, folding each part to lower case and replacing every character outside
    /// `[a-z0-9_]` by `_` (Zeek `_path` values such as `weird.123.190` become `weird_123_190`).
    pub fn new(module: &str, name: &str) -> Self {
        Self {
            module: sanitize(module),
            name: sanitize(name),
        }
    }

    /// Parses `module.type` (the directory name in a lake); `None` if there is no dot.
    pub fn parse(s: &str) -> Option<Self> {
        let (m, n) = s.split_once('.')?;
        if m.is_empty() || n.is_empty() {
            return None;
        }
        let t = Self::new(m, n);
        (t.to_string() == s).then_some(t)
    }

    pub fn module(&self) -> &str {
        &self.module
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.module, self.name)
    }
}

fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        "_".to_string()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_odd_paths() {
        assert_eq!(
            TableName::new("zeek", "weird.123.190").to_string(),
            "zeek.weird_123_190"
        );
        assert_eq!(TableName::new("Zeek", "Conn").to_string(), "zeek.conn");
        assert_eq!(TableName::new("zeek", "").to_string(), "zeek._");
    }

    #[test]
    fn parses_directory_names() {
        assert_eq!(
            TableName::parse("zeek.conn"),
            Some(TableName::new("zeek", "conn"))
        );
        assert_eq!(TableName::parse("_rejects"), None);
        assert_eq!(TableName::parse("Zeek.conn"), None);
    }
}
