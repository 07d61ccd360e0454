//! `silt serve --config FILE`: the same settings as the command line, in a TOML file
//! (`docs/silt.example.toml` is the documented example; a test parses it).
//!
//! The file's top-level keys are the long flags of `silt serve` (`flush-age = "30s"`,
//! `syslog = ["udp://127.0.0.1:5514"]`; `flush_age` is accepted too). Two structured sections
//! say what flags alone say less clearly:
//! - `[[route]]` with `tag`, `table` and optionally `parse-field` (a string or a list), which is
//!   `--route TAG=TABLE` plus `--parse-field TABLE:FIELD=FORMAT`;
//! - `[table."docker.nginx"]` with `parse-field`, per table.
//!
//! The file becomes flags, which go through the same parser as the command line (so a value
//! is checked, and its error worded, exactly as on the command line); flags given on the
//! command line come after the file's, so a single-valued flag there overrides the file and a
//! repeatable one adds to its list. Relative paths in the file (`lake` unless a URL, `state`, the `*-file` keys,
//! `mmdb`, `ip-ranges`, `rdns`, the path of a `tail`) are relative to the file's directory, not to the working directory, so a
//! service manager can start `silt serve --config /etc/silt/silt.toml` from anywhere.
//!
//! Touches only the file it is given; the command line parser is `crate::cli`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command, ServeArgs};

/// Keys whose value is a path, resolved against the file's directory.
const PATH_KEYS: &[&str] = &[
    "lake",
    "state",
    "token-file",
    "forward-shared-key-file",
    "forward-users-file",
    "mmdb",
    "ip-ranges",
    "rdns",
];

/// `silt serve` arguments from `config` with `cli` (the command line's arguments after `serve`)
/// applied on top.
pub fn serve_args(config: &Path, cli: &[OsString]) -> anyhow::Result<ServeArgs> {
    let text = std::fs::read_to_string(config)
        .with_context(|| format!("cannot read the config file {}", config.display()))?;
    let base = config
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let flags = flags_from_toml(&text, &base)
        .with_context(|| format!("in the config file {}", config.display()))?;
    let mut argv: Vec<OsString> = vec!["silt".into(), "serve".into()];
    argv.extend(flags.into_iter().map(OsString::from));
    argv.extend(cli.iter().cloned());
    let matches = Cli::command()
        .try_get_matches_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", e.render()))
        .with_context(|| {
            format!(
                "the config file {} with the command line: a key's value is checked as its \
                 flag (`flush-age = ...` as --flush-age)",
                config.display()
            )
        })?;
    match Cli::from_arg_matches(&matches)?.command {
        Command::Serve(a) => Ok(a),
        _ => unreachable!("argv starts with serve"),
    }
}

/// The long flags `silt serve` accepts (without `--`).
fn serve_flags() -> Vec<String> {
    let cmd = Cli::command();
    let serve = cmd
        .find_subcommand("serve")
        .expect("silt has a serve command");
    serve
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

/// The 1-based line where `key` is set in `text` (for messages), if it can be found.
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix('"').unwrap_or(l);
            l.starts_with(key)
                && l[key.len()..]
                    .trim_start()
                    .trim_start_matches('"')
                    .trim_start()
                    .starts_with('=')
        })
        .map(|i| i + 1)
}

fn at(text: &str, key: &str) -> String {
    line_of(text, key)
        .map(|l| format!(" (line {l})"))
        .unwrap_or_default()
}

