-- log_push_one_v1 and log_push_multi_v1 are a public door: a segment they
-- store must be one the broker would have built, or a reader could not give
-- it back (and a later duplicate naming it could not resolve it).  Each bad
-- segment is refused with a clear SQLSTATE and nothing is written.

CREATE FUNCTION pg_temp.frames(txns text[], payloads text[]) RETURNS bytea LANGUAGE sql AS $$
	SELECT queen.pack_frames(array_fill(NULL::uuid, ARRAY[cardinality(txns)]), txns,
	                         (SELECT array_agg(convert_to(p, 'UTF8') ORDER BY n) FROM unnest(payloads) WITH ORDINALITY u(p, n)))
$$;
CREATE FUNCTION pg_temp.push(msg_count int, hashes bytea, blob bytea) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN queen.log_push_multi_v1(ARRAY['us.q'], ARRAY['p'], ARRAY[msg_count], ARRAY[hashes],
	                               ARRAY[-1]::int8[], ARRAY[blob])->0->>'status';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
CREATE FUNCTION pg_temp.push_one(msg_count int, hashes bytea, blob bytea) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN queen.log_push_one_v1('us.q', 'p', msg_count, hashes, -1, blob)->>'status';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ' ' || SQLERRM;
END $$;

-- only the zstd magic, and random bytes after it
SELECT pg_temp.push(1, queen.hash_blob('{a}'), '\x28b52ffd0000ffffffff');
SELECT pg_temp.push(1, queen.hash_blob('{a}'), '\x28b52ffd' || decode(repeat('a5', 64), 'hex'));
-- a message count the frames do not match
SELECT pg_temp.push(2, queen.hash_blob('{a,b}'), pg_temp.frames('{a}', '{1}'));
SELECT pg_temp.push(1, queen.hash_blob('{a}'), pg_temp.frames('{a,b,c}', '{1,2,3}'));
-- hashes that are not the frames' transactionIds
SELECT pg_temp.push(2, queen.hash_blob('{a,x}'), pg_temp.frames('{a,b}', '{1,2}'));
SELECT pg_temp.push_one(1, queen.hash_blob('{b}'), pg_temp.frames('{a}', '{1}'));
-- payloads that are not JSON jsonb can hold
SELECT pg_temp.push(1, queen.hash_blob('{a}'), pg_temp.frames('{a}', '{"not json"}'));
SELECT pg_temp.push(1, queen.hash_blob('{a}'),
       queen.pack_frames(ARRAY[NULL::uuid], '{a}', ARRAY['\x22fffe22'::bytea]));
SELECT pg_temp.push(1, queen.hash_blob('{a}'), pg_temp.frames('{a}', '{1e1000000}'));
SELECT pg_temp.push(1, queen.hash_blob('{a}'), pg_temp.frames('{a}', '{"[1e131073]"}'));
SELECT pg_temp.push(1, queen.hash_blob('{a}'), pg_temp.frames('{a}', '{"{\"x\": 1e-16384}"}'));
-- a zstd frame of RLE blocks: 48 kB that inflate to 1.5 GB of one byte.
-- Frames are checked as they come out, so it is refused at the first one
-- (bytes 0x00: a frame of length 0; bytes 0x20: a frame of 0x20202020
-- bytes, over 500 MB, whose hash cannot match) without inflating it all.
CREATE FUNCTION pg_temp.rle_bomb(byte text) RETURNS bytea LANGUAGE sql AS $$
	SELECT decode('28b52ffd0038' || repeat('020010' || byte, 12287) || '030010' || byte, 'hex')
$$;
SELECT octet_length(pg_temp.rle_bomb('00')) AS bomb_bytes;
SELECT pg_temp.push(1, queen.hash_blob('{a}'), pg_temp.rle_bomb('00'));
SELECT pg_temp.push(1, queen.hash_blob('{a}'), pg_temp.rle_bomb('20'));
-- and a frame that runs past the end of the blob
SELECT pg_temp.push(1, queen.hash_blob('{a}'), substr(pg_temp.frames('{a}', '{1}'), 1, 8) || '\x00');
-- none of it was written
SELECT count(*) AS us_segments FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'us.q';

-- the largest numbers jsonb holds are stored and read back
SELECT pg_temp.push(3, queen.hash_blob('{a,b,c}'),
       pg_temp.frames('{a,b,c}', ARRAY['1e131071', '{"x": 1e-16383}', '-9.99e131071']));
SELECT log_offset, left(payload::text, 12) AS payload_start, length(payload::text) AS len
  FROM queen.read('us.q', 'p');

