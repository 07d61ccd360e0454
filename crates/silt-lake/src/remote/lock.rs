//! The maintenance lock of an object-store lake: the exclusive right to change or remove
//! existing files (compact, retain, vacuum and their recovery), as
//! [`crate::replace::MaintenanceLock`] is for a directory. Writers that only add files (import)
//! do not take it.
//!
//! An object store has no file locks, so the lock is an object, `_silt/maintenance.lock`, taken
//! with a conditional write (`If-None-Match: *`: only one of several writers creates it) and
//! held as a lease: its holder rewrites it every [`HEARTBEAT`] with `If-Match` on the version it
//! wrote last, and removes it when done. A lock is a dead holder's when it names this machine and
//! a process that is not running, or when it has not been rewritten for [`STALE`] (a holder on
//! another machine; allow for clock skew). A dead holder's lock is taken over with `If-Match` on
//! the version read, so of two processes that find it dead only one gets it. A holder whose
//! rewrite fails because another process took the lock over (it was paused for longer than
//! [`STALE`]) learns it at its next [`RemoteLock::check`], which every step that changes the lake
//! calls first, and stops.
//!
//! The same lease guards other objects too ([`RemoteLock::lease`]): `silt serve` holds one per
//! instance (`_silt/serve/<instance>.lock`), so that two servers never flush under one flush
//! record.
//!
//! Touches only the lock objects (`_silt/maintenance.lock`, the leases callers name) below the
//! lake's prefix.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::Context;
use object_store::UpdateVersion;
use serde::{Deserialize, Serialize};

use super::record::{host_name, process_alive, HEARTBEAT, STALE};
use super::{PutIf, RemoteLake};

/// The lock object, below the lake's prefix (the local lock's name).
pub const LOCK: &str = crate::replace::LOCK_FILE;

/// What the lock object says.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Holder {
    /// Unique per acquisition.
    id: String,
    host: String,
    pid: u32,
    /// The command holding it (`silt compact`), for the message another command prints.
    what: String,
    /// RFC 3339 time of the acquisition.
    since: String,
}

impl std::fmt::Display for Holder {
    /// `silt compact (process 12 on host, since 2026-…)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (process {} on {}, since {})",
            if self.what.is_empty() {
                "?"
            } else {
                &self.what
            },
            self.pid,
            if self.host.is_empty() {
                "?"
            } else {
                &self.host
            },
            self.since
        )
    }
}

/// The maintenance lock of an object-store lake, held until dropped.
pub struct RemoteLock {
    lake: Arc<RemoteLake>,
    /// The lock object's key below the lake ([`LOCK`], or a lease's).
    key: Arc<str>,
    state: Arc<Mutex<Option<UpdateVersion>>>,
    /// Set by the heartbeat when the lock was taken over.
    lost: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    beat: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for RemoteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteLock")
            .field("lake", &self.lake.url())
            .finish()
    }
}

impl RemoteLock {
    /// Takes the lock for `what` (`silt compact`), or says who holds it.
    pub fn acquire(lake: &Arc<RemoteLake>, what: &str) -> anyhow::Result<Self> {
        match Self::try_acquire_at(lake, LOCK, what, SystemTime::now())? {
            Ok(l) => Ok(l),
            Err(h) => anyhow::bail!(
                "another maintenance command holds {}/{LOCK}: {h}; wait for it to finish (a \
                 holder that died is taken over {}s after its last heartbeat)",
                lake.url(),
                STALE.as_secs()
            ),
        }
    }

    /// Takes the lock, or returns `None` when a live holder has it.
    pub fn try_acquire(lake: &Arc<RemoteLake>, what: &str) -> anyhow::Result<Option<Self>> {
        Ok(Self::try_acquire_at(lake, LOCK, what, SystemTime::now())?.ok())
    }

    /// Takes the lease `key` (below the lake) for `what`, with the same rules as the maintenance
    /// lock, or returns its live holder.
    pub fn lease(
        lake: &Arc<RemoteLake>,
        key: &str,
        what: &str,
    ) -> anyhow::Result<Result<Self, Holder>> {
        Self::try_acquire_at(lake, key, what, SystemTime::now())
    }

