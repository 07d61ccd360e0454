//! `silt ddl`: a CREATE statement that lets Athena, Trino, Spark or DuckDB read a lake table in
//! place.
//!
//! [`table_layout`] reads what the statement needs from the lake: the table's Arrow schema
//! (from every file's footer, unified with [`silt_core::schema::unify_schemas`] when files
//! differ), its partitioning (the lake's record) and its first and last `dt=` (or `month=`) value.
//! [`create_statement`] renders the statement for a dialect; it is a pure function of the layout
//! and the options, so the golden tests pin it down exactly. Rules (see docs/ddl.md):
//!
//! - name: `zeek.conn` becomes `zeek_conn` (a dot would read as `schema.table`), unless
//!   `--name [schema.]table` says otherwise; every identifier is quoted (backticks for
//!   Athena/Spark, double quotes for Trino/DuckDB);
//! - partition columns: `dt` string and `hour` int (Hive parses `hour=07` as 7; Athena's integer
//!   projection with 2 digits maps 7 back to `hour=07`), `dt` alone, or `month` string
//!   (`YYYY-MM`, projected by month), as the lake's record of the table says
//!   ([`crate::granularity`]); `__HIVE_DEFAULT_PARTITION__` is null;
//! - unsigned integers map to the next wider signed type, UInt64 to decimal(20,0) (what Spark
//!   itself infers for Parquet's unsigned types);
//! - Feather (Arrow IPC) tables: none of the four engines reads Arrow IPC files as a table, so
//!   every dialect refuses them with a message.
//!
//! This module only reads the lake directory (footers and directory names).

use std::fmt::Write;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::Context;
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use silt_core::TableName;

use crate::config::{Partitioning, StoreKind};
use crate::layout::NULL_PARTITION;
use crate::remote::LakeRoot;

/// The SQL dialect of the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Amazon Athena (Hive DDL, with partition projection).
    Athena,
    /// Trino's Hive connector.
    Trino,
    /// Spark SQL (a data source table, `USING PARQUET`).
    Spark,
    /// DuckDB (a view over `read_parquet`).
    DuckDb,
}

impl FromStr for Dialect {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "athena" => Ok(Dialect::Athena),
            "trino" | "presto" => Ok(Dialect::Trino),
            "spark" => Ok(Dialect::Spark),
            "duckdb" => Ok(Dialect::DuckDb),
            _ => Err(format!(
                "unknown dialect {s:?}: use athena, trino, spark or duckdb"
            )),
        }
    }
}

/// What the statement is built from: a table as it lies in the lake.
#[derive(Debug, Clone)]
pub struct TableLayout {
    pub table: TableName,
    /// The table's columns (unified over its files), without partition columns.
    pub schema: Schema,
    pub partitioning: Partitioning,
    /// The files' format (Feather when any file is Arrow IPC).
    pub store: StoreKind,
    /// First and last value of the top partition directories, `dt=` or `month=` (the null
    /// partition left out).
    pub dt_range: Option<(String, String)>,
    /// Absolute path of the lake directory.
    pub lake: PathBuf,
    /// The table has a Delta Lake log (`--table-format delta`): Spark reads it `USING DELTA`,
    /// Trino through its Delta Lake connector (`register_table`), Athena as `table_type DELTA`.
    pub delta: bool,
    /// The table has no data file (a retention emptied it; the schema is the one it kept).
    pub empty: bool,
    /// Files whose schema cannot be read, with why: left out (queries skip them too).
    pub damaged: Vec<(PathBuf, String)>,
}

/// Options of `silt ddl`.
#[derive(Debug, Clone)]
pub struct DdlOptions {
    pub dialect: Dialect,
    /// Where the lake's root directory is for the engine (`s3://bucket/prefix`); the table is
    /// `<location>/<module>.<type>/`. Default: a lake in an object store's own URL, a local
    /// lake as `file://` (Trino, Spark) or a
    /// path (DuckDB). Athena needs it.
    pub location: Option<String>,
    /// Table name, optionally qualified (`security.zeek_conn`); default `module_type`.
    pub name: Option<String>,
}

