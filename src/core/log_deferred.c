/*-------------------------------------------------------------------------
 *
 * log_deferred.c
 *	  Partitions this transaction already holds: their offsets advance in
 *	  memory and reach the row once, before the next statement that reads
 *	  it or before commit.
 *
 * Each update of one row in one transaction lengthens the chain of row
 * versions every later statement walks, so n pushes to one partition in
 * one transaction would cost n^2.  Instead the write path remembers what it
 * locked (dedup_cache.c keeps that state per subtransaction) and writes
 * later segments of the same transaction with offsets from memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "dedup_cache.h"
#include "log_write_int.h"
#include "spi.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/snapmgr.h"

/* Deferred offsets reach their rows (see queen_write_deferred). */
static const char *const sql_flush =
"UPDATE queen.log_partitions p SET"
"       last_offset = u.last,"
"       last_write_at = CASE WHEN clock_timestamp() - p.last_write_at > " QUEEN_LAST_WRITE_QUANTUM_SQL
"                            THEN clock_timestamp() ELSE p.last_write_at END"
"  FROM unnest($1::uuid[], $2::int8[]) AS u(pid, last)"
" WHERE p.id = u.pid";

static SPIPlanPtr queen_flush_plan = NULL;

/* The allocator UPDATE of t's row just ran in this transaction: remember what it locked. */
void
queen_own_locked(const QueenTarget *t, bool described)
{
	QueenOwnPartition *o = queen_dedup_own(&t->pid);
	QueenOwnAlloc *a;

	if (o == NULL)
		return;
	a = queen_dedup_own_alloc(o);
	a->locked = true;
	if (described)
	{
		a->described = true;
		a->window = t->queue_window;
		a->encrypted = t->queue_encrypted;
		a->txns_start = t->txns_start;
		a->generation = t->generation;
	}
}

/*
 * Fill t from what this transaction knows of its partition, if it holds the
 * row and knows enough for this segment: then no statement needs to lock or
 * update the row again.
 */
bool
queen_own_target(QueenTarget *t, QueenSegment *seg, const pg_uuid_t *pid)
{
	QueenOwnPartition *o = queen_dedup_own(pid);
	QueenOwnAlloc *a;

	if (o == NULL)
		return false;
	a = queen_dedup_own_alloc(o);
	if (!a->locked ||
		!(a->described ||
		  (seg->window_set && seg->window_in == 0 && seg->seal == QUEEN_SEAL_ANY)))
		return false;
	t->seg = seg;
	t->pid = *pid;
	t->queue_window = a->window;
	t->queue_encrypted = a->encrypted;
	t->window = seg->window_set ? seg->window_in : a->window;
	t->last_offset = a->last;
	t->txns_start = a->txns_start;
	t->generation = a->generation;
	t->tid_valid = false;
	return true;
}

/*
 * Write targets whose rows this transaction already holds: offsets come from
 * memory, and the rows' last_offset is written once, by queen_alloc_flush
 * before the next statement that reads it or before commit.
 */
void
queen_write_deferred(QueenTarget **targets, int n, TimestampTz now)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		QueenSegment *seg = targets[i]->seg;
		QueenOwnPartition *o = queen_dedup_own(&targets[i]->pid);

		seg->base_offset = targets[i]->last_offset + 1;
		seg->created_at = now;
		seg->status = QUEEN_SEGMENT_QUEUED;
		queen_dedup_cache_remember(&targets[i]->pid, seg->base_offset, seg->msg_count,
								   seg->created_at, (const uint8 *) VARDATA_ANY(seg->hashes));
		queen_dedup_own_defer(o);
	}
	queen_insert_rows(targets, n);
}

/*
 * Bring the rows of partitions written with deferred offsets up to date.
 * Must be called between SPI_connect and SPI_finish.  A row that is gone
 * was deleted by this transaction after it pushed there without a queue
 * deletion's notice (a hand-written DELETE): committing would leave
 * segments of no partition, so the transaction fails instead.
 */
void
queen_alloc_flush_connected(void)
{
	QueenOwnAlloc **dirty;
	int			n = queen_dedup_own_dirty(&dirty);
	Oid			types[2] = {UUIDARRAYOID, INT8ARRAYOID};
	Datum	   *dp;
	Datum	   *dl;
	bool	   *done;
	uint64		updated = 0;
	Oid			save_userid;
	int			save_sec_context;
	int			i;

	if (n == 0)
		return;
	dp = palloc(sizeof(Datum) * n);
	dl = palloc(sizeof(Datum) * n);
	done = palloc0(sizeof(bool) * n);
	GetUserIdAndSecContext(&save_userid, &save_sec_context);

	/*
	 * One statement per user who deferred writes (almost always one), run
	 * as that user: the row is theirs to update, whoever commits.  An
	 * error leaves the user to the (sub)transaction abort to restore.
	 */
	for (i = 0; i < n; i++)
	{
		QueenOwnAlloc *who = dirty[i];
		Datum		values[2];
		int			m = 0;
		int			j;

		if (done[i])
			continue;
		for (j = i; j < n; j++)
		{
			if (done[j] || dirty[j]->userid != who->userid ||
				dirty[j]->sec_context != who->sec_context)
				continue;
			dp[m] = UUIDPGetDatum(queen_dedup_own_pid(dirty[j]));
			dl[m] = Int64GetDatum(dirty[j]->last);
			done[j] = true;
			m++;
		}
		values[0] = queen_array_datum(dp, m, UUIDOID);
		values[1] = queen_array_datum(dl, m, INT8OID);
		SetUserIdAndSecContext(who->userid, who->sec_context | SECURITY_LOCAL_USERID_CHANGE);
		queen_exec(queen_plan_once(&queen_flush_plan, sql_flush, 2, types, false),
				   values, SPI_OK_UPDATE, "deferred offsets flush");
		SetUserIdAndSecContext(save_userid, save_sec_context);
		updated += SPI_processed;
	}
	if (updated != (uint64) n)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a partition this transaction pushed to was deleted in the same transaction"),
				 errdetail("Delete a queue with queen.delete_queue_v1, or push again after deleting it.")));
}

/* The same, for callers outside SPI (a queue deletion, the commit). */
void
queen_alloc_flush(void)
{
	/* the common case, nothing deferred, costs no connection */
	if (!queen_dedup_own_any_dirty())
		return;
	queen_spi_connect();
	queen_alloc_flush_connected();
	SPI_finish();
}

static void
queen_alloc_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	if ((event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PRE_PREPARE) &&
		queen_dedup_own_any_dirty())
	{
		bool		read_only = XactReadOnly;

		/*
		 * The statement that ran last is over: the flush needs a snapshot
		 * of its own.  It completes writes made while the transaction could
		 * write, so a SET transaction_read_only since then does not stop
		 * it (a transaction that wrote cannot be in recovery).
		 */
		PushActiveSnapshot(GetTransactionSnapshot());
		XactReadOnly = false;
		queen_alloc_flush();
		XactReadOnly = read_only;
		PopActiveSnapshot();
	}
}

void
queen_alloc_init(void)
{
	RegisterXactCallback(queen_alloc_xact_callback, NULL);
}

