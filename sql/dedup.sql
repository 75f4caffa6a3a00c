-- Deduplication against stored data: the probe under the partition row lock,
-- the window, window 0, per-partition scope, the p_verified watermark.

CREATE FUNCTION pg_temp.state(q text, p text) RETURNS TABLE (last_offset bigint, segments bigint, txn_rows bigint)
LANGUAGE sql AS $$
	SELECT (SELECT last_offset FROM queen.log_partitions WHERE id = qtest.pid(q, p)),
	       (SELECT count(*) FROM queen.log_segments WHERE partition_id = qtest.pid(q, p)),
	       (SELECT count(*) FROM queen.log_segments WHERE partition_id = qtest.pid(q, p) AND hashes IS NOT NULL)
	       + (SELECT count(*) FROM queen.log_txns WHERE partition_id = qtest.pid(q, p))
$$;

CREATE TEMP TABLE first AS SELECT * FROM queen.push('p4.dedup', '{"v": 1}', 'Default', 'order-1');
SELECT status, log_offset FROM first;

-- inside the window: duplicate, the original's id, offset and time; nothing written
SELECT * FROM pg_temp.state('p4.dedup', 'Default');
SELECT d.status, d.log_offset, d.message_id = f.message_id AS original_id, d.created_at = f.created_at AS original_time
  FROM queen.push('p4.dedup', '{"v": 2}', 'Default', 'order-1') d, first f;
SELECT * FROM pg_temp.state('p4.dedup', 'Default');
SELECT log_offset, transaction_id, payload FROM queen.read('p4.dedup');

-- the raw allocator reports which frames matched and where the originals are;
-- a duplicate segment writes nothing, even for its new frames
SELECT queen.log_push_one_v1('p4.dedup', 'Default', 3, queen.hash_blob('{new-a,order-1,new-b}'), -1,
                             qtest.blob('{new-a,order-1,new-b}')) AS verdict;
SELECT * FROM pg_temp.state('p4.dedup', 'Default');

-- queen.push takes the duplicates out and stores the rest in the same call
SELECT index, transaction_id, status, log_offset
  FROM queen.push('[{"queue": "p4.dedup", "payload": 1, "transactionId": "new-a"},
                    {"queue": "p4.dedup", "payload": 2, "transactionId": "order-1"},
                    {"queue": "p4.dedup", "payload": 3, "transactionId": "new-b"},
                    {"queue": "p4.dedup", "payload": 4, "transactionId": "order-1"}]');
SELECT log_offset, transaction_id, payload FROM queen.read('p4.dedup');

-- a later duplicate of a message stored several times reports the first
-- (window 0 stores every push)
UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'p4.dedup';
SELECT status, log_offset FROM queen.push('p4.dedup', '{"v": 3}', 'Default', 'order-1');
SELECT status, log_offset FROM queen.push('p4.dedup', '{"v": 4}', 'Default', 'order-1');
SELECT * FROM pg_temp.state('p4.dedup', 'Default');
UPDATE queen.queues SET dedup_window_seconds = 3600 WHERE name = 'p4.dedup';
SELECT status, log_offset FROM queen.push('p4.dedup', '{"v": 5}', 'Default', 'order-1');

-- the same transactionId in another partition is another message
SELECT status, log_offset FROM queen.push('p4.dedup', '{"v": 6}', 'other', 'order-1');

-- outside the window: the hash row is older than the window, so the id is new
-- again.  Time is simulated by rewriting created_at, which this session's
-- dedup cache cannot see, so the cache is off for this part.
SET queen.dedup_cache_mb = 0;
UPDATE queen.log_segments SET created_at = created_at - interval '2 hours'
 WHERE partition_id = qtest.pid('p4.dedup', 'Default');
SELECT status, log_offset FROM queen.push('p4.dedup', '{"v": 7}', 'Default', 'order-1');
-- and inside a shorter window, it is a duplicate of what was just stored
UPDATE queen.queues SET dedup_window_seconds = 60 WHERE name = 'p4.dedup';
SELECT status, log_offset FROM queen.push('p4.dedup', '{"v": 8}', 'Default', 'order-1');
RESET queen.dedup_cache_mb;

-- The cache keeps part of each hash and its time rounded down to the second,
-- so a hit is confirmed against the stored row: rewritten behind the cache's
-- back, the row decides, exactly as a probe without the cache would.
SELECT status, log_offset FROM queen.push('p4.confirm', '{}', 'Default', 'c-1');
SELECT status, log_offset FROM queen.push('p4.confirm', '{}', 'Default', 'c-1');
UPDATE queen.log_segments SET created_at = created_at - interval '2 hours'
 WHERE partition_id = qtest.pid('p4.confirm', 'Default');
SELECT status, log_offset FROM queen.push('p4.confirm', '{}', 'Default', 'c-1');
SELECT status, log_offset FROM queen.push('p4.confirm', '{}', 'Default', 'c-1');

