//! Which `silt serve` instance holds each Kafka partition now: the fence that keeps a consumer
//! group member the group expelled, but that did not die, from publishing records another
//! member has read again.
//!
//! A member that stalls (SIGSTOP, a frozen VM, a machine swapping hard) longer than the group's
//! session timeout loses its partitions without knowing it; another member takes them over and
//! resumes from what the lake says ([`crate::imports::ImportLog::kafka_positions`]). When the
//! stalled member wakes, it still holds the records it had read and, unfenced, would publish
//! them: the same rows twice in the lake. Kafka refuses such a member's offset commits (its
//! group generation is stale), but silt writes the lake, so silt fences it:
//!
//! - `_silt/imports/kafka-claims.json` names, for every partition, the instance last assigned
//!   it and a token unique to that assignment. A member writes it when partitions are assigned,
//!   *before* it reads where the lake ends ([`claim`]).
//! - A flush that holds records of Kafka partitions makes itself done (its flush record) only
//!   while the claims still name its tokens for all of those partitions, under an exclusive lock
//!   on `_silt/imports/kafka-claims.lock` held from the check until the record is renamed into
//!   place ([`Fence::hold`]). A flush that finds one of its partitions claimed by another
//!   assignment is fenced ([`Fenced`]): its files are removed and it is not recorded
//!   ([`crate::imports::Run::finish_fenced`]).
//!
//! Claims and fenced flushes serialise on the lock, so either the stalled member's flush was
//! recorded before the new claim (and the new owner, reading positions after claiming, resumes
//! after it), or the flush sees the new claim and gives up. This needs a file system whose
//! `flock` all members share (one host, or a network file system that supports it).
//!
//! On an object-store lake ([`claim_in`], [`Fence::hold_in`]) the claims are the object
//! `_silt/imports/kafka-claims.json`, and the lock is a lease on
//! `_silt/imports/kafka-claims.lock` ([`crate::remote::lock::RemoteLock::lease`]: a conditional
//! create, renewed while held, taken over once its holder has not renewed it for
//! [`crate::remote::record::STALE`]). A member stalled for longer than that *inside* the few
//! requests between its check and its flush record can still record a flush after another
//! member claimed the partition; anywhere else it is fenced as on a local lake.
//!
//! Touches only `<lake>/_silt/imports/kafka-claims.*`.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::imports::IMPORTS_DIR;
use crate::publish;
use crate::remote::lock::RemoteLock;
use crate::remote::{LakeRoot, RemoteLake};

const CLAIMS: &str = "kafka-claims.json";
const LOCK: &str = "kafka-claims.lock";

/// One partition's current owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The `--instance` name of the member (empty for the unnamed instance).
    pub instance: String,
    /// Unique to the assignment that made the claim.
    pub token: String,
    /// When it was claimed (RFC 3339).
    pub at: String,
}

/// Every partition's claim, by topic and partition.
pub type Claims = BTreeMap<String, BTreeMap<i32, Claim>>;

