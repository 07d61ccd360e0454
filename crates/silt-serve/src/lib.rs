//! silt-serve: `silt serve`, streaming ingest into the lake with durable acknowledgements and a
//! query API that sees events a moment after they are acknowledged.
//!
//! ```text
//!  sources ──append──> write-ahead log ──records──> ingest pipeline ──rows──> Live (memory) ──┐
//!  (HTTP, Forward,      (group commit,   (in order)  (silt_ingest's:           │ seal          │ queries:
//!   syslog, tail,        fsync)                       decoders of the          ▼               │ lake files
//!   Kafka, flows)                                     registry, routes'      flush thread ──> lake ∪ memory
//!     ▲                                               transforms)                │
//!     └── ack once durable ┘     log released ◄── records acknowledged ◄─────────┘
//! ```
//!
//! - [`wal`]: the write-ahead log (group commit, replay, cleanup, chunk ids);
//! - [`log_source`]: the log as the source of the ingest pipeline (`silt_ingest::Pipeline`, the
//!   one `silt import` runs), its records decoded with the format each names;
//! - [`ingest`]: the pipeline's sink, which keeps rows queryable in memory and flushes
//!   generations to the lake (journaled, with the log position recorded, so a restart replays
//!   exactly what is not in the lake);
//! - [`live`]: the lake index and the rows in memory, swapped atomically at each flush;
//! - [`http`]: the HTTP API (ingest, query, health, metrics);
//! - [`forward`]: the fluentd Forward front end (protocol in `silt_forward`), with [`route`]
//!   choosing each tag's table;
//! - [`flight`]: the Arrow Flight SQL front end (server in `silt_flight`);
//! - [`syslog`]: the `--syslog` front end (UDP, TCP with both RFC 6587 framings);
//! - [`tail`]: the `--tail` front end (files followed by `silt_tail`, positions checkpointed in
//!   the log itself);
//! - [`maintain`]: compaction and retention on a schedule (`--compact-every`, `--keep`), with the
//!   query index kept true while files change;
//! - [`metrics`]: the Prometheus exposition.
//!
//! [`Server::start`] recovers (removes files of interrupted flushes, replays the log), starts
//! the threads and listeners; [`Server::shutdown`] drains: listeners stop, everything logged is
//! decoded and flushed, and the threads end.
//!
//! Touches the lake directory (data, `_rejects/`, `_silt/imports/`, `_silt/serve/`) and the
//! sockets it is told to listen on.

pub mod flight;
pub mod flows;
pub mod forward;
pub mod http;
pub mod ingest;
pub mod kafka;
pub mod kafka_meta;
pub mod live;
pub mod log_source;
pub mod maintain;
pub mod memory;
pub mod metrics;
pub mod route;
pub mod syslog;
pub mod tail;
pub mod tls;
pub mod wal;

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use silt_core::{FormatOptions, TableName, Transform};
use silt_lake::remote::LakeRoot;
use silt_lake::WriterConfig;
use silt_query::lake::LakeIndex;

use crate::ingest::IngestStats;
use crate::live::Live;
use crate::metrics::ServerMetrics;
use crate::wal::{Wal, WalConfig};

/// Durable log records waiting for the ingest thread at most (see [`Server::start`]).
pub const INGEST_QUEUE: usize = 32;

/// How long a stopping server lets its listeners finish the requests in progress before it
/// closes the connections left (see [`Server::shutdown`]).
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a stopping server waits, once its flush is done, for the compaction or retention
/// in progress before it leaves it unfinished (see [`Server::shutdown`]).
pub const MAINTAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where serve keeps its own files, below the lake root.
pub const SERVE_DIR: &str = "_silt/serve";

