-- queen.read: the ordered read of one partition, decoded in C; byte-exact
-- round trips; damaged segments are reported, never skipped.

-- segments of 3, 1 and 4 messages
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'p5.read', 'payload', jsonb_build_object('n', i), 'transactionId', 'r' || i)) FROM generate_series(0, 2) i));
SELECT count(*) FROM queen.push('p5.read', '{"n": 3}', 'Default', 'r3');
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'p5.read', 'payload', jsonb_build_object('n', i), 'transactionId', 'r' || i)) FROM generate_series(4, 7) i));

SELECT log_offset, transaction_id, payload FROM queen.read('p5.read');
-- from the middle of a segment, bounded
SELECT log_offset, transaction_id FROM queen.read('p5.read', 'Default', 1, 4);
SELECT log_offset, transaction_id FROM queen.read('p5.read', from_offset => 6);
-- message ids and created_at are the ones queen.push reported
CREATE TEMP TABLE pushed AS SELECT * FROM queen.push('p5.read', '{"n": 8}', 'Default', 'r8');
SELECT r.message_id = p.message_id AS same_id, r.created_at = p.created_at AS same_time, r.log_offset = p.log_offset AS same_offset
  FROM queen.read('p5.read', 'Default', 8, 1) r, pushed p;
-- past the tail, zero messages, unknown partition or queue: no rows
SELECT count(*) FROM queen.read('p5.read', 'Default', 9);
SELECT count(*) FROM queen.read('p5.read', 'Default', 0, 0);
SELECT count(*) FROM queen.read('p5.read', 'nowhere');
SELECT count(*) FROM queen.read('p5.no-such-queue');
-- retention removes whole segments; the read resumes at the next one
DELETE FROM queen.log_segments WHERE partition_id = qtest.pid('p5.read', 'Default') AND base_offset = 3;
SELECT log_offset FROM queen.read('p5.read', 'Default', 2, 3);

-- Byte-exact round trip: what queen.read returns is what was pushed, and the
-- stored bytes are jsonb's text of it, for awkward payloads too.
CREATE TEMP TABLE payloads (n int, payload jsonb);
INSERT INTO payloads VALUES
	(0, '""'),
	(1, '{}'),
	(2, '   {"spaced" :  [ 1 , 2 ]   }   '),
	(3, '"h\u00e9llo \u2603 \ud834\udd1e \"quoted\" \\ back"'),
	(4, '{"k": "日本語", "emoji": "🎉"}'),
	(5, 'null'),
	(6, '12.50'),
	(7, jsonb_build_object('big', repeat('0123456789', 104858)));
SELECT count(*) FROM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', 'p5.exact', 'payload', payload, 'transactionId', 'x' || n) ORDER BY n) FROM payloads));
SELECT r.log_offset, octet_length(r.payload::text) AS bytes, r.payload = p.payload AS equal,
       r.payload::text = p.payload::text AS same_text
  FROM queen.read('p5.exact') r JOIN payloads p ON p.n = r.log_offset ORDER BY 1;
SELECT f.idx, f.payload = convert_to(p.payload::text, 'UTF8') AS stored_bytes_exact
  FROM queen.log_segments s, queen.unpack_frames(s.blob) f, payloads p
 WHERE s.partition_id = qtest.pid('p5.exact', 'Default') AND p.n = f.idx ORDER BY 1;

-- Damaged segments: a clear error naming the segment, SQLSTATE XX001.
CREATE TEMP TABLE good AS SELECT blob FROM queen.log_segments WHERE partition_id = qtest.pid('p5.read', 'Default') AND base_offset = 4;
UPDATE queen.log_segments SET blob = '\x28b52ffd00112233'
 WHERE partition_id = qtest.pid('p5.read', 'Default') AND base_offset = 4;
SELECT qtest.expect_error($$SELECT * FROM queen.read('p5.read', 'Default', 4)$$) AS not_decompressible;
-- reading before the damage still works
SELECT log_offset FROM queen.read('p5.read', 'Default', 0, 3);
-- fewer frames than the row's offsets promise
UPDATE queen.log_segments SET blob = queen.pack_frames(ARRAY[NULL::uuid], ARRAY['only'], ARRAY['{}'::bytea])
 WHERE partition_id = qtest.pid('p5.read', 'Default') AND base_offset = 4;
SELECT qtest.expect_error($$SELECT * FROM queen.read('p5.read', 'Default', 4)$$) AS too_few_frames;
-- more frames than its offsets cover
UPDATE queen.log_segments SET blob = queen.pack_frames(array_fill(NULL::uuid, ARRAY[5]), '{a,b,c,d,e}', array_fill('{}'::bytea, ARRAY[5]))
 WHERE partition_id = qtest.pid('p5.read', 'Default') AND base_offset = 4;
SELECT qtest.expect_error($$SELECT * FROM queen.read('p5.read', 'Default', 4)$$) AS too_many_frames;
-- a payload that is not JSON
UPDATE queen.log_segments SET blob = queen.pack_frames(array_fill(NULL::uuid, ARRAY[4]), '{a,b,c,d}', ARRAY['{}', '{}', '{bad', '{}']::bytea[])
 WHERE partition_id = qtest.pid('p5.read', 'Default') AND base_offset = 4;
SELECT qtest.expect_error($$SELECT * FROM queen.read('p5.read', 'Default', 4)$$) AS payload_not_json;
-- valid JSON that jsonb cannot hold
UPDATE queen.log_segments SET blob = queen.pack_frames(array_fill(NULL::uuid, ARRAY[4]), '{a,b,c,d}', ARRAY['{}'::bytea, convert_to('"\u0000"', 'UTF8'), '{}', '{}'])
 WHERE partition_id = qtest.pid('p5.read', 'Default') AND base_offset = 4;
SELECT qtest.expect_error($$SELECT * FROM queen.read('p5.read', 'Default', 4)$$) AS payload_with_nul_escape;
UPDATE queen.log_segments SET blob = (SELECT blob FROM good)
 WHERE partition_id = qtest.pid('p5.read', 'Default') AND base_offset = 4;
SELECT log_offset, transaction_id FROM queen.read('p5.read', 'Default', 4, 2);

-- bad arguments
SELECT qtest.expect_error($$SELECT * FROM queen.read(NULL)$$) AS null_queue;
SELECT qtest.expect_error($$SELECT * FROM queen.read('p5.read', 'Default', -1)$$) AS negative_offset;
SELECT qtest.expect_error($$SELECT * FROM queen.read('p5.read', 'Default', 0, -1)$$) AS negative_max;
SELECT qtest.expect_error($$SELECT * FROM queen.read('p5.read', E'a\x01')$$) AS control_in_partition;
