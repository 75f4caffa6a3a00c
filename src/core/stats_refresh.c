/*-------------------------------------------------------------------------
 *
 * stats_refresh.c
 *	  queen.stats_refresh(): the figures per queue and per (queue, consumer
 *	  group) in queen.queue_stats and queen.group_stats, kept up to date by
 *	  reading only what may have changed since the last refresh, so that an
 *	  idle partition costs a refresh nothing; and the marks (queen.stats_marks)
 *	  by which the paths that change a partition's or a cursor's figures
 *	  without stamping the partition tell the next refresh to read it.
 *
 * The figures are sums over partitions and cursors.  queen.stats_partitions
 * and queen.stats_cursors keep what each counted for when a refresh last
 * read it, and queen.stats_totals the sums; a refresh reads a partition
 * again, and adds the difference to the sums, when it may have changed:
 *   - written since the last refresh: a push stamps last_write_at, and
 *     every write the last refresh could not see is stamped at or after the
 *     write horizon it took first (write_horizon.c);
 *   - marked: retention moving a partition's start or removing it, a
 *     cursor's creation (stats marks below); and a whole queue when its
 *     groups change (a seek, a subscription, a group's deletion, the
 *     queue's deletion), or a group not counted yet appears on it: the
 *     queue is counted again, partition by partition;
 *   - live: something pending or leased for one of its queue's groups.
 *     Those figures move with acks, leases and time without any stamp, so
 *     they are summed afresh over the live partitions at every refresh.
 * A partition that is none of these had nothing pending for any group when
 * last read, and nothing else changes its figures: an ack needs something
 * pending, a claim too.  Reading a partition again when nothing changed is
 * harmless (the difference is nothing), so a refresh may read more than it
 * must, never less.  A full pass (the first, one asked for, one without a
 * horizon, and one an hour after the last) reads every partition and
 * recomputes the sums, so that a row written outside the core (which marks
 * nothing) is counted within the hour.
 *
 * One refresh at a time (an advisory lock; the others wait), in the
 * caller's transaction; plain reads of the log's bookkeeping, so no push or
 * pop waits for it.  The statements are planned for each call with their
 * arguments: whether a read is a few partitions or all of them is known
 * only then.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "admin.h"
#include "log_write.h"
#include "spi.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

/* a full pass at the latest this long after the last */
#define QUEEN_STATS_FULL_EVERY_SECS		3600

/*
 * What partition p holds that consumer group g has not acknowledged, with
 * c its cursor there (NULL columns when it has none) and m its
 * subscription on the queue: queen.consumer_lag's count.
 */
#define QUEEN_STATS_PENDING \
	"GREATEST(p.last_offset - GREATEST(coalesce(c.committed," \
	"   CASE WHEN m.subscription_mode IS NULL OR m.subscription_mode = 'all' THEN -1" \
	"        ELSE coalesce((SELECT s.base_offset - 1 FROM queen.log_segments s" \
	"                        WHERE s.partition_id = p.id" \
	"                          AND s.created_at >= m.subscription_timestamp" \
	"                        ORDER BY s.base_offset LIMIT 1), p.last_offset) END)," \
	"   p.log_start - 1), 0)"

#define QUEEN_STATS_SUBSCRIPTION(queue, group) \
	" LEFT JOIN queen.consumer_groups_metadata m" \
	"   ON m.queue_id = " queue " AND m.consumer_group = " group \
	"  AND m.partition_name = '' AND m.namespace IS NULL AND m.task IS NULL"

/* the queues a refresh counts again, whole: $4 */
#define QUEEN_STATS_RECOUNT \
	"WITH r AS (SELECT unnest($4::uuid[]) AS queue_id)"

/*
 * Read the partitions cand lists (those pfilter and sfilter keep): np
 * and nc what they and their cursors hold now, op and oc what they were
 * counted for; the counted rows that differ replaced (a full pass writes
 * only what changed), those gone removed (found first: a delete joined to
 * every counted row of a million partitions took 13 s).  Every CTE reads
 * the rows as they were before the statement.  A partition is live when
 * something is pending there for one of its queue's groups, or leased.
 */
