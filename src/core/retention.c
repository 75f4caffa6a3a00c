/*-------------------------------------------------------------------------
 *
 * retention.c
 *	  Retention: whole segments removed from the start of a partition's log
 *	  once a queue's rules say they may go (reference 6.1, 6.2), one bounded
 *	  step per partition, and the sweep that finds the partitions due.
 *
 * Rule 1 (retentionEnabled, retentionSeconds): a segment created before
 * the cutoff goes, consumed or not; maxWaitTimeSeconds is the same rule
 * with its own cutoff, whether retention is enabled or not (Queen's
 * eviction: unconsumed and leased messages go, with no dead letter), and
 * the later of the two cutoffs applies.  Rule 2 (completedRetentionSeconds): a
 * segment created before its cutoff goes once every consumer row of the
 * partition has committed past its end; a partition nobody consumes keeps
 * it.  created_at rises with the offset in a partition, and so does what
 * is committed, so each rule removes a prefix of the log, and both
 * together the longer prefix.  A step holds the partition row (FOR NO KEY
 * UPDATE, as a push does) for at most max_rows segments, so a push waits
 * for one step at most; the segments go in one ranged DELETE, and
 * log_start moves to the first offset kept, never backwards and never into
 * a segment.  Consumers whose cursor is below log_start resume at the
 * first segment kept (the claim reads from log_start).  The hashes of the
 * segments that go move to log_txns where the dedup window outlives the
 * messages (the hashes' purge is its own).
 *
 * Only partitions that are due are visited: oldest_live_at (the created_at
 * of the first segment kept, indexed per queue) before the queue's
 * cutoff.  An idle partition costs nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "admin.h"
#include "retention.h"
#include "spi.h"
#include "traces.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

enum
{
	QUEEN_RT_LOCK,
	QUEEN_RT_CHOOSE,
	QUEEN_RT_DELETE,
	QUEEN_RT_ADVANCE,
	QUEEN_RT_DUE,
	QUEEN_RT_TXNS_LOCK,
	QUEEN_RT_TXNS_CHOOSE,
	QUEEN_RT_TXNS_DELETE,
	QUEEN_RT_TXNS_ADVANCE,
	QUEEN_RT_RUNS_DELETE,
	QUEEN_RT_TXNS_DUE,
	QUEEN_RT_DLQ_EXPIRE,
	QUEEN_RT_IDLE_DUE,
	QUEEN_RT_IDLE_LOCK,
	QUEEN_RT_IDLE_CONSUMERS,
	QUEEN_RT_IDLE_RUNS,
	QUEEN_RT_IDLE_TXNS,
	QUEEN_RT_IDLE_DELETE,
	QUEEN_RT_HISTORY,
	QUEEN_RT_N
};

/*
 * Partitions idle since the cutoff with nothing left to keep them
 * (reference 6.2, log_partition_dead_v1): no segment and no hash row
 * (both watermarks NULL: what the partial index holds), no dead letter,
 * no stream state, no lease and no consumer activity since.  Oldest
 * first; an empty idle partition that something still keeps is passed
 * over, and only those are, so the cost does not grow with the
 * partitions that hold messages.
 */
#define QUEEN_IDLE_DEAD \
	"p.oldest_live_at IS NULL AND p.oldest_txn_at IS NULL" \
	" AND p.last_write_at < $1 AND p.created_at < $1" \
	" AND NOT EXISTS (SELECT 1 FROM queen.log_dlq d WHERE d.partition_id = p.id)" \
	" AND NOT EXISTS (SELECT 1 FROM queen.stream_state s WHERE s.partition_id = p.id)" \
	" AND NOT EXISTS (SELECT 1 FROM queen.log_consumers c WHERE c.partition_id = p.id" \
	"                  AND (c.worker_id IS NOT NULL OR c.created_at >= $1" \
	"                       OR c.lease_acquired_at >= $1))"


