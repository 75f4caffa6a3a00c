/*-------------------------------------------------------------------------
 *
 * ack.c
 *	  The ack: status normalisation and the decision
 *	  procedure over one consumer row (5.4).  Both doors call it: queen.ack
 *	  and friends in the caller's transaction, the broker from a worker's.
 *
 * Items are grouped by (partition, lease id) and the groups run in
 * ascending (partition id, lease id) order.  A group takes exactly one row
 * lock, its consumer row (FOR UPDATE), never a partition or queue row: the
 * global lock order puts consumer rows after partitions, and pushes hold
 * partition rows, so an ack that took a partition row could deadlock with
 * a push; and ascending consumer rows mean two acks over the same
 * partitions wait for each other instead of deadlocking.  The queue's
 * retry limit and DLQ switch and the partition's txns_start are plain
 * reads in the same statement.
 *
 * A transactionId resolves to an offset through the stored hashes (16-byte hashes
 * per frame, frame order): first inside the span the ack may move the
 * cursor over, [max(committed + 1, txns_start), batch_end] under a lease
 * or everything above the cursor without one, walking up and stopping once
 * every id is found; then, only for the ids not found there, below the
 * cursor, walking down, to tell a duplicate ack (noop) or a late nack
 * (stale) from an id the partition never held (unresolved).  An ack of a
 * leased batch therefore reads the batch's hash rows and no more, and an
 * ack of exactly the batch, all completed, reads none: the pop recorded
 * the digest of the batch's transactionIds in the consumer row, and a match
 * moves the cursor to the batch's end at once (Queen's fast path,
 * kept in the row rather than in a process's memory, so it holds whichever
 * process or session pops and acks).
 *
 * A dead letter is filed in the same transaction as the cursor move past
 * it (ack_dlq.c).  Lease renewal is lease.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "ack_int.h"
#include "codec.h"
#include "wait.h"
#include "hash_refs.h"
#include "spi.h"
#include "txns_walk.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

/*
 * The consumer row, locked, with what its queue and partition say.  The
 * lease is judged at the transaction's start (now()): a pop and an ack in
 * one transaction agree on it however long the work between them took, and
 * nobody else can have taken over a lease whose row that transaction holds.
 */
static const char *const sql_ack_lock =
"SELECT c.committed, c.batch_end, c.worker_id, c.lease_expires_at > now(),"
"       c.batch_retry_count, p.txns_start, q.retry_limit,"
"       q.dead_letter_queue OR q.dlq_after_max_retries, c.batch_digest,"
"       q.tenant_id, q.name"
"  FROM queen.log_consumers c"
"  JOIN queen.log_partitions p ON p.id = c.partition_id"
"  JOIN queen.queues q ON q.id = p.queue_id"
" WHERE c.partition_id = $1 AND c.consumer_group = $2"
"   FOR UPDATE OF c";

static const char *const sql_ack_partition =
"SELECT 1 FROM queen.log_partitions WHERE id = $1";

/*
 * Every cursor move and lease change of the ack.  total_consumed counts the
 * offsets the cursor crossed.  A lease is released whole or kept whole, so
 * the lease check of log_consumers holds: a kept lease has batch_end above
 * the new cursor (the procedure releases it otherwise).
 */
static const char *const sql_ack_update =
"UPDATE queen.log_consumers SET"
"       total_consumed = total_consumed + ($3 - committed),"
"       committed = $3,"
"       batch_end = CASE WHEN $4 THEN NULL ELSE batch_end END,"
"       worker_id = CASE WHEN $4 THEN NULL ELSE worker_id END,"
"       lease_expires_at = CASE WHEN $4 THEN NULL ELSE lease_expires_at END,"
"       batch_retry_count = $5,"
"       attempt_offset = CASE WHEN $6 THEN NULL ELSE attempt_offset END,"
"       attempt_end = CASE WHEN $6 THEN NULL ELSE attempt_end END,"
"       attempt_count = CASE WHEN $6 THEN 0 ELSE attempt_count END,"
"       batch_digest = CASE WHEN $4 THEN NULL ELSE batch_digest END"
" WHERE partition_id = $1 AND consumer_group = $2";

