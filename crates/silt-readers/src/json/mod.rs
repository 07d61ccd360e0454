//! JSON values to Arrow, with schema inference; format-neutral (Suricata EVE uses it today,
//! generic NDJSON and MessagePack logs can use it the same way).
//!
//! The pipeline for one table:
//! 1. parse a record into a [`Value`] ([`Value::from_slice`]): exact integers, keys in order,
//!    duplicate keys resolved (last value wins), empty keys renamed `_`;
//! 2. optionally apply a [`HintTree`] (what the format knows: timestamps, `u64` ids, addresses),
//!    and [`attach_unparsed`] for values a hint could not convert;
//! 3. [`Batcher::push`] the record; [`Batcher::flush`] infers the batch's types
//!    ([`infer`]), unifies them into the table's running schema with the rules of
//!    [`silt_core::schema`] and builds a [`RecordBatch`](arrow::record_batch::RecordBatch)
//!    ([`build`]).
//!
//! [`ColumnBatcher`] gives the same batches as steps 1 and 3 without the per-record tree: it
//! parses JSON text straight into columns (NDJSON logs use it).
//!
//! Type rules (details in each module): `null` and `{}` have no type of their own; integers are
//! `Int64` (`UInt64` above `i64::MAX` or when hinted), other numbers `Float64`, strings `Utf8`,
//! arrays `List` (item field `item`), objects `Struct`; conflicts follow the rule book
//! (int+float -> `Float64`, scalar+list -> list, anything else -> text). Nesting depth is bounded
//! by `serde_json`'s recursion limit (128): deeper input is a parse error, never a stack overflow.
//!
//! Nothing here does I/O; callers own reading, rejects and emitting.

pub mod batcher;
pub mod build;
pub mod columns;
pub mod hints;
pub mod infer;
pub mod value;

pub use batcher::Batcher;
pub use columns::ColumnBatcher;
pub use hints::{attach_unparsed, Hint, HintTree, UNPARSED_COLUMN};
pub use value::Value;
