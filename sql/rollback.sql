-- queen.push commits or rolls back with the caller's transaction: a rolled
-- back push leaves no trace and no gap in the offsets.

CREATE TABLE p7_orders (id int PRIMARY KEY, note text);

SELECT status, log_offset FROM queen.push('p7.events', '{"n": 0}');

-- the business row and the event commit together
BEGIN;
INSERT INTO p7_orders VALUES (1, 'kept');
SELECT status, log_offset FROM queen.push('p7.events', '{"order": 1}');
COMMIT;

-- and roll back together
BEGIN;
INSERT INTO p7_orders VALUES (2, 'rolled back');
SELECT status, log_offset FROM queen.push('p7.events', '{"order": 2}', 'Default', 'order-2');
SELECT status, log_offset FROM queen.push('[{"queue": "p7.events", "payload": {"order": 2.1}},
                                            {"queue": "p7.events", "partition": "side", "payload": {"order": 2.2}},
                                            {"queue": "p7.new-queue", "payload": {"order": 2.3}}]');
ROLLBACK;

SELECT * FROM p7_orders ORDER BY id;
-- nothing of the rolled-back pushes: not the messages, not the hashes, not
-- the partition and queue they created, not the allocator bump
SELECT log_offset, payload FROM queen.read('p7.events');
SELECT count(*) AS new_queue_rows FROM queen.queues WHERE name = 'p7.new-queue';
SELECT count(*) AS side_partition_rows FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = 'p7.events' AND p.name = 'side';
SELECT p.last_offset, (SELECT count(*) FROM queen.log_segments t WHERE t.partition_id = p.id AND t.hashes IS NOT NULL) AS txn_rows
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p7.events';
-- the rolled-back transactionId was never stored, so it is not a duplicate
SELECT status, log_offset FROM queen.push('p7.events', '{"order": 2}', 'Default', 'order-2');

-- a savepoint rolled back takes its push with it; the rest commits
BEGIN;
SELECT status, log_offset FROM queen.push('p7.events', '{"order": 3}');
SAVEPOINT s1;
SELECT status, log_offset FROM queen.push('p7.events', '{"order": 4}');
ROLLBACK TO SAVEPOINT s1;
SELECT status, log_offset FROM queen.push('p7.events', '{"order": 5}');
COMMIT;

-- a failing statement after a push aborts the whole transaction, push included
BEGIN;
SELECT status, log_offset FROM queen.push('p7.events', '{"order": 6}');
INSERT INTO p7_orders VALUES (1, 'duplicate key');
COMMIT;

-- offsets are gapless and every stored message is one that committed
SELECT log_offset, payload FROM queen.read('p7.events');
SELECT count(*) AS segments,
       bool_and(base_offset = coalesce(prev_end, -1) + 1) AS gapless
  FROM (SELECT s.base_offset, lag(s.end_offset) OVER (ORDER BY s.base_offset) AS prev_end
          FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
          JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p7.events') s;

-- a push inside a transaction sees and dedups against its own earlier push
BEGIN;
SELECT status, log_offset FROM queen.push('p7.events', '{"order": 7}', 'Default', 'order-7');
SELECT status, log_offset FROM queen.push('p7.events', '{"again": 7}', 'Default', 'order-7');
COMMIT;

DROP TABLE p7_orders;
