//! `silt vacuum`: flags to `silt_lake::vacuum::VacuumOptions`, what was removed printed.

use std::time::SystemTime;

use silt_lake::summary::human_bytes;
use silt_lake::vacuum::{vacuum, VacuumOptions};

use crate::cli::VacuumArgs;

pub fn run(a: VacuumArgs) -> anyhow::Result<i32> {
    let opts = VacuumOptions {
        grace: a.grace,
        dry_run: a.dry_run,
    };
    let r = match silt_lake::remote::LakeRoot::open(&a.lake)? {
        silt_lake::remote::LakeRoot::Dir(d) => vacuum(&d, &opts, SystemTime::now())?,
        silt_lake::remote::LakeRoot::Remote(r) => silt_lake::remote::retain::vacuum(&r, &opts)?,
    };
    if a.json {
        let v = serde_json::json!({
            "dry_run": a.dry_run,
            "dead_imports": r.dead_imports, "dead_import_files": r.dead_import_files,
            "compactions_finished": r.replacements.completed,
            "replaced_files_removed": r.replacements.inputs_removed,
            "compactions_undone": r.replacements.abandoned,
            "records_expired": r.replacements.expired,
            "temp_files": r.temp_files, "temp_bytes": r.temp_bytes,
            "trash": r.trash, "empty_dirs": r.empty_dirs,
            "delta_unreferenced_files": r.unreferenced,
            "delta_unreferenced_bytes": r.unreferenced_bytes,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    let verb = if a.dry_run { "would remove" } else { "removed" };
    if r.dead_imports > 0 {
        println!(
            "{verb} {} file(s) of {} import(s) that died (import their inputs again; a server replays its log)",
            r.dead_import_files, r.dead_imports
        );
    }
    if r.unreferenced > 0 {
        println!(
            "{verb} {} file(s) ({}) of Delta tables that their logs do not name",
            r.unreferenced,
            human_bytes(r.unreferenced_bytes)
        );
    }
    let rp = &r.replacements;
    if rp.completed + rp.abandoned > 0 {
        let (finish, removed, undo) = if a.dry_run {
            ("would finish", "to remove", "would undo")
        } else {
            ("finished", "removed", "undid")
        };
        println!(
            "{finish} {} interrupted compaction(s) ({} replaced file(s) {removed}), {undo} {}",
            rp.completed, rp.inputs_removed, rp.abandoned
        );
    }
    println!(
        "{verb} {} temporary file(s) ({}), {} trash entr{}, {} empty director{}, {} old replacement record(s)",
        r.temp_files,
        human_bytes(r.temp_bytes),
        r.trash,
        if r.trash == 1 { "y" } else { "ies" },
        r.empty_dirs,
        if r.empty_dirs == 1 { "y" } else { "ies" },
        rp.expired
    );
    Ok(0)
}
