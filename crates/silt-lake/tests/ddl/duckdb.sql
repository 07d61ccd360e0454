CREATE OR REPLACE VIEW "zeek_conn" AS
SELECT * FROM read_parquet('$LAKE/zeek.conn/**/*.parquet', hive_partitioning = true, hive_types = {'dt': 'VARCHAR', 'hour': 'INTEGER'}, union_by_name = true);
