-- The ack (src/core/ack.c, src/sql/ack_sql.c): every branch of the decision
-- procedure and every per-item outcome, lease renewal, consumer-group
-- deletion and the dead-letter listing (src/core/consumer_admin.c).
-- Leases are made by writing the consumer row as a pop would.

-- A lease on (queue, partition, group): cursor c, batch (c, e], held by l.
CREATE FUNCTION pg_temp.lease(q text, p text, g text, c bigint, e bigint, l text,
                              secs int DEFAULT 60) RETURNS void LANGUAGE sql AS $$
	INSERT INTO queen.log_consumers AS x (partition_id, consumer_group, committed, batch_end,
	                                      worker_id, lease_expires_at, lease_acquired_at,
	                                      attempt_offset, attempt_count)
	VALUES (qtest.pid(q, p), g, c, e, l, now() + make_interval(secs => secs), now(), c + 1, 1)
	ON CONFLICT (partition_id, consumer_group) DO UPDATE
	   SET committed = EXCLUDED.committed, batch_end = EXCLUDED.batch_end,
	       worker_id = EXCLUDED.worker_id, lease_expires_at = EXCLUDED.lease_expires_at,
	       attempt_offset = EXCLUDED.attempt_offset, attempt_count = x.attempt_count + 1
$$;

-- The consumer row as the tests look at it.
CREATE FUNCTION pg_temp.row(q text, p text, g text DEFAULT '__QUEUE_MODE__')
RETURNS TABLE (committed bigint, batch_end bigint, worker_id text, leased boolean,
               retries int, attempts int, consumed bigint) LANGUAGE sql AS $$
	SELECT committed, batch_end, worker_id, lease_expires_at IS NOT NULL, batch_retry_count,
	       attempt_count, total_consumed
	  FROM queen.log_consumers WHERE partition_id = qtest.pid(q, p) AND consumer_group = g
$$;

-- n messages t<from>..t<from+n-1> pushed as one segment.
CREATE FUNCTION pg_temp.fill(q text, p text, first int, n int) RETURNS bigint LANGUAGE sql AS $$
	SELECT max(log_offset) FROM queen.push((SELECT jsonb_agg(jsonb_build_object(
		'queue', q, 'partition', p, 'payload', jsonb_build_object('n', i),
		'transactionId', 't' || i) ORDER BY i) FROM generate_series(first, first + n - 1) i))
$$;

SELECT pg_temp.fill('ack.a', 'p1', 0, 10);			-- offsets 0..9, one segment
SELECT count(*) FROM (SELECT queen.push('ack.a', jsonb_build_object('n', i), 'p1', 't' || i)
                        FROM generate_series(10, 19) i) s;	-- 10..19, a segment each
\set p1 '(SELECT qtest.pid(\'ack.a\', \'p1\'))'

-- ---------------------------------------------------------------- completed
-- A whole batch acknowledged: cursor at its end, lease released, the
-- delivery's attempt and retry state reset.
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', -1, 4, 'L1');
UPDATE queen.log_consumers SET batch_retry_count = 1 WHERE partition_id = :p1;
SELECT * FROM queen.ack(ARRAY['t0', 't1', 't2', 't3', 't4'], array_fill(:p1, ARRAY[5]),
                        array_fill('L1'::text, ARRAY[5]));
SELECT * FROM pg_temp.row('ack.a', 'p1');

-- Part of a batch: acking t7 alone completes the silent gaps t5 and t6,
-- and the lease is kept for the rest.
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', 4, 9, 'L2');
SELECT * FROM queen.ack('t7', :p1, 'L2');
SELECT * FROM pg_temp.row('ack.a', 'p1');
-- the rest of it: released
SELECT * FROM queen.ack('t9', :p1, 'L2');
SELECT * FROM pg_temp.row('ack.a', 'p1');

