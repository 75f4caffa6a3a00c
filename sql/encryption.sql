-- Encryption at rest (src/core/crypto.c): an encrypted queue's payloads are
-- stored, dead-lettered and replayed sealed in Queen's AES-256-GCM
-- envelope, and opened for readers; without a usable key its pushes are
-- refused and nothing is written; the previous key opens what it sealed.
SET queen.tenant = '00000000-0000-0000-0000-0000000000e1';
SET client_min_messages = warning;
SET queen.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';

-- the bytes stored for a queue: every segment's frames, inflated
CREATE TEMP VIEW enc_bytes AS
SELECT q.name AS queue, s.blob, queen.decompress_segment(s.blob) AS raw
  FROM queen.log_segments s JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = queen.current_tenant();

SELECT queen.configure_queue_v1('{"queue": "enc.secret", "options": {"encryptionEnabled": true, "retryLimit": 0}}',
								queen.current_tenant())->'options'->'encryptionEnabled' AS encrypted;
SELECT status FROM queen.push('enc.secret', '{"card": "4111-1111-1111-1111", "n": 1}', 'p', 's1');
SELECT count(*) FROM queen.push('[{"queue": "enc.secret", "partition": "p", "payload": {"card": "4111-1111-1111-1111", "n": 2}, "transactionId": "s2"},
								  {"queue": "enc.plain", "payload": {"card": "4111-1111-1111-1111", "n": 3}}]');