-- the same rule at the HTTP door's parser: the number is refused there too
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": 1e1000000}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": 1}, {"queue": "q", "payload": {"a": [1, 1e131072]}}]}');
SELECT queen._parse_push_body('{"items": [{"queue": "q", "payload": [1e131071, 1e-16383, 0e-16383]}]}');

-- numbers on both sides of each limit: the door's verdict is jsonb's
CREATE FUNCTION pg_temp.jsonb_takes(t text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	PERFORM t::jsonb;
	RETURN true;
EXCEPTION WHEN OTHERS THEN
	RETURN false;
END $$;
SELECT n, left(t, 16) AS number, jsonb, push = 'queued' AS stored, jsonb = (push = 'queued') AS agree
  FROM (SELECT n, t, pg_temp.jsonb_takes(t) AS jsonb,
               pg_temp.push(1, queen.hash_blob(ARRAY['n' || n]), pg_temp.frames(ARRAY['n' || n], ARRAY[t])) AS push
          FROM unnest(ARRAY['1e131071', '1e131072', '9999e131068', '10000e131068', '0.0001e131072',
                    '1e-16383', '1e-16384', '0e-16384', '0.' || repeat('0', 16383), '0.' || repeat('0', 16384),
                    '1e1073741822', '0e1073741823', '-0.00001e131075'])
               WITH ORDINALITY u(t, n)) x
 ORDER BY n;

-- A stored segment damaged on disk (here by hand) does not fail a push that
-- duplicates a message in it, nor the other partitions of that push: the
-- duplicate names the zero id, as for an original retained away, and a
-- WARNING says which segment is damaged.
SELECT status FROM queen.push('us.dmg', '{"n": 1}', 'Default', 'dmg-1');
UPDATE queen.log_segments SET blob = '\x28b52ffd00112233'
 WHERE partition_id = qtest.pid('us.dmg', 'Default');
SET client_min_messages = error;
SELECT index, queue, status, log_offset, message_id = '00000000-0000-0000-0000-000000000000' AS zero_id
  FROM queen.push('[{"queue": "us.dmg", "payload": {"n": 1}, "transactionId": "dmg-1"},
                    {"queue": "us.dmg", "partition": "other", "payload": {"n": 2}, "transactionId": "dmg-2"}]')
 ORDER BY index;
RESET client_min_messages;
SELECT log_offset, payload FROM queen.read('us.dmg', 'other');

-- log_push_one_v1's p_pid must be the partition its names name
SELECT pg_temp.push(1, queen.hash_blob('{pp1}'), pg_temp.frames('{pp1}', '{1}'));
SELECT queen.log_push_one_v1('us.q', 'p', 1, queen.hash_blob('{pp2}'), -1,
       pg_temp.frames('{pp2}', '{2}'), qtest.pid('us.q', 'p'))->>'status' AS right_pid;
SELECT queen.log_push_one_v1('us.other', 'p', 1, queen.hash_blob('{pp3}'), -1,
       pg_temp.frames('{pp3}', '{3}'), qtest.pid('us.q', 'p'))->>'status' AS other_queue;
SELECT queen.log_push_one_v1('us.q', 'nope', 1, queen.hash_blob('{pp3}'), -1,
       pg_temp.frames('{pp3}', '{3}'), qtest.pid('us.q', 'p'), 0)->>'status' AS other_partition;
SELECT queen.log_push_one_v1('us.q', 'p', 1, queen.hash_blob('{pp3}'), -1,
       pg_temp.frames('{pp3}', '{3}'), qtest.pid('us.q', 'p'), 0,
       '00000000-0000-0000-0000-0000000000aa')->>'status' AS other_tenant;
SELECT count(*) AS us_q_segments FROM queen.log_segments WHERE partition_id = qtest.pid('us.q', 'p');

-- jsonb's size limits: an array of 16,777,217 elements (33.5 MB of text)
-- cannot be a jsonb (its parse tree's next doubling passes one allocation),
-- 16,777,216 can; both doors refuse exactly what jsonb_in would, so nothing
-- is stored that queen.read could not return
SELECT left(queen._parse_push_body('{"items":[{"queue":"q","payload":[' || repeat('0,', 16777215) || '0]}]}'), 24) AS at_limit;
SELECT queen._parse_push_body('{"items":[{"queue":"q","payload":[' || repeat('0,', 16777216) || '0]}]}') AS over_limit;
SELECT pg_temp.push(1, queen.hash_blob('{big}'),
       pg_temp.frames('{big}', ARRAY['[' || repeat('0,', 16777216) || '0]'])) AS over_limit_sql;