-- hashes below txns_start were purged: not compared
CREATE TEMP TABLE second AS SELECT * FROM queen.push('p4.purge', '{}', 'Default', 'p-1');
SELECT status, log_offset FROM queen.push('p4.purge', '{}', 'Default', 'p-2');
UPDATE queen.log_partitions SET txns_start = 1 WHERE id = qtest.pid('p4.purge', 'Default');
SELECT status, log_offset FROM queen.push('p4.purge', '{}', 'Default', 'p-1');
SELECT status, log_offset FROM queen.push('p4.purge', '{}', 'Default', 'p-2');

-- p_verified: the caller vouches that no hash occurs at or below it, which
-- narrows the probe (here, wrongly, to show it is honoured); -1 probes it all
SELECT queen.log_push_one_v1('p4.purge', 'Default', 1, queen.hash_blob('{p-2}'), 1, qtest.blob('{p-2}'))->>'status' AS vouched_past_original;
SELECT queen.log_push_one_v1('p4.purge', 'Default', 1, queen.hash_blob('{p-2}'), 0, qtest.blob('{p-2}')) AS vouched_below_original;
SELECT queen.log_push_one_v1('p4.purge', 'Default', 1, queen.hash_blob('{p-2}'), -1, qtest.blob('{p-2}')) AS full_probe;
-- p_verified is honoured frame by frame: with a vouched offset inside a
-- stored segment, the segment's frames at or below it are not compared,
-- those above it are
SELECT queen.log_push_one_v1('p4.straddle', 'Default', 3, queen.hash_blob('{s-a,s-b,s-c}'), -1, qtest.blob('{s-a,s-b,s-c}'))->>'status' AS three_frames;
SELECT queen.log_push_one_v1('p4.straddle', 'Default', 1, queen.hash_blob('{s-c}'), 1, qtest.blob('{s-c}')) AS above_the_vouched_offset;
SELECT queen.log_push_one_v1('p4.straddle', 'Default', 1, queen.hash_blob('{s-a}'), 1, qtest.blob('{s-a}'))->>'status' AS at_or_below_it;
-- the same answers without this session's dedup cache, from the table alone
SET queen.dedup_cache_mb = 0;
SELECT queen.log_push_one_v1('p4.straddle', 'nocache', 3, queen.hash_blob('{s-a,s-b,s-c}'), -1, qtest.blob('{s-a,s-b,s-c}'))->>'status' AS three_frames;
SELECT queen.log_push_one_v1('p4.straddle', 'nocache', 1, queen.hash_blob('{s-c}'), 1, qtest.blob('{s-c}')) AS above_the_vouched_offset;
SELECT queen.log_push_one_v1('p4.straddle', 'nocache', 1, queen.hash_blob('{s-a}'), 1, qtest.blob('{s-a}'))->>'status' AS at_or_below_it;
RESET queen.dedup_cache_mb;
-- p_window overrides the queue's window for one call
SELECT queen.log_push_one_v1('p4.purge', 'Default', 1, queen.hash_blob('{p-2}'), -1, qtest.blob('{p-2}'),
                             qtest.pid('p4.purge', 'Default'), 0)->>'status' AS window_0;

-- the original's segment was retained away (its hashes kept in log_txns for
-- the window): duplicate with the zero UUID
SELECT qtest.retain('p4.purge', 'Default', 1) AS log_start;
SELECT status, message_id, log_offset, created_at FROM queen.push('p4.purge', '{}', 'Default', 'p-2');

-- The cache grows through many resizes and still answers exactly: 2000 ids
-- stored with the cache off are read into it by one cold probe, then
-- answered from memory.
SET queen.dedup_cache_mb = 0;
SELECT count(*) AS stored FROM generate_series(1, 2000) i, LATERAL queen.push('p4.big', '{}', 'Default', 'big-' || i) r
 WHERE r.status = 'queued';
RESET queen.dedup_cache_mb;
SELECT status, count(*), min(log_offset), max(log_offset)
  FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'p4.big', 'payload', i, 'transactionId', 'big-' || i)) FROM generate_series(1, 2000) i))
 GROUP BY status;
SELECT status, log_offset FROM queen.push('p4.big', '{}', 'Default', 'big-new');
SELECT status, count(*)
  FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'p4.big', 'payload', i, 'transactionId', 'big-' || i)) FROM generate_series(1, 2001) i))
 GROUP BY status;

-- With a budget too small for every partition, the least recently used are
-- evicted and read again when needed: verdicts do not change.
SET queen.dedup_cache_mb = 1;
SELECT status, count(*)
  FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'p4.evict', 'partition', 'p' || i, 'payload', i, 'transactionId', 't' || i)) FROM generate_series(1, 700) i))
 GROUP BY status;
SELECT status, count(*)
  FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'p4.evict', 'partition', 'p' || i, 'payload', i, 'transactionId', 't' || i)) FROM generate_series(1, 700) i))
 GROUP BY status;
SELECT status, count(*)
  FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'p4.evict', 'partition', 'p' || i, 'payload', i, 'transactionId', 'u' || i)) FROM generate_series(1, 700) i))
 GROUP BY status;
RESET queen.dedup_cache_mb;