    fn try_acquire_at(
        lake: &Arc<RemoteLake>,
        key: &str,
        what: &str,
        now: SystemTime,
    ) -> anyhow::Result<Result<Self, Holder>> {
        let me = Holder {
            id: uuid::Uuid::new_v4().simple().to_string(),
            host: host_name(),
            pid: std::process::id(),
            what: what.to_string(),
            since: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        let body = serde_json::to_vec(&me)?;
        // Two rounds: the lock may be released between a failed create and the read.
        for _ in 0..2 {
            if let Some(v) = lake.put_if(key, body.clone(), PutIf::Absent)? {
                return Ok(Ok(Self::held(lake, key, me, v)));
            }
            let Some(cur) = lake.get_versioned(key)? else {
                continue;
            };
            let holder: Holder = serde_json::from_slice(&cur.bytes).unwrap_or_default();
            let age = now.duration_since(cur.modified).unwrap_or_default();
            let died_here = holder.host == me.host && !process_alive(holder.pid);
            if !died_here && age < STALE {
                return Ok(Err(holder));
            }
            tracing::warn!(
                "taking over {}/{key} from {holder}, which stopped renewing it",
                lake.url(),
            );
            return Ok(
                match lake.put_if(key, body.clone(), PutIf::Unchanged(cur.version))? {
                    Some(v) => Ok(Self::held(lake, key, me, v)),
                    // Someone else took it over first.
                    None => Err(holder),
                },
            );
        }
        anyhow::bail!(
            "cannot take {}/{key}: it keeps appearing and disappearing",
            lake.url()
        )
    }

    fn held(lake: &Arc<RemoteLake>, key: &str, me: Holder, v: UpdateVersion) -> Self {
        let key: Arc<str> = key.into();
        let state = Arc::new(Mutex::new(Some(v)));
        let lost = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let beat = {
            let (lake, key, state, lost, stop) = (
                lake.clone(),
                key.clone(),
                state.clone(),
                lost.clone(),
                stop.clone(),
            );
            std::thread::Builder::new()
                .name("silt-lock".into())
                .spawn(move || heartbeat(lake, key, me, state, lost, stop))
                .ok()
        };
        Self {
            lake: lake.clone(),
            key,
            state,
            lost,
            stop,
            beat,
        }
    }

    /// The lake the lock is for.
    pub fn lake(&self) -> &Arc<RemoteLake> {
        &self.lake
    }

    /// An error when the lock was taken over (this process was paused past [`STALE`]): the
    /// caller must not change the lake any more.
    pub fn check(&self) -> anyhow::Result<()> {
        self.watch().check()
    }

    /// A handle that tells whether the lock is still held, for code that cannot borrow it.
    pub fn watch(&self) -> LockWatch {
        LockWatch {
            url: format!("{}/{}", self.lake.url(), self.key),
            lost: self.lost.clone(),
        }
    }
}

/// Whether a [`RemoteLock`] is still held ([`RemoteLock::watch`]).
#[derive(Debug, Clone)]
pub struct LockWatch {
    /// The lock object's URL.
    url: String,
    lost: Arc<AtomicBool>,
}

impl LockWatch {
    /// See [`RemoteLock::check`].
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.lost.load(Ordering::SeqCst),
            "lost {} to another process (this one did not renew it for {}s); stopped before \
             changing the lake",
            self.url,
            STALE.as_secs()
        );
        Ok(())
    }
}

fn heartbeat(
    lake: Arc<RemoteLake>,
    key: Arc<str>,
    me: Holder,
    state: Arc<Mutex<Option<UpdateVersion>>>,
    lost: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) {
    let tick = std::time::Duration::from_millis(200);
    let mut waited = std::time::Duration::ZERO;
    let Ok(body) = serde_json::to_vec(&me) else {
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(tick);
        waited += tick;
        if waited < HEARTBEAT {
            continue;
        }
        waited = std::time::Duration::ZERO;
        let mut v = state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(cur) = v.clone() else { return };
        match lake.put_if(&key, body.clone(), PutIf::Unchanged(cur)) {
            Ok(Some(next)) => *v = Some(next),
            Ok(None) => {
                tracing::error!("{}/{key} was taken over by another process", lake.url());
                lost.store(true, Ordering::SeqCst);
                *v = None;
                return;
            }
            Err(e) => tracing::warn!("heartbeat of {}/{key}: {e:#}", lake.url()),
        }
    }
}

impl Drop for RemoteLock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.beat.take() {
            let _ = h.join();
        }
        let ours = self.state.lock().map(|v| v.is_some()).unwrap_or_default();
        if ours && !self.lost.load(Ordering::SeqCst) {
            if let Err(e) = self
                .lake
                .delete(&self.key)
                .with_context(|| format!("cannot release {}/{}", self.lake.url(), self.key))
            {
                tracing::warn!("{e:#}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lake() -> Arc<RemoteLake> {
        let store = object_store::memory::InMemory::new();
        Arc::new(
            RemoteLake::with_store("s3://b/p", "b".into(), "p".into(), Arc::new(store)).unwrap(),
        )
    }

    #[test]
    fn one_holder_at_a_time_and_a_dead_one_is_taken_over() {
        let lake = lake();
        let a = RemoteLock::acquire(&lake, "silt compact").unwrap();
        let e = RemoteLock::acquire(&lake, "silt retain")
            .unwrap_err()
            .to_string();
        assert!(e.contains("silt compact"), "{e}");
        assert!(RemoteLock::try_acquire(&lake, "x").unwrap().is_none());
        drop(a);
        assert!(lake.get(LOCK).unwrap().is_none(), "released");

        // A holder on another machine that stopped renewing: taken over after STALE, once.
        let b = RemoteLock::acquire(&lake, "silt vacuum").unwrap();
        let mut h: Holder = serde_json::from_slice(&lake.get(LOCK).unwrap().unwrap()).unwrap();
        h.host = "elsewhere".into();
        lake.put(LOCK, serde_json::to_vec(&h).unwrap()).unwrap();
        let later = SystemTime::now() + STALE + std::time::Duration::from_secs(1);
        assert!(
            RemoteLock::try_acquire_at(&lake, LOCK, "x", SystemTime::now())
                .unwrap()
                .is_err()
        );
        let c = RemoteLock::try_acquire_at(&lake, LOCK, "silt compact", later)
            .unwrap()
            .expect("a stale lock is taken over");
        // The first holder finds out before it changes anything, and leaves the lock alone.
        b.lost.store(true, Ordering::SeqCst);
        assert!(b.check().is_err());
        drop(b);
        assert!(lake.get(LOCK).unwrap().is_some());
        c.check().unwrap();
        drop(c);

        // A holder on this machine whose process is gone is dead at once.
        let d = RemoteLock::acquire(&lake, "silt compact").unwrap();
        let mut h: Holder = serde_json::from_slice(&lake.get(LOCK).unwrap().unwrap()).unwrap();
        h.pid = u32::MAX - 1;
        lake.put(LOCK, serde_json::to_vec(&h).unwrap()).unwrap();
        d.lost.store(true, Ordering::SeqCst);
        drop(d);
        RemoteLock::acquire(&lake, "silt compact").unwrap();
    }
}