static SPIPlanPtr queen_ack_lock_plan = NULL;
static SPIPlanPtr queen_ack_partition_plan = NULL;
static SPIPlanPtr queen_ack_update_plan = NULL;

/* What an item is told when its ack was not carried out. */
#define QUEEN_ACK_RELEASED_PROBLEM \
	"invalid lease: the partition holds no lease now (an earlier ack, nack or retry released it), " \
	"and this message was not acknowledged; nothing was applied"
#define QUEEN_ACK_EXPIRED_PROBLEM \
	"expired lease: it ended before this ack, which was not applied; its messages are delivered again"
#define QUEEN_ACK_TAKEN_PROBLEM \
	"invalid lease: not the partition's current lease (it expired or was released, and the " \
	"partition was leased again); nothing was applied"
#define QUEEN_ACK_STALE_PROBLEM \
	"already committed: the cursor moved past this message before this ack"
#define QUEEN_ACK_UNRESOLVED_PROBLEM \
	"unresolvable: no message with this transactionId where this ack can reach " \
	"(never pushed to this partition, its hash purged, or not part of the leased batch)"
#define QUEEN_ACK_NO_PARTITION_PROBLEM "unresolvable: no such partition"
#define QUEEN_ACK_NO_CONSUMER_PROBLEM \
	"consumer not found: this consumer group holds no cursor on this partition"

/* ----------------------------------------------------------------
 *		Status normalisation (5.1)
 * ----------------------------------------------------------------
 */

static inline bool
queen_status_is(const char *status, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(status, word, len) == 0;
}

/*
 * Exact and case-sensitive: absent, completed, success, acked and ok
 * complete; retry and dlq are themselves; anything else (FAILED, nack, "")
 * is a failure, so a typo never acknowledges a message by accident.
 */
QueenAckStatus
queen_ack_status(const char *status, size_t len)
{
	if (status == NULL ||
		queen_status_is(status, len, "completed") ||
		queen_status_is(status, len, "success") ||
		queen_status_is(status, len, "acked") ||
		queen_status_is(status, len, "ok"))
		return QUEEN_ACK_COMPLETED;
	if (queen_status_is(status, len, "retry"))
		return QUEEN_ACK_RETRY;
	if (queen_status_is(status, len, "dlq"))
		return QUEEN_ACK_DLQ;
	return QUEEN_ACK_FAILED;
}

/*
 * Is status one of the words 5.1 names (failed included)?  The SQL door
 * refuses any other, where the HTTP door keeps Queen's "anything
 * else fails": a typo there would spend a retry without a word.
 */
bool
queen_ack_status_known(const char *status, size_t len)
{
	static const char *const words[] = {
		"completed", "success", "acked", "ok", "failed", "retry", "dlq"
	};
	Size		i;

	if (status == NULL)
		return true;
	for (i = 0; i < lengthof(words); i++)
		if (queen_status_is(status, len, words[i]))
			return true;
	return false;
}

/* ----------------------------------------------------------------
 *		Resolution through the stored hashes
 * ----------------------------------------------------------------
 */

/*
 * Walk the hash rows holding [lo, hi] (txns_walk.c), calling visit for each
 * frame in that range, until visit says every id is found.  Rows come
 * newest first when descending.  The hashes live in the row being walked
 * only.
 */
typedef bool (*QueenHashVisit) (QueenAckGroup *g, const QueenHashRefs *refs,
								int64 off, const uint8 *hash);

static void
queen_ack_walk(QueenAckGroup *g, bool descending, int64 lo, int64 hi, QueenHashVisit visit)
{
	QueenHashRefs *refs = queen_hash_refs(g->hashes, g->n);
	/* a fresh snapshot: the rows of the batch the locked row leases */
	QueenTxnsWalk *w = queen_txns_walk_begin(g->pid, lo, hi, descending);
	QueenTxnsRow row;
	bool		done = false;

	while (!done && queen_txns_walk_next(w, &row))
	{
		int64		first = Max(lo - row.base, 0);
		int64		last = Min(hi - row.base, row.count - 1);
		int64		j;

		for (j = descending ? last : first;
			 !done && (descending ? j >= first : j <= last);
			 j += descending ? -1 : 1)
			done = visit(g, refs, row.base + j, row.hashes + j * QUEEN_HASH_LEN);
	}
	queen_txns_walk_end(w);
	queen_hash_refs_free(refs);
}

