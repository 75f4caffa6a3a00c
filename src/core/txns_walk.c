/*-------------------------------------------------------------------------
 *
 * txns_walk.c
 *	  A walk over a partition's transactionId hashes holding offsets in
 *	  [lo, hi], in ascending or descending offset order, read in place
 *	  through the primary keys of the two tables that hold them.
 *
 * Since 1.1 a segment's hashes live in its own row (log_segments.hashes):
 * a push writes one row, not two.  When retention purges a segment whose
 * hashes the dedup window still needs, they move to queen.log_txns
 * (retention.c), so log_txns holds only offsets below every segment kept.
 * The walk reads log_segments and, only where the segments do not reach
 * down to lo, log_txns below them: a walk the segments cover (a push's
 * probe, an ack's resolution, almost always) never opens log_txns.
 *
 * The dedup probe walks a partition's window newest first whenever its
 * cache cannot answer, and the ack walks a lease's span to resolve
 * transactionIds; both visit every frame of every row.  Through SPI each
 * row was copied out of its page into a tuple table, behind a portal and a
 * plan: most of a walk's cost once the dedup cache no longer held the
 * window.  Here an index scan of the primary key hands over each row where
 * it lies, detoasting only hash blobs stored out of line.
 *
 * The snapshot is taken as a statement of the caller's would take it (a
 * command counter increment, then the transaction snapshot with the current
 * command id): the caller's own earlier writes are visible, and under READ
 * COMMITTED so are the rows the pusher whose lock we waited for committed
 * (under REPEATABLE READ that pusher's update of the partition row already
 * failed our lock with a serialization error).  The caller must be allowed
 * to SELECT from the tables, as the statement would have checked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "spi.h"
#include "txns_walk.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"

/* The columns both tables share, as queen--1.2.sql creates them (log_rows.c checks) */
#define TXNS_ATT_BASE		2
#define TXNS_ATT_END		3
#define TXNS_ATT_CREATED	4

/*
 * The two tables, as queen--1.2.sql creates them: their column count, for
 * the layout check, is also the hashes' column, the last of each.
 */
static const struct
{
	const char *name;
	int			natts;
}			queen_hash_tables[2] = {{"log_segments", 6}, {"log_txns", 5}};

/* One of the two tables, opened when the walk first needs it. */
typedef struct QueenHashTable
{
	const char *name;
	int			natts;
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
} QueenHashTable;

enum
{
	WALK_SEGMENTS,
	WALK_TXNS
};

struct QueenTxnsWalk
{
	QueenHashTable tables[2];
	QueenHashTable *cur;		/* the table being walked */
	pg_uuid_t	pid;
	int64		lo;
	int64		hi;
	bool		descending;
	bool		done;			/* the current table has nothing more in [lo, hi] */
	bool		finished;		/* neither has */
	bool		other;			/* the other table may hold offsets of [lo, hi] */
	int64		other_hi;		/* its upper bound: hi, or below the segments walked */
	Pointer		detoasted;		/* the current row's hashes, if copied */
};

static void
queen_hash_table_open(QueenHashTable *t)
{
	Oid			relid = queen_table_oid(t->name);
	Oid			indexid;

	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, t->name);
	t->heap = table_open(relid, AccessShareLock);
	indexid = RelationGetPrimaryKeyIndex(t->heap);
	if (!OidIsValid(indexid) || RelationGetDescr(t->heap)->natts != t->natts)
		queen_table_changed(t->name);
	t->index = index_open(indexid, AccessShareLock);
	t->slot = table_slot_create(t->heap, NULL);
}

static void
queen_txns_scan(QueenTxnsWalk *w, StrategyNumber strategy, RegProcedure proc, int64 bound)
{
	QueenHashTable *t = w->cur;
	ScanKeyData keys[2];

	if (t->heap == NULL)
		queen_hash_table_open(t);
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(&w->pid));
	ScanKeyInit(&keys[1], 2, strategy, proc, Int64GetDatum(bound));
	if (t->scan == NULL)
		t->scan = index_beginscan(t->heap, t->index, GetActiveSnapshot(), 2, 0);
	index_rescan(t->scan, keys, 2, NULL, 0);
}

/* The previous row's out-of-line hashes, copied: a long walk must not pile them up. */
static void
queen_txns_release(QueenTxnsWalk *w)
{
	if (w->detoasted != NULL)
		pfree(w->detoasted);
	w->detoasted = NULL;
}

static inline int64
queen_txns_int64(QueenTxnsWalk *w, int att)
{
	return queen_slot_int64(w->cur->slot, att, w->cur->name);
}

QueenTxnsWalk *
queen_txns_walk_begin(const pg_uuid_t *pid, int64 lo, int64 hi, bool descending)
{
	QueenTxnsWalk *w = palloc0(sizeof(QueenTxnsWalk));
	int			i;

	for (i = 0; i < 2; i++)
	{
		w->tables[i].name = queen_hash_tables[i].name;
		w->tables[i].natts = queen_hash_tables[i].natts;
	}
	w->pid = *pid;
	w->descending = descending;

	/* as a statement would: see everything committed and our own writes */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();

	queen_txns_walk_seek(w, lo, hi);
	return w;
}

