-- Many pushes in one transaction.  After its first push to a partition a
-- transaction holds the row and allocates that partition's offsets in
-- memory; the row's last_offset is written once, before commit.  Offsets
-- must stay gapless through savepoints rolled back, a queue deleted in the
-- same transaction and dedup within the transaction, and 500,000 pushes in
-- one transaction must finish (each one used to reread every earlier
-- version of the row and every earlier hash: hours instead of seconds).

CREATE FUNCTION bt_state(q text, part text DEFAULT 'Default')
RETURNS TABLE (last_offset bigint, segments bigint, first bigint, last bigint, gapless boolean)
LANGUAGE sql AS $$
  SELECT p.last_offset, count(s.*), min(s.base_offset), max(s.end_offset),
         coalesce(bool_and(s.base_offset = coalesce(s.prev_end, -1) + 1), true)
    FROM queen.log_partitions p JOIN queen.queues qq ON qq.id = p.queue_id
    LEFT JOIN (SELECT partition_id, base_offset, end_offset,
                      lag(end_offset) OVER (PARTITION BY partition_id ORDER BY base_offset) AS prev_end
                 FROM queen.log_segments) s ON s.partition_id = p.id
   WHERE qq.name = q AND p.name = part
   GROUP BY p.last_offset $$;

-- savepoints: what a rolled back savepoint allocated is handed out again
BEGIN;
SELECT log_offset FROM queen.push('bt.sp', '{"n": 1}');
SELECT log_offset FROM queen.push('bt.sp', '{"n": 2}');
SAVEPOINT a;
SELECT log_offset FROM queen.push('bt.sp', '{"n": 3}');
SELECT log_offset FROM queen.push('bt.sp', '{"n": 4}');
ROLLBACK TO SAVEPOINT a;
SELECT log_offset FROM queen.push('bt.sp', '{"n": 5}');
SAVEPOINT b;
SELECT log_offset FROM queen.push('bt.sp', '{"n": 6}');
RELEASE SAVEPOINT b;
COMMIT;
SELECT * FROM bt_state('bt.sp');
SELECT log_offset, payload FROM queen.read('bt.sp');

-- a savepoint that wrote another partition's row (before locking a new
-- partition) and rolled back: the row is written again at commit
BEGIN;
SELECT log_offset FROM queen.push('bt.fl', '{"n": 1}');
SELECT log_offset FROM queen.push('bt.fl', '{"n": 2}');
SELECT log_offset FROM queen.push('bt.fl', '{"n": 3}');
SAVEPOINT a;
SELECT log_offset FROM queen.push('bt.fl', '{"n": 4}', 'other');
ROLLBACK TO SAVEPOINT a;
COMMIT;
SELECT * FROM bt_state('bt.fl');
SELECT count(*) AS other_partitions FROM bt_state('bt.fl', 'other');
-- the next transaction continues where the committed one ended
SELECT log_offset FROM queen.push('bt.fl', '{"n": 5}');

-- a transaction that rolls back leaves the row as it was
BEGIN;
SELECT log_offset FROM queen.push('bt.fl', '{"n": 6}');
SELECT log_offset FROM queen.push('bt.fl', '{"n": 7}');
ROLLBACK;
SELECT * FROM bt_state('bt.fl');

-- dedup within one transaction, on the in-memory path
BEGIN;
SELECT status, log_offset FROM queen.push('bt.dd', '{"n": 1}', 'Default', 'tx-1');
SELECT status, log_offset FROM queen.push('bt.dd', '{"n": 2}', 'Default', 'tx-2');
SELECT status, log_offset FROM queen.push('bt.dd', '{"n": 1}', 'Default', 'tx-1');
SELECT status, log_offset FROM queen.push('bt.dd', '{"n": 3}', 'Default', 'tx-3');
SELECT status, log_offset FROM queen.push('bt.dd', '{"n": 2}', 'Default', 'tx-2');
COMMIT;
SELECT status, log_offset FROM queen.push('bt.dd', '{"n": 3}', 'Default', 'tx-3');
SELECT * FROM bt_state('bt.dd');

-- a queue deleted after pushes in the same transaction, then pushed again
BEGIN;
SELECT log_offset FROM queen.push('bt.del', '{"n": 1}');
SELECT log_offset FROM queen.push('bt.del', '{"n": 2}');
SELECT queen.delete_queue_v1('bt.del')->>'existed' AS existed;
SELECT log_offset FROM queen.push('bt.del', '{"n": 3}');
SELECT log_offset FROM queen.push('bt.del', '{"n": 4}');
COMMIT;
SELECT * FROM bt_state('bt.del');
SELECT log_offset, payload FROM queen.read('bt.del');