/* Are the ids of every item whose field is still -1 found? */
static bool
queen_ack_all_found(const int64 *field, int n)
{
	int			i;

	for (i = 0; i < n; i++)
		if (field[i] < 0)
			return false;
	return true;
}

/*
 * One stored hash met on a walk: each item whose id it is, and which the
 * walk still looks for (not yet in field, nor in skip when given), takes
 * off, the first match being the lowest offset walking up.  True once
 * every item is found in field or skip.
 */
static bool
queen_ack_visit(QueenAckGroup *g, const QueenHashRefs *refs, int64 off, const uint8 *hash,
				int64 *field, const int64 *skip)
{
	QueenHashRefIter it;
	bool		found = false;
	int32		idx;
	int			k;

	for (idx = queen_hash_refs_first(refs, hash, &it); idx >= 0;
		 idx = queen_hash_refs_next(refs, hash, &it))
	{
		if (field[idx] < 0 && (skip == NULL || skip[idx] < 0))
		{
			field[idx] = off;
			found = true;
		}
	}
	if (!found)
		return false;
	for (k = 0; k < g->n; k++)
		if (field[k] < 0 && (skip == NULL || skip[k] < 0))
			return false;
	return true;
}

/* Walking up the span. */
static bool
queen_ack_visit_span(QueenAckGroup *g, const QueenHashRefs *refs, int64 off,
					 const uint8 *hash)
{
	return queen_ack_visit(g, refs, off, hash, g->eff, NULL);
}

/* Walking down below the cursor, for the ids the span did not hold. */
static bool
queen_ack_visit_below(QueenAckGroup *g, const QueenHashRefs *refs, int64 off,
					  const uint8 *hash)
{
	return queen_ack_visit(g, refs, off, hash, g->below, g->eff);
}

/* The items' transactionIds hashed as the log stores them. */
static void
queen_ack_hash(QueenAckGroup *g)
{
	int			i;

	g->hashes = palloc(QUEEN_HASH_LEN * (Size) g->n);
	for (i = 0; i < g->n; i++)
	{
		QueenAckItem *item = g->items[i];

		queen_txn_hash(item->transaction_id ? item->transaction_id : "",
					   item->transaction_id ? item->txn_len : 0,
					   g->hashes + (Size) i * QUEEN_HASH_LEN);
	}
}

/* eff and below of every item of the group (5.4 step 3). */
static void
queen_ack_resolve(QueenAckGroup *g)
{
	int64		lo = Max(g->committed + 1, g->txns_start);
	int64		hi = g->batch_end >= 0 ? g->batch_end : PG_INT64_MAX;
	int			i;

	g->eff = palloc(sizeof(int64) * g->n);
	g->below = palloc(sizeof(int64) * g->n);
	for (i = 0; i < g->n; i++)
	{
		g->eff[i] = -1;
		g->below[i] = -1;
	}

	if (lo <= hi)
		queen_ack_walk(g, false, lo, hi, queen_ack_visit_span);
	/* below txns_start a segment may still hold hashes: past the window, not read */
	if (g->committed >= 0 && !queen_ack_all_found(g->eff, g->n))
		queen_ack_walk(g, true, g->txns_start, g->committed, queen_ack_visit_below);
}

/* ----------------------------------------------------------------
 *		The decision (5.4 steps 4-6)
 * ----------------------------------------------------------------
 */

/* At one offset a dlq outranks a failed, a failed a retry. */
static int
queen_signal_rank(QueenAckStatus s)
{
	return s == QUEEN_ACK_DLQ ? 0 : s == QUEEN_ACK_FAILED ? 1 : 2;
}