#define QUEEN_STATS_READ(cand, pfilter, sfilter) \
	" cand AS (" cand ")," \
	" np AS (SELECT p.id, p.queue_id, p.last_offset, p.log_start" \
	"          FROM cand JOIN queen.log_partitions p ON p.id = cand.id WHERE " pfilter ")," \
	" op AS (SELECT s.* FROM cand JOIN queen.stats_partitions s ON s.partition_id = cand.id" \
	"         WHERE " sfilter ")," \
	" nc AS (SELECT p.queue_id, c.partition_id, c.consumer_group, c.total_consumed AS consumed" \
	"          FROM np p JOIN queen.log_consumers c ON c.partition_id = p.id" \
	"          JOIN queen.stats_totals t ON t.queue_id = p.queue_id AND t.consumer_group = c.consumer_group)," \
	" oc AS (SELECT s.* FROM op JOIN queen.stats_cursors s ON s.partition_id = op.partition_id)," \
	" live AS (SELECT p.id FROM np p" \
	"            JOIN queen.stats_totals g ON g.queue_id = p.queue_id AND g.consumer_group <> ''" \
	"            LEFT JOIN queen.log_consumers c" \
	"              ON c.partition_id = p.id AND c.consumer_group = g.consumer_group" \
	QUEEN_STATS_SUBSCRIPTION("p.queue_id", "g.consumer_group") \
	"           WHERE " QUEEN_STATS_PENDING " > 0" \
	"          UNION SELECT c.partition_id FROM np p JOIN queen.log_consumers c ON c.partition_id = p.id" \
	"           WHERE c.lease_expires_at > now())," \
	" lv AS (SELECT p.*, p.id IN (SELECT id FROM live) AS live FROM np p)," \
	" w1 AS (INSERT INTO queen.stats_partitions AS s" \
	"        SELECT id, queue_id, last_offset, log_start, live FROM lv" \
	"         WHERE NOT EXISTS (SELECT 1 FROM op WHERE op.partition_id = lv.id" \
	"                              AND op.last_offset = lv.last_offset AND op.log_start = lv.log_start" \
	"                              AND op.live = lv.live)" \
	"        ON CONFLICT (partition_id) DO UPDATE" \
	"           SET last_offset = EXCLUDED.last_offset, log_start = EXCLUDED.log_start," \
	"               live = EXCLUDED.live)," \
	" pg AS MATERIALIZED (SELECT partition_id FROM op" \
	"                      WHERE NOT EXISTS (SELECT 1 FROM np WHERE np.id = op.partition_id))," \
	" w2 AS (DELETE FROM queen.stats_partitions s USING pg WHERE s.partition_id = pg.partition_id)," \
	" w3 AS (INSERT INTO queen.stats_cursors AS s" \
	"        SELECT partition_id, consumer_group, queue_id, consumed FROM nc" \
	"         WHERE NOT EXISTS (SELECT 1 FROM oc WHERE oc.partition_id = nc.partition_id" \
	"                              AND oc.consumer_group = nc.consumer_group" \
	"                              AND oc.consumed = nc.consumed)" \
	"        ON CONFLICT (partition_id, consumer_group) DO UPDATE SET consumed = EXCLUDED.consumed)," \
	" cg AS MATERIALIZED (SELECT partition_id, consumer_group FROM oc" \
	"                      WHERE NOT EXISTS (SELECT 1 FROM nc WHERE nc.partition_id = oc.partition_id" \
	"                                                           AND nc.consumer_group = oc.consumer_group))," \
	" w4 AS (DELETE FROM queen.stats_cursors s USING cg" \
	"         WHERE s.partition_id = cg.partition_id AND s.consumer_group = cg.consumer_group)"

typedef enum QueenStatsStep
{
	ST_LOCK,
	ST_STATE,
	ST_MARKED,
	ST_CHANGED,
	ST_NEW_GROUPS,
	ST_RECOUNT_FORGET,
	ST_RECOUNT_GROUPS,
	ST_COUNT,
	ST_COUNT_WHOLE,
	ST_RECOUNT_SUMS,
	ST_QUEUES,
	ST_QUEUES_FILL,
	ST_GROUPS,
	ST_GROUPS_FILL,
	ST_HISTORY,
	ST_TRIM,
	ST_STATE_SAVE,
	ST_COUNT_STEPS
} QueenStatsStep;

typedef struct QueenStatsStmt
{
	const char *sql;
	int			expected;		/* SPI_OK_* */
} QueenStatsStmt;

