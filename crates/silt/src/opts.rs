//! Command-line options to library options: the writer configuration (`silt_lake`), the options
//! every decoder is made from (`silt_core::FormatOptions`, filled with each format family's own
//! options struct), the format choice and the transforms of a pipeline (`silt_ingest`).
//! Shared by `import`, `convert`, `bench` and `demo`; no command module imports another.
//!
//! Also `--lake`'s value parser ([`lake_path`]).
//!
//! Touches nothing but the schema file `--schema` names (read once) and, to check a `--lake` path,
//! the metadata of that path and its ancestors.

use std::path::PathBuf;
use std::sync::Arc;

use silt_access::{AccessOptions, ParseField, ParseFieldSpec};
use silt_core::{FormatOptions, FormatSpec, ReadOptions, TableName, Transform};
use silt_ingest::{registry, FormatChoice, Pipeline};
use silt_lake::WriterConfig;
use silt_logs::{LogOptions, TargetSchema};
use silt_pcap::PcapOptions;

use crate::cli::{AccessArgs, EnrichArgs, LogArgs, LookupArgs, PcapArgs, WriteOpts};

/// The writer configuration from `--store`, `--codec`, ... (validated).
pub fn writer_config(w: &WriteOpts) -> anyhow::Result<WriterConfig> {
    // `--partition-by FIELD[:auto|hour|day|month|none]` = the time column override +
    // `--partition`.
    let (time_column, partition) = match &w.partition_by {
        Some(spec) => {
            let (field, gran) = spec.split_once(':').unwrap_or((spec.as_str(), "auto"));
            let p = gran
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--partition-by {spec}: {e}"))?;
            (Some(field.to_string()), p)
        }
        None => (None, w.partition.parse().map_err(anyhow::Error::msg)?),
    };
    let cfg = WriterConfig {
        store: w.store.parse().map_err(anyhow::Error::msg)?,
        codec: w.codec.parse().map_err(anyhow::Error::msg)?,
        level: w.level,
        row_group_bytes: w.row_group_size,
        row_group_rows: w.row_group_rows,
        page_bytes: w.page_size,
        page_rows: w.page_rows,
        dictionary_page_bytes: w.dictionary_page_size,
        partition,
        sort: w.sort.clone(),
        bloom_columns: w.bloom.clone(),
        bloom_lookup_columns: !w.no_bloom,
        memory_bytes: w.memory,
        sort_buffer_bytes: w.sort_buffer,
        time_column,
        table_format: w.table_format.parse().map_err(anyhow::Error::msg)?,
        encodings: silt_lake::EncodingHints {
            dictionary: w.dictionary.clone(),
            no_dictionary: w.no_dictionary.clone(),
            delta: w.delta.clone(),
            byte_stream_split: w.byte_stream_split.clone(),
        },
        ..WriterConfig::default()
    };
    cfg.validate().map_err(anyhow::Error::msg)?;
    Ok(cfg)
}

/// The generic log readers' options (reads `--schema`). `--table` is `module.type` for them;
/// `format` is the format chosen (`access` takes a bare name too, so it is left to
/// [`access_options`] then).
fn log_options(a: &LogArgs, format: &str) -> anyhow::Result<LogOptions> {
    let table = match &a.table {
        Some(t) => match TableName::parse(t) {
            Some(t) => Some(t),
            None if format == "access" => None,
            None => anyhow::bail!(
                "--table {t:?}: use module.type with [a-z0-9_] in each part, e.g. web.nginx"
            ),
        },
        None => None,
    };
    let time_unit = match &a.time_unit {
        Some(u) => Some(u.parse().map_err(anyhow::Error::msg)?),
        None => None,
    };
    let schema = match &a.schema {
        Some(p) => Some(Arc::new(TargetSchema::from_file(p)?)),
        None => None,
    };
    let delimiter = match &a.delimiter {
        Some(d) if d == "\\t" || d == "tab" => Some(b'\t'),
        Some(d) if d.len() == 1 => Some(d.as_bytes()[0]),
        Some(d) => anyhow::bail!("--delimiter {d:?}: give one ASCII character (or \\t)"),
        None => None,
    };
    Ok(LogOptions {
        table,
        time_field: a.time_field.clone(),
        time_unit,
        schema,
        delimiter,
        no_header: a.no_header,
        syslog_year: None,
    })
}

