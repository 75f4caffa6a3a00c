/*
 * queen--1.0.sql: the storage schema and the SQL surface of Queen for PostgreSQL.
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
-- (docs/FORMAT.md).  The primary key is the only index: reads are a backward
-- step to the covering segment and a forward range scan.
------------------------------------------------------------------------------
CREATE TABLE queen.log_segments (
	partition_id	uuid NOT NULL REFERENCES queen.log_partitions (id) ON DELETE CASCADE,
	base_offset		bigint NOT NULL,
	end_offset		bigint NOT NULL,
	created_at		timestamptz NOT NULL,
	blob			bytea NOT NULL,
	PRIMARY KEY (partition_id, base_offset),
	CONSTRAINT log_segments_range_check CHECK (end_offset >= base_offset)
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

-- Already zstd-compressed: TOAST must not try pglz on it again.
ALTER TABLE queen.log_segments ALTER COLUMN blob SET STORAGE EXTERNAL;

------------------------------------------------------------------------------
-- Transaction-id hashes: 16 bytes per frame, frame order, written on every push
-- (dedup probes and ack-by-transactionId both read it).  No foreign key on
-- purpose: the purge must not pay for FK triggers.
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

-- XXH3 hashes are random bytes: compression can only waste CPU.
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

------------------------------------------------------------------------------
-- Queue configuration (src/core/configure.c): POST /api/v1/configure and
-- DELETE /api/v1/resources/queues/:queue from SQL, answering as the HTTP
-- door does.  A refused body raises 22023 (the response's "invalid" key in
-- the detail) and writes nothing.
------------------------------------------------------------------------------
CREATE FUNCTION queen.configure_queue_v1(
	p_body jsonb,
	p_tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
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
	p_tenant uuid DEFAULT '00000000-0000-0000-0000-000000000001')
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
CREATE FUNCTION queen.current_tenant()
RETURNS uuid
AS 'MODULE_PATHNAME', 'queen_current_tenant_sql'
LANGUAGE C STABLE PARALLEL SAFE;

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
LANGUAGE C VOLATILE PARALLEL UNSAFE;
