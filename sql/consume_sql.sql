-- The SQL consumer's door: acks whose verdict cannot be lost (strict,
-- ack_ok), statuses and renewals that mean what they say, ids without
-- casts, the group where a user puts it, waiting pops' rules, and the
-- readers a DBA asks with (depth, has_messages, dlq, consumer_lag, UUIDv7).

CREATE TABLE business (id int PRIMARY KEY, note text);

-- ------------------------------------------------------------ unknown status
SELECT count(*) FROM queen.push('sqld.q', '{"n": 1}', 'p', 's1');
SELECT transaction_id, partition_id, lease_id, log_offset = "offset" AS same_offset
  FROM queen.pop('sqld.q', 'p') \gset
SELECT qtest.expect_error(format($$SELECT * FROM queen.ack(%L, %L::uuid, %L, 'COMPLETED')$$,
       :'transaction_id', :'partition_id', :'lease_id'));
-- nothing was spent: the lease is still held, no retry counted
SELECT worker_id = :'lease_id' AS still_leased, batch_retry_count
  FROM queen.log_consumers WHERE partition_id = :'partition_id';

-- ------------------------------------------------------------ ids without casts
-- psql variables are untyped literals: they resolve to the text overload
SELECT success, lease_released FROM queen.ack(:'transaction_id', :'partition_id', :'lease_id');
-- sent again: already applied
SELECT success, noop FROM queen.ack(:'transaction_id', :'partition_id', :'lease_id');
-- text-typed parameters, as a driver binds them
PREPARE ack_text(text, text, text) AS SELECT success, noop FROM queen.ack($1, $2, $3);
EXECUTE ack_text(:'transaction_id', :'partition_id', :'lease_id');
SELECT qtest.expect_error($$SELECT * FROM queen.ack('t', 'not-a-uuid')$$);
-- an untyped array literal needs its type: both batch forms would take it
SELECT qtest.expect_error($$SELECT * FROM queen.ack(transaction_ids => '{t}', partition_ids => '{00000000-0000-0000-0000-000000000000}')$$);
SELECT index, success FROM queen.ack(transaction_ids => '{t}'::text[],
                                     partition_ids => '{00000000-0000-0000-0000-000000000000}'::uuid[]);
-- the batch form takes text[] ids too
SELECT index, success, noop FROM queen.ack(ARRAY[:'transaction_id'], ARRAY[:'partition_id']);

-- ------------------------------------------------------------ strict verdicts
-- The case that wrote a business row twice: a pop committed on its own, its
-- lease ran out and another consumer took the message; the first one's ack
-- must not let its transaction commit.
SELECT count(*) FROM queen.push('sqld.s', '{"n": 2}', 'p', 's2');
SELECT transaction_id AS t1, partition_id AS p1, lease_id AS l1 FROM queen.pop('sqld.s', 'p') \gset
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = :'p1';
SELECT lease_id AS l2, delivery_attempt FROM queen.pop('sqld.s', 'p') \gset
SELECT :'l1' <> :'l2' AS other_lease, :delivery_attempt AS attempt;
BEGIN;
INSERT INTO business VALUES (2, 'first consumer');
SELECT qtest.expect_error(format($$SELECT * FROM queen.ack(%L, %L, %L, strict => true)$$, :'t1', :'p1', :'l1'));
SELECT * FROM queen.ack(:'t1', :'p1', :'l1', strict => true);
COMMIT;
SELECT count(*) AS business_rows FROM business;
-- the session setting makes every call strict; strict => false overrides it
SET queen.strict_acks = on;
SELECT qtest.expect_error(format($$SELECT * FROM queen.ack(%L, %L, %L)$$, :'t1', :'p1', :'l1'));
SELECT qtest.expect_error(format($$SELECT * FROM queen.nack(%L, %L, %L)$$, :'t1', :'p1', :'l1'));
SELECT qtest.expect_error(format($$SELECT * FROM queen.reject(%L, %L, %L)$$, :'t1', :'p1', :'l1'));
SELECT qtest.expect_error(format($$SELECT * FROM queen.ack(ARRAY[%L], ARRAY[%L], ARRAY[%L])$$, :'t1', :'p1', :'l1'));
SELECT qtest.expect_error(format($$SELECT * FROM queen.ack('no-such-txn', %L, %L)$$, :'p1', :'l2'));
SELECT replace(qtest.expect_error(format($$SELECT * FROM queen.renew(%L, 10)$$, :'l1')), :'l1', '<l1>');
SELECT success FROM queen.ack(:'t1', :'p1', :'l1', strict => false);
-- an applied ack passes strict mode; sent again once its lease is gone, it
-- cannot be told from another consumer's ack of the message, so strict
-- raises (the work of a transaction that acks again must not commit again)
SELECT renewed FROM queen.renew(:'l2', 10);
SELECT success FROM queen.ack(:'t1', :'p1', :'l2');
SELECT qtest.expect_error(format($$SELECT * FROM queen.ack(%L, %L, %L)$$, :'t1', :'p1', :'l2'));
RESET queen.strict_acks;
SELECT success, noop FROM queen.ack(:'t1', :'p1', :'l2');
-- without a lease named, a noop is a noop
SELECT success, noop FROM queen.ack(:'t1', :'p1', strict => true);
-- A's lease ran out, B took the message and acknowledged it: A's ack is
-- answered as already applied (noop), but strict and ack_ok do not take
-- that for A's own, or A's work would commit a second time
SELECT count(*) FROM queen.push('sqld.late', '{"n": 6}', 'p', 's6');
SELECT transaction_id AS ta, partition_id AS pa, lease_id AS la FROM queen.pop('sqld.late', 'p') \gset
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = :'pa';
SELECT a.success FROM queen.pop('sqld.late', 'p') b, queen.ack(b.transaction_id, b.partition_id, b.lease_id) a;
SELECT success, noop, error FROM queen.ack(:'ta', :'pa', :'la');
SELECT qtest.expect_error(format($$SELECT * FROM queen.ack(%L, %L, %L, strict => true)$$, :'ta', :'pa', :'la'));
SELECT queen.ack_ok(:'ta', :'pa', :'la') AS ok_for_a;
-- ack_ok: the verdict as a boolean, for IF NOT ... THEN
SELECT queen.ack_ok(:'t1', :'p1', :'l1') AS ok_again;
DO $$
BEGIN
	IF NOT queen.ack_ok('no-such-txn', qtest.pid('sqld.s', 'p')) THEN
		RAISE NOTICE 'ack_ok said false';
	END IF;
