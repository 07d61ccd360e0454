//! Schema unification: one rule book for every place where two shapes of the same table meet
//! (records within one EVE file, successive Zeek header blocks, files written by different
//! imports, and the tables the query engine exposes).
//!
//! Rules for unifying type `a` (seen first) with `b`:
//! 1. equal types stay; `Null` (a field only ever seen as JSON `null`) yields to the other;
//! 2. integers widen: signed with signed to the wider signed type, unsigned with unsigned to the
//!    wider unsigned type, signed with unsigned to `Int64`, except that `UInt64` with a signed
//!    type becomes `Float64` (no exact common type exists; Suricata's `flow_id` is always
//!    `UInt64` so it never meets this rule);
//! 3. an integer with a float becomes `Float64`;
//! 4. structs merge field by field (fields keep the order they were first seen in, missing
//!    fields are null), lists unify their element types;
//! 5. a scalar or a struct meeting a list becomes a list of the two unified element types (the
//!    single value is a one-element list): old EVE writes `"vlan": 100`, new EVE writes
//!    `"vlan": [100]`; JSON converters often write one child as an object and several as an
//!    array of objects; an empty JSON array (`List<Null>`) meeting an object becomes a list of
//!    that struct;
//! 6. anything else is a true conflict and becomes `Utf8`: the values are kept as text
//!    (JSON text for structs and lists), never dropped.
//!
//! Nullability: unified fields are always nullable.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, GenericListArray, StringArray, StructArray};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

/// Unifies two types by the rules in the module documentation.
pub fn unify_types(a: &DataType, b: &DataType) -> DataType {
    use DataType::*;
    if a == b {
        return a.clone();
    }
    match (a, b) {
        (Null, t) | (t, Null) => t.clone(),
        (Struct(fa), Struct(fb)) => Struct(unify_fields(fa, fb)),
        (List(ea), List(eb)) => List(unified_field(ea, eb)),
        (LargeList(ea), LargeList(eb)) | (List(ea), LargeList(eb)) | (LargeList(ea), List(eb)) => {
            LargeList(unified_field(ea, eb))
        }
        (List(e), s) | (s, List(e)) if wraps_into_list(s) => {
            let t = unify_types(e.data_type(), s);
            List(Arc::new(Field::new(e.name(), t, true)))
        }
        (x, y) if x.is_integer() && y.is_integer() => unify_ints(x, y),
        (x, y) if x.is_numeric() && y.is_numeric() => Float64,
        (Timestamp(u1, z1), Timestamp(u2, z2)) if z1 == z2 => {
            // The finer unit wins.
            Timestamp(if u1 > u2 { *u1 } else { *u2 }, z1.clone())
        }
        (Utf8, LargeUtf8) | (LargeUtf8, Utf8) => LargeUtf8,
        (Dictionary(_, v), o) | (o, Dictionary(_, v)) => unify_types(v, o),
        _ => Utf8,
    }
}

/// Rule 5 applies to scalars and structs (not to maps, unions or other list kinds).
fn wraps_into_list(t: &DataType) -> bool {
    !t.is_nested() || matches!(t, DataType::Struct(_))
}

fn unified_field(a: &FieldRef, b: &FieldRef) -> FieldRef {
    Arc::new(Field::new(
        a.name(),
        unify_types(a.data_type(), b.data_type()),
        true,
    ))
}

fn unify_ints(a: &DataType, b: &DataType) -> DataType {
    use DataType::*;
    let width = |t: &DataType| t.primitive_width().unwrap_or(8);
    let signed = |t: &DataType| t.is_signed_integer();
    match (signed(a), signed(b)) {
        (true, true) | (false, false) => {
            if width(a) >= width(b) {
                a.clone()
            } else {
                b.clone()
            }
        }
        _ => {
            if *a == UInt64 || *b == UInt64 {
                Float64
            } else {
                Int64
            }
        }
    }
}