/// The file's settings as `--flag=value` arguments.
fn flags_from_toml(text: &str, base: &Path) -> anyhow::Result<Vec<String>> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
    let known = serve_flags();
    let mut out = Vec::new();
    for (raw_key, value) in &doc {
        let key = raw_key.replace('_', "-");
        match key.as_str() {
            "route" | "routes" => {
                routes(value, &mut out).with_context(|| format!("[[route]]{}", at(text, "tag")))?
            }
            "table" | "tables" => tables(value, &mut out).context("[table.\"module.type\"]")?,
            "config" => bail!(
                "`config`{}: a config file cannot name another",
                at(text, raw_key)
            ),
            k if known.iter().any(|f| f == k) => {
                let resolve = |v: String| -> String {
                    if PATH_KEYS.contains(&k) {
                        relative_to(base, &v)
                    } else if k == "tail" {
                        tail_relative_to(base, &v)
                    } else {
                        v
                    }
                };
                for v in
                    scalars(value).with_context(|| format!("`{raw_key}`{}", at(text, raw_key)))?
                {
                    match v {
                        Scalar::Flag(true) => out.push(format!("--{k}")),
                        Scalar::Flag(false) => {}
                        Scalar::Text(s) => out.push(format!("--{k}={}", resolve(s))),
                    }
                }
            }
            _ => bail!(
                "unknown key `{raw_key}`{}: the keys are the long flags of `silt serve` ({}), \
                 plus [[route]] and [table.\"module.type\"]",
                at(text, raw_key),
                known
                    .iter()
                    .filter(|f| !matches!(f.as_str(), "config" | "help"))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
    Ok(out)
}

enum Scalar {
    Flag(bool),
    Text(String),
}

/// A value, or each value of a list, as flag values.
fn scalars(v: &toml::Value) -> anyhow::Result<Vec<Scalar>> {
    Ok(match v {
        toml::Value::Array(items) => items
            .iter()
            .map(|i| match i {
                toml::Value::Array(_) | toml::Value::Table(_) => {
                    bail!("a list may hold strings and numbers only")
                }
                other => scalar(other),
            })
            .collect::<anyhow::Result<_>>()?,
        toml::Value::Table(_) => bail!("expected a value or a list, found a table"),
        other => vec![scalar(other)?],
    })
}

fn scalar(v: &toml::Value) -> anyhow::Result<Scalar> {
    Ok(match v {
        toml::Value::String(s) => Scalar::Text(s.clone()),
        toml::Value::Integer(i) => Scalar::Text(i.to_string()),
        toml::Value::Float(f) => Scalar::Text(f.to_string()),
        toml::Value::Boolean(b) => Scalar::Flag(*b),
        toml::Value::Datetime(d) => Scalar::Text(d.to_string()),
        toml::Value::Array(_) | toml::Value::Table(_) => bail!("expected a single value"),
    })
}

fn text_list(v: &toml::Value, what: &str) -> anyhow::Result<Vec<String>> {
    scalars(v)?
        .into_iter()
        .map(|s| match s {
            Scalar::Text(t) => Ok(t),
            Scalar::Flag(_) => bail!("`{what}` takes text, e.g. \"log=access\""),
        })
        .collect()
}

/// `[[route]]` entries: `tag`, `table`, optional `parse-field`.
fn routes(v: &toml::Value, out: &mut Vec<String>) -> anyhow::Result<()> {
    let toml::Value::Array(items) = v else {
        bail!("write routes as [[route]] sections with tag = \"...\" and table = \"...\"");
    };
    for (i, item) in items.iter().enumerate() {
        let toml::Value::Table(t) = item else {
            bail!("route {}: expected a [[route]] section", i + 1);
        };
        let get = |k: &str| -> anyhow::Result<String> {
            match t.get(k) {
                Some(toml::Value::String(s)) => Ok(s.clone()),
                Some(_) => bail!("route {}: `{k}` must be a string", i + 1),
                None => bail!("route {}: `{k}` is missing", i + 1),
            }
        };
        for k in t.keys() {
            if !matches!(
                k.replace('_', "-").as_str(),
                "tag" | "table" | "parse-field"
            ) {
                bail!(
                    "route {}: unknown key `{k}` (a route has tag, table, parse-field)",
                    i + 1
                );
            }
        }
        let (tag, table) = (get("tag")?, get("table")?);
        out.push(format!("--route={tag}={table}"));
        if let Some(pf) = t.get("parse-field").or_else(|| t.get("parse_field")) {
            for f in text_list(pf, "parse-field")? {
                out.push(format!("--parse-field={table}:{f}"));
            }
        }
    }
    Ok(())
}

/// `[table."module.type"]` sections: per-table settings.
fn tables(v: &toml::Value, out: &mut Vec<String>) -> anyhow::Result<()> {
    let toml::Value::Table(t) = v else {
        bail!("write per-table settings as [table.\"module.type\"] sections");
    };
    for (name, settings) in t {
        let toml::Value::Table(s) = settings else {
            bail!("table {name:?}: expected a section ([table.\"{name}\"])");
        };
        let (mut enrich, mut columns) = (None, None);
        for (k, v) in s {
            match k.replace('_', "-").as_str() {
                "parse-field" => {
                    for f in text_list(v, "parse-field")? {
                        out.push(format!("--parse-field={name}:{f}"));
                    }
                }
                "enrich" => enrich = Some(text_list(v, "enrich")?.join(",")),
                "enrich-columns" => columns = Some(text_list(v, "enrich-columns")?.join(",")),
                _ => bail!(
                    "table {name:?}: unknown key `{k}` (a table section has parse-field, enrich, enrich-columns)"
                ),
            }
        }
        match (enrich, columns) {
            (Some(e), None) => out.push(format!("--enrich-table={name}={e}")),
            (Some(e), Some(c)) => out.push(format!("--enrich-table={name}={e}:{c}")),
            (None, Some(_)) => {
                bail!("table {name:?}: enrich-columns needs enrich (the attributes)")
            }
            (None, None) => {}
        }
    }
    Ok(())
}

fn relative_to(base: &Path, v: &str) -> String {
    let p = Path::new(v);
    // A URL (`s3://bucket/prefix`, `file:///path`) is not a path below the file's directory.
    if p.is_absolute() || v.is_empty() || v.contains("://") {
        v.to_string()
    } else {
        base.join(p).display().to_string()
    }
}

/// `[FORMAT:]GLOB` with the glob resolved against `base` (the format prefix as
/// `silt_serve::tail::TailSpec::parse` reads it: a first part without `/`).
fn tail_relative_to(base: &Path, v: &str) -> String {
    match v.split_once(':') {
        Some((f, rest)) if !f.is_empty() && !f.contains('/') => {
            format!("{f}:{}", relative_to(base, rest))
        }
        _ => relative_to(base, v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(toml: &str, cli: &[&str]) -> anyhow::Result<ServeArgs> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("silt.toml");
        std::fs::write(&path, toml).unwrap();
        let cli: Vec<OsString> = cli.iter().map(OsString::from).collect();
        serve_args(&path, &cli).map(|mut a| {
            // Paths relative to the file's directory: make them comparable across runs.
            a.lake = a.lake.map(|l| {
                PathBuf::from(
                    l.display()
                        .to_string()
                        .replace(&*dir.path().display().to_string(), "<dir>"),
                )
            });
            a.tails = a
                .tails
                .iter()
                .map(|t| t.replace(&*dir.path().display().to_string(), "<dir>"))
                .collect();
            a
        })
    }

    #[test]
    fn the_documented_example_parses() {
        let example = include_str!("../../../docs/silt.example.toml");
        let a = args(example, &[]).unwrap();
        assert_eq!(a.lake.as_deref(), Some(Path::new("<dir>/lake")));
        assert_eq!(
            a.forward.map(|f| f.to_string()).as_deref(),
            Some("127.0.0.1:24224")
        );
        assert_eq!(a.syslogs.len(), 2);
        assert!(a.routes.iter().any(|r| r == "docker.**=docker.nginx"));
        assert!(a
            .parse_fields
            .iter()
            .any(|p| p == "docker.nginx:log=access"));
        assert_eq!(a.flush_age, std::time::Duration::from_secs(30));
        assert!(a.tails.iter().any(|t| t == "/opt/zeek/logs/current/*.log"));
        assert!(a
            .tails
            .iter()
            .any(|t| t == "suricata:/var/log/suricata/eve.json"));
        assert_eq!(a.compact_every, Some(std::time::Duration::from_secs(600)));
        assert_eq!(a.keep, Some(std::time::Duration::from_secs(30 * 86400)));
        assert_eq!(a.keep_table, ["suricata.flow=7d"]);
    }

    #[test]
    fn command_line_overrides_and_adds() {
        let a = args(
            "lake = \"l\"\nflush-age = \"30s\"\nsyslog = [\"udp://127.0.0.1:5514\"]\ntail = [\"zeek:logs/*.log\"]\n",
            &["--flush-age", "5s", "--syslog", "tcp://127.0.0.1:6514"],
        )
        .unwrap();
        assert_eq!(a.flush_age, std::time::Duration::from_secs(5));
        assert_eq!(a.syslogs, ["udp://127.0.0.1:5514", "tcp://127.0.0.1:6514"]);
        assert_eq!(a.lake.as_deref(), Some(Path::new("<dir>/l")));
        assert_eq!(a.tails, ["zeek:<dir>/logs/*.log"]);
        // A URL is not a path below the file's directory; --state is.
        let a = args("lake = \"s3://bucket/prefix\"\nstate = \"st\"\n", &[]).unwrap();
        assert_eq!(a.lake.as_deref(), Some(Path::new("s3://bucket/prefix")));
        assert!(a.state.as_ref().unwrap().ends_with("st") && a.state.unwrap().is_absolute());
        // --lake on the command line wins over the file's, and stays as given.
        let a = args("lake = \"l\"\n", &["--lake", "/abs/lake"]).unwrap();
        assert_eq!(a.lake.as_deref(), Some(Path::new("/abs/lake")));
    }

    /// The Kafka settings of the documented example, uncommented, reach the flags.
    #[test]
    fn kafka_settings() {
        let example = include_str!("../../../docs/silt.example.toml");
        let kafka: String = example
            .lines()
            .skip_while(|l| !l.starts_with("# Kafka topics"))
            .skip(2)
            .take_while(|l| l.starts_with("# "))
            .map(|l| format!("{}\n", &l[2..]))
            .collect();
        let a = args(&format!("lake = \"l\"\n{kafka}"), &[]).unwrap();
        assert_eq!(a.kafka.kafka.as_deref(), Some("127.0.0.1:9092"));
        assert_eq!(a.kafka.group, "silt-ingest");
        assert_eq!(a.kafka.topics.len(), 3);
        assert_eq!(a.kafka.topic_columns.len(), 1);
        assert_eq!(a.kafka.kafka_options.len(), 2);
        assert_eq!(a.kafka.kafka_meta.as_deref(), Some("key,headers,timestamp"));
        assert_eq!(a.instance.as_deref(), Some("a"));
        let spec = crate::opts::kafka_spec(&a.kafka).unwrap().unwrap();
        assert_eq!(spec.topics[2].table.as_deref(), Some("rasp.netdata"));
        assert!(spec.topics[2].columns.is_some());
        assert!(spec.meta.key && spec.meta.headers && !spec.meta.offset);
    }

    #[test]
    fn table_sections_give_their_own_enrichment() {
        let a = args(
            "lake = \"l\"\nenrich = \"asn\"\n[table.\"zeek.conn\"]\nenrich = [\"asn\", \"geo\"]\n\
             [table.\"web.access\"]\nparse-field = \"message=access\"\nenrich = \"geo\"\nenrich-columns = \"client_ip\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(a.enrich.enrich.as_deref(), Some("asn"));
        let mut own = a.enrich_tables.clone();
        own.sort();
        assert_eq!(own, ["web.access=geo:client_ip", "zeek.conn=asn,geo"]);
        assert_eq!(a.parse_fields, ["web.access:message=access"]);
        let (t, attrs, cols) = crate::opts::enrich_table(&own[0]).unwrap();
        assert_eq!(t.to_string(), "web.access");
        assert_eq!(attrs.to_string(), "geo");
        assert_eq!(cols.as_deref(), Some("client_ip"));
        let e = format!(
            "{:#}",
            args("[table.\"a.b\"]\nenrich-columns = \"x\"\n", &[]).unwrap_err()
        );
        assert!(e.contains("enrich-columns needs enrich"), "{e}");
        let e = format!(
            "{:#}",
            crate::opts::enrich_table("zeek.conn=asn,planet").unwrap_err()
        );
        assert!(e.contains("unknown enrichment attribute \"planet\""), "{e}");
    }

    #[test]
    fn bad_files_say_what_and_where() {
        let e = format!(
            "{:#}",
            args("lake = \"l\"\nflush-agee = \"1s\"\n", &[]).unwrap_err()
        );
        assert!(e.contains("unknown key `flush-agee` (line 2)"), "{e}");
        assert!(e.contains("flush-age"), "{e}");
        let e = format!(
            "{:#}",
            args("lake = \"l\"\nflush-age = \"soon\"\n", &[]).unwrap_err()
        );
        assert!(e.contains("--flush-age") && e.contains("soon"), "{e}");
        let e = format!("{:#}", args("lake = [\n", &[]).unwrap_err());
        assert!(e.contains("silt.toml"), "{e}");
        let e = format!(
            "{:#}",
            args("[[route]]\ntable = \"a.b\"\n", &[]).unwrap_err()
        );
        assert!(e.contains("`tag` is missing"), "{e}");
        let e = format!("{:#}", args("http = [[1]]\n", &[]).unwrap_err());
        assert!(e.contains("`http` (line 1)"), "{e}");
    }
}