/*
 * $1: a full pass (boolean); $2: read the partitions stamped since
 * (timestamptz); $3: the partitions to read (uuid[]); $4: the queues to
 * count whole (uuid[]).  The two lists are arguments, not a table, so that
 * each statement is planned knowing how few they are.
 */
static const QueenStatsStmt queen_stats_stmts[ST_COUNT_STEPS] = {
	[ST_LOCK] = {"SELECT pg_advisory_xact_lock(hashtext('queen.stats_refresh'))", SPI_OK_SELECT},
	[ST_STATE] = {"SELECT since, full_at < now() - make_interval(secs => "
		CppAsString2(QUEEN_STATS_FULL_EVERY_SECS) ") OR full_at IS NULL"
		"  FROM queen.stats_state WHERE id = 1", SPI_OK_SELECT},

	/*
	 * The marks, consumed: read in this statement's snapshot, so every
	 * change they stand for is seen by the statements after it.  The
	 * marked partitions ($3), and the queues to count whole ($4): every one
	 * on a full pass, those marked, those never counted, those a
	 * subscription names a group on that is not counted there yet.
	 */
	[ST_MARKED] = {
		"WITH m AS (DELETE FROM queen.stats_marks RETURNING queue_id, partition_id)"
		" SELECT ARRAY(SELECT DISTINCT partition_id FROM m WHERE partition_id IS NOT NULL),"
		"  ARRAY(SELECT queue_id FROM m WHERE partition_id IS NULL AND queue_id IS NOT NULL"
		"        UNION SELECT id FROM queen.queues WHERE $1"
		"        UNION SELECT queue_id FROM queen.stats_totals WHERE $1"
		"        UNION SELECT q.id FROM queen.queues q"
		"               WHERE NOT EXISTS (SELECT 1 FROM queen.stats_totals t"
		"                                  WHERE t.queue_id = q.id AND t.consumer_group = '')"
		"        UNION SELECT g.queue_id FROM queen.consumer_groups_metadata g"
		"               WHERE g.queue_id IS NOT NULL"
		"                 AND NOT EXISTS (SELECT 1 FROM queen.stats_totals t"
		"                                  WHERE t.queue_id = g.queue_id"
		"                                    AND t.consumer_group = g.consumer_group))",
	SPI_OK_SELECT},
	/* with those written since the last refresh's horizon, and the live */
	[ST_CHANGED] = {
		"SELECT ARRAY(SELECT p.id FROM queen.queues q"
		"              CROSS JOIN LATERAL (SELECT p.id FROM queen.log_partitions p"
		"                                   WHERE p.queue_id = q.id AND p.last_write_at >= $2) p"
		"             UNION SELECT s.partition_id FROM queen.stats_partitions s WHERE s.live"
		"             UNION SELECT unnest($3::uuid[]))",
	SPI_OK_SELECT},
	/* a cursor of a group its queue's sums do not keep: the queue whole */
	[ST_NEW_GROUPS] = {
		"SELECT ARRAY(SELECT unnest($4::uuid[])"
		"             UNION SELECT p.queue_id FROM unnest($3::uuid[]) w(id)"
		"               JOIN queen.log_partitions p ON p.id = w.id"
		"               JOIN queen.log_consumers c ON c.partition_id = p.id"
		"              WHERE NOT EXISTS (SELECT 1 FROM queen.stats_totals t"
		"                                 WHERE t.queue_id = p.queue_id"
		"                                   AND t.consumer_group = c.consumer_group))",
	SPI_OK_SELECT},
	[ST_RECOUNT_FORGET] = {
		QUEEN_STATS_RECOUNT
		" DELETE FROM queen.stats_totals t USING r WHERE t.queue_id = r.queue_id",
	SPI_OK_DELETE},
	/* the groups kept per queue, as queen.consumer_lag lists them */
	[ST_RECOUNT_GROUPS] = {
		QUEEN_STATS_RECOUNT
		" INSERT INTO queen.stats_totals (queue_id, consumer_group, partitions, messages, pushed, consumed)"
		" SELECT g.queue_id, g.consumer_group, 0, 0, 0, 0 FROM ("
		"   SELECT q.id AS queue_id, ''::text AS consumer_group"
		"     FROM r JOIN queen.queues q ON q.id = r.queue_id"
		"   UNION"
		"   SELECT p.queue_id, c.consumer_group"
		"     FROM r JOIN queen.log_partitions p ON p.queue_id = r.queue_id"
		"     JOIN queen.log_consumers c ON c.partition_id = p.id"
		"   UNION"
		"   SELECT m.queue_id, m.consumer_group"
		"     FROM r JOIN queen.consumer_groups_metadata m ON m.queue_id = r.queue_id"
		"   UNION"
		"   SELECT q.id, '__QUEUE_MODE__' FROM r JOIN queen.queues q ON q.id = r.queue_id"
		"    WHERE NOT EXISTS (SELECT 1 FROM queen.log_partitions p JOIN queen.log_consumers c"
		"                          ON c.partition_id = p.id WHERE p.queue_id = q.id)"
		"      AND NOT EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m WHERE m.queue_id = q.id)"
		" ) g",
	SPI_OK_INSERT},

	/* the partitions read of queues not counted whole: the differences added */
	[ST_COUNT] = {
		"WITH " QUEEN_STATS_READ("SELECT unnest($3::uuid[]) AS id",
								 "p.queue_id <> ALL($4::uuid[])", "s.queue_id <> ALL($4::uuid[])") ","
		" d AS (SELECT queue_id, consumer_group, sum(n) AS n, sum(messages) AS messages,"
		"              sum(pushed) AS pushed, sum(consumed) AS consumed FROM ("
		"         SELECT queue_id, ''::text AS consumer_group, 1 AS n,"
		"                last_offset - log_start + 1 AS messages, last_offset + 1 AS pushed, 0 AS consumed FROM np"
		"         UNION ALL SELECT queue_id, '', -1, -(last_offset - log_start + 1), -(last_offset + 1), 0 FROM op"
		"         UNION ALL SELECT queue_id, consumer_group, 1, 0, 0, consumed FROM nc"
		"         UNION ALL SELECT queue_id, consumer_group, -1, 0, 0, -consumed FROM oc) x"
		"        GROUP BY queue_id, consumer_group)"
		" UPDATE queen.stats_totals t"
		"    SET partitions = t.partitions + d.n, messages = t.messages + d.messages,"
		"        pushed = t.pushed + d.pushed, consumed = t.consumed + d.consumed"
		"   FROM d WHERE t.queue_id = d.queue_id AND t.consumer_group = d.consumer_group"
		"    AND (d.n, d.messages, d.pushed, d.consumed) <> (0, 0, 0, 0)",
	SPI_OK_UPDATE},
	/* every partition of the queues counted whole, and every row counted of them */
	[ST_COUNT_WHOLE] = {
		QUEEN_STATS_RECOUNT ","
		QUEEN_STATS_READ("SELECT p.id FROM r JOIN queen.log_partitions p ON p.queue_id = r.queue_id"
						 " UNION SELECT s.partition_id FROM r"
						 "   JOIN queen.stats_partitions s ON s.queue_id = r.queue_id", "true", "true")
		" SELECT 1",
	SPI_OK_SELECT},
	/* a queue counted whole: its sums from its counted rows */
	[ST_RECOUNT_SUMS] = {
		QUEEN_STATS_RECOUNT
		" UPDATE queen.stats_totals t"
		"    SET partitions = x.n, messages = x.messages, pushed = x.pushed, consumed = x.consumed"
		"   FROM (SELECT r.queue_id, ''::text AS consumer_group, count(s.partition_id) AS n,"
		"                coalesce(sum(s.last_offset - s.log_start + 1), 0) AS messages,"
		"                coalesce(sum(s.last_offset + 1), 0) AS pushed, 0 AS consumed"
		"           FROM r LEFT JOIN queen.stats_partitions s ON s.queue_id = r.queue_id"
		"          GROUP BY r.queue_id"
		"         UNION ALL"
		"         SELECT g.queue_id, g.consumer_group, count(c.partition_id), 0, 0,"
		"                coalesce(sum(c.consumed), 0)"
		"           FROM r JOIN queen.stats_totals g ON g.queue_id = r.queue_id AND g.consumer_group <> ''"
		"           LEFT JOIN queen.stats_cursors c"
		"             ON c.queue_id = g.queue_id AND c.consumer_group = g.consumer_group"
		"          GROUP BY g.queue_id, g.consumer_group) x"
		"  WHERE t.queue_id = x.queue_id AND t.consumer_group = x.consumer_group",
	SPI_OK_UPDATE},

	/*
	 * Per queue: the sums, what one index probe each finds, and the dead
	 * letters (a read of them all, by partition first, so that only the
	 * partitions holding some are looked up).
	 */
	[ST_QUEUES] = {"DELETE FROM queen.queue_stats", SPI_OK_DELETE},
	[ST_QUEUES_FILL] = {
		"INSERT INTO queen.queue_stats"
		" SELECT q.id, coalesce(t.partitions, 0), coalesce(t.messages, 0), coalesce(t.pushed, 0),"
		"        coalesce(d.n, 0),"
		"        (SELECT min(p.oldest_live_at) FROM queen.log_partitions p WHERE p.queue_id = q.id),"
		"        (SELECT max(p.last_write_at) FROM queen.log_partitions p WHERE p.queue_id = q.id),"
		"        now()"
		"   FROM queen.queues q"
		"   LEFT JOIN queen.stats_totals t ON t.queue_id = q.id AND t.consumer_group = ''"
		"   LEFT JOIN (SELECT p.queue_id, sum(x.n)::bigint AS n"
		"                FROM (SELECT partition_id, count(*) AS n FROM queen.log_dlq"
		"                       GROUP BY partition_id) x"
		"                JOIN queen.log_partitions p ON p.id = x.partition_id"
		"               GROUP BY p.queue_id) d ON d.queue_id = q.id",
	SPI_OK_INSERT},
	[ST_GROUPS] = {"DELETE FROM queen.group_stats", SPI_OK_DELETE},
	/* per group: the sums, and the live partitions' figures afresh */
	[ST_GROUPS_FILL] = {
		"INSERT INTO queen.group_stats"
		" SELECT t.queue_id, t.consumer_group, t.partitions, coalesce(l.partitions_pending, 0),"
		"        coalesce(l.pending, 0), coalesce(l.leased, 0), coalesce(l.leases, 0), t.consumed,"
		"        l.oldest_pending_at, m.subscription_mode, m.subscription_timestamp, now()"
		"   FROM queen.stats_totals t"
		"   JOIN queen.queues q ON q.id = t.queue_id"
		QUEEN_STATS_SUBSCRIPTION("t.queue_id", "t.consumer_group")
		"   LEFT JOIN LATERAL ("
		"     SELECT count(*) FILTER (WHERE x.pending > 0) AS partitions_pending,"
		"            sum(x.pending)::bigint AS pending, sum(x.leased)::bigint AS leased,"
		"            count(*) FILTER (WHERE x.leased > 0) AS leases,"
		"            min(x.oldest_pending_at) AS oldest_pending_at"
		"       FROM queen.stats_partitions sp"
		"       JOIN queen.log_partitions p ON p.id = sp.partition_id"
		"       LEFT JOIN queen.log_consumers c"
		"         ON c.partition_id = p.id AND c.consumer_group = t.consumer_group"
		"      CROSS JOIN LATERAL (SELECT " QUEEN_STATS_PENDING " AS pending,"
		"             CASE WHEN c.lease_expires_at > now() THEN c.batch_end - c.committed"
		"                  ELSE 0 END AS leased,"
		"             CASE WHEN c.partition_id IS NOT NULL"
		"                   AND p.last_offset > GREATEST(c.committed, p.log_start - 1) THEN"
		"                 (SELECT s.created_at FROM queen.log_segments s"
		"                   WHERE s.partition_id = p.id"
		"                     AND s.base_offset <= GREATEST(c.committed + 1, p.log_start)"
		"                   ORDER BY s.base_offset DESC LIMIT 1) END AS oldest_pending_at) x"
		"      WHERE sp.queue_id = t.queue_id AND sp.live) l ON true"
		"  WHERE t.consumer_group <> ''",
	SPI_OK_INSERT},
	/*
	 * A minute's figures per queue (the last refresh in the minute wins);
	 * none when nothing changed since the queue's last row.
	 */
	[ST_HISTORY] = {
		"INSERT INTO queen.stats_history AS h"
		" SELECT date_trunc('minute', now()), s.queue_id, s.pushed,"
		"        coalesce(g.consumed, 0), s.messages, coalesce(g.pending, 0), coalesce(g.leased, 0),"
		"        s.dead_letters, s.partitions, coalesce(g.max_lag, 0)"
		"   FROM queen.queue_stats s"
		"   LEFT JOIN LATERAL ("
		"     SELECT max(x.consumed) AS consumed, max(x.pending) AS pending, sum(x.leased) AS leased,"
		"            max(extract(epoch FROM now() - x.oldest_pending_at))::bigint AS max_lag"
		"       FROM queen.group_stats x WHERE x.queue_id = s.queue_id) g ON true"
		"   LEFT JOIN LATERAL ("
		"     SELECT l.* FROM queen.stats_history l WHERE l.queue_id = s.queue_id"
		"      ORDER BY l.bucket DESC LIMIT 1) l ON true"
		"  WHERE l.queue_id IS NULL OR l.bucket = date_trunc('minute', now())"
		"     OR (l.pushed, l.consumed, l.messages, l.pending, l.leased, l.dead_letters, l.partitions)"
		"        IS DISTINCT FROM (s.pushed, coalesce(g.consumed, 0), s.messages, coalesce(g.pending, 0),"
		"                          coalesce(g.leased, 0)::bigint, s.dead_letters, s.partitions)"
		"     OR (coalesce(g.pending, 0) > 0 AND l.max_lag_seconds <> coalesce(g.max_lag, 0))"
		" ON CONFLICT (bucket, queue_id) DO UPDATE"
		"    SET pushed = EXCLUDED.pushed, consumed = EXCLUDED.consumed, messages = EXCLUDED.messages,"
		"        pending = EXCLUDED.pending, leased = EXCLUDED.leased,"
		"        dead_letters = EXCLUDED.dead_letters, partitions = EXCLUDED.partitions,"
		"        max_lag_seconds = EXCLUDED.max_lag_seconds",
	SPI_OK_INSERT},
	[ST_TRIM] = {
		"WITH k AS (SELECT now() - make_interval(days => coalesce(nullif("
		"              current_setting('queen.stats_history_days', true), '')::int, 7)) AS before),"
		" a AS (DELETE FROM queen.stats_history h USING k WHERE h.bucket < k.before),"
		" b AS (DELETE FROM queen.retention_history h USING k WHERE h.bucket < k.before)"
		" DELETE FROM queen.broker_history h USING k WHERE h.bucket < k.before",
	SPI_OK_DELETE},
	[ST_STATE_SAVE] = {
		"INSERT INTO queen.stats_state AS s (id, since, full_at)"
		" VALUES (1, $2, CASE WHEN $1 THEN now() END)"
		" ON CONFLICT (id) DO UPDATE"
		"    SET since = EXCLUDED.since, full_at = coalesce(EXCLUDED.full_at, s.full_at)",
	SPI_OK_INSERT},
};

