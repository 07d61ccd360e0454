//! `silt query`: SQL over a lake; results to stdout or a file, scan statistics to stderr.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use silt_query::OutputFormat;

use crate::cli::{self, QueryArgs};

fn output_format(f: cli::OutputFormat) -> OutputFormat {
    match f {
        cli::OutputFormat::Table => OutputFormat::Table,
        cli::OutputFormat::Csv => OutputFormat::Csv,
        cli::OutputFormat::Json => OutputFormat::Json,
        cli::OutputFormat::Ndjson => OutputFormat::Ndjson,
        cli::OutputFormat::Parquet => OutputFormat::Parquet,
    }
}

pub fn run(a: QueryArgs) -> anyhow::Result<i32> {
    let format = output_format(a.format.unwrap_or_else(|| {
        let ext = a
            .output
            .as_deref()
            .and_then(|p| p.extension())
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("csv") => cli::OutputFormat::Csv,
            Some("json") => cli::OutputFormat::Json,
            Some("ndjson" | "jsonl") => cli::OutputFormat::Ndjson,
            Some("parquet") => cli::OutputFormat::Parquet,
            _ => cli::OutputFormat::Table,
        }
    }));
    if format == OutputFormat::Parquet && a.output.is_none() && std::io::stdout().is_terminal() {
        anyhow::bail!("--format parquet writes binary data: give a file with -o result.parquet");
    }
    if let Some(server) = &a.server {
        return remote(&a, server, format);
    }
    let lake = a.lake.clone().expect("clap requires --lake or --server");
    if !lake.is_dir() && !silt_lake::remote::is_remote(&lake) {
        anyhow::bail!(
            "lake {} does not exist: import logs first (silt import ... --lake {})",
            lake.display(),
            lake.display()
        );
    }
    let dbs = std::sync::Arc::new(crate::opts::databases(&a.lookup)?.unwrap_or_default());
    let rt = silt_query::runtime()?;
    let open = || -> anyhow::Result<silt_query::SiltSession> {
        let session = rt
            .block_on(silt_query::open_for(&lake, &a.sql))?
            .allow_write(a.allow_write);
        // Registered without databases too: asn(), rdns(), ... then say which option they need.
        Ok(session.with_lookups(dbs.clone()))
    };
    let mut session = open()?;
    for w in session.warnings() {
        eprintln!("warning: {w}");
    }
    // csv/json/ndjson stream batch by batch (any result size); table and parquet are written
    // once the result is complete.
    let streaming = matches!(
        format,
        OutputFormat::Csv | OutputFormat::Json | OutputFormat::Ndjson
    );
    let mut run = |out: &mut dyn Write| -> anyhow::Result<(u64, silt_query::ScanStats)> {
        // A file listed and then removed by another process's compaction or retention: run
        // again on a fresh listing while nothing was written (see `LostFileRetry`).
        let mut retry = silt_query::LostFileRetry::default();
        loop {
            let mut counted = Counted { out, bytes: 0 };
            // A reader's panic on a damaged page comes back here through DataFusion's task
            // (which resumes it): an error like the others, so the damaged file is named.
            let res = silt_core::panics::catch(|| {
                rt.block_on(async {
                    if streaming {
                        session.query_to_writer(&a.sql, format, &mut counted).await
                    } else {
                        let r = session.query(&a.sql).await?;
                        r.write(format, &mut counted)?;
                        Ok((r.num_rows() as u64, r.stats))
                    }
                })
            })
            .unwrap_or_else(|p| Err(anyhow::anyhow!("the query panicked: {p}")));
            match res {
                Err(e) if silt_query::lost_a_file(&e) => {
                    retry.after(e, counted.bytes > 0)?;
                    session = open()?;
                }
                Err(e) if format!("{e:#}").contains("queries are read-only") => {
                    return Err(anyhow::anyhow!(
                        "{e:#}{}; to save a result, use -o FILE with --format \
csv|json|ndjson|parquet",
                        if a.allow_write {
                            ""
                        } else {
                            " (COPY ... TO a file is allowed with --allow-write)"
                        }
                    ))
                }
                // A file whose footer reads but whose data does not: named.
                Err(e) if silt_query::damage::decode_failure(&e) => {
                    return Err(silt_query::damage::explain_damage(
                        e,
                        &lake,
                        &a.sql,
                        std::time::Duration::from_secs(10),
                    ))
                }
                // The session opened only the tables the SQL names: the lake is listed again.
                Err(e) => {
                    let tables = silt_lake::remote::LakeRoot::open(&lake).and_then(|l| l.tables());
                    return Err(silt_query::explain_missing_table(
                        e,
                        &lake.display().to_string(),
                        tables,
                    ));
                }
                Ok(r) => return Ok(r),
            }
        }
    };
    let (rows, stats) = match &a.output {
        Some(path) => {
            // Write next to the target and rename, so a failed query never leaves half a file.
            let tmp = path.with_extension("silt-tmp");
            let file = std::fs::File::create(&tmp).with_context(|| {
                format!(
                    "cannot write {} (a temporary file next to it could not be created)",
                    path.display()
                )
            })?;
            let mut f = std::io::BufWriter::new(file);
            let res = run(&mut f).and_then(|r| {
                f.flush()?;
                Ok(r)
            });
            drop(f);
            match res {
                Ok(r) => {
                    std::fs::rename(&tmp, path)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    eprintln!("{} rows written to {}", r.0, path.display());
                    r
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
            }
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let r = run(&mut out)?;
            out.flush()?;
            r
        }
    };
    let _ = rows;
    if a.stats {
        eprintln!("{stats}");
    }
    Ok(0)
}

