-- Helpers shared by the regression tests that follow (schema qtest).

CREATE SCHEMA qtest;

-- Run a statement; return its SQLSTATE and message instead of failing.
CREATE FUNCTION qtest.expect_error(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- A segment blob for the given transactionIds, as the broker builds it.
CREATE FUNCTION qtest.blob(txns text[]) RETURNS bytea LANGUAGE sql AS $$
	SELECT queen.pack_frames(array_fill(NULL::uuid, ARRAY[cardinality(txns)]), txns,
	                         (SELECT array_agg(convert_to(format('{"t": "%s"}', t), 'UTF8')) FROM unnest(txns) t))
$$;

-- The id of a partition of the default tenant.
CREATE FUNCTION qtest.pid(qname text, pname text) RETURNS uuid LANGUAGE sql AS $$
	SELECT p.id FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id
	 WHERE q.name = qname AND p.name = pname AND q.tenant_id = '00000000-0000-0000-0000-000000000001'
$$;

-- Retain a partition's segments up to offset upto away as retention's step
-- does (src/core/retention.c): they go, the hashes the dedup window still
-- needs (at or above txns_start) move to log_txns, log_start moves past
-- them.  The new log_start.
CREATE FUNCTION qtest.retain(qname text, pname text, upto bigint) RETURNS bigint LANGUAGE sql AS $$
	WITH d AS (DELETE FROM queen.log_segments s
	            WHERE s.partition_id = qtest.pid(qname, pname) AND s.base_offset <= upto
	           RETURNING s.partition_id, s.base_offset, s.end_offset, s.created_at, s.hashes),
	     m AS (INSERT INTO queen.log_txns
	           SELECT d.* FROM d JOIN queen.log_partitions p ON p.id = d.partition_id
	            WHERE d.hashes IS NOT NULL AND d.end_offset >= p.txns_start)
	UPDATE queen.log_partitions p SET log_start = GREATEST(p.log_start, (SELECT max(end_offset) + 1 FROM d))
	 WHERE p.id = qtest.pid(qname, pname)
	RETURNING p.log_start
$$;

-- Wrap raw bytes (< 256) in a zstd frame with one uncompressed block, so
-- hand-built frame buffers can be fed to the decoder and the raw push door.
CREATE FUNCTION qtest.zstd_raw(data bytea) RETURNS bytea LANGUAGE sql AS $$
	SELECT '\x28b52ffd20'::bytea
		|| substring(int4send(length(data)) FROM 4 FOR 1)
		|| substring(int4send((length(data) << 3) | 1) FROM 4 FOR 1)
		|| substring(int4send((length(data) << 3) | 1) FROM 3 FOR 1)
		|| substring(int4send((length(data) << 3) | 1) FROM 2 FOR 1)
		|| data
$$;

SELECT qtest.expect_error('SELECT 1/0');
SELECT octet_length(qtest.blob('{a,b}')) > 0 AS blob_ok;
