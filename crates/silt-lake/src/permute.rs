//! The rows of a sort buffer put into sorted order by scattering rather than gathering.
//!
//! Why by hand: sorting a shuffled sort buffer moves every row of it, and for generated Zeek
//! conn logs (connections logged when they end, so out of order by their start) arrow's
//! `interleave` was 19 % of an import's CPU in `perf`. That cost is random reads: each output
//! row reads its value from anywhere in the 16 MiB buffer (a gather written by hand with fixed
//! 16-byte copies instead of `memcpy` calls cost exactly as much). Here each column is read in
//! order instead, and each value is written to its sorted place: a CPU waits on loads that miss
//! the cache, but buffers stores. Numbers, booleans, strings, and structs and lists of them take
//! this path; other types (maps, unions, views) are left to `interleave`.
//!
//! Touches nothing but the arrays it is given.

use std::sync::Arc;

use arrow::array::{
    make_array, Array, ArrayData, ArrayRef, AsArray, BooleanArray, GenericByteArray, ListArray,
    StructArray,
};
use arrow::buffer::{BooleanBuffer, Buffer, MutableBuffer, NullBuffer, OffsetBuffer};
use arrow::compute::interleave;
use arrow::datatypes::{ArrowNativeType, BinaryType, ByteArrayType, DataType, SchemaRef, Utf8Type};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

/// Where the rows of a sequence of batches go.
pub(crate) struct Permutation {
    /// `dest[starts[b] + r]`: the sorted place of row `r` of batch `b`.
    dest: Vec<u32>,
    /// Where each batch's rows start in `dest` (and one past the last).
    starts: Vec<usize>,
    /// The same as (batch, row) in sorted order, for the types left to `interleave`; made
    /// when first needed (most sorts need none: 32 MiB not written for 2M rows).
    picks: std::cell::OnceCell<Vec<(usize, usize)>>,
}

impl Permutation {
    /// From the sorted order of the rows of batches of `lens` rows read as one sequence
    /// (`order[j]`: the row that goes to place `j`; every row once).
    pub(crate) fn new(lens: &[usize], order: &[u32]) -> Self {
        let mut dest = vec![0u32; order.len()];
        for (j, &g) in order.iter().enumerate() {
            dest[g as usize] = j as u32;
        }
        Self::from_dest(lens, dest)
    }

    /// From the places of the rows of batches of `lens` rows, read as one sequence.
    fn from_dest(lens: &[usize], dest: Vec<u32>) -> Self {
        let mut starts = Vec::with_capacity(lens.len() + 1);
        let mut at = 0;
        starts.push(0);
        for &n in lens {
            at += n;
            starts.push(at);
        }
        debug_assert_eq!(at, dest.len());
        Self {
            dest,
            starts,
            picks: std::cell::OnceCell::new(),
        }
    }

    fn len(&self) -> usize {
        self.dest.len()
    }

    /// The places of batch `b`'s rows.
    fn dest_of(&self, b: usize) -> &[u32] {
        &self.dest[self.starts[b]..self.starts[b + 1]]
    }

    /// The places of each batch's rows, batch by batch.
    fn dests(&self) -> impl Iterator<Item = &[u32]> {
        (0..self.starts.len() - 1).map(|b| self.dest_of(b))
    }

    /// (batch, row) of each place, for `interleave`.
    fn picks(&self) -> &[(usize, usize)] {
        self.picks.get_or_init(|| {
            let mut picks = vec![(0, 0); self.len()];
            for (b, dest) in self.dests().enumerate() {
                for (r, &j) in dest.iter().enumerate() {
                    picks[j as usize] = (b, r);
                }
            }
            picks
        })
    }
}

/// The rows of `batches` in `order` (as for [`Permutation::new`]), as one batch under `schema`.
pub(crate) fn permute_batch(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    order: &[u32],
) -> anyhow::Result<RecordBatch> {
    let lens: Vec<usize> = batches.iter().map(|b| b.num_rows()).collect();
    let p = Permutation::new(&lens, order);
    let columns = (0..schema.fields().len())
        .map(|c| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            permute(&arrays, &p)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(p.len()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &options,
    )?)
}