static QueenStmt queen_retention_stmts[QUEEN_RT_N] = {
	[QUEEN_RT_LOCK] = {
		"SELECT p.log_start, (SELECT min(c.committed) FROM queen.log_consumers c"
		"                      WHERE c.partition_id = p.id)"
		"  FROM queen.log_partitions p WHERE p.id = $1 FOR NO KEY UPDATE OF p",
		1, {UUIDOID}, NULL
	},

	/*
	 * The first max_rows + 1 segments from log_start, and how long a prefix
	 * of them the rules let go ($3: rule 1's cutoff, $4: rule 2's, -infinity
	 * when off; $5: the lowest cursor, -1 when nobody consumes).
	 */
	[QUEEN_RT_CHOOSE] = {
		"SELECT base_offset, end_offset, created_at < $3 FROM"
		" (SELECT base_offset, end_offset, created_at,"
		"         bool_and(created_at < $3 OR (created_at < $4 AND end_offset <= $5))"
		"           OVER (ORDER BY base_offset) AS ok"
		"    FROM (SELECT * FROM queen.log_segments"
		"           WHERE partition_id = $1 AND base_offset >= $2"
		"           ORDER BY base_offset LIMIT $6) s) w"
		" WHERE ok ORDER BY base_offset",
		6, {UUIDOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, INT8OID}, NULL
	},
	/*
	 * The segments go; the hashes the dedup window still needs (at or above
	 * txns_start, which this step's lock holds still) move to log_txns,
	 * below every segment kept.
	 */
	[QUEEN_RT_DELETE] = {
		"WITH d AS (DELETE FROM queen.log_segments"
		"            WHERE partition_id = $1 AND base_offset >= $2 AND base_offset <= $3"
		"           RETURNING partition_id, base_offset, end_offset, created_at, hashes)"
		" INSERT INTO queen.log_txns (partition_id, base_offset, end_offset, created_at, hashes)"
		" SELECT d.partition_id, d.base_offset, d.end_offset, d.created_at, d.hashes FROM d"
		"  WHERE d.hashes IS NOT NULL"
		"    AND d.end_offset >= (SELECT txns_start FROM queen.log_partitions WHERE id = $1)",
		3, {UUIDOID, INT8OID, INT8OID}, NULL
	},
	[QUEEN_RT_ADVANCE] = {
		"UPDATE queen.log_partitions SET log_start = $2,"
		"       oldest_live_at = (SELECT s.created_at FROM queen.log_segments s"
		"                          WHERE s.partition_id = $1 AND s.base_offset >= $2"
		"                          ORDER BY s.base_offset LIMIT 1)"
		" WHERE id = $1",
		2, {UUIDOID, INT8OID}, NULL
	},

	/*
	 * Partitions due, oldest first: per queue with a rule on, an index
	 * probe on (queue_id, oldest_live_at).  LEAST skips NULLs: the shorter
	 * of retentionSeconds and maxWaitTimeSeconds is rule 1's age.
	 */
	[QUEEN_RT_DUE] = {
		"SELECT p.id, q.name, p.name,"
		"       now() - make_interval(secs => r.all_s),"
		"       now() - make_interval(secs => r.done_s),"
		"       q.max_wait_time_seconds > 0 AND r.all_s = q.max_wait_time_seconds"
		"       AND NOT (q.retention_enabled AND q.retention_seconds = r.all_s)"
		"  FROM queen.queues q"
		"  CROSS JOIN LATERAL"
		"   (SELECT LEAST(CASE WHEN q.retention_enabled AND q.retention_seconds > 0"
		"                      THEN q.retention_seconds END,"
		"                 CASE WHEN q.max_wait_time_seconds > 0"
		"                      THEN q.max_wait_time_seconds END) AS all_s,"
		"           CASE WHEN q.retention_enabled AND q.completed_retention_seconds > 0"
		"                THEN q.completed_retention_seconds END AS done_s) r"
		"  CROSS JOIN LATERAL"
		"   (SELECT p.id, p.name, p.oldest_live_at FROM queen.log_partitions p"
		"     WHERE p.queue_id = q.id AND p.oldest_live_at IS NOT NULL"
		"       AND p.oldest_live_at < now() - make_interval(secs => LEAST(r.all_s, r.done_s))"
		"     ORDER BY p.oldest_live_at LIMIT $1) p"
		" WHERE r.all_s IS NOT NULL OR r.done_s IS NOT NULL"
		" ORDER BY p.oldest_live_at LIMIT $1",
		1, {INT4OID}, NULL
	},
	[QUEEN_RT_TXNS_LOCK] = {
		"SELECT txns_start FROM queen.log_partitions WHERE id = $1 FOR NO KEY UPDATE",
		1, {UUIDOID}, NULL
	},
	/*
	 * The hash rows of both tables from txns_start, log_txns's below the
	 * segments'; created_at rises with the offset, so the rows before the
	 * cutoff are a prefix of the first $4, and no more are read.
	 */
	[QUEEN_RT_TXNS_CHOOSE] = {
		"SELECT base_offset, end_offset FROM"
		" (SELECT base_offset, end_offset, created_at FROM"
		"   (SELECT base_offset, end_offset, created_at FROM queen.log_txns"
		"     WHERE partition_id = $1 AND base_offset >= $2"
		"    UNION ALL"
		"    SELECT base_offset, end_offset, created_at FROM queen.log_segments"
		"     WHERE partition_id = $1 AND base_offset >= $2) u"
		"   ORDER BY base_offset LIMIT $4) h"
		" WHERE created_at < $3 ORDER BY base_offset",
		4, {UUIDOID, INT8OID, TIMESTAMPTZOID, INT8OID}, NULL
	},
	/*
	 * Hashes that moved to log_txns go; those still in their segment's row
	 * stay with it, below txns_start, where no reader looks for them.
	 */
	[QUEEN_RT_TXNS_DELETE] = {
		"DELETE FROM queen.log_txns"
		" WHERE partition_id = $1 AND base_offset >= $2 AND base_offset <= $3",
		3, {UUIDOID, INT8OID, INT8OID}, NULL
	},
	[QUEEN_RT_TXNS_ADVANCE] = {
		"UPDATE queen.log_partitions SET txns_start = $2,"
		"       oldest_txn_at = COALESCE("
		"         (SELECT t.created_at FROM queen.log_txns t"
		"           WHERE t.partition_id = $1 AND t.base_offset >= $2"
		"           ORDER BY t.base_offset LIMIT 1),"
		"         (SELECT s.created_at FROM queen.log_segments s"
		"           WHERE s.partition_id = $1 AND s.base_offset >= $2"
		"           ORDER BY s.base_offset LIMIT 1))"
		" WHERE id = $1",
		2, {UUIDOID, INT8OID}, NULL
	},
	/* dedup runs wholly below the hashes kept: their hits would find no row */
	[QUEEN_RT_RUNS_DELETE] = {
		"DELETE FROM queen.log_dedup WHERE partition_id = $1 AND run_end < $2",
		2, {UUIDOID, INT8OID}, NULL
	},

	/*
	 * Partitions whose oldest hashes are past every queue's need for them:
	 * its dedup window, completedRetentionSeconds and 15 minutes, whichever
	 * is longest (Queen's txns cutoff), retention enabled or not.
	 */
	[QUEEN_RT_TXNS_DUE] = {
		"SELECT p.id, q.name, p.name, r.cutoff, NULL::timestamptz, false"
		"  FROM queen.queues q"
		"  CROSS JOIN LATERAL"
		"   (SELECT now() - make_interval(secs => GREATEST(q.dedup_window_seconds,"
		"                                              q.completed_retention_seconds, 900))"
		"           AS cutoff) r"
		"  CROSS JOIN LATERAL"
		"   (SELECT p.id, p.name, p.oldest_txn_at FROM queen.log_partitions p"
		"     WHERE p.queue_id = q.id AND p.oldest_txn_at IS NOT NULL"
		"       AND p.oldest_txn_at < r.cutoff"
		"     ORDER BY p.oldest_txn_at LIMIT $1) p"
		" ORDER BY p.oldest_txn_at LIMIT $1",
		1, {INT4OID}, NULL
	},

	/* dead letters older than queen.dlq_retention, a bounded batch */
	/* the oldest; those another transaction holds (a purge, a replay) are skipped, never waited for */
	[QUEEN_RT_DLQ_EXPIRE] = {
		"DELETE FROM queen.log_dlq WHERE id IN"
		" (SELECT id FROM queen.log_dlq WHERE failed_at < $1 ORDER BY failed_at LIMIT $2"
		"   FOR UPDATE SKIP LOCKED)",
		2, {TIMESTAMPTZOID, INT8OID}, NULL
	},

	[QUEEN_RT_IDLE_DUE] = {
		"SELECT p.id, q.name, p.name, $1, NULL::timestamptz, false"
		"  FROM queen.log_partitions p JOIN queen.queues q ON q.id = p.queue_id"
		" WHERE " QUEEN_IDLE_DEAD
		" ORDER BY p.last_write_at LIMIT $2",
		2, {TIMESTAMPTZOID, INT4OID}, NULL
	},
	/* the row a push would wait for, taken only if nobody holds it, and still dead */
	[QUEEN_RT_IDLE_LOCK] = {
		"SELECT 1 FROM queen.log_partitions p WHERE p.id = $2 AND " QUEEN_IDLE_DEAD
		" FOR UPDATE OF p SKIP LOCKED",
		2, {TIMESTAMPTZOID, UUIDOID}, NULL
	},
	/* its cursors (none leased, none recent) before the leaves: the global order */
	[QUEEN_RT_IDLE_CONSUMERS] = {
		"DELETE FROM queen.log_consumers WHERE partition_id = $1",
		1, {UUIDOID}, NULL
	},
	[QUEEN_RT_IDLE_RUNS] = {
		"DELETE FROM queen.log_dedup WHERE partition_id = $1",
		1, {UUIDOID}, NULL
	},
	[QUEEN_RT_IDLE_TXNS] = {
		"DELETE FROM queen.log_txns WHERE partition_id = $1",
		1, {UUIDOID}, NULL
	},
	/* what a step removed, into its minute of queen.retention_history */
	[QUEEN_RT_HISTORY] = {
		"INSERT INTO queen.retention_history AS h"
		" SELECT date_trunc('minute', now()), p.queue_id, $2, $3, $4"
		"   FROM queen.log_partitions p WHERE p.id = $1"
		" ON CONFLICT (bucket, queue_id, rule) DO UPDATE"
		"    SET messages = h.messages + EXCLUDED.messages,"
		"        segments = h.segments + EXCLUDED.segments",
		4, {UUIDOID, TEXTOID, INT8OID, INT8OID}, NULL
	},
	[QUEEN_RT_IDLE_DELETE] = {
		"DELETE FROM queen.log_partitions WHERE id = $1",
		1, {UUIDOID}, NULL
	},
};