-- a queue deleted, then a savepoint rolled back: the deleted rows are not
-- written at commit (the commit used to fail)
BEGIN;
SELECT log_offset FROM queen.push('bt.del2', '{"n": 1}');
SELECT log_offset FROM queen.push('bt.del2', '{"n": 2}');
SELECT queen.delete_queue_v1('bt.del2')->>'existed' AS existed;
SAVEPOINT a;
ROLLBACK TO SAVEPOINT a;
COMMIT;
SELECT count(*) AS del2_partitions FROM bt_state('bt.del2');

-- a queue deletion inside a savepoint rolled back: the rows come back, with
-- the offsets the deferred pushes took
BEGIN;
SELECT log_offset FROM queen.push('bt.del3', '{"n": 1}');
SELECT log_offset FROM queen.push('bt.del3', '{"n": 2}');
SAVEPOINT a;
SELECT queen.delete_queue_v1('bt.del3')->>'existed' AS existed;
ROLLBACK TO SAVEPOINT a;
SELECT log_offset FROM queen.push('bt.del3', '{"n": 3}');
COMMIT;
SELECT * FROM bt_state('bt.del3');
SELECT log_offset FROM queen.push('bt.del3', '{"n": 4}');

-- the window changed in the same transaction applies to the next push
BEGIN;
SELECT status, log_offset FROM queen.push('bt.win', '{"n": 1}', 'Default', 'w-1');
SELECT status, log_offset FROM queen.push('bt.win', '{"n": 2}', 'Default', 'w-2');
SELECT queen.configure_queue_v1('{"queue": "bt.win", "options": {"dedupWindowSeconds": 0}}')->>'configured' AS configured;
SELECT status, log_offset FROM queen.push('bt.win', '{"n": 1}', 'Default', 'w-1');
COMMIT;

-- pushes through a SECURITY DEFINER function by a role without table
-- rights: the row is written at commit as the function's owner
CREATE ROLE regress_bt_app;
CREATE FUNCTION bt_push(q text, p jsonb) RETURNS bigint LANGUAGE sql SECURITY DEFINER
	AS $$ SELECT log_offset FROM queen.push(q, p) $$;
GRANT EXECUTE ON FUNCTION bt_push(text, jsonb) TO regress_bt_app;
BEGIN;
SET LOCAL ROLE regress_bt_app;
SELECT bt_push('bt.definer', '{"n": 1}');
SELECT bt_push('bt.definer', '{"n": 2}');
SELECT bt_push('bt.definer', '{"n": 3}');
COMMIT;
SELECT * FROM bt_state('bt.definer');
DROP FUNCTION bt_push(text, jsonb);
DROP ROLE regress_bt_app;

-- a transaction made read-only after its pushes commits them; a push after
-- that is refused
BEGIN;
SELECT log_offset FROM queen.push('bt.ro', '{"n": 1}');
SELECT log_offset FROM queen.push('bt.ro', '{"n": 2}');
SET transaction_read_only = on;
SAVEPOINT a;
SELECT log_offset FROM queen.push('bt.ro', '{"n": 3}');
ROLLBACK TO SAVEPOINT a;
COMMIT;
SELECT * FROM bt_state('bt.ro');
-- and a read-only transaction's first push is refused before it locks the
-- partition (its id is cached by now, so the pre-lock is the one from C)
BEGIN READ ONLY;
SELECT log_offset FROM queen.push('bt.ro', '{"n": 4}');
ROLLBACK;
SELECT * FROM bt_state('bt.ro');

-- a partition's row deleted by hand after deferred pushes: the commit fails
-- rather than leave segments of no partition
BEGIN;
SELECT log_offset FROM queen.push('bt.hand', '{"n": 1}');
SELECT log_offset FROM queen.push('bt.hand', '{"n": 2}');
DELETE FROM queen.queues WHERE name = 'bt.hand';
COMMIT;
SELECT count(*) AS hand_segments FROM queen.log_segments s
 WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p WHERE p.id = s.partition_id);

-- 500,000 pushes in one transaction, with their transactionIds, plus one
-- repeated: the outbox backfill.  The bound is far above what it takes
-- (seconds); the quadratic cost this guards against takes hours.
SET statement_timeout = '10min';
BEGIN;
SELECT count(*) FILTER (WHERE p.status = 'queued') AS queued,
       count(*) FILTER (WHERE p.status = 'duplicate') AS duplicates
  FROM generate_series(1, 500001) g,
       LATERAL queen.push('bt.big', jsonb_build_object('g', g), 'Default',
                          'big-' || least(g, 500000)) p;
COMMIT;
RESET statement_timeout;
SELECT * FROM bt_state('bt.big');
SELECT log_offset, payload FROM queen.read('bt.big', 'Default', 499998, 10);
