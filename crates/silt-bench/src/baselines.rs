//! Goal 3: DuckDB and pyarrow writing the same rows as silt to Parquet (zstd level 1, their
//! defaults otherwise), via `bench/baselines.py`.
//!
//! Each table's rows, as silt's writer got them (sorted by time), are exported once as an
//! uncompressed Arrow IPC file; the script loads it untimed and times only the Parquet write,
//! after one untimed warm-up write, `--repetitions` times per tool (median kept, as for silt).
//! The run calls it for each table right after silt's own Parquet zstd:1 writes of that table,
//! so that on a shared machine silt and the baselines are timed close together, not a whole
//! matrix apart.
//! The script is compiled into the binary (`include_str!`) and written next to the exports, so
//! `silt bench --baselines` works from any directory. Python comes from `--python`, else
//! `scripts/pyenv.sh` (the project's venv with duckdb and pyarrow) when it can be found, else
//! `python3` if it imports both; without one the baselines are skipped with a message.
//! Touches only `<out>/baselines/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use arrow::ipc::writer::FileWriter;
use serde::{Deserialize, Serialize};

use crate::measure::Prepared;

/// The script, embedded.
pub const SCRIPT: &str = include_str!("../../../bench/baselines.py");

/// One baseline measurement (or its error).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct BaselineResult {
    pub schema: String,
    pub tool: String,
    #[serde(default)]
    pub rows: u64,
    #[serde(default)]
    pub output_bytes: u64,
    #[serde(default)]
    pub wall_s: f64,
    /// Median over the repetitions (as `wall_s`).
    #[serde(default)]
    pub cpu_s: f64,
    /// Every repetition's CPU seconds (`;`-separated in `baselines.csv`).
    #[serde(default, serialize_with = "semicolons")]
    pub cpu_s_each: Vec<f64>,
    #[serde(default)]
    pub repetitions: u32,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub error: Option<String>,
    /// The file the tool wrote (read for its per-column sizes, then removed unless
    /// `--keep-files`); not a `baselines.csv` column.
    #[serde(default, skip_serializing)]
    pub file: Option<String>,
}

fn semicolons<S: serde::Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
    let parts: Vec<String> = v.iter().map(|x| format!("{x:.6}")).collect();
    s.serialize_str(&parts.join(";"))
}

/// Exports `p`'s sorted rows as an uncompressed Arrow IPC file.
pub fn export_ipc(p: &Prepared, path: &Path) -> anyhow::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let mut w = FileWriter::try_new(std::fs::File::create(path)?, &p.schema)?;
    for b in &p.sorted {
        w.write(b)?;
    }
    w.finish()?;
    Ok(())
}

/// Finds a Python with duckdb and pyarrow, or says why there is none.
pub fn find_python(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let imports = |py: &Path| {
        Command::new(py)
            .args(["-c", "import duckdb, pyarrow"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if let Some(p) = explicit {
        return if imports(p) {
            Ok(p.to_path_buf())
        } else {
            Err(format!("{} cannot import duckdb and pyarrow", p.display()))
        };
    }
    let candidates = [
        PathBuf::from("scripts/pyenv.sh"),
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/pyenv.sh"
        )),
    ];
    for c in candidates.iter().filter(|c| c.is_file()) {
        if let Ok(o) = Command::new("bash").arg(c).output() {
            let py = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if o.status.success() && !py.is_empty() && imports(Path::new(&py)) {
                return Ok(PathBuf::from(py));
            }
        }
    }
    if imports(Path::new("python3")) {
        return Ok(PathBuf::from("python3"));
    }
    Err("no python with duckdb and pyarrow (run scripts/pyenv.sh or pass --python)".into())
}

/// Runs the script over the exported tables: `(schema, ipc path)`, each tool writing each
/// table `repetitions` times.
pub fn run(
    python: &Path,
    dir: &Path,
    tables: &[(String, PathBuf)],
    repetitions: u32,
) -> anyhow::Result<Vec<BaselineResult>> {
    std::fs::create_dir_all(dir)?;
    let script = dir.join("baselines.py");
    std::fs::write(&script, SCRIPT)?;
    let manifest: Vec<serde_json::Value> = tables
        .iter()
        .map(|(s, ipc)| {
            serde_json::json!({
                "schema": s,
                "ipc": ipc,
                "out_dir": dir.join(s),
                "repetitions": repetitions.max(1),
            })
        })
        .collect();
    let mpath = dir.join("manifest.json");
    std::fs::write(&mpath, serde_json::to_vec(&manifest)?)?;
    let o = Command::new(python).arg(&script).arg(&mpath).output()?;
    anyhow::ensure!(
        o.status.success(),
        "baselines.py failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(serde_json::from_slice(&o.stdout)?)
}
