-- A role pushes with exactly the table privileges the same INSERTs and
-- UPDATEs would need: the allocator inserts the segment and hash rows from C,
-- and checks the INSERT privilege on both tables as a statement would.
CREATE ROLE regress_queen_pusher;
GRANT USAGE ON SCHEMA queen TO regress_queen_pusher;
GRANT SELECT, INSERT, UPDATE ON queen.queues, queen.log_partitions TO regress_queen_pusher;
GRANT SELECT, INSERT ON queen.log_txns TO regress_queen_pusher;
GRANT SELECT ON queen.log_segments TO regress_queen_pusher;

-- without INSERT on log_segments: refused, and nothing is written
SELECT count(*) AS hash_rows_before FROM queen.log_txns \gset
SET ROLE regress_queen_pusher;
SELECT status FROM queen.push('priv.events', '{"n": 1}');
RESET ROLE;
SELECT count(*) AS queues FROM queen.queues WHERE name = 'priv.events';
SELECT count(*) = :hash_rows_before AS no_hash_row_written FROM queen.log_txns;

-- with it: stored, and readable back
GRANT INSERT ON queen.log_segments TO regress_queen_pusher;
SET ROLE regress_queen_pusher;
SELECT status, log_offset FROM queen.push('priv.events', '{"n": 1}');
SELECT status, log_offset FROM queen.push('[{"queue": "priv.events", "payload": {"n": 2}},
                                            {"queue": "priv.events", "partition": "b", "payload": {"n": 3}}]');
RESET ROLE;
SELECT log_offset, payload FROM queen.read('priv.events');
SELECT log_offset, payload FROM queen.read('priv.events', 'b');

-- the segment rows still honour the foreign key's cascade
SELECT count(*) AS segments_before FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'priv.events';
DELETE FROM queen.queues WHERE name = 'priv.events';
SELECT count(*) AS orphan_segments FROM queen.log_segments s
 WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p WHERE p.id = s.partition_id);

REVOKE ALL ON queen.queues, queen.log_partitions, queen.log_txns, queen.log_segments FROM regress_queen_pusher;
REVOKE USAGE ON SCHEMA queen FROM regress_queen_pusher;
DROP ROLE regress_queen_pusher;
