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
PARTITIONED BY (`dt` string, `hour` int)
STORED AS PARQUET
LOCATION 's3://bucket/lake/zeek.conn/'
TBLPROPERTIES (
  'projection.enabled' = 'true',
  'projection.dt.type' = 'date',
  'projection.dt.format' = 'yyyy-MM-dd',
  'projection.dt.range' = '2018-03-24,2018-03-25',
  'projection.dt.interval' = '1',
  'projection.dt.interval.unit' = 'DAYS',
  'projection.hour.type' = 'integer',
  'projection.hour.range' = '0,23',
  'projection.hour.digits' = '2',
  'storage.location.template' = 's3://bucket/lake/zeek.conn/dt=${dt}/hour=${hour}/'
);
