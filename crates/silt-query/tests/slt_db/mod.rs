//! A sqllogictest database over a [`SiltSession`]: values print like `silt query` prints them
//! (timestamps ISO 8601 UTC), NULL as `NULL`, the empty string as `(empty)`. Column types are
//! checked strictly: `I` integers, `R` floats and decimals, `B` booleans, `T` everything else.

#![allow(dead_code)]

use std::sync::Arc;

use arrow::array::Array;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use silt_query::SiltSession;
use sqllogictest::{ColumnType, DBOutput};

#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Column types of the golden files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Col {
    Text,
    Integer,
    Float,
    Bool,
}

impl ColumnType for Col {
    fn from_char(c: char) -> Option<Self> {
        Some(match c {
            'T' => Col::Text,
            'I' => Col::Integer,
            'R' => Col::Float,
            'B' => Col::Bool,
            _ => return None,
        })
    }

    fn to_char(&self) -> char {
        match self {
            Col::Text => 'T',
            Col::Integer => 'I',
            Col::Float => 'R',
            Col::Bool => 'B',
        }
    }
}

pub struct SiltDb {
    pub session: Arc<SiltSession>,
}

fn col_type(t: &DataType) -> Col {
    match t {
        t if t.is_integer() => Col::Integer,
        t if t.is_floating() => Col::Float,
        DataType::Decimal128(_, _) | DataType::Decimal256(_, _) => Col::Float,
        DataType::Boolean => Col::Bool,
        _ => Col::Text,
    }
}

#[async_trait::async_trait]
impl sqllogictest::AsyncDB for SiltDb {
    type Error = Error;
    type ColumnType = Col;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Col>, Error> {
        let r = self
            .session
            .query(sql)
            .await
            .map_err(|e| Error(format!("{e:#}")))?;
        if r.schema.fields().is_empty() {
            return Ok(DBOutput::StatementComplete(0));
        }
        let types = r
            .schema
            .fields()
            .iter()
            .map(|f| col_type(f.data_type()))
            .collect();
        let opts = FormatOptions::default().with_null("NULL");
        let mut rows = Vec::new();
        for b in &r.batches {
            let cols: Vec<_> = b
                .columns()
                .iter()
                .map(|c| match c.data_type() {
                    DataType::Timestamp(_, _) => {
                        Arc::new(silt_query::output::format_timestamps(c)) as _
                    }
                    _ => c.clone(),
                })
                .collect();
            let fmts: Vec<ArrayFormatter> = cols
                .iter()
                .map(|c: &Arc<dyn Array>| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
                .collect();
            for i in 0..b.num_rows() {
                rows.push(
                    fmts.iter()
                        .zip(&cols)
                        .map(|(f, c)| {
                            let s = f.value(i).to_string();
                            if s.is_empty() && c.is_valid(i) {
                                "(empty)".to_string()
                            } else if c.is_null(i) {
                                "NULL".to_string()
                            } else {
                                s
                            }
                        })
                        .collect(),
                );
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "silt"
    }
}

/// A runner over `session` with strict column-type checks.
pub fn runner(
    session: Arc<SiltSession>,
) -> sqllogictest::Runner<SiltDb, impl sqllogictest::MakeConnection<Conn = SiltDb>> {
    let mut r = sqllogictest::Runner::new(move || {
        let session = session.clone();
        async move { Ok::<_, Error>(SiltDb { session }) }
    });
    r.with_column_validator(sqllogictest::strict_column_validator);
    r
}
