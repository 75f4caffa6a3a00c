-- Retention from SQL: queen.retention_run steps the partitions due under
-- rule 1 (retentionSeconds: whatever is older goes) and rule 2
-- (completedRetentionSeconds: what every group committed and is older goes),
-- whole segments from the start of the log; a consumer below the new start
-- resumes at the first segment kept.  Ageing is simulated by moving
-- created_at into the past (no sleeping).

SELECT queen.configure_queue_v1('{"queue": "ret.all", "options": {"retentionEnabled": true, "retentionSeconds": 60}}') IS NOT NULL AS configured;
SELECT queen.configure_queue_v1('{"queue": "ret.done", "options": {"retentionEnabled": true, "completedRetentionSeconds": 60}}') IS NOT NULL AS configured;
SELECT queen.configure_queue_v1('{"queue": "ret.off", "options": {"retentionSeconds": 60}}') IS NOT NULL AS configured;
-- maxWaitTimeSeconds evicts whether retention is enabled or not, leased or not
SELECT queen.configure_queue_v1('{"queue": "ret.wait", "options": {"maxWaitTimeSeconds": 60}}') IS NOT NULL AS configured;
SELECT status FROM queen.push('ret.all', '{"n": 0}');
SELECT status FROM queen.push('ret.all', '{"n": 1}');
SELECT status FROM queen.push('ret.all', '{"n": 2}');
SELECT status FROM queen.push('ret.done', '{"n": 0}');
SELECT status FROM queen.push('ret.done', '{"n": 1}');
SELECT status FROM queen.push('ret.done', '{"n": 2}');
SELECT status FROM queen.push('ret.off', '{"n": 0}');
SELECT status FROM queen.push('ret.wait', '{"n": 0}');
SELECT status FROM queen.push('ret.wait', '{"n": 1}');
SELECT count(*) AS leased FROM queen.pop('ret.wait', batch => 1);

-- nothing is due yet
SELECT * FROM queen.retention_run();

-- the first two segments of each queue are an hour old
UPDATE queen.log_segments s SET created_at = s.created_at - interval '1 hour'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = s.partition_id AND q.name LIKE 'ret.%' AND s.base_offset < 2;
UPDATE queen.log_partitions p SET oldest_live_at = p.oldest_live_at - interval '1 hour'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name LIKE 'ret.%';

-- rule 2 with two groups at different cursors: a committed offset 1, b offset 0
SELECT count(*) FROM queen.pop('ret.done', consumer_group => 'a', batch => 2, auto_ack => true);
SELECT count(*) FROM queen.pop('ret.done', consumer_group => 'b', batch => 1, auto_ack => true);

-- rule 1 takes both old segments; rule 2 only what both groups committed;
-- a queue without retentionEnabled keeps everything
SELECT * FROM queen.retention_run() ORDER BY queue;
SELECT log_offset, payload FROM queen.read('ret.all');
SELECT log_offset, payload FROM queen.read('ret.done');
SELECT log_offset FROM queen.read('ret.off');
SELECT log_offset FROM queen.read('ret.wait');

-- one step at most max_rows segments
SELECT count(*) FROM queen.pop('ret.done', consumer_group => 'b', batch => 5, auto_ack => true);
SELECT * FROM queen.retention_run(max_rows => 1);
SELECT * FROM queen.retention_run();

-- a group below the new start resumes at the first segment kept
SELECT payload FROM queen.pop('ret.all', consumer_group => 'late', batch => 10, auto_ack => true);
SELECT q.name, p.log_start, p.oldest_live_at IS NOT NULL AS has_live
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name LIKE 'ret.%' ORDER BY 1;

