CREATE EXTERNAL TABLE IF NOT EXISTS `zeek_conn` (
  `ts` timestamp,
  `uid` string,
  `id` struct<`orig_h`:string,`orig_p`:int>,
  `orig_bytes` decimal(20,0),
  `duration` decimal(18,6),
  `local_orig` boolean,
  `tunnel_parents` array<string>,
  `score` double,
  `ttl` smallint
)
PARTITIONED BY (`month` string)
STORED AS PARQUET
LOCATION 's3://bucket/lake/zeek.conn/'
TBLPROPERTIES (
  'projection.enabled' = 'true',
  'projection.month.type' = 'date',
  'projection.month.format' = 'yyyy-MM',
  'projection.month.range' = '2018-03,2018-03',
  'projection.month.interval' = '1',
  'projection.month.interval.unit' = 'MONTHS',
  'storage.location.template' = 's3://bucket/lake/zeek.conn/month=${month}/'
);
