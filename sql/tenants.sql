-- Tenants: an opaque scope; two tenants using the same queue name share
-- nothing (rows, partitions, offsets, dedup).

-- (without preloading, a session knows queen.tenant once queen is loaded)
LOAD 'queen';
SHOW queen.tenant;
SELECT status, log_offset FROM queen.push('p6.orders', '{"tenant": 1}', 'Default', 'same-txn');

SET queen.tenant = '00000000-0000-0000-0000-0000000000b2';
-- the same queue name and transactionId in another tenant: a new message at offset 0
SELECT status, log_offset FROM queen.push('p6.orders', '{"tenant": 2}', 'Default', 'same-txn');
SELECT status, log_offset FROM queen.push('p6.orders', '{"tenant": 2}', 'Default', 'same-txn');
SELECT log_offset, payload FROM queen.read('p6.orders');

RESET queen.tenant;
SELECT log_offset, payload FROM queen.read('p6.orders');

SELECT tenant_id, name, (SELECT count(*) FROM queen.log_partitions p WHERE p.queue_id = q.id) AS partitions
  FROM queen.queues q WHERE name = 'p6.orders' ORDER BY tenant_id;

-- log_push_multi_v1 takes one tenant per segment; a bundle may span tenants
SELECT jsonb_path_query_array(queen.log_push_multi_v1(
	ARRAY['p6.orders', 'p6.orders'], ARRAY['Default', 'Default'], ARRAY[1, 1],
	ARRAY[queen.txn_hash('m1'), queen.txn_hash('m1')], ARRAY[-1, -1]::int8[],
	ARRAY[queen.pack_frames(ARRAY[NULL::uuid], ARRAY['m1'], ARRAY['{"via": "multi"}'::bytea]),
	      queen.pack_frames(ARRAY[NULL::uuid], ARRAY['m1'], ARRAY['{"via": "multi"}'::bytea])],
	ARRAY['00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-0000000000b2']::uuid[]),
	'$[*].baseOffset') AS base_offsets;
-- and a tenant nobody used before gets its own queue row
SELECT queen.log_push_one_v1('p6.orders', 'Default', 1, queen.txn_hash('m1'), -1,
	queen.pack_frames(ARRAY[NULL::uuid], ARRAY['m1'], ARRAY['{}'::bytea]),
	NULL, NULL, '00000000-0000-0000-0000-0000000000c3')->'baseOffset' AS third_tenant_offset;
SELECT tenant_id, p.last_offset
  FROM queen.queues q JOIN queen.log_partitions p ON p.queue_id = q.id
 WHERE q.name = 'p6.orders' ORDER BY tenant_id;

SET queen.tenant = 'not a uuid';
SET queen.tenant = '00000000-0000-0000-0000-0000000000b2';
SELECT count(*) AS tenant_b2_messages FROM queen.read('p6.orders');