/// Everything `silt serve` is configured with.
pub struct ServeConfig {
    /// The lake: a directory, `file:///path` or `s3://bucket/prefix`
    /// ([`silt_lake::remote::LakeRoot::open`]).
    pub lake: PathBuf,
    /// `--state DIR`: where a server on an object-store lake keeps its write-ahead log, lock,
    /// tail positions and staging files (a lake directory keeps them in `_silt/serve/`).
    pub state: Option<PathBuf>,
    /// HTTP API address (`None`: no HTTP).
    pub http: Option<SocketAddr>,
    /// The HTTP API over TLS (`--http https://HOST:PORT`; needs `tls`).
    pub http_tls: bool,
    /// fluentd Forward address (TCP, and the UDP heartbeat on the same port).
    pub forward: Option<SocketAddr>,
    /// Forward over TLS (`--forward tls://HOST:PORT`; needs `tls`).
    pub forward_tls: bool,
    /// Forward protocol settings (shared key, users, limits).
    pub forward_cfg: silt_forward::ForwardConfig,
    /// Tag -> table routes for Forward.
    pub routes: Vec<route::Route>,
    /// Arrow Flight SQL address.
    pub flight: Option<SocketAddr>,
    /// Flight SQL over TLS (`--flight grpc+tls://HOST:PORT`; needs `tls`).
    pub flight_tls: bool,
    /// Files to follow.
    pub tails: Vec<tail::TailSpec>,
    /// syslog listeners.
    pub syslogs: Vec<syslog::SyslogSpec>,
    /// `--tls-cert` / `--tls-key`, for the listeners with TLS (`--syslog tls://`, `--forward
    /// tls://`, `--http https://`, `--flight grpc+tls://`).
    pub tls: Option<tls::TlsFiles>,
    /// `--sflow` / `--netflow` listeners.
    pub flows: Vec<flows::FlowSpec>,
    /// Bearer token for the APIs.
    pub token: Option<String>,
    /// Allow binding a non-loopback address without a token.
    pub insecure: bool,
    pub writer: WriterConfig,
    pub options: FormatOptions,
    /// Transforms per table (routes' `--parse-field`, `--enrich-table`).
    pub transforms: HashMap<TableName, Vec<Box<dyn Transform>>>,
    /// Transforms of every table, after the table's own (`--enrich`), except the tables in
    /// `all_tables_except` (those with an `--enrich-table` of their own).
    pub all_tables: Vec<Box<dyn Transform>>,
    pub all_tables_except: std::collections::HashSet<TableName>,
    pub flush_age: Duration,
    pub flush_bytes: usize,
    /// Rows in memory beyond which HTTP ingest answers 503.
    pub memory_bytes: usize,
    pub wal_retain: Duration,
    /// Appends waiting for the log's writer at most.
    pub wal_queue: usize,
    pub max_body: usize,
    pub query_timeout: Duration,
    pub query_memory: Option<usize>,
    /// Queries running at once at most (HTTP and Flight SQL together); more are refused.
    pub max_queries: usize,
    /// HTTP API connections one client (IP address) may hold open at once; 0: no limit.
    pub http_max_connections_per_client: usize,
    /// The databases of `--enrich` and of the SQL functions asn(), as_org(), geo_country(),
    /// geo_city(), rdns(): the handle an enricher was made with (or a standalone one), so that
    /// a reload reaches both.
    pub lookups: Option<silt_enrich::EnrichHandle>,
    /// Opens the databases again from their files, for [`Shared::reload_lookups`] (SIGHUP).
    pub reload_lookups: Option<LookupLoader>,
    /// Compaction and retention on a schedule.
    pub maintain: maintain::MaintainConfig,
    /// `--instance NAME`: several servers on one lake (members of one Kafka consumer group),
    /// each with its own log, lock and flush record under `_silt/serve/NAME/`.
    pub instance: Option<String>,
    /// `--kafka`: topics to consume.
    pub kafka: Option<kafka::KafkaSpec>,
    /// `--to-kafka`: tables produced to topics.
    pub to_kafka: Option<kafka::ToKafka>,
}

impl ServeConfig {
    /// Defaults for `lake`: HTTP on 127.0.0.1:8080, flush after 60 s or 64 MiB of rows.
    pub fn new(lake: PathBuf) -> Self {
        Self {
            lake,
            state: None,
            http: Some(SocketAddr::from(([127, 0, 0, 1], 8080))),
            forward: None,
            forward_tls: false,
            http_tls: false,
            flight_tls: false,
            forward_cfg: silt_forward::ForwardConfig::default(),
            routes: Vec::new(),
            flight: None,
            tails: Vec::new(),
            syslogs: Vec::new(),
            tls: None,
            flows: Vec::new(),
            token: None,
            insecure: false,
            writer: WriterConfig::default(),
            options: FormatOptions::default(),
            transforms: HashMap::new(),
            all_tables: Vec::new(),
            all_tables_except: Default::default(),
            flush_age: Duration::from_secs(60),
            flush_bytes: 64 << 20,
            memory_bytes: 512 << 20,
            wal_retain: Duration::from_secs(600),
            wal_queue: 4096,
            max_body: 64 << 20,
            query_timeout: Duration::from_secs(300),
            query_memory: None,
            max_queries: 8,
            http_max_connections_per_client: 256,
            lookups: None,
            reload_lookups: None,
            maintain: maintain::MaintainConfig::default(),
            instance: None,
            kafka: None,
            to_kafka: None,
        }
    }

    /// Where this instance keeps its log and lock: `_silt/serve/[NAME]` in a lake directory,
    /// `--state DIR[/NAME]` for an object-store lake.
    pub fn serve_dir(&self) -> PathBuf {
        let base = match &self.state {
            Some(d) => d.clone(),
            None => self.lake.join(SERVE_DIR),
        };
        match &self.instance {
            Some(n) => base.join(n),
            None => base,
        }
    }

