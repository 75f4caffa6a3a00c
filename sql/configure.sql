-- Queue configuration: queen.configure_queue_v1 (POST /api/v1/configure) and
-- queen.delete_queue_v1 (DELETE /api/v1/resources/queues/:queue).

-- The options of a queue as stored, under their JSON names.
CREATE FUNCTION pg_temp.stored(qname text, tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_build_object(
		'priority', priority, 'leaseTime', lease_time, 'retryLimit', retry_limit,
		'retryDelay', retry_delay, 'maxSize', max_queue_size, 'ttl', ttl,
		'deadLetterQueue', dead_letter_queue, 'dlqAfterMaxRetries', dlq_after_max_retries,
		'delayedProcessing', delayed_processing, 'windowBuffer', window_buffer,
		'retentionSeconds', retention_seconds, 'completedRetentionSeconds', completed_retention_seconds,
		'retentionEnabled', retention_enabled, 'encryptionEnabled', encryption_enabled,
		'maxWaitTimeSeconds', max_wait_time_seconds, 'minPopWaitTime', min_pop_wait_time,
		'dedupWindowSeconds', dedup_window_seconds, 'retentionSinkHold', retention_sink_hold,
		'retentionSinkHoldMaxSeconds', retention_sink_max_seconds)
	  FROM queen.queues WHERE name = qname AND tenant_id = tenant
$$;

-- The configure defaults of Queen's configure route.
CREATE FUNCTION pg_temp.defaults() RETURNS jsonb LANGUAGE sql AS $$
	SELECT '{"priority": 0, "leaseTime": 300, "retryLimit": 3, "retryDelay": 1000, "maxSize": 0,
	         "ttl": 3600, "deadLetterQueue": true, "dlqAfterMaxRetries": true, "delayedProcessing": 0,
	         "windowBuffer": 0, "retentionSeconds": 0, "completedRetentionSeconds": 0,
	         "retentionEnabled": false, "encryptionEnabled": false, "maxWaitTimeSeconds": 0,
	         "minPopWaitTime": 0, "dedupWindowSeconds": 3600, "retentionSinkHold": "",
	         "retentionSinkHoldMaxSeconds": 604800}'::jsonb
$$;

-- Configure, then show what differs from the configure defaults, and check
-- that the echo is the stored row (queue id, namespace, task, every option).
CREATE FUNCTION pg_temp.cfg(body jsonb, tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS TABLE (namespace text, task text, not_default jsonb, echo_is_row bool) LANGUAGE plpgsql AS $$
DECLARE
	r jsonb := queen.configure_queue_v1(body, tenant);
BEGIN
	-- a separate statement, so that it sees the row the call wrote
	RETURN QUERY
	SELECT r->>'namespace', r->>'task',
	       COALESCE((SELECT jsonb_object_agg(key, value) FROM jsonb_each(r->'options')
	                  WHERE value IS DISTINCT FROM pg_temp.defaults()->key), '{}'),
	       (r->'options') = pg_temp.stored(r->>'queue', tenant)
	       AND (r->>'queueId')::uuid = q.id AND q.namespace = r->>'namespace' AND q.task = r->>'task'
	       AND (SELECT count(*) FROM jsonb_object_keys(r->'options')) = 19
	  FROM queen.queues q WHERE q.name = r->>'queue' AND q.tenant_id = tenant;
END
$$;

-- SQLSTATE, message and detail of a refused call.
CREATE FUNCTION pg_temp.refused(body jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
BEGIN
	PERFORM queen.configure_queue_v1(body);
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || SQLERRM || COALESCE(' (' || NULLIF(detail, '') || ')', '');
END
$$;

-- Rows of one queue: the queue, its partitions, segments and hash rows.
CREATE FUNCTION pg_temp.rows(qname text, tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS TABLE (queues bigint, partitions bigint, segments bigint, txns bigint) LANGUAGE sql AS $$
	WITH q AS (SELECT id FROM queen.queues WHERE name = qname AND tenant_id = tenant),
	     p AS (SELECT id FROM queen.log_partitions WHERE queue_id IN (SELECT id FROM q))
	SELECT (SELECT count(*) FROM q), (SELECT count(*) FROM p),
	       (SELECT count(*) FROM queen.log_segments WHERE partition_id IN (SELECT id FROM p)),
	       (SELECT count(*) FROM queen.log_segments WHERE partition_id IN (SELECT id FROM p) AND hashes IS NOT NULL)
	       + (SELECT count(*) FROM queen.log_txns WHERE partition_id IN (SELECT id FROM p))
$$;

------------------------------------------------------------------------------
-- Create: every option at its configure default, namespace and task derived
-- from the dotted name as a push derives them.
------------------------------------------------------------------------------
SELECT jsonb_pretty(queen.configure_queue_v1('{"queue": "cf.orders"}') - 'queueId') AS echo;
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders"}');
SELECT * FROM pg_temp.cfg('{"queue": "cfplain", "options": {}}');

------------------------------------------------------------------------------
-- Merge (the default): an absent key keeps the stored value.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"leaseTime": 30, "retryLimit": 5, "deadLetterQueue": false}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"ttl": 10, "retentionEnabled": true, "retentionSinkHold": "sink-1.a_b"}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "mode": "merge", "options": {"priority": -5, "maxSize": 100}}');
-- unknown keys are ignored and not stored
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"bogus": {"x": [1]}, "leaseTime": 31}}');
SELECT jsonb_object_keys(queen.configure_queue_v1('{"queue": "cf.orders", "options": {"bogus": 1}}')->'options') AS key
 ORDER BY 1;
