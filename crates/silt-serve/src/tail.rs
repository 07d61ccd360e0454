//! The `--tail` front end: files followed by `silt_tail` (globs, rotation by rename and by
//! copytruncate, checkpoints) into the write-ahead log.
//!
//! Each poll's lines of one file become one log entry whose format is the one given
//! (`--tail zeek:/opt/zeek/logs/current/*.log`) or detected from the file's first bytes, and
//! whose table the decoder chooses (Zeek's `#path`, EVE's `event_type`, a generic log's file
//! name). A file's leading `#` header block (Zeek TSV) is kept per stream and put in front of every
//! later entry of that stream, so each entry decodes alone.
//!
//! Read positions are checkpointed *with the data*: an entry's chunk id is
//! `tail:<dev>:<ino>:<fingerprint>:<start>:<end>:<path>`, so the log itself says how far each
//! file was read when that entry became durable. On start the position of each file is the
//! furthest of `<lake>/_silt/serve/tail.json` (`_silt/serve/NAME/` with `--instance`) (saved every second and at stop) and the chunk ids
//! in the log's retained segments; the log keeps segments 10 minutes after their records reached
//! the lake, far longer than the one-second lag of `tail.json`. A restart therefore resumes after
//! the last durable line: nothing lost, nothing read twice.
//!
//! Touches the followed files (read only), `tail.json`, and the log.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use silt_core::format::Probe;
use silt_tail::{FileId, TailCheckpoint, TailConfig, TailEvent, Tailer};

use crate::wal::Entry;
use crate::Shared;

/// One `--tail [FORMAT:]GLOB`.
#[derive(Debug, Clone)]
pub struct TailSpec {
    pub pattern: String,
    /// A registry format, or `None` to detect per file.
    pub format: Option<String>,
}

impl TailSpec {
    /// Parses `[FORMAT:]GLOB` (`zeek:/logs/*.log`, `/var/log/suricata/eve.json`).
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        if let Some((f, rest)) = s.split_once(':') {
            if !f.contains('/') && !f.is_empty() {
                silt_ingest::registry::require(f)
                    .map_err(|e| anyhow::anyhow!("--tail {s:?}: {e:#}"))?;
                return Ok(Self {
                    pattern: rest.to_string(),
                    format: Some(f.to_string()),
                });
            }
        }
        anyhow::ensure!(!s.is_empty(), "--tail needs a path or glob");
        Ok(Self {
            pattern: s.to_string(),
            format: None,
        })
    }
}

/// The chunk id of an entry of `id` covering `[start, end)` of the file at `path`.
fn chunk_id(id: &FileId, start: u64, end: u64, path: &Path) -> String {
    format!(
        "tail:{}:{}:{}:{start}:{end}:{}",
        id.dev,
        id.ino,
        id.fingerprint,
        path.display()
    )
}

/// A checkpoint from a chunk id made by [`chunk_id`].
fn parse_chunk(c: &str) -> Option<TailCheckpoint> {
    let mut it = c.strip_prefix("tail:")?.splitn(6, ':');
    let dev = it.next()?.parse().ok()?;
    let ino = it.next()?.parse().ok()?;
    let fingerprint = it.next()?.parse().ok()?;
    let _start: u64 = it.next()?.parse().ok()?;
    let end = it.next()?.parse().ok()?;
    let path = PathBuf::from(it.next()?);
    Some(TailCheckpoint {
        id: FileId {
            dev,
            ino,
            fingerprint,
        },
        path,
        offset: end,
    })
}

/// The furthest position of each file among `a` and `b`.
fn furthest(a: Vec<TailCheckpoint>, b: Vec<TailCheckpoint>) -> Vec<TailCheckpoint> {
    let mut best: HashMap<FileId, TailCheckpoint> = HashMap::new();
    for c in a.into_iter().chain(b) {
        match best.get(&c.id) {
            Some(o) if o.offset >= c.offset => {}
            _ => {
                best.insert(c.id.clone(), c);
            }
        }
    }
    best.into_values().collect()
}

/// `dir` is the instance's serve directory (`_silt/serve` or `_silt/serve/NAME`).
fn state_path(dir: &Path) -> PathBuf {
    dir.join("tail.json")
}