END
$$;

-- ------------------------------------------------------------ renewals
SELECT qtest.expect_error(format($$SELECT * FROM queen.renew(%L, 0)$$, :'l2'));
SELECT qtest.expect_error(format($$SELECT * FROM queen.renew(%L, -5)$$, :'l2'));

-- ------------------------------------------------------------ the group where a user puts it
SELECT count(*) FROM queen.push('sqld.g', '{"n": 3}', 'p', 's3');
SELECT count(*) FROM queen.pop('sqld.g', consumer_group => 'my-group', auto_ack => true);
SELECT count(*) FROM queen.push('sqld.g', '{"n": 4}', 'p', 's4');
SELECT qtest.expect_error($$SELECT * FROM queen.pop('sqld.g', 'my-group')$$);
-- a partition that is simply not there yet delivers nothing, as over HTTP
SELECT count(*) FROM queen.pop('sqld.g', 'not-yet');
SELECT count(*) FROM queen.pop('sqld.g', consumer_group => 'my-group', auto_ack => true);

-- ------------------------------------------------------------ waiting: where it may
SELECT count(*) FROM queen.push('sqld.w', '{"n": 5}', 'p', 's5');
-- something to deliver: no wait at all
SELECT log_offset, payload FROM queen.pop('sqld.w', wait => '10s', auto_ack => true);
-- nothing: returns empty when the time passes
SELECT count(*) FROM queen.pop('sqld.w', wait => '50ms');
SELECT qtest.expect_error($$SELECT * FROM queen.pop('sqld.w', wait => '-1s')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('sqld.w', wait => '2 hours')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('sqld.w', wait => interval '178000000 years' + interval '-691327190:52:13.5152')$$);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT qtest.expect_error($$SELECT * FROM queen.pop('sqld.w', wait => '1s')$$);
ROLLBACK;
BEGIN;
INSERT INTO business VALUES (5, 'written first');
SELECT qtest.expect_error($$SELECT * FROM queen.pop('sqld.w', wait => '1s')$$);
ROLLBACK;
-- first in its transaction it may wait; what it did not deliver left nothing behind
BEGIN;
SELECT count(*) FROM queen.pop('sqld.w', wait => '50ms');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
ROLLBACK;
-- a stale scan floor is computed, not stored, by a waiting try: it waits,
-- and may wait again in the same transaction
UPDATE queen.consumer_watermarks SET updated_at = now() - interval '1 hour';
BEGIN;
SELECT count(*) FROM queen.pop('sqld.w', wait => '50ms');
SELECT count(*) FROM queen.pop('sqld.w', wait => '50ms');
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
ROLLBACK;
-- a partition named like a group is refused before any wait
SELECT qtest.expect_error($$SELECT * FROM queen.pop('sqld.g', 'my-group', wait => '1h')$$);
-- a new group's first contact is written (and kept): the pop returns at once
SELECT count(*) FROM queen.pop('sqld.w', consumer_group => 'late', wait => '1h',
                               subscription_mode => 'new');