/// The values of `arrays` (one per batch, all of one type) in sorted order.
pub(crate) fn permute(arrays: &[&dyn Array], p: &Permutation) -> anyhow::Result<ArrayRef> {
    let Some(first) = arrays.first() else {
        anyhow::bail!("permute no arrays");
    };
    let dt = first.data_type().clone();
    match &dt {
        DataType::Utf8 => permute_bytes::<Utf8Type>(arrays, p),
        DataType::Binary => permute_bytes::<BinaryType>(arrays, p),
        DataType::Struct(fields) => {
            let children = (0..fields.len())
                .map(|c| {
                    let kids: Vec<&dyn Array> = arrays
                        .iter()
                        .map(|a| a.as_struct().column(c).as_ref())
                        .collect();
                    permute(&kids, p)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Ok(Arc::new(StructArray::try_new(
                fields.clone(),
                children,
                permute_nulls(arrays, p),
            )?))
        }
        DataType::List(field) => permute_list(arrays, p, field),
        DataType::Boolean => Ok(permute_bool(arrays, p)),
        _ if dt.is_primitive() => match dt.primitive_width() {
            Some(1) => permute_fixed::<u8>(arrays, p),
            Some(2) => permute_fixed::<u16>(arrays, p),
            Some(4) => permute_fixed::<u32>(arrays, p),
            Some(8) => permute_fixed::<u64>(arrays, p),
            // Only decimals as i128: other 16-byte types (month-day-nano intervals) may sit
            // in buffers aligned for 8 bytes.
            Some(16) if matches!(dt, DataType::Decimal128(..)) => permute_fixed::<i128>(arrays, p),
            _ => Ok(interleave(arrays, p.picks())?),
        },
        _ => Ok(interleave(arrays, p.picks())?),
    }
}

/// The validity in sorted order (`None` when no array has nulls).
fn permute_nulls(arrays: &[&dyn Array], p: &Permutation) -> Option<NullBuffer> {
    if arrays.iter().all(|a| a.null_count() == 0) {
        return None;
    }
    let mut bits = MutableBuffer::from_len_zeroed(p.len().div_ceil(8));
    let out = bits.as_slice_mut();
    for (a, dest) in arrays.iter().zip(p.dests()) {
        // The validity bits tested directly: `Array::is_valid` is a call through the trait
        // object per row (2 % of a generated conn import's CPU).
        match a.nulls() {
            None => {
                for &j in dest {
                    arrow::util::bit_util::set_bit(out, j as usize);
                }
            }
            Some(nulls) => {
                for (r, &j) in dest.iter().enumerate() {
                    if nulls.is_valid(r) {
                        arrow::util::bit_util::set_bit(out, j as usize);
                    }
                }
            }
        }
    }
    Some(NullBuffer::new(BooleanBuffer::new(bits.into(), 0, p.len())))
}

/// A boolean column: each set bit set at its sorted place.
fn permute_bool(arrays: &[&dyn Array], p: &Permutation) -> ArrayRef {
    let mut bits = MutableBuffer::from_len_zeroed(p.len().div_ceil(8));
    let out = bits.as_slice_mut();
    for (a, dest) in arrays.iter().zip(p.dests()) {
        let values = a.as_boolean().values();
        for (r, &j) in dest.iter().enumerate() {
            if values.value(r) {
                arrow::util::bit_util::set_bit(out, j as usize);
            }
        }
    }
    Arc::new(BooleanArray::new(
        BooleanBuffer::new(bits.into(), 0, p.len()),
        permute_nulls(arrays, p),
    ))
}

/// A list column: the sorted offsets as for strings, then the elements permuted as a column
/// of their own (element `k` of a list goes where its list goes, `k` places on), whatever
/// their type. Null lists keep their elements, as `interleave` keeps them.
fn permute_list(
    arrays: &[&dyn Array],
    p: &Permutation,
    field: &arrow::datatypes::FieldRef,
) -> anyhow::Result<ArrayRef> {
    let lists: Vec<&ListArray> = arrays.iter().map(|a| a.as_list::<i32>()).collect();
    let offsets = sorted_offsets(lists.iter().map(|l| l.value_offsets()), p, "list elements")?;
    let mut child_lens = Vec::with_capacity(lists.len());
    let mut child_dest = Vec::with_capacity(offsets.last().map_or(0, |&o| o as usize));
    let mut children: Vec<ArrayRef> = Vec::with_capacity(lists.len());
    for (l, dest) in lists.iter().zip(p.dests()) {
        let offs = l.value_offsets();
        let (first, last) = (offs[0] as usize, offs[offs.len() - 1] as usize);
        for (w, &j) in offs.windows(2).zip(dest) {
            let at = offsets[j as usize] as u32;
            child_dest.extend((0..(w[1] - w[0]) as u32).map(|k| at + k));
        }
        child_lens.push(last - first);
        children.push(l.values().slice(first, last - first));
    }
    let child_p = Permutation::from_dest(&child_lens, child_dest);
    let refs: Vec<&dyn Array> = children.iter().map(|c| c.as_ref()).collect();
    let values = permute(&refs, &child_p)?;
    Ok(Arc::new(ListArray::try_new(
        field.clone(),
        OffsetBuffer::new(offsets.into()),
        values,
        permute_nulls(arrays, p),
    )?))
}

/// The offsets of variable-length values (strings, lists) in sorted order: each value's
/// length written to its place, then summed. `what` names the values for the overflow error.
fn sorted_offsets<'a>(
    sources: impl Iterator<Item = &'a [i32]>,
    p: &Permutation,
    what: &str,
) -> anyhow::Result<Vec<i32>> {
    let mut offsets: Vec<i32> = vec![0; p.len() + 1];
    for (src, dest) in sources.zip(p.dests()) {
        for (w, &j) in src.windows(2).zip(dest) {
            offsets[j as usize + 1] = w[1] - w[0];
        }
    }
    let mut total = 0usize;
    for o in offsets.iter_mut().skip(1) {
        total += *o as usize;
        anyhow::ensure!(
            total <= i32::MAX as usize,
            "sorted {what} exceed the 32-bit offsets of one array ({total})"
        );
        *o = total as i32;
    }
    Ok(offsets)
}

/// A fixed-width column (`T` of its width): each value written to its sorted place.
fn permute_fixed<T: ArrowNativeType>(
    arrays: &[&dyn Array],
    p: &Permutation,
) -> anyhow::Result<ArrayRef> {
    let data: Vec<ArrayData> = arrays.iter().map(|a| a.to_data()).collect();
    // A buffer not aligned for `T` (possible for data from outside, such as IPC) cannot be
    // read as `T`s: such columns take `interleave` rather than a panic.
    if data.iter().any(|d| {
        d.buffers()[0]
            .as_ptr()
            .align_offset(std::mem::align_of::<T>())
            != 0
    }) {
        return Ok(interleave(arrays, p.picks())?);
    }
    let mut out: Vec<T> = vec![T::default(); p.len()];
    for (d, dest) in data.iter().zip(p.dests()) {
        let values = &d.buffers()[0].typed_data::<T>()[d.offset()..d.offset() + d.len()];
        for (v, &j) in values.iter().zip(dest) {
            out[j as usize] = *v;
        }
    }
    let data = ArrayData::builder(arrays[0].data_type().clone())
        .len(p.len())
        .add_buffer(Buffer::from_vec(out))
        .nulls(permute_nulls(arrays, p));
    Ok(make_array(data.build()?))
}

/// A string or binary column: the sorted offsets first (each value's length written to its
/// place, then summed), then each value's bytes copied to its place.
fn permute_bytes<T: ByteArrayType<Offset = i32>>(
    arrays: &[&dyn Array],
    p: &Permutation,
) -> anyhow::Result<ArrayRef> {
    let typed: Vec<&GenericByteArray<T>> = arrays.iter().map(|a| a.as_bytes::<T>()).collect();
    let offsets = sorted_offsets(typed.iter().map(|a| a.value_offsets()), p, "strings")?;
    let total = offsets[p.len()] as usize;
    let mut bytes = vec![0u8; total];
    for (a, dest) in typed.iter().zip(p.dests()) {
        let (src, data) = (a.value_offsets(), a.value_data());
        for (w, &j) in src.windows(2).zip(dest) {
            let at = offsets[j as usize] as usize;
            let (s, e) = (w[0] as usize, w[1] as usize);
            bytes[at..at + (e - s)].copy_from_slice(&data[s..e]);
        }
    }
    let data = ArrayData::builder(arrays[0].data_type().clone())
        .len(p.len())
        .add_buffer(Buffer::from_vec(offsets))
        .add_buffer(Buffer::from_vec(bytes))
        .nulls(permute_nulls(arrays, p));
    // Checked construction: the offsets are monotonic by construction and the values are
    // whole values of valid (UTF-8) arrays, so this cannot fail; if it did, it would be an
    // error rather than an invalid array.
    Ok(make_array(data.build()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BinaryArray, Decimal128Array, Int64Array, ListBuilder, StringArray, StringBuilder,
        UInt16Array,
    };
    use arrow::datatypes::{Field, Fields};
    use proptest::prelude::*;

    fn strings() -> impl Strategy<Value = Vec<Option<String>>> {
        prop::collection::vec(prop::option::weighted(0.9, "[a-zé0-9.:]{0,40}"), 0..60)
    }

    proptest! {
        /// Same result as arrow's `interleave` with the same rows in the same order, for
        /// sliced strings, binary, numbers, booleans, structs of them, and lists (of strings,
        /// decimals and lists; null and empty ones among them), with and without nulls.
        #[test]
        fn matches_arrow_interleave(parts in prop::collection::vec(strings(), 1..5), seed in any::<u64>()) {
            // Slices (as the writer sorts): each array has an extra first value cut off.
            let strs: Vec<ArrayRef> = parts
                .iter()
                .map(|p| {
                    let mut v = vec![Some("cut off".to_string())];
                    v.extend(p.iter().cloned());
                    Arc::new(StringArray::from(v).slice(1, p.len())) as ArrayRef
                })
                .collect();
            let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
            // A random permutation of all rows (a sort moves every row exactly once).
            let mut picks: Vec<(usize, usize)> = lens
                .iter()
                .enumerate()
                .flat_map(|(b, &n)| (0..n).map(move |r| (b, r)))
                .collect();
            let mut x = seed | 1;
            for i in (1..picks.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                picks.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let starts: Vec<usize> = lens.iter().scan(0, |at, &n| { let s = *at; *at += n; Some(s) }).collect();
            let order: Vec<u32> = picks.iter().map(|&(b, r)| (starts[b] + r) as u32).collect();
            let perm = Permutation::new(&lens, &order);
            let check = |arrays: &[ArrayRef]| -> Result<(), TestCaseError> {
                let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
                prop_assert_eq!(
                    permute(&refs, &perm).unwrap().to_data(),
                    interleave(&refs, &picks).unwrap().to_data()
                );
                Ok(())
            };
            check(&strs)?;
            let bins: Vec<ArrayRef> = strs
                .iter()
                .map(|s| {
                    let s = s.as_string::<i32>();
                    Arc::new(BinaryArray::from(s.iter().map(|v| v.map(str::as_bytes)).collect::<Vec<_>>())) as ArrayRef
                })
                .collect();
            check(&bins)?;
            let fields = Fields::from(vec![
                Field::new("s", DataType::Utf8, true),
                Field::new("n", DataType::Int64, true),
                Field::new("p", DataType::UInt16, false),
                Field::new("b", DataType::Boolean, true),
            ]);
            let structs: Vec<ArrayRef> = strs
                .iter()
                .enumerate()
                .map(|(k, s)| {
                    let n = s.len();
                    let ints: ArrayRef = Arc::new(
                        Int64Array::from_iter((0..n).map(|i| (i % 3 != k % 3).then_some(i as i64 * 7 - 5)))
                            .slice(0, n),
                    );
                    let ports: ArrayRef = Arc::new(UInt16Array::from_iter_values((0..n).map(|i| (i * 31 + k) as u16)));
                    let bools: ArrayRef = Arc::new(BooleanArray::from_iter((0..n).map(|i| (i % 5 != 0).then_some(i % 2 == 0))));
                    let valid = NullBuffer::from((0..n).map(|i| i % 4 != 1).collect::<Vec<_>>());
                    Arc::new(StructArray::new(fields.clone(), vec![s.clone(), ints, ports, bools], Some(valid))) as ArrayRef
                })
                .collect();
            check(&structs)?;
            check(&structs.iter().map(|s| s.as_struct().column(3).clone()).collect::<Vec<_>>())?;
            // Lists (sliced, some null, some empty) of strings, of decimals, and of lists.
            let lists: Vec<ArrayRef> = parts
                .iter()
                .enumerate()
                .map(|(k, part)| {
                    let mut b = ListBuilder::new(StringBuilder::new());
                    b.append_value([Some("cut off")]);
                    for (i, v) in part.iter().enumerate() {
                        for e in 0..(i + k) % 4 {
                            b.values().append_option(v.as_ref().map(|v| format!("{v}{e}")));
                        }
                        b.append(i % 7 != 3);
                    }
                    Arc::new(b.finish().slice(1, part.len())) as ArrayRef
                })
                .collect();
            check(&lists)?;
            let decimals: Vec<ArrayRef> = lists
                .iter()
                .map(|l| {
                    let l = l.as_list::<i32>();
                    let values: ArrayRef = Arc::new(
                        Decimal128Array::from_iter((0..l.values().len()).map(|i| (i % 5 != 2).then_some(i as i128 * 1_000_001)))
                            .with_precision_and_scale(18, 6)
                            .unwrap(),
                    );
                    let field = Arc::new(Field::new("item", values.data_type().clone(), true));
                    Arc::new(ListArray::new(field, l.offsets().clone(), values, l.nulls().cloned())) as ArrayRef
                })
                .collect();
            check(&decimals)?;
            let nested: Vec<ArrayRef> = lists
                .iter()
                .map(|l| {
                    let n = l.len();
                    let field = Arc::new(Field::new("item", l.data_type().clone(), true));
                    let offsets = OffsetBuffer::from_lengths((0..n / 2).map(|_| 2).chain((0..n % 2).map(|_| 1)));
                    Arc::new(ListArray::new(field, offsets, l.clone(), None)) as ArrayRef
                })
                .collect();
            let nested_lens: Vec<usize> = nested.iter().map(|a| a.len()).collect();
            let mut nested_order: Vec<u32> = (0..nested_lens.iter().sum::<usize>() as u32).collect();
            nested_order.reverse();
            let nested_perm = Permutation::new(&nested_lens, &nested_order);
            let refs: Vec<&dyn Array> = nested.iter().map(|a| a.as_ref()).collect();
            let starts: Vec<usize> = nested_lens.iter().scan(0, |at, &n| { let s = *at; *at += n; Some(s) }).collect();
            let nested_picks: Vec<(usize, usize)> = nested_order
                .iter()
                .map(|&g| {
                    let b = starts.partition_point(|&s| s <= g as usize) - 1;
                    (b, g as usize - starts[b])
                })
                .collect();
            prop_assert_eq!(
                permute(&refs, &nested_perm).unwrap().to_data(),
                interleave(&refs, &nested_picks).unwrap().to_data()
            );
        }
    }
}
