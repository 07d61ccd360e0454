//! `silt serve`: flags to a `silt_serve::ServeConfig`, start, print where it listens, wait for
//! Ctrl-C or SIGTERM (reloading the enrichment databases at SIGHUP meanwhile), drain.

use std::collections::HashMap;

use anyhow::Context;
use silt_access::{ParseField, ParseFieldSpec};
use silt_core::{FormatOptions, ReadOptions, TableName, Transform};
use silt_serve::{route::Route, ServeConfig, Server};

use crate::cli::ServeArgs;

fn read_secret(path: &std::path::Path, what: &str) -> anyhow::Result<String> {
    let s = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the {what} file {}", path.display()))?;
    let s = s.trim().to_string();
    anyhow::ensure!(!s.is_empty(), "the {what} file {} is empty", path.display());
    Ok(s)
}

/// `USER:PASSWORD` per line; blank lines and `#` comments skipped.
fn read_users(path: &std::path::Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = read_secret(path, "Forward users")?;
    let mut users = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (u, p) = line
            .split_once(':')
            .filter(|(u, p)| !u.is_empty() && !p.is_empty())
            .ok_or_else(|| {
                anyhow::anyhow!("{}:{}: expected USER:PASSWORD", path.display(), i + 1)
            })?;
        users.push((u.to_string(), p.to_string()));
    }
    Ok(users)
}

/// A listener's `[SCHEME://]HOST:PORT` (`flag` names it in errors): the address, and whether
/// the scheme is one of `tls` (TLS) rather than one of `plain` (or none).
fn listen_addr(
    flag: &str,
    s: &str,
    plain: &[&str],
    tls: &[&str],
    port: u16,
) -> anyhow::Result<(std::net::SocketAddr, bool)> {
    let (on, addr) = match s.split_once("://") {
        Some((scheme, rest)) if tls.contains(&scheme) => (true, rest),
        Some((scheme, rest)) if plain.contains(&scheme) => (false, rest),
        Some((other, _)) => anyhow::bail!(
            "{flag} {s:?}: {other}:// is not one of {}; give HOST:PORT or {}://HOST:PORT",
            plain
                .iter()
                .chain(tls)
                .map(|x| format!("{x}://"))
                .collect::<Vec<_>>()
                .join(", "),
            tls[0]
        ),
        None => (false, s),
    };
    let addr = addr.trim_end_matches('/').parse().map_err(|_| {
        anyhow::anyhow!(
            "{flag} {s:?}: give HOST:PORT (an IP address and a port, e.g. 127.0.0.1:{port}) or {}://HOST:PORT",
            tls[0]
        )
    })?;
    Ok((addr, on))
}