-- ------------------------------------------------------------------- noop, stale
-- Below the cursor: a duplicate completion is a noop, a late nack is stale.
SELECT * FROM queen.ack('t3', :p1);
SELECT * FROM queen.nack('t3', :p1, NULL, 'too late');
SELECT * FROM queen.reject('t8', :p1);
SELECT * FROM queen.ack('t5', :p1, NULL, 'retry');
-- nothing moved, nothing written
SELECT * FROM pg_temp.row('ack.a', 'p1');

-- ---------------------------------------------------------------- unresolved
SELECT * FROM queen.ack('never-pushed', :p1);
SELECT * FROM queen.ack('t3', '00000000-0000-0000-0000-0000000000ff'::uuid);
-- under a lease, a message above the leased batch is not this ack's
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', 9, 11, 'L3');
SELECT * FROM queen.ack('t15', :p1, 'L3');
SELECT * FROM pg_temp.row('ack.a', 'p1');

-- ---------------------------------------------------------------- wrong and expired leases
SELECT * FROM queen.ack('t10', :p1, 'WRONG');
SELECT * FROM queen.nack('t10', :p1, 'WRONG');
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = :p1;
SELECT * FROM queen.ack('t10', :p1, 'L3');
SELECT * FROM pg_temp.row('ack.a', 'p1');
-- A lease-less ack is not checked against the lease: it acts on the row's
-- batch whoever holds it (here an expired one).
SELECT * FROM queen.ack('t11', :p1, '');
SELECT * FROM pg_temp.row('ack.a', 'p1');
-- With no lease on the row, a lease-less ack reaches anything above the cursor.
SELECT * FROM queen.ack('t13', :p1);
SELECT * FROM pg_temp.row('ack.a', 'p1');
-- and a lease id given where the row has no lease is refused
SELECT * FROM queen.ack('t14', :p1, 'L3');

-- ---------------------------------------------------------------- failed, retry
-- A failed head above completed items: the completed prefix below it is
-- committed, the completed items above it are not (redelivered after it),
-- the lease is released at once and one retry is spent.
UPDATE queen.queues SET retry_limit = 2 WHERE name = 'ack.a';
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', 13, 19, 'L4');
SELECT * FROM queen.ack(ARRAY['t14', 't15', 't16', 't17', 't19'], array_fill(:p1, ARRAY[5]),
                        array_fill('L4'::text, ARRAY[5]),
                        ARRAY['completed', 'ok', 'failed', 'success', 'acked'],
                        errors => ARRAY[NULL, NULL, 'boom', NULL, NULL]);
SELECT * FROM pg_temp.row('ack.a', 'p1');
-- retry: redelivered, no budget spent
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', 15, 19, 'L5');
SELECT * FROM queen.ack('t16', :p1, 'L5', 'retry');
SELECT * FROM pg_temp.row('ack.a', 'p1');
-- At one offset dlq > failed > retry; the lowest offset decides.
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', 15, 19, 'L6');
SELECT index, success, error, lease_released, dlq
  FROM queen.ack(ARRAY['t18', 't16', 't16'], array_fill(:p1, ARRAY[3]),
                 array_fill('L6'::text, ARRAY[3]), ARRAY['failed', 'retry', 'failed']);
