//! The metadata answers: SqlInfo, and catalogs, schemas, tables and table types built from
//! [`QueryEngine::tables`](crate::QueryEngine::tables) with `arrow-flight`'s builders (which
//! also apply the clients' filters and `LIKE` patterns). Every table is of type `TABLE`.
//!
//! Touches nothing: the engine's table list comes in as a slice.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow_flight::error::FlightError;
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::{
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetTableTypes, CommandGetTables, SqlInfo,
    SqlNullOrdering, SqlSupportedCaseSensitivity,
};

/// The one table type the server reports.
pub const TABLE_TYPE: &str = "TABLE";

/// The server name in SqlInfo.
pub const SERVER_NAME: &str = "silt";

/// A table as [`QueryEngine::tables`](crate::QueryEngine::tables) lists it.
pub type TableEntry = (String, String, String, SchemaRef);

/// What GetSqlInfo answers: who the server is and what it does not do.
pub fn sql_info() -> &'static SqlInfoData {
    static INFO: OnceLock<SqlInfoData> = OnceLock::new();
    INFO.get_or_init(|| {
        let mut b = SqlInfoDataBuilder::new();
        b.append(SqlInfo::FlightSqlServerName, SERVER_NAME);
        b.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
        // The Arrow columnar format version (Schema.fbs), as other servers report it.
        b.append(SqlInfo::FlightSqlServerArrowVersion, "1.3");
        b.append(SqlInfo::FlightSqlServerReadOnly, true);
        b.append(SqlInfo::FlightSqlServerSql, true);
        b.append(SqlInfo::FlightSqlServerSubstrait, false);
        // SqlSupportedTransaction::None
        b.append(SqlInfo::FlightSqlServerTransaction, 0i32);
        b.append(SqlInfo::FlightSqlServerCancel, false);
        b.append(SqlInfo::FlightSqlServerBulkIngestion, false);
        b.append(SqlInfo::FlightSqlServerStatementTimeout, 0i32);
        b.append(SqlInfo::FlightSqlServerTransactionTimeout, 0i32);
        b.append(SqlInfo::SqlDdlCatalog, false);
        b.append(SqlInfo::SqlDdlSchema, false);
        b.append(SqlInfo::SqlDdlTable, false);
        // Unquoted identifiers are folded to lower case (DataFusion's SQL dialect).
        b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
        b.append(
            SqlInfo::SqlIdentifierCase,
            SqlSupportedCaseSensitivity::SqlCaseSensitivityLowercase as i32,
        );
        b.append(
            SqlInfo::SqlNullOrdering,
            SqlNullOrdering::SqlNullsSortedHigh as i32,
        );
        b.append(SqlInfo::SqlTransactionsSupported, false);
        b.build().expect("static SqlInfo is well formed")
    })
}

/// GetCatalogs: the distinct catalogs, sorted.
pub fn catalogs(
    query: CommandGetCatalogs,
    tables: &[TableEntry],
) -> Result<RecordBatch, FlightError> {
    let mut b = query.into_builder();
    let names: BTreeSet<&str> = tables.iter().map(|t| t.0.as_str()).collect();
    for name in names {
        b.append(name);
    }
    b.build()
}

/// GetDbSchemas: the distinct (catalog, schema) pairs, filtered as the client asked.
pub fn db_schemas(
    query: CommandGetDbSchemas,
    tables: &[TableEntry],
) -> Result<RecordBatch, FlightError> {
    let mut b = query.into_builder();
    let pairs: BTreeSet<(&str, &str)> = tables
        .iter()
        .map(|t| (t.0.as_str(), t.1.as_str()))
        .collect();
    for (catalog, schema) in pairs {
        b.append(catalog, schema);
    }
    b.build()
}

/// GetTables: the tables, filtered as the client asked, with their IPC-encoded schemas when
/// `include_schema` is set.
pub fn tables(query: CommandGetTables, tables: &[TableEntry]) -> Result<RecordBatch, FlightError> {
    let mut b = query.into_builder();
    let mut sorted: Vec<&TableEntry> = tables.iter().collect();
    sorted.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
    for (catalog, schema, table, arrow_schema) in sorted {
        b.append(catalog, schema, table, TABLE_TYPE, arrow_schema)?;
    }
    b.build()
}

/// GetTableTypes: `TABLE`.
pub fn table_types(query: CommandGetTableTypes) -> Result<RecordBatch, FlightError> {
    let mut b = query.into_builder();
    b.append(TABLE_TYPE);
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn entries() -> Vec<TableEntry> {
        let s = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        vec![
            ("lake".into(), "main".into(), "flows".into(), s.clone()),
            ("lake".into(), "main".into(), "dns".into(), s.clone()),
            ("lake".into(), "audit".into(), "logins".into(), s),
        ]
    }

    fn strings(batch: &RecordBatch, col: &str) -> Vec<String> {
        let a = batch.column_by_name(col).unwrap();
        let a = a.as_any().downcast_ref::<StringArray>().unwrap();
        (0..a.len()).map(|i| a.value(i).to_string()).collect()
    }

    #[test]
    fn catalogs_schemas_tables() {
        let t = entries();
        let c = catalogs(CommandGetCatalogs {}, &t).unwrap();
        assert_eq!(strings(&c, "catalog_name"), ["lake"]);
        let s = db_schemas(
            CommandGetDbSchemas {
                catalog: None,
                db_schema_filter_pattern: None,
            },
            &t,
        )
        .unwrap();
        assert_eq!(strings(&s, "db_schema_name"), ["audit", "main"]);
        let q = CommandGetTables {
            catalog: Some("lake".into()),
            db_schema_filter_pattern: Some("ma%".into()),
            table_name_filter_pattern: None,
            table_types: vec![],
            include_schema: true,
        };
        let tb = tables(q, &t).unwrap();
        assert_eq!(strings(&tb, "table_name"), ["dns", "flows"]);
        assert_eq!(tb.num_columns(), 5);
        let tt = table_types(CommandGetTableTypes {}).unwrap();
        assert_eq!(strings(&tt, "table_type"), ["TABLE"]);
    }

    #[test]
    fn sql_info_has_the_basics() {
        let b = sql_info()
            .record_batch([SqlInfo::FlightSqlServerName as u32])
            .unwrap();
        assert_eq!(b.num_rows(), 1);
        let all = sql_info().record_batch([]).unwrap();
        assert!(all.num_rows() >= 5);
    }
}
