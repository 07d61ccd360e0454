//! `silt retain` and `silt vacuum` on an object-store lake.
//!
//! Retention chooses partitions as [`crate::retain`] does (by the partition's time, whole days
//! first, never the null partition, never one an import in flight writes into), from one listing
//! of each table. An object store cannot move a partition away in one step, so each partition
//! is dropped with a drop record ([`super::replace`]): the record is written, then the
//! partition's objects are deleted in bulk; silt's readers leave the whole partition out from the
//! record on, other engines' globs see its objects go one request at a time.
//!
//! Vacuum removes what dead imports uploaded, finishes or undoes replacements and drops a crash
//! left, removes records past the grace period, and removes a Delta table's data files that its
//! log does not name once they are older than the grace period. An object store holds no
//! temporary files (an upload that never completed is not an object) and no empty directories.
//!
//! A Delta table's log ([`crate::delta`]) stops naming a partition's files in one commit before
//! the partition's drop record is written.
//!
//! Touches the objects of dropped partitions, `<table>/_delta_log/`, `_silt/drop/`, `_silt/replace/`,
//! `_silt/imports/`, `_silt/maintenance.lock` and, for a table it empties,
//! `_silt/tables/<table>.schema.arrow` ([`crate::emptied`]) below the lake's prefix.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context;

use silt_core::TableName;

use super::file::RemoteFile;
use super::lock::RemoteLock;
use super::record::RemoteImportLog;
use super::replace;
use super::RemoteLake;
use crate::emptied;
use crate::replace::{failpoint, RECORD_GRACE};
use crate::retain::{self, Candidate, Dropped, RetainObserver, RetainOptions, RetainReport};
use crate::vacuum::{VacuumOptions, VacuumReport};

/// Drops what is past each table's window (see the module documentation).
pub fn retain(
    lake: &Arc<RemoteLake>,
    opts: &RetainOptions,
    now: SystemTime,
) -> anyhow::Result<RetainReport> {
    retain_with(lake, opts, now, &mut ())
}

/// [`retain`], telling `obs` of each partition's path (below [`RemoteLake::root_path`]) once its
/// drop record is written and before its objects are deleted (a server takes the partition's
/// files out of its index there), and asking it before each partition whether to stop, as
/// [`crate::retain::retain_with`] does.
pub fn retain_with(
    lake: &Arc<RemoteLake>,
    opts: &RetainOptions,
    now: SystemTime,
    obs: &mut dyn RetainObserver,
) -> anyhow::Result<RetainReport> {
    let lock = RemoteLock::acquire(lake, "silt retain")?;
    if !opts.dry_run {
        replace::recover(&lock, RECORD_GRACE)?;
    }
    let mut report = RetainReport::default();
    let tables = lake.tables()?;
    retain::check_tables(opts, &tables, lake.url())?;
    for table in tables {
        let Some(cutoff) = retain::cutoff(opts, &table, now) else {
            continue;
        };
        let prefix = format!("{table}/");
        // Files and bytes per partition (relative to the table), days and their hours.
        let mut sizes: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        let mut unpartitioned = false;
        for o in lake.list(&table.to_string())? {
            let Some(rel) = o.rel.strip_prefix(&prefix) else {
                continue;
            };
            let parts: Vec<&str> = rel.split('/').collect();
            if parts.iter().any(|c| crate::layout::is_hidden(c)) {
                continue;
            }
            if parts.len() == 1 {
                unpartitioned |= crate::config::StoreKind::from_path(rel.as_ref()).is_some();
                continue;
            }
            for depth in 1..parts.len().min(3) {
                let p = parts[..depth].join("/");
                if retain::partition_end(&p).is_some() {
                    let e = sizes.entry(p).or_default();
                    e.0 += 1;
                    e.1 += o.size;
                }
            }
        }
        if unpartitioned && sizes.is_empty() {
            report.not_partitioned.push(table.clone());
            continue;
        }
        let cands: Vec<Candidate> = sizes
            .keys()
            .filter_map(|rel| {
                Some(Candidate {
                    rel: rel.clone(),
                    end_us: retain::partition_end(rel)?,
                })
            })
            .collect();
        let in_flight: HashSet<String> = RemoteImportLog::new(lake.clone()).in_flight()?;
        let (drop, busy) = retain::choose(cands, cutoff, &mut |rel| {
            retain::journaled(&in_flight, &table, rel)
        });
        report
            .busy
            .extend(busy.into_iter().map(|rel| (table.clone(), rel)));
        if !opts.dry_run && !drop.is_empty() {
            keep_schema_if_emptied(lake, &table, &drop)?;
        }
        for rel in drop {
            let (files, bytes) = sizes.get(&rel).copied().unwrap_or_default();
            if !opts.dry_run {
                if obs.cancelled() {
                    report.stopped = true;
                    return Ok(report);
                }
                lock.check()?;
                let partition = format!("{table}/{rel}");
                // A Delta table's log stops naming the files first.
                crate::delta::remove_partition(
                    crate::delta::Lake::Remote(lake),
                    &table.to_string(),
                    &rel,
                    "silt retain",
                )?;
                let record = replace::record_drop(lake, &table.to_string(), &partition)?;
                failpoint("retain-recorded");
                // Only what was there when the record was written (by the store's clock): an
                // import into the same partition later keeps its files. The time comes from a
                // listing, as readers and recovery take it: a GET's Last-Modified header has
                // whole seconds, and would leave what was uploaded in the record's second.
                let at = lake
                    .list(replace::DROP_DIR)?
                    .into_iter()
                    .find(|o| o.rel == record)
                    .with_context(|| format!("the drop record {record} vanished"))?
                    .modified;
                obs.before_drop(&lake.root_path().join(&partition));
                replace::delete_partition(lake, &partition, at)?;
            }
            report.dropped.push(Dropped {
                table: table.clone(),
                partition: rel,
                files,
                bytes,
            });
        }
    }
    Ok(report)
}