/*
 * The head signal, the completed prefix below it, and the branch of 5.4's
 * table.  A row without a lease takes the same branches, with nothing to
 * release: a nack always means "this failed", whoever held the batch.
 */
static void
queen_ack_decide(QueenAckGroup *g)
{
	bool		leased = g->batch_end >= 0;
	int			i;

	g->sig_off = -1;
	for (i = 0; i < g->n; i++)
	{
		QueenAckStatus s = g->items[i]->status;

		if (g->eff[i] < 0 || s == QUEEN_ACK_COMPLETED)
			continue;
		if (g->sig_off < 0 || g->eff[i] < g->sig_off ||
			(g->eff[i] == g->sig_off && queen_signal_rank(s) < queen_signal_rank(g->sig_kind)))
		{
			g->sig_off = g->eff[i];
			g->sig_kind = s;
		}
	}

	/* implicit ack: the highest completed offset below the signal */
	g->new_committed = g->committed;
	for (i = 0; i < g->n; i++)
		if (g->eff[i] >= 0 && g->items[i]->status == QUEEN_ACK_COMPLETED &&
			(g->sig_off < 0 || g->eff[i] < g->sig_off))
			g->new_committed = Max(g->new_committed, g->eff[i]);

	g->final = g->new_committed;
	g->release = false;
	g->reset_attempts = false;
	g->new_retry_count = g->retry_count;
	g->filed = -1;
	g->dropped = -1;
	g->filing_note = NULL;

	if (g->sig_off >= 0 &&
		(g->sig_kind == QUEEN_ACK_DLQ ||
		 (g->sig_kind == QUEEN_ACK_FAILED && g->retry_count >= g->retry_limit &&
		  g->dlq_enabled)))
	{
		/* forced, or out of retries with a DLQ: file the head, move past it */
		g->filed = g->sig_off;
		g->final = g->sig_off;
		g->release = true;
		g->reset_attempts = true;
		g->new_retry_count = 0;
	}
	else if (g->sig_off >= 0 && g->sig_kind == QUEEN_ACK_FAILED &&
			 g->retry_count < g->retry_limit)
	{
		/* redeliver from the head at once, one retry spent */
		g->release = true;
		g->new_retry_count = g->retry_count + 1;
	}
	else if (g->sig_off >= 0 && g->sig_kind == QUEEN_ACK_FAILED)
	{
		/* out of retries and no DLQ: drop the head */
		g->dropped = g->sig_off;
		g->final = g->sig_off;
		g->release = true;
		g->new_retry_count = 0;
	}
	else if (g->sig_off >= 0)
		g->release = true;		/* retry: redeliver, no budget spent */
	else if (leased && g->new_committed >= g->batch_end)
	{
		/* the whole batch is done: the next one starts afresh */
		g->release = true;
		g->reset_attempts = true;
		g->new_retry_count = 0;
	}
	else if (g->new_committed > g->committed)
	{
		for (i = 0; i < g->n; i++)
			if (g->items[i]->release_lease && g->eff[i] >= 0)
				g->release = true;
	}
	g->release = g->release && leased;
}

/* ----------------------------------------------------------------
 *		One group
 * ----------------------------------------------------------------
 */

/* Tell every item of the group the same thing (a refusal). */
static void
queen_ack_refuse(QueenAckGroup *g, const char *problem, MemoryContext out_cxt)
{
	int			i;

	for (i = 0; i < g->n; i++)
		g->items[i]->problem = MemoryContextStrdup(out_cxt, problem);
}

/*
 * Lock the consumer row and read it with its queue's settings; false (and
 * every item told why) when there is no row or the lease is not this one.
 */
