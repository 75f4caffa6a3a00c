-- schema/3_administration.sql: the stats tables, their refresh and the
-- views a DBA reads to see who is behind and by how much.

------------------------------------------------------------------------------
-- Administration (docs/SQL.md "Administration", src/core/admin.c): who is
-- behind, by how much, and what the queues hold.  The views read the log's
-- bookkeeping (partition and consumer rows), never its segments, except for
-- one index probe per partition with something pending (its oldest pending
-- message's time).  The stats tables hold the same per queue and per group,
-- refreshed by queen.stats_refresh() (the broker's maintenance worker every
-- queen.stats_interval, POST /api/v1/stats/refresh), so that the broker's
-- overview routes read one row per queue whatever the partitions.
------------------------------------------------------------------------------

-- Per partition and consumer group with a cursor: where it stands, every
-- tenant's (queen.consumer_group_partitions is the session's).
CREATE VIEW queen._consumer_group_partitions AS
SELECT q.tenant_id, q.id AS queue_id, q.name AS queue, p.id AS partition_id,
	   p.name AS partition, c.consumer_group, c.committed, p.log_start, p.last_offset,
	   GREATEST(p.last_offset - GREATEST(c.committed, p.log_start - 1), 0) AS pending,
	   CASE WHEN c.lease_expires_at > now() THEN c.batch_end - c.committed ELSE 0 END AS leased,
	   c.worker_id, c.lease_expires_at, c.lease_acquired_at, c.total_consumed,
	   c.created_at AS first_contact_at,
	   CASE WHEN p.last_offset > GREATEST(c.committed, p.log_start - 1) THEN
		   (SELECT s.created_at FROM queen.log_segments s
			 WHERE s.partition_id = p.id AND s.base_offset <= GREATEST(c.committed + 1, p.log_start)
			 ORDER BY s.base_offset DESC LIMIT 1)
	   END AS oldest_pending_at
  FROM queen.log_consumers c
  JOIN queen.log_partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id;
CREATE VIEW queen.consumer_group_partitions AS
SELECT * FROM queen._consumer_group_partitions WHERE tenant_id = queen.current_tenant();
COMMENT ON VIEW queen.consumer_group_partitions IS
'The session''s partitions per consumer group with a cursor: committed offset, messages pending past it, messages leased now, the lease, and when the oldest pending message was pushed.';

-- What queen.stats_refresh() last found, per queue and per (queue, group).
-- No foreign keys on these four: an insert's key check would lock the queue
-- row after the partition or stats rows its writer holds, against a queue's
-- deletion, which locks the queue first.  The refresh rewrites the first two
-- whole; the histories' rows of a deleted queue are never joined to a queue
-- again and go with their age.
CREATE TABLE queen.queue_stats (
	queue_id			uuid PRIMARY KEY,
	partitions			bigint NOT NULL,
	messages			bigint NOT NULL,	-- retained now
	pushed				bigint NOT NULL,	-- ever (offsets handed out)
	dead_letters		bigint NOT NULL,
	oldest_message_at	timestamptz,
	last_write_at		timestamptz,
	refreshed_at		timestamptz NOT NULL
);

CREATE TABLE queen.group_stats (
	queue_id			uuid NOT NULL,
	consumer_group		text NOT NULL,
	partitions			bigint NOT NULL,	-- with a cursor of the group
	partitions_pending	bigint NOT NULL,
	pending				bigint NOT NULL,	-- as queen.consumer_lag counts it
	leased				bigint NOT NULL,
	leases				bigint NOT NULL,
	consumed			bigint NOT NULL,
	oldest_pending_at	timestamptz,
	subscription_mode	text,
	subscription_timestamp timestamptz,
	refreshed_at		timestamptz NOT NULL,
	PRIMARY KEY (queue_id, consumer_group)
);

-- A minute's figures per queue, kept by each refresh (the last in the
-- minute wins): cumulative counts, so a minute's throughput is the
-- difference with the bucket before.  A queue whose figures did not change
-- since its last row gets none (an idle queue costs no row a minute; one
-- with a backlog does, its wait growing).
-- queen.stats_history_days of them.
CREATE TABLE queen.stats_history (
	bucket				timestamptz NOT NULL,
	queue_id			uuid NOT NULL,
	pushed				bigint NOT NULL,
	consumed			bigint NOT NULL,	-- the most any group consumed, ever
	messages			bigint NOT NULL,
	pending				bigint NOT NULL,
	leased				bigint NOT NULL,
	dead_letters		bigint NOT NULL,
	partitions			bigint NOT NULL,
	max_lag_seconds		bigint NOT NULL,
	PRIMARY KEY (bucket, queue_id)
);
CREATE INDEX idx_stats_history_queue ON queen.stats_history (queue_id, bucket);

