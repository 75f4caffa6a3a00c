-- Administration from SQL: the stats tables and their refresh, the views a
-- DBA reads (queues_overview, consumer_groups, consumer_group_partitions),
-- the broker's answers as JSON (queen._api_*), and the writes: seek,
-- set_subscription, dlq_purge, dlq_replay, dlq_forget.  Everything is for
-- the session's tenant; what a write names must exist (42704).

-- a tenant of its own, so that the other tests' queues stay out of the figures
SET queen.tenant = '00000000-0000-0000-0000-0000000000ad';
CREATE TEMP VIEW adm_dlq AS
SELECT d.* FROM queen.log_dlq d JOIN queen.log_partitions p ON p.id = d.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = queen.current_tenant();
SELECT queen.configure_queue_v1('{"queue": "adm.orders", "namespace": "shop", "task": "billing", "options": {"retryLimit": 0}}',
								queen.current_tenant()) IS NOT NULL AS configured;
SELECT count(*) FROM (SELECT queen.push('adm.orders', jsonb_build_object('n', g), 'p' || (g % 2), 'o' || g)
						FROM generate_series(1, 10) g) x;
SELECT status FROM queen.push('adm.other', '{"x": 1}');
-- g1 consumes 3 of p0, g2 leases 2 of p1, queue mode rejects one into the DLQ
SELECT count(*) FROM queen.pop('adm.orders', 'p0', consumer_group => 'g1', batch => 3, auto_ack => true);
SELECT count(*) FROM queen.pop('adm.orders', 'p1', consumer_group => 'g2', batch => 2);
SELECT r.dlq FROM queen.pop('adm.orders', 'p1') p,
	   LATERAL queen.reject(p.transaction_id, p.partition_id, p.lease_id, 'boom') r;

-- before any refresh the overview knows the queues but not their figures
SELECT queue, partitions, messages, refreshed_at IS NULL AS never FROM queen.queues_overview ORDER BY queue;
SELECT queues >= 2 AS counted FROM queen.stats_refresh();
SELECT queue, namespace, task, partitions, messages, pushed, pending, leased, consumed,
	   consumer_groups, dead_letters
  FROM queen.queues_overview ORDER BY queue;
SELECT queue, consumer_group, partitions, partitions_pending, pending, leased, leases, consumed,
	   subscription_mode
  FROM queen.consumer_groups ORDER BY queue, consumer_group;
SELECT queue, partition, consumer_group, committed, pending, leased
  FROM queen.consumer_group_partitions WHERE queue = 'adm.orders' ORDER BY 2, 3;

-- the broker's answers, as JSON
SELECT j->'total' AS total, json_array_length(j->'queues') AS listed,
	   j->'queues'->0->'name' AS first, j->'queues'->0->'messages' AS messages
  FROM queen._api_queues(queen.current_tenant(), NULL, NULL, 1, 0) j;
SELECT json_array_length(j->'queues') AS in_shop FROM queen._api_queues(queen.current_tenant(), 'shop', NULL, 100, 0) j;
SELECT j->'name' AS name, j->'options'->'retryLimit' AS retry_limit,
	   j->'partitionCount' AS partitions, json_array_length(j->'partitions') AS page,
	   j->'partitions'->0->'name' AS first, j->'totals' AS totals
  FROM queen._api_queue(queen.current_tenant(), 'adm.orders', 1, 1) j;
SELECT queen._api_queue(queen.current_tenant(), 'adm.nope', 10, 0) IS NULL AS not_found;
SELECT j->'queues' AS queues, j->'partitions' AS partitions, j->'namespaces' AS namespaces,
	   j->'tasks' AS tasks, j->'messages' AS messages
  FROM queen._api_overview(queen.current_tenant()) j;
SELECT queen._api_groupings(queen.current_tenant(), false) AS namespaces;
SELECT queen._api_groupings(queen.current_tenant(), true) AS tasks;
SELECT e->>'name' AS name, e->>'queueName' AS queue, e->'members' AS members,
	   e->'partitionsWithLag' AS behind, e->'totalLag' AS lag, e->>'state' AS state
  FROM json_array_elements(queen._api_consumer_groups(queen.current_tenant())) e ORDER BY 2, 1;