SELECT queen.configure_queue_v1('{"queue": "cf.orders", "options": {"bogus": 1}}') ? 'bogus' AS bogus_echoed;

-- an explicit null resets that option (and only it) to its configure default
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"leaseTime": null, "retentionSinkHold": null}}');

-- minPopWaitTime is clamped to [0, 60000] as Queen clamps it
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"minPopWaitTime": 70000}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"minPopWaitTime": -5}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"minPopWaitTime": 250}}');

------------------------------------------------------------------------------
-- Replace: every option not given goes back to its configure default.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "mode": "replace", "options": {"ttl": 20}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"retryLimit": 9, "windowBuffer": 2}}');
-- "replace": true in the options, as Queen's SQL reads it
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"replace": true, "retryDelay": 5}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"retryLimit": 9, "windowBuffer": 2}}');
-- mode decides when both are given; "replace": false is a merge
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "mode": "merge", "options": {"replace": true, "ttl": 7}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"replace": false, "ttl": 8}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "mode": "replace"}');
-- restating the configuration does not rewrite the row
CREATE TEMP TABLE row_version AS SELECT xmin::text AS version FROM queen.queues WHERE name = 'cf.orders';
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"leaseTime": 300, "ttl": null}}');
SELECT xmin::text = (SELECT version FROM row_version) AS row_not_rewritten FROM queen.queues WHERE name = 'cf.orders';
SELECT * FROM pg_temp.cfg('{"queue": "cf.orders", "options": {"leaseTime": 301}}');
SELECT xmin::text <> (SELECT version FROM row_version) AS row_rewritten FROM queen.queues WHERE name = 'cf.orders';

------------------------------------------------------------------------------
-- Options at the top level, when there is no "options" object.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.cfg('{"queue": "cf.flat", "leaseTime": 45, "deadLetterQueue": false, "dedupWindowSeconds": 0}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.flat", "options": null, "ttl": 99}');
-- with an "options" object, top-level options are not read
SELECT * FROM pg_temp.cfg('{"queue": "cf.flat", "ttl": 1, "options": {"retryLimit": 4}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.flat", "replace": true}');

