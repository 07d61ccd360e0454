CREATE TABLE IF NOT EXISTS "zeek_conn" (
  "ts" timestamp(6),
  "uid" varchar,
  "id" row("orig_h" varchar, "orig_p" integer),
  "orig_bytes" bigint,
  "duration" decimal(18,6),
  "local_orig" boolean,
  "tunnel_parents" array(varchar),
  "score" double,
  "ttl" smallint,
  "dt" varchar,
  "hour" integer
)
WITH (
  format = 'PARQUET',
  external_location = 'file://$LAKE/zeek.conn',
  partitioned_by = ARRAY['dt', 'hour']
);
CALL system.sync_partition_metadata(CURRENT_SCHEMA, 'zeek_conn', 'ADD');
