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
-- a bigger batch after expiry redelivers the same span, no wider: offset 2
-- was never delivered, and is not marked as a second attempt
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = qtest.pid('pop.one', 'a');
SELECT "offset", delivery_attempt FROM queen.pop('pop.one', 'a', batch => 3) ORDER BY "offset";
-- a smaller one redelivers part of it, and the span stays what was delivered
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = qtest.pid('pop.one', 'a');
SELECT "offset", delivery_attempt FROM queen.pop('pop.one', 'a', batch => 1) ORDER BY "offset";
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

------------------------------------------------------------------------------
-- Subscription modes, remembered per group at its first contact with a queue
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push('[{"queue": "pop.sub", "partition": "a", "payload": "old-a", "transactionId": "s1"},
                                  {"queue": "pop.sub", "partition": "b", "payload": "old-b", "transactionId": "s2"}]');
-- "all" (the default) starts from everything retained
SELECT partition, "offset", payload FROM queen.pop('pop.sub', consumer_group => 'g-all', batch => 10, max_partitions => 0)
 ORDER BY 1, 2;
-- "new" starts at the group's first contact, on every partition
SELECT count(*) AS new_sees_nothing FROM queen.pop('pop.sub', 'a', 'g-new', batch => 10, subscription_mode => 'new');
SELECT count(*) AS from_now_too FROM queen.pop('pop.sub', consumer_group => 'g-now', batch => 10, subscription_from => 'now');
SELECT consumer_group, subscription_mode, subscription_timestamp > now() - interval '1 minute' AS recent
  FROM queen.consumer_groups_metadata m JOIN queen.queues q ON q.id = m.queue_id
 WHERE q.name = 'pop.sub' ORDER BY 1;
-- what arrives afterwards is delivered, on partition b too (seeded at the
-- group's first contact, through a's pop), and on c, which did not exist yet
SELECT count(*) FROM queen.push('[{"queue": "pop.sub", "partition": "a", "payload": "new-a", "transactionId": "s3"},
                                  {"queue": "pop.sub", "partition": "b", "payload": "new-b", "transactionId": "s4"},
                                  {"queue": "pop.sub", "partition": "c", "payload": "new-c", "transactionId": "s5"}]');
SELECT partition, "offset", payload FROM queen.pop('pop.sub', consumer_group => 'g-new', batch => 10, max_partitions => 0)
 ORDER BY 1, 2;
-- a partition's cursor starts at the group's remembered moment, not at that
-- partition's own first contact: d is written after g-now subscribed, and
-- popped later with subscription_mode 'new' again
SELECT count(*) FROM queen.push('pop.sub', '"new-d"', 'd', 's6');
SELECT partition, "offset", payload FROM queen.pop('pop.sub', 'd', 'g-now', batch => 10, subscription_mode => 'new');
-- an explicit timestamp: segments created at or after it
SELECT count(*) FROM queen.push('pop.ts', '0', 'a', 't0');
SELECT count(*) FROM queen.push('pop.ts', '1', 'a', 't1');
SELECT count(*) FROM queen.push('pop.ts', '2', 'a', 't2');
UPDATE queen.log_segments SET created_at = timestamptz '2020-01-01 00:00:00+00' + base_offset * interval '1 year'
 WHERE partition_id = qtest.pid('pop.ts', 'a');
SELECT "offset", payload FROM queen.pop('pop.ts', 'a', 'g-ts', batch => 10, subscription_from => '2021-01-01T00:00:00Z')
 ORDER BY 1;
SELECT subscription_mode, subscription_timestamp FROM queen.consumer_groups_metadata m JOIN queen.queues q ON q.id = m.queue_id
 WHERE q.name = 'pop.ts';
-- queue mode never skips backlog and is never registered
SELECT "offset" FROM queen.pop('pop.ts', 'a', batch => 10, subscription_mode => 'new') ORDER BY 1;
SELECT count(*) AS queue_mode_rows FROM queen.consumer_groups_metadata WHERE consumer_group = '__QUEUE_MODE__';