------------------------------------------------------------------------------
-- namespace and task: a given value wins, otherwise the stored one is kept
-- (replace included); null is ''.  Top-level ones are folded into an options
-- object when they are non-empty strings.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.x"}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.x", "namespace": "billing", "task": "invoices", "options": {}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.x", "options": {"leaseTime": 10}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.x", "mode": "replace"}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.x", "namespace": "", "task": "", "options": {}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.x", "task": "top", "options": {"task": "bag"}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.x", "options": {"namespace": null, "task": ""}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.x", "namespace": "flat"}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.new", "namespace": "given"}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.labels.null", "namespace": null, "task": null}');
-- a row without namespace and task (written by hand) keeps them as ''
INSERT INTO queen.queues (name) VALUES ('cf.legacy');
SELECT * FROM pg_temp.cfg('{"queue": "cf.legacy", "options": {"ttl": 1}}');

------------------------------------------------------------------------------
-- Refused bodies: 22023 with the message, the offending key in the detail,
-- and nothing written.
------------------------------------------------------------------------------
CREATE TEMP TABLE queues_before AS SELECT * FROM queen.queues;

SELECT pg_temp.refused(body) AS refused FROM (VALUES
	('[]'::jsonb), ('"cf.orders"'), ('1'), ('null'),
	('{}'), ('{"queue": 1}'), ('{"queue": null}'), ('{"queue": ["cf.orders"]}'),
	('{"queue": ""}'), ('{"queue": "cf.\u0001"}'), ('{"queue": "cf.\u007f"}'),
	(jsonb_build_object('queue', repeat('q', 256))),
	('{"queue": "cf.orders", "options": 5}'), ('{"queue": "cf.orders", "options": []}'),
	('{"queue": "cf.orders", "options": "leaseTime=5"}'),
	('{"queue": "cf.orders", "mode": "patch"}'), ('{"queue": "cf.orders", "mode": true}'),
	('{"queue": "cf.orders", "mode": 1}'), ('{"queue": "cf.orders", "mode": {}}'),
	('{"queue": "cf.orders", "options": {"replace": "yes"}}'),
	('{"queue": "cf.orders", "options": {"namespace": 5}}'),
	('{"queue": "cf.orders", "namespace": 5, "options": {}}'),
	('{"queue": "cf.orders", "options": {"task": []}}'),
	(jsonb_build_object('queue', 'cf.orders', 'namespace', repeat('é', 256))),
	('{"queue": "cf.orders", "options": {"leaseTime": 0}}'),
	('{"queue": "cf.orders", "options": {"leaseTime": -1}}'),
	('{"queue": "cf.orders", "options": {"leaseTime": "300"}}'),
	('{"queue": "cf.orders", "options": {"leaseTime": 1.5}}'),
	('{"queue": "cf.orders", "options": {"leaseTime": 300.0}}'),
	('{"queue": "cf.orders", "options": {"leaseTime": 2147483648}}'),
	('{"queue": "cf.orders", "options": {"leaseTime": true}}'),
	('{"queue": "cf.orders", "options": {"leaseTime": {}}}'),
	('{"queue": "cf.orders", "options": {"leaseTime": [300]}}'),
	('{"queue": "cf.orders", "options": {"retryLimit": -1}}'),
	('{"queue": "cf.orders", "options": {"retryDelay": -1}}'),
	('{"queue": "cf.orders", "options": {"maxSize": -1}}'),
	('{"queue": "cf.orders", "options": {"ttl": -1}}'),
	('{"queue": "cf.orders", "options": {"priority": 2147483648}}'),
	('{"queue": "cf.orders", "options": {"priority": -2147483649}}'),
	('{"queue": "cf.orders", "options": {"delayedProcessing": -1}}'),
	('{"queue": "cf.orders", "options": {"windowBuffer": -1}}'),
	('{"queue": "cf.orders", "options": {"retentionSeconds": -1}}'),
	('{"queue": "cf.orders", "options": {"completedRetentionSeconds": -1}}'),
	('{"queue": "cf.orders", "options": {"maxWaitTimeSeconds": -1}}'),
	('{"queue": "cf.orders", "options": {"minPopWaitTime": 99999999999}}'),
	('{"queue": "cf.orders", "options": {"minPopWaitTime": "10"}}'),
	('{"queue": "cf.orders", "options": {"dedupWindowSeconds": -1}}'),
	('{"queue": "cf.orders", "options": {"dedupWindowSeconds": "3600"}}'),
	('{"queue": "cf.orders", "options": {"deadLetterQueue": "true"}}'),
	('{"queue": "cf.orders", "options": {"dlqAfterMaxRetries": 1}}'),
	('{"queue": "cf.orders", "options": {"retentionEnabled": "false"}}'),
	('{"queue": "cf.orders", "options": {"encryptionEnabled": 0}}'),
	('{"queue": "cf.orders", "options": {"retentionSinkHold": 5}}'),
	('{"queue": "cf.orders", "options": {"retentionSinkHold": "s3:bucket"}}'),
	(jsonb_build_object('queue', 'cf.orders', 'options', jsonb_build_object('retentionSinkHold', repeat('s', 65)))),
	('{"queue": "cf.orders", "options": {"retentionSinkHoldMaxSeconds": 59}}'),
	('{"queue": "cf.orders", "options": {"retentionSinkHoldMaxSeconds": 31536001}}'),
	('{"queue": "cf.orders", "leaseTime": -1}'),
	-- a refused option fails the whole call, even next to valid ones and for a new queue
	('{"queue": "cf.orders", "options": {"ttl": 5, "leaseTime": 0}}'),
	('{"queue": "cf.never", "options": {"ttl": 5, "leaseTime": 0}}')) AS t(body);