-- What retention removed, per minute, queue and rule (retention.c).
CREATE TABLE queen.retention_history (
	bucket				timestamptz NOT NULL,
	queue_id			uuid NOT NULL,
	rule				text NOT NULL
		CHECK (rule IN ('retention', 'completed', 'max_wait')),
	messages			bigint NOT NULL,
	segments			bigint NOT NULL,
	PRIMARY KEY (bucket, queue_id, rule)
);

-- The broker's counters, a row a minute (the maintenance worker, beside
-- each stats refresh): cumulative since the broker started, so a minute's
-- figure is a difference and a restart a drop; kept queen.stats_history_days.
CREATE TABLE queen.broker_history (
	bucket		timestamptz PRIMARY KEY,
	counters	jsonb NOT NULL
);

-- Recompute both tables, every tenant, and this minute's history; one
-- refresh at a time (the others wait).  JIT is off here and in the answers
-- below: compiling their plans cost more than running them (1.45 s against
-- 0.18 s for a refresh over 100,000 partitions).  Plain reads of the log's bookkeeping: no push or pop waits for it.
CREATE FUNCTION queen.stats_refresh()
RETURNS TABLE (queues bigint, groups bigint)
LANGUAGE sql VOLATILE
SET jit = off
AS $$
	SELECT pg_advisory_xact_lock(hashtext('queen.stats_refresh'));
	DELETE FROM queen.queue_stats;
	INSERT INTO queen.queue_stats
	SELECT q.id, count(p.id), coalesce(sum(p.last_offset - p.log_start + 1), 0),
		   coalesce(sum(p.last_offset + 1), 0),
		   (SELECT count(*) FROM queen.log_dlq d JOIN queen.log_partitions p2
				ON p2.id = d.partition_id WHERE p2.queue_id = q.id),
		   min(p.oldest_live_at), max(p.last_write_at), now()
	  FROM queen.queues q LEFT JOIN queen.log_partitions p ON p.queue_id = q.id
	 GROUP BY q.id;
	DELETE FROM queen.group_stats;
	INSERT INTO queen.group_stats
	SELECT q.id, l.consumer_group, coalesce(c.partitions, 0), l.partitions_pending,
		   l.messages_pending, coalesce(c.leased, 0), coalesce(c.leases, 0),
		   coalesce(c.consumed, 0), c.oldest_pending_at, m.subscription_mode,
		   m.subscription_timestamp, now()
	  FROM queen.consumer_lag l
	  JOIN queen.queues q ON q.tenant_id = l.tenant_id AND q.name = l.queue
	  LEFT JOIN LATERAL (
		SELECT count(*) AS partitions, sum(x.leased) AS leased,
			   count(*) FILTER (WHERE x.leased > 0) AS leases,
			   sum(x.total_consumed) AS consumed, min(x.oldest_pending_at) AS oldest_pending_at
		  FROM queen._consumer_group_partitions x
		 WHERE x.queue_id = q.id AND x.consumer_group = l.consumer_group) c ON true
	  LEFT JOIN queen.consumer_groups_metadata m
		ON m.queue_id = q.id AND m.consumer_group = l.consumer_group
	   AND m.partition_name = '' AND m.namespace IS NULL AND m.task IS NULL;
	INSERT INTO queen.stats_history AS h
	SELECT date_trunc('minute', now()), s.queue_id, s.pushed,
		   coalesce(g.consumed, 0), s.messages, coalesce(g.pending, 0), coalesce(g.leased, 0),
		   s.dead_letters, s.partitions, coalesce(g.max_lag, 0)
	  FROM queen.queue_stats s
	  LEFT JOIN LATERAL (
		SELECT max(x.consumed) AS consumed, max(x.pending) AS pending, sum(x.leased) AS leased,
			   max(extract(epoch FROM now() - x.oldest_pending_at))::bigint AS max_lag
		  FROM queen.group_stats x WHERE x.queue_id = s.queue_id) g ON true
	  LEFT JOIN LATERAL (
		SELECT l.* FROM queen.stats_history l WHERE l.queue_id = s.queue_id
		 ORDER BY l.bucket DESC LIMIT 1) l ON true
	 WHERE l.queue_id IS NULL OR l.bucket = date_trunc('minute', now())
		OR (l.pushed, l.consumed, l.messages, l.pending, l.leased, l.dead_letters, l.partitions)
		   IS DISTINCT FROM (s.pushed, coalesce(g.consumed, 0), s.messages, coalesce(g.pending, 0),
							 coalesce(g.leased, 0)::bigint, s.dead_letters, s.partitions)
		OR (coalesce(g.pending, 0) > 0 AND l.max_lag_seconds <> coalesce(g.max_lag, 0))
	ON CONFLICT (bucket, queue_id) DO UPDATE
	   SET pushed = EXCLUDED.pushed, consumed = EXCLUDED.consumed, messages = EXCLUDED.messages,
		   pending = EXCLUDED.pending, leased = EXCLUDED.leased,
		   dead_letters = EXCLUDED.dead_letters, partitions = EXCLUDED.partitions,
		   max_lag_seconds = EXCLUDED.max_lag_seconds;
	DELETE FROM queen.stats_history
	 WHERE bucket < now() - make_interval(days => coalesce(nullif(current_setting('queen.stats_history_days', true), '')::int, 7));
	DELETE FROM queen.retention_history
	 WHERE bucket < now() - make_interval(days => coalesce(nullif(current_setting('queen.stats_history_days', true), '')::int, 7));
	DELETE FROM queen.broker_history
	 WHERE bucket < now() - make_interval(days => coalesce(nullif(current_setting('queen.stats_history_days', true), '')::int, 7));
	SELECT (SELECT count(*) FROM queen.queue_stats), (SELECT count(*) FROM queen.group_stats);