static void
queen_stats_step(QueenStatsStep step, Datum *values, const char *nulls)
{
	static Oid	types[4] = {BOOLOID, TIMESTAMPTZOID, UUIDARRAYOID, UUIDARRAYOID};
	const QueenStatsStmt *s = &queen_stats_stmts[step];
	int			rc;

	rc = SPI_execute_with_args(s->sql, 4, types, values, nulls, false, 0);
	if (rc != s->expected)
		elog(ERROR, "queen: stats refresh step %d failed: %s", (int) step,
			 SPI_result_code_string(rc));
}

/* Column col of the step's one row, an array, copied out of its result. */
static Datum
queen_stats_list(int col, bool *empty)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	ArrayType  *a = DatumGetArrayTypePCopy(d);

	*empty = ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)) == 0;
	return PointerGetDatum(a);
}

/*
 * Refresh the figures, every tenant's, and this minute's history; a full
 * pass when full, or when the last refresh's horizon, or this one's, is
 * not known.  *queues and *groups: the rows of queue_stats and group_stats.
 */
void
queen_stats_refresh_run(bool full, int64 *queues, int64 *groups)
{
	Datum		values[4] = {0, 0, 0, 0};
	char		nulls[4] = {' ', 'n', 'n', 'n'};
	TimestampTz horizon;
	bool		isnull;
	bool		no_partitions;
	bool		no_queues;
	int			step;

	queen_spi_connect();
	values[0] = BoolGetDatum(false);
	queen_stats_step(ST_LOCK, values, nulls);
	/* before any statement below takes its snapshot */
	horizon = queen_write_horizon();
	queen_stats_step(ST_STATE, values, nulls);
	if (SPI_processed == 0)
		full = true;
	else
	{
		HeapTuple	t = SPI_tuptable->vals[0];
		Datum		since = SPI_getbinval(t, SPI_tuptable->tupdesc, 1, &isnull);

		if (isnull || DatumGetBool(SPI_getbinval(t, SPI_tuptable->tupdesc, 2, &isnull)))
			full = true;
		else
		{
			values[1] = since;
			nulls[1] = ' ';
		}
	}
	if (horizon == DT_NOBEGIN)
		full = true;
	values[0] = BoolGetDatum(full);

	queen_stats_step(ST_MARKED, values, nulls);
	values[2] = queen_stats_list(1, &no_partitions);
	values[3] = queen_stats_list(2, &no_queues);
	nulls[2] = nulls[3] = ' ';
	if (!full)
	{
		queen_stats_step(ST_CHANGED, values, nulls);
		values[2] = queen_stats_list(1, &no_partitions);
		queen_stats_step(ST_NEW_GROUPS, values, nulls);
		values[3] = queen_stats_list(1, &no_queues);
	}
	for (step = ST_RECOUNT_FORGET; step < ST_STATE_SAVE; step++)
	{
		/* nothing to read, nothing to count again: no statement to plan */
		if (no_queues && (step == ST_RECOUNT_FORGET || step == ST_RECOUNT_GROUPS ||
						  step == ST_COUNT_WHOLE || step == ST_RECOUNT_SUMS))
			continue;
		if (no_partitions && step == ST_COUNT)
			continue;
		queen_stats_step(step, values, nulls);
		/* the answer: the rows the two tables were refilled with */
		if (step == ST_QUEUES_FILL)
			*queues = (int64) SPI_processed;
		else if (step == ST_GROUPS_FILL)
			*groups = (int64) SPI_processed;
	}

	/* the next refresh reads what was stamped from this one's horizon on */
	values[1] = TimestampTzGetDatum(horizon);
	nulls[1] = horizon == DT_NOBEGIN ? 'n' : ' ';
	queen_stats_step(ST_STATE_SAVE, values, nulls);
	SPI_finish();
}

