-- The frame codec: byte-exact layout, XXH3-128 hashes, UUIDv7, zstd, and
-- rejection of malformed buffers.

-- (qtest.zstd_raw, sql/setup, wraps hand-built frame buffers for the decoder)

-- XXH3-128, seed 0, canonical big-endian; the empty string's value is the
-- published test vector.
SELECT queen.txn_hash('') AS empty, queen.txn_hash('abc') AS abc,
       queen.txn_hash('tx-1') AS tx1, octet_length(queen.txn_hash(repeat('x', 70000))) AS len;
SELECT queen.hash_blob(ARRAY['', 'abc']) = queen.txn_hash('') || queen.txn_hash('abc') AS blob_is_concatenation;
SELECT h.idx, h.h = queen.txn_hash(t) AS matches
  FROM queen.log_unnest_hashes(queen.hash_blob(ARRAY['a', 'b', 'c'])) h
  JOIN unnest(ARRAY['a', 'b', 'c']) WITH ORDINALITY AS u(t, n) ON u.n = h.idx + 1
 ORDER BY h.idx;

-- UUIDv7: version 7, RFC variant, millisecond timestamp of now, strictly
-- increasing within a session even inside one millisecond.
SELECT substring(queen.uuid_v7()::text FROM 15 FOR 1) AS version,
       substring(queen.uuid_v7()::text FROM 20 FOR 1) IN ('8', '9', 'a', 'b') AS rfc_variant;
SELECT abs(('x' || lpad(replace(substring(queen.uuid_v7()::text FROM 1 FOR 13), '-', ''), 16, '0'))::bit(64)::bigint
           - (extract(epoch FROM clock_timestamp()) * 1000)::bigint) < 5000 AS timestamp_is_now;
WITH ids AS (SELECT n, queen.uuid_v7() AS id FROM generate_series(1, 20000) n)
SELECT count(*) + 1 AS ids, count(DISTINCT id) + 1 AS distinct_ids,
       bool_and(id > prev) AS strictly_increasing
  FROM (SELECT n, id, lag(id) OVER (ORDER BY n) AS prev FROM ids) s
 WHERE prev IS NOT NULL;

-- The layout, byte for byte: body_len u32 LE (everything after itself), flags,
-- 16-byte message id, txn_len u16 LE, transactionId, payload.
SELECT queen.decompress_segment(queen.pack_frames(
	ARRAY['01890a5d-ac96-774b-bcce-b302099a8057'::uuid],
	ARRAY['tx'], ARRAY['{}'::bytea])) AS one_frame;
SELECT queen.decompress_segment(queen.pack_frames(
	ARRAY['01890a5d-ac96-774b-bcce-b302099a8057'::uuid, '01890a5d-ac96-774b-bcce-b302099a8058'],
	ARRAY['a', 'bc'], ARRAY[''::bytea, '[1]'])) AS two_frames;

-- The decoder reads hand-built frames, including the optional trace id and
-- producer fields the push path never writes.
SELECT idx, flags, message_id, trace_id, transaction_id, producer_sub, payload
  FROM queen.unpack_frames(qtest.zstd_raw(
	'\x17000000'::bytea || '\x00' || '\x01890a5dac96774bbcceb302099a8057'::bytea || '\x0200' || convert_to('tx', 'UTF8') || convert_to('{}', 'UTF8')
	|| '\x2c000000'::bytea || '\x07' || '\x01890a5dac96774bbcceb302099a8058'::bytea || '\x11111111222233334444555555555555'::bytea
	   || '\x0100' || convert_to('t', 'UTF8') || '\x0300' || convert_to('sub', 'UTF8') || convert_to('"e"', 'UTF8')));

