//! `results.csv`: one row per written file (schema × configuration × repetition), the study's
//! columns plus the read path. Written and read with the `csv` crate (serde), so others can
//! load it with any tool. Definitions:
//!
//! - `arrow_bytes`: sum of `RecordBatch::get_array_memory_size` of the rows written;
//! - `input_bytes`: decompressed input bytes of those rows (the readers' `Emit::table_bytes`,
//!   scaled when `capped`); empty for tables loaded from a lake;
//! - `bytes_per_event = output_bytes / events`; `ratio_vs_input = input_bytes / output_bytes`;
//!   `ratio_vs_arrow = arrow_bytes / output_bytes`;
//! - `write_cpu_s`: process CPU seconds (see [`crate::cpu`]); `ns_per_event = write_cpu_s ×
//!   1e9 / events`; `wall_ns_per_event` the same with wall time;
//! - `read_<q>_s`, `read_<q>_bytes`: wall seconds and bytes read by query `q` (see
//!   [`crate::readpath`]); `read_<q>_value`: rows (scan), count (filter, needle), groups (topn).
//!
//! Touches only the CSV file it writes or reads.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One written file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub schema: String,
    pub store: String,
    pub codec: String,
    pub level: Option<i32>,
    pub row_group_size: u64,
    pub variant: String,
    pub config: String,
    pub repetition: u32,
    pub events: u64,
    pub events_seen: u64,
    pub capped: bool,
    pub batches: u64,
    pub arrow_bytes: u64,
    pub input_bytes: Option<u64>,
    pub output_bytes: u64,
    pub bytes_per_event: f64,
    pub ratio_vs_input: Option<f64>,
    pub ratio_vs_arrow: f64,
    pub write_cpu_s: f64,
    pub write_wall_s: f64,
    pub ns_per_event: f64,
    pub wall_ns_per_event: f64,
    pub read_scan_s: Option<f64>,
    pub read_scan_bytes: Option<u64>,
    pub read_scan_value: Option<u64>,
    pub read_filter_s: Option<f64>,
    pub read_filter_bytes: Option<u64>,
    pub read_filter_value: Option<u64>,
    pub read_topn_s: Option<f64>,
    pub read_topn_bytes: Option<u64>,
    pub read_topn_value: Option<u64>,
    pub read_topn_column: Option<String>,
    pub read_needle_s: Option<f64>,
    pub read_needle_bytes: Option<u64>,
    pub read_needle_value: Option<u64>,
    pub read_needle_column: Option<String>,
    /// Path of the file written (it exists after the run only with `--keep-files`).
    pub file: String,
}

impl Row {
    /// Fills the derived columns from the measured ones.
    pub fn derive(&mut self) {
        let ev = self.events.max(1) as f64;
        let out = self.output_bytes.max(1) as f64;
        self.bytes_per_event = self.output_bytes as f64 / ev;
        self.ratio_vs_input = self.input_bytes.map(|i| i as f64 / out);
        self.ratio_vs_arrow = self.arrow_bytes as f64 / out;
        self.ns_per_event = self.write_cpu_s * 1e9 / ev;
        self.wall_ns_per_event = self.write_wall_s * 1e9 / ev;
    }
}

pub fn write_csv(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_path(path)?;
    for r in rows {
        w.serialize(r)?;
    }
    w.flush()?;
    Ok(())
}

pub fn read_csv(path: &Path) -> anyhow::Result<Vec<Row>> {
    let mut r = csv::Reader::from_path(path)?;
    let mut out = Vec::new();
    for row in r.deserialize() {
        out.push(row?);
    }
    Ok(out)
}

/// The median of some values (the mean of the middle two for an even count); `None` if empty.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_roundtrip_and_median() {
        let mut r = Row {
            schema: "zeek.conn".into(),
            events: 4,
            output_bytes: 100,
            arrow_bytes: 400,
            input_bytes: Some(800),
            write_cpu_s: 2e-6,
            ..Default::default()
        };
        r.derive();
        assert_eq!(r.bytes_per_event, 25.0);
        assert_eq!(r.ratio_vs_input, Some(8.0));
        assert_eq!(r.ratio_vs_arrow, 4.0);
        assert!((r.ns_per_event - 500.0).abs() < 1e-9);
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.csv");
        write_csv(&p, std::slice::from_ref(&r)).unwrap();
        assert_eq!(read_csv(&p).unwrap(), vec![r]);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}
