-- schema/5_roles.sql: who may call what from SQL.  Four roles, granted to an
-- application's own login roles, each allowed exactly what its name says:
--
--   queen_reader    read messages, dead letters and every table and view
--                   (SELECT only); no writes of any kind
--   queen_writer    push (queen.push and the raw allocator signatures);
--                   nothing else, not even a read
--   queen_consumer  pop, ack, nack, reject, renew, LISTEN and the stream
--                   cycle; a member of queen_reader (it reads what it consumes)
--   queen_admin     configure and delete queues, seek, subscriptions, dead
--                   letters, retention, statistics, and the queue options by
--                   UPDATE of queen.queues; a member of the three others
--
-- No role has INSERT, UPDATE or DELETE on a log table: the allocator's
-- invariants (gapless offsets, one hash row per segment, the partition row's
-- counters) hold only for rows written by the core.  So the functions that
-- write run SECURITY DEFINER, as the extension's owner, with a fixed
-- search_path, and EXECUTE on them is the grant; those that only read run
-- with the caller's rights over the reader's SELECT.  Functions that touch no
-- table (the codec, UUIDv7) stay executable by anyone with USAGE on the schema.
--
-- Every function of the schema must have a row below: the install refuses
-- otherwise, so a new function cannot ship executable by PUBLIC by accident.

DO $$
DECLARE
	r			record;
	missing		text;
	fn			text[];
	map			text[];