SELECT (SELECT count(*) FROM (TABLE queen.queues EXCEPT TABLE queues_before) x) AS changed_rows,
       (SELECT count(*) FROM (TABLE queues_before EXCEPT TABLE queen.queues) x) AS lost_rows;
SELECT qtest.expect_error($$SELECT queen.configure_queue_v1(NULL)$$) AS null_body;
SELECT qtest.expect_error($$SELECT queen.configure_queue_v1('{"queue": "cf.x"}', NULL)$$) AS null_tenant;

------------------------------------------------------------------------------
-- A queue created by a push has the column defaults (lease 60); configuring
-- it merges onto them and keeps its partitions and messages.
------------------------------------------------------------------------------
SELECT status, log_offset FROM queen.push('[{"queue": "cf.pushed", "partition": "a", "payload": 1},
                                           {"queue": "cf.pushed", "partition": "b", "payload": 2}]');
SELECT namespace, task, pg_temp.stored('cf.pushed')->'leaseTime' AS lease_time FROM queen.queues WHERE name = 'cf.pushed';
CREATE TEMP TABLE pushed_before AS
	SELECT q.id AS queue_id, p.id AS partition_id, p.last_offset
	  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id WHERE q.name = 'cf.pushed';
SELECT * FROM pg_temp.cfg('{"queue": "cf.pushed", "options": {"retryLimit": 7}}');
SELECT (SELECT count(*) FROM pushed_before) AS partitions_before,
       (SELECT count(*) FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
         JOIN pushed_before b ON b.queue_id = q.id AND b.partition_id = p.id AND b.last_offset = p.last_offset
         WHERE q.name = 'cf.pushed') AS partitions_kept;
SELECT log_offset, payload FROM queen.read('cf.pushed', 'b');
SELECT status, log_offset FROM queen.push('cf.pushed', '3', 'b');
SELECT * FROM pg_temp.cfg('{"queue": "cf.pushed", "mode": "replace"}');

