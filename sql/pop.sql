-- queen.pop and queen.pop_discover: the claim from SQL (src/core/claim.c,
-- src/core/claim_scan.c, src/sql/pop_sql.c).  Leases are never waited out:
-- an expiry is simulated by moving lease_expires_at into the past.

-- what a group's cursor and lease on a partition look like
CREATE FUNCTION qtest.consumer(qname text, pname text, grp text DEFAULT '__QUEUE_MODE__')
RETURNS TABLE (committed bigint, batch_end bigint, leased boolean, attempt_count int, total_consumed bigint)
LANGUAGE sql AS $$
	SELECT c.committed, c.batch_end, c.worker_id IS NOT NULL, c.attempt_count, c.total_consumed
	  FROM queen.log_consumers c WHERE c.partition_id = qtest.pid(qname, pname) AND c.consumer_group = grp
$$;

------------------------------------------------------------------------------
-- One partition
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'pop.one', 'partition', 'a',
       'payload', jsonb_build_object('n', i), 'transactionId', 'one-' || i)) FROM generate_series(0, 2) i));
CREATE TEMP TABLE got AS SELECT * FROM queen.pop('pop.one', 'a', batch => 2);
SELECT queue, partition, "offset", transaction_id, payload, delivery_attempt,
       lease_id IS NOT NULL AS leased, trace_id IS NULL AS no_trace,
       lease_expires_at BETWEEN now() + interval '50 s' AND now() + interval '70 s' AS queue_lease_time,
       partition_id = qtest.pid('pop.one', 'a') AS right_pid
  FROM got ORDER BY "offset";
SELECT count(DISTINCT lease_id) AS one_lease FROM got;
-- the cursor has not moved; the lease covers what was delivered, held by the lease id
SELECT * FROM qtest.consumer('pop.one', 'a');
SELECT c.worker_id = (SELECT DISTINCT lease_id FROM got) AS holder_is_lease_id
  FROM queen.log_consumers c WHERE c.partition_id = qtest.pid('pop.one', 'a');
-- one lease per (partition, group): the next pop of the group gets nothing
SELECT count(*) AS second_pop FROM queen.pop('pop.one', 'a', batch => 10);
-- message ids and created_at are what the push stored
SELECT bool_and(g.message_id = r.message_id AND g.created_at = r.created_at) AS same_as_read
  FROM got g JOIN queen.read('pop.one', 'a') r ON r.log_offset = g."offset";

------------------------------------------------------------------------------
-- Redelivery after lease expiry: the same span, delivery_attempt + 1, no
-- retry spent; a different lease id
------------------------------------------------------------------------------
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = qtest.pid('pop.one', 'a');
CREATE TEMP TABLE again AS SELECT * FROM queen.pop('pop.one', 'a', batch => 2);
SELECT "offset", transaction_id, delivery_attempt FROM again ORDER BY "offset";
SELECT (SELECT DISTINCT lease_id FROM again) <> (SELECT DISTINCT lease_id FROM got) AS new_lease_id;
SELECT *, (SELECT batch_retry_count FROM queen.log_consumers WHERE partition_id = qtest.pid('pop.one', 'a')) AS retries
  FROM qtest.consumer('pop.one', 'a');
-- a bigger batch after expiry starts at the same offset: still a redelivery
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = qtest.pid('pop.one', 'a');
SELECT "offset", delivery_attempt FROM queen.pop('pop.one', 'a', batch => 3) ORDER BY "offset";
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = qtest.pid('pop.one', 'a');
SELECT "offset", delivery_attempt FROM queen.pop('pop.one', 'a', batch => 3) ORDER BY "offset";

------------------------------------------------------------------------------
-- autoAck: the cursor moves in the pop's transaction, no lease, never again
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'pop.auto',
       'payload', i, 'transactionId', 'auto-' || i)) FROM generate_series(0, 4) i));
SELECT "offset", payload, lease_id IS NULL AS no_lease_id, lease_expires_at IS NULL AS no_expiry, delivery_attempt
  FROM queen.pop('pop.auto', 'Default', batch => 2, auto_ack => true) ORDER BY "offset";
