/*
 * queen--1.1.sql: the storage schema and the SQL surface of Queen for PostgreSQL,
 * made by the Makefile from the .sql files under schema/, in order (this part:
 * the tables).  A change here is a new version: schema/upgrade/ gets the step
 * from the last one (queen--1.0--1.1.sql), and t/095_upgrade.pl checks that
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
-- schema/2_functions.sql: the SQL door's functions: the allocator's
-- signatures, push and read, consuming, the codec, configuration,
-- acknowledging, the DBA's questions, traces, streams and retention.

------------------------------------------------------------------------------
-- The allocator (src/core/log_write.c, src/sql/log_sql.c)
------------------------------------------------------------------------------
CREATE FUNCTION queen.log_push_one_v1(
	p_queue text,
	p_partition text,
	p_msg_count int,
	p_hashes bytea,
	p_verified bigint,
	p_blob bytea,
	p_pid uuid DEFAULT NULL,
	p_window int DEFAULT NULL,
	p_tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
RETURNS jsonb
AS 'MODULE_PATHNAME', 'queen_log_push_one_v1'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION queen.log_push_multi_v1(
	p_queues text[],
	p_partitions text[],
	p_msg_counts int[],
	p_hashes bytea[],
	p_verified int8[],
	p_blobs bytea[],
	p_tenants uuid[] DEFAULT NULL)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'queen_log_push_multi_v1'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION queen.log_segment_at_v1(p_pid uuid, p_off bigint)
RETURNS TABLE (r_base bigint, r_end bigint, r_created timestamptz, r_blob bytea)
AS 'MODULE_PATHNAME', 'queen_log_segment_at_v1'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

------------------------------------------------------------------------------
-- The SQL door (src/sql/push.c, src/sql/read.c)
------------------------------------------------------------------------------
CREATE TYPE queen.push_result AS (
	index			int,
	message_id		uuid,
	transaction_id	text,
	queue			text,
	partition		text,
	status			text,
	log_offset		bigint,
	created_at		timestamptz
);

CREATE FUNCTION queen.push(
	queue text,
	payload jsonb,
	partition text DEFAULT 'Default',
	transaction_id text DEFAULT NULL)
RETURNS queen.push_result
AS 'MODULE_PATHNAME', 'queen_push_one'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION queen.push(items jsonb)
RETURNS SETOF queen.push_result
AS 'MODULE_PATHNAME', 'queen_push_items'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION queen.read(
	queue text,
	partition text DEFAULT 'Default',
	from_offset bigint DEFAULT 0,
	max_messages int DEFAULT 100)
RETURNS TABLE (
	log_offset		bigint,
	message_id		uuid,
	transaction_id	text,
	payload			jsonb,
	created_at		timestamptz)
AS 'MODULE_PATHNAME', 'queen_read'
LANGUAGE C STABLE PARALLEL SAFE;

------------------------------------------------------------------------------
-- Consuming (src/core/claim.c, src/sql/pop_sql.c): the claim of reference 4.2
-- and 4.3 in the caller's transaction, one row per delivered message,
-- partitions in claim order and offsets ascending within one.  With
-- auto_ack the cursor moves in this transaction and lease_id is NULL;
-- otherwise the partitions stay leased to lease_id until an ack or
-- lease_expires_at.  Bad input raises 22023 (or a name check's code) and
-- writes nothing; a queue that does not exist delivers nothing.  With wait,
-- a pop that finds nothing waits up to that long for a commit that makes
-- the queue pending (src/core/wait.c; docs/SQL.md says where it may wait).
------------------------------------------------------------------------------
CREATE TYPE queen.pop_result AS (
	queue				text,
	partition			text,
	partition_id		uuid,
	"offset"			bigint,
	message_id			uuid,
	transaction_id		text,
	trace_id			uuid,
	payload				jsonb,
	created_at			timestamptz,
	lease_id			text,
	delivery_attempt	integer,
	lease_expires_at	timestamptz,
	log_offset			bigint		-- "offset" again, by a name that needs no quotes
);

CREATE FUNCTION queen.pop(
	queue text,
	partition text DEFAULT NULL,
	consumer_group text DEFAULT '__QUEUE_MODE__',
	batch integer DEFAULT 1,
	lease_seconds integer DEFAULT NULL,
	auto_ack boolean DEFAULT false,
	max_partitions integer DEFAULT 1,
	subscription_mode text DEFAULT NULL,
	subscription_from text DEFAULT NULL,
	wait interval DEFAULT NULL)
RETURNS SETOF queen.pop_result
AS 'MODULE_PATHNAME', 'queen_pop_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION queen.pop_discover(
	namespace text DEFAULT NULL,
	task text DEFAULT NULL,
	consumer_group text DEFAULT '__QUEUE_MODE__',
	batch integer DEFAULT 1,
	lease_seconds integer DEFAULT NULL,
	auto_ack boolean DEFAULT false,
	max_partitions integer DEFAULT 1,
	subscription_mode text DEFAULT NULL,
	subscription_from text DEFAULT NULL,
	wait interval DEFAULT NULL)
RETURNS SETOF queen.pop_result
AS 'MODULE_PATHNAME', 'queen_pop_discover_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

------------------------------------------------------------------------------
-- The codec, exposed for drivers, tooling and tests (src/sql/codec_sql.c)
------------------------------------------------------------------------------
CREATE FUNCTION queen.uuid_v7()
RETURNS uuid
AS 'MODULE_PATHNAME', 'queen_uuid_v7_sql'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE FUNCTION queen.txn_hash(transaction_id text)
RETURNS bytea
AS 'MODULE_PATHNAME', 'queen_txn_hash_sql'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION queen.hash_blob(transaction_ids text[])
RETURNS bytea
AS 'MODULE_PATHNAME', 'queen_hash_blob_sql'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION queen.pack_frames(
	message_ids uuid[],
	transaction_ids text[],
	payloads bytea[])
RETURNS bytea
AS 'MODULE_PATHNAME', 'queen_pack_frames_sql'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION queen.unpack_frames(blob bytea)
RETURNS TABLE (
	idx				int,
	flags			int,
	message_id		uuid,
	trace_id		uuid,
	transaction_id	text,
	producer_sub	text,
	payload			bytea)
AS 'MODULE_PATHNAME', 'queen_unpack_frames_sql'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION queen.decompress_segment(blob bytea)
RETURNS bytea
AS 'MODULE_PATHNAME', 'queen_decompress_segment_sql'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- 16-byte slices of a hash blob, 0-based; plain SQL, used off the hot path.
CREATE FUNCTION queen.log_unnest_hashes(p_hashes bytea)
RETURNS TABLE (idx int, h bytea)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
	SELECT i, substring(p_hashes FROM i * 16 + 1 FOR 16)
	FROM generate_series(0, octet_length(p_hashes) / 16 - 1) AS i
$$;

-- The tenant the session's SQL door acts for (the setting queen.tenant).
CREATE FUNCTION queen.current_tenant()
RETURNS uuid
AS 'MODULE_PATHNAME', 'queen_current_tenant_sql'
LANGUAGE C STABLE PARALLEL SAFE;

------------------------------------------------------------------------------
-- Queue configuration (src/core/configure.c): POST /api/v1/configure and
-- DELETE /api/v1/resources/queues/:queue from SQL, answering as the HTTP
-- door does, for the session's tenant unless p_tenant names another.  A
-- refused body raises 22023 (the response's "invalid" key in the detail)
-- and writes nothing.
------------------------------------------------------------------------------
CREATE FUNCTION queen.configure_queue_v1(
	p_body jsonb,
	p_tenant uuid DEFAULT queen.current_tenant())
RETURNS jsonb
AS 'MODULE_PATHNAME', 'queen_configure_queue_v1'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Sort the hashes pushed since the last call into dedup runs and merge runs
-- of equal size; the broker's maintenance worker calls it every second.
-- Returns how many hashes it wrote.
CREATE FUNCTION queen.dedup_index(
	p_min_hashes integer DEFAULT 4096,
	p_max_partitions integer DEFAULT 1000)
RETURNS bigint
AS 'MODULE_PATHNAME', 'queen_dedup_index'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

CREATE FUNCTION queen.delete_queue_v1(
	p_queue text,
	p_tenant uuid DEFAULT queen.current_tenant())
RETURNS jsonb
AS 'MODULE_PATHNAME', 'queen_delete_queue_v1'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

------------------------------------------------------------------------------
-- Acknowledging from SQL (src/sql/ack_sql.c over src/core/ack.c and
-- consumer_admin.c): in the caller's transaction, so a pop, the caller's own
-- writes and the ack commit together.  Each answers per message as
-- POST /api/v1/ack does: success false with the reason for anything not
-- carried out, unless the call is strict (its strict argument, else the
-- setting queen.strict_acks): then that raises (55000, or 22023 for a
-- transactionId that names nothing), and the transaction cannot commit past
-- it.  A NULL where a value is required raises 22004, a status that is not
-- one of completed, success, acked, ok, failed, retry or dlq 22023, anything
-- else malformed 22023 (or the name checks' codes); nothing is written then.
------------------------------------------------------------------------------
CREATE FUNCTION queen.ack(
	transaction_id text,
	partition_id uuid,
	lease_id text DEFAULT NULL,
	status text DEFAULT 'completed',
	consumer_group text DEFAULT '__QUEUE_MODE__',
	error text DEFAULT NULL,
	strict boolean DEFAULT NULL)
RETURNS TABLE (success boolean, error text, lease_released boolean, dlq boolean, noop boolean)
AS 'MODULE_PATHNAME', 'queen_ack_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

-- The same with the partition id as text: an id pasted or taken from a psql
-- variable needs no ::uuid (and an untyped literal resolves here, not to the
-- batch form).
CREATE FUNCTION queen.ack(
	transaction_id text,
	partition_id text,
	lease_id text DEFAULT NULL,
	status text DEFAULT 'completed',
	consumer_group text DEFAULT '__QUEUE_MODE__',
	error text DEFAULT NULL,
	strict boolean DEFAULT NULL)
RETURNS TABLE (success boolean, error text, lease_released boolean, dlq boolean, noop boolean)
AS 'MODULE_PATHNAME', 'queen_ack_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION queen.ack(
	transaction_ids text[],
	partition_ids uuid[],
	lease_ids text[] DEFAULT NULL,
	statuses text[] DEFAULT NULL,
	consumer_group text DEFAULT '__QUEUE_MODE__',
	errors text[] DEFAULT NULL,
	strict boolean DEFAULT NULL)
RETURNS TABLE (index integer, transaction_id text, success boolean, error text,
			   lease_released boolean, dlq boolean, noop boolean)
AS 'MODULE_PATHNAME', 'queen_ack_batch_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION queen.ack(
	transaction_ids text[],
	partition_ids text[],
	lease_ids text[] DEFAULT NULL,
	statuses text[] DEFAULT NULL,
	consumer_group text DEFAULT '__QUEUE_MODE__',
	errors text[] DEFAULT NULL,
	strict boolean DEFAULT NULL)
RETURNS TABLE (index integer, transaction_id text, success boolean, error text,
			   lease_released boolean, dlq boolean, noop boolean)
AS 'MODULE_PATHNAME', 'queen_ack_batch_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The ack's success alone, for IF NOT queen.ack_ok(...) THEN ... code.
CREATE FUNCTION queen.ack_ok(
	transaction_id text,
	partition_id uuid,
	lease_id text DEFAULT NULL,
	status text DEFAULT 'completed',
	consumer_group text DEFAULT '__QUEUE_MODE__',
	error text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queen_ack_ok_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION queen.ack_ok(
	transaction_id text,
	partition_id text,
	lease_id text DEFAULT NULL,
	status text DEFAULT 'completed',
	consumer_group text DEFAULT '__QUEUE_MODE__',
	error text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queen_ack_ok_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION queen.nack(
	transaction_id text,
	partition_id uuid,
	lease_id text DEFAULT NULL,
	error text DEFAULT NULL,
	consumer_group text DEFAULT '__QUEUE_MODE__',
	strict boolean DEFAULT NULL)
RETURNS TABLE (success boolean, error text, lease_released boolean, dlq boolean, noop boolean)
AS 'MODULE_PATHNAME', 'queen_nack_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION queen.nack(
	transaction_id text,
	partition_id text,
	lease_id text DEFAULT NULL,
	error text DEFAULT NULL,
	consumer_group text DEFAULT '__QUEUE_MODE__',
	strict boolean DEFAULT NULL)
RETURNS TABLE (success boolean, error text, lease_released boolean, dlq boolean, noop boolean)
AS 'MODULE_PATHNAME', 'queen_nack_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION queen.reject(
	transaction_id text,
	partition_id uuid,
	lease_id text DEFAULT NULL,
	error text DEFAULT NULL,
	consumer_group text DEFAULT '__QUEUE_MODE__',
	strict boolean DEFAULT NULL)
RETURNS TABLE (success boolean, error text, lease_released boolean, dlq boolean, noop boolean)
AS 'MODULE_PATHNAME', 'queen_reject_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION queen.reject(
	transaction_id text,
	partition_id text,
	lease_id text DEFAULT NULL,
	error text DEFAULT NULL,
	consumer_group text DEFAULT '__QUEUE_MODE__',
	strict boolean DEFAULT NULL)
RETURNS TABLE (success boolean, error text, lease_released boolean, dlq boolean, noop boolean)
AS 'MODULE_PATHNAME', 'queen_reject_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION queen.renew(lease_id text, seconds integer DEFAULT 60, strict boolean DEFAULT NULL)
RETURNS TABLE (renewed integer, expires_at timestamptz)
AS 'MODULE_PATHNAME', 'queen_renew_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;

CREATE FUNCTION queen.delete_consumer_group(
	consumer_group text,
	queue text DEFAULT NULL,
	delete_metadata boolean DEFAULT true)
RETURNS bigint
AS 'MODULE_PATHNAME', 'queen_delete_consumer_group_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Consumer lag: per queue and consumer group (queue mode is __QUEUE_MODE__),
-- the messages not yet acknowledged and the partitions that hold them.  A
-- group counts on a queue once it has a cursor or a subscription there; a
-- queue with messages that nobody has consumed yet shows as queue mode.
-- Partitions without a cursor of the group count from the start of what is
-- retained, or for a "new" or timestamp subscription from the first segment
-- created at or after its moment, as its first pop there will start.
-- The broker samples it into queen_consumer_lag_messages
-- (queen.consumer_lag_interval).
CREATE VIEW queen.consumer_lag AS
WITH groups AS (
	SELECT p.queue_id, c.consumer_group
	  FROM queen.log_consumers c JOIN queen.log_partitions p ON p.id = c.partition_id
	UNION
	SELECT m.queue_id, m.consumer_group
	  FROM queen.consumer_groups_metadata m WHERE m.queue_id IS NOT NULL
	UNION
	SELECT q.id, '__QUEUE_MODE__'
	  FROM queen.queues q
	 WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p JOIN queen.log_consumers c
						   ON c.partition_id = p.id WHERE p.queue_id = q.id)
	   AND NOT EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m WHERE m.queue_id = q.id)
)
SELECT q.tenant_id, q.name AS queue, g.consumer_group,
	   count(*) FILTER (WHERE x.pending > 0) AS partitions_pending,
	   coalesce(sum(x.pending), 0)::bigint AS messages_pending
  FROM groups g
  JOIN queen.queues q ON q.id = g.queue_id
  JOIN queen.log_partitions p ON p.queue_id = g.queue_id
  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = g.consumer_group
  LEFT JOIN queen.consumer_groups_metadata m
	ON m.queue_id = g.queue_id AND m.consumer_group = g.consumer_group
   AND m.partition_name = '' AND m.namespace IS NULL AND m.task IS NULL
 CROSS JOIN LATERAL (
	SELECT GREATEST(p.last_offset - GREATEST(coalesce(c.committed,
			   CASE WHEN m.subscription_mode IS NULL OR m.subscription_mode = 'all' THEN -1
					ELSE coalesce((SELECT s.base_offset - 1 FROM queen.log_segments s
									WHERE s.partition_id = p.id
									  AND s.created_at >= m.subscription_timestamp
									ORDER BY s.base_offset LIMIT 1), p.last_offset) END),
			   p.log_start - 1), 0) AS pending
 ) x
 GROUP BY q.tenant_id, q.name, g.consumer_group;
COMMENT ON VIEW queen.consumer_lag IS
'Per queue and consumer group: messages not yet acknowledged (messages_pending) and the partitions holding them.';

------------------------------------------------------------------------------
-- The DBA's questions (docs/SQL.md, "Reading the state"): plain SQL over the
-- tables, for the session's tenant (queen.tenant), off the hot path.
------------------------------------------------------------------------------
-- Per partition of a queue, what a group has not acknowledged, counted as
-- queen.consumer_lag counts it: past the group's cursor, or, where it has
-- none yet, past where its first pop there will start.
CREATE FUNCTION queen._pending(queue_id uuid, consumer_group text)
RETURNS TABLE (partition_id uuid, pending bigint)
LANGUAGE sql STABLE
AS $$
	SELECT p.id, GREATEST(p.last_offset - GREATEST(coalesce(c.committed,
			   CASE WHEN m.subscription_mode IS NULL OR m.subscription_mode = 'all' THEN -1
					ELSE coalesce((SELECT s.base_offset - 1 FROM queen.log_segments s
									WHERE s.partition_id = p.id
									  AND s.created_at >= m.subscription_timestamp
									ORDER BY s.base_offset LIMIT 1), p.last_offset) END),
			   p.log_start - 1), 0)
	  FROM queen.log_partitions p
	  LEFT JOIN queen.log_consumers c ON c.partition_id = p.id AND c.consumer_group = $2
	  LEFT JOIN queen.consumer_groups_metadata m
		ON m.queue_id = $1 AND m.consumer_group = $2
	   AND m.partition_name = '' AND m.namespace IS NULL AND m.task IS NULL
	 WHERE p.queue_id = $1
$$;

-- Messages of queue a group has not acknowledged (queue mode by default);
-- a group that never popped counts everything retained.
CREATE FUNCTION queen.depth(queue text, consumer_group text DEFAULT '__QUEUE_MODE__')
RETURNS bigint
LANGUAGE sql STABLE
AS $$
	SELECT coalesce(sum(x.pending), 0)::bigint
	  FROM queen.queues q CROSS JOIN LATERAL queen._pending(q.id, $2) x
	 WHERE q.tenant_id = queen.current_tenant() AND q.name = $1
$$;

-- Has queue anything the group has not acknowledged (leased or not)?
CREATE FUNCTION queen.has_messages(queue text, consumer_group text DEFAULT '__QUEUE_MODE__')
RETURNS boolean
LANGUAGE sql STABLE
AS $$
	SELECT EXISTS (SELECT 1 FROM queen.queues q CROSS JOIN LATERAL queen._pending(q.id, $2) x
					WHERE q.tenant_id = queen.current_tenant() AND q.name = $1 AND x.pending > 0)
$$;

-- Internal: GET /api/v1/dlq's listing (newest first), under queen.dlq below.
CREATE FUNCTION queen._dlq_list(
	queue text,
	consumer_group text DEFAULT NULL,
	partition text DEFAULT NULL,
	from_time timestamptz DEFAULT NULL,
	to_time timestamptz DEFAULT NULL,
	page_limit integer DEFAULT 100,
	page_offset bigint DEFAULT 0)
RETURNS TABLE (total bigint, partition_name text, group_name text, log_offset bigint,
			   txn text, error_text text, payload_text text, retries integer)
AS 'MODULE_PATHNAME', 'queen_dlq_list_sql'
LANGUAGE C STABLE;
COMMENT ON FUNCTION queen._dlq_list(text, text, text, timestamptz, timestamptz, integer, bigint) IS
'Internal, under queen.dlq: the dead-letter listing of GET /api/v1/dlq.';

-- The dead letters of a queue, newest first, as GET /api/v1/dlq lists them;
-- total is the count before paging.
CREATE FUNCTION queen.dlq(
	queue text,
	consumer_group text DEFAULT NULL,
	partition text DEFAULT NULL,
	from_time timestamptz DEFAULT NULL,
	to_time timestamptz DEFAULT NULL,
	page_limit integer DEFAULT 100,
	page_offset bigint DEFAULT 0)
RETURNS TABLE (partition_name text, group_name text, log_offset bigint, transaction_id text,
			   error text, payload jsonb, retries integer, total bigint)
LANGUAGE sql STABLE
AS $$
	SELECT d.partition_name, d.group_name, d.log_offset, d.txn, d.error_text,
		   d.payload_text::jsonb, d.retries, d.total
	  FROM queen._dlq_list($1, $2, $3, $4, $5, $6, $7) d
$$;

-- UUIDv7 (every message id): the millisecond it was minted, and the
-- smallest id of a moment, for range conditions on message_id.
CREATE FUNCTION queen.uuid_v7_time(id uuid)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'queen_uuid_v7_time_sql'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION queen.uuid_v7_at(t timestamptz)
RETURNS uuid
AS 'MODULE_PATHNAME', 'queen_uuid_v7_at_sql'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Waiting (src/core/wait.c): a queue's NOTIFY channel, which commits that
-- make it pending notify when queen.notify is on, and LISTEN on it.
CREATE FUNCTION queen.channel(queue text)
RETURNS text
AS 'MODULE_PATHNAME', 'queen_channel_sql'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

CREATE FUNCTION queen.listen(queue text)
RETURNS text
AS 'MODULE_PATHNAME', 'queen_listen_sql'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- Stream processing (src/sql/streams_sql.c, src/core/streams.c): a query
-- registered by name, its state per (query, source partition, key), and a
-- cycle: after the caller's queen.push of its sink messages, the ack of its
-- source and its state changes, all in the caller's transaction.
CREATE FUNCTION queen.stream_register(
	name text,
	source_queue text,
	config_hash text,
	sink_queue text DEFAULT NULL,
	reset boolean DEFAULT false,
	OUT query_id uuid,
	OUT fresh boolean,
	OUT was_reset boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'queen_stream_register_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION queen.stream_state(
	query_id uuid,
	partition_id uuid,
	keys text[] DEFAULT NULL,
	key_prefix text DEFAULT NULL)
RETURNS TABLE (key text, value jsonb, updated_at timestamptz)
AS 'MODULE_PATHNAME', 'queen_stream_state_sql'
LANGUAGE C STABLE PARALLEL UNSAFE;

CREATE FUNCTION queen.stream_cycle(
	query_id uuid,
	partition_id uuid,
	upserts jsonb DEFAULT NULL,
	deletes text[] DEFAULT NULL,
	transaction_id text DEFAULT NULL,
	lease_id text DEFAULT NULL,
	consumer_group text DEFAULT '__QUEUE_MODE__',
	release_lease boolean DEFAULT true,
	status text DEFAULT 'completed',
	OUT state_ops_applied integer,
	OUT lease_released boolean,
	OUT dlq boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'queen_stream_cycle_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Retention from SQL (src/sql/retention_sql.c, src/core/retention.c): the
-- phases queen.retention_phases names, in the caller's transaction: one step
-- over each due partition for the queues' rules ("segments"), the hashes past
-- every dedup window ("hashes", log_start being txns_start) and idle
-- partitions ("partitions"); one batch of expired dead letters ("dlq") and
-- traces ("traces").  What each removed.  For a cluster without the broker,
-- e.g. with pg_cron:
--   SELECT cron.schedule('queen-retention', '5 seconds', 'SELECT count(*) FROM queen.retention_run()');
CREATE FUNCTION queen.retention_run(
	max_partitions integer DEFAULT 100,
	max_rows integer DEFAULT 1000)
RETURNS TABLE (kind text, queue text, partition text, segments bigint, messages bigint,
			   log_start bigint)
AS 'MODULE_PATHNAME', 'queen_retention_run_sql'
LANGUAGE C VOLATILE PARALLEL UNSAFE
SET jit = off;
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
-- schema/5_roles.sql: who may call what from SQL.  Four roles, granted to an
-- application's own login roles, each allowed exactly what its name says:
--
--   queen_reader    read messages, dead letters and every table and view
--                   (SELECT only); no writes of any kind
--   queen_writer    push (queen.push and the raw allocator signatures);
--                   nothing else, not even a read
--   queen_consumer  pop, ack, nack, reject, renew, LISTEN and the stream
--                   cycle; a member of queen_reader (it reads what it consumes)
--   queen_admin     configure and delete queues, seek, subscriptions, dead
--                   letters, retention, statistics, and the queue options by
--                   UPDATE of queen.queues; a member of the three others
--
-- No role has INSERT, UPDATE or DELETE on a log table: the allocator's
-- invariants (gapless offsets, one hash row per segment, the partition row's
-- counters) hold only for rows written by the core.  So the functions that
-- write run SECURITY DEFINER, as the extension's owner, with a fixed
-- search_path, and EXECUTE on them is the grant; those that only read run
-- with the caller's rights over the reader's SELECT.  Functions that touch no
-- table (the codec, UUIDv7) stay executable by anyone with USAGE on the schema.
--
-- Every function of the schema must have a row below: the install refuses
-- otherwise, so a new function cannot ship executable by PUBLIC by accident.

DO $$
DECLARE
	r			record;
	missing		text;
	fn			text[];
	map			text[];
BEGIN
	-- Roles are cluster-wide: another database, or an earlier install, may
	-- have made them already.
	FOREACH missing IN ARRAY ARRAY['queen_reader', 'queen_writer', 'queen_consumer', 'queen_admin']
	LOOP
		IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = missing) THEN
			EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', missing);
		END IF;
	END LOOP;

	FOR r IN SELECT * FROM (VALUES
			('queen_reader', 'queen_consumer'),
			('queen_reader', 'queen_admin'),
			('queen_writer', 'queen_admin'),
			('queen_consumer', 'queen_admin')) AS m(granted, member)
	LOOP
		IF NOT pg_catalog.pg_has_role(r.member, r.granted, 'MEMBER') THEN
			EXECUTE pg_catalog.format('GRANT %I TO %I', r.granted, r.member);
		END IF;
	END LOOP;

	-- [function, the role that may EXECUTE it (public: anyone), definer or invoker]
	map := ARRAY[
		-- the codec and UUIDv7: no table, nothing to protect
		['queen.uuid_v7()', 'public', 'invoker'],
		['queen.uuid_v7_time(uuid)', 'public', 'invoker'],
		['queen.uuid_v7_at(timestamptz)', 'public', 'invoker'],
		['queen.txn_hash(text)', 'public', 'invoker'],
		['queen.hash_blob(text[])', 'public', 'invoker'],
		['queen.pack_frames(uuid[],text[],bytea[])', 'public', 'invoker'],
		['queen.unpack_frames(bytea)', 'public', 'invoker'],
		['queen.decompress_segment(bytea)', 'public', 'invoker'],
		['queen.log_unnest_hashes(bytea)', 'public', 'invoker'],
		['queen.channel(text)', 'public', 'invoker'],
		['queen.current_tenant()', 'public', 'invoker'],
		['queen._ts(timestamptz)', 'public', 'invoker'],
		['queen._bucket_minutes(timestamptz,timestamptz)', 'public', 'invoker'],
		-- writing messages
		['queen.push(text,jsonb,text,text)', 'queen_writer', 'definer'],
		['queen.push(jsonb)', 'queen_writer', 'definer'],
		['queen.log_push_one_v1(text,text,integer,bytea,bigint,bytea,uuid,integer,uuid)', 'queen_writer', 'definer'],
		['queen.log_push_multi_v1(text[],text[],integer[],bytea[],bigint[],bytea[],uuid[])', 'queen_writer', 'definer'],
		-- consuming
		['queen.pop(text,text,text,integer,integer,boolean,integer,text,text,interval)', 'queen_consumer', 'definer'],
		['queen.pop_discover(text,text,text,integer,integer,boolean,integer,text,text,interval)', 'queen_consumer', 'definer'],
		['queen.ack(text,uuid,text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.ack(text,text,text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.ack(text[],uuid[],text[],text[],text,text[],boolean)', 'queen_consumer', 'definer'],
		['queen.ack(text[],text[],text[],text[],text,text[],boolean)', 'queen_consumer', 'definer'],
		['queen.ack_ok(text,uuid,text,text,text,text)', 'queen_consumer', 'definer'],
		['queen.ack_ok(text,text,text,text,text,text)', 'queen_consumer', 'definer'],
		['queen.nack(text,uuid,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.nack(text,text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.reject(text,uuid,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.reject(text,text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.renew(text,integer,boolean)', 'queen_consumer', 'definer'],
		['queen.listen(text)', 'queen_consumer', 'invoker'],
		['queen.stream_register(text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.stream_cycle(uuid,uuid,jsonb,text[],text,text,text,boolean,text)', 'queen_consumer', 'definer'],
		-- reading, with the caller's SELECT
		['queen.read(text,text,bigint,integer)', 'queen_reader', 'invoker'],
		['queen.log_segment_at_v1(uuid,bigint)', 'queen_reader', 'invoker'],
		['queen.stream_state(uuid,uuid,text[],text)', 'queen_reader', 'invoker'],
		['queen._pending(uuid,text)', 'queen_reader', 'invoker'],
		['queen.depth(text,text)', 'queen_reader', 'invoker'],
		['queen.has_messages(text,text)', 'queen_reader', 'invoker'],
		['queen._dlq_list(text,text,text,timestamptz,timestamptz,integer,bigint)', 'queen_reader', 'invoker'],
		['queen.dlq(text,text,text,timestamptz,timestamptz,integer,bigint)', 'queen_reader', 'invoker'],
		['queen._stats_age()', 'queen_reader', 'invoker'],
		['queen._queue_options(queen.queues)', 'queen_reader', 'invoker'],
		['queen._partition_json(queen.log_partitions)', 'queen_reader', 'invoker'],
		['queen._series(uuid,text,text,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._read_partition(uuid,bigint,integer)', 'queen_reader', 'invoker'],
		['queen._message_offset(uuid,text,bigint,bigint)', 'queen_reader', 'invoker'],
		['queen._message_status(uuid,bigint)', 'queen_reader', 'invoker'],
		['queen._api_queues(uuid,text,text,integer,bigint)', 'queen_reader', 'invoker'],
		['queen._api_queue(uuid,text,integer,bigint)', 'queen_reader', 'invoker'],
		['queen._api_overview(uuid)', 'queen_reader', 'invoker'],
		['queen._api_groupings(uuid,boolean)', 'queen_reader', 'invoker'],
		['queen._api_consumer_groups(uuid)', 'queen_reader', 'invoker'],
		['queen._api_lagging(uuid,integer,integer)', 'queen_reader', 'invoker'],
		['queen._api_consumer_group(uuid,text,integer)', 'queen_reader', 'invoker'],
		['queen._api_status(uuid,text,text,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_queue_ops(uuid,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_queue_lag(uuid,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_retention(uuid,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_analytics(uuid,text,text,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_message(uuid,uuid,text)', 'queen_reader', 'invoker'],
		['queen._api_messages(uuid,text,text,text,integer,bigint)', 'queen_reader', 'invoker'],
		['queen._api_worker_metrics(timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_system_metrics(timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		-- administration
		['queen.configure_queue_v1(jsonb,uuid)', 'queen_admin', 'definer'],
		['queen.delete_queue_v1(text,uuid)', 'queen_admin', 'definer'],
		['queen.delete_consumer_group(text,text,boolean)', 'queen_admin', 'definer'],
		['queen.seek(text,text,boolean,timestamptz,text)', 'queen_admin', 'definer'],
		['queen.set_subscription(text,timestamptz)', 'queen_admin', 'definer'],
		['queen.dlq_purge(text,text)', 'queen_admin', 'definer'],
		['queen.dlq_replay(uuid)', 'queen_admin', 'definer'],
		['queen.dlq_forget(uuid,text)', 'queen_admin', 'definer'],
		['queen.retention_run(integer,integer)', 'queen_admin', 'definer'],
		['queen.dedup_index(integer,integer)', 'queen_admin', 'definer'],
		['queen.stats_refresh()', 'queen_admin', 'definer']];

	SELECT pg_catalog.string_agg(p.oid::pg_catalog.regprocedure::text, ', ') INTO missing
	  FROM pg_catalog.pg_proc p
	 WHERE p.pronamespace = 'queen'::pg_catalog.regnamespace
	   AND p.oid NOT IN (SELECT map[i][1]::pg_catalog.regprocedure
						   FROM pg_catalog.generate_subscripts(map, 1) AS i);
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'queen: functions without a role in schema/5_roles.sql: %', missing;
	END IF;

	FOREACH fn SLICE 1 IN ARRAY map
	LOOP
		IF fn[2] <> 'public' THEN
			EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC',
									  fn[1]::pg_catalog.regprocedure);
			EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I',
									  fn[1]::pg_catalog.regprocedure, fn[2]);
		END IF;
		-- pg_catalog first, so no operator or function of a caller's schema
		-- can stand in for a built-in; pg_temp last, so no temporary table
		-- can stand in for one of ours
		IF fn[3] = 'definer' THEN
			EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER '
									  'SET search_path = pg_catalog, queen, pg_temp',
									  fn[1]::pg_catalog.regprocedure);
		END IF;
	END LOOP;
END
$$;

GRANT USAGE ON SCHEMA queen TO queen_reader, queen_writer, queen_consumer, queen_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA queen TO queen_reader;

-- The queue options an administrator may change in place (docs/SQL.md);
-- identity, tenancy and retention's own bookkeeping stay the core's.
GRANT UPDATE (namespace, task, priority, lease_time, retry_limit, retry_delay, ttl,
			  dead_letter_queue, dlq_after_max_retries, delayed_processing, window_buffer,
			  retention_seconds, completed_retention_seconds, retention_enabled,
			  encryption_enabled, max_wait_time_seconds, max_queue_size, min_pop_wait_time,
			  dedup_window_seconds, retention_sink_max_seconds)
	ON queen.queues TO queen_admin;
