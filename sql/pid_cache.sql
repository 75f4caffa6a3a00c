-- The allocator's partition id cache (src/core/pid_cache.c): a process that resolved a
-- partition by name pre-locks it by id next time.  An id that went stale (the
-- queue was deleted, or the push that created the partition rolled back)
-- must send the bundle back to the name path, which provisions again.

-- first push resolves by name, the second by cached id
SELECT status, log_offset FROM queen.push('{"items":[{"queue":"pc1","partition":"a","payload":1},{"queue":"pc2","partition":"b","payload":2}]}');
SELECT status, log_offset FROM queen.push('{"items":[{"queue":"pc1","partition":"a","payload":1},{"queue":"pc2","partition":"b","payload":2}]}');

-- a deleted queue: one stale id in a bundle of two, created again from offset 0
SELECT queen.delete_queue_v1('pc1')->>'deleted' AS deleted;
SELECT status, log_offset FROM queen.push('{"items":[{"queue":"pc1","partition":"a","payload":1},{"queue":"pc2","partition":"b","payload":2}]}');
SELECT status, log_offset FROM queen.push('{"items":[{"queue":"pc1","partition":"a","payload":1},{"queue":"pc2","partition":"b","payload":2}]}');

-- the same partition twice is refused with cached ids too
SELECT queen.log_push_multi_v1(ARRAY['pc2','pc2'], ARRAY['b','b'], ARRAY[1,1],
       ARRAY[queen.hash_blob('{x}'), queen.hash_blob('{y}')], ARRAY[-1,-1]::int8[],
       ARRAY[qtest.blob('{x}'), qtest.blob('{y}')]);

-- a rolled-back first push leaves a cached id that no longer exists
BEGIN;
SELECT status, log_offset FROM queen.push('{"items":[{"queue":"pc3","partition":"c","payload":1}]}');
ROLLBACK;
SELECT status, log_offset FROM queen.push('{"items":[{"queue":"pc3","partition":"c","payload":1},{"queue":"pc2","partition":"b","payload":2}]}');

SELECT q.name AS queue, p.name AS partition, p.last_offset
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name IN ('pc1', 'pc2', 'pc3') ORDER BY 1;
SELECT count(*) AS segments FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name IN ('pc1', 'pc2', 'pc3');

-- A bundle by cached ids beside a partition this transaction already wrote:
-- the pre-lock finds and locks the transaction's own newest version of that
-- row, so its offsets go on from the transaction's last push, not from the
-- row as it was committed.
SELECT status, log_offset FROM queen.push('{"items":[{"queue":"pc4","partition":"a","payload":1},{"queue":"pc4","partition":"b","payload":1}]}');
BEGIN;
SELECT status, log_offset FROM queen.push('pc4', '2', 'a');
SELECT log_offset FROM queen.read('pc4', 'a') ORDER BY 1 DESC LIMIT 1;
SELECT status, log_offset FROM queen.push('{"items":[{"queue":"pc4","partition":"a","payload":3},{"queue":"pc4","partition":"b","payload":3}]}');
COMMIT;
SELECT p.name AS partition, p.last_offset, count(s.*) AS segments
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
  LEFT JOIN queen.log_segments s ON s.partition_id = p.id
 WHERE q.name = 'pc4' GROUP BY 1, 2 ORDER BY 1;

SELECT queen.delete_queue_v1(n)->>'deleted' AS deleted FROM unnest(ARRAY['pc1', 'pc2', 'pc3', 'pc4']) AS n;
