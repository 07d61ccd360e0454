//! `silt import kafka`: consume topics once, up to the end each partition has when it is
//! assigned, into the lake, and stop. It runs the server's pipeline without listeners (the
//! same consumer, exactly-once offsets and flushes as `silt serve --kafka`; see
//! `silt_serve::kafka`) as the instance `import-GROUP`, so it can run next to a server on the
//! same lake, a directory or an object store.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use silt_core::{FormatOptions, ReadOptions};
use silt_serve::{ServeConfig, Server};

use crate::cli::ImportArgs;
use crate::opts;

pub fn run(a: ImportArgs) -> anyhow::Result<i32> {
    anyhow::ensure!(
        a.inputs.is_empty(),
        "silt import kafka reads topics, not files: drop {} (or import them with their format)",
        a.inputs[0].display()
    );
    let mut spec = opts::kafka_spec(&a.kafka)?.ok_or_else(|| {
        anyhow::anyhow!(
            "silt import kafka needs --kafka HOST:PORT and --topic NAME=FORMAT[:TABLE], e.g. --kafka 127.0.0.1:9092 --topic eve=suricata"
        )
    })?;
    spec.until_end = true;
    let writer = opts::writer_config(&a.write)?;
    let mut cfg = ServeConfig::new(a.lake.clone());
    cfg.http = None;
    // On an object-store lake the server's log needs a local directory. A temporary one is
    // enough here: the log holds only Kafka records, which Kafka keeps, and the next run resumes
    // from the positions the bucket records (it numbers its log after them).
    let _state = if silt_lake::remote::is_remote(&a.lake) {
        let d = silt_lake::scratch::ScratchDir::new(None, "silt-import-kafka-")
            .map_err(|e| anyhow::anyhow!("cannot create a state directory in $TMPDIR: {e}"))?;
        cfg.state = Some(d.path().to_path_buf());
        Some(d)
    } else {
        None
    };
    let group: String = a
        .kafka
        .group
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    cfg.instance = Some(a.instance.clone().unwrap_or(format!("import-{group}")));
    cfg.kafka = Some(spec);
    cfg.flush_age = Duration::from_secs(3600);
    cfg.flush_bytes = (writer.memory_bytes / 2).max(16 << 20);
    cfg.options = FormatOptions::new(ReadOptions::default());
    if let Some(e) = opts::enricher(&a.enrich)? {
        cfg.all_tables.push(Box::new(e));
    }
    cfg.writer = writer;
    let quiet = a.quiet;
    let t0 = Instant::now();
    let rt = silt_query::runtime()?;
    let (k, ing) = rt.block_on(async move {
        let server = Server::start(cfg).await?;
        for note in &server.recovery {
            eprintln!("recovery: {note}");
        }
        let (k, ing) = (server.shared.kafka.clone(), server.shared.ingest.clone());
        let mut last_said = Instant::now();
        let interrupted = loop {
            if k.finished.load(Ordering::Relaxed) {
                break false;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = tokio::signal::ctrl_c() => break true,
            }
            if !quiet && last_said.elapsed() >= Duration::from_secs(5) {
                last_said = Instant::now();
                eprintln!(
                    "kafka: {} messages, {} events so far",
                    k.messages.load(Ordering::Relaxed),
                    ing.events.load(Ordering::Relaxed)
                );
            }
        };
        if interrupted {
            eprintln!("interrupted: writing what was read to the lake ...");
        }
        server.shutdown().await?;
        anyhow::Ok((k, ing))
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let (msgs, events, rejects) = (l(&k.messages), l(&ing.events), l(&ing.rejects));
    eprintln!(
        "kafka: {msgs} messages ({}) -> {events} events in {} files, {rejects} rejects, {secs:.1} s ({:.0} messages/s){}",
        silt_lake::summary::human_bytes(l(&k.bytes)),
        l(&ing.files),
        msgs as f64 / secs.max(1e-9),
        match l(&k.skipped) + l(&k.empty) {
            0 => String::new(),
            n => format!(", {n} skipped (empty, or already in the lake)"),
        }
    );
    if rejects > 0 {
        eprintln!(
            "  rejected records are in {}/_rejects/ with their topic, partition and offsets",
            a.lake.display()
        );
    }
    if let Some(why) = k.failure.lock().expect("not poisoned").clone() {
        eprintln!("error: the consumer stopped: {why}");
        return Ok(1);
    }
    if l(&ing.flush_failures) > 0 && l(&ing.flushes) == 0 {
        eprintln!("error: nothing could be written to the lake (see the messages above)");
        return Ok(3);
    }
    if a.strict && rejects > 0 {
        eprintln!(
            "error: {rejects} records were rejected and --strict is set (valid rows were imported)"
        );
        return Ok(2);
    }
    Ok(0)
}