fn save(lake: &Path, positions: &HashMap<FileId, TailCheckpoint>) {
    let v: Vec<&TailCheckpoint> = positions.values().collect();
    let bytes = match serde_json::to_vec_pretty(&v) {
        Ok(b) => b,
        Err(e) => return tracing::error!("tail checkpoints: {e}"),
    };
    if let Err(e) = silt_lake::publish::write_atomic(&state_path(lake), &bytes) {
        tracing::error!("cannot save tail checkpoints: {e:#}");
    }
}

struct StreamState {
    format: Option<String>,
    /// The file's leading `#` block, put in front of entries that start after it.
    header: Vec<u8>,
}

/// Starts the tailing thread; it stops when `stopping` turns true, after saving its positions.
pub fn start(
    specs: Vec<TailSpec>,
    serve_dir: PathBuf,
    logged_chunks: &[String],
    shared: Arc<Shared>,
    stopping: tokio::sync::watch::Receiver<bool>,
    rt: tokio::runtime::Handle,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let saved: Vec<TailCheckpoint> = match std::fs::read(state_path(&serve_dir)) {
        Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
            tracing::warn!(
                "ignoring unreadable {}: {e}",
                state_path(&serve_dir).display()
            );
            Vec::new()
        }),
        Err(_) => Vec::new(),
    };
    let logged: Vec<TailCheckpoint> = logged_chunks
        .iter()
        .filter_map(|c| parse_chunk(c))
        .collect();
    let checkpoints = furthest(saved, logged);
    let mut cfg = TailConfig::new(specs.iter().map(|s| s.pattern.clone()));
    cfg.poll_interval = Duration::from_millis(100);
    let poll = cfg.poll_interval;
    let mut tailer = Tailer::new(cfg, checkpoints.clone())?;
    let formats: Vec<(glob::Pattern, Option<String>)> = specs
        .iter()
        .map(|s| {
            let p = glob::Pattern::new(&s.pattern)
                .map_err(|e| anyhow::anyhow!("--tail {:?}: {e}", s.pattern))?;
            Ok((p, s.format.clone()))
        })
        .collect::<anyhow::Result<_>>()?;
    let handle = std::thread::Builder::new()
        .name("silt-serve-tail".into())
        .spawn(move || {
            let mut positions: HashMap<FileId, TailCheckpoint> =
                checkpoints.into_iter().map(|c| (c.id.clone(), c)).collect();
            let mut streams: HashMap<FileId, StreamState> = HashMap::new();
            let mut saved_at = Instant::now();
            'run: while !*stopping.borrow() {
                let events = tailer.poll();
                let idle = events.is_empty();
                for ev in events {
                    match ev {
                        TailEvent::Opened { id, path, .. } => {
                            let format = formats
                                .iter()
                                .find(|(p, _)| p.matches_path(&path))
                                .and_then(|(_, f)| f.clone());
                            streams.insert(
                                id,
                                StreamState {
                                    format,
                                    header: Vec::new(),
                                },
                            );
                        }
                        TailEvent::Data {
                            id,
                            path,
                            start,
                            end,
                            lines,
                            header,
                        } => {
                            let st = streams.entry(id.clone()).or_insert(StreamState {
                                format: None,
                                header: Vec::new(),
                            });
                            if let Some(h) = header {
                                st.header = h;
                            }
                            if start == 0 {
                                st.header = leading_header(&lines).to_vec();
                            }
                            let mut body = Vec::with_capacity(st.header.len() + lines.len());
                            if start > 0 {
                                body.extend_from_slice(&st.header);
                            }
                            body.extend_from_slice(&lines);
                            let format = st
                                .format
                                .get_or_insert_with(|| detect(&path, &body))
                                .clone();
                            let entry = Entry {
                                table: None,
                                format,
                                source: path.display().to_string(),
                                chunk: Some(chunk_id(&id, start, end, &path)),
                                body,
                                kafka: None,
                            };
                            if !log_entry(&rt, &shared, &entry, start, &stopping) {
                                // Nothing after these lines may be logged either: the saved
                                // position must stay at the last line that was.
                                break 'run;
                            }
                            positions.insert(
                                id.clone(),
                                TailCheckpoint {
                                    id,
                                    path,
                                    offset: end,
                                },
                            );
                        }
                        TailEvent::Closed { id, path, reason } => {
                            tracing::info!("tail {}: closed ({reason})", path.display());
                            streams.remove(&id);
                        }
                        TailEvent::Warning { path, message } => {
                            tracing::warn!("tail {}: {message}", path.display());
                        }
                    }
                }
                if saved_at.elapsed() >= Duration::from_secs(1) {
                    save(&serve_dir, &positions);
                    saved_at = Instant::now();
                }
                if idle {
                    std::thread::sleep(poll);
                }
            }
            save(&serve_dir, &positions);
        })?;
    Ok(handle)
}

