-- Consuming inside the caller's transaction (queen.pop + queen.ack): the work
-- and the ack commit together, so a message is processed exactly once; a
-- rollback returns it untouched; a nack redelivers in offset order.

CREATE TABLE ctx_work (txn text PRIMARY KEY, n int);	-- the "business rows"

SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'ctx.q',
       'payload', jsonb_build_object('n', i), 'transactionId', 'c' || i) ORDER BY i)
       FROM generate_series(0, 5) i));

-- the consumer row as the tests look at it
CREATE FUNCTION pg_temp.cursor() RETURNS TABLE (committed bigint, batch_end bigint, leased boolean,
                                                retries int, consumed bigint) LANGUAGE sql AS $$
	SELECT committed, batch_end, worker_id IS NOT NULL, batch_retry_count, total_consumed
	  FROM queen.log_consumers WHERE partition_id = qtest.pid('ctx.q', 'Default')
$$;

-- ------------------------------------------------------------ commit
-- pop, work, ack, commit: the work is there and the message is gone
BEGIN;
CREATE TEMP TABLE m ON COMMIT DROP AS SELECT * FROM queen.pop('ctx.q', 'Default', batch => 1);
INSERT INTO ctx_work SELECT transaction_id, (payload ->> 'n')::int FROM m;
SELECT a.success, a.lease_released FROM m, queen.ack(m.transaction_id, m.partition_id, m.lease_id) a;
COMMIT;
SELECT * FROM ctx_work ORDER BY txn;
SELECT * FROM pg_temp.cursor();
-- the next pop delivers the next message, never c0 again
SELECT "offset", transaction_id, delivery_attempt FROM queen.pop('ctx.q', 'Default', batch => 1, auto_ack => true);

-- ------------------------------------------------------------ rollback
-- pop, work, ack, then a failure: nothing of it stays, and the message
-- is delivered again at once, as if never popped
SELECT * FROM pg_temp.cursor();
BEGIN;
CREATE TEMP TABLE m ON COMMIT DROP AS SELECT * FROM queen.pop('ctx.q', 'Default', batch => 1);
SELECT "offset", transaction_id, delivery_attempt FROM m;
INSERT INTO ctx_work SELECT transaction_id, (payload ->> 'n')::int FROM m;
SELECT a.success FROM m, queen.ack(m.transaction_id, m.partition_id, m.lease_id) a;
ROLLBACK;
SELECT count(*) AS work_rows FROM ctx_work WHERE txn = 'c2';
SELECT * FROM pg_temp.cursor();
BEGIN;
CREATE TEMP TABLE m ON COMMIT DROP AS SELECT * FROM queen.pop('ctx.q', 'Default', batch => 1);
SELECT "offset", transaction_id, delivery_attempt FROM m;
INSERT INTO ctx_work SELECT transaction_id, (payload ->> 'n')::int FROM m;
SELECT a.success FROM m, queen.ack(m.transaction_id, m.partition_id) a;	-- without the lease id
COMMIT;
SELECT * FROM ctx_work ORDER BY txn;

-- ------------------------------------------------------------ a popped lease, acked later
-- A pop committed on its own leases the batch; an ack in a later
-- transaction with its lease id finishes it.
CREATE TEMP TABLE leased AS SELECT * FROM queen.pop('ctx.q', 'Default', batch => 3);
SELECT "offset", transaction_id, delivery_attempt FROM leased ORDER BY "offset";
SELECT * FROM pg_temp.cursor();
-- another consumer gets nothing while the lease lives
SELECT count(*) AS while_leased FROM queen.pop('ctx.q', 'Default', batch => 3);

-- ------------------------------------------------------------ a nack redelivers in order
-- c3 completed, c4 failed, c5 completed: the cursor stops after c3; c4 and
-- c5 come back at once, in offset order, one retry spent.
CREATE TEMP TABLE leased_arrays AS
SELECT array_agg(transaction_id ORDER BY "offset") AS txns, array_agg(partition_id) AS pids,
       array_agg(lease_id) AS leases FROM leased;
SELECT txns FROM leased_arrays;
SELECT a.* FROM leased_arrays,
       queen.ack(txns, pids, leases, ARRAY['completed', 'failed', 'completed']) a;
