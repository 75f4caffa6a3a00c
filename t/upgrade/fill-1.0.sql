-- What t/upgrade/make-fixture pushes, consumes and retains with queen 1.0
-- before it dumps the tables (t/upgrade/queen-1.0-data.sql): one of each
-- kind of row the storage holds, so that an upgrade that moves or reshapes
-- rows is tested on rows the old code wrote, not on rows the new code writes.
\set ON_ERROR_STOP on
SET client_min_messages = warning;

-- four partitions of 50: 30 one-message segments and one of 20 each, dedup
-- window an hour; group g1 commits the first 20 of each
SELECT queen.configure_queue_v1('{"queue": "upgrade.orders"}') IS NOT NULL;
SELECT count(*) FROM (SELECT queen.push('upgrade.orders', jsonb_build_object('p', p, 'i', i), 'p' || p, 'o-' || p || '-' || i)
						FROM generate_series(0, 3) p, generate_series(1, 30) i) s;
SELECT count(*) FROM (SELECT queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'upgrade.orders', 'partition', 'p' || p,
		'transactionId', 'o-' || p || '-' || i, 'payload', jsonb_build_object('p', p, 'i', i)) ORDER BY i)
	FROM generate_series(31, 50) i)) FROM generate_series(0, 3) p) s;
DO $$
BEGIN
	FOR p IN 0..3 LOOP
		PERFORM queen.ack(array_agg(transaction_id), array_agg(partition_id), array_agg(lease_id),
						  NULL, 'g1')
		   FROM queen.pop('upgrade.orders', 'p' || p, 'g1', 20);
	END LOOP;
END $$;
-- the hashes of p0 and p1 indexed into dedup runs
SELECT queen.dedup_index(1, 1000) >= 0;

-- a dead letter: retryLimit 0, the one message failed by group g1
SELECT queen.configure_queue_v1('{"queue": "upgrade.dlq", "options": {"retryLimit": 0}}') IS NOT NULL;
SELECT status FROM queen.push('upgrade.dlq', '{"poison": true}', 'Default', 'dlq-1');
SELECT queen.ack(transaction_id, partition_id, lease_id, 'failed', 'g1', 'it broke')
  FROM queen.pop('upgrade.dlq', consumer_group => 'g1');

-- segments purged by retention while their hashes stay for the dedup window
SELECT queen.configure_queue_v1('{"queue": "upgrade.retained", "options": {"retentionEnabled": true, "retentionSeconds": 60}}') IS NOT NULL;
SELECT count(*) FROM (SELECT queen.push('upgrade.retained', jsonb_build_object('i', i), 'Default', 'r-' || i)
						FROM generate_series(1, 40) i) s;
UPDATE queen.log_segments s SET created_at = s.created_at - interval '10 minutes'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = s.partition_id AND q.name = 'upgrade.retained' AND s.base_offset < 20;
UPDATE queen.log_partitions p SET oldest_live_at = p.oldest_live_at - interval '10 minutes'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'upgrade.retained';

-- hashes purged past a short dedup window while their segments stay
SELECT queen.configure_queue_v1('{"queue": "upgrade.window", "options": {"dedupWindowSeconds": 60}}') IS NOT NULL;
SELECT count(*) FROM (SELECT queen.push('upgrade.window', jsonb_build_object('i', i), 'Default', 'w-' || i)
						FROM generate_series(1, 30) i) s;
UPDATE queen.log_txns t SET created_at = t.created_at - interval '1 hour'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = t.partition_id AND q.name = 'upgrade.window' AND t.base_offset < 15;
UPDATE queen.log_partitions p SET oldest_txn_at = p.oldest_txn_at - interval '1 hour'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'upgrade.window';

SELECT kind, queue, segments FROM queen.retention_run() ORDER BY queue, kind;

-- what a reader must find after the upgrade: every message still stored,
-- and every transactionId still inside its dedup window
CREATE TABLE public.upgrade_expect_messages AS
SELECT q.name AS queue, p.name AS partition, r.log_offset, r.message_id, r.transaction_id, r.payload
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id,
	   LATERAL queen.read(q.name, p.name, 0, 1000) r;
CREATE TABLE public.upgrade_expect_dedup AS
SELECT q.name AS queue, p.name AS partition, h.hash
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
	   JOIN queen.log_txns t ON t.partition_id = p.id AND t.base_offset >= p.txns_start,
	   LATERAL queen.log_unnest_hashes(t.hashes) h(idx, hash);