    /// Refuses settings that would expose the server without a token, and combinations that do
    /// not work together.
    pub fn check(&self) -> anyhow::Result<()> {
        let remote = silt_lake::remote::is_remote(&self.lake);
        anyhow::ensure!(
            !remote || self.state.is_some(),
            "silt serve on an object-store lake ({}) needs --state DIR: a local directory that keeps the write-ahead log (acknowledged events wait there until the bucket holds them), the tail positions and the files being uploaded; give the same DIR at every start, e.g. --state /var/lib/silt",
            self.lake.display()
        );
        anyhow::ensure!(
            remote || self.state.is_none(),
            "--state is for an object-store lake; a lake directory keeps the server's state in {}",
            self.lake.join(SERVE_DIR).display()
        );
        for a in self.http.iter().chain(self.flight.iter()) {
            anyhow::ensure!(
                a.ip().is_loopback() || self.token.is_some() || self.insecure,
                "refusing to listen on {a} without a token: anyone who can reach it could read the lake and add data; give --token-file FILE, or --insecure to accept that"
            );
        }
        for s in &self.syslogs {
            anyhow::ensure!(
                s.addr.ip().is_loopback() || self.insecure,
                "refusing to take syslog on {} (syslog has no authentication): give --insecure to accept that",
                s.addr
            );
        }
        for f in &self.flows {
            anyhow::ensure!(
                f.addr.ip().is_loopback() || self.insecure,
                "refusing to take flow export on {} (sFlow and NetFlow have no authentication): give --insecure to accept that",
                f.addr
            );
        }
        for a in self.forward.iter() {
            anyhow::ensure!(
                a.ip().is_loopback() || self.forward_cfg.shared_key.is_some() || self.insecure,
                "refusing to take Forward connections on {a} without a shared key: anyone who can reach it could add data; give --forward-shared-key-file FILE, or --insecure to accept that"
            );
        }
        self.forward_cfg
            .validate()
            .map_err(|e| anyhow::anyhow!("Forward settings: {e}"))?;
        anyhow::ensure!(self.max_body > 0, "--max-body must be positive");
        anyhow::ensure!(self.max_queries > 0, "--max-queries must be at least 1");
        if let Some(n) = &self.instance {
            anyhow::ensure!(
                !n.is_empty()
                    && n.len() <= 64
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "--instance {n:?}: use letters, digits, '-' and '_' (at most 64)"
            );
        }
        Ok(())
    }
}

/// What the HTTP handlers (and other front ends) share.
pub struct Shared {
    pub cfg: SharedConfig,
    pub wal: Wal,
    pub live: Arc<Live>,
    pub ingest: Arc<IngestStats>,
    pub forward: Arc<silt_forward::ForwardStats>,
    pub syslog: Arc<syslog::SyslogStats>,
    pub flow_stats: Arc<flows::FlowStats>,
    pub kafka: Arc<kafka::KafkaStats>,
    pub maintain: Arc<maintain::MaintainStats>,
    pub metrics: ServerMetrics,
    pub started: Instant,
    /// One permit per running query (`--max-queries`).
    pub query_slots: Arc<tokio::sync::Semaphore>,
    /// Parquet footers kept from one query to the next ([`FOOTER_CACHE`] bytes at most).
    pub footers: silt_query::SharedFooters,
}

/// Bytes of Parquet footers a server keeps between queries: without them every query reads
/// the footer of every file it scans again, which makes a query slower with every flush
/// until compaction.
pub const FOOTER_CACHE: usize = 64 << 20;

/// The part of the configuration the front ends read.
pub struct SharedConfig {
    pub token: Option<String>,
    pub max_body: usize,
    pub memory_bytes: usize,
    pub query_timeout: Duration,
    pub query_memory: Option<usize>,
    pub max_queries: usize,
    /// The databases of `--enrich` and the SQL functions (see [`ServeConfig::lookups`]).
    pub lookups: Option<silt_enrich::EnrichHandle>,
    pub reload_lookups: Option<LookupLoader>,
}

/// Opens the enrichment databases from their files (the paths the server was started with).
pub type LookupLoader = Arc<dyn Fn() -> anyhow::Result<silt_enrich::Databases> + Send + Sync>;

impl Shared {
    /// Whether rows waiting for the lake exceed the memory budget (ingest should push back).
    pub fn behind(&self) -> bool {
        self.ingest.memory_bytes.load(Ordering::Relaxed) as usize > self.cfg.memory_bytes
    }