/*
 * The rows a choice statement just returned ((base_offset, end_offset) in
 * order, at most max_rows + 1): the first max_rows of them removed by the
 * ranged delete, and the partition's start moved past them by the advance.
 * Fills out; true when more rows were chosen than one step may take.
 */
static bool
queen_retention_remove(const pg_uuid_t *partition, int max_rows, int delete_stmt,
					   int delete_rc, int advance_stmt, QueenRetentionStep *out)
{
	SPITupleTable *tt = SPI_tuptable;
	bool		more = SPI_processed > (uint64) max_rows;
	int			n = (int) Min(SPI_processed, (uint64) max_rows);
	Datum		values[3];
	int			i;

	if (n == 0)
		return more;
	for (i = 0; i < n; i++)
	{
		int64		frames = queen_get_int64(tt->vals[i], tt->tupdesc, 2) -
			queen_get_int64(tt->vals[i], tt->tupdesc, 1) + 1;
		bool		isnull;

		out->messages += frames;
		/* the segments' choice says which rule let each go */
		if (tt->tupdesc->natts >= 3 &&
			DatumGetBool(SPI_getbinval(tt->vals[i], tt->tupdesc, 3, &isnull)) && !isnull)
		{
			out->by_age += frames;
			out->segments_by_age++;
		}
	}
	out->segments = n;
	out->new_log_start = queen_get_int64(tt->vals[n - 1], tt->tupdesc, 2) + 1;
	values[0] = UUIDPGetDatum(partition);
	values[1] = Int64GetDatum(queen_get_int64(tt->vals[0], tt->tupdesc, 1));
	values[2] = Int64GetDatum(queen_get_int64(tt->vals[n - 1], tt->tupdesc, 1));
	queen_stmt_run(&queen_retention_stmts[delete_stmt], values, NULL, false, delete_rc,
				   "retention delete");
	values[1] = Int64GetDatum(out->new_log_start);
	queen_stmt_run(&queen_retention_stmts[advance_stmt], values, NULL, false, SPI_OK_UPDATE,
				   "retention advance");
	/* the messages retained changed, and no push stamped the partition */
	if (advance_stmt == QUEEN_RT_ADVANCE)
		queen_stats_mark(NULL, partition);
	return more;
}