SELECT e->>'consumer_group' AS grp, e->>'partition_name' AS partition, e->'offset_lag' AS lag
  FROM json_array_elements(queen._api_lagging(queen.current_tenant(), 0, 100)) e ORDER BY 1, 2;
SELECT json_array_length(queen._api_lagging(queen.current_tenant(), 3600, 100)) AS lagging_an_hour;
SELECT p->>'partition' AS partition, p->'committed' AS committed, p->'offsetLag' AS lag,
	   p->'leaseActive' AS leased
  FROM json_array_elements(queen._api_consumer_group(queen.current_tenant(), 'g2', 100)->'adm.orders'->'partitions') p;
SELECT queen._api_consumer_group(queen.current_tenant(), 'nobody', 100) IS NULL AS not_found;
SELECT j->'messages' AS messages, j->'leases' AS leases, j->'deadLetterQueue' AS dlq
  FROM queen._api_status(queen.current_tenant(), 'adm.orders', NULL, NULL, now() - interval '1 hour', now()) j;

-- messages: one by its transactionId, and the newest of a queue
SELECT j->>'transactionId' AS txn, j->'offset' AS off, j->>'status' AS status,
	   j->'payload' AS payload, j->>'errorMessage' AS error
  FROM queen._api_message(queen.current_tenant(), (SELECT partition_id FROM adm_dlq LIMIT 1), 'o1') j;
SELECT j->>'status' AS status FROM queen._api_message(queen.current_tenant(),
	(SELECT partition_id FROM queen.consumer_group_partitions WHERE partition = 'p0' LIMIT 1), 'o2') j;
-- delivery attempts per group: a message leased twice (the first lease taken back) counts 2,
-- one committed counts none (NULL), one never delivered 0
SELECT status FROM queen.push('adm.attempts', '{"n": 1}', 'a', 'att1');
SELECT status FROM queen.push('adm.attempts', '{"n": 2}', 'a', 'att2');
SELECT count(*) FROM queen.pop('adm.attempts', 'a', 'ga', batch => 1);
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = (SELECT partition_id FROM queen.consumer_group_partitions
						WHERE queue = 'adm.attempts' AND consumer_group = 'ga');
SELECT count(*) FROM queen.pop('adm.attempts', 'a', 'ga', batch => 1);
SELECT count(*) FROM queen.pop('adm.attempts', 'a', 'gb', batch => 1, auto_ack => true);
SELECT t AS txn, g->>'name' AS grp, g->'deliveryAttempts' AS attempts
  FROM unnest(ARRAY['att1', 'att2']) t,
	   json_array_elements(queen._api_message(queen.current_tenant(),
		   (SELECT DISTINCT partition_id FROM queen.consumer_group_partitions WHERE queue = 'adm.attempts'), t)
		   ->'consumerGroups') g
 ORDER BY 1, 2;
SELECT queen._api_message(queen.current_tenant(), (SELECT partition_id FROM adm_dlq LIMIT 1), 'none') IS NULL AS not_found;
SELECT e->>'transactionId' AS txn, e->>'partition' AS partition, e->>'status' AS status
  FROM json_array_elements(queen._api_messages(queen.current_tenant(), 'adm.orders', NULL, NULL, 3, 0)->'messages') e;
SELECT e->>'transactionId' AS txn
  FROM json_array_elements(queen._api_messages(queen.current_tenant(), 'adm.orders', NULL, 'dead_letter', 10, 0)->'messages') e;

-- seek: to the end (nothing pending, leases released), back to a moment
-- (what was pushed at or after it is pending again), one partition
SELECT queen.seek('adm.orders', 'g2', to_end => true) AS moved;
SELECT partition, committed, pending, leased FROM queen.consumer_group_partitions
 WHERE queue = 'adm.orders' AND consumer_group = 'g2' ORDER BY 1;
SELECT queen.seek('adm.orders', 'g2', at => '-infinity') AS moved;
SELECT partition, committed, pending FROM queen.consumer_group_partitions
 WHERE queue = 'adm.orders' AND consumer_group = 'g2' ORDER BY 1;