    /// Waits until log record `seq` is decoded, so a query sees its rows (read-your-writes:
    /// an acknowledgement means durable, and rows become queryable a moment later). `false`
    /// when that took longer than `limit`.
    pub async fn wait_visible(&self, seq: u64, limit: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            if self.ingest.visible_seq.load(Ordering::Relaxed) >= seq {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(20));
        }
    }

    /// A query session over the lake and the rows in memory, as they are now, with the pin
    /// that keeps maintenance from removing the files it may read: hold it until the query's
    /// results are out ([`live::IndexUpdate::replace_before_removal`]).
    pub fn session(&self) -> anyhow::Result<(silt_query::SiltSession, Arc<()>)> {
        let snap = self.live.snapshot();
        let s = silt_query::SiltSession::live(
            snap.index,
            snap.tails,
            self.cfg.query_memory,
            Some(&self.footers),
        )?;
        // Registered without databases too: asn(), rdns(), ... then say which option they need.
        Ok((
            s.with_lookups(
                self.cfg
                    .lookups
                    .as_ref()
                    .map(|h| h.databases())
                    .unwrap_or_default(),
            ),
            snap.pin,
        ))
    }

    /// Opens the enrichment databases again from their files and swaps them in: ingest goes on
    /// meanwhile (the enricher takes the new set at its next batch, queries at their next
    /// session). A set that cannot be opened or cannot serve `--enrich`'s attributes is
    /// refused and the old one stays. Returns what was loaded.
    pub fn reload_lookups(&self) -> anyhow::Result<String> {
        let r = (|| {
            let (Some(handle), Some(load)) = (&self.cfg.lookups, &self.cfg.reload_lookups) else {
                anyhow::bail!(
                    "no enrichment databases to reload (start silt serve with --mmdb, --ip-ranges or --rdns)"
                );
            };
            let dbs = load()?;
            let what = dbs.describe().join("; ");
            handle.reload(dbs)?;
            Ok(what)
        })();
        match &r {
            Ok(_) => self.metrics.lookup_reloads.fetch_add(1, Ordering::Relaxed),
            Err(_) => self
                .metrics
                .lookup_reload_failures
                .fetch_add(1, Ordering::Relaxed),
        };
        r
    }

    /// A slot for one query, held while it runs; refused (with what to do) when `--max-queries`
    /// are running already, so a burst of heavy queries cannot take the memory and CPU that
    /// ingest needs.
    pub fn query_slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, String> {
        self.query_slots.clone().try_acquire_owned().map_err(|_| {
            self.metrics.queries_refused.fetch_add(1, Ordering::Relaxed);
            format!(
                "{} queries are running already (--max-queries {}); retry when one has finished",
                self.cfg.max_queries, self.cfg.max_queries
            )
        })
    }

    /// Runs one read-only statement over the lake and the rows in memory.
    pub async fn run_query(&self, sql: &str) -> anyhow::Result<silt_query::QueryResult> {
        let (session, _pin) = self.session()?;
        let lake = session.lake().root.display().to_string();
        match session.query(sql).await {
            Ok(r) => Ok(r),
            // A file whose footer reads but whose data does not: named (reading the tables'
            // files again blocks, for at most the budget).
            Err(e) if silt_query::damage::decode_failure(&e) => {
                let root = session.lake().root.clone();
                let sql = sql.to_string();
                let budget = std::time::Duration::from_secs(10);
                Err(tokio::task::spawn_blocking(move || {
                    silt_query::damage::explain_damage(e, &root, &sql, budget)
                })
                .await?)
            }
            Err(e) => Err(silt_query::explain_missing_table(
                e,
                &lake,
                Ok(session.tables()),
            )),
        }
    }
}

/// Receive buffer asked for on UDP listeners (syslog, sFlow, NetFlow): the kernel's queue is
/// the only one a datagram has while the server is busy, and its default (about 200 KiB) is a
/// few milliseconds of a busy exporter. The kernel caps it at `net.core.rmem_max`.
pub const UDP_RECEIVE_BUFFER: usize = 32 << 20;

/// The TLS acceptor of a listener that asked for TLS (`on`), offering the application protocol
/// `alpn`; an error naming `flag` when no certificate was given.
fn tls_for(
    flag: &str,
    addr: SocketAddr,
    on: bool,
    files: &Option<tls::TlsFiles>,
    alpn: &[u8],
) -> anyhow::Result<Option<tokio_rustls::TlsAcceptor>> {
    match (on, files) {
        (false, _) => Ok(None),
        (true, Some(files)) => Ok(Some(tls::acceptor_for(files, &[alpn])?)),
        (true, None) => anyhow::bail!(
            "{flag}://{addr}: give the server's certificate and key with --tls-cert and --tls-key"
        ),
    }
}

fn widen_receive_buffer(u: &tokio::net::UdpSocket) {
    let s = socket2::SockRef::from(u);
    if let Err(e) = s.set_recv_buffer_size(UDP_RECEIVE_BUFFER) {
        tracing::warn!("cannot enlarge the UDP receive buffer: {e}");
    }
    match s.recv_buffer_size() {
        Ok(n) if n < UDP_RECEIVE_BUFFER / 2 => tracing::warn!(
            "UDP receive buffer of {} is {n} bytes (net.core.rmem_max caps it): bursts may be dropped; raise it with sysctl -w net.core.rmem_max={UDP_RECEIVE_BUFFER}",
            u.local_addr().map(|a| a.to_string()).unwrap_or_default()
        ),
        _ => {}
    }
}

/// The lease an instance holds in an object-store lake (`_silt/serve/<NAME>.lock`, `default`
/// for the unnamed instance).
fn lease_key(instance: Option<&str>) -> String {
    format!("{SERVE_DIR}/{}.lock", instance.unwrap_or("default"))
}

/// The file in a state directory that names its lake.
const STATE_LAKE: &str = "lake";

