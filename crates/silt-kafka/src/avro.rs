//! Rows as Avro messages (`silt export --format avro`, `silt serve --to-kafka-format avro`):
//! one binary-encoded Avro record per message, framed either as Avro's **single-object
//! encoding** (`C3 01`, the schema's 64-bit Rabin fingerprint little-endian, the record; the
//! schema itself is written once to `<schema dir>/<fingerprint>.avsc` so that consumers can
//! resolve it) or, with a schema registry, in the **Confluent wire format** (`00`, the schema id
//! big-endian, the record; the schema is registered under the subject `<topic>-value`, which
//! Kafka Connect, ksqlDB and the Confluent deserializers expect).
//!
//! The encoding is `arrow-avro`'s ([`arrow_avro::writer::Encoder`]). Before it, each batch is
//! brought to what Avro can hold ([`avro_ready`]): field names become Avro names (letters,
//! digits and `_`; `id.orig_h` stays a record `id` with a field `orig_h`; names that would
//! collide get `_2`, `_3`), unsigned 64-bit integers (Suricata's `flow_id`) become
//! `decimal(20,0)` (an Avro `long` cannot hold them all), dictionary columns their values,
//! columns that never had a value (Arrow `Null`) nullable strings, and durations `long`
//! microseconds. Times stay `timestamp-micros`, nullable columns `["null", T]` unions. The
//! record is named after the topic (namespace `silt`). A schema that changes between batches
//! (a table whose columns grew) gets a new fingerprint or registry id; consumers resolve each
//! message by its own.
//!
//! Touches the network (the registry) and the schema directory only.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, ListArray, StructArray};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use arrow_avro::schema::{AvroSchema, Fingerprint, FingerprintAlgorithm, FingerprintStrategy};
use arrow_avro::writer::format::AvroSoeFormat;
use arrow_avro::writer::{Encoder, WriterBuilder};

/// How Avro messages are framed and where their schemas go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framing {
    /// Single-object encoding; each schema is written to `schemas/<fingerprint>.avsc`.
    SingleObject { schemas: PathBuf },
    /// Confluent wire format; schemas are registered at `registry` (`http://HOST:PORT` or
    /// `https://[USER:PASSWORD@]HOST:PORT[/PATH]`; user and password go as HTTP basic
    /// authentication). An https registry's certificate is checked against the system's roots,
    /// or only against the PEM certificates in `ca` when given.
    Confluent {
        registry: String,
        ca: Option<PathBuf>,
    },
}

/// A schema in use: its encoder and how it is identified.
struct Prepared {
    encoder: Encoder,
}

/// Encodes batches as Avro messages; see the module documentation.
pub struct AvroEncoder {
    framing: Framing,
    /// How the registry is reached (with its TLS roots), for the Confluent framing.
    agent: Option<ureq::Agent>,
    /// Per topic and batch schema (after [`avro_ready`]): the encoder.
    prepared: Mutex<HashMap<(String, SchemaRef), Prepared>>,
}

impl AvroEncoder {
    pub fn new(framing: Framing) -> anyhow::Result<Self> {
        if let Framing::SingleObject { schemas } = &framing {
            std::fs::create_dir_all(schemas).map_err(|e| {
                anyhow::anyhow!(
                    "cannot create the Avro schema directory {}: {e}",
                    schemas.display()
                )
            })?;
        }
        let agent = match &framing {
            Framing::Confluent { registry, ca } => Some(registry_agent(registry, ca.as_deref())?),
            Framing::SingleObject { .. } => None,
        };
        Ok(Self {
            framing,
            agent,
            prepared: Mutex::new(HashMap::new()),
        })
    }

    /// The messages of `b`'s rows, in order, for `topic`.
    pub fn encode(&self, topic: &str, b: &RecordBatch) -> anyhow::Result<Vec<bytes::Bytes>> {
        let b = avro_ready(b, topic)?;
        let key = (topic.to_string(), b.schema());
        let mut prepared = self.prepared.lock().expect("not poisoned");
        if !prepared.contains_key(&key) {
            let p = self.prepare(topic, &b.schema())?;
            prepared.insert(key.clone(), p);
        }
        let p = prepared.get_mut(&key).expect("inserted above");
        p.encoder
            .encode(&b)
            .map_err(|e| anyhow::anyhow!("Avro encoding for {topic}: {e}"))?;
        Ok(p.encoder.flush().iter().collect())
    }

