-- The SQL door's roles (schema/5_roles.sql): queen_reader, queen_writer,
-- queen_consumer and queen_admin, each allowed exactly what its name says,
-- and none able to write a log table directly.

-- Every function of the extension: who may execute it besides its owner,
-- and whether it runs as its owner (then always with a fixed search_path).
SELECT p.oid::regprocedure AS function,
	   coalesce((SELECT string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
								   ',' ORDER BY 1)
				   FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
				  WHERE a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE'), '') AS execute,
	   p.prosecdef AS definer,
	   coalesce(array_to_string(p.proconfig, ' '), '') AS config
  FROM pg_proc p
 WHERE p.pronamespace = 'queen'::regnamespace
   AND EXISTS (SELECT 1 FROM pg_depend d
				WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
				  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'queen'))
 ORDER BY p.prosecdef, 2, p.oid::regprocedure::text;

-- Table privileges by role: SELECT for the reader (and so for the consumer
-- and the administrator), no write of any kind on any table or view for
-- anyone but the administrator's UPDATE of the queue options.
SELECT r.role,
	   count(*) FILTER (WHERE has_table_privilege(r.role, c.oid, 'SELECT')) AS readable,
	   count(*) AS relations,
	   coalesce(string_agg(c.relname, ',' ORDER BY c.relname) FILTER (
		   WHERE has_table_privilege(r.role, c.oid, 'INSERT, DELETE, TRUNCATE, REFERENCES, TRIGGER')
			  OR has_any_column_privilege(r.role, c.oid, 'INSERT, UPDATE, REFERENCES')), '') AS writable
  FROM (VALUES ('queen_reader'), ('queen_writer'), ('queen_consumer'), ('queen_admin')) r(role)
 CROSS JOIN pg_class c
 WHERE c.relnamespace = 'queen'::regnamespace AND c.relkind IN ('r', 'v', 'p', 'S')
 GROUP BY r.role ORDER BY r.role;
SELECT a.attname AS admin_may_update
  FROM pg_attribute a
 WHERE a.attrelid = 'queen.queues'::regclass AND a.attnum > 0 AND NOT a.attisdropped
   AND has_column_privilege('queen_admin', 'queen.queues', a.attname, 'UPDATE')
 ORDER BY a.attnum;
SELECT r.rolname, r.rolcanlogin, r.rolsuper, r.rolinherit,
	   ARRAY(SELECT b.rolname FROM pg_auth_members m JOIN pg_roles b ON b.oid = m.roleid
			  WHERE m.member = r.oid ORDER BY 1) AS member_of
  FROM pg_roles r WHERE r.rolname LIKE 'queen\_%' ORDER BY 1;

