//! Query parameters: the `?` and `$1` placeholders of prepared statements (Flight SQL, what JDBC
//! and ADBC clients send) and the values bound to them.
//!
//! DataFusion binds positional `$1, $2, …`; JDBC and ADBC write `?`. [`number_placeholders`]
//! rewrites each `?` (a placeholder token, never one inside a string, identifier or comment) to
//! the next `$n`. [`parameter_fields`] reads the placeholders a plan holds and the types
//! DataFusion inferred for them (`id = $1` with `id BIGINT` gives `$1 BIGINT`), and [`bind`]
//! replaces them with values cast to those types.
//!
//! Touches nothing.

use arrow::datatypes::{DataType, Field};
use arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

/// `sql` with every `?` placeholder numbered `$1, $2, …` in order of appearance. SQL without
/// `?` placeholders (or that does not tokenize: the planner reports that) is returned as it is.
/// SQL with both kinds (`a = ? AND b = $1`) is an error: which value goes where would be a
/// guess (DataFusion said only that `$1` had two types).
pub fn number_placeholders(sql: &str) -> anyhow::Result<String> {
    if !sql.contains('?') {
        return Ok(sql.to_string());
    }
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location() else {
        return Ok(sql.to_string());
    };
    let numbered = tokens.iter().find_map(|t| match &t.token {
        Token::Placeholder(p) if p.starts_with('$') => Some(p.clone()),
        _ => None,
    });
    let marks = tokens
        .iter()
        .any(|t| matches!(&t.token, Token::Placeholder(p) if p == "?"));
    if let (Some(n), true) = (numbered, marks) {
        anyhow::bail!(
            "the statement has both ? and {n} placeholders: write them all as ? (numbered in \
             order) or all as $1, $2, …"
        );
    }
    Ok(number_tokens(sql, &tokens))
}

/// `sql` with the `?` placeholders of its `tokens` numbered.
fn number_tokens(
    sql: &str,
    tokens: &[datafusion::sql::sqlparser::tokenizer::TokenWithSpan],
) -> String {
    // Byte offsets of the `?` tokens, from their (line, column) in characters.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let mut at = Vec::new();
    for t in tokens {
        if !matches!(&t.token, Token::Placeholder(p) if p == "?") {
            continue;
        }
        let (line, col) = (t.span.start.line as usize, t.span.start.column as usize);
        let Some(&start) = line.checked_sub(1).and_then(|l| line_starts.get(l)) else {
            return sql.to_string();
        };
        let Some((off, _)) = sql[start..].char_indices().nth(col.saturating_sub(1)) else {
            return sql.to_string();
        };
        if sql.as_bytes()[start + off] != b'?' {
            // The tokenizer's positions did not point at the `?`: leave the SQL alone.
            return sql.to_string();
        }
        at.push(start + off);
    }
    let mut out = String::with_capacity(sql.len() + 2 * at.len());
    let mut last = 0;
    for (n, &i) in at.iter().enumerate() {
        out.push_str(&sql[last..i]);
        out.push_str(&format!("${}", n + 1));
        last = i + 1;
    }
    out.push_str(&sql[last..]);
    out
}

/// The placeholders of `plan` as fields `$1, $2, …` in order, typed as DataFusion inferred them
/// (`Null` where it could not). A placeholder that is not `$n` (`$name`) is an error.
pub fn parameter_fields(plan: &LogicalPlan) -> anyhow::Result<Vec<Field>> {
    let mut found: Vec<(usize, Option<DataType>)> = Vec::new();
    for (name, ty) in plan.get_parameter_types()? {
        let n = name
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "placeholder {name}: write parameters as ? or $1, $2, … (named ones are not supported)"
                )
            })?;
        found.push((n, ty));
    }
    found.sort_by_key(|(n, _)| *n);
    if let Some(gap) = found.iter().enumerate().find(|(i, (n, _))| *n != i + 1) {
        anyhow::bail!(
            "placeholder ${} is used but ${} is not: number parameters from $1 without gaps",
            gap.1 .0,
            gap.0 + 1
        );
    }
    Ok(found
        .into_iter()
        .map(|(n, ty)| Field::new(format!("${n}"), ty.unwrap_or(DataType::Null), true))
        .collect())
}

