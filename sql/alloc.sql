-- The allocator's SQL contracts: log_push_one_v1, log_push_multi_v1 and
-- log_segment_at_v1, with Queen's signatures and JSON results.

-- Verdicts without the timestamp, plus a check of the timestamp's format.
CREATE FUNCTION pg_temp.verdicts(r jsonb) RETURNS TABLE (n bigint, verdict jsonb, created_format bool)
LANGUAGE sql AS $$
	SELECT n, e - 'createdAt',
	       CASE WHEN e ? 'createdAt' THEN (e->>'createdAt') ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$' END
	  FROM jsonb_array_elements(r) WITH ORDINALITY AS x(e, n)
$$;

-- empty bundle
SELECT queen.log_push_multi_v1(ARRAY[]::text[], ARRAY[]::text[], ARRAY[]::int[], ARRAY[]::bytea[], ARRAY[]::int8[], ARRAY[]::bytea[]);
SELECT queen.log_push_multi_v1(NULL, NULL, NULL, NULL, NULL, NULL);

-- Partitions whose ids sort opposite to their names, and a bundle given in an
-- order that is neither: verdicts still come back in input order.
INSERT INTO queen.queues (name, namespace, task) VALUES ('p3.multi', 'p3', 'multi');
INSERT INTO queen.log_partitions (id, queue_id, name)
SELECT id::uuid, (SELECT id FROM queen.queues WHERE name = 'p3.multi'), name
  FROM (VALUES ('00000000-0000-0000-0000-00000000000c', 'a'),
               ('00000000-0000-0000-0000-00000000000b', 'b'),
               ('00000000-0000-0000-0000-00000000000a', 'c')) v(id, name);
SELECT * FROM pg_temp.verdicts(queen.log_push_multi_v1(
	ARRAY['p3.multi', 'p3.multi', 'p3.multi'],
	ARRAY['b', 'c', 'a'],
	ARRAY[2, 1, 3],
	ARRAY[queen.hash_blob('{b0,b1}'), queen.hash_blob('{c0}'), queen.hash_blob('{a0,a1,a2}')],
	ARRAY[-1, -1, -1]::int8[],
	ARRAY[qtest.blob('{b0,b1}'), qtest.blob('{c0}'), qtest.blob('{a0,a1,a2}')]));
-- the second bundle's base offsets are the first one's counts, per partition
SELECT * FROM pg_temp.verdicts(queen.log_push_multi_v1(
	ARRAY['p3.multi', 'p3.multi', 'p3.multi'],
	ARRAY['a', 'b', 'c'],
	ARRAY[1, 1, 1],
	ARRAY[queen.hash_blob('{a3}'), queen.hash_blob('{b2}'), queen.hash_blob('{c1}')],
	ARRAY[-1, -1, -1]::int8[],
	ARRAY[qtest.blob('{a3}'), qtest.blob('{b2}'), qtest.blob('{c1}')]));
SELECT p.name, s.base_offset, s.end_offset, s.hashes = queen.hash_blob(
	       (SELECT array_agg(transaction_id ORDER BY idx) FROM queen.unpack_frames(s.blob))) AS hashes_match_frames
  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
 WHERE p.queue_id = (SELECT id FROM queen.queues WHERE name = 'p3.multi')
 ORDER BY p.name, s.base_offset;
SELECT name, last_offset FROM queen.log_partitions
 WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'p3.multi') ORDER BY name;

-- a bundle provisions what does not exist yet, queue and partitions, once
SELECT * FROM pg_temp.verdicts(queen.log_push_multi_v1(
	ARRAY['p3.new.queue', 'p3.new.queue', 'p3.multi'], ARRAY['x', 'y', 'd'], ARRAY[1, 1, 1],
	ARRAY[queen.hash_blob('{x}'), queen.hash_blob('{y}'), queen.hash_blob('{d}')], ARRAY[-1, -1, -1]::int8[],
	ARRAY[qtest.blob('{x}'), qtest.blob('{y}'), qtest.blob('{d}')]));
SELECT q.name, q.namespace, q.task, p.name AS partition, p.last_offset
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
 WHERE q.name IN ('p3.new.queue', 'p3.multi') ORDER BY 1, 4;