-- Behaviour: each statement below runs as each role and is rolled back,
-- whatever it did, so every cell sees the same state.  yes: the role may,
-- no: 42501 (permission denied), anything else: its SQLSTATE.
CREATE ROLE regress_reader IN ROLE queen_reader;
CREATE ROLE regress_writer IN ROLE queen_writer;
CREATE ROLE regress_consumer IN ROLE queen_consumer;
CREATE ROLE regress_admin IN ROLE queen_admin;
CREATE ROLE regress_nobody;
CREATE FUNCTION pg_temp.may(who text, stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('role', who, true);
	EXECUTE stmt;
	RAISE EXCEPTION USING ERRCODE = 'QROLL';
EXCEPTION WHEN OTHERS THEN
	RETURN CASE SQLSTATE WHEN 'QROLL' THEN 'yes' WHEN '42501' THEN 'no' ELSE SQLSTATE END;
END
$$;

-- something to pop, acknowledge, read and replay, pushed by the owner
SELECT status FROM queen.push('roles.q', '{"n": 1}');
SELECT status FROM queen.push('roles.q', '{"n": 2}');
BEGIN;
SELECT transaction_id AS dead_txn, partition_id AS dead_pid, lease_id AS dead_lease
  FROM queen.pop('roles.q', consumer_group => 'roles.g') \gset
SELECT dlq FROM queen.reject(:'dead_txn', :'dead_pid'::uuid, :'dead_lease', 'for the roles test',
							 'roles.g');
COMMIT;
SELECT d.id AS dead_id FROM queen.log_dlq d WHERE d.partition_id = :'dead_pid' \gset
SELECT query_id AS stream_id FROM queen.stream_register('roles.s', 'roles.q', 'h1') \gset

SELECT op,
	   pg_temp.may('regress_reader', stmt) AS reader,
	   pg_temp.may('regress_writer', stmt) AS writer,
	   pg_temp.may('regress_consumer', stmt) AS consumer,
	   pg_temp.may('regress_admin', stmt) AS admin,
	   pg_temp.may('regress_nobody', stmt) AS nobody
  FROM (VALUES
	('push', $$SELECT queen.push('roles.q', '{"n": 3}')$$),
	('push items', $$SELECT queen.push('[{"queue": "roles.q", "payload": {"n": 4}}]')$$),
	('log_push_one_v1', $$SELECT queen.log_push_one_v1('roles.q', 'Default', 1, queen.txn_hash('raw1'), -1,
						  queen.pack_frames(ARRAY[NULL::uuid], ARRAY['raw1'], ARRAY['{}'::bytea]))$$),
	('log_push_multi_v1', $$SELECT queen.log_push_multi_v1(ARRAY['roles.q'], ARRAY['Default'], ARRAY[1],
						  ARRAY[queen.txn_hash('raw2')], ARRAY[-1]::int8[],
						  ARRAY[queen.pack_frames(ARRAY[NULL::uuid], ARRAY['raw2'], ARRAY['{}'::bytea])])$$),
	('read', $$SELECT count(*) FROM queen.read('roles.q')$$),
	('log_segment_at_v1', format('SELECT count(*) FROM queen.log_segment_at_v1(%L, 0)', :'dead_pid')),
	('depth', $$SELECT queen.depth('roles.q')$$),
	('has_messages', $$SELECT queen.has_messages('roles.q', 'roles.g')$$),
	('dlq', $$SELECT count(*) FROM queen.dlq('roles.q')$$),
	('consumer_lag', $$SELECT count(*) FROM queen.consumer_lag$$),
	('queues_overview', $$SELECT count(*) FROM queen.queues_overview$$),
	('select log_segments', $$SELECT count(*) FROM queen.log_segments$$),
	('stream_state', format('SELECT count(*) FROM queen.stream_state(%L, %L)', :'stream_id', :'dead_pid')),
	('pop', $$SELECT count(*) FROM queen.pop('roles.q')$$),
	('pop_discover', $$SELECT count(*) FROM queen.pop_discover('roles')$$),
	('ack', format('SELECT success FROM queen.ack(%L, %L)', 'no-such-txn', :'dead_pid')),
	('ack batch', format('SELECT count(*) FROM queen.ack(ARRAY[%L], ARRAY[%L]::uuid[])', 'x', :'dead_pid')),
	('ack_ok', format('SELECT queen.ack_ok(%L, %L)', 'no-such-txn', :'dead_pid')),
	('nack', format('SELECT success FROM queen.nack(%L, %L)', 'no-such-txn', :'dead_pid')),
	('reject', format('SELECT success FROM queen.reject(%L, %L)', 'no-such-txn', :'dead_pid')),
	('renew', $$SELECT count(*) FROM queen.renew('no-such-lease')$$),
	('listen', $$SELECT queen.listen('roles.q')$$),
	('stream_register', $$SELECT queen.stream_register('roles.s2', 'roles.q', 'h1')$$),
	('stream_cycle', format('SELECT queen.stream_cycle(%L, %L, %L)', :'stream_id', :'dead_pid', '{"k": 1}')),
	('configure_queue_v1', $$SELECT queen.configure_queue_v1('{"queue": "roles.q", "options": {"leaseTime": 30}}')$$),
	('update queue option', $$UPDATE queen.queues SET lease_time = 30 WHERE name = 'roles.q'$$),
	('update queue name', $$UPDATE queen.queues SET name = 'roles.other' WHERE name = 'roles.q'$$),
	('delete_queue_v1', $$SELECT queen.delete_queue_v1('roles.q')$$),
	('delete_consumer_group', $$SELECT queen.delete_consumer_group('roles.g')$$),
	('seek', $$SELECT queen.seek('roles.q', 'roles.g', to_end => true)$$),
	('set_subscription', $$SELECT queen.set_subscription('roles.g', now())$$),
	('dlq_replay', format('SELECT queen.dlq_replay(%L)', :'dead_id')),
	('dlq_forget', format('SELECT queen.dlq_forget(%L, %L)', :'dead_pid', :'dead_txn')),
	('dlq_purge', $$SELECT queen.dlq_purge('roles.q')$$),
	('retention_run', $$SELECT count(*) FROM queen.retention_run()$$),
	('dedup_index', $$SELECT queen.dedup_index()$$),
	('stats_refresh', $$SELECT queen.stats_refresh()$$),
	('uuid_v7', $$SELECT queen.uuid_v7()$$),
	('insert log_segments', $$INSERT INTO queen.log_segments SELECT * FROM queen.log_segments LIMIT 1$$),
	('insert log_txns', $$INSERT INTO queen.log_txns SELECT * FROM queen.log_txns LIMIT 1$$),
	('update log_partitions', $$UPDATE queen.log_partitions SET last_offset = last_offset + 1$$),
	('update log_consumers', $$UPDATE queen.log_consumers SET committed = committed + 1$$),
	('delete log_dedup', $$DELETE FROM queen.log_dedup$$),
	('delete log_dlq', $$DELETE FROM queen.log_dlq$$),
	('truncate log_segments', $$TRUNCATE queen.log_segments CASCADE$$),
	('insert queues', $$INSERT INTO queen.queues (name) VALUES ('roles.direct')$$)
  ) AS t(op, stmt);

-- The functions that run as their owner cannot be steered by the caller's
-- search_path: operators of a schema the caller puts first are never used.
-- (Without the fixed search_path each of these would raise "hijacked" as
-- the extension's owner.)
CREATE SCHEMA regress_evil;
GRANT USAGE ON SCHEMA regress_evil TO PUBLIC;
CREATE FUNCTION regress_evil.text_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'hijacked: text = ran as %', current_user; END $$;
CREATE OPERATOR regress_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_evil.text_eq);
CREATE FUNCTION regress_evil.uuid_eq(uuid, uuid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'hijacked: uuid = ran as %', current_user; END $$;
CREATE OPERATOR regress_evil.= (LEFTARG = uuid, RIGHTARG = uuid, FUNCTION = regress_evil.uuid_eq);
SET ROLE regress_admin;
SET search_path = regress_evil, pg_catalog;
\set VERBOSITY terse
SELECT 'the trap is set'::text = 'x';
SELECT status FROM queen.push('roles.h', '{"n": 1}');
SELECT status FROM queen.push('roles.h', '{"n": 2}', 'other');
SELECT count(*) AS popped FROM queen.pop('roles.h', batch => 10, auto_ack => true);
SELECT (queen.configure_queue_v1('{"queue": "roles.h2"}'))->>'configured' AS configured;
SELECT queen.seek('roles.h', '__QUEUE_MODE__', to_end => true);
SELECT count(*) >= 0 AS ran FROM queen.retention_run();
\set VERBOSITY default
RESET search_path;
RESET ROLE;

DROP SCHEMA regress_evil CASCADE;
DROP ROLE regress_reader, regress_writer, regress_consumer, regress_admin, regress_nobody;
SELECT count(*) AS deleted FROM queen.delete_queue_v1('roles.q') d, queen.delete_queue_v1('roles.h') e,
	   queen.delete_queue_v1('roles.h2') f;

-- Installing in a second database of the cluster finds the roles made and
-- grants to them again.
SELECT current_database() AS home_db \gset
CREATE DATABASE regress_queen_roles TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C';
\c regress_queen_roles
CREATE EXTENSION queen;
SELECT count(*) AS writer_functions FROM pg_proc p
 WHERE p.pronamespace = 'queen'::regnamespace AND has_function_privilege('queen_writer', p.oid, 'EXECUTE')
   AND p.prosecdef;
\c :home_db
DROP DATABASE regress_queen_roles;