SELECT * FROM pg_temp.row('ack.a', 'p1');
-- The last retry of the budget (retry_limit 2), then out of retries: the
-- head goes to the DLQ with the nack's error and a payload snapshot, and
-- the cursor moves past it.
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', 15, 19, 'L7');
SELECT * FROM queen.nack('t16', :p1, 'L7', 'poison!');
SELECT * FROM pg_temp.row('ack.a', 'p1');
SELECT count(*) AS dead_letters FROM queen.log_dlq WHERE partition_id = :p1;
-- a status that is not one of 5.1's words is refused, so a typo spends no
-- retry (the HTTP door keeps Queen's "anything else fails"); failed
-- spends one (a fresh budget after the filing)
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', 16, 19, 'L8');
SELECT * FROM queen.ack('t17', :p1, 'L8', 'FAILED');
SELECT * FROM queen.ack('t17', :p1, 'L8', 'COMPLETED');
SELECT * FROM queen.ack(ARRAY['t17'], ARRAY[:p1], ARRAY['L8'], ARRAY['nack']);
SELECT * FROM pg_temp.row('ack.a', 'p1');
SELECT * FROM queen.ack('t17', :p1, 'L8', 'failed');
SELECT * FROM pg_temp.row('ack.a', 'p1');
SELECT d."offset", d.transaction_id, d.error, d.payload, d.retry_count, d.consumer_group,
       d.message_id = r.message_id AS same_message, d.created_at = r.created_at AS same_created
  FROM queen.log_dlq d JOIN queen.read('ack.a', 'p1', 16, 1) r ON r.log_offset = d."offset"
 WHERE d.partition_id = :p1;

-- ---------------------------------------------------------------- explicit dlq
-- reject: to the DLQ at once whatever the budget, the completed prefix
-- committed, silent gaps before it completed; without an error text the
-- dead letter says Queen's default.
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', 16, 19, 'L9');
SELECT index, success, error, lease_released, dlq, noop
  FROM queen.ack(ARRAY['t17', 't19', 't18'], array_fill(:p1, ARRAY[3]),
                 array_fill('L9'::text, ARRAY[3]), ARRAY['completed', 'dlq', 'completed']);
SELECT * FROM pg_temp.row('ack.a', 'p1');
SELECT "offset", transaction_id, error, payload, retry_count FROM queen.log_dlq
 WHERE partition_id = :p1 ORDER BY "offset";
-- two rejects: the lower is filed, the higher is told it was not
SELECT pg_temp.fill('ack.a', 'p1', 20, 3);
SELECT pg_temp.lease('ack.a', 'p1', '__QUEUE_MODE__', 19, 22, 'L10');
SELECT index, success, error, dlq
  FROM queen.ack(ARRAY['t22', 't20'], array_fill(:p1, ARRAY[2]),
                 array_fill('L10'::text, ARRAY[2]), ARRAY['dlq', 'dlq'],
                 errors => ARRAY['second', 'first']);
SELECT * FROM pg_temp.row('ack.a', 'p1');
SELECT "offset", error FROM queen.log_dlq WHERE partition_id = :p1 AND "offset" >= 20;

-- ---------------------------------------------------------------- DLQ off: dropped
-- retry_limit 0: the first failure exhausts the budget.  With
-- dead_letter_queue and dlq_after_max_retries both off the head is dropped;
-- either one on files it.
SELECT pg_temp.fill('ack.nodlq', 'Default', 0, 4);
UPDATE queen.queues SET retry_limit = 0, dead_letter_queue = false, dlq_after_max_retries = false
 WHERE name = 'ack.nodlq';
SELECT pg_temp.lease('ack.nodlq', 'Default', 'g', -1, 3, 'D1');
SELECT * FROM queen.ack(ARRAY['t0', 't1'], array_fill(qtest.pid('ack.nodlq', 'Default'), ARRAY[2]),
                        ARRAY['D1', 'D1'], ARRAY['ok', 'failed'], 'g');
SELECT * FROM pg_temp.row('ack.nodlq', 'Default', 'g');
SELECT count(*) AS nodlq_dead_letters FROM queen.log_dlq
 WHERE partition_id = qtest.pid('ack.nodlq', 'Default');
UPDATE queen.queues SET dead_letter_queue = true WHERE name = 'ack.nodlq';
SELECT pg_temp.lease('ack.nodlq', 'Default', 'g', 1, 3, 'D2');
SELECT * FROM queen.nack('t2', qtest.pid('ack.nodlq', 'Default'), 'D2', NULL, 'g');
SELECT "offset", error, retry_count, consumer_group FROM queen.log_dlq
 WHERE partition_id = qtest.pid('ack.nodlq', 'Default');
UPDATE queen.queues SET dead_letter_queue = false, dlq_after_max_retries = true WHERE name = 'ack.nodlq';
SELECT pg_temp.lease('ack.nodlq', 'Default', 'g', 2, 3, 'D3');
SELECT dlq FROM queen.nack('t3', qtest.pid('ack.nodlq', 'Default'), 'D3', NULL, 'g');

-- ---------------------------------------------------------------- consumer groups
-- Each group has its own cursor: g's acks made none for queue mode, which
-- never consumed here, and a group that never consumed is told so.
SELECT count(*) AS queue_mode_rows FROM pg_temp.row('ack.nodlq', 'Default');
SELECT * FROM queen.ack('t0', qtest.pid('ack.nodlq', 'Default'));
SELECT * FROM queen.ack('t0', qtest.pid('ack.nodlq', 'Default'), consumer_group => 'nobody');

-- ---------------------------------------------------------------- batch
-- Mixed partitions, leases and statuses, in an order that is neither
-- partition nor offset order: verdicts come back in input order.
SELECT pg_temp.fill('ack.b', 'x', 0, 5);
SELECT pg_temp.fill('ack.b', 'y', 100, 5);
SELECT pg_temp.lease('ack.b', 'x', '__QUEUE_MODE__', -1, 4, 'BX');
SELECT pg_temp.lease('ack.b', 'y', '__QUEUE_MODE__', -1, 4, 'BY');
SELECT * FROM queen.ack(
	ARRAY['t101', 't3', 'nope', 't100', 't1', 't104', 't4'],
	ARRAY[qtest.pid('ack.b', 'y'), qtest.pid('ack.b', 'x'), qtest.pid('ack.b', 'x'),
	      qtest.pid('ack.b', 'y'), qtest.pid('ack.b', 'x'), qtest.pid('ack.b', 'y'),
	      qtest.pid('ack.b', 'x')],
	ARRAY['BY', 'BX', 'BX', 'BY', 'BX', 'BY', 'BAD'],
	ARRAY['completed', 'failed', NULL, NULL, NULL, 'retry', NULL]);
SELECT * FROM pg_temp.row('ack.b', 'x');
SELECT * FROM pg_temp.row('ack.b', 'y');
-- an empty batch answers nothing
SELECT count(*) FROM queen.ack('{}'::text[], '{}'::uuid[]);

-- ---------------------------------------------------------------- transactions
-- The ack is the caller's transaction: a rollback leaves cursor and lease.
SELECT pg_temp.lease('ack.b', 'x', '__QUEUE_MODE__', 1, 4, 'BX2');
BEGIN;
SELECT success, lease_released FROM queen.ack('t4', qtest.pid('ack.b', 'x'), 'BX2');
ROLLBACK;
SELECT * FROM pg_temp.row('ack.b', 'x');

-- ---------------------------------------------------------------- bad input
-- refused before anything is written (the first item would have applied)
SELECT qtest.expect_error($$SELECT * FROM queen.ack(NULL, qtest.pid('ack.b', 'x'))$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack('t4', NULL::uuid)$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack('', qtest.pid('ack.b', 'x'))$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack('t4', qtest.pid('ack.b', 'x'), consumer_group => '')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack('t4', qtest.pid('ack.b', 'x'), consumer_group => E'a\tb')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack('t4', qtest.pid('ack.b', 'x'), consumer_group => NULL)$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack(ARRAY['t4', 't3'], ARRAY[qtest.pid('ack.b', 'x')])$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack(ARRAY['t4'], ARRAY[qtest.pid('ack.b', 'x')], ARRAY['BX2', 'BX2'])$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack(ARRAY['t4'], ARRAY[qtest.pid('ack.b', 'x')], statuses => ARRAY['ok', 'ok'])$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack(ARRAY['t4'], ARRAY[qtest.pid('ack.b', 'x')], errors => '{}'::text[])$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack(ARRAY['t4', NULL], ARRAY[qtest.pid('ack.b', 'x'), qtest.pid('ack.b', 'x')])$$);
SELECT qtest.expect_error($$SELECT * FROM queen.ack(ARRAY[['t4']], ARRAY[[qtest.pid('ack.b', 'x')]])$$);
SELECT qtest.expect_error($$SELECT * FROM queen.renew(NULL)$$);
SELECT qtest.expect_error($$SELECT queen.delete_consumer_group('')$$);
SELECT * FROM pg_temp.row('ack.b', 'x');

-- ---------------------------------------------------------------- renew
-- Every live lease of the lease id is renewed, never shortened; the answer
-- is the earliest new expiry.  Expired leases and other lease ids are left.
SELECT pg_temp.fill('ack.r', 'a', 0, 2);
SELECT pg_temp.fill('ack.r', 'b', 0, 2);
SELECT pg_temp.fill('ack.r', 'c', 0, 2);
SELECT pg_temp.fill('ack.r', 'd', 0, 2);
SELECT pg_temp.lease('ack.r', 'a', '__QUEUE_MODE__', -1, 1, 'R1', 10);
SELECT pg_temp.lease('ack.r', 'b', '__QUEUE_MODE__', -1, 1, 'R1', 3600);
SELECT pg_temp.lease('ack.r', 'c', '__QUEUE_MODE__', -1, 1, 'R1', -5);
SELECT pg_temp.lease('ack.r', 'd', '__QUEUE_MODE__', -1, 1, 'R2', 10);
CREATE TEMP TABLE before_renew AS
SELECT n AS name, c.partition_id, c.lease_expires_at
  FROM unnest(ARRAY['a', 'b', 'c', 'd']) n JOIN queen.log_consumers c ON c.partition_id = qtest.pid('ack.r', n);
SELECT renewed, expires_at >= clock_timestamp() + interval '50 seconds' AS about_a_minute,
       expires_at < clock_timestamp() + interval '70 seconds' AS not_more
  FROM queen.renew('R1', 60);
SELECT b.name, c.lease_expires_at > b.lease_expires_at AS extended,
       c.lease_expires_at = b.lease_expires_at AS unchanged
  FROM before_renew b JOIN queen.log_consumers c ON c.partition_id = b.partition_id ORDER BY b.name;
-- a shorter renewal shortens nothing (0 seconds or fewer is refused, 22023)
SELECT renewed FROM queen.renew('R1', 1);
SELECT b.name, c.lease_expires_at > b.lease_expires_at AS extended
  FROM before_renew b JOIN queen.log_consumers c ON c.partition_id = b.partition_id WHERE b.name = 'b';
SELECT * FROM queen.renew('no-such-lease');
SELECT * FROM queen.renew('');

-- ---------------------------------------------------------------- delete_consumer_group
SELECT pg_temp.lease('ack.r', 'a', 'gone', -1, 1, 'G1');
SELECT pg_temp.lease('ack.r', 'b', 'gone', 0, 1, 'G2');
SELECT pg_temp.lease('ack.b', 'x', 'gone', 2, 4, 'G3');
SELECT pg_temp.lease('ack.b', 'x', 'stays', 2, 4, 'G4');
INSERT INTO queen.consumer_groups_metadata (tenant_id, consumer_group, queue_id, subscription_mode, subscription_timestamp)
SELECT q.tenant_id, 'gone', q.id, 'all', '-infinity' FROM queen.queues q WHERE q.name IN ('ack.r', 'ack.b');
INSERT INTO queen.consumer_groups_metadata (tenant_id, consumer_group, namespace, subscription_mode, subscription_timestamp)
VALUES ('00000000-0000-0000-0000-000000000001', 'gone', 'ns', 'new', now());
-- the group's wildcard scan floors go with its cursors, whatever delete_metadata says
INSERT INTO queen.consumer_watermarks (queue_id, consumer_group, last_empty_scan_at, updated_at)
SELECT q.id, g, now(), now() FROM queen.queues q, unnest(ARRAY['gone', 'stays']) g
 WHERE q.name IN ('ack.r', 'ack.b');
CREATE FUNCTION pg_temp.floors() RETURNS TABLE (queue varchar, consumer_group text) LANGUAGE sql AS $$
	SELECT q.name, w.consumer_group FROM queen.consumer_watermarks w JOIN queen.queues q ON q.id = w.queue_id
	 WHERE q.name IN ('ack.r', 'ack.b') ORDER BY 1, 2
$$;
-- one queue, keeping its subscription
SELECT queen.delete_consumer_group('gone', 'ack.r', false);
SELECT q.name, p.name, c.consumer_group FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE c.consumer_group IN ('gone', 'stays') ORDER BY 1, 2, 3;
SELECT count(*) AS subscriptions FROM queen.consumer_groups_metadata WHERE consumer_group = 'gone';
SELECT * FROM pg_temp.floors();
-- one queue with its subscription
SELECT pg_temp.lease('ack.r', 'a', 'gone', -1, 1, 'G1');
SELECT queen.delete_consumer_group('gone', 'ack.r');
SELECT q.name, m.namespace FROM queen.consumer_groups_metadata m LEFT JOIN queen.queues q ON q.id = m.queue_id
 WHERE m.consumer_group = 'gone' ORDER BY 1, 2;
-- every queue of the tenant
SELECT queen.delete_consumer_group('gone');
SELECT q.name, p.name, c.consumer_group FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE c.consumer_group IN ('gone', 'stays') ORDER BY 1, 2, 3;
SELECT count(*) AS subscriptions FROM queen.consumer_groups_metadata WHERE consumer_group = 'gone';
SELECT * FROM pg_temp.floors();
-- another tenant's group of the same name is not this one
SELECT queen.delete_consumer_group('stays', 'no.such.queue');
SET queen.tenant = '00000000-0000-0000-0000-000000000002';
SELECT queen.delete_consumer_group('stays');
RESET queen.tenant;
SELECT count(*) AS stays FROM queen.log_consumers WHERE consumer_group = 'stays';

-- ---------------------------------------------------------------- the DLQ listing
SELECT * FROM queen._dlq_list('ack.a');
SELECT total, log_offset FROM queen._dlq_list('ack.a', page_limit => 1, page_offset => 1);
SELECT total, log_offset FROM queen._dlq_list('ack.a', page_limit => 0);
SELECT total, log_offset FROM queen._dlq_list('ack.a', page_offset => 10);
SELECT total, group_name FROM queen._dlq_list('ack.nodlq', consumer_group => 'g');
SELECT count(*) FROM queen._dlq_list('ack.nodlq', consumer_group => 'h');
SELECT count(*) FROM queen._dlq_list('ack.a', partition => 'p2');
SELECT count(*) FROM queen._dlq_list('ack.a', from_time => now() + interval '1 minute');
SELECT count(*) FROM queen._dlq_list('ack.a', to_time => now() - interval '1 minute');
SELECT count(*) FROM queen._dlq_list('no.such.queue');
SELECT qtest.expect_error($$SELECT * FROM queen._dlq_list('ack.a', page_limit => -1)$$);

-- ---------------------------------------------------------------- privileges
-- The ack ships SECURITY DEFINER for queen_consumer (sql/roles).  Altered to
-- run with the caller's rights, without UPDATE on log_consumers it is
-- refused, and nothing is written.
ALTER FUNCTION queen.ack(text,uuid,text,text,text,text,boolean) SECURITY INVOKER RESET search_path;
ALTER FUNCTION queen.reject(text,uuid,text,text,text,boolean) SECURITY INVOKER RESET search_path;
CREATE ROLE regress_queen_acker;
GRANT USAGE ON SCHEMA queen, qtest TO regress_queen_acker;
GRANT EXECUTE ON FUNCTION queen.ack(text,uuid,text,text,text,text,boolean), queen.reject(text,uuid,text,text,text,boolean) TO regress_queen_acker;
GRANT SELECT ON queen.queues, queen.log_partitions, queen.log_txns, queen.log_segments,
	queen.log_consumers TO regress_queen_acker;
SELECT pg_temp.lease('ack.b', 'x', '__QUEUE_MODE__', 1, 4, 'P1');
SET ROLE regress_queen_acker;
SELECT qtest.expect_error($$SELECT * FROM queen.ack('t4', qtest.pid('ack.b', 'x'), 'P1')$$);
RESET ROLE;
GRANT UPDATE ON queen.log_consumers TO regress_queen_acker;
SET ROLE regress_queen_acker;
SELECT * FROM queen.ack('t2', qtest.pid('ack.b', 'x'), 'P1');
-- filing a dead letter needs INSERT on log_dlq too
SELECT qtest.expect_error($$SELECT * FROM queen.reject('t3', qtest.pid('ack.b', 'x'), 'P1')$$);
RESET ROLE;
SELECT * FROM pg_temp.row('ack.b', 'x');
REVOKE ALL ON queen.queues, queen.log_partitions, queen.log_txns, queen.log_segments,
	queen.log_consumers FROM regress_queen_acker;
REVOKE EXECUTE ON FUNCTION queen.ack(text,uuid,text,text,text,text,boolean), queen.reject(text,uuid,text,text,text,boolean) FROM regress_queen_acker;
REVOKE USAGE ON SCHEMA queen, qtest FROM regress_queen_acker;
DROP ROLE regress_queen_acker;
ALTER FUNCTION queen.ack(text,uuid,text,text,text,text,boolean) SECURITY DEFINER SET search_path = pg_catalog, queen, pg_temp;
ALTER FUNCTION queen.reject(text,uuid,text,text,text,boolean) SECURITY DEFINER SET search_path = pg_catalog, queen, pg_temp;

-- ---------------------------------------------------------------- repeated transactionIds
-- Without dedup a transactionId can be stored twice: an ack resolves to its
-- lowest occurrence the ack can reach, and a copy below the cursor never
-- shadows one above it.
SELECT pg_temp.fill('ack.dup', 'Default', 0, 1);
UPDATE queen.queues SET dedup_window_seconds = 0 WHERE name = 'ack.dup';
SELECT log_offset FROM queen.push('ack.dup', '{"again": 1}', 'Default', 't1');
SELECT log_offset FROM queen.push('ack.dup', '{"again": 2}', 'Default', 't0');
SELECT pg_temp.lease('ack.dup', 'Default', '__QUEUE_MODE__', -1, 2, 'U1');
SELECT success, lease_released FROM queen.ack('t0', qtest.pid('ack.dup', 'Default'), 'U1');
SELECT committed, worker_id FROM pg_temp.row('ack.dup', 'Default');
SELECT success, lease_released, noop FROM queen.ack('t0', qtest.pid('ack.dup', 'Default'), 'U1');
SELECT committed, worker_id FROM pg_temp.row('ack.dup', 'Default');

-- ---------------------------------------------------------------- purged hashes
-- Offsets below the partition's txns_start have no hashes to trust (the
-- purge's watermark): an ack cannot resolve to them, and says so.
SELECT pg_temp.fill('ack.purged', 'Default', 0, 4);
UPDATE queen.log_partitions SET txns_start = 2 WHERE id = qtest.pid('ack.purged', 'Default');
SELECT pg_temp.lease('ack.purged', 'Default', '__QUEUE_MODE__', -1, 3, 'T1');
SELECT index, transaction_id, success, error IS NOT NULL AS told, lease_released
  FROM queen.ack(ARRAY['t1', 't2'], array_fill(qtest.pid('ack.purged', 'Default'), ARRAY[2]),
                 ARRAY['T1', 'T1']);
SELECT committed, batch_end FROM pg_temp.row('ack.purged', 'Default');