/// Keeps the table's schema ([`crate::emptied`], uploaded as one object) when dropping the
/// partitions `drop` leaves it without any data file.
fn keep_schema_if_emptied(
    lake: &Arc<RemoteLake>,
    table: &TableName,
    drop: &[String],
) -> anyhow::Result<()> {
    let files = lake.data_files(table)?;
    let dropped = |f: &crate::layout::DataFile| {
        lake.rel_of(&f.path).is_ok_and(|rel| {
            drop.iter()
                .any(|d| rel.starts_with(&format!("{table}/{d}/")))
        })
    };
    if files.is_empty() || !files.iter().all(dropped) {
        return Ok(());
    }
    let schemas: Vec<_> = files
        .iter()
        .filter_map(|f| {
            let rf = RemoteFile::new(lake.clone(), lake.key_of(&f.path).ok()?, f.bytes);
            emptied::file_schema(f.store, rf, |rf| rf.reader()).ok()
        })
        .collect();
    if schemas.is_empty() {
        return Ok(());
    }
    let month = drop.iter().any(|rel| rel.starts_with("month="));
    let bytes = emptied::encode(&silt_core::schema::unify_all(&schemas), month)?;
    lake.put(&emptied::rel(table), bytes)
}

/// Vacuums an object-store lake (see the module documentation); with `opts.dry_run`, reports
/// what it would do and changes nothing.
pub fn vacuum(lake: &Arc<RemoteLake>, opts: &VacuumOptions) -> anyhow::Result<VacuumReport> {
    let lock = RemoteLock::acquire(lake, "silt vacuum")?;
    let mut rep = VacuumReport::default();
    let r = RemoteImportLog::new(lake.clone()).recover_or_survey(opts.dry_run)?;
    rep.dead_imports = r.runs.len();
    rep.dead_import_files = r.files;
    let (replacements, drops) = replace::recover_or_survey(&lock, opts.grace, opts.dry_run)?;
    rep.replacements = replacements;
    rep.trash = drops.finished + drops.expired;
    // Data files of Delta tables that their logs do not name (a run that died after its upload
    // and before its commit, whose journal is gone), past the grace period.
    let in_flight = RemoteImportLog::new(lake.clone()).in_flight()?;
    let now = SystemTime::now();
    for table in lake.tables()? {
        let delta = crate::delta::Lake::Remote(lake);
        let Some(unref) = crate::delta::unreferenced(delta, &table.to_string())? else {
            continue;
        };
        let unref: HashSet<String> = unref.into_iter().collect();
        for (f, at) in lake.data_files_listed(&table)? {
            let rel = lake.rel_of(&f.path)?;
            let young = now.duration_since(at).unwrap_or_default() < opts.grace;
            if !unref.contains(&rel) || in_flight.contains(&rel) || young {
                continue;
            }
            lock.check()?;
            rep.unreferenced += 1;
            rep.unreferenced_bytes += f.bytes;
            if !opts.dry_run {
                lake.delete(&rel)?;
            }
        }
    }
    drop(lock);
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::compact::tests::{lake, parquet, values};
    use std::time::Duration;

    fn at(date: &str, hour: u64) -> SystemTime {
        let d = crate::layout::parse_date(date).unwrap() as u64;
        SystemTime::UNIX_EPOCH + Duration::from_secs(d * 86400 + hour * 3600)
    }

    #[test]
    fn past_partitions_go_and_readers_never_see_half_of_one() {
        let lake = lake();
        let mut v = 0;
        for p in [
            "dt=2024-01-01/hour=23/a.parquet",
            "dt=2024-01-02/hour=00/b.parquet",
            "dt=2024-01-02/hour=05/c.parquet",
            "dt=2024-01-02/hour=06/d.parquet",
            "dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__/n.parquet",
        ] {
            lake.put(&format!("t.x/{p}"), parquet(v..v + 10)).unwrap();
            v += 10;
        }
        lake.put("flat.t/x.parquet", parquet(0..1)).unwrap();
        // An import in flight has journaled a file of hour 00: that hour stays for now.
        lake.put(
            "_silt/imports/r1.journal",
            serde_json::to_vec(&serde_json::json!({
                "run": "r1", "host": "elsewhere", "pid": 1,
                "files": ["t.x/dt=2024-01-02/hour=00/b.parquet"]
            }))
            .unwrap(),
        )
        .unwrap();
        let opts = RetainOptions {
            keep: Some(Duration::from_secs(2 * 86400)),
            ..Default::default()
        };
        let rep = retain(&lake, &opts, at("2024-01-04", 6)).unwrap();
        let got: Vec<String> = rep
            .dropped
            .iter()
            .map(|d| format!("{}/{} {}", d.table, d.partition, d.files))
            .collect();
        assert_eq!(got, ["t.x/dt=2024-01-01 1", "t.x/dt=2024-01-02/hour=05 1"]);
        assert_eq!(rep.busy.len(), 1, "{:?}", rep.busy);
        assert_eq!(rep.not_partitioned.len(), 1);
        let (vals, files) = values(&lake, "t.x");
        assert_eq!(files, 3);
        assert_eq!(vals.len(), 30);
        assert!(!lake.exists("t.x/dt=2024-01-01/hour=23/a.parquet").unwrap());

        // A retention that died after its record: readers already leave the partition out,
        // a file written into it later stays visible, and vacuum finishes the job.
        let rec = replace::record_drop(&lake, "t.x", "t.x/dt=2024-01-02/hour=06").unwrap();
        assert_eq!(values(&lake, "t.x").1, 2);
        std::thread::sleep(Duration::from_millis(20));
        lake.put("t.x/dt=2024-01-02/hour=06/late.parquet", parquet(100..101))
            .unwrap();
        assert_eq!(values(&lake, "t.x").1, 3);
        lake.delete("_silt/imports/r1.journal").unwrap();
        let dry = VacuumOptions {
            dry_run: true,
            ..Default::default()
        };
        assert_eq!(vacuum(&lake, &dry).unwrap().trash, 1);
        assert!(lake.exists("t.x/dt=2024-01-02/hour=06/d.parquet").unwrap());
        let v = vacuum(&lake, &VacuumOptions::default()).unwrap();
        assert_eq!(v.trash, 1);
        assert!(!lake.exists("t.x/dt=2024-01-02/hour=06/d.parquet").unwrap());
        assert!(lake
            .exists("t.x/dt=2024-01-02/hour=06/late.parquet")
            .unwrap());
        assert!(lake.exists(&rec).unwrap(), "kept for the grace period");
        let v = vacuum(
            &lake,
            &VacuumOptions {
                grace: Duration::ZERO,
                dry_run: false,
            },
        )
        .unwrap();
        // This record and the two of the retention above.
        assert_eq!(v.trash, 3);
        assert!(!lake.exists(&rec).unwrap());
        assert!(lake.list(replace::DROP_DIR).unwrap().is_empty());
    }

    #[test]
    fn a_stop_between_partitions_leaves_the_rest_for_the_next_run() {
        let lake = lake();
        let days = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-09"];
        for (i, day) in days.iter().enumerate() {
            let v = i as i64 * 10;
            lake.put(
                &format!("t.x/dt={day}/hour=00/a.parquet"),
                parquet(v..v + 10),
            )
            .unwrap();
        }
        let opts = RetainOptions {
            keep: Some(Duration::from_secs(86400)),
            ..Default::default()
        };
        let now = at("2024-01-09", 6);
        let mut obs = crate::retain::tests::StopAfter {
            after: 1,
            seen: Vec::new(),
        };
        let rep = retain_with(&lake, &opts, now, &mut obs).unwrap();
        assert!(rep.stopped);
        assert_eq!(obs.seen, [lake.root_path().join("t.x/dt=2024-01-01")]);
        assert_eq!(values(&lake, "t.x"), ((10..40).collect(), 3));

        let rep = retain(&lake, &opts, now).unwrap();
        assert!(!rep.stopped);
        let got: Vec<&str> = rep.dropped.iter().map(|d| d.partition.as_str()).collect();
        assert_eq!(got, ["dt=2024-01-02", "dt=2024-01-03"]);
        assert_eq!(values(&lake, "t.x"), ((30..40).collect(), 1));
    }
}
