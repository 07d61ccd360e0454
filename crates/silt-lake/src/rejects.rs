//! Rejected input, kept so nothing is silently dropped.
//!
//! Each import run that rejects anything writes one NDJSON file
//! `<lake>/_rejects/dt=YYYY-MM-DD/<unique>.ndjson` (date of the import), one object per rejected
//! line: `{"source", "line", "table", "reason", "raw"}`, plus `raw_base64` when the raw bytes are
//! not UTF-8 (then `raw` holds a lossy rendering). The file is written under a hidden temp name
//! and published atomically (fsync, rename) when the run ends or when the writer commits
//! ([`RejectWriter::finish`]); the next reject then starts a new file, so a long-running server
//! publishes its rejects as it goes. `_rejects` is not a table.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use silt_core::Reject;

use crate::{layout, publish};

/// Directory under the lake root that holds rejects.
pub const REJECTS_DIR: &str = "_rejects";

/// Streams rejects to a file; memory use does not grow with their number.
pub struct RejectWriter {
    root: PathBuf,
    open: Option<(PathBuf, PathBuf, BufWriter<File>)>,
}

impl RejectWriter {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            open: None,
        }
    }

    pub fn write(&mut self, r: &Reject) -> anyhow::Result<()> {
        if self.open.is_none() {
            let date = chrono::Utc::now().format("%Y-%m-%d");
            let dir = self.root.join(REJECTS_DIR).join(format!("dt={date}"));
            std::fs::create_dir_all(&dir)?;
            let final_path = dir.join(layout::unique_file_name("ndjson"));
            let tmp = layout::temp_path(&final_path);
            let f = BufWriter::new(File::create(&tmp)?);
            self.open = Some((final_path, tmp, f));
        }
        let (_, _, f) = self.open.as_mut().expect("open");
        let mut obj = serde_json::Map::new();
        obj.insert("source".into(), r.source.clone().into());
        obj.insert("line".into(), r.line.into());
        obj.insert(
            "table".into(),
            r.table.as_ref().map(|t| t.to_string()).into(),
        );
        obj.insert("reason".into(), r.reason.clone().into());
        match std::str::from_utf8(&r.raw) {
            Ok(s) => {
                obj.insert("raw".into(), s.into());
            }
            Err(_) => {
                obj.insert(
                    "raw".into(),
                    String::from_utf8_lossy(&r.raw).into_owned().into(),
                );
                obj.insert(
                    "raw_base64".into(),
                    base64::engine::general_purpose::STANDARD
                        .encode(&r.raw)
                        .into(),
                );
            }
        }
        serde_json::to_writer(&mut *f, &serde_json::Value::Object(obj))?;
        f.write_all(b"\n")?;
        Ok(())
    }

    /// Publishes the rejects file written so far, if any, and returns its path; a later
    /// reject starts a new file.
    pub fn finish(&mut self) -> anyhow::Result<Option<PathBuf>> {
        let Some((final_path, tmp, f)) = self.open.take() else {
            return Ok(None);
        };
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &final_path)?;
        publish::sync_dir(final_path.parent().unwrap_or(Path::new(".")));
        Ok(Some(final_path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_ndjson_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = RejectWriter::new(dir.path());
        w.write(&Reject {
            source: "a.log".into(),
            line: 3,
            reason: "bad".into(),
            raw: vec![b'x', 0xff],
            table: None,
        })
        .unwrap();
        let p = w.finish().unwrap().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["line"], 3);
        assert_eq!(v["raw_base64"], "eP8=");
        assert!(p.starts_with(dir.path().join("_rejects")));
        // Finishing again publishes nothing; the next reject starts a second file.
        assert_eq!(w.finish().unwrap(), None);
        w.write(&Reject {
            source: "b.log".into(),
            line: 1,
            reason: "bad".into(),
            raw: b"y".to_vec(),
            table: None,
        })
        .unwrap();
        let q = w.finish().unwrap().unwrap();
        assert_ne!(p, q);
        assert!(std::fs::read_to_string(&q).unwrap().contains("b.log"));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
    }
}