pub fn run(a: ServeArgs) -> anyhow::Result<i32> {
    let a = match &a.config {
        // The file's settings, then the command line's again on top of them (silt has no
        // global flags: the command line after `silt serve` is everything from argv[2]).
        Some(path) => {
            let cli: Vec<std::ffi::OsString> = std::env::args_os().skip(2).collect();
            crate::config::serve_args(path, &cli)?
        }
        None => a,
    };
    let lake = a.lake.clone().ok_or_else(|| {
        anyhow::anyhow!("no lake: give --lake DIR or `lake = \"DIR\"` in the config file")
    })?;
    let writer = crate::opts::writer_config(&a.write)?;
    let mut cfg = ServeConfig::new(lake.clone());
    cfg.state = a.state.clone();
    // `--http none` (or an empty value) turns the API off: the config's default listens.
    (cfg.http, cfg.http_tls) = if matches!(a.http.as_str(), "none" | "") {
        (None, false)
    } else {
        let (addr, tls) = listen_addr("--http", &a.http, &["http"], &["https", "tls"], 8080)?;
        (Some(addr), tls)
    };
    if let Some(f) = &a.forward {
        let (addr, tls) = listen_addr("--forward", f, &["tcp"], &["tls"], 24224)?;
        (cfg.forward, cfg.forward_tls) = (Some(addr), tls);
    }
    cfg.syslogs = a
        .syslogs
        .iter()
        .map(|t| silt_serve::syslog::SyslogSpec::parse(t))
        .collect::<anyhow::Result<_>>()?;
    cfg.tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(silt_serve::tls::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => None,
    };
    use silt_serve::flows::{FlowProtocol, FlowSpec};
    cfg.flows = a
        .sflows
        .iter()
        .map(|s| FlowSpec::parse(FlowProtocol::Sflow, s))
        .chain(
            a.netflows
                .iter()
                .map(|s| FlowSpec::parse(FlowProtocol::Netflow, s)),
        )
        .collect::<anyhow::Result<_>>()?;
    cfg.tails = a
        .tails
        .iter()
        .map(|t| silt_serve::tail::TailSpec::parse(t))
        .collect::<anyhow::Result<_>>()?;
    if let Some(f) = &a.flight {
        let (addr, tls) = listen_addr(
            "--flight",
            f,
            &["grpc", "grpc+tcp"],
            &["grpc+tls", "tls"],
            8815,
        )?;
        (cfg.flight, cfg.flight_tls) = (Some(addr), tls);
    }
    cfg.instance = a.instance.clone();
    if !a.to_kafka.is_empty() {
        let brokers = a.kafka.kafka.clone().ok_or_else(|| {
            anyhow::anyhow!("--to-kafka needs --kafka HOST:PORT (the brokers to produce to)")
        })?;
        cfg.to_kafka = Some(silt_serve::kafka::ToKafka {
            client: silt_kafka::KafkaClient {
                brokers,
                properties: a
                    .kafka
                    .kafka_options
                    .iter()
                    .map(|o| silt_kafka::KafkaClient::parse_property(o))
                    .collect::<anyhow::Result<_>>()?,
            },
            routes: a
                .to_kafka
                .iter()
                .map(|r| silt_serve::kafka::ToKafka::parse_route(r))
                .collect::<anyhow::Result<_>>()?,
            keep_in_lake: a.to_kafka_keep,
            avro: crate::opts::avro_framing(&a.messages, &lake)?,
        });
    }
    // --kafka without --topic only produces (--to-kafka).
    cfg.kafka = if a.kafka.topics.is_empty() && !a.to_kafka.is_empty() {
        None
    } else {
        crate::opts::kafka_spec(&a.kafka)?
    };
    cfg.routes = a
        .routes
        .iter()
        .map(|r| Route::parse(r))
        .collect::<anyhow::Result<_>>()?;
    let mut transforms: HashMap<TableName, Vec<Box<dyn Transform>>> = HashMap::new();
    for spec in &a.parse_fields {
        let (table, field) = spec.split_once(':').ok_or_else(|| {
            anyhow::anyhow!(
                "--parse-field {spec:?}: use TABLE:FIELD=FORMAT, e.g. docker.nginx:log=access"
            )
        })?;
        let table = TableName::parse(table).ok_or_else(|| {
            anyhow::anyhow!("--parse-field {spec:?}: table {table:?} must be module.type")
        })?;
        let pf = ParseFieldSpec::parse(field, a.keep_field)?;
        transforms
            .entry(table)
            .or_default()
            .push(Box::new(ParseField::new(pf)));
    }
    cfg.transforms = transforms;
    // --enrich applies to every table; the same databases answer asn(), rdns(), ... in queries.
    // --enrich-table replaces --enrich for its table. One set of databases serves them all and
    // the SQL functions; SIGHUP opens the same files again (replace a database file by renaming
    // the new one over it) and swaps the new set in for every one of them.
    let own: Vec<_> = a
        .enrich_tables
        .iter()
        .map(|s| crate::opts::enrich_table(s))
        .collect::<anyhow::Result<_>>()?;
    let global: Option<silt_enrich::Attrs> =
        a.enrich.enrich.as_deref().map(str::parse).transpose()?;
    let dbs = crate::opts::databases(&a.enrich.lookup)?;
    match (global, dbs) {
        (None, dbs) if own.is_empty() => {
            cfg.lookups = dbs.map(silt_enrich::EnrichHandle::standalone);
        }
        (_, None) => anyhow::bail!(
            "--enrich and --enrich-table need databases: --mmdb FILE (GeoLite2/GeoIP2 ASN, Country, City), --ip-ranges FILE.csv, --rdns INDEX"
        ),
        (global, Some(dbs)) => {
            let all = own
                .iter()
                .map(|(_, a, _)| *a)
                .chain(global)
                .fold(silt_enrich::Attrs::default(), silt_enrich::Attrs::union);
            let handle = silt_enrich::EnrichHandle::new(all, dbs)?;
            if let Some(g) = global {
                let c = crate::opts::enrich_config(g, a.enrich.enrich_columns.as_deref());
                cfg.all_tables
                    .push(Box::new(silt_enrich::Enricher::sharing(c, &handle)?));
            }
            for (table, attrs, columns) in own {
                let c = crate::opts::enrich_config(attrs, columns.as_deref());
                anyhow::ensure!(
                    cfg.all_tables_except.insert(table.clone()),
                    "--enrich-table names {table} twice"
                );
                cfg.transforms
                    .entry(table)
                    .or_default()
                    .push(Box::new(silt_enrich::Enricher::sharing(c, &handle)?));
            }
            cfg.lookups = Some(handle);
        }
    }
    if cfg.lookups.is_some() {
        let lookup = a.enrich.lookup.clone();
        cfg.reload_lookups = Some(std::sync::Arc::new(move || {
            crate::opts::databases(&lookup)?
                .ok_or_else(|| anyhow::anyhow!("no database files are configured"))
        }));
    }
    cfg.token = a
        .token_file
        .as_deref()
        .map(|p| read_secret(p, "token"))
        .transpose()?;
    cfg.forward_cfg.shared_key = a
        .forward_shared_key_file
        .as_deref()
        .map(|p| read_secret(p, "shared key"))
        .transpose()?;
    if let Some(path) = &a.forward_users_file {
        anyhow::ensure!(
            cfg.forward_cfg.shared_key.is_some(),
            "--forward-users-file needs --forward-shared-key-file: user authentication is part \
             of the shared-key handshake"
        );
        cfg.forward_cfg.users = read_users(path)?;
    }
    cfg.insecure = a.insecure;
    cfg.flush_age = a.flush_age;
    cfg.flush_bytes = a.flush_size;
    cfg.memory_bytes = writer.memory_bytes.max(a.flush_size) * 2;
    cfg.max_body = a.max_body;
    cfg.query_timeout = a.query_timeout;
    cfg.query_memory = a.query_memory;
    cfg.max_queries = a.max_queries;
    cfg.http_max_connections_per_client = a.http_max_connections_per_client;
    cfg.options = FormatOptions::new(ReadOptions::default());
    let per_table = crate::opts::retention_windows(&a.keep_table, "--keep-table")?;
    cfg.maintain = silt_serve::maintain::MaintainConfig {
        compact_every: a.compact_every,
        compact: silt_lake::compact::CompactOptions {
            older_than: a.compact_older_than,
            target_bytes: a.compact_target_file_size as u64,
            writer: writer.clone(),
            ..Default::default()
        },
        retain: (a.keep.is_some() || !per_table.is_empty()).then_some(
            silt_lake::retain::RetainOptions {
                keep: a.keep,
                per_table,
                dry_run: false,
            },
        ),
        reader_wait: a.query_timeout,
    };
    cfg.writer = writer;
    let (cfg_forward_tls, cfg_http_tls, cfg_flight_tls) =
        (cfg.forward_tls, cfg.http_tls, cfg.flight_tls);
    let rt = silt_query::runtime()?;
    let served = rt.block_on(async move {
        let server = Server::start(cfg).await?;
        for note in &server.recovery {
            eprintln!("recovery: {note}");
        }
        eprintln!("silt serve: lake {}", lake.display());
        if let Some(h) = server.http_addr {
            let scheme = if cfg_http_tls { "https" } else { "http" };
            eprintln!(
                "  http      {scheme}://{h}  (POST /v1/ingest/<table>, /v1/query, /health, /metrics)"
            );
        }
        if let Some(f) = server.forward_addr {
            let kind = if cfg_forward_tls { "TLS" } else { "TCP" };
            eprintln!("  forward   {f}  (fluentd Forward, {kind} + UDP heartbeat)");
        }
        if let Some(f) = server.flight_addr {
            let scheme = if cfg_flight_tls { "grpc+tls" } else { "grpc" };
            eprintln!("  flight    {scheme}://{f}  (Arrow Flight SQL)");
        }
        for (proto, addr, table) in &server.syslog_addrs {
            eprintln!("  syslog    {proto}://{addr}  (table {table})");
        }
        for (p, addr) in &server.flow_addrs {
            match p {
                FlowProtocol::Sflow => {
                    eprintln!("  sflow     udp://{addr}  (tables sflow.sample, sflow.counter)")
                }
                FlowProtocol::Netflow => {
                    eprintln!(
                        "  netflow   udp://{addr}  (NetFlow v5/v9, IPFIX; table netflow.flow)"
                    )
                }
            }
        }
        for t in &a.tails {
            eprintln!("  tail      {t}");
        }
        for r in &a.to_kafka {
            eprintln!("  to-kafka  {r}");
        }
        if let Some(k) = a
            .kafka
            .kafka
            .as_ref()
            .filter(|_| !a.kafka.topics.is_empty())
        {
            eprintln!(
                "  kafka     {k}  (group {}, topics {})",
                a.kafka.group,
                a.kafka.topics.join(" ")
            );
        }
        if let Some(e) = a.compact_every {
            eprintln!(
                "  compact   every {}  (files under half of {} merged)",
                humantime(e),
                silt_lake::summary::human_bytes(a.compact_target_file_size as u64)
            );
        }
        if a.keep.is_some() || !a.keep_table.is_empty() {
            let mut w: Vec<String> = a
                .keep
                .iter()
                .map(|k| format!("all {}", humantime(*k)))
                .collect();
            w.extend(a.keep_table.iter().cloned());
            eprintln!("  retain    {}", w.join(", "));
        }
        let idle = server.http_addr.is_none()
            && server.forward_addr.is_none()
            && server.flight_addr.is_none()
            && server.syslog_addrs.is_empty()
            && server.flow_addrs.is_empty()
            && a.tails.is_empty()
            && a.kafka.topics.is_empty()
            && a.compact_every.is_none()
            && a.keep.is_none()
            && a.keep_table.is_empty();
        if idle {
            eprintln!(
                "  (nothing to receive or maintain: --http none and no other listener, no --kafka \
                 topic, --tail, --compact-every or --keep; it only writes what its log holds to \
                 the lake)"
            );
        }
        eprintln!("Ctrl-C or SIGTERM stops it after writing every acknowledged event to the lake.");
        if server.shared.cfg.reload_lookups.is_some() {
            eprintln!("SIGHUP reloads the enrichment databases from their files.");
        }
        wait_for_signal(&server.shared).await;
        eprintln!("stopping: draining and flushing to the lake ...");
        let stats = server.shared.ingest.clone();
        server.shutdown().await?;
        eprintln!(
            "stopped: {} events, {} rejects, {} flushes, {} files",
            stats.events.load(std::sync::atomic::Ordering::Relaxed),
            stats.rejects.load(std::sync::atomic::Ordering::Relaxed),
            stats.flushes.load(std::sync::atomic::Ordering::Relaxed),
            stats.files.load(std::sync::atomic::Ordering::Relaxed),
        );
        anyhow::Ok(())
    });
    // Everything is flushed by now; what may still run is a task serving a connection a client
    // holds open, which dropping the runtime would wait for as long as the client does.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    served?;
    Ok(0)
}

/// Waits for Ctrl-C or SIGTERM; reloads the enrichment databases at every SIGHUP meanwhile.
async fn wait_for_signal(shared: &std::sync::Arc<silt_serve::Shared>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return,
            _ = term.recv() => return,
            _ = hup.recv() => {
                let s = shared.clone();
                match tokio::task::spawn_blocking(move || s.reload_lookups()).await {
                    Ok(Ok(what)) => eprintln!("SIGHUP: enrichment databases reloaded ({what})"),
                    Ok(Err(e)) => eprintln!(
                        "SIGHUP: enrichment databases not reloaded, the old ones stay: {e:#}"
                    ),
                    Err(e) => eprintln!("SIGHUP: the reload stopped: {e}"),
                }
            }
        }
    }
}

/// `90s`, `10m`, `30d`: a duration as a user would write it.
fn humantime(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{}ms", d.as_millis()),
        s if s % 86400 == 0 => format!("{}d", s / 86400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