SELECT * FROM qtest.consumer('pop.auto', 'Default');
SELECT "offset" FROM queen.pop('pop.auto', 'Default', batch => 2, auto_ack => true) ORDER BY "offset";
-- a rolled-back autoAck pop consumed nothing
BEGIN;
SELECT "offset" FROM queen.pop('pop.auto', 'Default', batch => 10, auto_ack => true) ORDER BY "offset";
ROLLBACK;
SELECT "offset" FROM queen.pop('pop.auto', 'Default', batch => 10, auto_ack => true) ORDER BY "offset";
SELECT count(*) AS nothing_left FROM queen.pop('pop.auto', 'Default', batch => 10, auto_ack => true);
SELECT * FROM qtest.consumer('pop.auto', 'Default');

------------------------------------------------------------------------------
-- The wildcard: a batch shared across at most max_partitions partitions, all
-- under one lease id; leased partitions are skipped
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'pop.wild', 'partition', 'p' || (i / 2),
       'payload', i, 'transactionId', 'w-' || i)) FROM generate_series(0, 9) i));
CREATE TEMP TABLE w1 AS SELECT * FROM queen.pop('pop.wild', batch => 3, max_partitions => 2);
SELECT count(*) AS messages, count(DISTINCT partition) AS partitions, count(DISTINCT lease_id) AS leases FROM w1;
-- within a partition, offsets ascend from the cursor; payloads are the partition's
SELECT bool_and(ok) AS in_order FROM (
	SELECT "offset" = row_number() OVER (PARTITION BY partition ORDER BY "offset") - 1
	       AND payload::int = substr(partition, 2)::int * 2 + "offset" AS ok FROM w1) x;
-- rows come partition by partition, in claim order
SELECT count(*) AS partition_switches FROM (
	SELECT partition IS DISTINCT FROM lag(partition) OVER () AS switch FROM w1) x WHERE switch;
-- the rest: every partition not leased, no limit on partitions
CREATE TEMP TABLE w2 AS SELECT * FROM queen.pop('pop.wild', batch => 100, max_partitions => 0);
SELECT count(*) AS messages, count(DISTINCT partition) AS partitions, count(DISTINCT lease_id) AS leases FROM w2;
SELECT count(*) AS overlap FROM w1 JOIN w2 USING (partition);
SELECT count(*) AS nothing_left FROM queen.pop('pop.wild', batch => 100, max_partitions => 0);
-- another group: max_partitions caps the partitions, batch the messages
SELECT count(*) AS messages, count(DISTINCT partition) AS partitions
  FROM queen.pop('pop.wild', consumer_group => 'g-cap', batch => 100, max_partitions => 2);
SELECT count(*) AS messages, count(DISTINCT partition) AS partitions
  FROM queen.pop('pop.wild', consumer_group => 'g-cap2', batch => 5, max_partitions => 10);

------------------------------------------------------------------------------
-- Fan-out: every group sees every message; queue mode is one more group
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'pop.fan',
       'payload', i, 'transactionId', 'f-' || i)) FROM generate_series(0, 2) i));
SELECT string_agg("offset"::text, ',' ORDER BY "offset") AS g1 FROM queen.pop('pop.fan', consumer_group => 'g1', batch => 10);
SELECT string_agg("offset"::text, ',' ORDER BY "offset") AS g2 FROM queen.pop('pop.fan', consumer_group => 'g2', batch => 10);
SELECT string_agg("offset"::text, ',' ORDER BY "offset") AS queue_mode FROM queen.pop('pop.fan', batch => 10, auto_ack => true);
SELECT string_agg("offset"::text, ',' ORDER BY "offset") AS g3_auto FROM queen.pop('pop.fan', 'Default', 'g3', batch => 10, auto_ack => true);
SELECT c.consumer_group, c.committed, c.batch_end FROM queen.log_consumers c
 WHERE c.partition_id = qtest.pid('pop.fan', 'Default') ORDER BY 1;
