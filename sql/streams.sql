-- Stream processing from SQL: queen.stream_register, queen.stream_cycle and
-- queen.stream_state in the caller's transaction, with the broker or without.

SELECT fresh, was_reset FROM queen.stream_register('sq.totals', 'sq.src', 'h1', 'sq.out');
SELECT fresh, was_reset FROM queen.stream_register('sq.totals', 'sq.src', 'h1', 'sq.out');
-- a changed config_hash: 42710, unless reset
\set VERBOSITY default
SELECT * FROM queen.stream_register('sq.totals', 'sq.src', 'h2');
\set VERBOSITY terse
SELECT query_id AS q FROM queen.stream_register('sq.totals', 'sq.src', 'h1') \gset

SELECT status FROM queen.push('[{"queue": "sq.src", "transactionId": "a", "payload": 1},
                                {"queue": "sq.src", "transactionId": "b", "payload": 2},
                                {"queue": "sq.src", "transactionId": "c", "payload": 3}]');

-- a cycle: the sink push, then the ack of a part of the batch (lease kept), then the state
BEGIN;
SELECT partition_id AS p, lease_id AS l FROM queen.pop('sq.src', consumer_group => 'sg', batch => 3) LIMIT 1 \gset
SELECT status FROM queen.push('sq.out', '{"sum": 1}');
SELECT * FROM queen.stream_cycle(:'q', :'p', '{"w:1": {"acc": 1, "windowEnd": 10}, "w:2": [2]}',
                                 transaction_id => 'a', lease_id => :'l', consumer_group => 'sg',
                                 release_lease => false);
COMMIT;
SELECT key, value FROM queen.stream_state(:'q', :'p');
SELECT committed, batch_end, worker_id IS NOT NULL AS leased
  FROM queen.log_consumers WHERE consumer_group = 'sg';

-- the default releases the lease though c is not acknowledged; deletes, then upserts
SELECT * FROM queen.stream_cycle(:'q', :'p', '{"w:3": true}', ARRAY['w:1', 'w:3'],
                                 transaction_id => 'b', lease_id => :'l', consumer_group => 'sg');
SELECT key, value FROM queen.stream_state(:'q', :'p');
SELECT committed, batch_end IS NULL AS released FROM queen.log_consumers WHERE consumer_group = 'sg';
SELECT transaction_id FROM queen.pop('sq.src', consumer_group => 'sg', auto_ack => true);

-- reads by keys and prefix; an empty keys array selects nothing
SELECT key FROM queen.stream_state(:'q', :'p', ARRAY['w:2', 'nope']);
SELECT key FROM queen.stream_state(:'q', :'p', key_prefix => 'w:3');
SELECT count(*) FROM queen.stream_state(:'q', :'p', ARRAY[]::text[]);

-- refusals: nothing of the caller's transaction may commit
BEGIN;
SELECT status FROM queen.push('sq.out', '{"sum": 99}', 'Default', 'refused');
SELECT * FROM queen.stream_cycle(:'q', :'p', '{"w:9": 9}', transaction_id => 'a', consumer_group => 'sg');
ROLLBACK;
SELECT count(*) FROM queen.read('sq.out') WHERE transaction_id = 'refused';
SELECT * FROM queen.stream_cycle('00000000-0000-0000-0000-000000000001', :'p', '{"x": 1}');
SELECT * FROM queen.stream_cycle(:'q', :'p', '[1]');
SELECT * FROM queen.stream_cycle(:'q', :'p', '{"": 1}');
SELECT * FROM queen.stream_cycle(:'q', :'p', transaction_id => 'c', status => 'FAILED');
SELECT * FROM queen.stream_cycle(NULL, :'p');
SELECT * FROM queen.stream_register('', 'sq.src', 'h');
SELECT count(*) FROM queen.stream_state(:'q', :'p') WHERE key = 'w:9';

-- reset removes the state; a deleted source queue takes its queries
SELECT fresh, was_reset FROM queen.stream_register('sq.totals', 'sq.src', 'h2', reset => true);
SELECT count(*) FROM queen.stream_state(:'q', :'p');
SELECT queen.stream_cycle(:'q', :'p', '{"k": 1}') IS NOT NULL AS applied;
SELECT (queen.delete_queue_v1('sq.src'))->>'deleted' AS deleted;
SELECT count(*) AS queries, (SELECT count(*) FROM queen.stream_state) AS states
  FROM queen.stream_queries WHERE name = 'sq.totals';
