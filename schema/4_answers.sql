-- schema/4_answers.sql: the broker's administration answers as SQL
-- functions, the message lookups, and the SQL door's administration writes.

------------------------------------------------------------------------------
-- The broker's administration answers (src/core/admin.c runs them for the
-- routes of docs/HTTP.md "Administration"), one function a route, as JSON in
-- Queen's shapes, for the tenant given.  Plain SQL over the views and tables
-- above: callable from SQL too, e.g. SELECT queen._api_overview(queen.current_tenant()).
-- NULL means "not found" (the broker's 404).
------------------------------------------------------------------------------

-- A time as the broker renders it: UTC, microseconds.
CREATE FUNCTION queen._ts(t timestamptz)
RETURNS text
LANGUAGE sql STABLE
AS $$ SELECT to_char($1 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $$;

-- Seconds since the last queen.stats_refresh(), -1 if none yet.
CREATE FUNCTION queen._stats_age()
RETURNS integer
LANGUAGE sql STABLE
AS $$ SELECT coalesce(extract(epoch FROM now() - max(refreshed_at))::integer, -1) FROM queen.queue_stats $$;

-- GET /api/v1/resources/queues and /api/v1/status/queues
CREATE FUNCTION queen._api_queues(tenant uuid, namespace text, task text,
								  page_limit integer, page_offset bigint)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	SELECT json_build_object(
		'queues', coalesce((
			SELECT json_agg(json_build_object(
				'id', o.queue_id, 'name', o.queue, 'namespace', o.namespace, 'task', o.task,
				'createdAt', queen._ts(o.created_at), 'partitions', o.partitions,
				'messages', json_build_object('total', o.messages,
											  'pending', o.waiting,
											  'processing', o.leased, 'pushed', o.pushed,
											  'deadLetter', o.dead_letters),
				'consumerGroups', o.consumer_groups, 'maxLagSeconds', o.max_lag_seconds)
				ORDER BY o.created_at DESC, o.queue)
			  FROM (SELECT * FROM queen._queues_overview o
					 WHERE o.tenant_id = $1 AND ($2 IS NULL OR o.namespace = $2)
					   AND ($3 IS NULL OR o.task = $3)
					 ORDER BY o.created_at DESC, o.queue LIMIT $4 OFFSET $5) o), '[]'),
		'total', (SELECT count(*) FROM queen.queues q WHERE q.tenant_id = $1
					 AND ($2 IS NULL OR q.namespace = $2) AND ($3 IS NULL OR q.task = $3)),
		'pagination', json_build_object('limit', $4, 'offset', $5),
		'statsAge', queen._stats_age())
$$;

-- A queue's options under Queen's names.
CREATE FUNCTION queen._queue_options(q queen.queues)
RETURNS json
LANGUAGE sql STABLE
AS $$
	SELECT json_build_object(
		'priority', $1.priority, 'leaseTime', $1.lease_time, 'retryLimit', $1.retry_limit,
		'retryDelay', $1.retry_delay, 'maxSize', $1.max_queue_size, 'ttl', $1.ttl,
		'deadLetterQueue', $1.dead_letter_queue, 'dlqAfterMaxRetries', $1.dlq_after_max_retries,
		'delayedProcessing', $1.delayed_processing, 'windowBuffer', $1.window_buffer,
		'retentionSeconds', $1.retention_seconds,
		'completedRetentionSeconds', $1.completed_retention_seconds,
		'retentionEnabled', $1.retention_enabled, 'encryptionEnabled', $1.encryption_enabled,
		'maxWaitTimeSeconds', $1.max_wait_time_seconds, 'minPopWaitTime', $1.min_pop_wait_time,
		'dedupWindowSeconds', $1.dedup_window_seconds,
		'retentionSinkHold', $1.retention_sink_hold,
		'retentionSinkHoldMaxSeconds', $1.retention_sink_max_seconds,
		'namespace', $1.namespace, 'task', $1.task)
$$;

-- A partition as the queue routes show it, live: messages retained, and
-- for its groups the most pending and the leased.
CREATE FUNCTION queen._partition_json(p queen.log_partitions)
RETURNS json
LANGUAGE sql STABLE
AS $$
	SELECT json_build_object(
		'id', $1.id, 'name', $1.name, 'createdAt', queen._ts($1.created_at),
		'lastOffset', $1.last_offset, 'logStart', $1.log_start,
		'messages', json_build_object(
			'total', $1.last_offset - $1.log_start + 1,
			'pending', coalesce(c.waiting, $1.last_offset - $1.log_start + 1),
			'processing', coalesce(c.leased, 0),
			'completed', GREATEST(coalesce(c.done, 0), 0),
			'deadLetter', (SELECT count(*) FROM queen.log_dlq d WHERE d.partition_id = $1.id)),
		'cursor', json_build_object('totalConsumed', coalesce(c.consumed, 0),
									'consumerGroups', coalesce(c.groups, 0)),
		'oldestMessage', queen._ts($1.oldest_live_at), 'lastWriteAt', queen._ts($1.last_write_at))
	  FROM (SELECT max(GREATEST($1.last_offset - GREATEST(x.committed, $1.log_start - 1)
							 - CASE WHEN x.lease_expires_at > now() THEN x.batch_end - x.committed ELSE 0 END,
							 0)) AS waiting,
				   max(CASE WHEN x.lease_expires_at > now() THEN x.batch_end - x.committed ELSE 0 END) AS leased,
				   min(x.committed - $1.log_start + 1) AS done,
				   sum(x.total_consumed) AS consumed, count(*) AS groups
			  FROM queen.log_consumers x WHERE x.partition_id = $1.id) c
$$;

-- GET /api/v1/resources/queues/:queue and /api/v1/status/queues/:queue:
-- every option, the partitions paged by name, the groups as last refreshed.
CREATE FUNCTION queen._api_queue(tenant uuid, queue text, page_limit integer, page_offset bigint)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	SELECT json_build_object(
		'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
		'priority', q.priority, 'createdAt', queen._ts(q.created_at),
		'options', queen._queue_options(q),
		'config', json_build_object('leaseTime', q.lease_time, 'retryLimit', q.retry_limit,
									'retryDelay', q.retry_delay, 'ttl', q.ttl,
									'maxQueueSize', q.max_queue_size,
									'deadLetterQueue', q.dead_letter_queue),
		'partitions', coalesce((SELECT json_agg(queen._partition_json(p) ORDER BY p.name)
								  FROM (SELECT * FROM queen.log_partitions p WHERE p.queue_id = q.id
										 ORDER BY p.name LIMIT $3 OFFSET $4) p), '[]'),
		'partitionCount', (SELECT count(*) FROM queen.log_partitions p WHERE p.queue_id = q.id),
		'totals', (SELECT json_build_object(
						'total', coalesce(sum(p.last_offset - p.log_start + 1), 0),
						'pushed', coalesce(sum(p.last_offset + 1), 0),
						'deadLetter', (SELECT count(*) FROM queen.log_dlq d
										 JOIN queen.log_partitions p2 ON p2.id = d.partition_id
										WHERE p2.queue_id = q.id))
					 FROM queen.log_partitions p WHERE p.queue_id = q.id),
		'consumerGroups', coalesce((SELECT json_agg(json_build_object(
						'name', g.consumer_group, 'partitions', g.partitions,
						'partitionsWithLag', g.partitions_pending, 'pending', g.pending,
						'leased', g.leased, 'lagSeconds', g.lag_seconds,
						'subscriptionMode', g.subscription_mode,
						'subscriptionTimestamp', queen._ts(g.subscription_timestamp))
						ORDER BY g.consumer_group)
					 FROM queen._consumer_groups g WHERE g.queue_id = q.id), '[]'),
		'pagination', json_build_object('limit', $3, 'offset', $4),
		'statsAge', queen._stats_age())
	  FROM queen.queues q WHERE q.tenant_id = $1 AND q.name = $2
$$;

-- GET /api/v1/resources/overview
CREATE FUNCTION queen._api_overview(tenant uuid)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	SELECT json_build_object(
		'queues', count(*), 'partitions', coalesce(sum(o.partitions), 0),
		'namespaces', count(DISTINCT nullif(o.namespace, '')), 'tasks', count(DISTINCT nullif(o.task, '')),
		'consumerGroups', coalesce(sum(o.consumer_groups), 0),
		'messages', json_build_object(
			'total', coalesce(sum(o.messages), 0),
			'pending', coalesce(sum(o.waiting), 0),
			'processing', coalesce(sum(o.leased), 0),
			'pushed', coalesce(sum(o.pushed), 0),
			'deadLetter', coalesce(sum(o.dead_letters), 0)),
		'lag', json_build_object('time', json_build_object(
			'max', coalesce(max(o.max_lag_seconds), 0),
			'avg', coalesce(round(avg(o.max_lag_seconds)), 0))),
		'timestamp', queen._ts(now()), 'statsAge', queen._stats_age())
	  FROM queen._queues_overview o WHERE o.tenant_id = $1
$$;

-- GET /api/v1/resources/namespaces (by_task false) and /tasks (true)
CREATE FUNCTION queen._api_groupings(tenant uuid, by_task boolean)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	SELECT json_build_object(CASE WHEN $2 THEN 'tasks' ELSE 'namespaces' END,
		coalesce(json_agg(json_build_object(
			CASE WHEN $2 THEN 'task' ELSE 'namespace' END, x.name,
			'queues', x.queues, 'partitions', x.partitions,
			'messages', json_build_object('total', x.messages, 'pending', x.pending))
			ORDER BY x.name), '[]'))
	  FROM (SELECT CASE WHEN $2 THEN o.task ELSE o.namespace END AS name, count(*) AS queues,
				   sum(o.partitions) AS partitions, sum(o.messages) AS messages,
				   sum(o.waiting) AS pending
			  FROM queen._queues_overview o
			 WHERE o.tenant_id = $1 AND CASE WHEN $2 THEN o.task ELSE o.namespace END <> ''
			 GROUP BY 1) x
$$;

-- GET /api/v1/consumer-groups: each (group, queue) as last refreshed.
CREATE FUNCTION queen._api_consumer_groups(tenant uuid)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	SELECT coalesce(json_agg(json_build_object(
		'name', g.consumer_group, 'queueName', g.queue, 'topics', json_build_array(g.queue),
		'members', g.partitions, 'partitionsWithLag', g.partitions_pending,
		'totalLag', g.pending, 'leased', g.leased, 'maxTimeLag', g.lag_seconds,
		'state', CASE WHEN g.lag_seconds > 300 THEN 'Lagging'
					  WHEN g.partitions > 0 THEN 'Stable' ELSE 'Dead' END,
		'subscriptionMode', g.subscription_mode,
		'subscriptionTimestamp', queen._ts(g.subscription_timestamp),
		'statsAge', GREATEST(extract(epoch FROM now() - g.refreshed_at), 0)::integer)
		ORDER BY g.consumer_group, g.queue), '[]')
	  FROM queen._consumer_groups g WHERE g.tenant_id = $1
$$;

-- GET /api/v1/consumer-groups/lagging: partitions whose oldest pending
-- message has waited more than min_lag seconds, longest first, live.
CREATE FUNCTION queen._api_lagging(tenant uuid, min_lag integer, page_limit integer)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	SELECT coalesce(json_agg(json_build_object(
		'consumer_group', x.consumer_group, 'queue_name', x.queue,
		'partition_name', x.partition, 'partition_id', x.partition_id,
		'worker_id', x.worker_id, 'offset_lag', x.pending,
		'time_lag_seconds', x.lag, 'lag_hours', round(x.lag / 3600.0, 2),
		'oldest_unconsumed_at', queen._ts(x.oldest_pending_at),
		'last_consumed_at', NULL::text)
		ORDER BY x.lag DESC, x.queue, x.partition, x.consumer_group), '[]')
	  FROM (SELECT v.*, extract(epoch FROM now() - v.oldest_pending_at)::bigint AS lag
			  FROM queen._consumer_group_partitions v
			 WHERE v.tenant_id = $1 AND v.pending > 0
			   AND v.oldest_pending_at < now() - make_interval(secs => $2)
			 ORDER BY v.oldest_pending_at LIMIT $3) x
$$;

-- GET /api/v1/consumer-groups/:group: per queue, its partitions with a
-- cursor of the group, live; NULL when the group has no cursor anywhere.
CREATE FUNCTION queen._api_consumer_group(tenant uuid, consumer_group text, page_limit integer)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	SELECT json_object_agg(y.queue, y.j)
	  FROM (SELECT x.queue, json_build_object(
				'partitions', json_agg(json_build_object(
					'partition', x.partition, 'partitionId', x.partition_id,
					'workerId', x.worker_id, 'committed', x.committed,
					'lastOffset', x.last_offset, 'offsetLag', x.pending,
					'leased', x.leased,
					'timeLagSeconds', coalesce(extract(epoch FROM now() - x.oldest_pending_at)::bigint, 0),
					'leaseActive', x.lease_expires_at IS NOT NULL AND x.lease_expires_at > now(),
					'leaseExpiresAt', queen._ts(x.lease_expires_at),
					'totalConsumed', x.total_consumed) ORDER BY x.partition),
				'subscriptionMode', (SELECT m.subscription_mode FROM queen.consumer_groups_metadata m
									  WHERE m.queue_id = x.queue_id AND m.consumer_group = $2
										AND m.partition_name = '' AND m.namespace IS NULL
										AND m.task IS NULL),
				'subscriptionTimestamp', (SELECT queen._ts(m.subscription_timestamp)
										   FROM queen.consumer_groups_metadata m
										  WHERE m.queue_id = x.queue_id AND m.consumer_group = $2
											AND m.partition_name = '' AND m.namespace IS NULL
											AND m.task IS NULL)) AS j
			  FROM (SELECT * FROM queen._consumer_group_partitions v
					 WHERE v.tenant_id = $1 AND v.consumer_group = $2
					 ORDER BY v.queue, v.partition LIMIT $3) x
			 GROUP BY x.queue, x.queue_id) y
$$;

-- The width of a time series' buckets, in minutes, as Queen picks it.
CREATE FUNCTION queen._bucket_minutes(from_time timestamptz, to_time timestamptz)
RETURNS integer
LANGUAGE sql IMMUTABLE
AS $$
	SELECT CASE WHEN $2 - $1 <= interval '1 hour' THEN 1
				WHEN $2 - $1 <= interval '6 hours' THEN 5
				WHEN $2 - $1 <= interval '1 day' THEN 15
				WHEN $2 - $1 <= interval '7 days' THEN 60
				ELSE 360 END
$$;

-- Per bucket of the time range, summed over the tenant's queues that the
-- filters select (NULL: any): pushed and consumed in it (differences of the
-- history's cumulative counts), pending, leased, dead letters and the
-- longest wait at its end.
CREATE FUNCTION queen._series(tenant uuid, queue text, namespace text, task text,
							  from_time timestamptz, to_time timestamptz)
RETURNS TABLE (bucket timestamptz, queue_name text, pushed bigint, consumed bigint,
			   pending bigint, leased bigint, dead_letters bigint, partitions bigint,
			   max_lag_seconds bigint, bucket_minutes integer)
LANGUAGE sql STABLE
SET jit = off
AS $$
	WITH w AS (SELECT queen._bucket_minutes($5, $6) AS m),
	b AS (SELECT to_timestamp(floor(extract(epoch FROM h.bucket) / (w.m * 60)) * w.m * 60) AS bucket,
				 q.name AS queue_name, max(h.pushed) AS pushed, max(h.consumed) AS consumed,
				 (array_agg(h.pending ORDER BY h.bucket DESC))[1] AS pending,
				 (array_agg(h.leased ORDER BY h.bucket DESC))[1] AS leased,
				 (array_agg(h.dead_letters ORDER BY h.bucket DESC))[1] AS dead_letters,
				 (array_agg(h.partitions ORDER BY h.bucket DESC))[1] AS partitions,
				 max(h.max_lag_seconds) AS max_lag_seconds, min(q.created_at) AS created_at
			FROM queen.stats_history h JOIN queen.queues q ON q.id = h.queue_id, w
		   WHERE q.tenant_id = $1 AND ($2 IS NULL OR q.name = $2)
			 AND ($3 IS NULL OR q.namespace = $3) AND ($4 IS NULL OR q.task = $4)
			 AND h.bucket >= $5 - make_interval(mins => w.m) AND h.bucket <= $6
		   GROUP BY 1, 2)
	SELECT b.bucket, b.queue_name,
		   GREATEST(b.pushed - coalesce(lag(b.pushed) OVER q, b.first), 0),
		   GREATEST(b.consumed - coalesce(lag(b.consumed) OVER q, b.first), 0),
		   b.pending, b.leased, b.dead_letters, b.partitions, b.max_lag_seconds, w.m
	  FROM (SELECT b.*,
				   -- a queue's first bucket: from 0 if it was created since the
				   -- bucket before, else unknown (nothing counted)
				   CASE WHEN b.created_at >= b.bucket - make_interval(mins => w.m) THEN 0
						ELSE NULL END AS first
			  FROM b, w) b, w
	WINDOW q AS (PARTITION BY b.queue_name ORDER BY b.bucket)
	 ORDER BY b.bucket, b.queue_name
$$;

-- GET /api/v1/status: throughput over the range, and the state now.
CREATE FUNCTION queen._api_status(tenant uuid, queue text, namespace text, task text,
								  from_time timestamptz, to_time timestamptz)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	WITH s AS (SELECT * FROM queen._series($1, $2, $3, $4, $5, $6)),
	t AS (SELECT s.bucket, sum(s.pushed) AS pushed, sum(s.consumed) AS consumed,
				 sum(s.pending) AS pending, max(s.max_lag_seconds) AS max_lag,
				 max(s.bucket_minutes) AS m
			FROM s WHERE s.bucket >= $5 GROUP BY s.bucket),
	o AS (SELECT * FROM queen._queues_overview o WHERE o.tenant_id = $1
			 AND ($2 IS NULL OR o.queue = $2) AND ($3 IS NULL OR o.namespace = $3)
			 AND ($4 IS NULL OR o.task = $4))
	SELECT json_build_object(
		'timeRange', json_build_object('from', queen._ts($5), 'to', queen._ts($6)),
		'bucketMinutes', queen._bucket_minutes($5, $6),
		'throughput', coalesce((SELECT json_agg(json_build_object(
				'timestamp', queen._ts(t.bucket), 'ingested', t.pushed, 'processed', t.consumed,
				'ingestedPerSecond', round(t.pushed / (t.m * 60.0), 2),
				'processedPerSecond', round(t.consumed / (t.m * 60.0), 2),
				'pending', t.pending, 'maxLagSeconds', t.max_lag) ORDER BY t.bucket DESC)
			  FROM t), '[]'),
		'queues', coalesce((SELECT json_agg(json_build_object(
				'id', o.queue_id, 'name', o.queue, 'namespace', o.namespace, 'task', o.task,
				'partitions', o.partitions, 'totalConsumed', o.consumed,
				'pending', o.waiting, 'deadLetters', o.dead_letters)
				ORDER BY o.queue) FROM o), '[]'),
		'messages', (SELECT json_build_object(
				'total', coalesce(sum(o.messages), 0), 'pushed', coalesce(sum(o.pushed), 0),
				'pending', coalesce(sum(o.waiting), 0),
				'processing', coalesce(sum(o.leased), 0),
				'completed', coalesce(sum(o.consumed), 0),
				'deadLetter', coalesce(sum(o.dead_letters), 0)) FROM o),
		'leases', (SELECT json_build_object(
				'active', count(*), 'partitionsWithLeases', count(DISTINCT v.partition_id),
				'totalLeased', coalesce(sum(v.leased), 0))
			  FROM queen._consumer_group_partitions v
			 WHERE v.tenant_id = $1 AND v.leased > 0 AND v.queue_id IN (SELECT o.queue_id FROM o)),
		'deadLetterQueue', (SELECT json_build_object(
				'totalMessages', count(*), 'affectedPartitions', count(DISTINCT d.partition_id),
				'topErrors', coalesce((SELECT json_agg(json_build_object('error', e.error, 'count', e.n)
													   ORDER BY e.n DESC, e.error)
										 FROM (SELECT coalesce(d2.error, '') AS error, count(*) AS n
												 FROM queen.log_dlq d2
												 JOIN queen.log_partitions p2 ON p2.id = d2.partition_id
												WHERE p2.queue_id IN (SELECT o.queue_id FROM o)
												GROUP BY 1 ORDER BY 2 DESC LIMIT 10) e), '[]'))
			  FROM queen.log_dlq d JOIN queen.log_partitions p ON p.id = d.partition_id
			 WHERE p.queue_id IN (SELECT o.queue_id FROM o)),
		'statsAge', queen._stats_age())
$$;

-- GET /api/v1/analytics/queue-ops: per bucket and queue.
CREATE FUNCTION queen._api_queue_ops(tenant uuid, queue text, from_time timestamptz,
									 to_time timestamptz)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	WITH s AS (SELECT * FROM queen._series($1, $2, NULL, NULL, $3, $4) s WHERE s.bucket >= $3)
	SELECT json_build_object(
		'timeRange', json_build_object('from', queen._ts($3), 'to', queen._ts($4)),
		'bucketMinutes', queen._bucket_minutes($3, $4),
		'series', coalesce((SELECT json_agg(json_build_object(
				'bucket', queen._ts(s.bucket), 'queueName', s.queue_name,
				'pushMessages', s.pushed, 'popMessages', s.consumed,
				'pushPerSecond', round(s.pushed / (s.bucket_minutes * 60.0), 2),
				'popPerSecond', round(s.consumed / (s.bucket_minutes * 60.0), 2),
				'pending', s.pending, 'leased', s.leased, 'deadLetters', s.dead_letters,
				'partitionCount', s.partitions, 'maxLagSeconds', s.max_lag_seconds)
				ORDER BY s.bucket, s.queue_name) FROM s), '[]'),
		'queues', coalesce((SELECT json_agg(DISTINCT s.queue_name) FROM s), '[]'))
$$;

-- GET /api/v1/analytics/queue-lag: per bucket and queue, the longest wait.
CREATE FUNCTION queen._api_queue_lag(tenant uuid, queue text, from_time timestamptz,
									 to_time timestamptz)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	SELECT coalesce(json_agg(json_build_object(
		'queueName', s.queue_name, 'bucketTime', queen._ts(s.bucket),
		'maxLagSeconds', s.max_lag_seconds, 'maxLagMs', s.max_lag_seconds * 1000,
		'pending', s.pending, 'popCount', s.consumed)
		ORDER BY s.bucket DESC, s.queue_name), '[]')
	  FROM queen._series($1, $2, NULL, NULL, $3, $4) s WHERE s.bucket >= $3
$$;

-- GET /api/v1/analytics/retention: what retention removed, per bucket.
CREATE FUNCTION queen._api_retention(tenant uuid, queue text, from_time timestamptz,
									 to_time timestamptz)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	WITH w AS (SELECT queen._bucket_minutes($3, $4) AS m),
	s AS (SELECT to_timestamp(floor(extract(epoch FROM h.bucket) / (w.m * 60)) * w.m * 60) AS bucket,
				 sum(h.messages) FILTER (WHERE h.rule = 'retention') AS r,
				 sum(h.messages) FILTER (WHERE h.rule = 'completed') AS c,
				 sum(h.messages) FILTER (WHERE h.rule = 'max_wait') AS e,
				 sum(h.messages) AS total, count(*) AS events
			FROM queen.retention_history h JOIN queen.queues q ON q.id = h.queue_id, w
		   WHERE q.tenant_id = $1 AND ($2 IS NULL OR q.name = $2)
			 AND h.bucket >= $3 AND h.bucket <= $4
		   GROUP BY 1)
	SELECT json_build_object(
		'timeRange', json_build_object('from', queen._ts($3), 'to', queen._ts($4)),
		'bucketMinutes', (SELECT m FROM w),
		'series', coalesce((SELECT json_agg(json_build_object(
				'bucket', queen._ts(s.bucket), 'retentionMsgs', coalesce(s.r, 0),
				'completedRetentionMsgs', coalesce(s.c, 0), 'evictionMsgs', coalesce(s.e, 0),
				'totalMsgs', s.total, 'eventCount', s.events) ORDER BY s.bucket) FROM s), '[]'),
		'totals', (SELECT json_build_object(
				'retentionMsgs', coalesce(sum(s.r), 0), 'completedRetentionMsgs', coalesce(sum(s.c), 0),
				'evictionMsgs', coalesce(sum(s.e), 0), 'totalMsgs', coalesce(sum(s.total), 0),
				'eventCount', coalesce(sum(s.events), 0)) FROM s))
$$;

-- GET /api/v1/status/analytics: messages pushed per bucket, empty buckets 0.
CREATE FUNCTION queen._api_analytics(tenant uuid, queue text, namespace text, task text,
									 from_time timestamptz, to_time timestamptz)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	WITH s AS (SELECT s.bucket, sum(s.pushed) AS pushed, max(s.bucket_minutes) AS m
				 FROM queen._series($1, $2, $3, $4, $5, $6) s WHERE s.bucket >= $5
				GROUP BY s.bucket)
	SELECT json_build_object(
		'dataPoints', coalesce((SELECT json_agg(json_build_object(
				'timestamp', queen._ts(s.bucket), 'messages', s.pushed) ORDER BY s.bucket) FROM s), '[]'),
		'bucketMinutes', queen._bucket_minutes($5, $6),
		'from', queen._ts($5), 'to', queen._ts($6))
$$;

-- The read of queen.read by partition id, whatever the tenant (the message
-- answers below, which checked it).
CREATE FUNCTION queen._read_partition(partition_id uuid, from_offset bigint, max_messages integer)
RETURNS TABLE (
	log_offset		bigint,
	message_id		uuid,
	transaction_id	text,
	payload			jsonb,
	created_at		timestamptz)
AS 'MODULE_PATHNAME', 'queen_read_partition'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- The offset in [lo, hi] of the newest message with this transactionId,
-- through the hashes kept (in the segments, and queen.log_txns below them); NULL
-- when none.
CREATE FUNCTION queen._message_offset(partition_id uuid, transaction_id text, lo bigint, hi bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'queen_message_offset_sql'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- A message's state for the groups with a cursor on its partition: a dead
-- letter; completed when every group committed it; processing when a live
-- lease holds it; else pending.
CREATE FUNCTION queen._message_status(partition_id uuid, log_offset bigint)
RETURNS text
LANGUAGE sql STABLE
AS $$
	SELECT CASE
		WHEN EXISTS (SELECT 1 FROM queen.log_dlq d WHERE d.partition_id = $1 AND d."offset" = $2)
			THEN 'dead_letter'
		WHEN NOT EXISTS (SELECT 1 FROM queen.log_consumers c WHERE c.partition_id = $1)
			THEN 'pending'
		WHEN NOT EXISTS (SELECT 1 FROM queen.log_consumers c
						  WHERE c.partition_id = $1 AND c.committed < $2)
			THEN 'completed'
		WHEN EXISTS (SELECT 1 FROM queen.log_consumers c
					  WHERE c.partition_id = $1 AND c.committed < $2 AND $2 <= c.batch_end
						AND c.lease_expires_at > now())
			THEN 'processing'
		ELSE 'pending' END
$$;

-- GET /api/v1/messages/:partitionId/:transactionId: the message, its state
-- per group, its dead letter if any; NULL when not found (not the tenant's,
-- retained away, or its hash purged).
CREATE FUNCTION queen._api_message(tenant uuid, partition_id uuid, transaction_id text)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	SELECT json_build_object(
		'id', m.message_id, 'transactionId', m.transaction_id, 'partitionId', p.id,
		'queuePath', q.name || '/' || p.name, 'queue', q.name, 'partition', p.name,
		'namespace', q.namespace, 'task', q.task, 'offset', m.log_offset,
		'status', queen._message_status(p.id, m.log_offset),
		'payload', m.payload, 'createdAt', queen._ts(m.created_at),
		'deadLetterId', d.id, 'errorMessage', d.error, 'retryCount', d.retry_count,
		'failedAt', queen._ts(d.failed_at),
		'queueConfig', json_build_object('leaseTime', q.lease_time, 'retryLimit', q.retry_limit,
										 'retryDelay', q.retry_delay, 'ttl', q.ttl,
										 'priority', q.priority),
		'consumerGroups', coalesce((SELECT json_agg(json_build_object(
				'name', c.consumer_group, 'consumed', c.committed >= m.log_offset,
				'leased', coalesce(c.committed < m.log_offset AND m.log_offset <= c.batch_end
								   AND c.lease_expires_at > now(), false),
				'leaseExpiresAt', queen._ts(c.lease_expires_at),
				-- deliveries of the batch that holds it since the group last
				-- committed (not Queen's: its clients ignore the key); NULL once
				-- committed, when no count is kept
				'deliveryAttempts', CASE WHEN c.committed >= m.log_offset THEN NULL
										 WHEN m.log_offset <= c.attempt_end THEN c.attempt_count
										 ELSE 0 END) ORDER BY c.consumer_group)
			  FROM queen.log_consumers c WHERE c.partition_id = p.id), '[]'),
		'traces', (SELECT count(*) FROM queen.message_traces t
					WHERE t.partition_id = p.id AND t.transaction_id = m.transaction_id))
	  FROM queen.log_partitions p
	  JOIN queen.queues q ON q.id = p.queue_id
	  CROSS JOIN LATERAL queen._message_offset(p.id, $3, GREATEST(p.log_start, p.txns_start),
											   p.last_offset) o(off)
	  CROSS JOIN LATERAL queen._read_partition(p.id, o.off, 1) m
	  LEFT JOIN LATERAL (SELECT * FROM queen.log_dlq d WHERE d.partition_id = p.id
							AND d."offset" = m.log_offset
						  ORDER BY d.failed_at DESC LIMIT 1) d ON true
	 WHERE p.id = $2 AND q.tenant_id = $1 AND m.log_offset = o.off
$$;

-- GET /api/v1/messages?queue=&partition=&status=&limit=&offset=: the newest
-- messages of the queue, newest first, from its 100 partitions written
-- last (or the one named): limit + offset of each are read; NULL when the
-- queue does not exist.
CREATE FUNCTION queen._api_messages(tenant uuid, queue text, partition text, status text,
									page_limit integer, page_offset bigint)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	WITH q AS (SELECT * FROM queen.queues q WHERE q.tenant_id = $1 AND q.name = $2),
	p AS (SELECT p.* FROM queen.log_partitions p, q
		   WHERE p.queue_id = q.id AND ($3 IS NULL OR p.name = $3)
		   ORDER BY p.last_write_at DESC, p.id LIMIT 100),
	m AS (SELECT p.id AS pid, p.name AS pname, r.*, queen._message_status(p.id, r.log_offset) AS status
			FROM p CROSS JOIN LATERAL queen._read_partition(p.id,
					GREATEST(p.last_offset - ($5 + $6) + 1, p.log_start), ($5 + $6)::integer) r),
	f AS (SELECT * FROM m WHERE $4 IS NULL OR m.status = $4
		   ORDER BY m.created_at DESC, m.pid, m.log_offset DESC LIMIT $5 OFFSET $6)
	SELECT json_build_object(
		'messages', coalesce((SELECT json_agg(json_build_object(
				'id', f.message_id, 'transactionId', f.transaction_id, 'partitionId', f.pid,
				'queuePath', q.name || '/' || f.pname, 'queue', q.name, 'partition', f.pname,
				'namespace', q.namespace, 'task', q.task, 'offset', f.log_offset,
				'status', f.status, 'createdAt', queen._ts(f.created_at))
				ORDER BY f.created_at DESC, f.pid, f.log_offset DESC) FROM f), '[]'),
		'pagination', json_build_object('limit', $5, 'offset', $6))
	  FROM q
$$;

-- The SQL door's administration writes (src/sql/admin_sql.c), for the
-- session's tenant; seek, dlq_purge and dlq_replay raise 42704 when what
-- they name does not exist, the others count what they changed.
-- Move a consumer group's cursors on a queue (or one partition) to the end
-- or to a moment, releasing its leases; the partitions moved.
CREATE FUNCTION queen.seek(queue text, consumer_group text, to_end boolean DEFAULT false,
						   at timestamptz DEFAULT NULL, partition text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'queen_seek_sql'
LANGUAGE C VOLATILE;

-- Every subscription a group remembered starts at a moment from now on.
CREATE FUNCTION queen.set_subscription(consumer_group text, at timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'queen_set_subscription_sql'
LANGUAGE C VOLATILE;

-- A queue's dead letters (one group's if named) removed; how many.
CREATE FUNCTION queen.dlq_purge(queue text, consumer_group text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'queen_dlq_purge_sql'
LANGUAGE C VOLATILE;

-- A dead letter back to its partition's tail with the transactionId
-- 'dlq:<id>', and removed, in the caller's transaction; 'duplicate' when
-- that transactionId is stored already (nothing moves, the dead letter stays).
CREATE FUNCTION queen.dlq_replay(id uuid, OUT result text, OUT message_id uuid,
								 OUT transaction_id text, OUT partition_id uuid,
								 OUT queue text, OUT partition text, OUT log_offset bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'queen_dlq_replay_sql'
LANGUAGE C VOLATILE;

-- A message's dead letters removed (the message stays in the log).
CREATE FUNCTION queen.dlq_forget(partition_id uuid, transaction_id text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'queen_dlq_forget_sql'
LANGUAGE C VOLATILE;


-- GET /api/v1/analytics/worker-metrics: the broker's throughput per bucket.
CREATE FUNCTION queen._api_worker_metrics(from_time timestamptz, to_time timestamptz)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	WITH w AS (SELECT queen._bucket_minutes($1, $2) AS m),
	b AS (SELECT to_timestamp(floor(extract(epoch FROM h.bucket) / (w.m * 60)) * w.m * 60) AS bucket,
				 (array_agg(h.counters ORDER BY h.bucket DESC))[1] AS c
			FROM queen.broker_history h, w
		   WHERE h.bucket >= $1 - make_interval(mins => w.m) AND h.bucket <= $2
		   GROUP BY 1),
	d AS (SELECT b.bucket, k.key,
				 GREATEST((b.c->>k.key)::bigint
						  - coalesce((lag(b.c) OVER (ORDER BY b.bucket)->>k.key)::bigint,
									 (b.c->>k.key)::bigint), 0) AS n
			FROM b CROSS JOIN LATERAL jsonb_object_keys(b.c) k(key)
		   WHERE k.key NOT IN ('parkedPops', 'processes', 'rssBytes', 'cpuUserUs', 'cpuSystemUs')),
	t AS (SELECT d.bucket, jsonb_object_agg(d.key, d.n) AS c FROM d GROUP BY d.bucket)
	SELECT json_build_object(
		'timeRange', json_build_object('from', queen._ts($1), 'to', queen._ts($2)),
		'bucketMinutes', (SELECT m FROM w),
		'timeSeries', coalesce((SELECT json_agg(json_build_object(
				'timestamp', queen._ts(t.bucket),
				'pushMessages', t.c->'pushMessages', 'popMessages', t.c->'popMessages',
				'ackMessages', t.c->'ackMessages', 'pushRequests', t.c->'pushRequests',
				'popRequests', t.c->'popRequests', 'ackRequests', t.c->'ackRequests',
				'pushPerSecond', round((t.c->>'pushMessages')::numeric / ((SELECT m FROM w) * 60), 2),
				'popPerSecond', round((t.c->>'popMessages')::numeric / ((SELECT m FROM w) * 60), 2),
				'ackPerSecond', round((t.c->>'ackMessages')::numeric / ((SELECT m FROM w) * 60), 2),
				'popEmpty', t.c->'popEmpty', 'ackSuccess', t.c->'ackSuccess',
				'ackFailed', t.c->'ackFailed', 'dlqCount', t.c->'dlqCount',
				'transactions', t.c->'transactions', 'commits', t.c->'commits',
				'dbErrors', t.c->'dbErrors', 'buffered', t.c->'buffered',
				'lockTimeouts', t.c->'lockTimeouts',
				'parkedPops', (SELECT b.c->'parkedPops' FROM b WHERE b.bucket = t.bucket))
				ORDER BY t.bucket DESC)
			  FROM t WHERE t.bucket >= $1), '[]'),
		'summary', (SELECT h.counters FROM queen.broker_history h ORDER BY h.bucket DESC LIMIT 1))
$$;

-- GET /api/v1/analytics/system-metrics: the broker's processes per bucket,
-- one replica (this cluster): CPU microseconds used per second of the
-- bucket (1,000,000 is one core), resident memory at its end, in Queen's
-- {avg, min, max, last} leaves (all the bucket's one figure).
CREATE FUNCTION queen._api_system_metrics(from_time timestamptz, to_time timestamptz)
RETURNS json
LANGUAGE sql STABLE
SET jit = off
AS $$
	WITH w AS (SELECT queen._bucket_minutes($1, $2) AS m),
	b AS (SELECT to_timestamp(floor(extract(epoch FROM h.bucket) / (w.m * 60)) * w.m * 60) AS bucket,
				 (array_agg(h.counters ORDER BY h.bucket DESC))[1] AS c, count(*) AS samples
			FROM queen.broker_history h, w
		   WHERE h.bucket >= $1 - make_interval(mins => w.m) AND h.bucket <= $2
		   GROUP BY 1),
	d AS (SELECT b.bucket, b.samples, b.c,
				 round(GREATEST((b.c->>'cpuUserUs')::numeric
								- coalesce((lag(b.c) OVER o->>'cpuUserUs')::numeric,
										   (b.c->>'cpuUserUs')::numeric), 0)
					   / ((SELECT m FROM w) * 60)) AS user_us,
				 round(GREATEST((b.c->>'cpuSystemUs')::numeric
								- coalesce((lag(b.c) OVER o->>'cpuSystemUs')::numeric,
										   (b.c->>'cpuSystemUs')::numeric), 0)
					   / ((SELECT m FROM w) * 60)) AS system_us
			FROM b WINDOW o AS (ORDER BY b.bucket)),
	l AS (SELECT d.*, json_build_object('avg', d.user_us, 'min', d.user_us, 'max', d.user_us,
										'last', d.user_us) AS u,
				 json_build_object('avg', d.system_us, 'min', d.system_us, 'max', d.system_us,
								   'last', d.system_us) AS s,
				 json_build_object('avg', d.c->'rssBytes', 'min', d.c->'rssBytes',
								   'max', d.c->'rssBytes', 'last', d.c->'rssBytes') AS r
			FROM d WHERE d.bucket >= $1)
	SELECT json_build_object(
		'timeRange', json_build_object('from', queen._ts($1), 'to', queen._ts($2)),
		'replicas', json_build_array(json_build_object(
			'hostname', coalesce(nullif(current_setting('cluster_name', true), ''), 'postgres'),
			'port', nullif(current_setting('queen.http_port', true), '')::integer,
			'workerId', '0',
			'timeSeries', coalesce((SELECT json_agg(json_build_object(
					'timestamp', queen._ts(l.bucket), 'sampleCount', l.samples,
					'metrics', json_build_object(
						'cpu', json_build_object('user_us', l.u, 'system_us', l.s),
						'memory', json_build_object('rss_bytes', l.r),
						'processes', l.c->'processes'))
					ORDER BY l.bucket) FROM l), '[]'))),
		'replicaCount', 1,
		'bucketMinutes', (SELECT m FROM w),
		'pointCount', (SELECT count(*) FROM l))
$$;