$$;

-- Every tenant's queues as the last refresh saw them (the broker's routes
-- read this with the request's tenant); queen.queues_overview is the
-- session's.  pending is the most any of the queue's groups has not
-- acknowledged, waiting the most any has neither acknowledged nor leased,
-- leased what all of them hold leased.
CREATE VIEW queen._queues_overview AS
SELECT q.tenant_id, q.id AS queue_id, q.name AS queue, q.namespace, q.task, q.created_at,
	   coalesce(s.partitions, 0) AS partitions, coalesce(s.messages, 0) AS messages,
	   coalesce(s.pushed, 0) AS pushed,
	   coalesce(g.pending, 0) AS pending, coalesce(g.leased, 0)::bigint AS leased,
	   coalesce(g.waiting, 0) AS waiting,
	   coalesce(g.consumed, 0) AS consumed, coalesce(g.groups, 0) AS consumer_groups,
	   coalesce(s.dead_letters, 0) AS dead_letters, s.oldest_message_at, s.last_write_at,
	   coalesce(g.max_lag, 0) AS max_lag_seconds, s.refreshed_at
  FROM queen.queues q
  LEFT JOIN queen.queue_stats s ON s.queue_id = q.id
  LEFT JOIN LATERAL (
	SELECT max(x.pending) AS pending, sum(x.leased) AS leased, max(x.consumed) AS consumed,
		   max(GREATEST(x.pending - x.leased, 0)) AS waiting,
		   count(*) FILTER (WHERE x.consumer_group <> '__QUEUE_MODE__') AS groups,
		   max(GREATEST(extract(epoch FROM x.refreshed_at - x.oldest_pending_at), 0))::bigint AS max_lag
	  FROM queen.group_stats x WHERE x.queue_id = q.id) g ON true;

CREATE VIEW queen.queues_overview AS
SELECT * FROM queen._queues_overview WHERE tenant_id = queen.current_tenant();
COMMENT ON VIEW queen.queues_overview IS
'The session''s queues: partitions, messages retained and ever pushed, pending for the deepest group, leased, dead letters, the oldest pending message''s wait; as of refreshed_at (queen.stats_refresh).';

-- Every tenant's consumer groups per queue as the last refresh saw them;
-- lag_seconds is how long the oldest pending message had waited.
CREATE VIEW queen._consumer_groups AS
SELECT q.tenant_id, q.id AS queue_id, q.name AS queue, g.consumer_group, g.partitions,
	   g.partitions_pending, g.pending, g.leased, g.leases, g.consumed, g.oldest_pending_at,
	   CASE WHEN g.oldest_pending_at IS NOT NULL
			THEN GREATEST(extract(epoch FROM g.refreshed_at - g.oldest_pending_at), 0)::bigint
			ELSE 0 END AS lag_seconds,
	   g.subscription_mode, g.subscription_timestamp, g.refreshed_at
  FROM queen.group_stats g JOIN queen.queues q ON q.id = g.queue_id;

CREATE VIEW queen.consumer_groups AS
SELECT * FROM queen._consumer_groups WHERE tenant_id = queen.current_tenant();
COMMENT ON VIEW queen.consumer_groups IS
'The session''s consumer groups per queue: messages pending and leased, partitions behind, how long the oldest pending message had waited; as of refreshed_at (queen.stats_refresh).';