    fn prepare(&self, topic: &str, schema: &SchemaRef) -> anyhow::Result<Prepared> {
        let avro = AvroSchema::try_from(schema.as_ref())
            .map_err(|e| anyhow::anyhow!("no Avro schema for {topic}: {e}"))?;
        let strategy = match &self.framing {
            Framing::SingleObject { schemas } => {
                let Fingerprint::Rabin(fp) = avro
                    .fingerprint(FingerprintAlgorithm::Rabin)
                    .map_err(|e| anyhow::anyhow!("Avro schema fingerprint for {topic}: {e}"))?
                else {
                    unreachable!("a Rabin fingerprint was asked for")
                };
                write_schema(&schemas.join(format!("{fp:016x}.avsc")), &avro.json_string)?;
                FingerprintStrategy::Rabin
            }
            Framing::Confluent { registry, .. } => {
                let agent = self.agent.as_ref().expect("made with the framing");
                FingerprintStrategy::Id(register(
                    agent,
                    registry,
                    &format!("{topic}-value"),
                    &avro,
                )?)
            }
        };
        let encoder = WriterBuilder::new(schema.as_ref().clone())
            .with_fingerprint_strategy(strategy)
            .build_encoder::<AvroSoeFormat>()
            .map_err(|e| anyhow::anyhow!("Avro encoder for {topic}: {e}"))?;
        Ok(Prepared { encoder })
    }
}

/// Writes `json` to `path` unless it is there (temporary name, then rename).
fn write_schema(path: &std::path::Path, json: &str) -> anyhow::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let tmp = path.with_extension(format!("avsc.tmp-{}", std::process::id()));
    std::fs::write(&tmp, json)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| anyhow::anyhow!("cannot write the Avro schema {}: {e}", path.display()))
}

/// Registers `schema` under `subject` (Confluent Schema Registry REST API) and returns its id.
fn register(
    agent: &ureq::Agent,
    registry: &str,
    subject: &str,
    schema: &AvroSchema,
) -> anyhow::Result<u32> {
    let url = format!(
        "{}/subjects/{subject}/versions",
        registry.trim_end_matches('/')
    );
    let body = serde_json::json!({ "schema": schema.json_string }).to_string();
    // Errors name the registry without its password.
    let registry = &redacted(registry);
    let mut r = agent
        .post(&url)
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .send(body.as_bytes())
        .map_err(|e| anyhow::anyhow!("schema registry {registry}: {e}"))?;
    let status = r.status();
    let text = r
        .body_mut()
        .read_to_string()
        .map_err(|e| anyhow::anyhow!("schema registry {registry}: {e}"))?;
    anyhow::ensure!(
        status.is_success(),
        "schema registry {registry} refused the schema of {subject} ({status}): {text}"
    );
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("schema registry {registry}: not JSON ({e}): {text}"))?;
    v["id"]
        .as_u64()
        .and_then(|id| u32::try_from(id).ok())
        .ok_or_else(|| anyhow::anyhow!("schema registry {registry}: no schema id in {text}"))
}

