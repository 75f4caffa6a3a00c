-- The failure modes worth predicting, those that apply without a
-- broker: what the caller sees, and what is in the database afterwards.
-- (Statement timeout: specs/statement_timeout.spec.  Spool and maintenance
-- mode belong to the broker.)

CREATE FUNCTION pg_temp.copies(qname text, txn text) RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM queen.read(qname) WHERE transaction_id = txn
$$;

-- 1. Duplicate inside one request body: later items report duplicate with
--    the first item's id; one copy.
CREATE TEMP TABLE body AS
SELECT * FROM queen.push('[{"queue": "p8.fm", "payload": {"copy": 1}, "transactionId": "fm-1"},
                           {"queue": "p8.fm", "payload": {"copy": 2}, "transactionId": "fm-1"},
                           {"queue": "p8.fm", "payload": {"copy": 3}, "transactionId": "fm-1"}]');
SELECT index, status, message_id = (SELECT message_id FROM body WHERE index = 0) AS first_items_id FROM body ORDER BY index;
SELECT pg_temp.copies('p8.fm', 'fm-1') AS copies;

-- 2. Duplicate against a previous push, inside the window: duplicate plus
--    the original message id; one copy, nothing written.
CREATE TEMP TABLE before AS
SELECT p.last_offset, (SELECT count(*) FROM queen.log_segments t WHERE t.partition_id = p.id AND t.hashes IS NOT NULL) AS txn_rows
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'p8.fm';
SELECT status, message_id = (SELECT message_id FROM body WHERE index = 0) AS original_id
  FROM queen.push('p8.fm', '{"copy": 4}', 'Default', 'fm-1');
SELECT pg_temp.copies('p8.fm', 'fm-1') AS copies;
SELECT p.last_offset = b.last_offset AS offsets_unchanged,
       (SELECT count(*) FROM queen.log_segments t WHERE t.partition_id = p.id AND t.hashes IS NOT NULL) = b.txn_rows AS hashes_unchanged
  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id, before b WHERE q.name = 'p8.fm';

-- 3. Duplicate whose original segment was already retained away: duplicate
--    with the zero UUID; the original is gone.
SELECT qtest.retain('p8.fm', 'Default', 1000) AS log_start;
SELECT status, message_id FROM queen.push('p8.fm', '{"copy": 5}', 'Default', 'fm-1');
SELECT pg_temp.copies('p8.fm', 'fm-1') AS copies;