/// The access-log reader's options (`--log-format`, `--table NAME` or `module.name`).
fn access_options(a: &AccessArgs, table: Option<&str>) -> anyhow::Result<AccessOptions> {
    AccessOptions::new(&a.log_format, table)
}

/// The PCAP reader's options (docs/pcap.md).
fn pcap_options(p: &PcapArgs, batch_rows: usize) -> anyhow::Result<PcapOptions> {
    let payload = match p.payload.as_deref() {
        None => None,
        Some("full") => Some(usize::MAX),
        Some(n) => Some(n.parse::<usize>().map_err(|_| {
            anyhow::anyhow!("--payload takes `full` or a number of bytes, not {n:?}")
        })?),
    };
    let secs = |s: f64, what: &str| -> anyhow::Result<i64> {
        anyhow::ensure!(
            s > 0.0 && s.is_finite(),
            "--{what} must be a positive number of seconds"
        );
        Ok((s * 1e6).round() as i64)
    };
    Ok(PcapOptions {
        batch_rows,
        payload,
        community_id_seed: p.community_id_seed,
        tables: match (p.flows, p.flows_only) {
            (_, true) => silt_pcap::Tables::Flows,
            (true, false) => silt_pcap::Tables::PacketsAndFlows,
            (false, false) => silt_pcap::Tables::Packets,
        },
        flow: silt_flow::FlowConfig {
            idle_timeout_us: secs(p.idle_timeout, "idle-timeout")?,
            tcp_idle_timeout_us: secs(p.tcp_idle_timeout, "tcp-idle-timeout")?,
            active_timeout_us: secs(p.active_timeout, "active-timeout")?,
            ..Default::default()
        },
    })
}

/// The format options of every family from the command line; `format` is the format chosen
/// (or `auto`).
pub fn format_options(
    format: &str,
    log: &LogArgs,
    access: &AccessArgs,
    pcap: &PcapArgs,
    batch_rows: usize,
) -> anyhow::Result<FormatOptions> {
    Ok(FormatOptions::new(ReadOptions { batch_rows })
        .with(log_options(log, format)?)
        .with(access_options(access, log.table.as_deref())?)
        .with(pcap_options(pcap, batch_rows)?)
        .with(silt_flowexport::CaptureOptions {
            port: pcap.port,
            community_id_seed: pcap.community_id_seed,
            templates: Default::default(),
        }))
}

/// `auto` (detection per input; with `extension_first`, a file extension that names a format
/// decides first) or a format of the registry.
pub fn format_choice(name: &str, extension_first: bool) -> anyhow::Result<FormatChoice> {
    if name == "auto" {
        return Ok(FormatChoice::Auto { extension_first });
    }
    Ok(FormatChoice::Fixed(registry::require(name)?))
}

/// `--parse-field` as a transform; an error for a format whose records hold no named text
/// fields (the flag is never silently ignored).
fn parse_field(
    a: &AccessArgs,
    format: Option<&FormatSpec>,
) -> anyhow::Result<Option<Box<dyn Transform>>> {
    let Some(spec) = a.parse_field.as_deref() else {
        return Ok(None);
    };
    if let Some(f) = format.filter(|f| !f.text_fields) {
        anyhow::bail!(
            "--parse-field applies to the generic log formats (json, msgpack, csv, docker, ...), not to {}",
            f.name
        );
    }
    let spec = ParseFieldSpec::parse(spec, a.keep_field)?;
    Ok(Some(Box::new(ParseField::new(spec))))
}

