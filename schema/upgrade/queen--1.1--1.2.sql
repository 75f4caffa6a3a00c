/*
 * queen--1.1--1.2.sql: ALTER EXTENSION queen UPDATE TO '1.2'.
 *
 * Leaves a 1.1 database as queen--1.2.sql makes one (t/095_upgrade.pl
 * compares the two).  queen.stats_refresh becomes incremental
 * (src/core/stats_refresh.c): it reads only the partitions that may have
 * changed since the last refresh, and keeps what each counted for in the
 * tables below.  Nothing existing is rewritten; the first refresh after
 * the update is a full pass that fills them.
 */

\echo Use "ALTER EXTENSION queen UPDATE TO '1.2'" to load this file. \quit

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

DROP FUNCTION queen.stats_refresh();

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

-- as schema/5_roles.sql makes it
REVOKE EXECUTE ON FUNCTION queen.stats_refresh(boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION queen.stats_refresh(boolean) TO queen_admin;
ALTER FUNCTION queen.stats_refresh(boolean) SECURITY DEFINER
	SET search_path = pg_catalog, queen, pg_temp;
GRANT SELECT ON queen.stats_partitions, queen.stats_cursors, queen.stats_totals,
	queen.stats_marks, queen.stats_state TO queen_reader;