SELECT * FROM pg_temp.cursor();
CREATE TEMP TABLE redelivered AS SELECT * FROM queen.pop('ctx.q', 'Default', batch => 3);
SELECT "offset", transaction_id, delivery_attempt FROM redelivered ORDER BY "offset";
-- this time all of it: the batch is done, the retry budget reset
SELECT a.index, a.success, a.lease_released
  FROM (SELECT array_agg(transaction_id ORDER BY "offset") t, array_agg(partition_id) p,
               array_agg(lease_id) l FROM redelivered) r,
       queen.ack(r.t, r.p, r.l) a;
SELECT * FROM pg_temp.cursor();
SELECT count(*) AS nothing_left FROM queen.pop('ctx.q', 'Default', batch => 10);

-- ------------------------------------------------------------ a whole batch, by its digest
-- An ack that names exactly the leased batch, all completed, moves the
-- cursor to its end without reading the stored hashes (the pop recorded the
-- digest of the batch's transactionIds); any other ack resolves each id there.
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'ctx.q',
       'payload', jsonb_build_object('n', i), 'transactionId', 'c' || i) ORDER BY i)
       FROM generate_series(6, 17) i));
-- (the counts of this session not yet reported, so read before and after)
CREATE FUNCTION pg_temp.hash_reads() RETURNS bigint LANGUAGE sql AS $$
	SELECT sum(idx_scan + idx_tup_fetch + seq_scan)::bigint FROM pg_stat_xact_user_tables
	 WHERE relid IN ('queen.log_segments'::regclass, 'queen.log_txns'::regclass)
$$;
-- acked in another order than delivered: the digest does not care
CREATE TEMP TABLE whole AS SELECT * FROM queen.pop('ctx.q', 'Default', batch => 4);
BEGIN;
SELECT pg_temp.hash_reads() AS reads_before \gset
SELECT a.index, a.transaction_id, a.success, a.lease_released
  FROM (SELECT array_agg(transaction_id ORDER BY "offset" DESC) t, array_agg(partition_id) p,
               array_agg(lease_id) l FROM whole) r,
       queen.ack(r.t, r.p, r.l) a;
SELECT pg_temp.hash_reads() - :reads_before AS hash_reads;
COMMIT;
SELECT * FROM pg_temp.cursor();
-- the same count of ids, but one of them the batch's twice: resolved one by
-- one, it completes up to the highest one named and keeps the lease
CREATE TEMP TABLE twice AS SELECT * FROM queen.pop('ctx.q', 'Default', batch => 4);
SELECT array_agg(transaction_id ORDER BY "offset") FROM twice;
BEGIN;
SELECT pg_temp.hash_reads() AS reads_before \gset
SELECT a.index, a.transaction_id, a.success, a.lease_released
  FROM (SELECT array_agg(CASE WHEN "offset" = 13 THEN 'c11' ELSE transaction_id END
                         ORDER BY "offset") t,
               array_agg(partition_id) p, array_agg(lease_id) l FROM twice) r,
       queen.ack(r.t, r.p, r.l) a;
SELECT pg_temp.hash_reads() > :reads_before AS read_hashes;
COMMIT;
SELECT * FROM pg_temp.cursor();
-- one id the batch never held in place of one it did: that one is
-- unresolved, the rest complete up to the highest named
SELECT a.index, a.transaction_id, a.success, a.error IS NOT NULL AS told, a.lease_released
  FROM (SELECT array_agg(CASE WHEN "offset" = 12 THEN 'nope' ELSE transaction_id END
                         ORDER BY "offset") t,
               array_agg(partition_id) p, array_agg(lease_id) l
          FROM (SELECT * FROM twice WHERE "offset" >= 12) x) r,
       queen.ack(r.t, r.p, r.l) a;
SELECT * FROM pg_temp.cursor();
-- a batch's digest is its own: the next batch acked with the previous
-- batch's ids (as many) is told they were acknowledged before, and moves
-- nothing
CREATE TEMP TABLE next AS SELECT * FROM queen.pop('ctx.q', 'Default', batch => 4);
SELECT array_agg(transaction_id ORDER BY "offset") FROM next;
SELECT count(*) FILTER (WHERE a.noop) AS noop, count(*) FILTER (WHERE a.lease_released) AS released
  FROM (SELECT array_agg(transaction_id) t FROM whole) w,
       (SELECT array_agg(partition_id) p, array_agg(lease_id) l FROM next) n,
       queen.ack(w.t, n.p, n.l) a;
SELECT * FROM pg_temp.cursor();
DROP TABLE ctx_work;
