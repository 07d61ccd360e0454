//! Per-file overhead (issue 21): a file of one page per column has no page index, a file embeds
//! an Arrow schema (the types only) only when Parquet's own schema cannot say them, and the
//! fields' source types are kept in the file's `silt.source_types` key; readers see the same
//! types and values either way.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray, StructArray, TimestampMicrosecondArray};
use arrow::array::{ListArray, UInt16Array};
use arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{FileReader, SerializedFileReader};
use silt_core::{meta, Emit, TableName};
use silt_lake::{LakeWriter, Partitioning, WriterConfig};

const T0: i64 = 1_521_910_800_000_000; // 2018-03-24T17:00:00Z

fn typed(name: &str, t: DataType, source: &str) -> Field {
    Field::new(name, t, true).with_metadata(HashMap::from([(
        meta::SOURCE_TYPE.to_string(),
        source.to_string(),
    )]))
}

fn schema() -> SchemaRef {
    let id = Fields::from(vec![
        typed("orig_h", DataType::Utf8, "addr"),
        typed("orig_p", DataType::UInt16, "port"),
    ]);
    let item = Arc::new(Field::new("item", DataType::Utf8, true));
    Arc::new(Schema::new_with_metadata(
        vec![
            typed("ts", silt_core::time::timestamp_type(), "time"),
            typed("uid", DataType::Utf8, "string"),
            typed("id", DataType::Struct(id), "record"),
            typed("tunnel_parents", DataType::List(item), "set[string]"),
        ],
        HashMap::from([
            (meta::TIME_COLUMN.to_string(), "ts".to_string()),
            (meta::LOOKUP_COLUMNS.to_string(), "uid".to_string()),
        ]),
    ))
}

fn batch(rows: usize) -> RecordBatch {
    let s = schema();
    let DataType::Struct(id_fields) = s.field(2).data_type().clone() else {
        unreachable!()
    };
    let id = StructArray::new(
        id_fields,
        vec![
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("10.0.{}.{}", i / 256 % 256, i % 256)),
            )) as ArrayRef,
            Arc::new(UInt16Array::from_iter_values(
                (0..rows).map(|i| (i % 60000) as u16),
            )),
        ],
        None,
    );
    let parents = ListArray::from_iter_primitive::<Int32Type, _, _>(
        (0..rows).map(|_| None::<Vec<Option<i32>>>),
    );
    // (A list of strings, all null: built as a list of nulls of the right item type.)
    let parents = ListArray::new(
        Arc::new(Field::new("item", DataType::Utf8, true)),
        parents.offsets().clone(),
        arrow::array::new_null_array(&DataType::Utf8, 0),
        parents.nulls().cloned(),
    );
    RecordBatch::try_new(
        s,
        vec![
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    (0..rows).map(|i| T0 + i as i64 * 1000),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| format!("C{:x}", i * 2_654_435_761)),
            )),
            Arc::new(id),
            Arc::new(parents),
        ],
    )
    .unwrap()
}

fn conn() -> TableName {
    TableName::new("zeek", "conn")
}

/// Imports `rows` rows into a fresh lake (no partitions) and returns its one file.
fn import(dir: &Path, rows: usize) -> PathBuf {
    let cfg = WriterConfig {
        partition: Partitioning::None.into(),
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir, cfg).unwrap();
    w.batch(&conn(), batch(rows)).unwrap();
    let s = w.finish().unwrap();
    assert_eq!(s.files.len(), 1);
    s.files[0].path.clone()
}

fn kv(path: &Path) -> HashMap<String, String> {
    let r = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    r.metadata()
        .file_metadata()
        .key_value_metadata()
        .unwrap()
        .iter()
        .map(|k| (k.key.clone(), k.value.clone().unwrap_or_default()))
        .collect()
}

/// Whether any column chunk of the file has a column index or an offset index.
fn has_page_index(path: &Path) -> (bool, bool) {
    let r = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    let md = r.metadata();
    let chunks: Vec<_> = md.row_groups().iter().flat_map(|g| g.columns()).collect();
    (
        chunks.iter().any(|c| c.column_index_offset().is_some()),
        chunks.iter().any(|c| c.offset_index_offset().is_some()),
    )
}