/// Logs `entry` and waits until it is durable, retrying while the log refuses it (a full disk, a
/// failing fsync): the lines are not read again otherwise. Once the server is stopping, a refusal
/// gives up instead (false), so that a log that stays broken cannot hold the stop: the lines were
/// never acknowledged, their position is not saved, and the next start reads them again.
fn log_entry(
    rt: &tokio::runtime::Handle,
    shared: &Shared,
    entry: &Entry,
    start: u64,
    stopping: &tokio::sync::watch::Receiver<bool>,
) -> bool {
    let mut refusals = crate::wal::Refusals::default();
    let source = format!("tail {}", entry.source);
    loop {
        match rt.block_on(shared.wal.append(entry.clone())) {
            Ok(_) => {
                refusals.taken(&source);
                return true;
            }
            Err(e) if *stopping.borrow() => {
                tracing::error!(
                    "tail {}: {e:#}; stopping without logging its bytes from {start} on (they are \
read again at the next start)",
                    entry.source
                );
                return false;
            }
            Err(e) => {
                refusals.refused(&source, &e);
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

/// The `#` lines at the start of `lines` (a Zeek TSV header block).
fn leading_header(lines: &[u8]) -> &[u8] {
    let mut end = 0;
    for line in lines.split_inclusive(|&b| b == b'\n') {
        if line.first() != Some(&b'#') {
            break;
        }
        end += line.len();
    }
    &lines[..end]
}

/// The format of a file from its first bytes and name; `json` when nothing matches (its lines
/// then become rejects, counted and kept, rather than vanish).
fn detect(path: &Path, head: &[u8]) -> String {
    let name = path.file_name().and_then(|n| n.to_str());
    let probe = Probe {
        head: &head[..head.len().min(silt_core::format::PROBE_BYTES)],
        file_name: name,
    };
    match silt_ingest::registry::detect(&probe) {
        Some(d) => d.format.name.to_string(),
        None => {
            tracing::warn!(
                "tail {}: cannot tell the format from its first lines; reading it as json (give it: --tail FORMAT:{})",
                path.display(),
                path.display()
            );
            "json".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_ids_round_trip_to_checkpoints_and_the_furthest_wins() {
        let id = FileId {
            dev: 1,
            ino: 2,
            fingerprint: 3,
        };
        let c = chunk_id(&id, 10, 20, Path::new("/x/a:b.log"));
        let cp = parse_chunk(&c).unwrap();
        assert_eq!(cp.id, id);
        assert_eq!(cp.offset, 20);
        assert_eq!(cp.path, PathBuf::from("/x/a:b.log"));
        let older = TailCheckpoint {
            offset: 15,
            ..cp.clone()
        };
        let best = furthest(vec![older], vec![cp]);
        assert_eq!(best.len(), 1);
        assert_eq!(best[0].offset, 20);
        assert!(parse_chunk("forward:abc").is_none());
    }

    #[test]
    fn specs_and_headers() {
        let s = TailSpec::parse("zeek:/logs/*.log").unwrap();
        assert_eq!(s.format.as_deref(), Some("zeek"));
        assert_eq!(s.pattern, "/logs/*.log");
        assert!(TailSpec::parse("/var/log/eve.json")
            .unwrap()
            .format
            .is_none());
        assert!(TailSpec::parse("nope:/x").is_err());
        assert_eq!(leading_header(b"#a\n#b\nrow\n#close\n"), b"#a\n#b\n");
    }
}