SELECT count(*) AS subscribed FROM queen.consumer_groups_metadata WHERE consumer_group = 'late';

-- ------------------------------------------------------------ channels
SELECT queen.channel('orders'), queen.channel('billing.in-flight');
SELECT queen.channel(repeat('q', 80)) ~ '^queen_[0-9a-f]{16}$' AS hashed;
SET queen.tenant = '11111111-1111-1111-1111-111111111111';
SELECT queen.channel('orders') <> 'queen_orders' AS per_tenant;
RESET queen.tenant;
SELECT queen.listen('orders');
SELECT pg_listening_channels();
UNLISTEN *;

-- ------------------------------------------------------------ the DBA's readers
-- a queue nobody consumed is listed, in queue mode, with everything
SELECT count(*) FROM queen.push('[{"queue": "sqld.lag", "partition": "a", "payload": 1},
                                  {"queue": "sqld.lag", "partition": "b", "payload": 2},
                                  {"queue": "sqld.lag", "partition": "b", "payload": 3}]');
SELECT consumer_group, partitions_pending, messages_pending
  FROM queen.consumer_lag WHERE queue = 'sqld.lag';
SELECT queen.depth('sqld.lag') AS depth, queen.has_messages('sqld.lag') AS has,
       queen.depth('sqld.lag', 'never') AS never_popped, queen.depth('no.such.queue') AS none;
-- a "new" group sees nothing of the past
SELECT count(*) FROM queen.pop('sqld.lag', consumer_group => 'fresh', subscription_mode => 'new');
SELECT queen.depth('sqld.lag', 'fresh') AS fresh, queen.has_messages('sqld.lag', 'fresh') AS has_fresh;
SELECT consumer_group, messages_pending FROM queen.consumer_lag WHERE queue = 'sqld.lag' ORDER BY 1;
-- a partition created after its first contact is all new to it
SELECT count(*) FROM queen.push('sqld.lag', '4', 'c');
SELECT queen.depth('sqld.lag', 'fresh') AS fresh, queen.has_messages('sqld.lag', 'fresh') AS has_fresh;
SELECT consumer_group, messages_pending FROM queen.consumer_lag WHERE queue = 'sqld.lag' ORDER BY 1;
SELECT partition, payload FROM queen.pop('sqld.lag', consumer_group => 'fresh', auto_ack => true);
SELECT count(*) FROM queen.pop('sqld.lag', batch => 10, max_partitions => 0, auto_ack => true);
SELECT queen.depth('sqld.lag') AS depth, queen.has_messages('sqld.lag') AS has;
-- the dead letters, payload as jsonb
SELECT configure_queue_v1 ->> 'queue' FROM queen.configure_queue_v1(
       '{"queue": "sqld.dlq", "options": {"deadLetterQueue": true, "retryLimit": 0}}');
SELECT count(*) FROM queen.push('sqld.dlq', '{"bad": true}', 'p', 'poison');
SELECT transaction_id AS dt, partition_id AS dp, lease_id AS dl FROM queen.pop('sqld.dlq', 'p') \gset
SELECT success, dlq FROM queen.reject(:'dt', :'dp', :'dl', 'cannot parse');
SELECT partition_name, group_name, log_offset, transaction_id, error, payload, total
  FROM queen.dlq('sqld.dlq');
-- UUIDv7: the moment of a message id, and the boundary of a moment
SELECT count(*) FROM queen.push('sqld.u', '{}', 'p', 'u1');
SELECT abs(extract(epoch FROM queen.uuid_v7_time(message_id) - created_at)) < 60 AS near,
       message_id >= queen.uuid_v7_at(created_at - interval '1 minute') AS after_boundary,
       message_id < queen.uuid_v7_at(created_at + interval '1 minute') AS before_boundary
  FROM queen.read('sqld.u', 'p');
SELECT queen.uuid_v7_at('2026-01-01 00:00:00+00') AS boundary,
       queen.uuid_v7_time(queen.uuid_v7_at('2026-01-01 00:00:00.123+00')) AS at_ms;
SELECT qtest.expect_error($$SELECT queen.uuid_v7_time('8b63f915-b1b3-4e31-9352-93d3a1cc540a')$$);
SELECT qtest.expect_error($$SELECT queen.uuid_v7_at('1960-01-01')$$);

DROP TABLE business;