/*
 * One step over one partition, in the caller's transaction: the segments
 * the rules let go, at most max_rows of them.  A cutoff of DT_NOBEGIN
 * turns its rule off.
 */
void
queen_retention_step(const pg_uuid_t *partition, TimestampTz all_cutoff,
					 TimestampTz completed_cutoff, int max_rows, QueenRetentionStep *out)
{
	Datum		values[6];
	char		nulls[6] = "      ";
	int64		log_start;
	int64		lowest;
	bool		isnull;

	memset(out, 0, sizeof(*out));
	out->done = true;
	queen_spi_connect();
	values[0] = UUIDPGetDatum(partition);
	if (queen_stmt_run(&queen_retention_stmts[QUEEN_RT_LOCK], values, NULL, false,
					   SPI_OK_SELECT, "retention lock") == 0)
	{
		SPI_finish();
		return;
	}
	log_start = queen_get_int64(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	lowest = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
										 &isnull));
	if (isnull)
		lowest = -1;			/* nobody consumes: rule 2 keeps everything */
	out->new_log_start = log_start;

	values[1] = Int64GetDatum(log_start);
	values[2] = TimestampTzGetDatum(all_cutoff);
	values[3] = TimestampTzGetDatum(completed_cutoff);
	values[4] = Int64GetDatum(lowest);
	values[5] = Int64GetDatum((int64) max_rows + 1);
	queen_stmt_run(&queen_retention_stmts[QUEEN_RT_CHOOSE], values, nulls, true,
				   SPI_OK_SELECT, "retention choice");
	if (queen_retention_remove(partition, max_rows, QUEEN_RT_DELETE, SPI_OK_INSERT,
							   QUEEN_RT_ADVANCE, out))
		out->done = false;
	SPI_finish();
}

