-- Consumption under careless or hostile input, from SQL: what one pop may
-- deliver (queen.pop_max_bytes), the longest lease (queen.max_lease_seconds),
-- an ack sent again after it was applied, and subscriptions that are not
-- what they say.

-- ------------------------------------------------------------ the byte budget
-- five messages of about 600 bytes in one partition
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'lim.q',
       'partition', 'p', 'payload', jsonb_build_object('n', i, 'pad', repeat('x', 600)),
       'transactionId', 'm' || i) ORDER BY i)
       FROM generate_series(0, 4) i));
SET queen.pop_max_bytes = '1kB';
-- the first message is delivered whatever its size; the second would pass the budget
SELECT "offset" FROM queen.pop('lim.q', 'p', 'g1', batch => 10, auto_ack => true);
SET queen.pop_max_bytes = '3kB';
SELECT "offset" FROM queen.pop('lim.q', 'p', 'g1', batch => 10, auto_ack => true) ORDER BY 1;
RESET queen.pop_max_bytes;
SELECT "offset" FROM queen.pop('lim.q', 'p', 'g1', batch => 10, auto_ack => true) ORDER BY 1;
-- a message bigger than the whole budget is still deliverable, alone
SELECT count(*) FROM queen.push('lim.big', jsonb_build_object('pad', repeat('y', 5000)), 'p', 'big-0');
SELECT count(*) FROM queen.push('lim.big', jsonb_build_object('pad', repeat('y', 10)), 'p', 'big-1');
SET queen.pop_max_bytes = '1kB';
SELECT "offset", length(payload ->> 'pad') AS pad FROM queen.pop('lim.big', 'p', batch => 10, auto_ack => true);
SELECT "offset", length(payload ->> 'pad') AS pad FROM queen.pop('lim.big', 'p', batch => 10, auto_ack => true);
RESET queen.pop_max_bytes;
-- the budget spans partitions: a wildcard pop stops at it too
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'lim.w',
       'partition', 'p' || i, 'payload', jsonb_build_object('pad', repeat('z', 700)))) FROM generate_series(1, 6) i));
SET queen.pop_max_bytes = '3kB';
SELECT count(*) AS delivered FROM queen.pop('lim.w', batch => 10, max_partitions => 0, auto_ack => true);
RESET queen.pop_max_bytes;
SELECT count(*) AS the_rest FROM queen.pop('lim.w', batch => 10, max_partitions => 0, auto_ack => true);
SELECT qtest.expect_error($$SET queen.pop_max_bytes = 100$$);

-- ------------------------------------------------------------ the longest lease
SHOW queen.max_lease_seconds;
SELECT qtest.expect_error($$SELECT * FROM queen.pop('lim.q', lease_seconds => 86401)$$);
SELECT qtest.expect_error($$SELECT * FROM queen.renew('00000000-0000-0000-0000-000000000000', 86401)$$);
SET queen.max_lease_seconds = 100;
SELECT qtest.expect_error($$SELECT * FROM queen.pop('lim.q', lease_seconds => 101)$$);
-- a queue configured with a longer leaseTime is held to the setting
SELECT (queen.configure_queue_v1('{"queue": "lim.long", "options": {"leaseTime": 1000000}}')) IS NOT NULL AS configured;
SELECT count(*) FROM queen.push('lim.long', '{"n": 1}', 'p', 'long-0');
SELECT lease_expires_at - now() BETWEEN interval '90 seconds' AND interval '101 seconds' AS held_to_100_s
  FROM queen.pop('lim.long', 'p');
RESET queen.max_lease_seconds;

-- ------------------------------------------------------------ an ack sent again
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'lim.ack',
       'partition', 'p', 'payload', jsonb_build_object('n', i), 'transactionId', 'a' || i) ORDER BY i)
       FROM generate_series(0, 3) i));
CREATE TEMP TABLE got AS SELECT * FROM queen.pop('lim.ack', 'p', batch => 2);
SELECT "offset", transaction_id FROM got ORDER BY 1;
-- applied: the lease is released with the batch
SELECT a.* FROM got, queen.ack(got.transaction_id, got.partition_id, got.lease_id) a ORDER BY got."offset";
-- the same acks again, as a client whose answer was lost sends them: applied, noop
SELECT a.* FROM got, queen.ack(got.transaction_id, got.partition_id, got.lease_id) a ORDER BY got."offset";
-- whatever lease id they name, an upper-case one or one never handed out
SELECT a.success, a.noop FROM got, queen.ack(got.transaction_id, got.partition_id, upper(got.lease_id)) a;
SELECT a.success, a.noop FROM got, queen.ack(got.transaction_id, got.partition_id,
       '00000000-0000-0000-0000-000000000000') a;