/// The HTTP client of a registry at `url`: plain HTTP, or HTTPS checked against the system's
/// roots or, with `ca`, only against the certificates in that PEM file.
fn registry_agent(url: &str, ca: Option<&std::path::Path>) -> anyhow::Result<ureq::Agent> {
    use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
    let shown = redacted(url);
    let https = url.starts_with("https://");
    anyhow::ensure!(
        https || url.starts_with("http://"),
        "--schema-registry {shown:?}: give http://HOST:PORT or https://[USER:PASSWORD@]HOST:PORT"
    );
    let mut tls = TlsConfig::builder().root_certs(RootCerts::PlatformVerifier);
    if let Some(ca) = ca {
        anyhow::ensure!(
            https,
            "--schema-registry-ca {} applies to an https:// registry, not {shown}",
            ca.display()
        );
        let pem = std::fs::read(ca)
            .map_err(|e| anyhow::anyhow!("cannot read the CA file {}: {e}", ca.display()))?;
        let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|i| match i {
                Ok(PemItem::Certificate(c)) => Some(Ok(c)),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("the CA file {} is not PEM: {e}", ca.display()))?;
        anyhow::ensure!(
            !certs.is_empty(),
            "the CA file {} holds no certificate (-----BEGIN CERTIFICATE-----)",
            ca.display()
        );
        tls = tls.root_certs(RootCerts::new_with_certs(&certs));
    }
    Ok(ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(std::time::Duration::from_secs(30)))
            .http_status_as_error(false)
            .tls_config(tls.build())
            .build(),
    ))
}

/// `url` with the password of its user information replaced by `***`.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let host_end = rest.find('/').unwrap_or(rest.len());
    match rest[..host_end].rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}{}", &rest[host_end..])
        }
        None => url.to_string(),
    }
}

/// An Avro name: letters, digits and `_`, not starting with a digit.
pub fn avro_name(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.as_bytes()[0].is_ascii_digit() {
        out.insert(0, '_');
    }
    out
}

/// Avro names for a record's fields, unique (`_2`, `_3` after a collision).
fn unique_names<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .map(|n| {
            let base = avro_name(n);
            let mut name = base.clone();
            let mut k = 2;
            while !seen.insert(name.clone()) {
                name = format!("{base}_{k}");
                k += 1;
            }
            name
        })
        .collect()
}

