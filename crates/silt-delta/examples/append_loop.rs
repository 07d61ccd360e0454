//! `append_loop <table_dir> <tag> <commits> [hour]`: creates the table if needed (partitioned by
//! `dt`, or `dt, hour` when an hour is given) and appends one small Parquet file per commit, for
//! racing processes on one table or appending to a table another engine wrote to.

use std::sync::Arc;

use arrow::array::{StringArray, UInt16Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use silt_delta::delta::{DeltaLog, NewFile};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (table, tag, n) = (
        std::path::PathBuf::from(&args[1]),
        &args[2],
        args[3].parse::<usize>()?,
    );
    let schema = Arc::new(Schema::new(vec![
        Field::new("port", DataType::UInt16, true),
        Field::new("who", DataType::Utf8, true),
    ]));
    let hour = args.get(4);
    let partitions: &[&str] = if hour.is_some() {
        &["dt", "hour"]
    } else {
        &["dt"]
    };
    let log = DeltaLog::create(&table, &schema, partitions)?;
    for i in 0..n {
        let rel = match hour {
            Some(h) => format!("dt=2024-03-24/hour={h}/{tag}-{i}.parquet"),
            None => format!("dt=2024-03-24/{tag}-{i}.parquet"),
        };
        let path = table.join(&rel);
        std::fs::create_dir_all(path.parent().unwrap())?;
        let tmp = path.with_file_name(format!(".{tag}-{i}.parquet.inprogress"));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(UInt16Array::from(vec![40000, 50000, 60000])),
                Arc::new(StringArray::from(vec![tag.as_str(); 3])),
            ],
        )?;
        let mut w = ArrowWriter::try_new(std::fs::File::create(&tmp)?, schema.clone(), None)?;
        w.write(&batch)?;
        w.close()?;
        std::fs::rename(&tmp, &path)?;
        log.append(
            &[NewFile::from_parquet(&table, &rel)?],
            &schema,
            &format!("{tag} {i}"),
        )?;
    }
    println!("{tag}: {:?}", log.contention());
    Ok(())
}