------------------------------------------------------------------------------
-- Deferrals hold back whole suffixes, never reorder
------------------------------------------------------------------------------
SELECT queen.configure_queue_v1('{"queue": "pop.window", "options": {"windowBuffer": 60}}')->'configured' AS configured;
SELECT count(*) FROM queen.push('pop.window', '0', 'a', 'wb0');
SELECT count(*) FROM queen.push('pop.window', '1', 'a', 'wb1');
-- the partition was written within the window: nothing yet
SELECT count(*) AS within_window FROM queen.pop('pop.window', 'a', batch => 10);
SELECT count(*) AS within_window_wildcard FROM queen.pop('pop.window', batch => 10);
-- only the older segment is out of the window: still nothing (the newest counts)
UPDATE queen.log_segments SET created_at = now() - interval '2 minutes'
 WHERE partition_id = qtest.pid('pop.window', 'a') AND base_offset = 0;
SELECT count(*) AS newest_within_window FROM queen.pop('pop.window', 'a', batch => 10);
UPDATE queen.log_segments SET created_at = now() - interval '90 seconds'
 WHERE partition_id = qtest.pid('pop.window', 'a') AND base_offset = 1;
SELECT "offset" FROM queen.pop('pop.window', 'a', batch => 10) ORDER BY 1;

SELECT queen.configure_queue_v1('{"queue": "pop.delay", "options": {"delayedProcessing": 60}}')->'configured' AS configured;
SELECT count(*) FROM queen.push('pop.delay', '0', 'a', 'd0');
SELECT count(*) FROM queen.push('pop.delay', '1', 'a', 'd1');
SELECT count(*) FROM queen.push('pop.delay', '2', 'a', 'd2');
SELECT count(*) AS all_delayed FROM queen.pop('pop.delay', 'a', batch => 10);
-- the first two segments are old enough: they are delivered, the third waits
UPDATE queen.log_segments SET created_at = now() - interval '5 minutes' + base_offset * interval '1 second'
 WHERE partition_id = qtest.pid('pop.delay', 'a') AND base_offset < 2;
SELECT "offset", payload FROM queen.pop('pop.delay', 'a', batch => 10, auto_ack => true) ORDER BY 1;
SELECT count(*) AS still_delayed FROM queen.pop('pop.delay', 'a', batch => 10, auto_ack => true);
UPDATE queen.log_segments SET created_at = now() - interval '61 seconds'
 WHERE partition_id = qtest.pid('pop.delay', 'a') AND base_offset = 2;
SELECT "offset", payload FROM queen.pop('pop.delay', batch => 10, auto_ack => true) ORDER BY 1;

------------------------------------------------------------------------------
-- The cursor seal: a partition whose segments were all retained away is not
-- pending for ever; the next push is delivered
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'pop.seal',
       'payload', i, 'transactionId', 'seal-' || i)) FROM generate_series(0, 2) i));
SELECT count(*) FROM queen.pop('pop.seal', 'Default', batch => 1, auto_ack => true);
DELETE FROM queen.log_segments WHERE partition_id = qtest.pid('pop.seal', 'Default');
SELECT count(*) AS retained_away FROM queen.pop('pop.seal', batch => 10);
SELECT * FROM qtest.consumer('pop.seal', 'Default');
SELECT count(*) FROM queen.push('pop.seal', '3', 'Default', 'seal-3');
SELECT "offset", payload FROM queen.pop('pop.seal', batch => 10);
-- a retention gap is skipped: delivery resumes at the next segment
SELECT count(*) FROM queen.push('pop.gap', '0', 'Default', 'gap-0');
SELECT count(*) FROM queen.push('pop.gap', '1', 'Default', 'gap-1');
DELETE FROM queen.log_segments WHERE partition_id = qtest.pid('pop.gap', 'Default') AND base_offset = 0;
SELECT "offset", payload FROM queen.pop('pop.gap', 'Default', batch => 10);

------------------------------------------------------------------------------
-- A deep backlog delivers only the batch
------------------------------------------------------------------------------
SELECT count(*) FROM (
	SELECT queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'pop.deep', 'payload', s * 100 + i))
	                     FROM generate_series(0, 99) i)) FROM generate_series(0, 49) s) x;
