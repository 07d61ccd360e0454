//! `silt export`: a query's result rows produced to a Kafka topic as JSON objects or Avro
//! records (`silt_kafka::export`, `silt_kafka::avro`).

use crate::cli::ExportArgs;

pub fn run(a: ExportArgs) -> anyhow::Result<i32> {
    // An object-store lake's Avro schema directory is checked by `avro_framing`.
    anyhow::ensure!(
        silt_lake::remote::is_remote(&a.lake) || a.lake.is_dir(),
        "lake {} does not exist: import logs first (silt import ... --lake {})",
        a.lake.display(),
        a.lake.display()
    );
    let client = silt_kafka::KafkaClient {
        brokers: a.kafka.clone(),
        properties: a
            .kafka_options
            .iter()
            .map(|o| silt_kafka::KafkaClient::parse_property(o))
            .collect::<anyhow::Result<_>>()?,
    };
    let encoding = crate::opts::message_encoding(&a.messages, &a.lake)?;
    let dbs = crate::opts::databases(&a.lookup)?;
    let rt = silt_query::runtime()?;
    let dbs = std::sync::Arc::new(dbs.unwrap_or_default());
    let open = || -> anyhow::Result<silt_query::SiltSession> {
        Ok(rt
            .block_on(silt_query::open(&a.lake))?
            .with_lookups(dbs.clone()))
    };
    let mut session = open()?;
    for w in session.warnings() {
        eprintln!("warning: {w}");
    }
    // The rows are collected before any is produced: a run that lost a file to another
    // process's compaction runs again on a fresh listing.
    let mut retry = silt_query::LostFileRetry::default();
    let r = loop {
        let res = silt_core::panics::catch(|| rt.block_on(session.query(&a.sql)))
            .unwrap_or_else(|p| Err(anyhow::anyhow!("the query panicked: {p}")));
        match res {
            Ok(r) => break r,
            Err(e) if silt_query::damage::decode_failure(&e) => {
                return Err(silt_query::damage::explain_damage(
                    e,
                    &a.lake,
                    &a.sql,
                    std::time::Duration::from_secs(10),
                ));
            }
            Err(e) => {
                retry.after(e, false)?;
                session = open()?;
            }
        }
    };
    let t0 = std::time::Instant::now();
    let p = silt_kafka::export::produce_rows(
        &client,
        encoding,
        &a.topic,
        a.key.as_deref(),
        &r.batches,
        a.timeout,
    )?;
    eprintln!(
        "exported {} rows to {} ({}, {:.1} s){}",
        p.messages,
        a.topic,
        silt_lake::summary::human_bytes(p.bytes),
        t0.elapsed().as_secs_f64(),
        if p.failed > 0 {
            format!("; {} not acknowledged", p.failed)
        } else {
            String::new()
        }
    );
    if p.failed > 0 {
        eprintln!(
            "error: {} messages were not acknowledged (first error: {}); run the export again or check the brokers",
            p.failed,
            p.first_error.as_deref().unwrap_or("unknown")
        );
        return Ok(3);
    }
    Ok(0)
}
