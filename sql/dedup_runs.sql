-- Dedup runs (src/core/dedup_runs.c): queen.dedup_index sorts a partition's
-- stored hashes into runs, and a probe looks the incoming hashes up there
-- instead of reading the window's stored hashes.  The cache is off, so every
-- probe shows what it reads.
SET queen.dedup_cache_mb = 0;

-- messages n = first..last pushed to partition p, transactionIds tx<n>:
-- how many were queued
CREATE FUNCTION pg_temp.push_dr(first int, last int) RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM generate_series(first, last) g,
	       LATERAL queen.push('dr', jsonb_build_object('n', g), 'p', 'tx' || g) p
	 WHERE p.status = 'queued'
$$;

-- what earlier tests pushed is indexed first, so that only this queue's
-- partition is behind below
SELECT queen.dedup_index(1, 1000000) >= 0 AS indexed_earlier;

SELECT pg_temp.push_dr(1, 300) AS pushed;
SELECT queen.dedup_index(100, 10) AS indexed;

CREATE TEMP VIEW runs AS
SELECT run_start, run_end, run_hashes, count(*) AS nrows, sum(length(keys)) / 12 AS keys
  FROM queen.log_dedup d
  JOIN queen.log_partitions p ON p.id = d.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'dr'
 GROUP BY 1, 2, 3 ORDER BY 2;
-- one run over offsets (-1, 299], every hash in it
SELECT * FROM runs;

-- below the threshold nothing is indexed
SELECT pg_temp.push_dr(301, 350) AS pushed;
SELECT queen.dedup_index(100, 10) AS indexed;
SELECT count(*) AS runs FROM runs;

-- the next runs start where the one below ends; runs of one size class
-- (300, 250, 110 and 120 hashes: up to 4 times p_min_hashes) stay apart
-- until there are four, which are merged into one
SELECT pg_temp.push_dr(351, 550) AS pushed;
SELECT queen.dedup_index(100, 10) AS indexed;
SELECT pg_temp.push_dr(551, 660) AS pushed;
SELECT queen.dedup_index(100, 10) AS indexed;
SELECT * FROM runs;
SELECT pg_temp.push_dr(661, 780) AS pushed;
SELECT queen.dedup_index(100, 10) AS indexed;
SELECT * FROM runs;

-- a new run above the merged one
SELECT pg_temp.push_dr(781, 890) AS pushed;
SELECT queen.dedup_index(100, 10) AS indexed;
SELECT * FROM runs;

-- and a tail the runs do not cover yet
SELECT pg_temp.push_dr(891, 900) AS pushed;

-- Repeats in the older run, the newer run and the tail are duplicates naming
-- their originals; a new transactionId is queued.  The stored hashes (in
-- log_segments) are read only to confirm the two matches in runs and for
-- the ten offsets of the tail
-- (one row each): not the 900 rows of the window.  (The counts since the
-- last flush of statistics: flushed now.)
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx5');
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx850');
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx895');
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx-new');
SELECT idx_tup_fetch < 100 AS read_little FROM pg_stat_xact_user_tables
 WHERE schemaname = 'queen' AND relname = 'log_segments';
COMMIT;

-- Messages of one request repeating stored ones, within a multi-item push
SELECT status, log_offset FROM queen.push('[{"queue": "dr", "partition": "p", "payload": 1, "transactionId": "tx42"},
  {"queue": "dr", "partition": "p", "payload": 2, "transactionId": "tx-newer"},
  {"queue": "dr", "partition": "p", "payload": 3, "transactionId": "tx599"}]');

-- Each run's Bloom filter (queen.dedup_filter_mb, per process) spares the
-- lookups of keys the run cannot hold: fifty pushes of new transactionIds,
-- each probing both runs, read log_dedup about a hundred times less with
-- the filters than without them (one descent per key and run).
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT count(*) AS queued
  FROM generate_series(1, 50) g, LATERAL queen.push('dr', '1'::jsonb, 'p', 'f1-' || g) p
 WHERE p.status = 'queued';
SELECT idx_tup_fetch AS filtered FROM pg_stat_xact_user_tables
 WHERE schemaname = 'queen' AND relname = 'log_dedup' \gset
COMMIT;
SET queen.dedup_filter_mb = 0;
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT count(*) AS queued
  FROM generate_series(1, 50) g, LATERAL queen.push('dr', '1'::jsonb, 'p', 'f2-' || g) p
 WHERE p.status = 'queued';
SELECT idx_tup_fetch AS unfiltered FROM pg_stat_xact_user_tables
 WHERE schemaname = 'queen' AND relname = 'log_dedup' \gset
COMMIT;
SELECT :unfiltered - :filtered >= 80 AS filters_spared_lookups;
-- and without them the repeats are found all the same
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx5');
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx600');
RESET queen.dedup_filter_mb;