/// The pipeline for `format` (a registry name or `auto`) with the options and transforms the
/// command line asks for; every option is checked before any input is read.
pub fn pipeline(
    choice: FormatChoice,
    log: &LogArgs,
    access: &AccessArgs,
    pcap: &PcapArgs,
    enrich: &EnrichArgs,
    batch_rows: usize,
) -> anyhow::Result<Pipeline> {
    let (name, fixed) = match choice {
        FormatChoice::Fixed(f) => (f.name, Some(f)),
        FormatChoice::Auto { .. } => ("auto", None),
    };
    let options = format_options(name, log, access, pcap, batch_rows)?;
    if let Some(f) = fixed {
        f.check(&options)?;
    }
    let mut p = Pipeline::new(choice, options);
    if let Some(t) = parse_field(access, fixed)? {
        p = p.with_transform(t);
    }
    let l = &enrich.lookup;
    anyhow::ensure!(
        enrich.enrich.is_some() || (l.mmdb.is_empty() && l.ip_ranges.is_empty() && l.rdns.is_none()),
        "--mmdb, --ip-ranges and --rdns are the databases of --enrich: add --enrich asn,geo,rdns (or the attributes you want)"
    );
    if let Some(t) = enricher(enrich)? {
        p = p.with_transform(Box::new(t));
    }
    Ok(p)
}

/// The enrichment databases `l` names, opened and checked now (a bad file is an error at
/// start, never empty columns later); `None` when it names none.
pub fn databases(l: &LookupArgs) -> anyhow::Result<Option<silt_enrich::Databases>> {
    if l.mmdb.is_empty() && l.ip_ranges.is_empty() && l.rdns.is_none() {
        return Ok(None);
    }
    let mut dbs = silt_enrich::Databases::new();
    for p in &l.mmdb {
        dbs.add_mmdb(p)
            .map_err(|e| anyhow::anyhow!("--mmdb {}: {e:#}", p.display()))?;
    }
    for p in &l.ip_ranges {
        let lines = dbs
            .add_file(p)
            .map_err(|e| anyhow::anyhow!("--ip-ranges {}: {e:#}", p.display()))?;
        for line in lines {
            tracing::info!("--ip-ranges {}: {line}", p.display());
        }
    }
    if let Some(p) = &l.rdns {
        dbs.set_names(std::sync::Arc::new(silt_enrich::RdnsNames::open(p)?));
    }
    Ok(Some(dbs))
}

/// `--enrich` as a transform (with the databases checked against the attributes asked for);
/// `None` without `--enrich`.
pub fn enricher(e: &EnrichArgs) -> anyhow::Result<Option<silt_enrich::Enricher>> {
    let Some(spec) = e.enrich.as_deref() else {
        return Ok(None);
    };
    let dbs = databases(&e.lookup)?;
    let attrs: silt_enrich::Attrs = spec.parse()?;
    let dbs = dbs.ok_or_else(|| {
        anyhow::anyhow!(
            "--enrich {spec} needs databases: --mmdb FILE (GeoLite2/GeoIP2 ASN, Country, City), --ip-ranges FILE.csv, --rdns INDEX"
        )
    })?;
    Ok(Some(silt_enrich::Enricher::new(
        enrich_config(attrs, e.enrich_columns.as_deref()),
        dbs,
    )?))
}

/// An enricher's settings: `attrs`, on the comma-separated `columns` when given.
pub fn enrich_config(
    attrs: silt_enrich::Attrs,
    columns: Option<&str>,
) -> silt_enrich::EnrichConfig {
    let mut cfg = silt_enrich::EnrichConfig::new(attrs);
    cfg.columns = columns.map(|c| {
        c.split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect()
    });
    cfg
}

/// `--enrich-table TABLE=ATTRS[:COLUMNS]`.
pub fn enrich_table(spec: &str) -> anyhow::Result<(TableName, silt_enrich::Attrs, Option<String>)> {
    let usage = || {
        format!("--enrich-table {spec:?}: give TABLE=ATTRS[:COLUMNS], e.g. zeek.conn=asn,geo or web.access=geo:client_ip")
    };
    let (t, rest) = spec
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!(usage()))?;
    let table = TableName::parse(t.trim()).ok_or_else(|| anyhow::anyhow!(usage()))?;
    let (attrs, columns) = match rest.split_once(':') {
        Some((a, c)) => (a, Some(c.to_string())),
        None => (rest, None),
    };
    let attrs = attrs
        .parse()
        .map_err(|e| anyhow::anyhow!("--enrich-table {spec:?}: {e:#}"))?;
    Ok((table, attrs, columns))
}

