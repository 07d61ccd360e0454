//! `silt inspect FILE`: row groups, column chunks, encodings and statistics of one file.

use crate::cli::InspectArgs;

pub fn run(a: InspectArgs) -> anyhow::Result<i32> {
    let v = silt_lake::inspect::inspect(&a.file)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", silt_lake::inspect::render_text(&v));
    }
    Ok(0)
}