-- With a run's filter kept, the chain of runs is kept too (per process,
-- told apart by the newest run's last row): fifty more pushes of new
-- transactionIds read one row of log_dedup each, the newest, instead of
-- one more per run (each run's first row, to learn where it starts).
SELECT count(*) AS runs FROM runs;
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT count(*) AS queued
  FROM generate_series(1, 50) g, LATERAL queen.push('dr', '1'::jsonb, 'p', 'f3-' || g) p
 WHERE p.status = 'queued';
SELECT idx_tup_fetch BETWEEN 50 AND 60 AS one_row_a_push FROM pg_stat_xact_user_tables
 WHERE schemaname = 'queen' AND relname = 'log_dedup';
COMMIT;
-- a run added above the kept chain, then four merged into one under it:
-- repeats in the new runs and in the merged one are found all the same
SELECT pg_temp.push_dr(901, 1010) AS pushed;
SELECT queen.dedup_index(100, 10) AS indexed;
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx1000');
SELECT pg_temp.push_dr(1011, 1120) AS pushed;
SELECT queen.dedup_index(100, 10) AS indexed;
SELECT pg_temp.push_dr(1121, 1230) AS pushed;
SELECT queen.dedup_index(100, 10) AS indexed;
SELECT * FROM runs;
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx1200');
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx950');
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx5');

-- With the process's cache on, a probe needs the runs only below where the
-- cache starts, and the chain this process knows answers for them without
-- reading the newest row: fifty pushes of new transactionIds read log_dedup
-- only where a filter's false positive sends them (each read the newest row
-- at least, before).
RESET queen.dedup_cache_mb;
SELECT status FROM queen.push('dr', '1', 'p', 'k0');
SELECT pg_stat_force_next_flush();
BEGIN;
SELECT count(*) AS queued
  FROM generate_series(1, 50) g, LATERAL queen.push('dr', '1'::jsonb, 'p', 'k1-' || g) p
 WHERE p.status = 'queued';
SELECT idx_tup_fetch < 10 AS chain_from_memory FROM pg_stat_xact_user_tables
 WHERE schemaname = 'queen' AND relname = 'log_dedup';
COMMIT;
-- repeats in the oldest run and in the newest are found through it
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx5');
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx1200');
-- The runs it knows rewritten since: the first lookup into one finds it
-- gone, and the probe goes the whole way down to the new ones.
DELETE FROM queen.log_dedup d USING queen.log_partitions p, queen.queues q
 WHERE p.id = d.partition_id AND q.id = p.queue_id AND q.name = 'dr';
SELECT queen.dedup_index(100, 10) AS indexed;
SELECT run_start, run_end FROM runs;
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx7');
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'k1-7');
SET queen.dedup_cache_mb = 0;

-- A chain with a run missing is not used: the probe reads the stored hashes instead
-- and still finds the repeat.
SELECT pg_stat_force_next_flush();
BEGIN;
DELETE FROM queen.log_dedup d USING queen.log_partitions p, queen.queues q
 WHERE p.id = d.partition_id AND q.id = p.queue_id AND q.name = 'dr' AND d.run_start = -1;
SELECT status, log_offset FROM queen.push('dr', '{"again": 1}', 'p', 'tx7');
SELECT idx_tup_fetch > 800 AS read_window FROM pg_stat_xact_user_tables
 WHERE schemaname = 'queen' AND relname = 'log_segments';
ROLLBACK;

-- A queue whose dedup window is 0 is never probed, so it is not indexed
SELECT count(*) AS pushed
  FROM generate_series(1, 300) g, LATERAL queen.push('dr0', jsonb_build_object('n', g), 'p', 'z' || g) p
 WHERE p.status = 'queued';
CREATE TEMP VIEW dr0_keys AS
SELECT coalesce(sum(length(d.keys)) / 12, 0) AS keys
  FROM queen.log_dedup d
  JOIN queen.log_partitions p ON p.id = d.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'dr0';
UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'dr0';
SELECT queen.dedup_index(100, 1000000) >= 0 AS indexed_others;
SELECT * FROM dr0_keys;
UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'dr0';
SELECT queen.dedup_index(100, 1000000) >= 0 AS indexed_others;
SELECT * FROM dr0_keys;
SELECT (queen.delete_queue_v1('dr0'))->>'deleted' AS deleted;

-- Arguments
SELECT queen.dedup_index(0, 10);
SELECT queen.dedup_index(10, 0);

-- A queue's deletion takes its runs with it
SELECT (queen.delete_queue_v1('dr'))->>'deleted' AS deleted;
SELECT count(*) AS runs_left FROM queen.log_dedup d
 WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p WHERE p.id = d.partition_id);
RESET queen.dedup_cache_mb;
