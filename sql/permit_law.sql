-- The broker's push permit law (src/broker/permits.c, docs/ARCHITECTURE.md), replayed
-- over made-up series of bundles, ten a second for a minute.  Beside it runs the
-- textbook law (Vegas on whole round trips) that Queen's broker used.

-- Replay with bounds 2..16, starting at 8; show where both laws end and how low ours went.
CREATE FUNCTION pg_temp.replay(inflight int[], segments int[], exec_us int8[], commit_us int8[])
RETURNS TABLE (ours_final int, ours_lowest int, naive_final int) LANGUAGE sql AS $$
	SELECT (array_agg(permit_limit ORDER BY sample DESC))[1], min(permit_limit),
	       (array_agg(naive_limit ORDER BY sample DESC))[1]
	  FROM queen._permit_law_replay(2, 8, 16, inflight, segments, exec_us, commit_us)
$$;

-- 1. WAL-bound: the statements take the same time whatever the load, but once many
--    bundles are in flight each COMMIT waits for the others' WAL flush (group commit):
--    the round trip rises from 2 ms to 12.8 ms while throughput rises too.  The textbook
--    law reads that as queueing and stops near beta (6); ours grows to the maximum.
SELECT * FROM pg_temp.replay(
	(SELECT array_agg(16) FROM generate_series(1, 600)),
	(SELECT array_agg(8) FROM generate_series(1, 600)),
	(SELECT array_agg(800::int8) FROM generate_series(1, 600)),
	(SELECT array_agg(CASE WHEN i <= 10 THEN 1200 ELSE 12000 END::int8) FROM generate_series(1, 600) i));

-- 2. CPU-bound: the statements themselves slow down fivefold under load (bundles queue
--    for cores): ours backs off as well.
SELECT * FROM pg_temp.replay(
	(SELECT array_agg(16) FROM generate_series(1, 600)),
	(SELECT array_agg(8) FROM generate_series(1, 600)),
	(SELECT array_agg(CASE WHEN i <= 10 THEN 800 ELSE 4000 END::int8) FROM generate_series(1, 600) i),
	(SELECT array_agg(1200::int8) FROM generate_series(1, 600)));

-- 3. Bundles that grow under load take longer for no fault of contention: one segment
--    in 350 us, then sixteen in 1100 us.  Each is compared with bundles of its own
--    size, so ours does not back off.
SELECT * FROM pg_temp.replay(
	(SELECT array_agg(16) FROM generate_series(1, 600)),
	(SELECT array_agg(CASE WHEN i <= 100 THEN 1 ELSE 16 END) FROM generate_series(1, 600) i),
	(SELECT array_agg(CASE WHEN i <= 100 THEN 350 ELSE 1100 END::int8) FROM generate_series(1, 600) i),
	(SELECT array_agg(1200::int8) FROM generate_series(1, 600)));

-- 4. The limit does not bind (one bundle in flight): neither law moves.
SELECT * FROM pg_temp.replay(
	(SELECT array_agg(1) FROM generate_series(1, 600)),
	(SELECT array_agg(8) FROM generate_series(1, 600)),
	(SELECT array_agg(CASE WHEN i <= 10 THEN 800 ELSE 4000 END::int8) FROM generate_series(1, 600) i),
	(SELECT array_agg(12000::int8) FROM generate_series(1, 600)));

-- bad input
SELECT * FROM queen._permit_law_replay(2, 8, 16, '{1,2}', '{1}', '{1}', '{1}');
SELECT * FROM queen._permit_law_replay(0, 8, 16, '{1}', '{1}', '{1}', '{1}');