-- log_push_one_v1 by name provisions too
SELECT queen.log_push_one_v1('p3.one', 'Default', 2, queen.hash_blob('{o0,o1}'), -1, qtest.blob('{o0,o1}')) - 'createdAt' AS one_by_name;
-- and by partition id, with or without the window given
SELECT queen.log_push_one_v1('p3.one', 'Default', 1, queen.hash_blob('{o2}'), -1, qtest.blob('{o2}'),
	(SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p3.one')) - 'createdAt' AS one_by_pid;
SELECT queen.log_push_one_v1('p3.one', 'Default', 1, queen.hash_blob('{o3}'), -1, qtest.blob('{o3}'),
	(SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p3.one'), 0) - 'createdAt' AS one_by_pid_window_0;
SELECT qtest.expect_error($$SELECT queen.log_push_one_v1('p3.one', 'Default', 1, queen.hash_blob('{o4}'), -1, qtest.blob('{o4}'), '00000000-0000-0000-0000-0000000000ff')$$) AS unknown_pid;
SELECT qtest.expect_error($$SELECT queen.log_push_one_v1('p3.one', 'Default', 1, queen.hash_blob('{o4}'), -1, qtest.blob('{o4}'), '00000000-0000-0000-0000-0000000000ff', 0)$$) AS unknown_pid_window_0;
SELECT qtest.expect_error($$SELECT queen.log_push_one_v1('p3.one', 'Default', 1, queen.hash_blob('{o4}'), -1, qtest.blob('{o4}'), NULL, -5)$$) AS negative_window;

-- The allocator's counter moves only with a committed segment; quantized
-- last_write_at keeps the update HOT: rewritten only when over ten seconds old.
UPDATE queen.log_partitions SET last_write_at = now() + interval '1 hour'
 WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'p3.one');
SELECT queen.log_push_one_v1('p3.one', 'Default', 1, queen.hash_blob('{o5}'), -1, qtest.blob('{o5}'))->>'status';
SELECT last_write_at > now() + interval '30 minutes' AS kept_recent_value FROM queen.log_partitions
 WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'p3.one');
UPDATE queen.log_partitions SET last_write_at = now() - interval '1 hour'
 WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'p3.one');
SELECT queen.log_push_one_v1('p3.one', 'Default', 1, queen.hash_blob('{o6}'), -1, qtest.blob('{o6}'))->>'status';
SELECT last_write_at > now() - interval '1 minute' AS rewrote_stale_value,
       oldest_live_at <= last_write_at AS oldest_live_kept
  FROM queen.log_partitions WHERE queue_id = (SELECT id FROM queen.queues WHERE name = 'p3.one');

-- Covering-segment lookup: every offset of a segment maps to it; a gap or
-- the tail gives no row.
SELECT o, r_base, r_end, octet_length(r_blob) > 0 AS has_blob
  FROM generate_series(-1, 8) o
  LEFT JOIN LATERAL queen.log_segment_at_v1(
	(SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p3.one'), o) ON true
 ORDER BY o;
DELETE FROM queen.log_segments WHERE base_offset = 2
   AND partition_id = (SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p3.one');
SELECT count(*) AS rows_for_gap FROM queen.log_segment_at_v1(
	(SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p3.one'), 2);

-- Bad bundles: each raises before anything is written.  Every call runs
-- inside qtest.expect_error's exception block, whose rollback would undo a
-- write made before the error, so counting rows afterwards proves nothing.
-- What does: the transaction's own table statistics, which count every row
-- a statement inserted, updated or deleted, aborted subtransactions
-- included.  So the calls run in one transaction, and the counts of the
-- four tables must not move.
CREATE FUNCTION pg_temp.rows_touched() RETURNS bigint LANGUAGE sql AS $$
	SELECT sum(pg_stat_get_xact_tuples_inserted(t) + pg_stat_get_xact_tuples_updated(t)
	           + pg_stat_get_xact_tuples_deleted(t))::bigint
	  FROM unnest(ARRAY['queen.queues', 'queen.log_partitions',
	                    'queen.log_segments', 'queen.log_txns']::regclass[]) t
$$;
BEGIN;
CREATE TEMP TABLE before AS SELECT pg_temp.rows_touched() AS n;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad', 'p3.bad'], ARRAY['a'], ARRAY[1, 1], ARRAY[queen.hash_blob('{a}'), queen.hash_blob('{b}')], ARRAY[-1, -1]::int8[], ARRAY[qtest.blob('{a}'), qtest.blob('{b}')])$$) AS misaligned_partitions;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY['a'], ARRAY[1], ARRAY[queen.hash_blob('{a}')], NULL, ARRAY[qtest.blob('{a}')])$$) AS null_verified;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY['a'], ARRAY[1, 2], ARRAY[queen.hash_blob('{a}')], ARRAY[-1]::int8[], ARRAY[qtest.blob('{a}')])$$) AS misaligned_counts;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY['a'], ARRAY[1], ARRAY[queen.hash_blob('{a}')], ARRAY[-1]::int8[], ARRAY[qtest.blob('{a}')], ARRAY[queen.uuid_v7(), queen.uuid_v7()])$$) AS misaligned_tenants;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY[['p3.bad']], ARRAY[['a']], ARRAY[[1]], ARRAY[[queen.hash_blob('{a}')]], ARRAY[[-1]]::int8[], ARRAY[[qtest.blob('{a}')]])$$) AS two_dimensional;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY[NULL], ARRAY['a'], ARRAY[1], ARRAY[queen.hash_blob('{a}')], ARRAY[-1]::int8[], ARRAY[qtest.blob('{a}')])$$) AS null_queue;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY[NULL], ARRAY[1], ARRAY[queen.hash_blob('{a}')], ARRAY[-1]::int8[], ARRAY[qtest.blob('{a}')])$$) AS null_partition;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY['a'], ARRAY[NULL::int], ARRAY[queen.hash_blob('{a}')], ARRAY[-1]::int8[], ARRAY[qtest.blob('{a}')])$$) AS null_count;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY['a'], ARRAY[0], ARRAY[''::bytea], ARRAY[-1]::int8[], ARRAY[qtest.blob('{a}')])$$) AS zero_count;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY['a'], ARRAY[2], ARRAY[queen.hash_blob('{a}') || '\x00'::bytea], ARRAY[-1]::int8[], ARRAY[qtest.blob('{a,b}')])$$) AS wrong_stride;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY['a'], ARRAY[1], ARRAY[NULL::bytea], ARRAY[-1]::int8[], ARRAY[qtest.blob('{a}')])$$) AS null_hashes;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY['a'], ARRAY[1], ARRAY[queen.hash_blob('{a}')], ARRAY[-1]::int8[], ARRAY[convert_to('{"raw": "json"}', 'UTF8')])$$) AS blob_not_zstd;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad'], ARRAY['a'], ARRAY[1], ARRAY[queen.hash_blob('{a}')], ARRAY[-1]::int8[], ARRAY[NULL::bytea])$$) AS null_blob;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.bad', E'p3\nbad'], ARRAY['a', 'a'], ARRAY[1, 1], ARRAY[queen.hash_blob('{a}'), queen.hash_blob('{b}')], ARRAY[-1, -1]::int8[], ARRAY[qtest.blob('{a}'), qtest.blob('{b}')])$$) AS control_in_queue;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['p3.multi', 'p3.multi'], ARRAY['a', 'a'], ARRAY[1, 1], ARRAY[queen.hash_blob('{a}'), queen.hash_blob('{b}')], ARRAY[-1, -1]::int8[], ARRAY[qtest.blob('{a}'), qtest.blob('{b}')])$$) AS same_partition_twice;
SELECT qtest.expect_error($$SELECT queen.log_push_one_v1('p3.bad', 'a', 1, '\x0011'::bytea, -1, qtest.blob('{a}'))$$) AS one_wrong_stride;
SELECT qtest.expect_error($$SELECT queen.log_push_one_v1('p3.bad', 'a', NULL, queen.hash_blob('{a}'), -1, qtest.blob('{a}'))$$) AS one_null_count;
SELECT pg_temp.rows_touched() - (SELECT n FROM before) AS rows_touched;
-- the count does see a write that a later error in the same block undid
SELECT qtest.expect_error($$SELECT (SELECT count(*) FROM queen.push('p3.undone', '1')) / 0$$) AS write_then_error;
SELECT pg_temp.rows_touched() - (SELECT n FROM before) > 0 AS undone_write_counted;
COMMIT;
SELECT count(*) AS bad_queues FROM queen.queues WHERE name LIKE 'p3%bad';
