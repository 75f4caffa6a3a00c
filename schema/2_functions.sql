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
