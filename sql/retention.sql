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
UPDATE queen.log_txns t SET created_at = t.created_at - interval '1 hour'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = t.partition_id AND q.name = 'ret.dedup' AND t.base_offset = 0;
UPDATE queen.log_partitions p SET oldest_txn_at = p.oldest_txn_at - interval '1 hour'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'ret.dedup';
SELECT * FROM queen.retention_run() WHERE queue = 'ret.dedup';
SELECT p.txns_start, (SELECT count(*) FROM queen.log_txns t WHERE t.partition_id = p.id) AS hash_rows
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'ret.dedup';
SELECT status FROM queen.push('ret.dedup', '{"n": 2}', 'Default', 'recent');
SELECT status FROM queen.push('ret.dedup', '{"n": 3}', 'Default', 'old');
SELECT log_offset, transaction_id FROM queen.read('ret.dedup');

SELECT * FROM queen.retention_run(max_partitions => 0);