SELECT "offset", payload FROM queen.pop('pop.deep', 'Default', batch => 3) ORDER BY 1;
SELECT * FROM qtest.consumer('pop.deep', 'Default');
-- a batch that ends inside a segment, from a cursor inside another
SELECT min("offset"), max("offset"), count(*) FROM queen.pop('pop.deep', 'Default', 'g-deep', batch => 150, auto_ack => true);
SELECT min("offset"), max("offset"), count(*) FROM queen.pop('pop.deep', 'Default', 'g-deep', batch => 150, auto_ack => true);
-- and reads only about as many segments as it delivers from (50 are stored)
-- (a transaction's table statistics are not flushed before it ends)
BEGIN;
SELECT idx_tup_fetch + seq_tup_read AS read_before
  FROM pg_stat_xact_user_tables WHERE relid = 'queen.log_segments'::regclass \gset
SELECT count(*) FROM queen.pop('pop.deep', 'Default', 'g-deep-cost', batch => 3);
SELECT idx_tup_fetch + seq_tup_read - :read_before < 20 AS few_segments_read
  FROM pg_stat_xact_user_tables WHERE relid = 'queen.log_segments'::regclass;
COMMIT;

------------------------------------------------------------------------------
-- A queue that does not exist delivers nothing.  For a named group its row is
-- created and the group registered, so a "new" subscription made before the
-- first push starts then; queue mode creates nothing.
------------------------------------------------------------------------------
SELECT count(*) AS no_rows FROM queen.pop('pop.missing');
SELECT count(*) AS no_rows FROM queen.pop('pop.missing', 'p');
SELECT count(*) AS queue_rows FROM queen.queues WHERE name = 'pop.missing';
SELECT count(*) AS no_rows FROM queen.pop('pop.missing', consumer_group => 'early', subscription_mode => 'new');
SELECT q.namespace, q.task, m.subscription_mode FROM queen.queues q
  JOIN queen.consumer_groups_metadata m ON m.queue_id = q.id WHERE q.name = 'pop.missing';
SELECT count(*) FROM queen.push('pop.missing', '"first"', 'p', 'm1');
SELECT partition, "offset", payload FROM queen.pop('pop.missing', consumer_group => 'early', subscription_mode => 'new');
-- an existing queue, a partition that does not exist yet
SELECT count(*) AS no_rows FROM queen.pop('pop.missing', 'nowhere', 'early');

------------------------------------------------------------------------------
-- In one transaction: a push and a pop that sees it, also with offsets the
-- transaction has not flushed yet; a rollback takes both back
------------------------------------------------------------------------------
BEGIN;
SELECT count(*) FROM queen.push('pop.tx', '"one"', 'a', 'tx1');
SELECT count(*) FROM queen.push('pop.tx', '"two"', 'a', 'tx2');
SELECT "offset", payload FROM queen.pop('pop.tx', 'a', batch => 10) ORDER BY 1;
SELECT count(*) FROM queen.push('pop.tx', '"three"', 'a', 'tx3');
SELECT "offset", payload FROM queen.pop('pop.tx', batch => 10, consumer_group => 'g-tx', auto_ack => true) ORDER BY 1;
ROLLBACK;
SELECT count(*) AS nothing_left FROM queen.queues WHERE name = 'pop.tx';

------------------------------------------------------------------------------
-- Payloads round-trip: null, {}, strings, numbers, multi-megabyte; an empty
-- payload (possible through the procedure contracts) is NULL
------------------------------------------------------------------------------
CREATE TEMP TABLE kinds (n int, payload jsonb);
INSERT INTO kinds VALUES (0, 'null'), (1, '{}'), (2, '"a string"'), (3, '42.50'), (4, '[1, "two"]'),
	(5, jsonb_build_object('big', repeat('0123456789abcdef', 262144)));
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'pop.kinds', 'payload', payload,
       'transactionId', 'k' || n) ORDER BY n) FROM kinds));
SELECT p."offset", octet_length(p.payload::text) AS bytes, p.payload = k.payload AS equal,
       p.payload::text = k.payload::text AS same_text, p.transaction_id
  FROM queen.pop('pop.kinds', batch => 10) p JOIN kinds k ON k.n = p."offset" ORDER BY 1;
-- (the push contracts refuse an empty payload: the stored frame is rewritten)
SELECT count(*) FROM queen.push('pop.kinds', '0', 'empty', 'e');
UPDATE queen.log_segments SET blob = queen.pack_frames(ARRAY[NULL::uuid], '{e}', ARRAY[''::bytea])
 WHERE partition_id = qtest.pid('pop.kinds', 'empty');