/*
 * Start walking the current table over [lo, hi], from its start in the
 * walk's direction.  Ascending, from the row that holds lo if one starts
 * below it; true when a row starts at or below lo (in log_segments: the
 * segments reach lo, so log_txns, below them, holds nothing of the range).
 */
static bool
queen_txns_start(QueenTxnsWalk *w, int64 lo, int64 hi)
{
	bool		below;

	w->done = lo > hi;
	if (w->done)
		return false;
	if (w->descending)
	{
		queen_txns_scan(w, BTLessEqualStrategyNumber, F_INT8LE, hi);
		return false;
	}
	queen_txns_scan(w, BTLessEqualStrategyNumber, F_INT8LE, lo);
	below = index_getnext_slot(w->cur->scan, BackwardScanDirection, w->cur->slot);
	if (below && queen_txns_int64(w, TXNS_ATT_END) >= lo)
		queen_txns_scan(w, BTGreaterEqualStrategyNumber, F_INT8GE,
						queen_txns_int64(w, TXNS_ATT_BASE));
	else
		queen_txns_scan(w, BTGreaterEqualStrategyNumber, F_INT8GE, lo);
	return below;
}

/*
 * Walk [lo, hi] instead, from its start, in the walk's direction and under
 * its snapshot: several ranges of one partition cost one relation open and
 * one snapshot.  log_txns holds only offsets below the segments, so it is
 * read only where the segments do not reach down to lo: after them when
 * descending, before them when ascending.
 */
void
queen_txns_walk_seek(QueenTxnsWalk *w, int64 lo, int64 hi)
{
	queen_txns_release(w);
	w->lo = lo;
	w->hi = hi;
	w->finished = lo > hi;
	w->cur = &w->tables[WALK_SEGMENTS];
	w->other = true;
	w->other_hi = hi;
	if (w->finished)
		return;
	if (queen_txns_start(w, lo, hi))
		w->other = false;
	else if (!w->descending)
	{
		/* nothing of the segments at or below lo: log_txns first, then them */
		w->cur = &w->tables[WALK_TXNS];
		queen_txns_start(w, lo, hi);
	}
}

/*
 * The current table is done: go on to the other one where it may hold
 * offsets of [lo, hi] not yet visited; false when none is left.
 */
static bool
queen_txns_next_table(QueenTxnsWalk *w)
{
	if (!w->other)
		return false;
	w->other = false;
	w->cur = &w->tables[w->cur == &w->tables[WALK_SEGMENTS] ? WALK_TXNS : WALK_SEGMENTS];
	queen_txns_start(w, w->lo, w->other_hi);
	return true;
}

/* The next row holding offsets in [lo, hi], in the walk's order; false at the end. */
bool
queen_txns_walk_next(QueenTxnsWalk *w, QueenTxnsRow *row)
{
	bool		isnull;
	Datum		d;
	bytea	   *hashes;
	int64		end;

	queen_txns_release(w);
	for (;;)
	{
		if (w->finished)
			return false;
		if (!w->done)
		{
			if (!index_getnext_slot(w->cur->scan,
									w->descending ? BackwardScanDirection : ForwardScanDirection,
									w->cur->slot))
				w->done = true;
			else
			{
				row->base = queen_txns_int64(w, TXNS_ATT_BASE);
				end = queen_txns_int64(w, TXNS_ATT_END);
				/* rows hold disjoint ranges: nothing further is in [lo, hi] */
				if (w->descending ? end < w->lo : row->base > w->hi)
				{
					w->done = true;
					w->other = false;	/* below lo, or above hi: so is the other table */
				}
				else
					break;
			}
		}
		if (!queen_txns_next_table(w))
		{
			w->finished = true;
			return false;
		}
	}
	if (w->descending)
		w->other_hi = row->base - 1;
	/* the last row, of either table, that can hold any of them */
	if (w->descending ? row->base <= w->lo : end >= w->hi)
		w->finished = true;
	d = slot_getattr(w->cur->slot, TXNS_ATT_CREATED, &isnull);
	row->created_at = isnull ? DT_NOBEGIN : DatumGetTimestampTz(d);
	d = slot_getattr(w->cur->slot, w->cur->natts, &isnull);
	if (isnull)
	{
		row->count = 0;
		row->hashes = NULL;
		return true;
	}
	hashes = DatumGetByteaPP(d);
	if ((Pointer) hashes != DatumGetPointer(d))
		w->detoasted = (Pointer) hashes;	/* stored out of line */
	row->count = VARSIZE_ANY_EXHDR(hashes) / QUEEN_HASH_LEN;
	row->hashes = (const uint8 *) VARDATA_ANY(hashes);
	return true;
}

void
queen_txns_walk_end(QueenTxnsWalk *w)
{
	int			i;

	queen_txns_release(w);
	for (i = 0; i < 2; i++)
	{
		QueenHashTable *t = &w->tables[i];

		if (t->heap == NULL)
			continue;
		if (t->scan != NULL)
			index_endscan(t->scan);
		ExecDropSingleTupleTableSlot(t->slot);
		index_close(t->index, NoLock);
		table_close(t->heap, NoLock);
	}
	PopActiveSnapshot();
	pfree(w);
}