/// Recovers the lake for the instance `instance` (files of interrupted flushes and imports,
/// interrupted compactions) and opens where its flushes go: returns what recovery did, the last
/// log record the lake holds, the flush target and, on an object-store lake, the instance's
/// lease.
#[allow(clippy::type_complexity)]
fn open_target(
    root: &LakeRoot,
    serve_dir: &std::path::Path,
    instance: Option<String>,
) -> anyhow::Result<(
    (Vec<String>, u64),
    ingest::Target,
    Option<silt_lake::remote::lock::RemoteLock>,
)> {
    let mut recovery = Vec::new();
    let note = |recovery: &mut Vec<String>, rec: &silt_lake::imports::Recovered| {
        if !rec.runs.is_empty() {
            recovery.push(format!(
                "removed {} file(s) of {} interrupted flush(es) or import(s); their events are replayed from the log",
                rec.files,
                rec.runs.len()
            ));
        }
    };
    let compactions = |recovery: &mut Vec<String>, r: Option<silt_lake::replace::Recovery>| {
        if let Some(r) = r.filter(|r| r.completed + r.abandoned > 0) {
            recovery.push(format!(
                "finished {} and undid {} compaction(s) a crash interrupted",
                r.completed, r.abandoned
            ));
        }
    };
    match root {
        LakeRoot::Dir(lake) => {
            let log = silt_lake::imports::ImportLog::open_instance(lake, instance.as_deref())?;
            note(&mut recovery, &log.recover()?);
            compactions(
                &mut recovery,
                silt_lake::replace::recover_if_idle(lake, silt_lake::replace::RECORD_GRACE)?,
            );
            let covered = log.wal_covered()?.unwrap_or(0);
            Ok(((recovery, covered), ingest::Target::Dir(log), None))
        }
        LakeRoot::Remote(lake) => {
            // A state directory serves one lake: its log's records are that lake's.
            let named = serve_dir.join(STATE_LAKE);
            match std::fs::read_to_string(&named) {
                Ok(url) => anyhow::ensure!(
                    url.trim() == lake.url(),
                    "the state directory {} belongs to the lake {} (its log holds that lake's events), not {}; give each lake its own --state DIR",
                    serve_dir.display(),
                    url.trim(),
                    lake.url()
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    silt_lake::publish::write_atomic(&named, format!("{}\n", lake.url()).as_bytes())?
                }
                Err(e) => return Err(e).with_context(|| format!("cannot read {}", named.display())),
            }
            let key = lease_key(instance.as_deref());
            let lease = match silt_lake::remote::lock::RemoteLock::lease(lake, &key, "silt serve")? {
                Ok(l) => l,
                Err(holder) => anyhow::bail!(
                    "another silt serve holds {}/{key}: {holder}; stop it first, or give each server its own --instance NAME (a server that died is taken over {}s after its last heartbeat)",
                    lake.url(),
                    silt_lake::remote::record::STALE.as_secs()
                ),
            };
            let log = silt_lake::remote::record::RemoteImportLog::new(lake.clone());
            note(&mut recovery, &log.recover()?);
            compactions(
                &mut recovery,
                silt_lake::remote::replace::recover_if_idle(
                    lake,
                    silt_lake::replace::RECORD_GRACE,
                )?,
            );
            let record = silt_lake::imports::flush_record_name(instance.as_deref());
            let covered = log
                .last_flush(&record)?
                .and_then(|r| r.wal_upto)
                .unwrap_or(0);
            let staging = serve_dir.join("staging");
            // What a crash left half-written there is not in the lake (its journal saw to that).
            let _ = std::fs::remove_dir_all(&staging);
            std::fs::create_dir_all(&staging)
                .with_context(|| format!("cannot create {}", staging.display()))?;
            let target = ingest::Target::Remote(ingest::RemoteTarget {
                lake: lake.clone(),
                staging,
                record,
                lease: lease.watch(),
                delta_tables: silt_lake::delta::remote_delta_tables(lake)?,
            });
            Ok(((recovery, covered), target, Some(lease)))
        }
    }
}

