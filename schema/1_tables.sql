/*
 * queen--1.2.sql: the storage schema and the SQL surface of Queen for PostgreSQL,
 * made by the Makefile from the .sql files under schema/, in order (this part:
 * the tables).  A change here is a new version: schema/upgrade/ gets the step
 * from the last one (queen--1.1--1.2.sql), and t/095_upgrade.pl checks that
 * it leaves a database as this script does.
 *
 * Tables follow docs/ARCHITECTURE.md ("Storage"); every function on the push and
 * read paths is C (src/), so nothing here runs PL/pgSQL or parses JSON per message.
 */

\echo Use "CREATE EXTENSION queen" to load this file. \quit

-- Frames carry UTF-8 and the transactionId hash is taken over UTF-8 bytes, so a
-- database in another encoding would store ids that no other door can match.
DO $$
BEGIN
	IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
		RAISE EXCEPTION 'queen requires a UTF8 database, this one is %',
			pg_catalog.getdatabaseencoding()
			USING ERRCODE = 'feature_not_supported';
	END IF;
END
$$;

------------------------------------------------------------------------------
-- Queues: identity (tenant, name) and every per-queue option in one row.
------------------------------------------------------------------------------
CREATE TABLE queen.queues (
	id							uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	name						varchar(255) NOT NULL
		CONSTRAINT queues_name_check CHECK (name <> '' AND name !~ '[\x01-\x1f\x7f]'),
	tenant_id					uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
	namespace					varchar(255),
	task						varchar(255),
	priority					integer NOT NULL DEFAULT 0,
	lease_time					integer NOT NULL DEFAULT 60,
	retry_limit					integer NOT NULL DEFAULT 3,
	retry_delay					integer NOT NULL DEFAULT 1000,
	ttl							integer NOT NULL DEFAULT 3600,
	dead_letter_queue			boolean NOT NULL DEFAULT true,
	dlq_after_max_retries		boolean NOT NULL DEFAULT true,
	delayed_processing			integer NOT NULL DEFAULT 0,
	window_buffer				integer NOT NULL DEFAULT 0,
	retention_seconds			integer NOT NULL DEFAULT 0,
	completed_retention_seconds integer NOT NULL DEFAULT 0,
	retention_enabled			boolean NOT NULL DEFAULT false,
	encryption_enabled			boolean NOT NULL DEFAULT false,
	max_wait_time_seconds		integer NOT NULL DEFAULT 0,
	max_queue_size				integer NOT NULL DEFAULT 0,
	min_pop_wait_time			integer NOT NULL DEFAULT 0,
	dedup_window_seconds		integer NOT NULL DEFAULT 3600
		CONSTRAINT queues_dedup_window_check CHECK (dedup_window_seconds >= 0),
	retention_sink_hold			text NOT NULL DEFAULT '',
	retention_sink_max_seconds	integer NOT NULL DEFAULT 604800,
	created_at					timestamptz NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX queues_tenant_name_uk ON queen.queues (tenant_id, name);

------------------------------------------------------------------------------
-- Partitions: one allocator row each.  Every push updates its row once, so the
-- row must stay HOT: last_write_at is quantized to one write per 10 seconds and the
-- oldest_* columns only change on the empty -> non-empty transition.
------------------------------------------------------------------------------
CREATE TABLE queen.log_partitions (
	id				uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	queue_id		uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
	name			text NOT NULL DEFAULT 'Default'
		CONSTRAINT log_partitions_name_check CHECK (name <> '' AND name !~ '[\x01-\x1f\x7f]'),
	last_offset		bigint NOT NULL DEFAULT -1,
	log_start		bigint NOT NULL DEFAULT 0,
	txns_start		bigint NOT NULL DEFAULT 0,
	oldest_live_at	timestamptz,
	oldest_txn_at	timestamptz,
	last_write_at	timestamptz NOT NULL DEFAULT now(),
	created_at		timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT log_partitions_queue_name_uk UNIQUE (queue_id, name)
) WITH (
	fillfactor = 70,
	autovacuum_vacuum_scale_factor = 0,
	autovacuum_vacuum_threshold = 500,
	autovacuum_vacuum_cost_delay = 0,
	-- heap truncation takes ACCESS EXCLUSIVE and would stall every push
	vacuum_truncate = off
);

CREATE INDEX idx_log_partitions_queue_write
	ON queen.log_partitions (queue_id, last_write_at);
CREATE INDEX idx_log_partitions_queue_oldest
	ON queen.log_partitions (queue_id, oldest_live_at)
	WHERE oldest_live_at IS NOT NULL;
CREATE INDEX idx_log_partitions_queue_oldest_txn
	ON queen.log_partitions (queue_id, oldest_txn_at)
	WHERE oldest_txn_at IS NOT NULL;
-- retention's idle-partition cleanup reads only the partitions retention
-- emptied; both columns are indexed above, so this costs no HOT update
CREATE INDEX idx_log_partitions_idle
	ON queen.log_partitions (last_write_at)
	WHERE oldest_live_at IS NULL AND oldest_txn_at IS NULL;

------------------------------------------------------------------------------
-- Segments: one row per committed segment; the blob is zstd of packed frames
-- (docs/FORMAT.md), the hashes the frames' transactionId hashes, 16 bytes each
-- in frame order (dedup probes and ack-by-transactionId read them).  The
-- primary key is the only index: reads are a backward step to the covering
-- segment and a forward range scan.  hashes is NULL only in rows of an
-- upgraded 1.0 database whose hashes 1.0's purge had already removed.
------------------------------------------------------------------------------
CREATE TABLE queen.log_segments (
	partition_id	uuid NOT NULL REFERENCES queen.log_partitions (id) ON DELETE CASCADE,
	base_offset		bigint NOT NULL,
	end_offset		bigint NOT NULL,
	created_at		timestamptz NOT NULL,
	blob			bytea NOT NULL,
	hashes			bytea,
	PRIMARY KEY (partition_id, base_offset),
	CONSTRAINT log_segments_range_check CHECK (end_offset >= base_offset),
	CONSTRAINT log_segments_stride_check
		CHECK (octet_length(hashes) = 16 * (end_offset - base_offset + 1))
) WITH (
	autovacuum_vacuum_scale_factor = 0.1,
	autovacuum_vacuum_insert_scale_factor = 0.3,
	autovacuum_vacuum_cost_limit = 4000,
	autovacuum_vacuum_cost_delay = 0,
	toast.autovacuum_vacuum_scale_factor = 0.1,
	toast.autovacuum_vacuum_insert_scale_factor = 0.3,
	toast.autovacuum_vacuum_cost_limit = 4000,
	toast.autovacuum_vacuum_cost_delay = 0
);

-- Already zstd-compressed: TOAST must not try pglz on it again; XXH3 hashes
-- are random bytes, which compression can only waste CPU on.
ALTER TABLE queen.log_segments ALTER COLUMN blob SET STORAGE EXTERNAL;
ALTER TABLE queen.log_segments ALTER COLUMN hashes SET STORAGE EXTERNAL;
-- A segment stays in its row up to a page (8160 bytes), not TOAST's default
-- 2032: a 100-message push's blob (about 2.8 KB) and its 1,600 bytes of
-- hashes are one heap tuple, not two TOAST chunks with their index entries
-- and a TOAST OID lookup, and a read of it takes no TOAST index descent.
ALTER TABLE queen.log_segments SET (toast_tuple_target = 8160);

------------------------------------------------------------------------------
-- The hashes of segments retention purged while their dedup window still
-- needs them: the segment purge moves them here (src/core/retention.c), so
-- every row lies below every segment kept, and its own purge removes them
-- past the window.  Readers walk both (src/core/txns_walk.c).  No foreign key
-- on purpose: the purge must not pay for FK triggers.
------------------------------------------------------------------------------
CREATE TABLE queen.log_txns (
	partition_id	uuid NOT NULL,
	base_offset		bigint NOT NULL,
	end_offset		bigint NOT NULL,
	created_at		timestamptz NOT NULL,
	hashes			bytea NOT NULL,
	PRIMARY KEY (partition_id, base_offset),
	CONSTRAINT log_txns_stride_check
		CHECK (octet_length(hashes) = 16 * (end_offset - base_offset + 1))
) WITH (
	autovacuum_vacuum_scale_factor = 0.1,
	autovacuum_vacuum_insert_scale_factor = 0.3,
	autovacuum_vacuum_cost_delay = 0
);

ALTER TABLE queen.log_txns ALTER COLUMN hashes SET STORAGE EXTERNAL;

------------------------------------------------------------------------------
-- Dedup runs: the partition's stored transactionId hashes, sorted, so that a
-- probe finds a hash with one index descent per run instead of reading the
-- whole window from log_txns (src/core/dedup_runs.c).  A run covers the
-- offsets (run_start, run_end] and holds the first 8 bytes of every hash
-- stored there; its rows split the sorted keys into pieces of about 160,
-- each keyed by its lowest key (the first row by the smallest bigint), so
-- the row that may hold a key is the last one at or below it.  A
-- partition's runs form one chain: each starts where the one below it ends.
-- Only queen.dedup_index writes them; a queue's deletion removes them with
-- its log_txns rows (no foreign key, as there).
------------------------------------------------------------------------------
CREATE TABLE queen.log_dedup (
	partition_id	uuid NOT NULL,
	run_end			bigint NOT NULL,
	key_lo			bigint NOT NULL,
	run_start		bigint NOT NULL,
	run_hashes		bigint NOT NULL,
	keys			bytea NOT NULL,
	PRIMARY KEY (partition_id, run_end, key_lo)
) WITH (
	autovacuum_vacuum_scale_factor = 0.1,
	autovacuum_vacuum_cost_delay = 0
);

-- Sorted 8-byte keys of random hashes: compression can only waste CPU.
ALTER TABLE queen.log_dedup ALTER COLUMN keys SET STORAGE EXTERNAL;

------------------------------------------------------------------------------
-- Consumption (issue 16).  One row per (partition, consumer group) that has
-- consumed: the cursor and at most one lease, so one leased batch is in
-- flight per partition and group, and a group's parallelism is its
-- partition count.  Queue mode is the reserved group '__QUEUE_MODE__'.
-- committed is the last acknowledged offset (the next wanted is
-- committed + 1); a lease covers (committed, batch_end] and is held by
-- worker_id, the leaseId a client is given; batch_digest is the digest of
-- the transactionIds the pop delivered under it, so an ack naming exactly
-- those needs no lookup.  Only an explicit "failed" spends
-- batch_retry_count; attempt_* tell a redelivery apart.  Pop and ack find
-- rows by the primary key, so there is no other index; updates are
-- frequent and small, hence the fill factor.
------------------------------------------------------------------------------
CREATE TABLE queen.log_consumers (
	partition_id		uuid NOT NULL REFERENCES queen.log_partitions (id) ON DELETE CASCADE,
	consumer_group		text NOT NULL DEFAULT '__QUEUE_MODE__'
		CONSTRAINT log_consumers_group_check
			CHECK (consumer_group <> '' AND consumer_group !~ '[\x01-\x1f\x7f]'),
	committed			bigint NOT NULL DEFAULT -1,
	batch_end			bigint,
	worker_id			text,
	lease_expires_at	timestamptz,
	lease_acquired_at	timestamptz,
	batch_digest		bytea,
	batch_retry_count	integer NOT NULL DEFAULT 0,
	attempt_offset		bigint,
	attempt_end			bigint,
	attempt_count		integer NOT NULL DEFAULT 0,
	total_consumed		bigint NOT NULL DEFAULT 0,
	created_at			timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (partition_id, consumer_group),
	CONSTRAINT log_consumers_lease_check CHECK (
		(batch_end IS NULL AND worker_id IS NULL AND lease_expires_at IS NULL) OR
		(batch_end > committed AND worker_id IS NOT NULL AND lease_expires_at IS NOT NULL))
) WITH (
	fillfactor = 50,
	autovacuum_vacuum_scale_factor = 0,
	autovacuum_vacuum_threshold = 500,
	autovacuum_vacuum_cost_delay = 0,
	vacuum_truncate = off
);

------------------------------------------------------------------------------
-- A consumer group's durable subscription, remembered at its first contact
-- so that its later partitions start where its first ones did: 'all' (from
-- the start), 'new' (from the moment of first contact) or 'timestamp'.
-- subscription_timestamp is that moment ('-infinity' for 'all').  A row
-- is scoped to a queue (queue_id) or, for namespace/task pops, to the
-- namespace and task it named; partition_name is '' for the whole queue.
-- Queue mode has no row: it never skips backlog.
------------------------------------------------------------------------------
CREATE TABLE queen.consumer_groups_metadata (
	id						uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	tenant_id				uuid NOT NULL,
	consumer_group			text NOT NULL,
	queue_id				uuid REFERENCES queen.queues (id) ON DELETE CASCADE,
	partition_name			text NOT NULL DEFAULT '',
	namespace				text,
	task					text,
	subscription_mode		text NOT NULL
		CONSTRAINT consumer_groups_metadata_mode_check
			CHECK (subscription_mode IN ('all', 'new', 'timestamp')),
	subscription_timestamp	timestamptz NOT NULL,
	created_at				timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT cgm_identity_uk UNIQUE NULLS NOT DISTINCT
		(tenant_id, consumer_group, queue_id, partition_name, namespace, task)
);

------------------------------------------------------------------------------
-- The wildcard claim's scan floor per (queue, consumer group)
-- (src/core/claim_scan.c): every partition of the queue whose last_write_at
-- is older than last_empty_scan_at (less a few seconds of slack) was seen with
-- nothing pending, no lease and no write in flight for the group, so a
-- wildcard pop reads only the partitions written since, through
-- idx_log_partitions_queue_write.  It is recomputed by one pop at a time, at
-- most every 30 seconds per group (updated_at); rows go with their queue.
------------------------------------------------------------------------------
CREATE TABLE queen.consumer_watermarks (
	queue_id			uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
	consumer_group		text NOT NULL,
	last_empty_scan_at	timestamptz NOT NULL,
	updated_at			timestamptz NOT NULL,
	PRIMARY KEY (queue_id, consumer_group)
);

------------------------------------------------------------------------------
-- Dead letters: a message whose retries ran out, with a snapshot of its
-- payload, the error it failed with and where it came from.  No foreign key:
-- retention never touches these rows, and a queue's deletion removes them
-- explicitly (src/core/configure.c).
------------------------------------------------------------------------------
CREATE TABLE queen.log_dlq (
	id				uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	partition_id	uuid NOT NULL,
	consumer_group	text NOT NULL,
	"offset"		bigint NOT NULL,
	message_id		uuid NOT NULL,
	transaction_id	text NOT NULL,
	payload			jsonb,
	error			text,
	retry_count		integer NOT NULL DEFAULT 0,
	created_at		timestamptz NOT NULL,
	failed_at		timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX idx_log_dlq_partition_failed_at
	ON queen.log_dlq (partition_id, failed_at DESC);
-- queen.dlq_retention's expiry, oldest first
CREATE INDEX idx_log_dlq_failed_at ON queen.log_dlq (failed_at);

------------------------------------------------------------------------------
-- Traces: named events a consumer records against a message
-- (POST /api/v1/traces, src/core/traces.c).  Advisory: a trace names its
-- message by partition and transactionId and is stored whether or not that
-- message exists; the maintenance worker removes traces older than
-- queen.trace_retention.  trace_names holds the names it may be
-- found by (GET /api/v1/traces/by-name/:name), one row each.
------------------------------------------------------------------------------
CREATE TABLE queen.message_traces (
	id				uuid PRIMARY KEY,
	tenant_id		uuid NOT NULL,
	partition_id	uuid NOT NULL,
	transaction_id	text NOT NULL,
	consumer_group	text NOT NULL,
	event_type		text NOT NULL,
	data			jsonb NOT NULL,
	worker_id		text,
	created_at		timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX idx_message_traces_message
	ON queen.message_traces (tenant_id, partition_id, transaction_id, created_at);
CREATE INDEX idx_message_traces_created_at
	ON queen.message_traces (created_at);

CREATE TABLE queen.message_trace_names (
	trace_id		uuid NOT NULL REFERENCES queen.message_traces (id) ON DELETE CASCADE,
	tenant_id		uuid NOT NULL,
	trace_name		text NOT NULL,
	created_at		timestamptz NOT NULL,
	PRIMARY KEY (trace_id, trace_name)
);

CREATE INDEX idx_message_trace_names_name
	ON queen.message_trace_names (tenant_id, trace_name, created_at);

------------------------------------------------------------------------------
-- Stream processing (src/core/streams.c): a registered query, by name within
-- its tenant, with the shape of its operators (config_hash), and the state
-- its stateful operators keep per (query, source partition, key).  The state
-- dies with its query; a query dies with its source queue.  Values are JSON
-- a client wrote (jsonb, so plain SQL can query them); they are read and
-- written by stream cycles, never on a push's or a pop's path.
------------------------------------------------------------------------------
CREATE TABLE queen.stream_queries (
	id				uuid PRIMARY KEY,
	tenant_id		uuid NOT NULL,
	name			text NOT NULL,
	source_queue	text NOT NULL,
	sink_queue		text,
	config_hash		text NOT NULL,
	created_at		timestamptz NOT NULL DEFAULT now(),
	updated_at		timestamptz NOT NULL DEFAULT now(),
	UNIQUE (tenant_id, name)
);

CREATE INDEX idx_stream_queries_source
	ON queen.stream_queries (tenant_id, source_queue);

CREATE TABLE queen.stream_state (
	query_id		uuid NOT NULL REFERENCES queen.stream_queries (id) ON DELETE CASCADE,
	partition_id	uuid NOT NULL,
	key				text NOT NULL,
	value			jsonb NOT NULL,
	updated_at		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (query_id, partition_id, key)
);

-- an idle partition with state is kept (retention.c)
CREATE INDEX idx_stream_state_partition ON queen.stream_state (partition_id);

------------------------------------------------------------------------------
-- Spool files the broker's maintenance worker has committed (src/broker/maintenance/drain_file.c).
-- The row is written in the same transaction as the file's items, so a file
-- whose deletion a crash interrupted is never replayed twice, whatever the
-- queues' dedup windows.  A file stored part by part has one row per part
-- ('<file>#g<n>', '<file>#g<n>#i<k>') until it is finished; file rows older
-- than a day are removed.
------------------------------------------------------------------------------
CREATE TABLE queen.spool_drained (
	file		text PRIMARY KEY,
	items		bigint NOT NULL,
	drained_at	timestamptz NOT NULL DEFAULT now()
);