/// The values of `row` in `batch` (one column per parameter, in order), each cast to its
/// parameter's type where one was inferred.
pub fn values(
    batch: &RecordBatch,
    row: usize,
    fields: &[Field],
) -> anyhow::Result<Vec<ScalarValue>> {
    anyhow::ensure!(
        batch.num_columns() == fields.len(),
        "the statement has {} parameter(s) and {} value(s) were bound",
        fields.len(),
        batch.num_columns()
    );
    batch
        .columns()
        .iter()
        .zip(fields)
        .map(|(col, f)| {
            let v = ScalarValue::try_from_array(col, row)?;
            let (from, to) = (v.data_type(), f.data_type());
            if to == &DataType::Null || &from == to || v.is_null() {
                return if v.is_null() && to != &DataType::Null {
                    Ok(ScalarValue::try_from(to)?)
                } else {
                    Ok(v)
                };
            }
            let refuse = |why: String| {
                anyhow::anyhow!(
                    "parameter {}: the value {v} ({from}) is not a {to}: {why}",
                    f.name()
                )
            };
            // SQL does not compare a boolean with a number; a cast would make true 1.
            if (from == DataType::Boolean) != (to == &DataType::Boolean)
                && (from.is_numeric() || to.is_numeric())
            {
                return Err(refuse("bind a value of the parameter's type".into()));
            }
            let cast = v.cast_to(to).map_err(|e| refuse(e.to_string()))?;
            // Between numbers a cast may lose what makes the value (3.7 as an integer is 3):
            // refused, as the same comparison written in SQL would not match 3.
            if from.is_numeric() && to.is_numeric() {
                let back = cast.cast_to(&from).map_err(|e| refuse(e.to_string()))?;
                if back != v {
                    return Err(refuse(format!("it would be {cast}")));
                }
            }
            Ok(cast)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_cast_only_without_loss() {
        let f = |t: DataType| Field::new("$1", t, true);
        let one = |a: arrow::array::ArrayRef| RecordBatch::try_from_iter([("v", a)]).unwrap();
        use arrow::array::{BooleanArray, Float64Array, Int32Array, Int64Array, StringArray};
        let v = values(
            &one(std::sync::Arc::new(Int32Array::from(vec![7]))),
            0,
            &[f(DataType::Int64)],
        );
        assert_eq!(v.unwrap(), [ScalarValue::Int64(Some(7))]);
        let v = values(
            &one(std::sync::Arc::new(Float64Array::from(vec![3.0]))),
            0,
            &[f(DataType::Int64)],
        );
        assert_eq!(v.unwrap(), [ScalarValue::Int64(Some(3))]);
        let e = values(
            &one(std::sync::Arc::new(Float64Array::from(vec![3.7]))),
            0,
            &[f(DataType::Int64)],
        );
        assert!(e.unwrap_err().to_string().contains("it would be 3"));
        let e = values(
            &one(std::sync::Arc::new(BooleanArray::from(vec![true]))),
            0,
            &[f(DataType::Int64)],
        );
        assert!(e.is_err());
        let v = values(
            &one(std::sync::Arc::new(StringArray::from(vec!["12"]))),
            0,
            &[f(DataType::Int64)],
        );
        assert_eq!(v.unwrap(), [ScalarValue::Int64(Some(12))]);
        let v = values(
            &one(std::sync::Arc::new(Int64Array::from(vec![None::<i64>]))),
            0,
            &[f(DataType::Utf8)],
        );
        assert_eq!(v.unwrap(), [ScalarValue::Utf8(None)]);
    }

    #[test]
    fn question_marks_are_numbered_outside_strings_identifiers_and_comments() {
        assert_eq!(
            number_placeholders("SELECT * FROM t WHERE a = ? AND b > ?").unwrap(),
            "SELECT * FROM t WHERE a = $1 AND b > $2"
        );
        assert_eq!(
            number_placeholders(
                "SELECT 'it''s ?', \"q?\" -- why?\nFROM t /* ? */ WHERE é = 'é' AND x = ?"
            )
            .unwrap(),
            "SELECT 'it''s ?', \"q?\" -- why?\nFROM t /* ? */ WHERE é = 'é' AND x = $1"
        );
        for same in ["SELECT 1", "SELECT '?'", "SELECT $1", "SELECT 'unclosed ?"] {
            assert_eq!(number_placeholders(same).unwrap(), same);
        }
        let mixed = number_placeholders("SELECT * FROM t WHERE a = ? AND b = $1").unwrap_err();
        assert!(mixed.to_string().contains("both ? and $1"), "{mixed}");
        // A `$1` inside a string is no placeholder.
        assert_eq!(
            number_placeholders("SELECT '$1' WHERE a = ?").unwrap(),
            "SELECT '$1' WHERE a = $1"
        );
    }
}