/// Unifies two field lists by name: `a`'s order first, then fields only in `b`.
pub fn unify_fields(a: &Fields, b: &Fields) -> Fields {
    let mut out: Vec<Field> = Vec::with_capacity(a.len().max(b.len()));
    let bi: HashMap<&str, &FieldRef> = b.iter().map(|f| (f.name().as_str(), f)).collect();
    for fa in a.iter() {
        match bi.get(fa.name().as_str()) {
            Some(fb) => {
                let mut f =
                    Field::new(fa.name(), unify_types(fa.data_type(), fb.data_type()), true);
                let mut md = fa.metadata().clone();
                md.extend(fb.metadata().clone());
                f.set_metadata(md);
                out.push(f);
            }
            None => out.push(fa.as_ref().clone().with_nullable(true)),
        }
    }
    let ai: std::collections::HashSet<&str> = a.iter().map(|f| f.name().as_str()).collect();
    for fb in b.iter() {
        if !ai.contains(fb.name().as_str()) {
            out.push(fb.as_ref().clone().with_nullable(true));
        }
    }
    out.into()
}

/// Unifies two schemas; metadata is merged with `b`'s values winning.
pub fn unify_schemas(a: &Schema, b: &Schema) -> Schema {
    let mut md = a.metadata().clone();
    md.extend(b.metadata().clone());
    Schema::new_with_metadata(unify_fields(a.fields(), b.fields()), md)
}

/// The unification of `schemas` in order, keeping the first one's metadata (files written at
/// different times may disagree on it); an empty schema without any.
pub fn unify_all<'a>(schemas: impl IntoIterator<Item = &'a SchemaRef>) -> Schema {
    let mut unified: Option<Schema> = None;
    for s in schemas {
        unified = Some(match unified {
            None => s.as_ref().clone(),
            Some(u) => {
                let md = u.metadata().clone();
                let mut n = unify_schemas(&u, s);
                n.metadata = md;
                n
            }
        });
    }
    unified.unwrap_or_else(Schema::empty)
}