static bool
queen_ack_lock(QueenAckGroup *g, MemoryContext out_cxt)
{
	Oid			types[2] = {UUIDOID, TEXTOID};
	Datum		values[2];
	HeapTuple	tuple;
	TupleDesc	desc;
	bool		isnull;
	bool		live;
	char	   *worker;
	Datum		d;

	values[0] = UUIDPGetDatum(g->pid);
	values[1] = CStringGetTextDatum(g->group);
	if (SPI_execute_plan(queen_plan_once(&queen_ack_lock_plan, sql_ack_lock, 2, types, false),
						 values, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "queen: consumer row lock failed");
	if (SPI_processed == 0)
	{
		if (SPI_execute_plan(queen_plan_once(&queen_ack_partition_plan, sql_ack_partition,
											 1, types, false),
							 values, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "queen: partition lookup failed");
		queen_ack_refuse(g, SPI_processed == 0 ? QUEEN_ACK_NO_PARTITION_PROBLEM :
						 QUEEN_ACK_NO_CONSUMER_PROBLEM, out_cxt);
		return false;
	}
	tuple = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	g->committed = queen_get_int64(tuple, desc, 1);
	g->batch_end = DatumGetInt64(SPI_getbinval(tuple, desc, 2, &isnull));
	if (isnull)
		g->batch_end = -1;
	worker = SPI_getvalue(tuple, desc, 3);
	live = DatumGetBool(SPI_getbinval(tuple, desc, 4, &isnull)) && !isnull;
	g->retry_count = queen_get_int32(tuple, desc, 5);
	g->txns_start = queen_get_int64(tuple, desc, 6);
	g->retry_limit = queen_get_int32(tuple, desc, 7);
	g->dlq_enabled = DatumGetBool(SPI_getbinval(tuple, desc, 8, &isnull)) && !isnull;
	queen_get_uuid(tuple, desc, 10, &g->tenant);
	g->queue = SPI_getvalue(tuple, desc, 11);
	d = SPI_getbinval(tuple, desc, 9, &isnull);
	g->has_digest = false;
	if (!isnull)
	{
		bytea	   *b = DatumGetByteaPP(d);

		if (VARSIZE_ANY_EXHDR(b) == QUEEN_DIGEST_LEN)
		{
			memcpy(&g->digest, VARDATA_ANY(b), QUEEN_DIGEST_LEN);
			g->has_digest = true;
		}
	}

	/*
	 * A lease that is not the row's live one applies nothing; but an ack
	 * sent again after it was applied (its answer was lost) is still told
	 * so, whatever lease it names (queen_ack_applied).
	 */
	g->lease_problem = NULL;
	if (g->lease != NULL && worker == NULL)
		g->lease_problem = QUEEN_ACK_RELEASED_PROBLEM;
	else if (g->lease != NULL && strcmp(worker, g->lease) != 0)
		g->lease_problem = QUEEN_ACK_TAKEN_PROBLEM;
	else if (g->lease != NULL && (!live || g->batch_end < 0))
		g->lease_problem = QUEEN_ACK_EXPIRED_PROBLEM;
	return true;
}

/* Write the decision: the dead letter, then the cursor and the lease. */
static void
queen_ack_apply(QueenAckGroup *g)
{
	Oid			types[6] = {UUIDOID, TEXTOID, INT8OID, BOOLOID, INT4OID, BOOLOID};
	Datum		values[6];

	if (g->filed >= 0)
		queen_dlq_file(g);
	if (g->final == g->committed && !g->release && !g->reset_attempts &&
		g->new_retry_count == g->retry_count)
		return;					/* nothing moved: a noop ack writes nothing */
	values[0] = UUIDPGetDatum(g->pid);
	values[1] = CStringGetTextDatum(g->group);
	values[2] = Int64GetDatum(g->final);
	values[3] = BoolGetDatum(g->release);
	values[4] = Int32GetDatum(g->new_retry_count);
	values[5] = BoolGetDatum(g->reset_attempts);
	queen_exec(queen_plan_once(&queen_ack_update_plan, sql_ack_update, 6, types, false),
			   values, SPI_OK_UPDATE, "consumer row update");
	/* the partition is free: pops waiting on its queue may take it at COMMIT */
	if (g->release)
		queen_wait_mark(&g->tenant, g->queue, strlen(g->queue));
}

/* What one resolved item is told (5.1, 5.2), its problem in out_cxt. */
static void
queen_ack_verdict(const QueenAckGroup *g, int i, MemoryContext out_cxt)
{
	QueenAckItem *item = g->items[i];
	int64		eff = g->eff[i];
	const char *problem = NULL;

	item->lease_released = g->release;
	item->offset = eff >= 0 ? eff : g->below[i];
	if (eff < 0 && g->below[i] >= 0)
	{
		/*
		 * Below the cursor: a completed ack sent again is harmless, and so
		 * is a nack or reject sent again after it filed its message; any
		 * other late nack is not.
		 */
		item->noop = item->status == QUEEN_ACK_COMPLETED ||
			(item->status != QUEEN_ACK_RETRY && queen_ack_filed(g, g->below[i]));
		item->success = item->noop;
		item->dlq = item->noop && item->status != QUEEN_ACK_COMPLETED;
		if (!item->noop)
			problem = QUEEN_ACK_STALE_PROBLEM;
	}
	else if (eff < 0)
		problem = QUEEN_ACK_UNRESOLVED_PROBLEM;
	else if (item->status == QUEEN_ACK_COMPLETED && eff > g->final)
		problem = psprintf("not committed: the message at offset " INT64_FORMAT " before it was nacked, so this one is redelivered after it",
						   g->sig_off);
	else if (eff == g->filed && item->status != QUEEN_ACK_RETRY)
	{
		item->success = true;
		item->dlq = true;
		problem = g->filing_note;
	}
	else if (item->status == QUEEN_ACK_DLQ)
		problem = psprintf("not dead-lettered: the message at offset " INT64_FORMAT " before it was acted on first, so this one is redelivered after it",
						   g->sig_off);
	else
	{
		item->success = true;
		if (eff == g->dropped)
			problem = "dropped: retries exhausted and the queue keeps no dead letters";
	}
	if (problem != NULL)
		item->problem = MemoryContextStrdup(out_cxt, problem);
}

/*
 * Reference 5.2's fast path: under its live lease, every item completed,
 * and the items are exactly the batch the pop delivered (as many as the
 * span has offsets, and the digest of their transactionIds is the one the
 * pop recorded).  5.4 would find each of them in the span and move the
 * cursor to its end; so does this, without reading the stored hashes.
 */
static bool
queen_ack_whole_batch(QueenAckGroup *g)
{
	QueenTxnDigest digest;
	int			i;

	if (g->lease == NULL || !g->has_digest || g->batch_end < 0 ||
		g->n != g->batch_end - g->committed)
		return false;
	memset(&digest, 0, sizeof(digest));
	for (i = 0; i < g->n; i++)
	{
		if (g->items[i]->status != QUEEN_ACK_COMPLETED || g->items[i]->transaction_id == NULL)
			return false;
		queen_txn_digest_add(&digest, g->hashes + (Size) i * QUEEN_HASH_LEN);
	}
	if (memcmp(&digest, &g->digest, sizeof(digest)) != 0)
		return false;

	g->sig_off = -1;
	g->new_committed = g->final = g->batch_end;
	g->release = true;
	g->reset_attempts = true;
	g->new_retry_count = 0;
	g->filed = -1;
	g->dropped = -1;
	queen_ack_apply(g);
	for (i = 0; i < g->n; i++)
	{
		g->items[i]->success = true;
		g->items[i]->lease_released = true;
	}
	return true;
}

/*
 * The lease named is not the row's live one: nothing is applied.  An item
 * already applied (at or below the cursor: an ack sent again because its
 * answer was lost) is told so, noop; the others why not.
 */
static void
queen_ack_applied(QueenAckGroup *g, MemoryContext out_cxt)
{
	int			i;

	g->eff = palloc(sizeof(int64) * g->n);
	g->below = palloc(sizeof(int64) * g->n);
	for (i = 0; i < g->n; i++)
		g->eff[i] = g->below[i] = -1;
	if (g->committed >= 0)
		queen_ack_walk(g, true, g->txns_start, g->committed, queen_ack_visit_below);
	g->release = false;
	g->filed = g->dropped = g->sig_off = -1;
	for (i = 0; i < g->n; i++)
	{
		if (g->below[i] >= 0)
		{
			queen_ack_verdict(g, i, out_cxt);
			/* applied, but maybe by another consumer: strict callers ask */
			g->items[i]->lease_problem = MemoryContextStrdup(out_cxt, g->lease_problem);
		}
		else
			g->items[i]->problem = MemoryContextStrdup(out_cxt, g->lease_problem);
	}
}

/* 5.4 for one group of items; true when it released the lease. */
static bool
queen_ack_group(QueenAckGroup *g, MemoryContext out_cxt)
{
	int			i;

	if (!queen_ack_lock(g, out_cxt))
		return false;
	queen_ack_hash(g);
	if (g->lease_problem != NULL)
	{
		queen_ack_applied(g, out_cxt);
		return false;
	}
	if (queen_ack_whole_batch(g))
		return true;
	queen_ack_resolve(g);
	queen_ack_decide(g);
	queen_ack_apply(g);
	for (i = 0; i < g->n; i++)
		queen_ack_verdict(g, i, out_cxt);
	return g->release;
}

/* ----------------------------------------------------------------
 *		Entry points
 * ----------------------------------------------------------------
 */

static inline const char *
queen_lease_or_null(const char *lease)
{
	return lease != NULL && lease[0] != '\0' ? lease : NULL;
}

/* Items of one group share the partition and the lease id. */
static int
queen_ack_group_cmp(const QueenAckItem *x, const QueenAckItem *y)
{
	const char *lx = queen_lease_or_null(x->lease_id);
	const char *ly = queen_lease_or_null(y->lease_id);
	int			c = memcmp(&x->partition_id, &y->partition_id, sizeof(pg_uuid_t));

	if (c != 0)
		return c;
	return strcmp(lx ? lx : "", ly ? ly : "");
}

/* Ascending (partition, lease id), input order within: the lock order. */
static int
queen_ack_item_cmp(const void *a, const void *b)
{
	const QueenAckItem *x = *(QueenAckItem *const *) a;
	const QueenAckItem *y = *(QueenAckItem *const *) b;
	int			c = queen_ack_group_cmp(x, y);

	if (c != 0)
		return c;
	return (x > y) - (x < y);
}

int
queen_ack(const char *group, QueenAckItem *items, int nitems)
{
	MemoryContext out_cxt = CurrentMemoryContext;
	MemoryContext group_cxt;
	QueenAckItem **order;
	int			released = 0;
	int			start,
				i;

	for (i = 0; i < nitems; i++)
	{
		items[i].success = false;
		items[i].problem = NULL;
		items[i].lease_released = false;
		items[i].dlq = false;
		items[i].noop = false;
		items[i].lease_problem = NULL;
		items[i].offset = -1;
		items[i].lease_id = queen_lease_id_normal(items[i].lease_id);
	}
	if (nitems <= 0)
		return 0;
	if (group == NULL)
		group = QUEEN_QUEUE_MODE;

	queen_spi_connect();
	group_cxt = AllocSetContextCreate(CurrentMemoryContext, "queen ack group",
									  ALLOCSET_DEFAULT_SIZES);
	order = palloc(sizeof(QueenAckItem *) * nitems);
	for (i = 0; i < nitems; i++)
		order[i] = &items[i];
	qsort(order, nitems, sizeof(QueenAckItem *), queen_ack_item_cmp);

	for (start = 0; start < nitems;)
	{
		QueenAckGroup g;
		MemoryContext old;
		int			end = start + 1;

		while (end < nitems && queen_ack_group_cmp(order[start], order[end]) == 0)
			end++;

		memset(&g, 0, sizeof(g));
		g.pid = &order[start]->partition_id;
		g.group = group;
		g.lease = queen_lease_or_null(order[start]->lease_id);
		/* input order within the group, for the error text's choice */
		g.items = &order[start];
		g.n = end - start;
		old = MemoryContextSwitchTo(group_cxt);
		if (queen_ack_group(&g, out_cxt))
			released++;
		MemoryContextSwitchTo(old);
		MemoryContextReset(group_cxt);
		start = end;
	}
	SPI_finish();
	return released;
}