BEGIN
	-- Roles are cluster-wide: another database, or an earlier install, may
	-- have made them already.
	FOREACH missing IN ARRAY ARRAY['queen_reader', 'queen_writer', 'queen_consumer', 'queen_admin']
	LOOP
		IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = missing) THEN
			EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', missing);
		END IF;
	END LOOP;

	FOR r IN SELECT * FROM (VALUES
			('queen_reader', 'queen_consumer'),
			('queen_reader', 'queen_admin'),
			('queen_writer', 'queen_admin'),
			('queen_consumer', 'queen_admin')) AS m(granted, member)
	LOOP
		IF NOT pg_catalog.pg_has_role(r.member, r.granted, 'MEMBER') THEN
			EXECUTE pg_catalog.format('GRANT %I TO %I', r.granted, r.member);
		END IF;
	END LOOP;

	-- [function, the role that may EXECUTE it (public: anyone), definer or invoker]
	map := ARRAY[
		-- the codec and UUIDv7: no table, nothing to protect
		['queen.uuid_v7()', 'public', 'invoker'],
		['queen.uuid_v7_time(uuid)', 'public', 'invoker'],
		['queen.uuid_v7_at(timestamptz)', 'public', 'invoker'],
		['queen.txn_hash(text)', 'public', 'invoker'],
		['queen.hash_blob(text[])', 'public', 'invoker'],
		['queen.pack_frames(uuid[],text[],bytea[])', 'public', 'invoker'],
		['queen.unpack_frames(bytea)', 'public', 'invoker'],
		['queen.decompress_segment(bytea)', 'public', 'invoker'],
		['queen.log_unnest_hashes(bytea)', 'public', 'invoker'],
		['queen.channel(text)', 'public', 'invoker'],
		['queen.current_tenant()', 'public', 'invoker'],
		['queen._ts(timestamptz)', 'public', 'invoker'],
		['queen._bucket_minutes(timestamptz,timestamptz)', 'public', 'invoker'],
		-- writing messages
		['queen.push(text,jsonb,text,text)', 'queen_writer', 'definer'],
		['queen.push(jsonb)', 'queen_writer', 'definer'],
		['queen.log_push_one_v1(text,text,integer,bytea,bigint,bytea,uuid,integer,uuid)', 'queen_writer', 'definer'],
		['queen.log_push_multi_v1(text[],text[],integer[],bytea[],bigint[],bytea[],uuid[])', 'queen_writer', 'definer'],
		-- consuming
		['queen.pop(text,text,text,integer,integer,boolean,integer,text,text,interval)', 'queen_consumer', 'definer'],
		['queen.pop_discover(text,text,text,integer,integer,boolean,integer,text,text,interval)', 'queen_consumer', 'definer'],
		['queen.ack(text,uuid,text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.ack(text,text,text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.ack(text[],uuid[],text[],text[],text,text[],boolean)', 'queen_consumer', 'definer'],
		['queen.ack(text[],text[],text[],text[],text,text[],boolean)', 'queen_consumer', 'definer'],
		['queen.ack_ok(text,uuid,text,text,text,text)', 'queen_consumer', 'definer'],
		['queen.ack_ok(text,text,text,text,text,text)', 'queen_consumer', 'definer'],
		['queen.nack(text,uuid,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.nack(text,text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.reject(text,uuid,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.reject(text,text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.renew(text,integer,boolean)', 'queen_consumer', 'definer'],
		['queen.listen(text)', 'queen_consumer', 'invoker'],
		['queen.stream_register(text,text,text,text,boolean)', 'queen_consumer', 'definer'],
		['queen.stream_cycle(uuid,uuid,jsonb,text[],text,text,text,boolean,text)', 'queen_consumer', 'definer'],
		-- reading, with the caller's SELECT
		['queen.read(text,text,bigint,integer)', 'queen_reader', 'invoker'],
		['queen.log_segment_at_v1(uuid,bigint)', 'queen_reader', 'invoker'],
		['queen.stream_state(uuid,uuid,text[],text)', 'queen_reader', 'invoker'],
		['queen._pending(uuid,text)', 'queen_reader', 'invoker'],
		['queen.depth(text,text)', 'queen_reader', 'invoker'],
		['queen.has_messages(text,text)', 'queen_reader', 'invoker'],
		['queen._dlq_list(text,text,text,timestamptz,timestamptz,integer,bigint)', 'queen_reader', 'invoker'],
		['queen.dlq(text,text,text,timestamptz,timestamptz,integer,bigint)', 'queen_reader', 'invoker'],
		['queen._stats_age()', 'queen_reader', 'invoker'],
		['queen._queue_options(queen.queues)', 'queen_reader', 'invoker'],
		['queen._partition_json(queen.log_partitions)', 'queen_reader', 'invoker'],
		['queen._series(uuid,text,text,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._read_partition(uuid,bigint,integer)', 'queen_reader', 'invoker'],
		['queen._message_offset(uuid,text,bigint,bigint)', 'queen_reader', 'invoker'],
		['queen._message_status(uuid,bigint)', 'queen_reader', 'invoker'],
		['queen._api_queues(uuid,text,text,integer,bigint)', 'queen_reader', 'invoker'],
		['queen._api_queue(uuid,text,integer,bigint)', 'queen_reader', 'invoker'],
		['queen._api_overview(uuid)', 'queen_reader', 'invoker'],
		['queen._api_groupings(uuid,boolean)', 'queen_reader', 'invoker'],
		['queen._api_consumer_groups(uuid)', 'queen_reader', 'invoker'],
		['queen._api_lagging(uuid,integer,integer)', 'queen_reader', 'invoker'],
		['queen._api_consumer_group(uuid,text,integer)', 'queen_reader', 'invoker'],
		['queen._api_status(uuid,text,text,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_queue_ops(uuid,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_queue_lag(uuid,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_retention(uuid,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_analytics(uuid,text,text,text,timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_message(uuid,uuid,text)', 'queen_reader', 'invoker'],
		['queen._api_messages(uuid,text,text,text,integer,bigint)', 'queen_reader', 'invoker'],
		['queen._api_worker_metrics(timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		['queen._api_system_metrics(timestamptz,timestamptz)', 'queen_reader', 'invoker'],
		-- administration
		['queen.configure_queue_v1(jsonb,uuid)', 'queen_admin', 'definer'],
		['queen.delete_queue_v1(text,uuid)', 'queen_admin', 'definer'],
		['queen.delete_consumer_group(text,text,boolean)', 'queen_admin', 'definer'],
		['queen.seek(text,text,boolean,timestamptz,text)', 'queen_admin', 'definer'],
		['queen.set_subscription(text,timestamptz)', 'queen_admin', 'definer'],
		['queen.dlq_purge(text,text)', 'queen_admin', 'definer'],
		['queen.dlq_replay(uuid)', 'queen_admin', 'definer'],
		['queen.dlq_forget(uuid,text)', 'queen_admin', 'definer'],
		['queen.retention_run(integer,integer)', 'queen_admin', 'definer'],
		['queen.dedup_index(integer,integer)', 'queen_admin', 'definer'],
		['queen.stats_refresh(boolean)', 'queen_admin', 'definer']];

	SELECT pg_catalog.string_agg(p.oid::pg_catalog.regprocedure::text, ', ') INTO missing
	  FROM pg_catalog.pg_proc p
	 WHERE p.pronamespace = 'queen'::pg_catalog.regnamespace
	   AND p.oid NOT IN (SELECT map[i][1]::pg_catalog.regprocedure
						   FROM pg_catalog.generate_subscripts(map, 1) AS i);
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'queen: functions without a role in schema/5_roles.sql: %', missing;
	END IF;

	FOREACH fn SLICE 1 IN ARRAY map
	LOOP
		IF fn[2] <> 'public' THEN
			EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC',
									  fn[1]::pg_catalog.regprocedure);
			EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I',
									  fn[1]::pg_catalog.regprocedure, fn[2]);
		END IF;
		-- pg_catalog first, so no operator or function of a caller's schema
		-- can stand in for a built-in; pg_temp last, so no temporary table
		-- can stand in for one of ours
		IF fn[3] = 'definer' THEN
			EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER '
									  'SET search_path = pg_catalog, queen, pg_temp',
									  fn[1]::pg_catalog.regprocedure);
		END IF;
	END LOOP;
END
$$;

GRANT USAGE ON SCHEMA queen TO queen_reader, queen_writer, queen_consumer, queen_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA queen TO queen_reader;

-- The queue options an administrator may change in place (docs/SQL.md);
-- identity, tenancy and retention's own bookkeeping stay the core's.
GRANT UPDATE (namespace, task, priority, lease_time, retry_limit, retry_delay, ttl,
			  dead_letter_queue, dlq_after_max_retries, delayed_processing, window_buffer,
			  retention_seconds, completed_retention_seconds, retention_enabled,
			  encryption_enabled, max_wait_time_seconds, max_queue_size, min_pop_wait_time,
			  dedup_window_seconds, retention_sink_max_seconds)
	ON queen.queues TO queen_admin;