/// Retention windows from `TABLE=DURATION` specs (`silt retain --table`, `silt serve
/// --keep-table`); `flag` names the option in errors.
pub fn retention_windows(
    specs: &[String],
    flag: &str,
) -> anyhow::Result<std::collections::BTreeMap<TableName, std::time::Duration>> {
    let mut out = std::collections::BTreeMap::new();
    for spec in specs {
        let (t, d) = spec.split_once('=').ok_or_else(|| {
            anyhow::anyhow!("{flag} {spec:?}: give TABLE=DURATION, e.g. suricata.flow=7d")
        })?;
        let t = TableName::parse(t)
            .ok_or_else(|| anyhow::anyhow!("{flag} {spec:?}: use module.type, e.g. zeek.conn"))?;
        let d =
            crate::units::parse_window(d).map_err(|e| anyhow::anyhow!("{flag} {spec:?}: {e}"))?;
        out.insert(t, d);
    }
    Ok(out)
}

/// The tables `--table` names (`compact`, `verify`).
pub fn table_names(specs: &[String]) -> anyhow::Result<Vec<TableName>> {
    specs
        .iter()
        .map(|t| {
            TableName::parse(t)
                .ok_or_else(|| anyhow::anyhow!("--table {t:?}: use module.type, e.g. zeek.conn"))
        })
        .collect()
}

/// The Kafka consumer settings of `--kafka` (`None` without it).
pub fn kafka_spec(
    k: &crate::cli::KafkaArgs,
) -> anyhow::Result<Option<silt_serve::kafka::KafkaSpec>> {
    let Some(brokers) = &k.kafka else {
        anyhow::ensure!(
            k.topics.is_empty(),
            "--topic needs --kafka HOST:PORT (the brokers to consume from)"
        );
        anyhow::ensure!(
            k.kafka_meta.is_none(),
            "--kafka-meta needs --kafka HOST:PORT (the brokers to consume from)"
        );
        return Ok(None);
    };
    let mut spec = silt_serve::kafka::KafkaSpec::new(brokers, &k.group);
    spec.topics = k
        .topics
        .iter()
        .map(|t| silt_kafka::TopicRoute::parse(t))
        .collect::<anyhow::Result<_>>()?;
    for c in &k.topic_columns {
        let (name, cols) = c.split_once('=').ok_or_else(|| {
            anyhow::anyhow!("--topic-columns {c:?}: give NAME=COL,COL,..., e.g. netdata=ts,src,dst")
        })?;
        let t = spec
            .topics
            .iter_mut()
            .find(|t| t.topic == name)
            .ok_or_else(|| anyhow::anyhow!("--topic-columns {name}: no --topic {name}=FORMAT"))?;
        t.columns = Some(cols.to_string());
    }
    spec.client.properties = k
        .kafka_options
        .iter()
        .map(|o| silt_kafka::KafkaClient::parse_property(o))
        .collect::<anyhow::Result<_>>()?;
    spec.start = k.kafka_start.clone();
    if let Some(m) = &k.kafka_meta {
        spec.meta = silt_kafka::MetaColumns::parse(m)?;
    }
    spec.check()?;
    Ok(Some(spec))
}

/// The Avro framing `--message-format avro` asks for (`None` for JSON).
pub fn avro_framing(
    m: &crate::cli::MessageArgs,
    lake: &std::path::Path,
) -> anyhow::Result<Option<silt_kafka::avro::Framing>> {
    if m.message_format != "avro" {
        anyhow::ensure!(
            m.schema_registry.is_none() && m.avro_schemas.is_none(),
            "--schema-registry and --avro-schemas go with --message-format avro"
        );
        anyhow::ensure!(
            m.schema_registry_ca.is_none(),
            "--schema-registry-ca goes with --message-format avro --schema-registry https://..."
        );
        return Ok(None);
    }
    Ok(Some(match &m.schema_registry {
        Some(r) => {
            anyhow::ensure!(
                m.avro_schemas.is_none(),
                "--avro-schemas is for messages without a registry; with --schema-registry the registry holds the schemas"
            );
            silt_kafka::avro::Framing::Confluent {
                registry: r.clone(),
                ca: m.schema_registry_ca.clone(),
            }
        }
        None => silt_kafka::avro::Framing::SingleObject {
            schemas: match &m.avro_schemas {
                Some(d) => d.clone(),
                // The schemas of single-object messages are kept in a local directory, by
                // default the lake's `_silt/avro-schemas/`, which an object-store lake does not
                // have.
                None if silt_lake::remote::is_remote(lake) => anyhow::bail!(
                    "--message-format avro with an object-store lake ({}) needs --avro-schemas DIR \
                     (a local directory for the schemas consumers read) or --schema-registry URL",
                    lake.display()
                ),
                None => lake.join("_silt").join("avro-schemas"),
            },
        },
    }))
}

