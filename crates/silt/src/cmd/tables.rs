//! `silt tables`: each table's rows, files, bytes and time range, from the files' footers.

use crate::cli::TablesArgs;

pub fn run(a: TablesArgs) -> anyhow::Result<i32> {
    crate::render::tables(&a.lake, a.json)?;
    Ok(0)
}
