-- scripts/test runs this whole directory twice: on a cluster that preloads
-- queen (shared_preload_libraries, as one that runs the HTTP broker does)
-- and on one that does not (a managed PostgreSQL, or a team that only wants
-- the SQL door).  Every other file expects the same output from both runs.
-- What differs between the two is here, written as assertions that print
-- the same in both runs, each saying which run expects what.

-- The library is not loaded yet in this session when it is not preloaded:
-- LOAD runs _PG_init here.  (It used to end the session with FATAL: cannot
-- create PGC_POSTMASTER variables after startup.)
LOAD 'queen';

SELECT current_setting('shared_preload_libraries') ~ '(^|[\s,])"?queen"?($|[\s,])' AS preloaded \gset
-- scripts/test names the run it intended (qtest.preloaded), so a run that
-- silently preloaded, or did not, fails here; on another server (make
-- installcheck) the cluster is taken as it is.
SELECT coalesce(current_setting('qtest.preloaded', true)::bool, :'preloaded') = :'preloaded' AS the_intended_run;

-- The settings the SQL door reads are session settings in both runs.
SELECT name, setting, context FROM pg_settings
 WHERE name IN ('queen.zstd_level', 'queen.dedup_cache_mb', 'queen.tenant')
 ORDER BY name;

-- The broker's layout, addresses and spool are fixed at postmaster start
-- when preloaded.  A library loaded by a session may not define such a
-- setting, and runs no broker, so there they are reload settings nothing
-- reads: a postgresql.conf written for the broker still loads.
SELECT name,
       context = CASE WHEN :'preloaded' THEN 'postmaster' ELSE 'sighup' END AS context_as_expected
  FROM pg_settings
 WHERE name IN ('queen.database', 'queen.http_listen_address', 'queen.http_port',
                'queen.http_workers', 'queen.fusion_shards', 'queen.push_permits_initial',
                'queen.spool_directory')
 ORDER BY name;
-- In both runs a session cannot change them, only the message differs
-- ("without restarting the server" against "now"); the SQLSTATE does not.
SELECT left(qtest.expect_error('SET queen.http_port = 7000'), 5) AS set_broker_setting;
SELECT left(qtest.expect_error('SET queen.database = ''elsewhere'''), 5) AS set_broker_database;

-- The prefix is reserved in both runs: a misspelt setting is an error, not
-- silently accepted.
SELECT qtest.expect_error('SET queen.zstd_levl = 5') AS misspelt;

-- The SQL door works the same in both: a push and a read in this session.
SELECT status, log_offset FROM queen.push('modes.q', '{"run": "either"}', 'p', 'modes-1');
SELECT log_offset, payload, transaction_id FROM queen.read('modes.q', 'p');
SELECT status FROM queen.push('modes.q', '{"run": "either"}', 'p', 'modes-1');