SELECT "offset", transaction_id, payload IS NULL AS null_payload FROM queen.pop('pop.kinds', 'empty');

------------------------------------------------------------------------------
-- Bad input: a clear error, and nothing written
------------------------------------------------------------------------------
SELECT (SELECT count(*) FROM queen.queues) AS queues_before,
       (SELECT count(*) FROM queen.log_consumers) AS consumers_before \gset
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.bad', batch => 0)$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.bad', 'p', 'g', batch => -1)$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop(NULL)$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.bad', E'p\x01')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.bad', consumer_group => '')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.bad', consumer_group => E'g\n')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop(repeat('q', 256))$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.bad', consumer_group => 'g', lease_seconds => 0)$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.bad', consumer_group => 'g', subscription_mode => 'newest')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.bad', consumer_group => 'g', subscription_from => 'yesterday-ish')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.bad', consumer_group => 'g', subscription_mode => 'timestamp')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop_discover()$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop_discover('pop', batch => 0)$$);
SELECT (SELECT count(*) FROM queen.queues) = :queues_before AS no_queue_written,
       (SELECT count(*) FROM queen.log_consumers) = :consumers_before AS no_cursor_written;
-- NULL for an optional argument is its default
SELECT count(*) FROM queen.push('pop.nulls', '1', 'Default', 'n1');
SELECT "offset", delivery_attempt, lease_expires_at > now() AS leased
  FROM queen.pop('pop.nulls', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);

------------------------------------------------------------------------------
-- pop_discover: every queue of the tenant matching namespace and/or task,
-- each partition leased for its own queue's leaseTime
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push('[{"queue": "popdisc.alpha", "partition": "x", "payload": 1},
                                  {"queue": "popdisc.alpha", "partition": "y", "payload": 2},
                                  {"queue": "popdisc.beta", "partition": "x", "payload": 3},
                                  {"queue": "popother.alpha", "partition": "x", "payload": 4}]');
SELECT queen.configure_queue_v1('{"queue": "popdisc.beta", "options": {"leaseTime": 120}}')->'configured' AS configured;
SELECT name, namespace, task, lease_time FROM queen.queues WHERE name IN ('popdisc.alpha', 'popdisc.beta', 'popother.alpha') ORDER BY 1;
SELECT queue, partition, "offset", payload,
       CASE WHEN lease_expires_at BETWEEN now() + interval '50 s' AND now() + interval '70 s' THEN '60 s'
            WHEN lease_expires_at BETWEEN now() + interval '110 s' AND now() + interval '130 s' THEN '120 s' END AS lease
  FROM queen.pop_discover('popdisc', batch => 10, max_partitions => 0) ORDER BY 1, 2, 3;
SELECT queue, partition, payload FROM queen.pop_discover(task => 'alpha', consumer_group => 'g-task', batch => 10,
       max_partitions => 0, auto_ack => true) ORDER BY 1, 2;
SELECT queue, partition, payload FROM queen.pop_discover('popdisc', 'beta', 'g-both', batch => 10, max_partitions => 0) ORDER BY 1, 2;
SELECT count(*) AS one_partition FROM queen.pop_discover('popdisc', consumer_group => 'g-one', batch => 10);
SELECT bool_and(lease_expires_at < now() + interval '10 s') AS lease_seconds_override
  FROM queen.pop_discover('popdisc', consumer_group => 'g-lease', batch => 10, max_partitions => 0, lease_seconds => 5);
SELECT count(*) AS no_such_namespace FROM queen.pop_discover('nowhere');

------------------------------------------------------------------------------
-- The wildcard's scan floor: idle partitions written before it are not read
-- (a partition only becomes pending again by a write, stamped no earlier
-- than the floor); its recompute, at most every 30 seconds per group, reads
-- the partitions written since the floor it replaces, and the whole queue
-- only without one (a first contact, a seek)
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'pop.floor', 'partition', 'p' || i,
       'payload', i)) FROM generate_series(0, 3) i));
SELECT count(*) FROM queen.pop('pop.floor', batch => 100, max_partitions => 0, auto_ack => true);
-- consumed: the next recompute (made due here) finds nothing pending, the floor is now
UPDATE queen.consumer_watermarks SET updated_at = now() - interval '1 minute'
 WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'pop.floor');