-- the log_txns purge: hashes older than every need for them (the dedup
-- window, completedRetentionSeconds, 15 minutes) go, whatever the queue's
-- retention; a duplicate inside the window is still one, and a transactionId
-- whose hash went may be pushed again
SELECT queen.configure_queue_v1('{"queue": "ret.dedup", "options": {"dedupWindowSeconds": 60}}') IS NOT NULL AS configured;
SELECT status FROM queen.push('ret.dedup', '{"n": 0}', 'Default', 'old');
SELECT status FROM queen.push('ret.dedup', '{"n": 1}', 'Default', 'recent');
UPDATE queen.log_segments t SET created_at = t.created_at - interval '1 hour'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = t.partition_id AND q.name = 'ret.dedup' AND t.base_offset = 0;
UPDATE queen.log_partitions p SET oldest_txn_at = p.oldest_txn_at - interval '1 hour'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'ret.dedup';
SELECT * FROM queen.retention_run() WHERE queue = 'ret.dedup';
-- (the hashes in a segment's row stay with it, below txns_start: not read)
SELECT p.txns_start,
       (SELECT count(*) FROM queen.log_segments t WHERE t.partition_id = p.id AND t.base_offset >= p.txns_start)
       + (SELECT count(*) FROM queen.log_txns t WHERE t.partition_id = p.id) AS hash_rows
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'ret.dedup';
SELECT status FROM queen.push('ret.dedup', '{"n": 2}', 'Default', 'recent');
SELECT status FROM queen.push('ret.dedup', '{"n": 3}', 'Default', 'old');
SELECT log_offset, transaction_id FROM queen.read('ret.dedup');

-- A segment retention takes inside its dedup window leaves its hashes
-- behind in log_txns: its transactionId is still a duplicate after the
-- message is gone, until the window passes and the hashes' purge takes them.
SELECT queen.configure_queue_v1('{"queue": "ret.move", "options": {"retentionEnabled": true, "retentionSeconds": 60}}') IS NOT NULL AS configured;
SELECT status FROM queen.push('ret.move', '{"n": 0}', 'Default', 'm-0');
SELECT status FROM queen.push('ret.move', '{"n": 1}', 'Default', 'm-1');
UPDATE queen.log_segments s SET created_at = s.created_at - interval '10 minutes'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = s.partition_id AND q.name = 'ret.move' AND s.base_offset = 0;
UPDATE queen.log_partitions p SET oldest_live_at = p.oldest_live_at - interval '10 minutes'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'ret.move';
SELECT * FROM queen.retention_run() WHERE queue = 'ret.move';
SELECT t.base_offset, t.hashes = queen.txn_hash('m-0') AS hash_of_m0
  FROM queen.log_txns t JOIN queen.log_partitions p ON p.id = t.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'ret.move';
SELECT log_offset FROM queen.read('ret.move');
SET queen.dedup_cache_mb = 0;
SELECT status, log_offset FROM queen.push('ret.move', '{"n": 2}', 'Default', 'm-0');
-- the dedup runs, sorted from both tables (log_txns first, upwards), find it too
SELECT queen.dedup_index(1, 1000) > 0 AS indexed;
SELECT r.run_start, r.run_end FROM queen.log_dedup r JOIN queen.log_partitions p ON p.id = r.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'ret.move';
SELECT status, log_offset FROM queen.push('ret.move', '{"n": 2}', 'Default', 'm-0');
UPDATE queen.log_txns t SET created_at = t.created_at - interval '2 hours'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = t.partition_id AND q.name = 'ret.move';
UPDATE queen.log_partitions p SET oldest_txn_at = p.oldest_txn_at - interval '2 hours'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'ret.move';
SELECT kind, segments FROM queen.retention_run() WHERE queue = 'ret.move';
SELECT count(*) AS moved_hash_rows FROM queen.log_txns t JOIN queen.log_partitions p ON p.id = t.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'ret.move';
SELECT status, log_offset FROM queen.push('ret.move', '{"n": 3}', 'Default', 'm-0');
RESET queen.dedup_cache_mb;

-- dead letters: those that failed before queen.dlq_retention go, a batch
-- at a time; newer ones stay
SELECT status FROM queen.push('ret.dlq', '{"n": 0}');
SELECT status FROM queen.push('ret.dlq', '{"n": 1}');
SELECT r.dlq FROM queen.pop('ret.dlq') p,
	   LATERAL queen.reject(p.transaction_id, p.partition_id, p.lease_id, 'bad') r;
SELECT r.dlq FROM queen.pop('ret.dlq') p,
	   LATERAL queen.reject(p.transaction_id, p.partition_id, p.lease_id, 'worse') r;
UPDATE queen.log_dlq d SET failed_at = d.failed_at - interval '31 days'
 WHERE d."offset" = 0 AND d.partition_id IN
	   (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.name = 'ret.dlq');
SELECT kind, queue, partition, segments, messages FROM queen.retention_run();
SELECT log_offset, error FROM queen.dlq('ret.dlq');
SET queen.dlq_retention = '1h';
SELECT kind, messages FROM queen.retention_run(max_rows => 1);
SELECT count(*) AS dead_letters FROM queen.dlq('ret.dlq');
RESET queen.dlq_retention;

-- idle partitions: one retention emptied (no message, no hash left) and
-- idle past queen.partition_cleanup_days goes with its consumer rows; one
-- that holds messages, one with a dead letter and one written since stay.
-- A later push makes the name again, from offset 0.
SELECT status FROM queen.push('ret.idle', '{"n": 0}', 'gone');
SELECT status FROM queen.push('ret.idle', '{"n": 0}', 'kept');
SELECT status FROM queen.push('ret.idle', '{"n": 0}', 'recent');
SELECT count(*) FROM queen.pop('ret.idle', 'gone', consumer_group => 'g', auto_ack => true);
UPDATE queen.log_partitions p
   SET oldest_live_at = NULL, oldest_txn_at = NULL, log_start = p.last_offset + 1,
	   txns_start = p.last_offset + 1, last_write_at = now() - interval '40 days',
	   created_at = now() - interval '40 days'
  FROM queen.queues q
 WHERE q.id = p.queue_id AND q.name IN ('ret.idle', 'ret.dlq') AND p.name IN ('gone', 'Default');
DELETE FROM queen.log_segments s USING queen.log_partitions p, queen.queues q
 WHERE p.id = s.partition_id AND q.id = p.queue_id AND q.name IN ('ret.idle', 'ret.dlq')
   AND p.name IN ('gone', 'Default');
DELETE FROM queen.log_txns t USING queen.log_partitions p, queen.queues q
 WHERE p.id = t.partition_id AND q.id = p.queue_id AND q.name IN ('ret.idle', 'ret.dlq')
   AND p.name IN ('gone', 'Default');
UPDATE queen.log_partitions p SET last_write_at = now() - interval '40 days',
	   created_at = now() - interval '40 days'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'ret.idle' AND p.name = 'kept';
UPDATE queen.log_consumers c SET created_at = now() - interval '40 days',
	   lease_acquired_at = now() - interval '40 days'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = c.partition_id AND q.name IN ('ret.idle', 'ret.dlq');
SELECT kind, queue, partition FROM queen.retention_run() WHERE kind = 'partitions';
SELECT q.name, p.name FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name IN ('ret.idle', 'ret.dlq') ORDER BY 1, 2;
SELECT count(*) AS consumer_rows FROM queen.log_consumers c
 WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p WHERE p.id = c.partition_id);
SELECT log_offset, partition FROM queen.push('ret.idle', '{"n": 1}', 'gone');
SELECT log_offset, payload FROM queen.read('ret.idle', 'gone');

-- the phases are named, each can be turned off; a name not known is refused
SET queen.retention_phases = 'hashes';
SHOW queen.retention_phases;
UPDATE queen.log_dlq d SET failed_at = now() - interval '40 days'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = d.partition_id AND q.name = 'ret.dlq';
SELECT kind, queue FROM queen.retention_run();
RESET queen.retention_phases;
-- the dead letter goes, then its partition, idle and empty, in the same run
SELECT kind, queue, partition, messages FROM queen.retention_run();
SET queen.retention_phases = 'segments, everything';

SELECT * FROM queen.retention_run(max_partitions => 0);