/// Reads a table's schema, partitioning and date range from the lake.
pub fn table_layout(lake: &Path, table: &TableName) -> anyhow::Result<TableLayout> {
    let lake = std::fs::canonicalize(lake)
        .with_context(|| format!("cannot open lake {}", lake.display()))?;
    table_layout_in(&LakeRoot::Dir(lake), table)
}

/// [`table_layout`] of a table in a lake that may be in an object store.
pub fn table_layout_in(lake: &LakeRoot, table: &TableName) -> anyhow::Result<TableLayout> {
    let root = lake.root_path();
    let dir = root.join(table.to_string());
    let files = lake.data_files(table)?;
    // A table a retention emptied has the schema it kept ([`crate::emptied`]).
    let mut schema: Option<Schema> = match files.is_empty() {
        true => lake
            .read_record(&crate::emptied::rel(table))?
            .map(|b| crate::emptied::decode(&b).map(|(s, _)| s))
            .transpose()?,
        false => None,
    };
    anyhow::ensure!(
        schema.is_some() || !files.is_empty(),
        "table {table} has no data files in {} (tables: {})",
        root.display(),
        lake.tables()?
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut store = StoreKind::Parquet;
    let mut damaged = Vec::new();
    for f in &files {
        let unreadable = |kind: &str| format!("{} is not a readable {kind} file", f.path.display());
        if f.store == StoreKind::Feather {
            store = StoreKind::Feather;
        }
        let read = || -> anyhow::Result<Schema> {
            Ok(match (lake, f.store) {
                (LakeRoot::Dir(_), StoreKind::Parquet) => {
                    parquet_schema(&File::open(&f.path)?).with_context(|| unreadable("Parquet"))?
                }
                (LakeRoot::Remote(r), StoreKind::Parquet) => {
                    parquet_schema(&r.file(f)?).with_context(|| unreadable("Parquet"))?
                }
                (_, StoreKind::Feather) => {
                    let r = match lake {
                        LakeRoot::Dir(_) => {
                            crate::ipc::open(Box::new(File::open(&f.path)?) as Box<dyn ReadSeek>)
                        }
                        LakeRoot::Remote(r) => {
                            crate::ipc::open(Box::new(r.file(f)?.reader()) as Box<dyn ReadSeek>)
                        }
                    }
                    .with_context(|| unreadable("Arrow IPC"))?;
                    r.schema().as_ref().clone()
                }
            })
        };
        // A damaged file is left out of the schema and named (queries skip it too).
        let s = match read() {
            Ok(s) => s,
            Err(e) => {
                damaged.push((f.path.clone(), format!("{:#}", e.root_cause())));
                continue;
            }
        };
        schema = Some(match schema {
            None => s,
            Some(prev) if prev.fields() == s.fields() => prev,
            Some(prev) => silt_core::schema::unify_schemas(&prev, &s),
        });
    }
    let Some(schema) = schema else {
        let (path, why) = &damaged[0];
        anyhow::bail!(
            "no file of table {table} is readable ({} damaged; the first, {}: {why})",
            damaged.len(),
            path.display()
        );
    };
    // The lake's record of the table's partitioning (directories for lakes without one).
    let partitioning = match lake {
        LakeRoot::Dir(d) => crate::granularity::current(d, table)?.map(|r| r.partitioning()),
        LakeRoot::Remote(_) => {
            let rel = format!("{}/{table}.json", crate::granularity::TABLES_DIR);
            match lake.read_record(&rel)? {
                Some(b) => Some(
                    serde_json::from_slice::<crate::granularity::TableRecord>(&b)
                        .with_context(|| {
                            format!("{}/{rel} is not a silt table record", root.display())
                        })?
                        .partitioning(),
                ),
                None => files
                    .first()
                    .and_then(|f| f.path.strip_prefix(&dir).ok())
                    .and_then(crate::layout::partitioning_of_rel)
                    .map(Ok),
            }
        }
    }
    .transpose()?
    .unwrap_or(Partitioning::None);
    let mut dts: Vec<String> = Vec::new();
    if partitioning != Partitioning::None {
        let key = format!("{}=", top_partition_key(partitioning));
        for f in &files {
            let Ok(rel) = f.path.strip_prefix(&dir) else {
                continue;
            };
            let Some(top) = rel.iter().next().and_then(|c| c.to_str()) else {
                continue;
            };
            if let Some(v) = top.strip_prefix(&key) {
                if v != NULL_PARTITION && dts.last().map(String::as_str) != Some(v) {
                    dts.push(v.to_string());
                }
            }
        }
    }
    dts.sort();
    dts.dedup();
    Ok(TableLayout {
        table: table.clone(),
        schema,
        partitioning,
        store,
        dt_range: dts.first().cloned().zip(dts.last().cloned()),
        delta: crate::delta::Lake::of(lake).has_log(&table.to_string())?,
        lake: root,
        empty: files.is_empty(),
        damaged,
    })
}

trait ReadSeek: std::io::Read + std::io::Seek {}
impl<T: std::io::Read + std::io::Seek> ReadSeek for T {}

fn parquet_schema<C: parquet::file::reader::ChunkReader + 'static>(
    c: &C,
) -> anyhow::Result<Schema> {
    Ok(ArrowReaderMetadata::load(c, ArrowReaderOptions::default())?
        .schema()
        .as_ref()
        .clone())
}