/*
 * The partitions due, oldest first, at most limit: their ids, names and
 * each rule's cutoff (DT_NOBEGIN when the rule is off), in the caller's
 * memory.
 */
static int
queen_due(int stmt, TimestampTz cutoff, int limit, QueenRetentionDue **due)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	Datum		values[2];
	int			n;
	int			i;

	queen_spi_connect();
	if (stmt == QUEEN_RT_IDLE_DUE)
	{
		values[0] = TimestampTzGetDatum(cutoff);
		values[1] = Int32GetDatum(limit);
	}
	else
		values[0] = Int32GetDatum(limit);
	/* not read-only: a phase before it in the same transaction (SQL) may have removed what kept a row */
	n = queen_stmt_run(&queen_retention_stmts[stmt], values, NULL, false,
					   SPI_OK_SELECT, "retention work list");
	*due = MemoryContextAllocZero(out_cxt, sizeof(QueenRetentionDue) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		QueenRetentionDue *r = &(*due)[i];
		bool		isnull;
		Datum		v;

		queen_get_uuid(t, d, 1, &r->partition_id);
		r->queue = MemoryContextStrdup(out_cxt, SPI_getvalue(t, d, 2));
		r->partition = MemoryContextStrdup(out_cxt, SPI_getvalue(t, d, 3));
		v = SPI_getbinval(t, d, 4, &isnull);
		r->all_cutoff = isnull ? DT_NOBEGIN : DatumGetTimestampTz(v);
		v = SPI_getbinval(t, d, 5, &isnull);
		r->completed_cutoff = isnull ? DT_NOBEGIN : DatumGetTimestampTz(v);
		v = SPI_getbinval(t, d, 6, &isnull);
		r->max_wait = !isnull && DatumGetBool(v);
	}
	SPI_finish();
	return n;
}

int
queen_retention_due(int limit, QueenRetentionDue **due)
{
	return queen_due(QUEEN_RT_DUE, 0, limit, due);
}

/* The partitions whose hashes are due for the purge; all_cutoff is its cutoff. */
int
queen_txns_due(int limit, QueenRetentionDue **due)
{
	return queen_due(QUEEN_RT_TXNS_DUE, 0, limit, due);
}

