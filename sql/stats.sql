-- The incremental stats refresh (src/core/stats_refresh.c): after each kind
-- of change, an incremental refresh finds what a full pass finds
-- (pg_temp.drift() lists the rows where they differ: none), and it reads
-- only what may have changed.  Rows aged by hand (UPDATE, outside the core,
-- which marks nothing) are followed by a full pass before anything is
-- compared, as docs/SQL.md tells a DBA who writes the log's rows.

CREATE TEMP TABLE incremental (k text);
CREATE FUNCTION pg_temp.figures() RETURNS SETOF text LANGUAGE sql AS $$
	SELECT format('queue %s: partitions %s messages %s pushed %s dead %s oldest %s written %s',
				  q.name, s.partitions, s.messages, s.pushed, s.dead_letters,
				  s.oldest_message_at, s.last_write_at)
	  FROM queen.queue_stats s JOIN queen.queues q ON q.id = s.queue_id
	UNION ALL
	SELECT format('group %s/%s: partitions %s pending %s in %s leased %s in %s consumed %s oldest %s mode %s',
				  q.name, g.consumer_group, g.partitions, g.pending, g.partitions_pending,
				  g.leased, g.leases, g.consumed, g.oldest_pending_at, g.subscription_mode)
	  FROM queen.group_stats g JOIN queen.queues q ON q.id = g.queue_id
$$;
CREATE FUNCTION pg_temp.drift() RETURNS SETOF text LANGUAGE sql AS $$
	DELETE FROM incremental;
	SELECT FROM queen.stats_refresh();
	INSERT INTO incremental SELECT * FROM pg_temp.figures();
	SELECT FROM queen.stats_refresh(true);
	(SELECT 'incremental: ' || k FROM incremental EXCEPT ALL SELECT 'incremental: ' || f FROM pg_temp.figures() f)
	UNION ALL
	(SELECT 'full pass:   ' || f FROM pg_temp.figures() f EXCEPT ALL SELECT 'full pass:   ' || k FROM incremental)
	ORDER BY 1
$$;
-- the partitions of st.* last written an hour ago, as an idle one would be;
-- the wildcard pops' scan floors, which assume that whatever is pending was
-- stamped after them, forgotten as a seek forgets them (the next pop reads
-- the whole queue)
CREATE FUNCTION pg_temp.age() RETURNS void LANGUAGE sql AS $$
	UPDATE queen.log_partitions p SET last_write_at = now() - interval '1 hour'
	  FROM queen.queues q WHERE q.id = p.queue_id AND q.name LIKE 'st.%';
	DELETE FROM queen.consumer_watermarks w USING queen.queues q
	 WHERE q.id = w.queue_id AND q.name LIKE 'st.%';
	SELECT FROM queen.stats_refresh(true);
$$;

-- what the earlier tests left, counted once
SELECT queues >= 0 AS counted FROM queen.stats_refresh(true);

-- pushes, and two groups: one acknowledging, one holding a lease
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'st.a', 'partition', 'p' || (i % 4),
		'payload', i, 'transactionId', 'st-' || i)) FROM generate_series(0, 39) i));
SELECT count(*) FROM queen.pop('st.a', consumer_group => 'sg1', batch => 10, max_partitions => 2, auto_ack => true);
CREATE TEMP TABLE leased AS SELECT * FROM queen.pop('st.a', consumer_group => 'sg2', batch => 10, max_partitions => 1);
SELECT count(*) FROM leased;
SELECT * FROM pg_temp.drift();
SELECT 'st.a' AS queue, consumer_group, partitions, partitions_pending, pending, leased, leases, consumed
  FROM queen.group_stats g JOIN queen.queues q ON q.id = g.queue_id WHERE q.name = 'st.a' ORDER BY 2;

-- acks of the lease, on partitions no push has stamped since
SELECT pg_temp.age();
SELECT count(*) FILTER (WHERE a.success) AS acked
  FROM leased l CROSS JOIN LATERAL queen.ack(l.transaction_id, l.partition_id, l.lease_id,
											 consumer_group => 'sg2') a;
SELECT * FROM pg_temp.drift();

-- everything consumed: then an idle partition is read by no refresh.  A
-- change made outside the core to an idle cursor is not seen by an
-- incremental refresh, and is by a full pass.
SELECT count(*) FROM queen.pop('st.a', consumer_group => 'sg1', batch => 100, max_partitions => 4, auto_ack => true);
SELECT count(*) FROM queen.pop('st.a', consumer_group => 'sg2', batch => 100, max_partitions => 4, auto_ack => true);
SELECT pg_temp.age();
SELECT count(*) AS live FROM queen.stats_partitions s JOIN queen.queues q ON q.id = s.queue_id
 WHERE q.name = 'st.a' AND s.live;
UPDATE queen.log_consumers c SET total_consumed = total_consumed + 1000
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = c.partition_id AND q.name = 'st.a' AND p.name = 'p0' AND c.consumer_group = 'sg1';
SELECT * FROM pg_temp.drift();
UPDATE queen.log_consumers c SET total_consumed = total_consumed - 1000
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = c.partition_id AND q.name = 'st.a' AND p.name = 'p0' AND c.consumer_group = 'sg1';
SELECT pg_temp.age();

-- a push to one idle partition: read again through its stamp
SELECT status FROM queen.push('st.a', '{"n": 40}', 'p1');
SELECT * FROM pg_temp.drift();

