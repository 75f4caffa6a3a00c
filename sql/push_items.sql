-- queen.push(items jsonb): the HTTP push body from SQL, one row per item in
-- input order, layer-1 dedup inside the call, one bundle for all partitions.

-- empty input: no rows, nothing created
SELECT count(*) FROM queen.push('[]');
SELECT count(*) FROM queen.push('{"items": []}');

-- A body spanning queues and partitions, in an order that is not partition
-- order; results come back in input order with per-partition offsets.
CREATE TEMP TABLE r1 AS
SELECT * FROM queen.push('{"items": [
	{"queue": "p2.a", "partition": "z", "payload": {"n": 0}, "transactionId": "t0"},
	{"queue": "p2.b", "payload": {"n": 1}, "transactionId": "t1"},
	{"queue": "p2.a", "partition": "y", "payload": {"n": 2}, "transactionId": "t2"},
	{"queue": "p2.a", "partition": "z", "payload": {"n": 3}, "transactionId": "t3"},
	{"queue": "p2.b", "payload": [4], "transactionId": "t4"},
	{"queue": "p2.a", "partition": "y", "payload": "five", "transactionId": "t5"},
	{"queue": "p2.a", "partition": "z", "payload": 6, "transactionId": "t6"},
	{"queue": "p2.b", "payload": null, "transactionId": "t7", "traceId": "ignored"}
]}');
SELECT index, transaction_id, queue, partition, status, log_offset FROM r1 ORDER BY index;
-- one commit, one bundle: every segment carries the same timestamp
SELECT count(DISTINCT created_at) AS bundle_timestamps FROM r1;
-- ids are minted in input order
SELECT bool_and(message_id > prev) AS ids_ascending
  FROM (SELECT message_id, lag(message_id) OVER (ORDER BY index) AS prev FROM r1) s WHERE prev IS NOT NULL;
-- what was stored, per partition, in offset order
SELECT r.log_offset, r.transaction_id, r.payload FROM queen.read('p2.a', 'z') r;
SELECT r.log_offset, r.transaction_id, r.payload FROM queen.read('p2.a', 'y') r;
SELECT r.log_offset, r.transaction_id, r.payload FROM queen.read('p2.b') r;
-- a bare array works as well as {"items": [...]}
SELECT index, queue, partition, status, log_offset
  FROM queen.push('[{"queue": "p2.b", "payload": {}}, {"queue": "p2.b", "payload": {}}]');

-- Layer 1: the same (queue, partition, transactionId) twice in one call:
-- the first leads, the second reports duplicate with the leader's id and
-- offset; the same transactionId in another partition is its own message.
CREATE TEMP TABLE r2 AS
SELECT * FROM queen.push('[
	{"queue": "p2.dedup", "partition": "a", "payload": 1, "transactionId": "same"},
	{"queue": "p2.dedup", "partition": "a", "payload": 2, "transactionId": "same"},
	{"queue": "p2.dedup", "partition": "b", "payload": 3, "transactionId": "same"},
	{"queue": "p2.dedup", "partition": "a", "payload": 4, "transactionId": "other"},
	{"queue": "p2.dedup", "partition": "a", "payload": 5, "transactionId": "same"}
]');
SELECT index, partition, transaction_id, status, log_offset,
       message_id = first_value(message_id) OVER (PARTITION BY partition, transaction_id ORDER BY index) AS leaders_id
  FROM r2 ORDER BY index;
SELECT log_offset, transaction_id, payload FROM queen.read('p2.dedup', 'a');
SELECT log_offset, transaction_id, payload FROM queen.read('p2.dedup', 'b');

-- Bad bodies and items: a clear error, nothing written.
SELECT qtest.expect_error($$SELECT queen.push('{"item": []}'::jsonb)$$) AS no_items;
SELECT qtest.expect_error($$SELECT queen.push('{"items": {}}'::jsonb)$$) AS items_not_array;
SELECT qtest.expect_error($$SELECT queen.push('"items"'::jsonb)$$) AS scalar_body;
SELECT qtest.expect_error($$SELECT queen.push(NULL::jsonb)$$) AS null_body;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "payload": 1}, 7]'::jsonb)$$) AS item_not_object;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "payload": 1}, {"payload": 1}]'::jsonb)$$) AS missing_queue;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "payload": 1}, {"queue": "p2.bad"}]'::jsonb)$$) AS missing_payload;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": 5, "payload": 1}]'::jsonb)$$) AS queue_not_string;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "payload": 1, "transactionId": 12}]'::jsonb)$$) AS txn_not_string;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "partition": ["x"], "payload": 1}]'::jsonb)$$) AS partition_not_string;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "payload": 1}, {"queue": "p2\u0001bad", "payload": 1}]'::jsonb)$$) AS control_in_queue;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "partition": "a\nb", "payload": 1}]'::jsonb)$$) AS control_in_partition;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "transactionId": "a\u001fb", "payload": 1}]'::jsonb)$$) AS control_in_txn;
SELECT qtest.expect_error(format($$SELECT queen.push('[{"queue": "p2.bad", "transactionId": "%s", "payload": 1}]'::jsonb)$$, repeat('x', 65536))) AS txn_too_long;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "payload": "\u0000"}]'::jsonb)$$) AS nul_in_payload;
SELECT qtest.expect_error($$SELECT queen.push('[{"queue": "p2.bad", "payload": 1}, {"queue": "p2.bad", "payload": }]'::jsonb)$$) AS not_json;
SELECT count(*) AS bad_queues_created FROM queen.queues WHERE name LIKE 'p2%bad';

-- many items over many partitions in one call
SELECT count(*) AS items, count(DISTINCT partition) AS partitions, bool_and(status = 'queued') AS all_queued,
       bool_and(log_offset = (index / 100)) AS offsets_by_arrival
  FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'p2.many', 'partition', 'part-' || (i % 100), 'payload', i))
                     FROM generate_series(0, 999) i));
SELECT count(*) AS partitions, sum(last_offset + 1) AS messages
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p2.many';