/// The message encoding of `--message-format`.
pub fn message_encoding(
    m: &crate::cli::MessageArgs,
    lake: &std::path::Path,
) -> anyhow::Result<silt_kafka::export::Encoding> {
    Ok(match avro_framing(m, lake)? {
        Some(f) => silt_kafka::export::Encoding::Avro(silt_kafka::avro::AvroEncoder::new(f)?),
        None => silt_kafka::export::Encoding::Json,
    })
}

/// `--lake`'s value parser: a URL other than `file://` as given; a local path (plain, or `file://`,
/// as [`silt_lake::remote::local_dir`] reads it) that is a directory, does not exist yet, or lies
/// under directories only. A path that is a file, or lies under one, is refused here with what to
/// give instead: otherwise `import` failed with "cannot create …/_silt/imports: Not a directory"
/// and `query` said the lake "does not exist".
pub fn lake_path(s: &str) -> Result<PathBuf, String> {
    let given = PathBuf::from(s);
    // An object store (or a scheme `LakeRoot::open` refuses with the ones that work).
    let Some(local) = silt_lake::remote::local_dir(&given) else {
        return Ok(given);
    };
    // The path itself, or else its nearest ancestor that exists.
    let Some(existing) = local
        .ancestors()
        .find(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_ok())
    else {
        return Ok(given);
    };
    if existing.is_dir() {
        return Ok(given);
    }
    // A file, or else something that is no directory either (a dangling symbolic link).
    let file = existing.is_file();
    let give = "give the directory `silt import` wrote (or a new one for it to make)";
    Err(match (existing == local, file) {
        (true, true) => format!("{s} is a file, not a lake directory: {give}"),
        (true, false) => format!("{s} is not a directory: {give}"),
        (false, _) => format!(
            "{} is {}, so {s} cannot be a lake directory: give a path under a directory",
            existing.display(),
            if file { "a file" } else { "not a directory" }
        ),
    })
}

#[cfg(test)]
mod lake_path_tests {
    use super::lake_path;

    #[test]
    fn files_are_refused_and_directories_taken() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let f = file.to_str().unwrap();
        let dir = d.path().to_str().unwrap();
        // A directory, a new one, one in a new one, and the same as file:// URLs.
        for ok in [
            dir.to_string(),
            format!("{dir}/new"),
            format!("{dir}/new/deeper"),
            format!("file://{dir}"),
            format!("file://{dir}/new"),
            "relative/new".to_string(),
            "s3://bucket/prefix".to_string(),
        ] {
            assert_eq!(lake_path(&ok).unwrap().to_str().unwrap(), ok);
        }
        let e = lake_path(f).unwrap_err();
        assert!(
            e.starts_with(&format!("{f} is a file, not a lake directory")),
            "{e}"
        );
        let e = lake_path(&format!("file://{f}")).unwrap_err();
        assert!(e.contains("is a file, not a lake directory"), "{e}");
        // A dangling symbolic link is no directory either.
        let link = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("gone"), &link).unwrap();
        let e = lake_path(link.to_str().unwrap()).unwrap_err();
        assert!(e.contains("dangling is not a directory: give"), "{e}");
        let e = lake_path(&format!("{f}/sub/lake")).unwrap_err();
        assert!(
            e.starts_with(&format!("{f} is a file, so {f}/sub/lake cannot be")),
            "{e}"
        );
    }
}