/// A writer that counts what it was given (a query is only run again while nothing was).
struct Counted<'a> {
    out: &'a mut dyn Write,
    bytes: u64,
}

impl Write for Counted<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// `--server`: the query runs on a `silt serve` (its `/v1/query`, Arrow IPC on the wire), and
/// the rows are printed here with the same writers as a local query, so every output format
/// looks the same.
fn remote(a: &QueryArgs, server: &str, format: OutputFormat) -> anyhow::Result<i32> {
    anyhow::ensure!(
        !a.allow_write,
        "--allow-write does not apply to --server: a server's queries are always read-only"
    );
    anyhow::ensure!(
        !a.stats,
        "--stats is not available with --server yet (the server reports scan statistics in /metrics)"
    );
    let base = server.trim_end_matches('/');
    anyhow::ensure!(
        base.starts_with("http://") || base.starts_with("https://"),
        "--server {server:?}: give the server's HTTP address, e.g. http://127.0.0.1:8080 (https:// for TLS)"
    );
    let url = format!("{base}/v1/query?format=arrow");
    let token = a
        .token_file
        .as_deref()
        .map(|p| {
            std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the token file {}", p.display()))
                .map(|s| s.trim().to_string())
        })
        .transpose()?;
    let roots = match &a.ca_cert {
        None => ureq::tls::RootCerts::WebPki,
        Some(p) => {
            let pem = std::fs::read(p)
                .with_context(|| format!("cannot read --ca-cert {}", p.display()))?;
            let certs = ureq::tls::parse_pem(&pem)
                .filter_map(|i| match i {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                    Ok(_) => None,
                    Err(e) => Some(Err(e)),
                })
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("--ca-cert {}: not PEM", p.display()))?;
            anyhow::ensure!(
                !certs.is_empty(),
                "--ca-cert {}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)",
                p.display()
            );
            ureq::tls::RootCerts::Specific(std::sync::Arc::new(certs))
        }
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
        .build()
        .into();
    let mut req = agent.post(&url).header("Content-Type", "application/sql");
    if let Some(t) = &token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    let resp = req.send(a.sql.as_bytes()).map_err(|e| {
        let why = format!("{e}");
        let hint = if why.contains("CaUsedAsEndEntity") {
            "its TLS certificate is a CA certificate, which TLS clients do not take as a server's own (openssl req -x509 makes one unless given -addext basicConstraints=critical,CA:FALSE): make the server's certificate with CA:FALSE, or sign it with a CA and give that CA's certificate with --ca-cert FILE"
        } else if why.to_lowercase().contains("certificate") {
            "its TLS certificate is not trusted: give the certificate of the authority that signed it (or its own, if self-signed and not a CA) with --ca-cert FILE"
        } else {
            "is silt serve running there?"
        };
        anyhow::anyhow!("cannot reach {base} ({hint}): {why}")
    })?;
    let status = resp.status();
    let mut body = resp.into_body();
    let bytes = body
        .with_config()
        .limit(u64::MAX)
        .read_to_vec()
        .context("reading the server's answer")?;
    if !status.is_success() {
        let msg = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
        anyhow::bail!("{base} answered {status}: {msg}");
    }
    // Checked before arrow-ipc reads it, which would reserve whatever lengths the answer gives
    // (a damaged or forged 2^40 aborts: an allocation failure is not a panic), and decoded with
    // arrow-ipc's panics on malformed messages caught.
    let not_arrow = |why: String| {
        anyhow::anyhow!(
            "{base}'s answer is not a valid Arrow IPC stream ({why}); is it silt serve?"
        )
    };
    silt_core::ipc_check::check_stream(&bytes).map_err(not_arrow)?;
    let (schema, batches) = silt_core::panics::catch(|| {
        let reader = arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(&bytes), None)?;
        let schema = reader.schema();
        Ok::<_, arrow::error::ArrowError>((schema, reader.collect::<Result<Vec<_>, _>>()?))
    })
    .map_err(|p| not_arrow(format!("the decoder panicked: {p}")))?
    .map_err(|e| not_arrow(e.to_string()))?;
    let write =
        |out: &mut dyn Write| silt_query::write_results_with_schema(&schema, &batches, format, out);
    match &a.output {
        Some(path) => {
            let tmp = path.with_extension("silt-tmp");
            let mut f =
                std::io::BufWriter::new(std::fs::File::create(&tmp).with_context(|| {
                    format!(
                        "cannot write {} (a temporary file next to it could not be created)",
                        path.display()
                    )
                })?);
            write(&mut f)?;
            f.flush()?;
            drop(f);
            std::fs::rename(&tmp, path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            eprintln!("{rows} rows written to {}", path.display());
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            write(&mut out)?;
            out.flush()?;
        }
    }
    Ok(0)
}