/// `b` in the shape Avro can hold; see the module documentation.
pub fn avro_ready(b: &RecordBatch, topic: &str) -> anyhow::Result<RecordBatch> {
    let names = unique_names(b.schema().fields().iter().map(|f| f.name().as_str()));
    let mut fields = Vec::with_capacity(names.len());
    let mut columns = Vec::with_capacity(names.len());
    for ((f, c), name) in b.schema().fields().iter().zip(b.columns()).zip(names) {
        let (f, c) = ready(f, c, name)?;
        fields.push(f);
        columns.push(c);
    }
    let metadata = HashMap::from([
        ("avro.name".to_string(), avro_name(topic)),
        ("avro.namespace".to_string(), "silt".to_string()),
    ]);
    let schema = Arc::new(Schema::new_with_metadata(fields, metadata));
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// One column made ready, under its Avro `name` (field metadata dropped).
fn ready(f: &Field, a: &ArrayRef, name: String) -> anyhow::Result<(FieldRef, ArrayRef)> {
    let cast = |to: DataType| -> anyhow::Result<(FieldRef, ArrayRef)> {
        let c = arrow::compute::cast(a, &to)?;
        Ok((Arc::new(Field::new(&name, to, true)), c))
    };
    match a.data_type() {
        DataType::UInt64 => cast(DataType::Decimal128(20, 0)),
        DataType::Null => cast(DataType::Utf8),
        DataType::Duration(_) => {
            let us = arrow::compute::cast(a, &DataType::Duration(TimeUnit::Microsecond))?;
            let c = arrow::compute::cast(&us, &DataType::Int64)?;
            Ok((Arc::new(Field::new(&name, DataType::Int64, true)), c))
        }
        DataType::Dictionary(_, v) => {
            let c = arrow::compute::cast(a, v)?;
            ready(f, &c, name)
        }
        DataType::Struct(children) => {
            let s = a.as_any().downcast_ref::<StructArray>().expect("struct");
            let names = unique_names(children.iter().map(|c| c.name().as_str()));
            let mut fs = Vec::with_capacity(names.len());
            let mut cs = Vec::with_capacity(names.len());
            for ((cf, cc), n) in children.iter().zip(s.columns()).zip(names) {
                let (cf, cc) = ready(cf, cc, n)?;
                fs.push(cf);
                cs.push(cc);
            }
            let fields = Fields::from(fs);
            let s = StructArray::try_new(fields.clone(), cs, s.nulls().cloned())?;
            Ok((
                Arc::new(Field::new(&name, DataType::Struct(fields), true)),
                Arc::new(s),
            ))
        }
        DataType::LargeList(item) => {
            let c = arrow::compute::cast(a, &DataType::List(item.clone()))?;
            ready(f, &c, name)
        }
        DataType::List(item) => {
            let l = a.as_any().downcast_ref::<ListArray>().expect("list");
            let (item_f, values) = ready(item, l.values(), "item".to_string())?;
            let l = ListArray::try_new(
                item_f.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?;
            Ok((
                Arc::new(Field::new(&name, DataType::List(item_f), true)),
                Arc::new(l),
            ))
        }
        t => Ok((
            Arc::new(Field::new(&name, t.clone(), f.is_nullable())),
            a.clone(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        Decimal128Array, DictionaryArray, Int64Array, NullArray, StringArray, UInt64Array,
    };
    use arrow::datatypes::Int32Type;

    fn batch() -> RecordBatch {
        let id = StructArray::from(vec![
            (
                Arc::new(Field::new("orig_h", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec!["10.0.0.1", "::1"])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("orig-p", DataType::Int64, true)),
                Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
            ),
        ]);
        let dict: DictionaryArray<Int32Type> = vec!["a", "b"].into_iter().collect();
        RecordBatch::try_from_iter(vec![
            ("id", Arc::new(id) as ArrayRef),
            (
                "flow_id",
                Arc::new(UInt64Array::from(vec![u64::MAX, 7])) as ArrayRef,
            ),
            ("user-agent", Arc::new(dict) as ArrayRef),
            ("user_agent", Arc::new(StringArray::from(vec!["x", "y"]))),
            ("never", Arc::new(NullArray::new(2))),
            ("1st", Arc::new(Int64Array::from(vec![Some(1), None]))),
        ])
        .unwrap()
    }

    #[test]
    fn batches_are_made_avro_ready() {
        let r = avro_ready(&batch(), "my-topic").unwrap();
        let names: Vec<&str> = r
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(
            names,
            [
                "id",
                "flow_id",
                "user_agent",
                "user_agent_2",
                "never",
                "_1st"
            ]
        );
        let DataType::Struct(id) = r.schema().field(0).data_type().clone() else {
            panic!()
        };
        assert_eq!(id[1].name(), "orig_p");
        let flow = r
            .column(1)
            .as_any()
            .downcast_ref::<Decimal128Array>()
            .unwrap();
        assert_eq!(flow.value(0), u64::MAX as i128);
        assert_eq!(r.column(2).data_type(), &DataType::Utf8);
        assert_eq!(r.column(4).data_type(), &DataType::Utf8);
        assert_eq!(r.schema().metadata()["avro.name"], "my_topic");
    }

    #[test]
    fn single_object_messages_carry_the_fingerprint_of_the_written_schema() {
        let d = tempfile::tempdir().unwrap();
        let e = AvroEncoder::new(Framing::SingleObject {
            schemas: d.path().to_path_buf(),
        })
        .unwrap();
        let rows = e.encode("t", &batch()).unwrap();
        assert_eq!(rows.len(), 2);
        let files: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|f| f.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let fp = u64::from_str_radix(files[0].trim_end_matches(".avsc"), 16).unwrap();
        for r in &rows {
            assert_eq!(&r[..2], &[0xc3, 0x01]);
            assert_eq!(r[2..10], fp.to_le_bytes());
        }
        // The same schema again: no new file, the same prefix.
        let again = e.encode("t", &batch()).unwrap();
        assert_eq!(again[0][..10], rows[0][..10]);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        // The schema file is valid Avro for apache-avro too.
        let json = std::fs::read_to_string(d.path().join(&files[0])).unwrap();
        assert!(json.contains("\"decimal\""), "{json}");
    }

    #[test]
    fn registry_urls_are_checked_and_passwords_never_shown() {
        let e = AvroEncoder::new(Framing::Confluent {
            registry: "ftp://u:secret@r:8081".into(),
            ca: None,
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("https://[USER:PASSWORD@]HOST:PORT"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let e = AvroEncoder::new(Framing::Confluent {
            registry: "http://r:8081".into(),
            ca: Some("/nonexistent.pem".into()),
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("applies to an https:// registry"), "{e}");
        assert_eq!(
            redacted("https://svc:pa:ss@reg.example:8081/apis"),
            "https://svc:***@reg.example:8081/apis"
        );
        assert_eq!(redacted("http://r:8081/a@b"), "http://r:8081/a@b");
    }

    /// A local HTTPS server (a test CA's certificate for `localhost`) stands in for the
    /// registry: with the CA, silt registers the schema over TLS with basic authentication and
    /// frames messages with the id it answers; without it, the certificate is refused and the
    /// error does not show the password.
    #[test]
    fn an_https_registry_with_its_ca_and_basic_auth() {
        use std::io::{BufRead, BufReader, Read, Write};
        let d = tempfile::tempdir().unwrap();
        let sh = |args: &[&str]| {
            let o = std::process::Command::new("openssl")
                .args(args)
                .current_dir(d.path())
                .output();
            match o {
                Ok(o) if o.status.success() => true,
                Ok(o) => panic!("openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr)),
                Err(_) => false,
            }
        };
        let ca_args = [
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=silt test CA",
        ];
        if !sh(&ca_args) {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and openssl is missing (scripts/apt-deps.sh installs it)"
            );
            eprintln!("SKIPPED: openssl is missing");
            return;
        }
        std::fs::write(d.path().join("ext"), "subjectAltName=DNS:localhost\n").unwrap();
        sh(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "req.csr",
            "-subj",
            "/CN=localhost",
        ]);
        sh(&[
            "x509",
            "-req",
            "-in",
            "req.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-extfile",
            "ext",
        ]);
        let _ = rustls::crypto::ring::default_provider().install_default();
        let certs: Vec<_> =
            rustls::pki_types::pem::PemObject::pem_file_iter(d.path().join("cert.pem"))
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
        let key =
            rustls::pki_types::pem::PemObject::from_pem_file(d.path().join("key.pem")).unwrap();
        let config = std::sync::Arc::new(
            rustls::ServerConfig::builder()
                .with_no_client_auth()
                .with_single_cert(certs, key)
                .unwrap(),
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Serves connections until the test ends; answers each request with schema id 42 and
        // hands the request head to the test.
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let conn = rustls::ServerConnection::new(config.clone()).unwrap();
                let mut tls = BufReader::new(rustls::StreamOwned::new(conn, stream));
                let mut head = String::new();
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if tls.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                if head.is_empty() {
                    continue; // a handshake the client refused
                }
                let mut body = vec![0; len];
                tls.read_exact(&mut body).unwrap();
                let _ = tx.send(head);
                let answer = "{\"id\":42}";
                let out = tls.get_mut();
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                )
                .unwrap();
                out.flush().unwrap();
                out.conn.send_close_notify();
                let _ = out.flush();
            }
        });
        let registry = format!("https://svc:s3cret@localhost:{port}");
        let e = AvroEncoder::new(Framing::Confluent {
            registry: registry.clone(),
            ca: Some(d.path().join("ca.pem")),
        })
        .unwrap();
        let rows = e.encode("t", &batch()).unwrap();
        assert!(!rows.is_empty());
        for r in &rows {
            assert_eq!(&r[..5], &[0, 0, 0, 0, 42]);
        }
        let head = rx.recv().unwrap();
        assert!(
            head.starts_with("POST /subjects/t-value/versions "),
            "{head}"
        );
        // "svc:s3cret" in base64.
        assert!(head.contains("Basic c3ZjOnMzY3JldA=="), "{head}");

        // Without the CA, the system's roots do not know the test CA.
        let e = AvroEncoder::new(Framing::Confluent { registry, ca: None }).unwrap();
        let err = format!("{:#}", e.encode("t", &batch()).err().unwrap());
        assert!(
            err.to_lowercase().contains("certificate") || err.contains("issuer"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
    }
}
