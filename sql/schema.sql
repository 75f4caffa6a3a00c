-- The storage schema: tables, columns, defaults, indexes, storage parameters.

SELECT extname, extversion, extnamespace::regnamespace FROM pg_extension WHERE extname = 'queen';

SELECT table_name, column_name, data_type, column_default, is_nullable
  FROM information_schema.columns
 WHERE table_schema = 'queen'
 ORDER BY table_name, ordinal_position;

SELECT tablename, indexname, indexdef FROM pg_indexes
 WHERE schemaname = 'queen' ORDER BY tablename, indexname;

SELECT conrelid::regclass AS tab, conname, pg_get_constraintdef(oid)
  FROM pg_constraint
 WHERE connamespace = 'queen'::regnamespace AND contype IN ('f', 'c')
 ORDER BY 1, 2;

-- storage parameters, including the TOAST table's
SELECT c.relname, c.reloptions, t.reloptions AS toast_reloptions
  FROM pg_class c LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
 WHERE c.relnamespace = 'queen'::regnamespace AND c.relkind = 'r'
 ORDER BY 1;

-- compressed and random bytes are stored without a second compression attempt
SELECT attrelid::regclass, attname, attstorage FROM pg_attribute
 WHERE attrelid IN ('queen.log_segments'::regclass, 'queen.log_txns'::regclass,
                    'queen.log_dedup'::regclass)
   AND attname IN ('blob', 'hashes', 'keys') ORDER BY attname;

-- the SQL surface
SELECT p.oid::regprocedure AS function, pg_get_function_result(p.oid) AS returns,
       p.provolatile, l.lanname
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'queen'::regnamespace
 ORDER BY p.oid::regprocedure::text;

-- settings (nothing above called queen: without preloading, a session knows
-- queen's settings once it has loaded the library, by LOAD or a first call)
LOAD 'queen';
SHOW queen.zstd_level;
SHOW queen.tenant;
SET queen.tenant = 'not-a-uuid';
SET queen.zstd_level = 0;
SET queen.no_such_setting = 1;

-- The internal functions only the tests call belong to the test-only
-- extension (test/queen_test--1.0.sql), never to queen's own script;
-- _dlq_list, under queen.dlq, is queen's.
SELECT e.extname, p.proname
  FROM pg_depend d
  JOIN pg_extension e ON e.oid = d.refobjid
  JOIN pg_proc p ON p.oid = d.objid
 WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass
   AND d.deptype = 'e' AND p.proname IN ('_parse_push_body', '_permit_law_replay', '_dlq_list')
 ORDER BY p.proname;
