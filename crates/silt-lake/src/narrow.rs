//! Narrowing the list columns of a sliced batch to the values its rows use, before parquet-rs
//! encodes it.
//!
//! Slicing a `ListArray` is zero-copy and keeps the *whole* child array; only the offsets are
//! narrowed. parquet-rs's writer works on that whole child array: for every leaf it converts,
//! it converts all of it (a `DECIMAL(18,6)` becomes `INT64` through `PrimitiveArray::unary` over
//! `list.values()`), not just the rows being written. The writers here cut each batch into
//! slices (`ParquetSink` writes at most 64Ki rows at a time, `silt bench` hands over 16Ki-row
//! slices of one sorted table), so a list of decimals was converted once per slice in full: in a
//! profile of `silt bench` on 1.1M generated zeek.dns rows, converting the `TTLs` child
//! (`vector[interval]`) was 9 % of the write CPU. Arrow has no kernel that narrows a list's
//! child without copying, so it is done here: the child is sliced (zero-copy) to the range the
//! offsets cover and the offsets are rebased to start at 0; nested lists, maps and structs are
//! narrowed the same way. Values, nulls and row count are unchanged.
//!
//! Touches nothing but the arrays it is given.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, GenericListArray, MapArray, OffsetSizeTrait, StructArray,
};
use arrow::buffer::{OffsetBuffer, ScalarBuffer};
use arrow::datatypes::DataType;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

/// `batch` with every list (and map) column's child narrowed to the values its rows use; the
/// batch itself (shared buffers) when there is nothing to narrow.
pub fn narrow_lists(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    if !batch.schema().fields().iter().any(|f| nests(f.data_type())) {
        return Ok(batch.clone());
    }
    let columns = batch
        .columns()
        .iter()
        .map(narrow)
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(batch.schema(), columns)
}

/// Whether a column of type `dt` holds a list or map anywhere.
fn nests(dt: &DataType) -> bool {
    match dt {
        DataType::List(_) | DataType::LargeList(_) | DataType::Map(_, _) => true,
        DataType::Struct(fields) => fields.iter().any(|f| nests(f.data_type())),
        DataType::FixedSizeList(f, _) => nests(f.data_type()),
        _ => false,
    }
}

/// `a` with its lists narrowed (see the module doc).
fn narrow(a: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    if !nests(a.data_type()) {
        return Ok(Arc::clone(a));
    }
    Ok(match a.data_type() {
        DataType::List(_) => Arc::new(narrow_list(a.as_list::<i32>())?),
        DataType::LargeList(_) => Arc::new(narrow_list(a.as_list::<i64>())?),
        DataType::Map(field, ordered) => {
            let m = a.as_map();
            let (offsets, entries) = rebase(m.offsets(), |o, n| m.entries().slice(o, n));
            let entries = narrow(&(Arc::new(entries) as ArrayRef))?;
            Arc::new(MapArray::try_new(
                Arc::clone(field),
                offsets,
                entries.as_struct().clone(),
                m.nulls().cloned(),
                *ordered,
            )?)
        }
        DataType::Struct(fields) => {
            let s = a.as_struct();
            let columns = s
                .columns()
                .iter()
                .map(narrow)
                .collect::<Result<Vec<_>, _>>()?;
            Arc::new(StructArray::try_new(
                fields.clone(),
                columns,
                s.nulls().cloned(),
            )?)
        }
        // A fixed-size list's slice already narrows its values; only what is inside them may
        // still hold whole lists.
        DataType::FixedSizeList(field, size) => {
            let l = a.as_fixed_size_list();
            Arc::new(arrow::array::FixedSizeListArray::try_new(
                Arc::clone(field),
                *size,
                narrow(l.values())?,
                l.nulls().cloned(),
            )?)
        }
        _ => Arc::clone(a),
    })
}

fn narrow_list<O: OffsetSizeTrait>(
    l: &GenericListArray<O>,
) -> Result<GenericListArray<O>, ArrowError> {
    let (DataType::List(field) | DataType::LargeList(field)) = l.data_type() else {
        unreachable!("narrow_list is called on lists only");
    };
    let (offsets, values) = rebase(l.offsets(), |o, n| l.values().slice(o, n));
    GenericListArray::try_new(
        Arc::clone(field),
        offsets,
        narrow(&values)?,
        l.nulls().cloned(),
    )
}