/// The lake's claims as they are now (empty when no member ever claimed a partition).
pub fn read(root: &Path) -> anyhow::Result<Claims> {
    let p = root.join(IMPORTS_DIR).join(CLAIMS);
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b).with_context(|| {
            format!(
                "{} is not a claims file silt wrote; remove it only when no silt serve runs on the lake",
                p.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Claims::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
    }
}

/// Takes the lock every claim and fenced flush holds (blocking until it is free).
fn lock(root: &Path) -> anyhow::Result<File> {
    let dir = root.join(IMPORTS_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let p = dir.join(LOCK);
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .with_context(|| format!("cannot open {}", p.display()))?;
    f.lock()
        .with_context(|| format!("cannot lock {}", p.display()))?;
    Ok(f)
}

/// Claims `partitions` for `instance` (a new assignment); returns the assignment's token, which
/// its flushes present to [`Fence::hold`].
pub fn claim(root: &Path, instance: &str, partitions: &[(String, i32)]) -> anyhow::Result<String> {
    let token = crate::imports::new_run_id();
    if partitions.is_empty() {
        return Ok(token);
    }
    let _held = lock(root)?;
    let mut claims = read(root)?;
    insert(&mut claims, instance, &token, partitions);
    let path = root.join(IMPORTS_DIR).join(CLAIMS);
    publish::write_atomic(&path, &serde_json::to_vec_pretty(&claims)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(token)
}

/// Records `partitions` as claimed by `instance` with `token`, now.
fn insert(claims: &mut Claims, instance: &str, token: &str, partitions: &[(String, i32)]) {
    let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    for (topic, p) in partitions {
        claims.entry(topic.clone()).or_default().insert(
            *p,
            Claim {
                instance: instance.to_string(),
                token: token.to_string(),
                at: at.clone(),
            },
        );
    }
}

/// [`claim`] in the lake `root` names: a directory, or an object store (see the module
/// documentation).
pub fn claim_in(
    root: &LakeRoot,
    instance: &str,
    partitions: &[(String, i32)],
) -> anyhow::Result<String> {
    let lake = match root {
        LakeRoot::Dir(d) => return claim(d, instance, partitions),
        LakeRoot::Remote(r) => r,
    };
    let token = crate::imports::new_run_id();
    if partitions.is_empty() {
        return Ok(token);
    }
    let _held = remote_lock(lake)?;
    let mut claims = remote_read(lake)?;
    insert(&mut claims, instance, &token, partitions);
    lake.put(&claims_rel(), serde_json::to_vec_pretty(&claims)?)
        .context("cannot write the Kafka partition claims")?;
    Ok(token)
}

fn claims_rel() -> String {
    format!("{IMPORTS_DIR}/{CLAIMS}")
}

/// An object-store lake's claims as they are now.
fn remote_read(lake: &RemoteLake) -> anyhow::Result<Claims> {
    match lake.get(&claims_rel())? {
        None => Ok(Claims::new()),
        Some(b) => serde_json::from_slice(&b).with_context(|| {
            format!(
                "{}/{} is not a claims file silt wrote; remove it only when no silt serve runs on the lake",
                lake.url(),
                claims_rel()
            )
        }),
    }
}

/// How long taking an object-store lake's claims lease may wait: past the time after which a
/// holder that died is taken over.
const LEASE_WAIT: Duration = Duration::from_secs(crate::remote::record::STALE.as_secs() + 30);

/// Takes the claims lease of an object-store lake, waiting while another member holds it.
fn remote_lock(lake: &Arc<RemoteLake>) -> anyhow::Result<RemoteLock> {
    let key = format!("{IMPORTS_DIR}/{LOCK}");
    let t0 = Instant::now();
    loop {
        match RemoteLock::lease(lake, &key, "silt serve (Kafka partition claims)")? {
            Ok(l) => return Ok(l),
            Err(holder) if t0.elapsed() >= LEASE_WAIT => anyhow::bail!(
                "cannot take {}/{key}: {holder} has held it for over {}s",
                lake.url(),
                LEASE_WAIT.as_secs()
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// What a flush presents: for each Kafka partition it holds records of, the token of the
/// assignment those records were read under (`None` when this member never claimed it).
#[derive(Debug, Clone, Default)]
pub struct Fence {
    pub partitions: Vec<(String, i32, Option<String>)>,
}

/// A flush's partition was claimed by another assignment since its records were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fenced {
    pub topic: String,
    pub partition: i32,
    /// The claim that holds the partition now (`None`: nobody claimed it).
    pub now: Option<Claim>,
}

impl std::fmt::Display for Fenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fenced: {}[{}] ", self.topic, self.partition)?;
        match &self.now {
            Some(c) => write!(
                f,
                "was assigned to {} at {} while this member held records of it (this member stalled past the group's session timeout or poll interval)",
                if c.instance.is_empty() {
                    "the unnamed instance (no --instance)".to_string()
                } else {
                    format!("instance {:?}", c.instance)
                },
                c.at
            ),
            None => write!(f, "was never claimed by this member"),
        }
    }
}

impl std::error::Error for Fenced {}

/// The claims lock, held while a fenced flush makes itself done.
#[derive(Debug)]
pub struct Held {
    _lock: Option<File>,
    _lease: Option<RemoteLock>,
}

impl Fence {
    /// Takes the claims lock and checks every partition is still claimed with the token
    /// presented; the lock is held until the returned [`Held`] is dropped. A fence without
    /// partitions takes no lock. Fails with [`Fenced`] (downcast the error) when a claim moved.
    pub fn hold(&self, root: &Path) -> anyhow::Result<Held> {
        if self.partitions.is_empty() {
            return Ok(Held {
                _lock: None,
                _lease: None,
            });
        }
        let f = lock(root)?;
        self.check(&read(root)?)?;
        Ok(Held {
            _lock: Some(f),
            _lease: None,
        })
    }

    /// [`Fence::hold`] in the lake `root` names: a directory, or an object store (see the module
    /// documentation).
    pub fn hold_in(&self, root: &LakeRoot) -> anyhow::Result<Held> {
        let lake = match root {
            LakeRoot::Dir(d) => return self.hold(d),
            LakeRoot::Remote(r) => r,
        };
        if self.partitions.is_empty() {
            return Ok(Held {
                _lock: None,
                _lease: None,
            });
        }
        let lease = remote_lock(lake)?;
        self.check(&remote_read(lake)?)?;
        Ok(Held {
            _lock: None,
            _lease: Some(lease),
        })
    }

    /// [`Fenced`] unless every partition is claimed with the token presented.
    fn check(&self, claims: &Claims) -> anyhow::Result<()> {
        for (topic, partition, token) in &self.partitions {
            let now = claims.get(topic).and_then(|m| m.get(partition));
            if token.is_none() || now.map(|c| &c.token) != token.as_ref() {
                return Err(Fenced {
                    topic: topic.clone(),
                    partition: *partition,
                    now: now.cloned(),
                }
                .into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(ps: &[i32]) -> Vec<(String, i32)> {
        ps.iter().map(|p| ("ids".to_string(), *p)).collect()
    }

    fn fence(ps: &[i32], token: &str) -> Fence {
        Fence {
            partitions: ps
                .iter()
                .map(|p| ("ids".to_string(), *p, Some(token.to_string())))
                .collect(),
        }
    }

    #[test]
    fn a_flush_passes_while_its_claims_stand_and_is_fenced_once_another_member_claims() {
        let d = tempfile::tempdir().unwrap();
        let a = claim(d.path(), "a", &parts(&[0, 1, 2])).unwrap();
        drop(fence(&[0, 2], &a).hold(d.path()).unwrap());
        // Member b takes partition 1 (a stalled past its session).
        let b = claim(d.path(), "b", &parts(&[1])).unwrap();
        assert_ne!(a, b);
        drop(fence(&[0, 2], &a).hold(d.path()).unwrap());
        let e = fence(&[0, 1], &a).hold(d.path()).unwrap_err();
        let f = e.downcast_ref::<Fenced>().expect("a Fenced error");
        assert_eq!((f.topic.as_str(), f.partition), ("ids", 1));
        assert_eq!(f.now.as_ref().unwrap().instance, "b");
        assert!(e.to_string().contains("instance \"b\""), "{e}");
        drop(fence(&[1], &b).hold(d.path()).unwrap());
        // A partition this member never claimed, or one nobody claimed, is fenced too.
        let never = Fence {
            partitions: vec![("ids".into(), 0, None)],
        };
        assert!(never.hold(d.path()).unwrap_err().is::<Fenced>());
        assert!(fence(&[7], &a).hold(d.path()).unwrap_err().is::<Fenced>());
        // No partitions: nothing to check, no lock taken.
        Fence::default().hold(d.path()).unwrap();
    }

    #[test]
    fn a_claim_waits_for_a_flush_that_holds_the_lock() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        let a = claim(&root, "a", &parts(&[0])).unwrap();
        let held = fence(&[0], &a).hold(&root).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let r2 = root.clone();
        let t = std::thread::spawn(move || {
            let b = claim(&r2, "b", &parts(&[0])).unwrap();
            tx.send(b).unwrap();
        });
        // flock excludes other open files of this process as it does other processes.
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(300))
            .is_err());
        // The flush that holds the lock still sees its own claim.
        assert_eq!(read(&root).unwrap()["ids"][&0].token, a);
        drop(held);
        let b = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        t.join().unwrap();
        assert_eq!(read(&root).unwrap()["ids"][&0].token, b);
        assert!(fence(&[0], &a).hold(&root).is_err());
    }

    /// The same rules in an object store, with the lease for the lock.
    #[test]
    fn claims_in_an_object_store_fence_as_in_a_directory() {
        let store = object_store::memory::InMemory::new();
        let lake = Arc::new(
            RemoteLake::with_store("s3://b/p", "b".into(), "p".into(), Arc::new(store)).unwrap(),
        );
        let root = LakeRoot::Remote(lake.clone());
        let a = claim_in(&root, "a", &parts(&[0, 1])).unwrap();
        drop(fence(&[0, 1], &a).hold_in(&root).unwrap());
        let held = fence(&[0], &a).hold_in(&root).unwrap();
        // A claim waits while a flush holds the lease.
        let (tx, rx) = std::sync::mpsc::channel();
        let r2 = root.clone();
        let t = std::thread::spawn(move || tx.send(claim_in(&r2, "b", &parts(&[1])).unwrap()));
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(300))
            .is_err());
        drop(held);
        let b = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        t.join().unwrap().unwrap();
        drop(fence(&[0], &a).hold_in(&root).unwrap());
        let e = fence(&[0, 1], &a).hold_in(&root).unwrap_err();
        assert_eq!(
            e.downcast_ref::<Fenced>()
                .unwrap()
                .now
                .as_ref()
                .unwrap()
                .instance,
            "b"
        );
        drop(fence(&[1], &b).hold_in(&root).unwrap());
        // No lease is left behind.
        assert!(!lake.exists(&format!("{IMPORTS_DIR}/{LOCK}")).unwrap());
    }

    #[test]
    fn a_damaged_claims_file_is_an_error_that_names_it() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join(IMPORTS_DIR)).unwrap();
        std::fs::write(d.path().join(IMPORTS_DIR).join(CLAIMS), b"{not json").unwrap();
        let e = claim(d.path(), "a", &parts(&[0])).unwrap_err();
        assert!(format!("{e:#}").contains(CLAIMS), "{e:#}");
    }
}