-- Round trip of awkward payloads: empty, whitespace around JSON, unicode,
-- non-JSON bytes, 1 MB.  Bytes come back exactly.
WITH input AS (
	SELECT ARRAY[queen.uuid_v7(), queen.uuid_v7(), queen.uuid_v7(), queen.uuid_v7(), queen.uuid_v7()] AS ids,
	       ARRAY['', '  {"a" : 1}  ', '"h\u00e9llo \u2603 \ud834\udd1e"', E'\\x00ff', repeat('0123456789abcdef', 65536)]::text[] AS raw
), packed AS (
	SELECT ids, ARRAY[''::bytea, convert_to(raw[2], 'UTF8'), convert_to('"héllo ☃ 𝄞"', 'UTF8'), '\x00ff'::bytea,
	                 convert_to(raw[5], 'UTF8')] AS payloads
	  FROM input
)
SELECT f.idx, octet_length(f.payload) AS bytes, f.payload = p.payloads[f.idx + 1] AS exact,
       f.message_id = p.ids[f.idx + 1] AS same_id, f.transaction_id = p.ids[f.idx + 1]::text AS txn_defaults_to_id
  FROM packed p, queen.unpack_frames(queen.pack_frames(p.ids, ARRAY[NULL, NULL, NULL, NULL, NULL]::text[], p.payloads)) f
 ORDER BY f.idx;

-- Compression is real: 1 MB of repetitive JSON shrinks.
SELECT octet_length(queen.pack_frames(ARRAY[NULL::uuid], ARRAY['t'], ARRAY[convert_to(repeat('{"k": "v"}, ', 100000), 'UTF8')])) < 10000 AS compressed;

-- Malformed buffers are rejected, never over-read.
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames('\x00112233')$$) AS not_zstd;
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames(substring(queen.pack_frames(ARRAY[NULL::uuid], ARRAY['t'], ARRAY['{}'::bytea]) FROM 1 FOR 8))$$) AS truncated_zstd;
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames(qtest.zstd_raw('\x1500'::bytea))$$) AS truncated_length;
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames(qtest.zstd_raw('\x05000000'::bytea || '\x0000000000'))$$) AS body_below_minimum;
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames(qtest.zstd_raw('\xff000000'::bytea || '\x00' || '\x01890a5dac96774bbcceb302099a8057'::bytea || '\x0000'))$$) AS body_past_end;
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames(qtest.zstd_raw('\x13000000'::bytea || '\x00' || '\x01890a5dac96774bbcceb302099a8057'::bytea || '\x0500'))$$) AS txn_past_end;
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames(qtest.zstd_raw('\x13000000'::bytea || '\x08' || '\x01890a5dac96774bbcceb302099a8057'::bytea || '\x0000'))$$) AS unknown_flags;
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames(qtest.zstd_raw('\x14000000'::bytea || '\x01' || '\x01890a5dac96774bbcceb302099a8057'::bytea || '\x000000'))$$) AS trace_past_end;
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames(qtest.zstd_raw('\x15000000'::bytea || '\x02' || '\x01890a5dac96774bbcceb302099a8057'::bytea || '\x0000' || '\x0900'))$$) AS producer_past_end;
SELECT qtest.expect_error($$SELECT * FROM queen.unpack_frames(qtest.zstd_raw('\x15000000'::bytea || '\x00' || '\x01890a5dac96774bbcceb302099a8057'::bytea || '\x0200' || '\xc328' || '{}'::bytea))$$) AS txn_not_utf8;

-- pack_frames checks its input like every push does
SELECT qtest.expect_error($$SELECT queen.pack_frames(ARRAY[NULL::uuid], ARRAY['a', 'b'], ARRAY['{}'::bytea])$$) AS misaligned;
SELECT qtest.expect_error($$SELECT queen.pack_frames(ARRAY[]::uuid[], ARRAY[]::text[], ARRAY[]::bytea[])$$) AS empty;
SELECT qtest.expect_error($$SELECT queen.pack_frames(ARRAY[NULL::uuid], ARRAY[repeat('x', 65536)], ARRAY['{}'::bytea])$$) AS txn_too_long;
SELECT qtest.expect_error($$SELECT queen.pack_frames(ARRAY[NULL::uuid], ARRAY[E'a\nb'], ARRAY['{}'::bytea])$$) AS txn_control_char;
SELECT qtest.expect_error($$SELECT queen.pack_frames(ARRAY[NULL::uuid], ARRAY['a'], ARRAY[NULL::bytea])$$) AS null_payload;
SELECT qtest.expect_error($$SELECT queen.hash_blob(ARRAY['a', NULL])$$) AS null_txn_hash;
