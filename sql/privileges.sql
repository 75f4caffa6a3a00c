-- The push functions ship SECURITY DEFINER, for the roles of sql/roles.  Run
-- with the caller's rights instead (a DBA may ALTER FUNCTION them so), a push
-- still never bypasses the caller's table privileges, row-level security,
-- triggers or constraints: the allocator inserts the segment and hash rows
-- from C and checks what the same INSERTs and UPDATEs would need.
ALTER FUNCTION queen.push(text, jsonb, text, text) SECURITY INVOKER RESET search_path;
ALTER FUNCTION queen.push(jsonb) SECURITY INVOKER RESET search_path;
CREATE ROLE regress_queen_pusher;
GRANT USAGE ON SCHEMA queen TO regress_queen_pusher;
GRANT EXECUTE ON FUNCTION queen.push(text, jsonb, text, text), queen.push(jsonb),
	queen.read(text, text, bigint, integer) TO regress_queen_pusher;
GRANT SELECT, INSERT, UPDATE ON queen.queues, queen.log_partitions TO regress_queen_pusher;
GRANT SELECT, INSERT ON queen.log_txns TO regress_queen_pusher;
GRANT SELECT ON queen.log_segments TO regress_queen_pusher;

-- without INSERT on log_segments: refused, and nothing is written
SELECT count(*) AS hash_rows_before FROM queen.log_segments \gset
SET ROLE regress_queen_pusher;
SELECT status FROM queen.push('priv.events', '{"n": 1}');
RESET ROLE;
SELECT count(*) AS queues FROM queen.queues WHERE name = 'priv.events';
SELECT count(*) = :hash_rows_before AS no_hash_row_written FROM queen.log_segments;

-- with it: stored, and readable back
GRANT INSERT ON queen.log_segments TO regress_queen_pusher;
SET ROLE regress_queen_pusher;
SELECT status, log_offset FROM queen.push('priv.events', '{"n": 1}');
SELECT status, log_offset FROM queen.push('[{"queue": "priv.events", "payload": {"n": 2}},
                                            {"queue": "priv.events", "partition": "b", "payload": {"n": 3}}]');
RESET ROLE;
SELECT log_offset, payload FROM queen.read('priv.events');
SELECT log_offset, payload FROM queen.read('priv.events', 'b');

-- The pre-lock by id (log_lock.c) checks what its statement would: FOR NO
-- KEY UPDATE needs UPDATE on log_partitions.  This process has the ids
-- cached, so the push takes that path, is refused, and writes nothing.
REVOKE UPDATE ON queen.log_partitions FROM regress_queen_pusher;
SET ROLE regress_queen_pusher;
SELECT status, log_offset FROM queen.push('priv.events', '{"n": 4}');
RESET ROLE;
GRANT UPDATE ON queen.log_partitions TO regress_queen_pusher;
SELECT max(log_offset) AS last_stored FROM queen.read('priv.events');

-- Row-level security on log_partitions is applied by a statement: a policy
-- that hides partition "hidden" from the pusher makes its push fail even
-- with the id cached, while another partition of the queue still pushes.
SELECT status FROM queen.push('priv.events', '{"n": 5}', 'hidden');
ALTER TABLE queen.log_partitions ENABLE ROW LEVEL SECURITY;
CREATE POLICY regress_hide ON queen.log_partitions FOR ALL TO regress_queen_pusher
	USING (name <> 'hidden') WITH CHECK (name <> 'hidden');
SET ROLE regress_queen_pusher;
\set VERBOSITY terse
SELECT status FROM queen.push('priv.events', '{"n": 6}', 'hidden');
\set VERBOSITY default
SELECT status, log_offset FROM queen.push('priv.events', '{"n": 7}', 'b');
RESET ROLE;
DROP POLICY regress_hide ON queen.log_partitions;
ALTER TABLE queen.log_partitions DISABLE ROW LEVEL SECURITY;
SELECT log_offset, payload FROM queen.read('priv.events', 'hidden');

-- the segment rows still honour the foreign key's cascade
SELECT count(*) AS segments_before FROM queen.log_segments s
  JOIN queen.log_partitions p ON p.id = s.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'priv.events';
DELETE FROM queen.queues WHERE name = 'priv.events';
SELECT count(*) AS orphan_segments FROM queen.log_segments s
 WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p WHERE p.id = s.partition_id);