/// The file's rows, and the Arrow schema readers see (with the file's schema metadata).
fn read(path: &Path) -> (RecordBatch, SchemaRef) {
    let b = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
    let schema = b.schema().clone();
    let batches: Vec<RecordBatch> = b.build().unwrap().map(|b| b.unwrap()).collect();
    (
        arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap(),
        schema,
    )
}

#[test]
fn a_file_of_one_page_per_column_has_no_page_index() {
    let dir = tempfile::tempdir().unwrap();
    let small = import(dir.path(), 300);
    assert_eq!(has_page_index(&small), (false, false));
    // The chunk statistics are still there: readers prune on them.
    let r = SerializedFileReader::new(File::open(&small).unwrap()).unwrap();
    let ts = r.metadata().row_group(0).column(0);
    assert!(ts.statistics().is_some_and(|s| s.min_bytes_opt().is_some()));

    // Many pages per column (more rows than a page holds): page index as before.
    let dir = tempfile::tempdir().unwrap();
    let large = import(dir.path(), silt_lake::DEFAULT_PAGE_ROWS + 10_000);
    assert_eq!(has_page_index(&large), (true, true));
}

#[test]
fn the_embedded_schema_keeps_types_and_source_types_move_to_one_key() {
    for rows in [300, silt_lake::DEFAULT_PAGE_ROWS + 10_000] {
        let dir = tempfile::tempdir().unwrap();
        let f = import(dir.path(), rows);
        let kv = kv(&f);
        let types: serde_json::Value =
            serde_json::from_str(&kv[silt_lake::store::SOURCE_TYPES]).unwrap();
        assert_eq!(
            types,
            serde_json::json!({
                "ts": "time", "uid": "string", "id": "record", "id.orig_h": "addr",
                "id.orig_p": "port", "tunnel_parents": "set[string]"
            })
        );
        assert_eq!(kv[meta::TABLE], "zeek.conn");
        assert_eq!(kv[meta::TIME_COLUMN], "ts");
        // Parquet's own schema says all these types: no embedded Arrow schema.
        assert!(!kv.contains_key("ARROW:schema"), "{:?}", kv.keys());

        // Read back: the same types (time zone, struct, list item), the same values, and the
        // silt schema metadata; fields carry no metadata.
        let (back, file_schema) = read(&f);
        let want = batch(rows);
        let plain = |s: &Schema| -> Vec<(String, DataType)> {
            s.fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect()
        };
        // Struct children and list items compare with their (empty) metadata.
        let stored = silt_lake::store::stored_schema(&want.schema());
        assert_eq!(plain(&file_schema), plain(&stored));
        assert_eq!(plain(&back.schema()), plain(&stored));
        assert!(file_schema.fields().iter().all(|f| f.metadata().is_empty()));
        assert_eq!(file_schema.metadata()[meta::TABLE], "zeek.conn");
        assert_eq!(file_schema.metadata()[meta::LOOKUP_COLUMNS], "uid");
        for i in 0..want.num_columns() {
            let w = arrow::compute::cast(want.column(i), back.column(i).data_type()).unwrap();
            assert_eq!(back.column(i).as_ref(), w.as_ref(), "column {i}");
        }
    }
}

/// A type Parquet cannot say (a duration) keeps the embedded Arrow schema, and readers get the
/// type back, with the table's other types.
#[test]
fn a_type_parquet_cannot_say_keeps_the_embedded_schema() {
    use arrow::array::DurationMicrosecondArray;
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        partition: Partitioning::None.into(),
        ..WriterConfig::default()
    };
    let base = batch(100);
    let mut fields = base.schema().fields().to_vec();
    fields.push(Arc::new(Field::new(
        "took",
        DataType::Duration(arrow::datatypes::TimeUnit::Microsecond),
        true,
    )));
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        base.schema().metadata().clone(),
    ));
    let mut cols = base.columns().to_vec();
    cols.push(Arc::new(DurationMicrosecondArray::from_iter_values(
        (0..100).map(|i| i * 1_500),
    )));
    let with_duration = RecordBatch::try_new(schema, cols).unwrap();
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    w.batch(&conn(), with_duration.clone()).unwrap();
    let s = w.finish().unwrap();
    let f = &s.files[0].path;
    assert!(kv(f).contains_key("ARROW:schema"));
    let (back, file_schema) = read(f);
    let stored = silt_lake::store::stored_schema(&with_duration.schema());
    assert_eq!(file_schema.fields(), stored.fields());
    assert_eq!(back.column(4).as_ref(), with_duration.column(4).as_ref());
}
