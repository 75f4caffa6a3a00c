-- queen.push(queue, payload, partition, transaction_id): one message from SQL.

CREATE TEMP TABLE pushed AS
SELECT * FROM queen.push('p1.orders', '{"order": 1}');

-- one row: index 0, a minted UUIDv7, the id's text as transactionId, the
-- Default partition, queued at offset 0
SELECT index, substring(message_id::text FROM 15 FOR 1) AS uuid_version,
       transaction_id = message_id::text AS txn_is_id,
       queue, partition, status, log_offset,
       created_at BETWEEN now() - interval '1 minute' AND now() AS created_now
  FROM pushed;

-- the queue was provisioned on first push, namespace and task from its dotted name
SELECT name, namespace, task, dedup_window_seconds, encryption_enabled, lease_time
  FROM queen.queues WHERE name = 'p1.orders';
SELECT p.name, p.last_offset, p.txns_start, p.oldest_live_at IS NOT NULL AS has_live
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p1.orders';

-- offsets continue gaplessly; explicit partition and transactionId are kept
SELECT index, transaction_id, partition, status, log_offset
  FROM queen.push('p1.orders', '{"order": 2}', 'Default', 'order-2');
SELECT transaction_id, partition, status, log_offset
  FROM queen.push('p1.orders', '{"order": 3}', 'eu-west', 'order-3');
SELECT transaction_id, partition, status, log_offset
  FROM queen.push(queue => 'p1.orders', payload => '[1, 2, 3]', transaction_id => 'order-4');
-- an empty transactionId is treated as absent; a NULL partition as Default
SELECT transaction_id = message_id::text AS minted, partition, log_offset
  FROM queen.push('p1.orders', '"x"', NULL, '');

-- the call form returns a composite
SELECT (queen.push('p1.orders', '{}')).status;

-- offsets are gapless in the partition (that created_at follows commit
-- order needs a second session: specs/created_at_order.spec)
SELECT count(*) AS segments,
       bool_and(base_offset = coalesce(prev_end, -1) + 1) AS gapless
  FROM (SELECT s.base_offset, lag(s.end_offset) OVER w AS prev_end
          FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
          JOIN queen.queues q ON q.id = p.queue_id
         WHERE q.name = 'p1.orders' AND p.name = 'Default'
        WINDOW w AS (ORDER BY s.base_offset)) s;

-- every push writes its hashes in its segment's row, dedup on or off
SELECT count(*) AS txn_rows,
       bool_and(t.hashes = queen.txn_hash(r.transaction_id)) AS hash_of_txn
  FROM queen.read('p1.orders', 'Default') r
  JOIN queen.log_partitions p ON p.name = 'Default'
  JOIN queen.queues q ON q.id = p.queue_id AND q.name = 'p1.orders'
  JOIN queen.log_segments t ON t.partition_id = p.id AND t.base_offset = r.log_offset;

-- Payloads: jsonb's canonical text is stored; whitespace around and inside
-- JSON is normalised by jsonb before queen.push sees it.
SELECT status, log_offset FROM queen.push('p1.payloads', '   {  "a" :   1 }   ');
SELECT log_offset, payload, payload::text FROM queen.read('p1.payloads');
SELECT f.payload AS stored_bytes
  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id, queen.unpack_frames(s.blob) f
 WHERE q.name = 'p1.payloads';

-- Bad input: a clear error with the right SQLSTATE, and nothing written.
SELECT last_offset AS before FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'p1.orders' AND p.name = 'Default';
SELECT qtest.expect_error($$SELECT queen.push(NULL, '{}')$$) AS null_queue;
SELECT qtest.expect_error($$SELECT queen.push('', '{}')$$) AS empty_queue;
SELECT qtest.expect_error($$SELECT queen.push(E'p1\x01orders', '{}')$$) AS control_in_queue;
SELECT qtest.expect_error($$SELECT queen.push(E'p1\x7forders', '{}')$$) AS del_in_queue;
SELECT qtest.expect_error($$SELECT queen.push(repeat('q', 256), '{}')$$) AS queue_too_long;
SELECT qtest.expect_error($$SELECT queen.push('p1.orders', '{}', E'a\tb')$$) AS control_in_partition;
SELECT qtest.expect_error($$SELECT queen.push('p1.orders', '{}', '')$$) AS empty_partition;
SELECT qtest.expect_error($$SELECT queen.push('p1.orders', '{}', 'Default', E'tx\x1f1')$$) AS control_in_txn;
SELECT qtest.expect_error($$SELECT queen.push('p1.orders', '{}', 'Default', repeat('t', 65536))$$) AS txn_too_long;
SELECT qtest.expect_error($$SELECT queen.push('p1.orders', NULL)$$) AS null_payload;
SELECT qtest.expect_error($$SELECT queen.push('p1.orders', '{"a": 1')$$) AS payload_not_json;
SELECT qtest.expect_error($$SELECT queen.push('p1.orders', '{"a": "\u0000"}')$$) AS payload_with_nul;
SELECT last_offset AS after FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'p1.orders' AND p.name = 'Default';
SELECT count(*) AS queues_created_by_bad_input FROM queen.queues
 WHERE name LIKE 'p1%' AND name NOT IN ('p1.orders', 'p1.payloads');

-- the longest transactionId the frame can carry is accepted and read back
SELECT status, octet_length(transaction_id) FROM queen.push('p1.orders', '{}', 'long', repeat('t', 65535));
SELECT octet_length(transaction_id) FROM queen.read('p1.orders', 'long');