/// The CREATE statement(s) for a table, ending with a newline.
pub fn create_statement(t: &TableLayout, o: &DdlOptions) -> anyhow::Result<String> {
    let d = o.dialect;
    anyhow::ensure!(
        t.store == StoreKind::Parquet,
        "table {} is stored as Feather (Arrow IPC) files, which {} cannot read as a table; re-import it with --store parquet",
        t.table,
        match d {
            Dialect::Athena => "Athena",
            Dialect::Trino => "Trino",
            Dialect::Spark => "Spark",
            Dialect::DuckDb => "DuckDB",
        }
    );
    let parts: &[(&str, PartType)] = match t.partitioning {
        Partitioning::Hour => &[("dt", PartType::Str), ("hour", PartType::Int)],
        Partitioning::Day => &[("dt", PartType::Str)],
        Partitioning::Month => &[("month", PartType::Str)],
        Partitioning::None => &[],
    };
    for (p, _) in parts {
        if let Some(f) = t
            .schema
            .fields()
            .iter()
            .find(|f| f.name().eq_ignore_ascii_case(p))
        {
            anyhow::bail!(
                "table {} has a column {:?} that collides with its partition column {p}; rename the column on import",
                t.table,
                f.name()
            );
        }
    }
    let name = o
        .name
        .clone()
        .unwrap_or_else(|| t.table.to_string().replace('.', "_"));
    let qname = name
        .split('.')
        .map(|n| quote(n, d))
        .collect::<Vec<_>>()
        .join(".");
    let table_dir = t.table.to_string();
    // A lake in an object store is its own location (`s3://bucket/prefix`).
    let remote = t
        .lake
        .to_str()
        .filter(|l| l.starts_with("s3://") || l.starts_with("s3a://"));
    let location = match (&o.location, d) {
        (Some(l), _) => format!("{}/{table_dir}", l.trim_end_matches('/')),
        (None, _) if remote.is_some() => format!("{}/{table_dir}", remote.unwrap_or_default()),
        (None, Dialect::Athena) => anyhow::bail!(
            "Athena reads from S3: give the lake's S3 location with --location s3://bucket/prefix"
        ),
        (None, Dialect::DuckDb) => t.lake.join(&table_dir).display().to_string(),
        (None, _) => format!("file://{}", t.lake.join(&table_dir).display()),
    };

    let mut cols = Vec::new();
    for f in t.schema.fields() {
        cols.push(format!("  {} {}", quote(f.name(), d), sql_type(f, d)?));
    }
    let mut s = String::new();
    match d {
        Dialect::Athena if t.delta => {
            // Athena reads the log (schema, partitioning, files) natively.
            let _ = writeln!(s, "CREATE EXTERNAL TABLE IF NOT EXISTS {qname}");
            let _ = writeln!(s, "LOCATION {}", literal(&format!("{location}/")));
            let _ = writeln!(s, "TBLPROPERTIES ('table_type' = 'DELTA');");
        }
        Dialect::Trino if t.delta => {
            // The Hive connector would read every Parquet file under the directory, also those
            // a compaction's commit has removed until they are deleted; the Delta Lake
            // connector reads the log's snapshot.
            let (schema, table) = match name.rsplit_once('.') {
                Some((sch, tb)) => (literal(sch), literal(tb)),
                None => ("CURRENT_SCHEMA".to_string(), literal(&name)),
            };
            let _ = writeln!(
                s,
                "-- {} is a Delta Lake table: run this in a Delta Lake catalog (connector.name=delta_lake,\n\
                 -- delta.register-table-procedure.enabled=true), e.g. trino --catalog delta --schema SCHEMA.",
                t.table
            );
            let _ = writeln!(
                s,
                "CALL system.register_table(schema_name => {schema}, table_name => {table}, table_location => {});",
                literal(&location)
            );
        }
        Dialect::Athena => {
            let _ = writeln!(s, "CREATE EXTERNAL TABLE IF NOT EXISTS {qname} (");
            let _ = writeln!(s, "{}", cols.join(",\n"));
            let _ = writeln!(s, ")");
            if !parts.is_empty() {
                let p: Vec<String> = parts
                    .iter()
                    .map(|(n, ty)| format!("{} {}", quote(n, d), ty.name(d)))
                    .collect();
                let _ = writeln!(s, "PARTITIONED BY ({})", p.join(", "));
            }
            let _ = writeln!(s, "STORED AS PARQUET");
            let _ = writeln!(s, "LOCATION {}", literal(&format!("{location}/")));
            if parts.is_empty() {
                s.push_str(";\n");
                return Ok(s);
            }
            let key = top_partition_key(t.partitioning);
            let (format, unit, today) = if t.partitioning == Partitioning::Month {
                ("yyyy-MM", "MONTHS", "%Y-%m")
            } else {
                ("yyyy-MM-dd", "DAYS", "%Y-%m-%d")
            };
            let (first, last) = t.dt_range.clone().unwrap_or_else(|| {
                // No dated partition yet: a range that starts today and follows the clock.
                (chrono::Utc::now().format(today).to_string(), "NOW".into())
            });
            let mut props: Vec<(String, String)> = vec![
                ("projection.enabled".into(), "true".into()),
                (format!("projection.{key}.type"), "date".into()),
                (format!("projection.{key}.format"), format.into()),
                (format!("projection.{key}.range"), format!("{first},{last}")),
                (format!("projection.{key}.interval"), "1".into()),
                (format!("projection.{key}.interval.unit"), unit.into()),
            ];
            let mut template = format!("{location}/{key}=${{{key}}}/");
            if t.partitioning == Partitioning::Hour {
                props.extend([
                    ("projection.hour.type".into(), "integer".into()),
                    ("projection.hour.range".into(), "0,23".into()),
                    ("projection.hour.digits".into(), "2".into()),
                ]);
                template.push_str("hour=${hour}/");
            }
            props.push(("storage.location.template".into(), template));
            let _ = writeln!(s, "TBLPROPERTIES (");
            let p: Vec<String> = props
                .iter()
                .map(|(k, v)| format!("  {} = {}", literal(k), literal(v)))
                .collect();
            let _ = writeln!(s, "{}", p.join(",\n"));
            s.push_str(");\n");
        }
        Dialect::Trino => {
            for (n, ty) in parts {
                cols.push(format!("  {} {}", quote(n, d), ty.name(d)));
            }
            let _ = writeln!(s, "CREATE TABLE IF NOT EXISTS {qname} (");
            let _ = writeln!(s, "{}", cols.join(",\n"));
            let _ = writeln!(s, ")");
            let _ = writeln!(s, "WITH (");
            let _ = write!(
                s,
                "  format = 'PARQUET',\n  external_location = {}",
                literal(&location)
            );
            if !parts.is_empty() {
                let p: Vec<String> = parts.iter().map(|(n, _)| literal(n)).collect();
                let _ = write!(s, ",\n  partitioned_by = ARRAY[{}]", p.join(", "));
            }
            s.push_str("\n);\n");
            if !parts.is_empty() {
                let (schema, table) = match name.rsplit_once('.') {
                    Some((sch, tb)) => (literal(sch), literal(tb)),
                    None => ("CURRENT_SCHEMA".to_string(), literal(&name)),
                };
                let _ = writeln!(
                    s,
                    "CALL system.sync_partition_metadata({schema}, {table}, 'ADD');"
                );
            }
        }
        Dialect::Spark if t.delta => {
            // The log has the schema, the partitioning and the files.
            let _ = writeln!(s, "CREATE TABLE IF NOT EXISTS {qname}");
            let _ = writeln!(s, "USING DELTA");
            let _ = writeln!(s, "LOCATION {};", literal(&location));
        }
        Dialect::Spark => {
            for (n, ty) in parts {
                cols.push(format!("  {} {}", quote(n, d), ty.name(d)));
            }
            let _ = writeln!(s, "CREATE TABLE IF NOT EXISTS {qname} (");
            let _ = writeln!(s, "{}", cols.join(",\n"));
            let _ = writeln!(s, ")");
            let _ = writeln!(s, "USING PARQUET");
            if !parts.is_empty() {
                let p: Vec<String> = parts.iter().map(|(n, _)| quote(n, d)).collect();
                let _ = writeln!(s, "PARTITIONED BY ({})", p.join(", "));
            }
            let _ = writeln!(s, "LOCATION {};", literal(&location));
            if !parts.is_empty() {
                let _ = writeln!(s, "MSCK REPAIR TABLE {qname};");
            }
        }
        Dialect::DuckDb if t.empty => {
            if let Some((schema, _)) = name.rsplit_once('.') {
                let _ = writeln!(s, "CREATE SCHEMA IF NOT EXISTS {};", quote(schema, d));
            }
            // read_parquet fails on a glob that matches nothing: the view has the table's
            // columns and no rows until files come (then `silt ddl` again reads them).
            let mut cols = Vec::new();
            for f in t.schema.fields() {
                cols.push(format!(
                    "CAST(NULL AS {}) AS {}",
                    duckdb_type(f.data_type(), f.name())?,
                    quote(f.name(), d)
                ));
            }
            for (n, ty) in parts {
                cols.push(format!("CAST(NULL AS {}) AS {}", ty.name(d), quote(n, d)));
            }
            let _ = writeln!(
                s,
                "-- {} has no data files now (a retention emptied it): no rows until an import \
                 writes some; run silt ddl again then.",
                t.table
            );
            let _ = writeln!(s, "CREATE OR REPLACE VIEW {qname} AS");
            let _ = writeln!(s, "SELECT * FROM (SELECT {}) WHERE false;", cols.join(", "));
        }
        Dialect::DuckDb => {
            if let Some((schema, _)) = name.rsplit_once('.') {
                let _ = writeln!(s, "CREATE SCHEMA IF NOT EXISTS {};", quote(schema, d));
            }
            // A Delta table's `_delta_log/` holds Parquet checkpoints: its glob names the
            // partition directories instead of descending everywhere.
            let glob = if t.delta {
                let dirs: String = parts.iter().map(|(n, _)| format!("{n}=*/")).collect();
                format!("{location}/{dirs}*.parquet")
            } else {
                format!("{location}/**/*.parquet")
            };
            let mut args = vec![literal(&glob)];
            if !parts.is_empty() {
                args.push("hive_partitioning = true".into());
                let types: Vec<String> = parts
                    .iter()
                    .map(|(n, ty)| format!("{}: {}", literal(n), literal(ty.name(d))))
                    .collect();
                args.push(format!("hive_types = {{{}}}", types.join(", ")));
            }
            // Files written before and after a schema change differ; match columns by name.
            args.push("union_by_name = true".into());
            let _ = writeln!(s, "CREATE OR REPLACE VIEW {qname} AS");
            let _ = writeln!(s, "SELECT * FROM read_parquet({});", args.join(", "));
        }
    }
    Ok(s)
}

