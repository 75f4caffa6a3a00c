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

-- The incremental refresh's memory (queen.stats_refresh below): what each
-- partition and cursor counted for when a refresh last read it, so that
-- the next adds only differences and reads only the partitions that may
-- have changed: those stamped since its last write horizon (a push
-- stamps last_write_at), those marked in queen.stats_marks by the paths
-- that change a partition's or cursor's figures without stamping it
-- (retention, a cursor's creation, seeks, subscriptions, deletions), and
-- those still live: something pending or leased, whose figures move with
-- acks, leases and time.  An idle, fully consumed partition is read by no
-- refresh until it is written or marked again.  No foreign keys, as for
-- the stats tables: a partition's or queue's deletion marks it instead.
CREATE TABLE queen.stats_partitions (
	partition_id	uuid PRIMARY KEY,
	queue_id		uuid NOT NULL,
	last_offset		bigint NOT NULL,
	log_start		bigint NOT NULL,
	live			boolean NOT NULL
);
CREATE INDEX idx_stats_partitions_queue ON queen.stats_partitions (queue_id);
CREATE INDEX idx_stats_partitions_live ON queen.stats_partitions (queue_id) WHERE live;

-- a cursor's counted figures, for the groups its queue's totals keep
CREATE TABLE queen.stats_cursors (
	partition_id	uuid NOT NULL,
	consumer_group	text NOT NULL,
	queue_id		uuid NOT NULL,
	consumed		bigint NOT NULL,
	PRIMARY KEY (partition_id, consumer_group)
);
CREATE INDEX idx_stats_cursors_queue ON queen.stats_cursors (queue_id, consumer_group);

-- The sums of the two above: per queue (consumer_group ''), and per
-- (queue, group) for the groups the queue's figures are kept for, as
-- queen.consumer_lag lists them (queue mode when none).
CREATE TABLE queen.stats_totals (
	queue_id		uuid NOT NULL,
	consumer_group	text NOT NULL,
	partitions		bigint NOT NULL,	-- the queue's; the group's cursors
	messages		bigint NOT NULL,	-- retained now (the queue's row)
	pushed			bigint NOT NULL,	-- offsets handed out (the queue's row)
	consumed		bigint NOT NULL,	-- the group's cursors' total_consumed
	PRIMARY KEY (queue_id, consumer_group)
);

-- A change the next refresh must read: a partition (queue_id may be NULL),
-- or a whole queue (partition_id NULL: its groups changed).  Written in
-- the changing transaction, removed by the refresh that reads it; without
-- refreshes they pile up, a row per retention step and per new cursor.
CREATE TABLE queen.stats_marks (
	queue_id		uuid,
	partition_id	uuid
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

-- since: the last refresh's write horizon (the next reads the partitions
-- stamped at or after it; NULL: it counts every one); full_at: the last
-- full pass (every partition counted again: the first, one asked for, one
-- without a horizon, and one an hour after the last, so that a row written
-- outside the core, which marks nothing, is counted within the hour).
CREATE TABLE queen.stats_state (
	id				integer PRIMARY KEY CHECK (id = 1),
	since			timestamptz,
	full_at			timestamptz
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

-- Recompute both tables, every tenant, and this minute's history
-- (src/core/stats_refresh.c): reads only the partitions that may have
-- changed since the last refresh, every one on a full pass (full_pass, or
-- an hour after the last).  JIT is off: compiling its plans cost more than
-- running them.
CREATE FUNCTION queen.stats_refresh(full_pass boolean DEFAULT false)
RETURNS TABLE (queues bigint, groups bigint)
AS 'MODULE_PATHNAME', 'queen_stats_refresh_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1
SET jit = off;

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