-- a seek moves a group's cursors back: its queue is counted again
SELECT pg_temp.age();
SELECT queen.seek('st.a', 'sg2', at => '-infinity') > 0 AS moved;
SELECT * FROM pg_temp.drift();
SELECT pending FROM queen.group_stats g JOIN queen.queues q ON q.id = g.queue_id
 WHERE q.name = 'st.a' AND g.consumer_group = 'sg2';

-- retention moves a partition's start without stamping it: its mark
SELECT queen.configure_queue_v1('{"queue": "st.a", "options": {"retentionEnabled": true, "completedRetentionSeconds": 60}}') IS NOT NULL AS configured;
SELECT count(*) FROM queen.pop('st.a', consumer_group => 'sg1', batch => 10, max_partitions => 4, auto_ack => true);
SELECT count(*) FROM queen.pop('st.a', consumer_group => 'sg2', batch => 100, max_partitions => 4, auto_ack => true);
UPDATE queen.log_segments s SET created_at = s.created_at - interval '1 hour'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = s.partition_id AND q.name = 'st.a';
UPDATE queen.log_partitions p SET oldest_live_at = p.oldest_live_at - interval '1 hour'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'st.a';
SELECT pg_temp.age();
SELECT count(*) > 0 AS removed FROM queen.retention_run() WHERE kind = 'segments' AND queue = 'st.a';
SELECT * FROM pg_temp.drift();
SELECT messages < pushed AS retained_less FROM queen.queue_stats s JOIN queen.queues q ON q.id = s.queue_id
 WHERE q.name = 'st.a';

-- an idle partition removed: its mark takes it out of the figures
UPDATE queen.log_partitions p
   SET oldest_live_at = NULL, oldest_txn_at = NULL, txns_start = p.last_offset + 1,
	   created_at = now() - interval '40 days'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'st.a' AND p.name = 'p3';
DELETE FROM queen.log_txns t USING queen.log_partitions p, queen.queues q
 WHERE p.id = t.partition_id AND q.id = p.queue_id AND q.name = 'st.a' AND p.name = 'p3';
SELECT pg_temp.age();
UPDATE queen.log_partitions p SET last_write_at = now() - interval '40 days'
  FROM queen.queues q WHERE q.id = p.queue_id AND q.name = 'st.a' AND p.name = 'p3';
UPDATE queen.log_consumers c SET created_at = now() - interval '40 days'
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE p.id = c.partition_id AND q.name = 'st.a' AND p.name = 'p3';
SELECT kind, queue, partition FROM queen.retention_run() WHERE kind = 'partitions';
SELECT * FROM pg_temp.drift();
SELECT partitions FROM queen.queue_stats s JOIN queen.queues q ON q.id = s.queue_id WHERE q.name = 'st.a';

-- a cursor made where nothing is pending for its group (its subscription
-- starts tomorrow), by a pop naming the partition: its mark
SELECT status FROM queen.push('st.b', '{"n": 0}', 'x');
SELECT count(*) FROM queen.pop('st.b', consumer_group => 'sh', auto_ack => true);
SELECT queen.set_subscription('sh', now() + interval '1 day') AS subscriptions;
SELECT status FROM queen.push('st.b', '{"n": 1}', 'y');
SELECT pg_temp.age();
SELECT count(*) FROM queen.pop('st.b', 'y', consumer_group => 'sh', auto_ack => true);
SELECT * FROM pg_temp.drift();
SELECT partitions, pending FROM queen.group_stats g JOIN queen.queues q ON q.id = g.queue_id
 WHERE q.name = 'st.b' AND g.consumer_group = 'sh';

-- a new group, a subscription, a group deleted, a queue deleted
SELECT pg_temp.age();
SELECT count(*) FROM queen.pop('st.a', consumer_group => 'sg3', batch => 5, subscription_mode => 'new');
SELECT * FROM pg_temp.drift();
SELECT pg_temp.age();
SELECT queen.delete_consumer_group('sg2', 'st.a') > 0 AS deleted;
SELECT * FROM pg_temp.drift();
SELECT consumer_group FROM queen.group_stats g JOIN queen.queues q ON q.id = g.queue_id
 WHERE q.name = 'st.a' ORDER BY 1;

-- a subscription moved: what its group has pending on the partitions it
-- has no cursor on changes, with no stamp
SELECT queen.set_subscription('sg3', now() + interval '1 day') AS subscriptions;
SELECT status FROM queen.push('st.a', '{"n": 41}', 'p9');
SELECT count(*) FROM queen.pop('st.a', 'p9', consumer_group => 'sg1', auto_ack => true);
SELECT pg_temp.age();
SELECT queen.set_subscription('sg3', now() - interval '2 hours') AS subscriptions;
SELECT * FROM pg_temp.drift();
SELECT pending FROM queen.group_stats g JOIN queen.queues q ON q.id = g.queue_id
 WHERE q.name = 'st.a' AND g.consumer_group = 'sg3';
SELECT pg_temp.age();
-- rows of the deleted queue's figures, after an incremental refresh: none
SELECT queen.delete_queue_v1('st.b') ->> 'deleted' AS deleted;
SELECT groups >= 0 AS refreshed FROM queen.stats_refresh();
SELECT (SELECT count(*) FROM queen.stats_totals t
		 WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.id = t.queue_id)) AS sums,
	   (SELECT count(*) FROM queen.stats_partitions t
		 WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.id = t.queue_id)) AS partitions,
	   (SELECT count(*) FROM queen.stats_cursors t
		 WHERE NOT EXISTS (SELECT 1 FROM queen.queues q WHERE q.id = t.queue_id)) AS cursors;
SELECT * FROM pg_temp.drift();

-- nothing left behind for the next refresh
SELECT count(*) AS marks FROM queen.stats_marks;