/*
 * Stats marks.  A row in queen.stats_marks: a partition the next refresh
 * must read although no push stamped it (queue may be NULL), or a whole
 * queue (partition NULL).  Must be called between SPI_connect and
 * SPI_finish, in the changing transaction.
 */
static QueenStmt queen_stats_mark_stmts[] = {
	{"INSERT INTO queen.stats_marks (queue_id, partition_id) VALUES ($1, $2)", 2,
	{UUIDOID, UUIDOID}, NULL},
	/* the queues (one if named) whose figures keep the tenant's group */
	{"INSERT INTO queen.stats_marks (queue_id)"
		" SELECT DISTINCT t.queue_id FROM queen.stats_totals t JOIN queen.queues q ON q.id = t.queue_id"
		"  WHERE q.tenant_id = $1 AND t.consumer_group = $2 AND ($3::text IS NULL OR q.name = $3)",
	3, {UUIDOID, TEXTOID, TEXTOID}, NULL},
};

/*
 * A 1.1 database, which this library serves until ALTER EXTENSION UPDATE,
 * has no marks to write: its refresh (1.1's) reads every row anyway.
 */
static bool
queen_stats_marks_kept(void)
{
	return OidIsValid(get_relname_relid("stats_marks", get_namespace_oid("queen", false)));
}

void
queen_stats_mark(const pg_uuid_t *queue, const pg_uuid_t *partition)
{
	Datum		values[2];
	char		nulls[2];

	if (!queen_stats_marks_kept())
		return;

	values[0] = queue != NULL ? UUIDPGetDatum(queue) : (Datum) 0;
	nulls[0] = queue != NULL ? ' ' : 'n';
	values[1] = partition != NULL ? UUIDPGetDatum(partition) : (Datum) 0;
	nulls[1] = partition != NULL ? ' ' : 'n';
	queen_stmt_run(&queen_stats_mark_stmts[0], values, nulls, false, SPI_OK_INSERT, "stats mark");
}

/* A group's subscriptions or cursors changed: the queues that count it. */
void
queen_stats_mark_group(const pg_uuid_t *tenant, const char *group, const char *queue)
{
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};

	if (!queen_stats_marks_kept())
		return;
	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(group);
	values[2] = queue != NULL ? CStringGetTextDatum(queue) : (Datum) 0;
	if (queue == NULL)
		nulls[2] = 'n';
	queen_stmt_run(&queen_stats_mark_stmts[1], values, nulls, false, SPI_OK_INSERT,
				   "stats mark");
}