-- a nack of what was completed is not applied, and says why
SELECT a.* FROM got, queen.nack(got.transaction_id, got.partition_id, got.lease_id) a WHERE got."offset" = 0;
-- what was never acknowledged, under a lease that is gone, says exactly why
CREATE TEMP TABLE got2 AS SELECT * FROM queen.pop('lim.ack', 'p', batch => 1);
SELECT * FROM queen.ack('a2', (SELECT partition_id FROM got2), (SELECT DISTINCT lease_id FROM got));
-- an upper-case lease id names the same lease
SELECT a.success, a.noop, a.lease_released FROM got2, queen.ack(got2.transaction_id, got2.partition_id, upper(got2.lease_id)) a;
-- a dead letter filed, then the same reject again: applied, noop, filed once
CREATE TEMP TABLE got3 AS SELECT * FROM queen.pop('lim.ack', 'p', batch => 1);
SELECT a.success, a.dlq, a.noop FROM got3, queen.reject(got3.transaction_id, got3.partition_id, got3.lease_id, error => 'bad') a;
SELECT a.success, a.dlq, a.noop, a.error FROM got3, queen.reject(got3.transaction_id, got3.partition_id, got3.lease_id, error => 'bad') a;
SELECT count(*) AS filed_once FROM queen.log_dlq d JOIN got3 ON d.partition_id = got3.partition_id;
-- an expired lease: not applied, and said so
CREATE TEMP TABLE got4 AS SELECT * FROM queen.pop('lim.ack', 'p', batch => 1);
SELECT count(*) AS none_left FROM got4;
SELECT count(*) FROM queen.push('lim.ack', '{"n": 9}', 'p', 'a9');
CREATE TEMP TABLE got5 AS SELECT * FROM queen.pop('lim.ack', 'p', batch => 1);
UPDATE queen.log_consumers SET lease_expires_at = now() - interval '1 second'
 WHERE partition_id = qtest.pid('lim.ack', 'p');
SELECT a.success, a.error FROM got5, queen.ack(got5.transaction_id, got5.partition_id, got5.lease_id) a;

-- ------------------------------------------------------------ subscriptions
-- ISO-8601 as clients write it
SELECT count(*) >= 0 AS ok FROM queen.pop('lim.sub', consumer_group => 's1', subscription_from => '2026-01-31T08:00:00Z');
SELECT count(*) >= 0 AS ok FROM queen.pop('lim.sub', consumer_group => 's2', subscription_from => '2026-01-31 08:00:00.123456+02:00');
SELECT count(*) >= 0 AS ok FROM queen.pop('lim.sub', consumer_group => 's3', subscription_from => '2026-01-31T08:00+0530');
SELECT count(*) >= 0 AS ok FROM queen.pop('lim.sub', consumer_group => 's4', subscription_from => '2026-01-31');
SELECT count(*) >= 0 AS ok FROM queen.pop('lim.sub', consumer_group => 's5', subscription_mode => 'timestamp',
                                           subscription_from => '2026-01-31T08:00:00Z');
-- what PostgreSQL reads as a moment but a client did not mean as one, and garbage
SELECT qtest.expect_error(format($$SELECT * FROM queen.pop('lim.sub', consumer_group => 'bad', subscription_from => %L)$$, v))
  FROM unnest(ARRAY['today', 'J2451187', 'epoch', 'garbage', '2026-13-01T00:00:00Z', '2026-01-31T25:00:00Z',
                    '2026-01-31T08:00:00+', '2026-1-31', ' 2026-01-31']) v;
SELECT qtest.expect_error($$SELECT * FROM queen.pop('lim.sub', consumer_group => 'bad', subscription_mode => 'timestamp')$$);
SELECT qtest.expect_error($$SELECT * FROM queen.pop('lim.sub', consumer_group => 'bad', subscription_mode => 'NEW')$$);
-- nothing was registered for the refused ones
SELECT count(*) AS refused_registered_nothing FROM queen.consumer_groups_metadata WHERE consumer_group = 'bad';

-- ------------------------------------------------------------ partitions => 0 is no limit
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'lim.many',
       'partition', 'p' || i, 'payload', jsonb_build_object('n', i))) FROM generate_series(1, 600) i));
SELECT count(*) AS delivered, count(DISTINCT partition) AS partitions
  FROM queen.pop('lim.many', batch => 1000, max_partitions => 0, auto_ack => true);
