/*-------------------------------------------------------------------------
 *
 * txns_walk.c
 *	  A walk over a partition's hash rows (queen.log_txns) holding offsets
 *	  in [lo, hi], in ascending or descending offset order, read in place
 *	  through the primary key.
 *
 * The dedup probe walks a partition's window newest first whenever its
 * cache cannot answer, and the ack walks a lease's span to resolve
 * transactionIds; both visit every frame of every row.  Through SPI each
 * row was copied out of its page into a tuple table, behind a portal and a
 * plan: most of a walk's cost once the dedup cache no longer held the
 * window.  Here an index scan of log_txns_pkey hands over each row where it
 * lies, detoasting only hash blobs stored out of line.
 *
 * The snapshot is taken as a statement of the caller's would take it (a
 * command counter increment, then the transaction snapshot with the current
 * command id): the caller's own earlier writes are visible, and under READ
 * COMMITTED so are the rows the pusher whose lock we waited for committed
 * (under REPEATABLE READ that pusher's update of the partition row already
 * failed our lock with a serialization error).  The caller must be allowed
 * to SELECT from log_txns, as the statement would have checked.
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

/* log_txns's columns, as queen--1.1.sql creates them (log_rows.c checks) */
#define TXNS_ATT_BASE		2
#define TXNS_ATT_END		3
#define TXNS_ATT_CREATED	4
#define TXNS_ATT_HASHES		5

struct QueenTxnsWalk
{
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	pg_uuid_t	pid;
	int64		lo;
	int64		hi;
	bool		descending;
	bool		done;
	Pointer		detoasted;		/* the current row's hashes, if copied */
};

static void
queen_txns_scan(QueenTxnsWalk *w, StrategyNumber strategy, RegProcedure proc, int64 bound)
{
	ScanKeyData keys[2];

	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(&w->pid));
	ScanKeyInit(&keys[1], 2, strategy, proc, Int64GetDatum(bound));
	if (w->scan == NULL)
		w->scan = index_beginscan(w->heap, w->index, GetActiveSnapshot(), 2, 0);
	index_rescan(w->scan, keys, 2, NULL, 0);
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
	return queen_slot_int64(w->slot, att, "log_txns");
}

QueenTxnsWalk *
queen_txns_walk_begin(const pg_uuid_t *pid, int64 lo, int64 hi, bool descending)
{
	QueenTxnsWalk *w = palloc0(sizeof(QueenTxnsWalk));
	Oid			relid = queen_table_oid("log_txns");
	Oid			indexid;

	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, "log_txns");
	w->heap = table_open(relid, AccessShareLock);
	indexid = RelationGetPrimaryKeyIndex(w->heap);
	if (!OidIsValid(indexid) || RelationGetDescr(w->heap)->natts != 5)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"queen.log_txns\" is not as this version of queen created it"),
				 errhint("Drop and create the extension again.")));
	w->index = index_open(indexid, AccessShareLock);
	w->slot = table_slot_create(w->heap, NULL);
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
 * Walk [lo, hi] instead, from its start, in the walk's direction and under
 * its snapshot: several ranges of one partition cost one relation open and
 * one snapshot.
 */
void
queen_txns_walk_seek(QueenTxnsWalk *w, int64 lo, int64 hi)
{
	queen_txns_release(w);
	w->lo = lo;
	w->hi = hi;
	w->done = lo > hi;
	if (w->done)
		return;
	if (w->descending)
	{
		queen_txns_scan(w, BTLessEqualStrategyNumber, F_INT8LE, hi);
		return;
	}

	/* ascending: from the row that holds lo, if one starts below it */
	queen_txns_scan(w, BTLessEqualStrategyNumber, F_INT8LE, lo);
	if (index_getnext_slot(w->scan, BackwardScanDirection, w->slot) &&
		queen_txns_int64(w, TXNS_ATT_END) >= lo)
		queen_txns_scan(w, BTGreaterEqualStrategyNumber, F_INT8GE,
						queen_txns_int64(w, TXNS_ATT_BASE));
	else
		queen_txns_scan(w, BTGreaterEqualStrategyNumber, F_INT8GE, lo);
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
	if (w->done)
		return false;
	if (!index_getnext_slot(w->scan, w->descending ? BackwardScanDirection : ForwardScanDirection,
							w->slot))
	{
		w->done = true;
		return false;
	}
	row->base = queen_txns_int64(w, TXNS_ATT_BASE);
	end = queen_txns_int64(w, TXNS_ATT_END);
	if (w->descending ? end < w->lo : row->base > w->hi)
	{
		w->done = true;			/* rows hold disjoint ranges: nothing further is in [lo, hi] */
		return false;
	}
	if (w->descending ? row->base <= w->lo : end >= w->hi)
		w->done = true;			/* the last row that can hold any of them */
	d = slot_getattr(w->slot, TXNS_ATT_CREATED, &isnull);
	row->created_at = isnull ? DT_NOBEGIN : DatumGetTimestampTz(d);
	d = slot_getattr(w->slot, TXNS_ATT_HASHES, &isnull);
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
	queen_txns_release(w);
	if (w->scan != NULL)
		index_endscan(w->scan);
	ExecDropSingleTupleTableSlot(w->slot);
	index_close(w->index, NoLock);
	table_close(w->heap, NoLock);
	PopActiveSnapshot();
	pfree(w);
}
