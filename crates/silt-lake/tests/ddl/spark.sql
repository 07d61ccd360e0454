CREATE TABLE IF NOT EXISTS `zeek_conn` (
  `ts` timestamp,
  `uid` string,
  `id` struct<`orig_h`:string,`orig_p`:int>,
  `orig_bytes` decimal(20,0),
  `duration` decimal(18,6),
  `local_orig` boolean,
  `tunnel_parents` array<string>,
  `score` double,
  `ttl` smallint,
  `dt` string,
  `hour` int
)
USING PARQUET
PARTITIONED BY (`dt`, `hour`)
LOCATION 'file://$LAKE/zeek.conn';
MSCK REPAIR TABLE `zeek_conn`;