------------------------------------------------------------------------------
-- dedupWindowSeconds applies to the very next push.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.cfg('{"queue": "cf.dedup", "options": {"leaseTime": 30}}');
SELECT status, log_offset FROM queen.push('cf.dedup', '{"v": 1}', 'Default', 'order-1');
SELECT status, log_offset FROM queen.push('cf.dedup', '{"v": 2}', 'Default', 'order-1');
-- window 0: no probe, the same transactionId is stored again
SELECT * FROM pg_temp.cfg('{"queue": "cf.dedup", "options": {"dedupWindowSeconds": 0}}');
SELECT status, log_offset FROM queen.push('cf.dedup', '{"v": 3}', 'Default', 'order-1');
-- back to an hour: a duplicate of the first one again; the lease was kept
SELECT * FROM pg_temp.cfg('{"queue": "cf.dedup", "options": {"dedupWindowSeconds": 3600}}');
SELECT status, log_offset FROM queen.push('cf.dedup', '{"v": 4}', 'Default', 'order-1');
-- null is the default window (3600)
SELECT * FROM pg_temp.cfg('{"queue": "cf.dedup", "options": {"dedupWindowSeconds": 0}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.dedup", "options": {"dedupWindowSeconds": null}}');
SELECT status, log_offset FROM queen.push('cf.dedup', '{"v": 5}', 'Default', 'order-1');
-- within one transaction, as the broker runs configure and push
BEGIN;
SELECT (queen.configure_queue_v1('{"queue": "cf.dedup", "options": {"dedupWindowSeconds": 0}}')->'options'->'dedupWindowSeconds') AS dedup_window;
SELECT status, log_offset FROM queen.push('cf.dedup', '{"v": 6}', 'Default', 'order-1');
ROLLBACK;
SELECT pg_temp.stored('cf.dedup')->'dedupWindowSeconds' AS dedup_window, (SELECT last_offset FROM queen.log_partitions WHERE id = qtest.pid('cf.dedup', 'Default')) AS last_offset;

------------------------------------------------------------------------------
-- Delete: the queue row, its partitions, segments and hash rows; nothing of
-- any other queue.
------------------------------------------------------------------------------
SELECT status FROM queen.push('[{"queue": "cf.doomed", "partition": "a", "payload": 1, "transactionId": "t1"},
                                {"queue": "cf.doomed", "partition": "a", "payload": 2, "transactionId": "t2"},
                                {"queue": "cf.doomed", "partition": "b", "payload": 3},
                                {"queue": "cf.doomed", "partition": "c", "payload": 4}]');
SELECT status FROM queen.push('cf.doomed', '5', 'a', 't3');
SELECT * FROM pg_temp.rows('cf.doomed');
CREATE TEMP TABLE others_before AS
	SELECT (SELECT count(*) FROM queen.queues WHERE name <> 'cf.doomed') AS queues,
	       (SELECT count(*) FROM queen.log_partitions) - 3 AS partitions,
	       (SELECT count(*) FROM queen.log_segments) - 4 AS segments,
	       (SELECT count(*) FROM queen.log_segments WHERE hashes IS NOT NULL)
	       + (SELECT count(*) FROM queen.log_txns) - 4 AS txns;
SELECT queen.delete_queue_v1('cf.doomed') AS deleted;
SELECT * FROM pg_temp.rows('cf.doomed');
SELECT (SELECT count(*) FROM queen.queues) AS queues, (SELECT count(*) FROM queen.log_partitions) AS partitions,
       (SELECT count(*) FROM queen.log_segments) AS segments,
       (SELECT count(*) FROM queen.log_segments WHERE hashes IS NOT NULL) + (SELECT count(*) FROM queen.log_txns) AS txns
EXCEPT TABLE others_before;
-- a queue that does not exist (any more) succeeds and says so
SELECT queen.delete_queue_v1('cf.doomed') AS deleted_again;
SELECT queen.delete_queue_v1('cf.never-existed') AS missing;
-- a name no push could have created is refused as push refuses it
SELECT qtest.expect_error($$SELECT queen.delete_queue_v1('')$$) AS empty_name;
SELECT qtest.expect_error($$SELECT queen.delete_queue_v1(E'a\x01b')$$) AS control_character;
SELECT qtest.expect_error($$SELECT queen.delete_queue_v1(repeat('x', 600))$$) AS too_long;
SELECT qtest.expect_error($$SELECT queen.delete_queue_v1(NULL)$$) AS null_name;
-- the name is free again: a push recreates it from scratch, with offset 0,
-- the column defaults and no memory of old transactionIds
SELECT status, log_offset FROM queen.push('cf.doomed', '6', 'a', 't1');
SELECT * FROM pg_temp.rows('cf.doomed');
SELECT pg_temp.stored('cf.doomed')->'leaseTime' AS lease_time;
-- a delete that rolls back leaves everything
BEGIN;
SELECT queen.delete_queue_v1('cf.doomed')->'existed' AS existed;
ROLLBACK;
SELECT * FROM pg_temp.rows('cf.doomed');
-- consumption's rows go with their queue: cursors and leases by the cascade,
-- dead letters (no foreign key) by the delete itself, subscriptions by the
-- cascade from queues; another queue's rows stay
SELECT status FROM queen.push('[{"queue": "cf.consumed", "partition": "p", "payload": 1},
                                {"queue": "cf.kept", "partition": "p", "payload": 2}]');
INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)
	SELECT p.id, g, 0 FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id,
	       unnest(ARRAY['__QUEUE_MODE__', 'g1']) g
	 WHERE q.name IN ('cf.consumed', 'cf.kept');
INSERT INTO queen.log_dlq (partition_id, consumer_group, "offset", message_id, transaction_id,
                           payload, error, retry_count, created_at)
	SELECT p.id, 'g1', 0, gen_random_uuid(), 'dead-' || q.name, '{"x": 1}', 'boom', 3, now()
	  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	 WHERE q.name IN ('cf.consumed', 'cf.kept');
INSERT INTO queen.consumer_groups_metadata (tenant_id, consumer_group, queue_id,
                                            subscription_mode, subscription_timestamp)
	SELECT tenant_id, 'g1', id, 'new', now() FROM queen.queues WHERE name IN ('cf.consumed', 'cf.kept');
SELECT queen.delete_queue_v1('cf.consumed')->'existed' AS existed;
SELECT (SELECT count(*) FROM queen.log_consumers) AS consumers,
       (SELECT string_agg(transaction_id, ',' ORDER BY transaction_id) FROM queen.log_dlq) AS dead_letters,
       (SELECT count(*) FROM queen.consumer_groups_metadata) AS subscriptions;

------------------------------------------------------------------------------
-- Tenants: configure and delete act on their own tenant's queue only.
------------------------------------------------------------------------------
SELECT * FROM pg_temp.cfg('{"queue": "cf.shared", "options": {"leaseTime": 11}}');
SELECT * FROM pg_temp.cfg('{"queue": "cf.shared", "options": {"leaseTime": 22}}', '00000000-0000-0000-0000-0000000000b2');
SELECT pg_temp.stored('cf.shared')->'leaseTime' AS tenant_a_lease;
SELECT status, log_offset FROM queen.push('cf.shared', '"a"', 'Default', 'x');
SET queen.tenant = '00000000-0000-0000-0000-0000000000b2';
SELECT status, log_offset FROM queen.push('cf.shared', '"b"', 'Default', 'x');
RESET queen.tenant;
SELECT queen.delete_queue_v1('cf.shared', '00000000-0000-0000-0000-0000000000b2') AS deleted_in_b;
SELECT * FROM pg_temp.rows('cf.shared', '00000000-0000-0000-0000-0000000000b2');
SELECT * FROM pg_temp.rows('cf.shared');
SELECT pg_temp.stored('cf.shared')->'leaseTime' AS tenant_a_lease, log_offset, payload FROM queen.read('cf.shared');
SELECT queen.delete_queue_v1('cf.shared', '00000000-0000-0000-0000-0000000000c3') AS missing_in_c;
SELECT qtest.expect_error($$SELECT queen.delete_queue_v1('cf.shared', NULL)$$) AS null_tenant;
-- without p_tenant, both act for the session's tenant (queen.tenant), as push does
SET queen.tenant = '00000000-0000-0000-0000-0000000000b2';
SELECT (queen.configure_queue_v1('{"queue": "cf.session", "options": {"leaseTime": 33}}'))->'options'->'leaseTime' AS lease;
SELECT tenant_id, lease_time FROM queen.queues WHERE name = 'cf.session';
SELECT queen.delete_queue_v1('cf.session') AS deleted_in_session_tenant;
RESET queen.tenant;
SELECT count(*) AS left_anywhere FROM queen.queues WHERE name = 'cf.session';