SELECT queen.seek('adm.orders', 'g3', to_end => true, partition => 'p1') AS moved;
SELECT partition, committed FROM queen.consumer_group_partitions WHERE consumer_group = 'g3';
SELECT count(*) AS redelivered FROM queen.pop('adm.orders', 'p0', consumer_group => 'g2', batch => 100, auto_ack => true);
SELECT queen.seek('adm.nope', 'g2', to_end => true);
SELECT queen.seek('adm.orders', 'g2', to_end => true, partition => 'p9');
SELECT queen.seek('adm.orders', 'g2');
SELECT queen.seek('adm.orders', E'bad\x01group', to_end => true);

-- a group's subscriptions move to a moment
SELECT queen.set_subscription('g1', '2026-01-01 00:00:00+00') AS subscriptions;
SELECT subscription_mode, subscription_timestamp FROM queen.consumer_groups_metadata
 WHERE consumer_group = 'g1' AND tenant_id = queen.current_tenant();

-- dead letters: a replay pushes to the partition's tail as dlq:<id> and
-- removes the dead letter in one transaction; again, it is gone; a replay
-- rolled back leaves it
SELECT id AS dlq_id FROM adm_dlq \gset
BEGIN;
SELECT result, transaction_id = 'dlq:' || :'dlq_id' AS txn_named, partition, log_offset FROM queen.dlq_replay(:'dlq_id');
ROLLBACK;
SELECT count(*) AS dead_letters FROM adm_dlq;
SELECT result, partition, log_offset FROM queen.dlq_replay(:'dlq_id');
SELECT count(*) AS dead_letters FROM adm_dlq;
\set VERBOSITY sqlstate
SELECT * FROM queen.dlq_replay(:'dlq_id');
\set VERBOSITY default
SELECT * FROM queen.dlq_replay('00000000-0000-0000-0000-000000000000');
SELECT payload, transaction_id LIKE 'dlq:%' AS replayed FROM queen.read('adm.orders', 'p1', 5);
-- a dead letter whose replay id is stored already moves nothing and stays
SELECT r.dlq FROM queen.pop('adm.orders', 'p1') p,
	   LATERAL queen.reject(p.transaction_id, p.partition_id, p.lease_id, 'again') r;
SELECT id AS dlq_id2 FROM adm_dlq \gset
SELECT status FROM queen.push('adm.orders', '{"spoof": 1}', 'p1', 'dlq:' || :'dlq_id2');
SELECT result FROM queen.dlq_replay(:'dlq_id2');
SELECT count(*) AS dead_letters FROM adm_dlq;
-- forget a message's dead letters; purge a queue's
SELECT queen.dlq_forget((SELECT partition_id FROM adm_dlq), (SELECT transaction_id FROM adm_dlq)) AS forgotten;
SELECT queen.dlq_forget((SELECT partition_id FROM queen.consumer_group_partitions LIMIT 1), 'nothing') AS forgotten;
SELECT r.dlq FROM queen.pop('adm.orders', 'p1', batch => 1) p,
	   LATERAL queen.reject(p.transaction_id, p.partition_id, p.lease_id, 'third') r;
SELECT queen.dlq_purge('adm.orders', 'nobody') AS purged;
SELECT queen.dlq_purge('adm.orders') AS purged;
SELECT queen.dlq_purge('adm.nope');

-- what another tenant sees: none of it
SET queen.tenant = '00000000-0000-0000-0000-0000000000aa';
SELECT count(*) FROM queen.queues_overview;
SELECT queen._api_queue(queen.current_tenant(), 'adm.orders', 10, 0) IS NULL AS not_found;
SELECT queen.seek('adm.orders', 'g2', to_end => true);
SET queen.tenant = '00000000-0000-0000-0000-0000000000ad';

-- the history the time series read: one row per queue and minute
SELECT queues >= 2 AS counted FROM queen.stats_refresh();
SELECT count(*) > 0 AS has_history FROM queen.stats_history h
  JOIN queen.queues q ON q.id = h.queue_id WHERE q.name = 'adm.orders' AND q.tenant_id = queen.current_tenant();
SELECT json_array_length(j->'series') > 0 AS has_series, j->'bucketMinutes' AS bucket
  FROM queen._api_queue_ops(queen.current_tenant(), 'adm.orders', now() - interval '1 hour', now()) j;
SELECT j->'bucketMinutes' AS bucket FROM queen._api_status(queen.current_tenant(), NULL, NULL, NULL, now() - interval '2 days', now()) j;
RESET queen.tenant;
