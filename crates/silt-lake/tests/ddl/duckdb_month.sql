CREATE OR REPLACE VIEW "zeek_conn" AS
SELECT * FROM read_parquet('$LAKE/zeek.conn/**/*.parquet', hive_partitioning = true, hive_types = {'month': 'VARCHAR'}, union_by_name = true);