/*
 * One step of the log_txns purge over one partition: the hash rows created
 * before cutoff, at most max_rows, from txns_start up, and the dedup runs
 * wholly below the new txns_start.  The cutoff lies behind the queue's
 * dedup window, so no probe's answer changes: a probe reads from
 * txns_start and ignores rows older than its window, and a run's or the
 * cache's hit whose row is gone counts for nothing (dedup_probe.c).  An
 * ack of a message whose hash went is unresolvable, as in Queen.
 */
void
queen_txns_purge_step(const pg_uuid_t *partition, TimestampTz cutoff, int max_rows,
					  QueenRetentionStep *out)
{
	Datum		values[4];
	int64		txns_start;

	memset(out, 0, sizeof(*out));
	out->done = true;
	queen_spi_connect();
	values[0] = UUIDPGetDatum(partition);
	if (queen_stmt_run(&queen_retention_stmts[QUEEN_RT_TXNS_LOCK], values, NULL, false,
					   SPI_OK_SELECT, "txns purge lock") == 0)
	{
		SPI_finish();
		return;
	}
	txns_start = queen_get_int64(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	out->new_log_start = txns_start;
	values[1] = Int64GetDatum(txns_start);
	values[2] = TimestampTzGetDatum(cutoff);
	values[3] = Int64GetDatum((int64) max_rows + 1);
	queen_stmt_run(&queen_retention_stmts[QUEEN_RT_TXNS_CHOOSE], values, NULL, true,
				   SPI_OK_SELECT, "txns purge choice");
	if (queen_retention_remove(partition, max_rows, QUEEN_RT_TXNS_DELETE, SPI_OK_DELETE,
							   QUEEN_RT_TXNS_ADVANCE, out))
		out->done = false;
	if (out->segments > 0)
	{
		values[1] = Int64GetDatum(out->new_log_start);
		queen_stmt_run(&queen_retention_stmts[QUEEN_RT_RUNS_DELETE], values, NULL, false,
					   SPI_OK_DELETE, "txns purge runs");
	}
	SPI_finish();
}

/*
 * Dead letters that failed before the cutoff, at most limit of them; how
 * many went.  They are leaves of the lock order and nothing reads them on
 * a push's or a pop's path.
 */
int64
queen_dlq_expire(TimestampTz before, int limit)
{
	return queen_stmt_expire(&queen_retention_stmts[QUEEN_RT_DLQ_EXPIRE], before, limit,
							 "dead-letter expiry");
}

/* The partitions idle since cutoff with nothing to keep (all_cutoff: cutoff). */
int
queen_idle_partitions_due(TimestampTz cutoff, int limit, QueenRetentionDue **due)
{
	return queen_due(QUEEN_RT_IDLE_DUE, cutoff, limit, due);
}

/*
 * Remove one idle partition if it is still dead and nobody holds its row
 * (a push that holds it is writing to it); true when it went.  Its cursors
 * go first, then its hash rows and runs (none, when dead: the purge took
 * them), which have no foreign key, then the row: the global order.  A later push to
 * the name creates a new partition with a new id, offsets from 0, as in
 * Queen; processes that cached the old id find no row and provision.
 */
bool
queen_idle_partition_remove(const pg_uuid_t *partition, TimestampTz cutoff)
{
	Datum		values[2];

	queen_spi_connect();
	values[0] = TimestampTzGetDatum(cutoff);
	values[1] = UUIDPGetDatum(partition);
	if (queen_stmt_run(&queen_retention_stmts[QUEEN_RT_IDLE_LOCK], values, NULL, false,
					   SPI_OK_SELECT, "idle partition lock") == 0)
	{
		SPI_finish();
		return false;
	}
	values[0] = UUIDPGetDatum(partition);
	queen_stmt_run(&queen_retention_stmts[QUEEN_RT_IDLE_CONSUMERS], values, NULL, false,
				   SPI_OK_DELETE, "idle partition cursors");
	queen_stmt_run(&queen_retention_stmts[QUEEN_RT_IDLE_RUNS], values, NULL, false,
				   SPI_OK_DELETE, "idle partition runs");
	queen_stmt_run(&queen_retention_stmts[QUEEN_RT_IDLE_TXNS], values, NULL, false,
				   SPI_OK_DELETE, "idle partition hashes");
	queen_stmt_run(&queen_retention_stmts[QUEEN_RT_IDLE_DELETE], values, NULL, false,
				   SPI_OK_DELETE, "idle partition removal");
	queen_stats_mark(NULL, partition);
	SPI_finish();
	return true;
}

/* ----------------------------------------------------------------
 *		The phases, as the maintenance worker and queen.retention_run
 *		run them
 * ----------------------------------------------------------------
 */

static TimestampTz
queen_age_cutoff(int64 seconds)
{
	return GetCurrentTimestamp() - seconds * USECS_PER_SEC;
}

/* What a step removed by one rule, added to its minute of history. */
static void
queen_retention_record(const pg_uuid_t *partition, const char *rule, int64 messages,
					   int64 segments)
{
	Datum		values[4];

	if (messages <= 0)
		return;
	values[0] = UUIDPGetDatum(partition);
	values[1] = CStringGetTextDatum(rule);
	values[2] = Int64GetDatum(messages);
	values[3] = Int64GetDatum(segments);
	queen_spi_connect();
	queen_stmt_run(&queen_retention_stmts[QUEEN_RT_HISTORY], values, NULL, false,
				   SPI_OK_INSERT, "retention history");
	SPI_finish();
}

static void
queen_segments_step(const QueenRetentionDue *d, int max_rows, QueenRetentionStep *out)
{
	queen_retention_step(&d->partition_id, d->all_cutoff, d->completed_cutoff, max_rows, out);
	queen_retention_record(&d->partition_id, d->max_wait ? "max_wait" : "retention",
						   out->by_age, out->segments_by_age);
	queen_retention_record(&d->partition_id, "completed", out->messages - out->by_age,
						   out->segments - out->segments_by_age);
}

static void
queen_hashes_step(const QueenRetentionDue *d, int max_rows, QueenRetentionStep *out)
{
	queen_txns_purge_step(&d->partition_id, d->all_cutoff, max_rows, out);
}

static int
queen_partitions_due(int limit, QueenRetentionDue **due)
{
	return queen_idle_partitions_due(queen_age_cutoff((int64) queen_partition_cleanup_days * 86400),
									 limit, due);
}

static void
queen_partitions_step(const QueenRetentionDue *d, int max_rows, QueenRetentionStep *out)
{
	(void) max_rows;
	memset(out, 0, sizeof(*out));
	out->done = true;
	out->segments = queen_idle_partition_remove(&d->partition_id, d->all_cutoff) ? 1 : 0;
}

static int64
queen_dlq_batch(int limit)
{
	return queen_dlq_expire(queen_age_cutoff(queen_dlq_retention_s), limit);
}

static int64
queen_traces_batch(int limit)
{
	return queen_traces_expire(queen_age_cutoff(queen_trace_retention_s), limit);
}

static const QueenRetentionPhase queen_phases[] = {
	{"segments", QUEEN_PHASE_SEGMENTS, NULL, queen_retention_due, queen_segments_step, NULL},
	{"hashes", QUEEN_PHASE_HASHES, NULL, queen_txns_due, queen_hashes_step, NULL},
	{"dlq", QUEEN_PHASE_DLQ, &queen_dlq_retention_s, NULL, NULL, queen_dlq_batch},
	{"traces", QUEEN_PHASE_TRACES, &queen_trace_retention_s, NULL, NULL, queen_traces_batch},
	{"partitions", QUEEN_PHASE_PARTITIONS, &queen_partition_cleanup_days,
	queen_partitions_due, queen_partitions_step, NULL},
};

/* The phase at index i, or NULL past the last. */
const QueenRetentionPhase *
queen_retention_phase(int i)
{
	return i < (int) lengthof(queen_phases) ? &queen_phases[i] : NULL;
}

/* Is the phase on: named in queen.retention_phases, and its age (if any) above 0? */
bool
queen_retention_phase_on(const QueenRetentionPhase *phase)
{
	return (queen_retention_phases & phase->bit) != 0 &&
		(phase->age == NULL || *phase->age > 0);
}