/// The first partition directory's key: `dt` (hour and day partitioning) or `month`.
fn top_partition_key(p: Partitioning) -> &'static str {
    if p == Partitioning::Month {
        "month"
    } else {
        "dt"
    }
}

#[derive(Debug, Clone, Copy)]
enum PartType {
    Str,
    Int,
}

impl PartType {
    fn name(self, d: Dialect) -> &'static str {
        match (self, d) {
            (PartType::Str, Dialect::Trino) => "varchar",
            (PartType::Str, Dialect::DuckDb) => "VARCHAR",
            (PartType::Str, _) => "string",
            (PartType::Int, Dialect::Trino) => "integer",
            (PartType::Int, Dialect::DuckDb) => "INTEGER",
            (PartType::Int, _) => "int",
        }
    }
}

/// A quoted identifier.
fn quote(name: &str, d: Dialect) -> String {
    match d {
        Dialect::Athena | Dialect::Spark => format!("`{}`", name.replace('`', "``")),
        Dialect::Trino | Dialect::DuckDb => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

/// A single-quoted SQL string literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// DuckDB's name for the type of column `name` (its own syntax: `VARCHAR[]`, `STRUCT(...)`,
/// unsigned integers, `TIMESTAMPTZ` for times with a zone), as `read_parquet` would type the
/// column.
fn duckdb_type(t: &DataType, name: &str) -> anyhow::Result<String> {
    Ok(match t {
        DataType::Null => "INTEGER".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INTEGER".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 => "UTINYINT".into(),
        DataType::UInt16 => "USMALLINT".into(),
        DataType::UInt32 => "UINTEGER".into(),
        DataType::UInt64 => "UBIGINT".into(),
        DataType::Float16 | DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => "BLOB".into(),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMPTZ".into(),
        DataType::Timestamp(_, None) => "TIMESTAMP".into(),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("DECIMAL({p},{s})"),
        DataType::Dictionary(_, v) => duckdb_type(v, name)?,
        DataType::List(i) | DataType::LargeList(i) | DataType::FixedSizeList(i, _) => {
            format!("{}[]", duckdb_type(i.data_type(), name)?)
        }
        DataType::Struct(fields) => {
            let members = fields
                .iter()
                .map(|c| {
                    Ok(format!(
                        "{} {}",
                        quote(c.name(), Dialect::DuckDb),
                        duckdb_type(c.data_type(), c.name())?
                    ))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            format!("STRUCT({})", members.join(", "))
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                anyhow::bail!("column {name}: malformed map type");
            };
            format!(
                "MAP({}, {})",
                duckdb_type(kv[0].data_type(), name)?,
                duckdb_type(kv[1].data_type(), name)?
            )
        }
        other => anyhow::bail!("column {name}: type {other} has no equivalent in DuckDB"),
    })
}

/// The column type of a field in a dialect (Athena and Spark share Hive's type syntax).
fn sql_type(f: &Field, d: Dialect) -> anyhow::Result<String> {
    let trino = d == Dialect::Trino;
    let hive = |h: &str, t: &str| if trino { t.to_string() } else { h.to_string() };
    Ok(match f.data_type() {
        DataType::Boolean => "boolean".into(),
        DataType::Int8 => "tinyint".into(),
        DataType::Int16 | DataType::UInt8 => "smallint".into(),
        DataType::Int32 | DataType::UInt16 => hive("int", "integer"),
        DataType::Int64 | DataType::UInt32 => "bigint".into(),
        // Trino's Hive connector cannot read Parquet's unsigned INT64 as a decimal ("Unsupported
        // Trino column type"); it reads it as bigint (values above 2^63-1 would show negative;
        // docs/ddl.md).
        DataType::UInt64 => hive("decimal(20,0)", "bigint"),
        DataType::Float32 => hive("float", "real"),
        DataType::Float64 => "double".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => hive("string", "varchar"),
        // An all-null column (a JSON field never seen with a value); readers see nulls.
        // parquet-rs stores an Arrow Null column as INT32 (logical type UNKNOWN), which Spark
        // reads as `int`; declaring `string` made Spark fail on the column (interop check).
        DataType::Null => hive("int", "integer"),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => hive("binary", "varbinary"),
        DataType::Date32 | DataType::Date64 => "date".into(),
        // Trino's `timestamp` is timestamp(3); silt's times are microseconds. Its Hive connector
        // takes timestamp(6) when the catalog reads at `hive.timestamp-precision=MICROSECONDS`
        // (and refuses it, naming that property, otherwise): full precision or a clear error,
        // never silent truncation.
        DataType::Timestamp(_, _) => hive("timestamp", "timestamp(6)"),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("decimal({p},{s})"),
        DataType::Dictionary(_, v) => sql_type(&Field::new(f.name(), v.as_ref().clone(), true), d)?,
        DataType::List(i) | DataType::LargeList(i) | DataType::FixedSizeList(i, _) => {
            let inner = sql_type(i, d)?;
            if trino {
                format!("array({inner})")
            } else {
                format!("array<{inner}>")
            }
        }
        DataType::Struct(fields) => {
            let members = fields
                .iter()
                .map(|c| {
                    let ty = sql_type(c, d)?;
                    Ok(if trino {
                        format!("{} {ty}", quote(c.name(), d))
                    } else {
                        format!("{}:{ty}", quote(c.name(), d))
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            if trino {
                format!("row({})", members.join(", "))
            } else {
                format!("struct<{}>", members.join(","))
            }
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                anyhow::bail!("column {}: malformed map type", f.name());
            };
            let (k, v) = (sql_type(&kv[0], d)?, sql_type(&kv[1], d)?);
            if trino {
                format!("map({k}, {v})")
            } else {
                format!("map<{k},{v}>")
            }
        }
        other => anyhow::bail!(
            "column {}: type {other} has no equivalent in this dialect",
            f.name()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_per_dialect() {
        let f = Field::new(
            "id",
            DataType::Struct(
                vec![
                    Field::new("orig_h", DataType::Utf8, true),
                    Field::new("orig_p", DataType::UInt16, true),
                ]
                .into(),
            ),
            true,
        );
        assert_eq!(
            sql_type(&f, Dialect::Athena).unwrap(),
            "struct<`orig_h`:string,`orig_p`:int>"
        );
        assert_eq!(
            sql_type(&f, Dialect::Trino).unwrap(),
            "row(\"orig_h\" varchar, \"orig_p\" integer)"
        );
        let l = Field::new_list("s", Field::new("item", DataType::UInt64, true), true);
        assert_eq!(
            sql_type(&l, Dialect::Spark).unwrap(),
            "array<decimal(20,0)>"
        );
        assert_eq!(sql_type(&l, Dialect::Trino).unwrap(), "array(bigint)");
        assert_eq!(quote("a`b", Dialect::Spark), "`a``b`");
        assert_eq!(quote("a\"b", Dialect::Trino), "\"a\"\"b\"");
        assert_eq!(literal("it's"), "'it''s'");
    }
}