/// Reshapes `batch` to `target` (a schema that [`unify_schemas`] produced from the batch's own):
/// missing columns become nulls, types are widened or rendered as text, and nested fields take
/// the target's names, order, nullability and metadata. Schema-level metadata is the target's:
/// batches of one table may carry different metadata (the lookup columns a reader names depend
/// on which columns a batch has), and that is never a reason to fail.
pub fn conform(batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    if batch.schema().fields() == target.fields() {
        return RecordBatch::try_new_with_options(target.clone(), batch.columns().to_vec(), &opts);
    }
    let schema = batch.schema();
    let cols = target
        .fields()
        .iter()
        .map(|f| match schema.index_of(f.name()) {
            Ok(i) => conform_array(batch.column(i), f.data_type()),
            Err(_) => Ok(new_null_array(f.data_type(), batch.num_rows())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new_with_options(target.clone(), cols, &opts)
}

/// Reshapes one array to `to` under the unification rules.
pub fn conform_array(a: &ArrayRef, to: &DataType) -> Result<ArrayRef, ArrowError> {
    let from = a.data_type();
    if from == to {
        return Ok(a.clone());
    }
    match (from, to) {
        (DataType::Null, _) => Ok(new_null_array(to, a.len())),
        (DataType::Struct(_), DataType::Struct(tf)) => {
            let s = a.as_any().downcast_ref::<StructArray>().expect("struct");
            let cols = tf
                .iter()
                .map(|f| match s.column_by_name(f.name()) {
                    Some(c) => conform_array(c, f.data_type()),
                    None => Ok(new_null_array(f.data_type(), a.len())),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Arc::new(StructArray::try_new(
                tf.clone(),
                cols,
                s.nulls().cloned(),
            )?))
        }
        (DataType::List(_), DataType::List(tf)) => {
            let l = a
                .as_any()
                .downcast_ref::<GenericListArray<i32>>()
                .expect("list");
            let values = conform_array(l.values(), tf.data_type())?;
            Ok(Arc::new(GenericListArray::<i32>::try_new(
                tf.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?))
        }
        (DataType::LargeList(_), DataType::LargeList(tf)) => {
            let l = a
                .as_any()
                .downcast_ref::<GenericListArray<i64>>()
                .expect("large list");
            let values = conform_array(l.values(), tf.data_type())?;
            Ok(Arc::new(GenericListArray::<i64>::try_new(
                tf.clone(),
                l.offsets().clone(),
                values,
                l.nulls().cloned(),
            )?))
        }
        (f, DataType::List(tf)) if wraps_into_list(f) => {
            // Rule 5: each scalar or struct becomes a one-element list; a null stays a null list.
            let values = conform_array(a, tf.data_type())?;
            let offsets = OffsetBuffer::<i32>::from_lengths(std::iter::repeat_n(1, a.len()));
            let nulls = a
                .logical_nulls()
                .map(|n| NullBuffer::new(n.inner().clone()));
            Ok(Arc::new(GenericListArray::<i32>::try_new(
                tf.clone(),
                offsets,
                values,
                nulls,
            )?))
        }
        (f, DataType::Utf8) if f.is_nested() => Ok(Arc::new(nested_to_json_text(a)?)),
        _ => cast(a, to),
    }
}

/// Renders each value of a nested array as JSON text (rule 6 for structs and lists).
fn nested_to_json_text(a: &ArrayRef) -> Result<StringArray, ArrowError> {
    let field = Field::new("v", a.data_type().clone(), true);
    let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![a.clone()])?;
    let mut buf = Vec::new();
    {
        let mut w = arrow::json::writer::LineDelimitedWriter::new(&mut buf);
        w.write(&batch)?;
        w.finish()?;
    }
    let mut out = Vec::with_capacity(a.len());
    for (i, line) in buf.split(|&c| c == b'\n').take(a.len()).enumerate() {
        if a.is_null(i) {
            out.push(None);
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| ArrowError::JsonError(e.to_string()))?;
        out.push(v.get("v").map(|v| v.to_string()));
    }
    Ok(StringArray::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, ListArray};
    use arrow::datatypes::Int64Type;
    use DataType::*;

    #[test]
    fn unification_rules() {
        assert_eq!(unify_types(&Int64, &Float64), Float64);
        assert_eq!(unify_types(&Int32, &Int64), Int64);
        assert_eq!(unify_types(&UInt16, &UInt64), UInt64);
        assert_eq!(unify_types(&UInt16, &Int32), Int64);
        assert_eq!(unify_types(&UInt64, &Int64), Float64);
        assert_eq!(unify_types(&Null, &Utf8), Utf8);
        assert_eq!(unify_types(&Boolean, &Utf8), Utf8);
        let l = List(Arc::new(Field::new("item", Int64, true)));
        assert_eq!(unify_types(&Int64, &l), l);
        let sa = Struct(vec![Field::new("a", Int64, true)].into());
        let sb = Struct(vec![Field::new("b", Utf8, true), Field::new("a", Float64, true)].into());
        assert_eq!(
            unify_types(&sa, &sb),
            Struct(vec![Field::new("a", Float64, true), Field::new("b", Utf8, true)].into())
        );
        assert_eq!(unify_types(&sa, &Int64), Utf8);
        // Rule 5 also wraps structs; an empty list (List<Null>) takes the struct's type.
        let ls = List(Arc::new(Field::new("item", sa.clone(), true)));
        assert_eq!(unify_types(&sa, &ls), ls);
        let ln = List(Arc::new(Field::new("item", Null, true)));
        assert_eq!(unify_types(&ln, &sa), ls);
        // A list meeting a struct of a different shape unifies the element types.
        let lsb = List(Arc::new(Field::new(
            "item",
            Struct(vec![Field::new("a", Float64, true), Field::new("b", Utf8, true)].into()),
            true,
        )));
        assert_eq!(unify_types(&ls, &sb), lsb);
        // Timestamps: the finer unit wins; a timestamp meeting text is a conflict.
        let ts = Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into()));
        assert_eq!(unify_types(&ts, &Utf8), Utf8);
        assert_eq!(unify_types(&Boolean, &Int64), Utf8);
    }

    #[test]
    fn conform_wraps_struct_into_list() {
        let st: ArrayRef = Arc::new(StructArray::from(vec![(
            Arc::new(Field::new("a", Int64, true)),
            Arc::new(Int64Array::from(vec![Some(7), None])) as ArrayRef,
        )]));
        let target = unify_types(
            st.data_type(),
            &List(Arc::new(Field::new("item", Null, true))),
        );
        let out = conform_array(&st, &target).unwrap();
        let l = out.as_any().downcast_ref::<ListArray>().unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l.value_length(0), 1);
        let inner = l.value(0);
        let inner = inner.as_any().downcast_ref::<StructArray>().unwrap();
        let a = inner
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(a.value(0), 7);
    }

    #[test]
    fn conform_widens_fills_and_wraps() {
        let s1 = Arc::new(Schema::new(vec![Field::new("x", Int64, true)]));
        let b1 = RecordBatch::try_new(
            s1.clone(),
            vec![Arc::new(Int64Array::from(vec![Some(1), None]))],
        )
        .unwrap();
        let l = List(Arc::new(Field::new("item", Int64, true)));
        let s2 = Schema::new(vec![
            Field::new("x", l.clone(), true),
            Field::new("y", Utf8, true),
        ]);
        let target = Arc::new(unify_schemas(&s1, &s2));
        let out = conform(&b1, &target).unwrap();
        assert_eq!(out.num_columns(), 2);
        let x = out.column(0).as_any().downcast_ref::<ListArray>().unwrap();
        let expected =
            ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1)]), None]);
        assert_eq!(x, &expected);
        assert_eq!(out.column(1).null_count(), 2);
    }

    /// Two shapes of one table that differ only in what arrow's `==` sees and a person does not:
    /// schema metadata, nested field metadata, nullability and the order of struct children,
    /// also inside a list of structs.
    #[test]
    fn conform_ignores_metadata_nullability_and_child_order() {
        let md =
            |k: &str, v: &str| std::collections::HashMap::from([(k.to_string(), v.to_string())]);
        let child = |order_ab: bool, nullable: bool, tag: &str| -> Fields {
            let a = Field::new("a", Int64, nullable).with_metadata(md("silt.source_type", tag));
            let b = Field::new("b", Utf8, true);
            if order_ab {
                vec![a, b].into()
            } else {
                vec![b, a].into()
            }
        };
        let make = |order_ab: bool, nullable: bool, tag: &str, lookup: &str| {
            let st = Struct(child(order_ab, nullable, tag));
            let list = List(Arc::new(Field::new("item", st.clone(), nullable)));
            let schema = Arc::new(Schema::new_with_metadata(
                vec![Field::new("s", st, true), Field::new("l", list, true)],
                md("silt.lookup_columns", lookup),
            ));
            let fields = child(order_ab, nullable, tag);
            let cols: Vec<ArrayRef> = fields
                .iter()
                .map(|f| -> ArrayRef {
                    if f.name() == "a" {
                        Arc::new(Int64Array::from(vec![1, 2]))
                    } else {
                        Arc::new(StringArray::from(vec!["x", "y"]))
                    }
                })
                .collect();
            let sa = StructArray::new(fields.clone(), cols, None);
            let la = GenericListArray::<i32>::new(
                Arc::new(Field::new("item", Struct(fields), nullable)),
                OffsetBuffer::from_lengths([1, 1]),
                Arc::new(sa.clone()),
                None,
            );
            RecordBatch::try_new(schema, vec![Arc::new(sa), Arc::new(la)]).unwrap()
        };
        let first = make(true, false, "count", "uid");
        let later = make(false, true, "int", "uid,src_ip");
        let mut table = unify_schemas(first.schema().as_ref(), later.schema().as_ref());
        table.metadata = first.schema().metadata().clone();
        let table = Arc::new(table);
        for b in [&first, &later] {
            let c = conform(b, &table).unwrap();
            assert_eq!(c.schema(), table);
            let s = c.column(0).as_any().downcast_ref::<StructArray>().unwrap();
            let a = s.column_by_name("a").unwrap();
            assert_eq!(
                a.as_any().downcast_ref::<Int64Array>().unwrap().values(),
                &[1, 2]
            );
        }
        // The table's own shape with other schema metadata conforms without a change.
        let same = make(true, false, "count", "other");
        let mut t2 = first.schema().as_ref().clone();
        t2.metadata = md("silt.lookup_columns", "uid");
        assert!(conform(&same, &Arc::new(t2)).is_ok());
    }

    #[test]
    fn conflict_renders_struct_as_json() {
        let st = StructArray::from(vec![(
            Arc::new(Field::new("a", Int64, true)),
            Arc::new(Int64Array::from(vec![7])) as ArrayRef,
        )]);
        let a: ArrayRef = Arc::new(st);
        let s = conform_array(&a, &Utf8).unwrap();
        let s = s.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(s.value(0), r#"{"a":7}"#);
    }
}