/// A running server.
pub struct Server {
    pub shared: Arc<Shared>,
    /// Where the HTTP API listens (the port is known once bound).
    pub http_addr: Option<SocketAddr>,
    /// Where Forward listens.
    pub forward_addr: Option<SocketAddr>,
    /// Where Flight SQL listens.
    pub flight_addr: Option<SocketAddr>,
    /// Where each syslog listener listens, in the order given: (`tcp` or `udp`, address,
    /// table).
    pub syslog_addrs: Vec<(&'static str, SocketAddr, String)>,
    /// Where each `--sflow` / `--netflow` listener listens.
    pub flow_addrs: Vec<(flows::FlowProtocol, SocketAddr)>,
    pub forward_stats: Arc<silt_forward::ForwardStats>,
    /// What recovery did at start, for the log.
    pub recovery: Vec<String>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    ingest: Option<std::thread::JoinHandle<()>>,
    maintain: Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
    _lock: File,
    /// On an object-store lake: the instance's lease in the bucket.
    _lease: Option<silt_lake::remote::lock::RemoteLock>,
}

impl Server {
    /// Recovers the lake and the log, starts the threads and binds the listeners.
    pub async fn start(cfg: ServeConfig) -> anyhow::Result<Server> {
        cfg.check()?;
        let root = {
            let l = cfg.lake.clone();
            tokio::task::spawn_blocking(move || LakeRoot::open(&l)).await??
        };
        let serve_dir = cfg.serve_dir();
        std::fs::create_dir_all(&serve_dir)
            .with_context(|| format!("cannot create {}", serve_dir.display()))?;
        let lock_path = serve_dir.join("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
                "another silt serve is running on the lake {} (it holds {}); stop it first, or give each server its own --instance NAME",
                root.display(),
                lock_path.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", lock_path.display()))
            }
        }
        let (started, target, lease) = {
            let (root, serve_dir, instance) =
                (root.clone(), serve_dir.clone(), cfg.instance.clone());
            tokio::task::spawn_blocking(move || open_target(&root, &serve_dir, instance)).await??
        };
        let (mut recovery, covered) = started;
        let wal_dir = serve_dir.join("wal");
        let replayed = {
            let d = wal_dir.clone();
            tokio::task::spawn_blocking(move || wal::replay(&d, covered)).await??
        };
        recovery.extend(replayed.notes.iter().cloned());
        if !replayed.records.is_empty() {
            recovery.push(format!(
                "replaying {} log record(s) after record {covered} (acknowledged before the last stop, not yet in the lake)",
                replayed.records.len()
            ));
        }
        let index = {
            let l = root.clone();
            tokio::task::spawn_blocking(move || LakeIndex::open(&l)).await??
        };
        for w in &index.warnings {
            recovery.push(w.clone());
        }
        let root = match root {
            // The index's root is canonical (the paths its files have).
            LakeRoot::Dir(_) => LakeRoot::Dir(index.root.clone()),
            remote => remote,
        };
        let live = Arc::new(Live::new(index));
        let kafka_root = root.clone();
        let maintain_stats = Arc::new(maintain::MaintainStats::default());
        let maintain = {
            let (tx, rx) = std::sync::mpsc::channel();
            let h = maintain::start(
                root,
                serve_dir.join("staging"),
                cfg.maintain.clone(),
                live.clone(),
                maintain_stats.clone(),
                rx,
            )
            .context("cannot start the maintenance thread")?;
            Some((tx, h))
        };
        let tail_chunks: Vec<String> = replayed
            .chunks
            .iter()
            .filter(|(c, _)| c.starts_with("tail:"))
            .map(|(c, _)| c.clone())
            .collect();
        // Durable records waiting to be decoded. Kept short: when decoding falls behind, the log's
        // writer waits here, appends wait for it, and sources push back (acks come later), so
        // what is acknowledged stays at most this many records from being queryable.
        let (rec_tx, rec_rx) = std::sync::mpsc::sync_channel(INGEST_QUEUE);
        let wal = Wal::start(
            WalConfig {
                dir: wal_dir,
                retain: cfg.wal_retain,
                queue: cfg.wal_queue,
            },
            // Past what the lake holds too: a log started afresh (a new state directory) must
            // not reuse numbers a flush record already covers.
            replayed.last_seq.max(covered) + 1,
            replayed.chunks,
            rec_tx,
        )?;
        let stats = Arc::new(IngestStats::default());
        stats.flushed_seq.store(covered, Ordering::Relaxed);
        // What the lake holds is queryable (`wait_visible` after a restart).
        stats.visible_seq.store(covered, Ordering::Relaxed);
        let ingest = ingest::start(
            ingest::IngestConfig {
                target,
                writer: cfg.writer.clone(),
                // NetFlow v9/IPFIX templates for the server's lifetime (`flows`).
                options: {
                    let c: silt_flowexport::CaptureOptions = cfg.options.get_or_default();
                    cfg.options.with(c)
                },
                transforms: cfg.transforms,
                all_tables: cfg.all_tables,
                all_tables_except: cfg.all_tables_except,
                flush_age: cfg.flush_age,
                flush_bytes: cfg.flush_bytes,
                to_kafka: cfg.to_kafka.clone(),
            },
            replayed.records,
            rec_rx,
            live.clone(),
            wal.janitor(),
            stats.clone(),
        )?;
        let shared = Arc::new(Shared {
            cfg: SharedConfig {
                token: cfg.token,
                max_body: cfg.max_body,
                memory_bytes: cfg.memory_bytes,
                query_timeout: cfg.query_timeout,
                query_memory: cfg.query_memory,
                max_queries: cfg.max_queries,
                lookups: cfg.lookups.clone(),
                reload_lookups: cfg.reload_lookups.clone(),
            },
            wal,
            live,
            ingest: stats,
            forward: Arc::new(silt_forward::ForwardStats::new()),
            syslog: Arc::new(syslog::SyslogStats::default()),
            flow_stats: Arc::new(flows::FlowStats::default()),
            kafka: Arc::new(kafka::KafkaStats::default()),
            maintain: maintain_stats,
            metrics: ServerMetrics::default(),
            started: Instant::now(),
            query_slots: Arc::new(tokio::sync::Semaphore::new(cfg.max_queries)),
            footers: silt_query::SharedFooters::new(FOOTER_CACHE),
        });
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        let mut http_addr = None;
        if let Some(addr) = cfg.http {
            let tls = tls_for("--http https", addr, cfg.http_tls, &cfg.tls, b"http/1.1")?;
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (--http)"))?;
            http_addr = Some(listener.local_addr()?);
            let app = http::router(shared.clone());
            let mut stopped = stopped.clone();
            let stop = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            let failures = shared.metrics.api_tls_failures.clone();
            let limits = http::Limits {
                header_timeout: http::HEADER_TIMEOUT,
                per_client: cfg.http_max_connections_per_client,
                refused: shared.metrics.http_connections_refused.clone(),
            };
            tasks.push(tokio::spawn(async move {
                match tls {
                    None => http::serve(listener, app, stop, limits).await,
                    Some(acceptor) => {
                        match tls::TlsListener::new(listener, acceptor, "--http", failures) {
                            Ok(l) => http::serve(l, app, stop, limits).await,
                            Err(e) => tracing::error!("HTTP server: {e}"),
                        }
                    }
                }
            }));
        }
        let forward_stats = shared.forward.clone();
        let mut forward_addr = None;
        if let Some(addr) = cfg.forward {
            let tls = match (cfg.forward_tls, &cfg.tls) {
                (false, _) => None,
                (true, Some(files)) => Some(tls::acceptor(files)?),
                (true, None) => anyhow::bail!(
                    "--forward tls://{addr}: give the server's certificate and key with --tls-cert and --tls-key"
                ),
            };
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (--forward)"))?;
            let bound = listener.local_addr()?;
            forward_addr = Some(bound);
            let udp = tokio::net::UdpSocket::bind(bound)
                .await
                .with_context(|| format!("cannot bind the UDP heartbeat on {bound} (--forward)"))?;
            let sink: Arc<dyn silt_forward::ForwardSink> = Arc::new(forward::LogSink {
                shared: shared.clone(),
                routes: Arc::new(cfg.routes.clone()),
            });
            let fcfg = Arc::new(cfg.forward_cfg.clone());
            let (st, mut s1, mut s2) = (forward_stats.clone(), stopped.clone(), stopped.clone());
            tasks.push(tokio::spawn(async move {
                let r = silt_forward::serve(listener, fcfg, sink, st, tls, async move {
                    let _ = s1.wait_for(|s| *s).await;
                })
                .await;
                if let Err(e) = r {
                    tracing::error!("Forward server: {e}");
                }
            }));
            let st = forward_stats.clone();
            tasks.push(tokio::spawn(async move {
                let r = silt_forward::serve_heartbeat_counted(
                    udp,
                    async move {
                        let _ = s2.wait_for(|s| *s).await;
                    },
                    Some(st),
                )
                .await;
                if let Err(e) = r {
                    tracing::error!("Forward heartbeat: {e}");
                }
            }));
        }
        let mut flight_addr = None;
        if let Some(addr) = cfg.flight {
            let tls = tls_for("--flight grpc+tls", addr, cfg.flight_tls, &cfg.tls, b"h2")?;
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (--flight)"))?;
            flight_addr = Some(listener.local_addr()?);
            let engine: Arc<dyn silt_flight::QueryEngine> =
                Arc::new(flight::Engine(shared.clone()));
            let fcfg = silt_flight::FlightConfig {
                token: shared.cfg.token.clone(),
                ..Default::default()
            };
            let mut s1 = stopped.clone();
            let stop = async move {
                let _ = s1.wait_for(|s| *s).await;
            };
            let failures = shared.metrics.api_tls_failures.clone();
            tasks.push(tokio::spawn(async move {
                let r = match tls {
                    None => silt_flight::serve(listener, engine, fcfg, stop).await,
                    Some(acceptor) => {
                        let bound = listener.local_addr().ok();
                        match tls::TlsListener::new(listener, acceptor, "--flight", failures) {
                            Ok(l) => {
                                let incoming = futures::stream::unfold(l, |mut l| async move {
                                    let (stream, peer) = l.next().await;
                                    Some((Ok(silt_flight::Conn(stream, peer)), l))
                                });
                                silt_flight::serve_incoming(incoming, bound, engine, fcfg, stop)
                                    .await
                            }
                            Err(e) => Err(e.into()),
                        }
                    }
                };
                if let Err(e) = r {
                    tracing::error!("Flight SQL server: {e:#}");
                }
            }));
        }
        let mut syslog_addrs = Vec::new();
        for spec in cfg.syslogs {
            let (shared2, st, stop2, table) = (
                shared.clone(),
                shared.syslog.clone(),
                stopped.clone(),
                spec.table.clone(),
            );
            if spec.tcp {
                let tls = match (spec.tls, &cfg.tls) {
                    (false, _) => None,
                    (true, Some(files)) => Some(tls::acceptor(files)?),
                    (true, None) => anyhow::bail!(
                        "--syslog tls://{}: give the server's certificate and key with --tls-cert and --tls-key",
                        spec.addr
                    ),
                };
                let l = tokio::net::TcpListener::bind(spec.addr)
                    .await
                    .with_context(|| format!("cannot listen on tcp {} (--syslog)", spec.addr))?;
                let kind = if spec.tls { "tls" } else { "tcp" };
                syslog_addrs.push((kind, l.local_addr()?, spec.table.clone()));
                tasks.push(tokio::spawn(syslog::serve_tcp(
                    l, table, shared2, st, stop2, tls,
                )));
            } else {
                let u = tokio::net::UdpSocket::bind(spec.addr)
                    .await
                    .with_context(|| format!("cannot bind udp {} (--syslog)", spec.addr))?;
                widen_receive_buffer(&u);
                syslog_addrs.push(("udp", u.local_addr()?, spec.table.clone()));
                tasks.push(tokio::spawn(syslog::serve_udp(
                    u, table, shared2, st, stop2,
                )));
            }
        }
        let mut flow_addrs = Vec::new();
        for spec in cfg.flows {
            let u = tokio::net::UdpSocket::bind(spec.addr)
                .await
                .with_context(|| format!("cannot bind udp {} (--sflow/--netflow)", spec.addr))?;
            widen_receive_buffer(&u);
            flow_addrs.push((spec.protocol, u.local_addr()?));
            tasks.push(tokio::spawn(flows::serve_udp(
                u,
                spec.protocol,
                shared.clone(),
                shared.flow_stats.clone(),
                stopped.clone(),
            )));
        }
        if let Some(spec) = cfg.kafka {
            let h = kafka::start(
                spec,
                kafka_root,
                cfg.instance.clone().unwrap_or_default(),
                shared.clone(),
                shared.kafka.clone(),
                stopped.clone(),
                tokio::runtime::Handle::current(),
            )?;
            tasks.push(tokio::task::spawn_blocking(move || {
                let _ = h.join();
            }));
        }
        if !cfg.tails.is_empty() {
            let h = tail::start(
                cfg.tails,
                serve_dir.clone(),
                &tail_chunks,
                shared.clone(),
                stopped.clone(),
                tokio::runtime::Handle::current(),
            )?;
            tasks.push(tokio::task::spawn_blocking(move || {
                let _ = h.join();
            }));
        }
        Ok(Server {
            shared,
            http_addr,
            forward_addr,
            flight_addr,
            syslog_addrs,
            flow_addrs,
            forward_stats,
            recovery,
            stop,
            tasks,
            ingest: Some(ingest),
            maintain,
            _lock: lock,
            _lease: lease,
        })
    }