SELECT count(*) FROM queen.pop('pop.floor', batch => 100, max_partitions => 0, auto_ack => true);
SELECT consumer_group, last_empty_scan_at > now() - interval '1 minute' AS floor_is_recent,
       updated_at > now() - interval '1 minute' AS recomputed
  FROM queen.consumer_watermarks WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'pop.floor');
-- p0 pending behind the floor's back (only a seek could do that, and a seek
-- drops the floor), last written an hour ago: not read
UPDATE queen.log_partitions SET last_write_at = now() - interval '1 hour' WHERE id = qtest.pid('pop.floor', 'p0');
UPDATE queen.log_consumers SET committed = -1 WHERE partition_id = qtest.pid('pop.floor', 'p0');
SELECT count(*) AS hidden_by_floor FROM queen.pop('pop.floor', batch => 100, max_partitions => 0, auto_ack => true);
-- a write after the floor is seen at once
SELECT count(*) FROM queen.push('pop.floor', '10', 'p1');
SELECT partition, "offset", payload FROM queen.pop('pop.floor', batch => 100, max_partitions => 0, auto_ack => true);
-- nor by the recompute once due: it reads what was written since the floor
UPDATE queen.consumer_watermarks SET updated_at = now() - interval '1 minute'
 WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'pop.floor');
SELECT count(*) AS recompute_reads_since_floor FROM queen.pop('pop.floor', batch => 100, max_partitions => 0, auto_ack => true);
SELECT updated_at > now() - interval '1 minute' AS recomputed
  FROM queen.consumer_watermarks WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'pop.floor');
-- without a floor, as a seek leaves the group, the recompute reads the whole queue
DELETE FROM queen.consumer_watermarks WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'pop.floor');
SELECT partition, "offset", payload FROM queen.pop('pop.floor', batch => 100, max_partitions => 0, auto_ack => true);
-- floors go with their queue
SELECT count(*) AS floors_before FROM queen.consumer_watermarks \gset
SELECT queen.delete_queue_v1('pop.floor')->'existed' AS existed;
SELECT :floors_before - count(*) AS floors_removed FROM queen.consumer_watermarks;

------------------------------------------------------------------------------
-- The candidates a wildcard pop draws are kept for the session's next pops
-- (claim_scan.c): a list gone stale never hides what is pending.
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push('[{"queue": "pop.cand", "partition": "a", "payload": 1},
                                  {"queue": "pop.cand", "partition": "b", "payload": 2},
                                  {"queue": "pop.cand", "partition": "c", "payload": 3}]');
-- the draw finds a, b and c; this pop takes one of them
SELECT count(*) AS first FROM queen.pop('pop.cand', max_partitions => 1, auto_ack => true);
-- the other two are consumed behind the list's back, and d is written
SELECT count(*) AS by_name FROM (
  SELECT * FROM queen.pop('pop.cand', 'a', auto_ack => true) UNION ALL
  SELECT * FROM queen.pop('pop.cand', 'b', auto_ack => true) UNION ALL
  SELECT * FROM queen.pop('pop.cand', 'c', auto_ack => true)) x;
SELECT count(*) FROM queen.push('pop.cand', '4', 'd');
-- the listed ones have nothing: the pop draws afresh and finds d at once
SELECT partition, payload FROM queen.pop('pop.cand', max_partitions => 1, auto_ack => true);
-- a rolled back pop's partition is delivered again by this session
SELECT count(*) FROM queen.push('[{"queue": "pop.cand", "partition": "e", "payload": 5},
                                  {"queue": "pop.cand", "partition": "f", "payload": 6}]');
BEGIN;
SELECT count(*) AS rolled_back FROM queen.pop('pop.cand', max_partitions => 1, auto_ack => true);
ROLLBACK;
SELECT partition, payload FROM (
  SELECT * FROM queen.pop('pop.cand', max_partitions => 1, auto_ack => true) UNION ALL
  SELECT * FROM queen.pop('pop.cand', max_partitions => 1, auto_ack => true)) x ORDER BY 1;
SELECT count(*) AS nothing_left FROM queen.pop('pop.cand', batch => 10, max_partitions => 0);