/// Offsets rebased to start at 0, and the child sliced by `slice(first, len)` to the range the
/// offsets cover. Offsets that already start at 0 are shared as they are (the child is still cut
/// at their end); zero-copy either way.
fn rebase<O: OffsetSizeTrait, T>(
    offsets: &OffsetBuffer<O>,
    slice: impl FnOnce(usize, usize) -> T,
) -> (OffsetBuffer<O>, T) {
    let first = offsets[0];
    let last = offsets[offsets.len() - 1];
    let len = (last - first).as_usize();
    if first == O::zero() {
        return (offsets.clone(), slice(0, len));
    }
    let rebased: ScalarBuffer<O> = offsets.iter().map(|&o| o - first).collect();
    // `OffsetBuffer::new` checks that offsets are non-negative and monotonic; subtracting the
    // first (smallest) of monotonic offsets keeps them so.
    (OffsetBuffer::new(rebased), slice(first.as_usize(), len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Decimal128Array, Int32Array, ListArray, StringArray};
    use arrow::datatypes::{Field, Fields, Int32Type, Schema};

    fn batch() -> RecordBatch {
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(
            (0..100).map(|i| (i % 7 != 3).then(|| (0..i % 4).map(Some).collect::<Vec<_>>())),
        );
        let dec = Decimal128Array::from_iter_values((0..250).map(|v| v as i128 * 1_000_001))
            .with_precision_and_scale(18, 6)
            .unwrap();
        let dec_field = Arc::new(Field::new("item", dec.data_type().clone(), true));
        let mut offsets = vec![0i32];
        for i in 0..100 {
            offsets.push(offsets[i] + (i as i32 % 5));
        }
        let dec_list = ListArray::new(
            Arc::clone(&dec_field),
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Arc::new(dec),
            None,
        );
        let inner_fields = Fields::from(vec![
            Field::new("name", DataType::Utf8, true),
            Field::new("ttls", dec_list.data_type().clone(), true),
        ]);
        let names = StringArray::from_iter_values((0..100).map(|i| format!("n{i}")));
        let st = StructArray::new(
            inner_fields.clone(),
            vec![Arc::new(names), Arc::new(dec_list.clone())],
            None,
        );
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("ints", list.data_type().clone(), true),
            Field::new("ttls", dec_list.data_type().clone(), true),
            Field::new("s", DataType::Struct(inner_fields), true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from_iter_values(0..100)),
                Arc::new(list),
                Arc::new(dec_list),
                Arc::new(st),
            ],
        )
        .unwrap()
    }

    #[test]
    fn slices_keep_their_values_and_lose_the_rest() {
        let b = batch();
        for (off, n) in [(0, 100), (0, 10), (37, 20), (99, 1), (50, 0)] {
            let s = b.slice(off, n);
            let narrowed = narrow_lists(&s).unwrap();
            assert_eq!(narrowed, s, "values and nulls are unchanged ({off}, {n})");
            let ttls = narrowed.column(2).as_list::<i32>();
            assert_eq!(ttls.offsets()[0], 0);
            assert_eq!(
                ttls.values().len(),
                ttls.offsets()[ttls.len()] as usize,
                "the child holds exactly the slice's values"
            );
            let inner = narrowed.column(3).as_struct().column(1).as_list::<i32>();
            assert_eq!(inner.values().len(), inner.offsets()[inner.len()] as usize);
        }
    }

    #[test]
    fn maps_are_narrowed_too() {
        use arrow::array::{Int64Builder, MapBuilder, StringBuilder};
        let mut m = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
        for i in 0..50i64 {
            if i % 9 == 4 {
                m.append(false).unwrap();
                continue;
            }
            for k in 0..i % 3 {
                m.keys().append_value(format!("k{k}"));
                m.values().append_value(i * 10 + k);
            }
            m.append(true).unwrap();
        }
        let map = m.finish();
        let schema = Arc::new(Schema::new(vec![Field::new(
            "m",
            map.data_type().clone(),
            true,
        )]));
        let b = RecordBatch::try_new(schema, vec![Arc::new(map)]).unwrap();
        for (off, n) in [(0, 50), (13, 20), (49, 1)] {
            let s = b.slice(off, n);
            let narrowed = narrow_lists(&s).unwrap();
            assert_eq!(narrowed, s, "({off}, {n})");
            let m = narrowed.column(0).as_map();
            assert_eq!(m.offsets()[0], 0);
            assert_eq!(m.entries().len(), m.offsets()[m.len()] as usize);
        }
    }

    #[test]
    fn batches_without_lists_are_shared() {
        let b = batch();
        let flat = b.project(&[0]).unwrap().slice(5, 10);
        let same = narrow_lists(&flat).unwrap();
        assert!(Arc::ptr_eq(same.column(0), flat.column(0)));
    }
}
