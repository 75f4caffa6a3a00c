-- The cost of a wildcard pop beside idle partitions (docs/ARCHITECTURE.md,
-- "The claim"): a queue of 1,000 and one of 100,000 partitions that are fully
-- consumed and last written an hour ago, plus 10 active partitions each
-- that get 1,000 messages per round; 50 wildcard pops (batch 10, autoAck)
-- per round and queue.  first_ms is a round's first pop, avg_ms the mean of
-- the 50 after it; the last line forces the 30-second floor recompute (a
-- full scan of the queue's partitions) and times that pop.
--
--   psql -X -d <scratch database with the extension> -f bench/pop-idle.sql
--
-- Creates the queues b.small and b.big (queen.delete_queue_v1 removes them).
CREATE FUNCTION pg_temp.mkqueue(qname text, nidle int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE qid uuid;
BEGIN
	INSERT INTO queen.queues (name) VALUES (qname) RETURNING id INTO qid;
	INSERT INTO queen.log_partitions (queue_id, name, last_offset, last_write_at)
	SELECT qid, 'idle-' || i, 0, now() - interval '1 hour' FROM generate_series(1, nidle) i;
	INSERT INTO queen.log_consumers (partition_id, consumer_group, committed)
	SELECT id, '__QUEUE_MODE__', 0 FROM queen.log_partitions WHERE queue_id = qid;
END $$;
CREATE FUNCTION pg_temp.bench(qname text, n int) RETURNS TABLE (first_ms numeric, avg_ms numeric, delivered bigint) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; t1 timestamptz; d bigint := 0; c bigint;
BEGIN
	PERFORM queen.push((SELECT jsonb_agg(jsonb_build_object('queue', qname, 'partition', 'act-' || (i % 10), 'payload', i)) FROM generate_series(0, 999) i));
	t0 := clock_timestamp();
	SELECT count(*) INTO c FROM queen.pop(qname, batch => 10, max_partitions => 1, auto_ack => true);
	d := d + c;
	first_ms := round(extract(epoch FROM clock_timestamp() - t0)::numeric * 1000, 2);
	t1 := clock_timestamp();
	FOR i IN 1..n LOOP
		SELECT count(*) INTO c FROM queen.pop(qname, batch => 10, max_partitions => 1, auto_ack => true);
		d := d + c;
	END LOOP;
	avg_ms := round(extract(epoch FROM clock_timestamp() - t1)::numeric * 1000 / n, 3);
	delivered := d;
	RETURN NEXT;
END $$;
SELECT pg_temp.mkqueue('b.small', 1000);
SELECT pg_temp.mkqueue('b.big', 100000);
ANALYZE queen.log_partitions; ANALYZE queen.log_consumers;
SELECT * FROM pg_temp.bench('b.small', 50);
SELECT * FROM pg_temp.bench('b.big', 50);
SELECT * FROM pg_temp.bench('b.small', 50);
SELECT * FROM pg_temp.bench('b.big', 50);
CREATE FUNCTION pg_temp.recompute(qname text) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz;
BEGIN
	UPDATE queen.consumer_watermarks SET updated_at = now() - interval '1 minute'
	 WHERE queue_id = (SELECT id FROM queen.queues WHERE name = qname);
	t0 := clock_timestamp();
	PERFORM count(*) FROM queen.pop(qname, batch => 10, max_partitions => 1, auto_ack => true);
	RETURN round(extract(epoch FROM clock_timestamp() - t0)::numeric * 1000, 2);
END $$;
SELECT pg_temp.recompute('b.small') AS small_recompute_ms, pg_temp.recompute('b.big') AS big_recompute_ms;
