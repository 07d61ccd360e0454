//! `silt ddl`: prints a CREATE statement for a lake table (built by `silt_lake::ddl`).

use silt_core::TableName;
use silt_lake::ddl::{self, DdlOptions, Dialect};

use crate::cli::{DdlArgs, DdlDialect};

pub fn run(a: DdlArgs) -> anyhow::Result<i32> {
    let table = TableName::parse(&a.table).ok_or_else(|| {
        anyhow::anyhow!(
            "{:?} is not a table name: use module.type, e.g. zeek.conn",
            a.table
        )
    })?;
    let dialect = match a.dialect {
        DdlDialect::Athena => Dialect::Athena,
        DdlDialect::Trino => Dialect::Trino,
        DdlDialect::Spark => Dialect::Spark,
        DdlDialect::Duckdb => Dialect::DuckDb,
    };
    let layout = match silt_lake::remote::LakeRoot::open(&a.lake)? {
        silt_lake::remote::LakeRoot::Dir(d) => ddl::table_layout(&d, &table)?,
        remote => ddl::table_layout_in(&remote, &table)?,
    };
    for (path, why) in &layout.damaged {
        eprintln!(
            "warning: {} is not readable ({why}): left out of the columns (queries skip it too); \
             move it out of the lake or restore it",
            path.display()
        );
    }
    let sql = ddl::create_statement(
        &layout,
        &DdlOptions {
            dialect,
            location: a.location,
            name: a.name,
        },
    )?;
    print!("{sql}");
    Ok(0)
}
