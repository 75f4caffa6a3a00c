-- Plans follow the tables' growth (src/core/spi.c, queen_plans_follow_growth).
-- A session plans Queen's statements once, on the tables as they are then.
-- When the log grows from a few partitions to thousands, a plan made for a
-- small table (a hash join over a sequential scan of log_partitions) must
-- not outlive the growth until autovacuum's next ANALYZE: once a table has
-- doubled, the session replans.  Autovacuum is held off log_partitions here,
-- so that only the session's own replanning can fix the plans.
ALTER TABLE queen.log_partitions SET (autovacuum_enabled = off);

-- plans made now, on a small log_partitions
SELECT status FROM queen.push('{"items":[{"queue":"rp1","partition":"p0","payload":1},{"queue":"rp1","partition":"p1","payload":1}]}');
SELECT status FROM queen.push('{"items":[{"queue":"rp1","partition":"p0","payload":1},{"queue":"rp1","partition":"p1","payload":1}]}');

-- thousands of partitions later (each pushed alone)
SELECT count(*) AS pushed
  FROM generate_series(2, 6000) g,
       LATERAL queen.push('rp1', '1'::jsonb, 'p' || g) p
 WHERE p.status = 'queued';
SELECT pg_relation_size('queen.log_partitions') / current_setting('block_size')::int > 40 AS grown;

-- sizes are read at most once a second
SELECT pg_sleep(1.1);

-- a push of two partitions finds them by index, not by reading every partition
BEGIN;
SELECT status FROM queen.push('{"items":[{"queue":"rp1","partition":"p0","payload":2},{"queue":"rp1","partition":"p1","payload":2}]}');
SELECT seq_scan AS log_partitions_seq_scans
  FROM pg_stat_xact_user_tables WHERE relid = 'queen.log_partitions'::regclass;
COMMIT;

ALTER TABLE queen.log_partitions RESET (autovacuum_enabled);
SELECT queen.delete_queue_v1('rp1')->>'deleted' AS deleted;