-- Row-level security and triggers on the log tables would be bypassed by
-- the allocator's direct inserts, so a push refuses to write while they
-- apply: never a silent bypass.
CREATE FUNCTION pg_temp.try_push(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN (queen.push(q, '{"n": 1}')).status;
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ' ' || SQLERRM;
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.try_push(text) TO regress_queen_pusher;
ALTER TABLE queen.log_segments ENABLE ROW LEVEL SECURITY;
CREATE POLICY regress_no_pusher ON queen.log_segments FOR INSERT TO regress_queen_pusher WITH CHECK (false);
CREATE POLICY regress_others ON queen.log_segments FOR ALL TO PUBLIC USING (true);
SET ROLE regress_queen_pusher;
SELECT pg_temp.try_push('priv.rls');
RESET ROLE;
-- the table's owner is not subject to the policies, and pushes
SELECT pg_temp.try_push('priv.rls');
DROP POLICY regress_no_pusher ON queen.log_segments;
DROP POLICY regress_others ON queen.log_segments;
ALTER TABLE queen.log_segments DISABLE ROW LEVEL SECURITY;
SET ROLE regress_queen_pusher;
SELECT pg_temp.try_push('priv.rls');
RESET ROLE;
SELECT log_offset, payload FROM queen.read('priv.rls');

CREATE TABLE regress_fired (n int);
CREATE FUNCTION regress_note_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO regress_fired VALUES (1); RETURN NULL; END $$;
CREATE TRIGGER regress_after_insert AFTER INSERT ON queen.log_segments
	FOR EACH ROW EXECUTE FUNCTION regress_note_insert();
SELECT pg_temp.try_push('priv.trigger');
SELECT count(*) AS trigger_queue_rows FROM queen.queues WHERE name = 'priv.trigger';
DROP TRIGGER regress_after_insert ON queen.log_segments;
SELECT pg_temp.try_push('priv.trigger');
-- a trigger on log_partitions is honoured: the allocator then updates the
-- rows by statement instead of from C, and it fires once per push
TRUNCATE regress_fired;
CREATE TRIGGER regress_after_update AFTER UPDATE ON queen.log_partitions
	FOR EACH ROW EXECUTE FUNCTION regress_note_insert();
SELECT pg_temp.try_push('priv.trigger');
SELECT pg_temp.try_push('priv.trigger');
SELECT count(*) AS allocator_updates_fired FROM regress_fired;
DROP TRIGGER regress_after_update ON queen.log_partitions;
-- a CHECK constraint added to log_partitions binds the allocator's update too
ALTER TABLE queen.log_partitions ADD CONSTRAINT regress_offset_cap CHECK (last_offset < 4) NOT VALID;
SELECT pg_temp.try_push('priv.trigger');
SELECT pg_temp.try_push('priv.trigger');
ALTER TABLE queen.log_partitions DROP CONSTRAINT regress_offset_cap;
SELECT max(log_offset) AS last_stored FROM queen.read('priv.trigger');
-- and one added to log_segments binds its rows, which are otherwise not
-- checked (their own constraints hold by construction)
ALTER TABLE queen.log_segments ADD CONSTRAINT regress_base_cap CHECK (base_offset < 5) NOT VALID;
SELECT pg_temp.try_push('priv.trigger');
SELECT pg_temp.try_push('priv.trigger');
ALTER TABLE queen.log_segments DROP CONSTRAINT regress_base_cap;
SELECT max(log_offset) AS last_stored FROM queen.read('priv.trigger');
DROP TABLE regress_fired;
DROP FUNCTION regress_note_insert();
DROP FUNCTION pg_temp.try_push(text);

REVOKE ALL ON queen.queues, queen.log_partitions, queen.log_txns, queen.log_segments FROM regress_queen_pusher;
REVOKE ALL ON FUNCTION queen.push(text, jsonb, text, text), queen.push(jsonb),
	queen.read(text, text, bigint, integer) FROM regress_queen_pusher;
REVOKE USAGE ON SCHEMA queen FROM regress_queen_pusher;
DROP ROLE regress_queen_pusher;
ALTER FUNCTION queen.push(text, jsonb, text, text) SECURITY DEFINER SET search_path = pg_catalog, queen, pg_temp;
ALTER FUNCTION queen.push(jsonb) SECURITY DEFINER SET search_path = pg_catalog, queen, pg_temp;