-- stored: sealed (flag 4, Queen's envelope) in the encrypted queue, plain beside it
SELECT queue, position('4111-1111'::bytea IN raw) > 0 AS plaintext_stored FROM enc_bytes ORDER BY queue;
SELECT f.flags, f.transaction_id, convert_from(f.payload, 'UTF8')::jsonb ?& ARRAY['authTag', 'encrypted', 'iv'] AS envelope
  FROM enc_bytes b, queen.unpack_frames(b.blob) f WHERE b.queue = 'enc.secret' ORDER BY f.transaction_id;
-- two pushes of one payload seal it differently (a fresh IV each)
SELECT count(DISTINCT f.payload) AS distinct_ciphertexts
  FROM enc_bytes b, queen.unpack_frames(b.blob) f WHERE b.queue = 'enc.secret';

-- read and popped: opened
SELECT log_offset, transaction_id, payload FROM queen.read('enc.secret', 'p') ORDER BY log_offset;
SELECT transaction_id, payload FROM queen.pop('enc.secret', 'p', batch => 10, auto_ack => true) ORDER BY transaction_id;

-- a duplicate is found by its transactionId, which stays readable
SELECT status FROM queen.push('enc.secret', '{"card": "4111-1111-1111-1111", "n": 1}', 'p', 's1');

-- the raw door (queen_writer may call it) stores no plaintext in an
-- encrypted queue: frames not all sealed are refused, nothing written;
-- sealed frames (here a stored segment's) are taken
SELECT count(*) AS segments_before_raw FROM enc_bytes WHERE queue = 'enc.secret' \gset
SELECT qtest.expect_error($$SELECT queen.log_push_one_v1('enc.secret', 'raw', 1, queen.txn_hash('r1'), -1,
	queen.pack_frames(ARRAY[NULL::uuid], ARRAY['r1'], ARRAY['{"card": "4111-1111-1111-1111"}'::bytea]),
	p_tenant => queen.current_tenant())$$) AS raw_plaintext;
SELECT qtest.expect_error($$SELECT queen.log_push_multi_v1(ARRAY['enc.plain', 'enc.secret'], ARRAY['raw', 'raw'], ARRAY[1, 1],
	ARRAY[queen.txn_hash('r2'), queen.txn_hash('r2')], ARRAY[-1, -1]::int8[],
	ARRAY[queen.pack_frames(ARRAY[NULL::uuid], ARRAY['r2'], ARRAY['{"n": 1}'::bytea]),
	      queen.pack_frames(ARRAY[NULL::uuid], ARRAY['r2'], ARRAY['{"card": "4111-1111-1111-1111"}'::bytea])],
	ARRAY[queen.current_tenant(), queen.current_tenant()])$$) AS raw_plaintext_in_bundle;
SELECT count(*) = :segments_before_raw AS nothing_written FROM enc_bytes WHERE queue = 'enc.secret';
SELECT count(*) AS plain_raw_rows FROM queen.read('enc.plain', 'raw');
SELECT queen.log_push_one_v1('enc.secret', 'raw', u.n, u.h, -1, b.blob,
							 p_tenant => queen.current_tenant())->>'status' AS raw_sealed
  FROM enc_bytes b
 CROSS JOIN LATERAL (SELECT count(*)::int AS n, queen.hash_blob(array_agg(f.transaction_id ORDER BY f.idx)) AS h
					   FROM queen.unpack_frames(b.blob) f) u
 WHERE b.queue = 'enc.secret';
SELECT transaction_id, payload->>'n' AS n FROM queen.read('enc.secret', 'raw') ORDER BY transaction_id;
-- hand-built frames (docs/FORMAT.md) in a stored-block zstd frame: the flag 4
-- over a payload that is no envelope is refused (its plaintext would be
-- stored in a queue that promises none), and so is a producerSub, which only
-- the broker sets from a token
CREATE FUNCTION pg_temp.le32(n int) RETURNS bytea LANGUAGE sql AS $$
	SELECT substring(int4send(n) FROM 4 FOR 1) || substring(int4send(n) FROM 3 FOR 1)
		|| substring(int4send(n) FROM 2 FOR 1) || substring(int4send(n) FROM 1 FOR 1) $$;
CREATE FUNCTION pg_temp.blob(body bytea) RETURNS bytea LANGUAGE sql AS $$
	SELECT qtest.zstd_raw(pg_temp.le32(length(body)) || body) $$;
SELECT qtest.expect_error($$SELECT queen.log_push_one_v1('enc.plain', 'raw', 1, queen.txn_hash('s9'), -1,
	pg_temp.blob('\x04'::bytea || '\x01890a5dac96774bbcceb302099a8057' || '\x0200' || convert_to('s9', 'UTF8')
				 || convert_to('{"card": "4111-1111-1111-1111"}', 'UTF8')), p_tenant => queen.current_tenant())$$)
	AS flagged_sealed_not_sealed;
SELECT qtest.expect_error($$SELECT queen.log_push_one_v1('enc.plain', 'raw', 1, queen.txn_hash('p1'), -1,
	pg_temp.blob('\x02'::bytea || '\x01890a5dac96774bbcceb302099a8057' || '\x0200' || convert_to('p1', 'UTF8')
				 || '\x0d00' || convert_to('admin-service', 'UTF8') || convert_to('{}', 'UTF8')),
	p_tenant => queen.current_tenant())$$) AS forged_producer;
SELECT count(*) AS plain_raw_rows FROM queen.read('enc.plain', 'raw');

-- dead letters keep the envelope and are listed opened; a replay goes back sealed
SELECT queen.push('enc.secret', '{"card": "4111-1111-1111-1111", "n": 4}', 'd', 'd1') IS NOT NULL AS pushed;
SELECT r.dlq FROM queen.pop('enc.secret', 'd') p,
	   LATERAL queen.reject(p.transaction_id, p.partition_id, p.lease_id, 'declined') r;
SELECT position('4111-1111' IN d.payload::text) > 0 AS plaintext_in_dlq, d.payload ? 'authTag' AS envelope
  FROM queen.log_dlq d JOIN queen.log_partitions p ON p.id = d.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.tenant_id = queen.current_tenant();
SELECT transaction_id, error, payload FROM queen.dlq('enc.secret');
SELECT r.result, r.transaction_id LIKE 'dlq:%' AS replayed_as
  FROM queen.log_dlq d JOIN queen.log_partitions p ON p.id = d.partition_id
  JOIN queen.queues q ON q.id = p.queue_id, LATERAL queen.dlq_replay(d.id) r
 WHERE q.tenant_id = queen.current_tenant();
SELECT payload FROM queen.read('enc.secret', 'd', 1);
SELECT bool_and(f.flags = 4) AS all_sealed
  FROM enc_bytes b, queen.unpack_frames(b.blob) f WHERE b.queue = 'enc.secret';

-- a wrong key opens nothing: readers get the envelope, never other bytes
SET queen.encryption_key = 'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff';
SELECT payload ?& ARRAY['authTag', 'encrypted', 'iv'] AS sealed, payload ? 'card' AS opened
  FROM queen.read('enc.secret', 'p', 0, 1);
-- ... until the key before the rotation is named previous; new pushes use the new key
SET queen.encryption_key_previous = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT payload FROM queen.read('enc.secret', 'p', 0, 1);
SELECT status FROM queen.push('enc.secret', '{"after": "rotation"}', 'p', 's3');
RESET queen.encryption_key_previous;
SELECT transaction_id, payload ? 'authTag' AS sealed FROM queen.read('enc.secret', 'p') ORDER BY log_offset;

-- Queen's envelope, sealed by Node's crypto (known answer): opened here
SET queen.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT queen._open_envelope('{"authTag":"mYsaZd2tOLqEFLRphUvC9w==","encrypted":"nToUSCmnbZ1YR/amYh+u/FyONzKo7HNAriIV2wI=","iv":"oKGio6SlpqeoqaqrrK2urw=="}') AS known_answer;
-- one altered byte of ciphertext, tag or IV, and it does not open
SELECT queen._open_envelope('{"authTag":"mYsaZd2tOLqEFLRphUvC9w==","encrypted":"nToUSCmnbZ1YR/amYh+u/FyONzKo7HNAriIV2wA=","iv":"oKGio6SlpqeoqaqrrK2urw=="}') AS altered_data,
	   queen._open_envelope('{"authTag":"mYsaZd2tOLqEFLRphUvC9A==","encrypted":"nToUSCmnbZ1YR/amYh+u/FyONzKo7HNAriIV2wI=","iv":"oKGio6SlpqeoqaqrrK2urw=="}') AS altered_tag,
	   queen._open_envelope('{"authTag":"mYsaZd2tOLqEFLRphUvC9w==","encrypted":"nToUSCmnbZ1YR/amYh+u/FyONzKo7HNAriIV2wI=","iv":"AKGio6SlpqeoqaqrrK2urw=="}') AS altered_iv;

-- no usable key: pushes to the encrypted queue are refused and write nothing
SELECT count(*) AS segments_before FROM enc_bytes WHERE queue = 'enc.secret' \gset
SET queen.encryption_key = '';
SELECT queen.push('enc.secret', '{"n": 5}', 'p', 's5');
SET queen.encryption_key = 'not-a-key';
SELECT queen.push('[{"queue": "enc.plain", "payload": {"n": 6}}, {"queue": "enc.secret", "partition": "p", "payload": {"n": 6}}]');
SELECT count(*) = :segments_before AS nothing_written FROM enc_bytes WHERE queue = 'enc.secret';
SELECT count(*) AS plain_kept FROM queen.read('enc.plain');
-- a plain queue does not need a key
SELECT status FROM queen.push('enc.plain', '{"n": 7}');
RESET queen.encryption_key;

-- encryption turned on for a queue that has plain messages: old ones stay
-- readable, new ones are sealed
SET queen.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SELECT queen.configure_queue_v1('{"queue": "enc.plain", "options": {"encryptionEnabled": true}}',
								queen.current_tenant())->'options'->'encryptionEnabled' AS encrypted;
SELECT status FROM queen.push('enc.plain', '{"n": 8}');
SELECT payload FROM queen.read('enc.plain') ORDER BY log_offset;
SELECT f.flags, count(*) FROM enc_bytes b, queen.unpack_frames(b.blob) f
 WHERE b.queue = 'enc.plain' GROUP BY 1 ORDER BY 1;

-- and off again: new messages are stored plain
SELECT queen.configure_queue_v1('{"queue": "enc.plain", "options": {"encryptionEnabled": false}}',
								queen.current_tenant())->'options'->'encryptionEnabled' AS encrypted;
SELECT status FROM queen.push('enc.plain', '{"n": 9}');
SELECT f.flags, count(*) FROM enc_bytes b, queen.unpack_frames(b.blob) f
 WHERE b.queue = 'enc.plain' GROUP BY 1 ORDER BY 1;

-- the keys are a superuser's: others can neither read nor set them
CREATE ROLE enc_nobody;
SET ROLE enc_nobody;
SHOW queen.encryption_key;
SET queen.encryption_key = '000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
RESET ROLE;
DROP ROLE enc_nobody;

SELECT queen.delete_queue_v1(n, queen.current_tenant()) FROM unnest(ARRAY['enc.secret', 'enc.plain']) n;
RESET queen.encryption_key;
RESET queen.tenant;