    /// A receiver that turns true when the server starts shutting down (for front ends added
    /// next to the built-in ones).
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Adds a task the server waits for at shutdown (a front end that appends to the log).
    pub fn spawn_front_end(&mut self, task: tokio::task::JoinHandle<()>) {
        self.tasks.push(task);
    }

    /// Drains and stops: the listeners stop taking work and finish what they have, then every
    /// logged event is decoded and flushed to the lake. A compaction in progress stops after its
    /// current group, or is left unfinished [`MAINTAIN_WAIT`] after the flush.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        let _ = self.shared.ingest.stop_began.set(std::time::Instant::now());
        let _ = self.stop.send(true);
        // A compaction in progress stops after its current group. Closing the channel, not
        // sending on it: a message is consumed by the first check that sees it (a compaction
        // waiting for readers took it, and the thread's own wait then never returned), while a
        // closed channel answers every later check too. The thread is waited for after the
        // flush, not before it: a group being merged (a large partition, a slow object store, a
        // hung disk) must not keep the listeners and the flush waiting.
        let maintain = self.maintain.take().map(|(tx, h)| {
            drop(tx);
            tokio::task::spawn_blocking(move || h.join())
        });
        // Listeners finish the requests in progress, but a client that keeps a connection
        // half-sent (a request whose body never comes, a bare TCP connection to the Flight
        // port) would hold the stop forever, and with it the flush: past the grace, what is
        // left is closed as a crash would close it (nothing unacknowledged was promised).
        // The source threads (`--tail`, `--kafka`) are `spawn_blocking` tasks, which an abort
        // does not stop: one held by its I/O (a hung network mount) is left behind after a
        // further ABORT_WAIT rather than waited for without end. What it had not logged was not
        // acknowledged, and its position says so.
        const ABORT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        let (mut left, mut stuck) = (0, 0);
        for mut t in self.tasks.drain(..) {
            if tokio::time::timeout_at(deadline, &mut t).await.is_err() {
                t.abort();
                if tokio::time::timeout(ABORT_WAIT, t).await.is_err() {
                    stuck += 1;
                } else {
                    left += 1;
                }
            }
        }
        if left > 0 {
            tracing::warn!(
                "stopping: {left} listener(s) still had connections open {}s after the stop; \
closed them",
                STOP_GRACE.as_secs()
            );
        }
        if stuck > 0 {
            tracing::warn!(
                "stopping: {stuck} source thread(s) (--tail, --kafka) did not stop within {}s; \
going on without them (what they had not logged is read again at the next start)",
                (STOP_GRACE + ABORT_WAIT).as_secs()
            );
        }
        let ingest = self.ingest.take();
        let stats = self.shared.ingest.clone();
        // The log takes no more appends (a connection task the abort did not reach may still
        // hold `shared`), so the writer ends and the ingest thread seals and flushes.
        self.shared.wal.close();
        drop(self.shared);
        if let Some(h) = ingest {
            tokio::task::spawn_blocking(move || h.join())
                .await?
                .map_err(|_| anyhow::anyhow!("the ingest thread panicked"))?;
        }
        if let Some(j) = maintain {
            // Past MAINTAIN_WAIT the group is left as a crash would leave it: before its commit
            // the inputs still count (the hidden temporary output goes at the next start when
            // its replacement record was written, else at `silt vacuum`); after it, the next
            // start removes the inputs not yet removed.
            match tokio::time::timeout(MAINTAIN_WAIT, j).await {
                Ok(joined) => {
                    joined?.map_err(|_| anyhow::anyhow!("the maintenance thread panicked"))?
                }
                Err(_) => tracing::warn!(
                    "stopping: the compaction or retention in progress did not stop within {}s of \
the flush; leaving it unfinished as a crash would (every event stays in the lake once; the next \
start or `silt vacuum` finishes or removes what it left)",
                    MAINTAIN_WAIT.as_secs()
                ),
            }
        }
        anyhow::ensure!(
            !stats.flush_given_up.load(Ordering::Relaxed),
            "stopped without writing every event to the lake: its flush still failed {}s after the \
stop (the errors above say why); the events after log record {} stay in the write-ahead log \
(Kafka's records in Kafka) and are written when the server starts again",
            crate::ingest::STOP_FLUSH_RETRY.as_secs(),
            stats.flushed_seq.load(Ordering::Relaxed)
        );
        Ok(())
    }
}