------------------------------------------------------------------------------
-- queen.consumer_lag: what each consumer group has not acknowledged yet
------------------------------------------------------------------------------
SELECT count(*) FROM queen.push('[{"queue": "pop.lag", "partition": "a", "payload": 1},
                                  {"queue": "pop.lag", "partition": "a", "payload": 2},
                                  {"queue": "pop.lag", "partition": "b", "payload": 3}]');
-- nobody has consumed: queue mode is listed with everything
SELECT consumer_group, partitions_pending, messages_pending
  FROM queen.consumer_lag WHERE queue = 'pop.lag';
-- queue mode takes one message of a; g-lag takes both of a, leased
SELECT count(*) FROM queen.pop('pop.lag', 'a', auto_ack => true);
SELECT count(*) FROM queen.pop('pop.lag', 'a', 'g-lag', batch => 10);
-- queue mode: a's second and b's (no cursor yet: from its start); g-lag: leased is not acknowledged
SELECT consumer_group, partitions_pending, messages_pending
  FROM queen.consumer_lag WHERE queue = 'pop.lag' ORDER BY 1;
SELECT count(*) FROM queen.pop('pop.lag', 'b', 'g-lag', auto_ack => true);
SELECT consumer_group, partitions_pending, messages_pending
  FROM queen.consumer_lag WHERE queue = 'pop.lag' AND consumer_group = 'g-lag';

------------------------------------------------------------------------------
-- Privileges: pop ships SECURITY DEFINER for queen_consumer (sql/roles).
-- Altered to run with the caller's rights, it checks what its statements
-- need (UPDATE on log_partitions because a first contact locks the partition
-- row FOR KEY SHARE SKIP LOCKED rather than wait for a deletion; INSERT on
-- stats_marks because a cursor's creation marks its partition for the stats)
------------------------------------------------------------------------------
ALTER FUNCTION queen.pop(text,text,text,integer,integer,boolean,integer,text,text,interval) SECURITY INVOKER RESET search_path;
SELECT count(*) FROM queen.push('[{"queue": "pop.priv", "partition": "a", "payload": 1},
                                  {"queue": "pop.priv", "partition": "b", "payload": 2}]');
CREATE ROLE regress_queen_consumer;
GRANT USAGE ON SCHEMA queen, qtest TO regress_queen_consumer;
GRANT EXECUTE ON FUNCTION queen.pop(text,text,text,integer,integer,boolean,integer,text,text,interval) TO regress_queen_consumer;
GRANT SELECT ON queen.queues, queen.log_segments TO regress_queen_consumer;
GRANT SELECT, UPDATE ON queen.log_partitions TO regress_queen_consumer;
GRANT SELECT, INSERT, UPDATE ON queen.log_consumers, queen.consumer_watermarks TO regress_queen_consumer;
GRANT SELECT, INSERT ON queen.consumer_groups_metadata TO regress_queen_consumer;
GRANT INSERT ON queen.stats_marks TO regress_queen_consumer;
SET ROLE regress_queen_consumer;
SELECT partition, payload FROM queen.pop('pop.priv', 'a', 'g-priv');
SELECT partition, payload FROM queen.pop('pop.priv', consumer_group => 'g-priv', batch => 10, max_partitions => 0);
SELECT count(*) FROM queen.pop('pop.priv', batch => 10, max_partitions => 0, auto_ack => true);
RESET ROLE;
REVOKE UPDATE ON queen.log_partitions FROM regress_queen_consumer;
SET ROLE regress_queen_consumer;
SELECT qtest.expect_error($$SELECT * FROM queen.pop('pop.priv', 'b', 'g-other')$$);
RESET ROLE;
REVOKE ALL ON queen.queues, queen.log_segments, queen.log_partitions, queen.log_consumers,
              queen.consumer_watermarks, queen.consumer_groups_metadata, queen.stats_marks
  FROM regress_queen_consumer;
REVOKE EXECUTE ON FUNCTION queen.pop(text,text,text,integer,integer,boolean,integer,text,text,interval) FROM regress_queen_consumer;
REVOKE USAGE ON SCHEMA queen, qtest FROM regress_queen_consumer;
DROP ROLE regress_queen_consumer;
ALTER FUNCTION queen.pop(text,text,text,integer,integer,boolean,integer,text,text,interval) SECURITY DEFINER SET search_path = pg_catalog, queen, pg_temp;
