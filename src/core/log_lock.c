/*-------------------------------------------------------------------------
 *
 * log_lock.c
 *	  The pre-lock of partitions whose ids are known, from C: a primary key
 *	  lookup and a row lock per partition, what SELECT ... FOR NO KEY UPDATE
 *	  does, without a statement; and what a pre-lock statement's row says,
 *	  for the paths that take the statement.
 *
 * Through SPI that statement was the largest piece of a one-message push:
 * its executor start-up alone cost more than the lookups and the lock
 * (a fifth of a lone push's statements; 13% of a backend's CPU pushing one
 * message per transaction).  This does what LockRows does for it:
 *
 *	- the rows are found with the snapshot a statement would take now, and
 *	  must all be there before any is locked, so that a stale id (a
 *	  partition deleted since it was cached) locks nothing and the caller
 *	  may still provision before it locks, as the name path does;
 *	- they are locked in ascending id order, the write path's lock order;
 *	- under READ COMMITTED a row updated since the snapshot is followed to
 *	  its newest version and that one is locked (what EvalPlanQual would
 *	  lock: the id, the only column the statement tested, is checked
 *	  again); under REPEATABLE READ and SERIALIZABLE such a row is the same
 *	  serialization failure the statement raises;
 *	- a row deleted under the lock is reported, and the caller resolves the
 *	  partition by name.
 *
 * The queue's dedup window comes from its row, read with the same snapshot
 * and not locked, as the statement's join read it.  Privileges are checked
 * as the statement's would be.  Where row-level security applies to either
 * table the statement must apply it: the caller is told to use one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "log_write_int.h"
#include "spi.h"

#include "access/genam.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* The columns the pre-lock reads of queues (of log_partitions: log_write_int.h). */
static const char *const queen_queue_columns[3] = {"id", "dedup_window_seconds",
"encryption_enabled"};

/* One table the pre-lock reads by its primary key. */
typedef struct QueenKeyedTable
{
	Relation	rel;
	Relation	pkey;
	TupleTableSlot *slot;
	IndexScanDesc scan;			/* begun at the first lookup, then rescanned */
} QueenKeyedTable;

/* Open a table and its primary key, which must be its uuid column "id". */
static void
queen_keyed_open(QueenKeyedTable *t, Oid relid, LOCKMODE mode, AttrNumber id,
				 const char *table)
{
	Oid			pkey;

	t->rel = table_open(relid, mode);
	pkey = RelationGetPrimaryKeyIndex(t->rel);
	if (!OidIsValid(pkey))
		queen_table_changed(table);
	t->pkey = index_open(pkey, AccessShareLock);
	if (t->pkey->rd_index->indnkeyatts != 1 || t->pkey->rd_index->indkey.values[0] != id ||
		TupleDescAttr(RelationGetDescr(t->rel), id - 1)->atttypid != UUIDOID)
		queen_table_changed(table);
	t->slot = table_slot_create(t->rel, NULL);
	t->scan = NULL;
}

static void
queen_keyed_close(QueenKeyedTable *t)
{
	if (t->scan != NULL)
		index_endscan(t->scan);
	ExecDropSingleTupleTableSlot(t->slot);
	index_close(t->pkey, NoLock);
	table_close(t->rel, NoLock);
}

/*
 * The version of the row with this id that snapshot sees, into t->slot;
 * false if there is none.  One scan serves every lookup of a bundle: a
 * B-tree scan's start allocates its page buffer, kilobytes each time.
 */
static bool
queen_keyed_fetch(QueenKeyedTable *t, const pg_uuid_t *id, Snapshot snapshot)
{
	ScanKeyData key;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_UUID_EQ, UUIDPGetDatum(id));
	if (t->scan == NULL)
		t->scan = index_beginscan(t->rel, t->pkey, snapshot, 1, 0);
	index_rescan(t->scan, &key, 1, NULL, 0);
	return index_getnext_slot(t->scan, ForwardScanDirection, t->slot);
}

/* Whether the uuid column attnum of slot is id. */
static bool
queen_slot_uuid_is(TupleTableSlot *slot, AttrNumber attnum, const pg_uuid_t *id)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, attnum, &isnull);

	return !isnull && memcmp(DatumGetUUIDP(d)->data, id->data, UUID_LEN) == 0;
}

static Datum
queen_slot_required(TupleTableSlot *slot, AttrNumber attnum)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, attnum, &isnull);

	if (isnull)
		elog(ERROR, "queen: column %d of a row the pre-lock reads is NULL", attnum);
	return d;
}

/*
 * Lock the row at *tid, as LockRows would for FOR NO KEY UPDATE; the locked
 * version is left in the slot.  False when the row is gone (deleted, or
 * updated into another id).
 */
static bool
queen_lock_row(QueenKeyedTable *parts, ItemPointer tid, Snapshot snapshot,
			   const pg_uuid_t *pid, AttrNumber id)
{
	TM_FailureData tmfd;
	TM_Result	result;
	uint8		flags = 0;

	if (!IsolationUsesXactSnapshot())
		flags |= TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
	result = table_tuple_lock(parts->rel, tid, snapshot, parts->slot,
							  GetCurrentCommandId(true), LockTupleNoKeyExclusive,
							  LockWaitBlock, flags, &tmfd);
	switch (result)
	{
		case TM_Ok:
			/* an update followed to a row of another id is not this partition */
			return !tmfd.traversed || queen_slot_uuid_is(parts->slot, id, pid);
		case TM_SelfModified:
			/* changed by a later command of ours: LockRows skips it too */
			return false;
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update")));
			if (result == TM_Deleted)
				return false;
			elog(ERROR, "queen: partition row updated although its newest version was asked for");
			break;
		default:
			elog(ERROR, "queen: unexpected result %d of a partition row lock", (int) result);
	}
	return false;
}

/*
 * Lock the partition rows of targets (their seg and pid set; distinct ids,
 * ascending) and fill in what the write path reads of them.  What came of
 * it is QUEEN_LOCK_ALL (every row locked and read), QUEEN_LOCK_NONE (a row
 * missing, nothing locked), QUEEN_LOCK_SOME (a row vanished while we
 * locked: some rows stay locked) or QUEEN_LOCK_STATEMENT (row-level
 * security applies: nothing done, a statement must lock them).
 */
QueenLockResult
queen_lock_partitions(QueenTarget **targets, int n)
{
	Oid			part_relid = queen_table_oid("log_partitions");
	Oid			queue_relid = queen_table_oid("queues");
	AttrNumber	cols[PART_NCOLUMNS];
	AttrNumber	queue_cols[3];
	RangeTblEntry *rtes[2];
	QueenKeyedTable parts;
	QueenKeyedTable queues;
	ItemPointerData *tids;
	Snapshot	snapshot;
	pg_uuid_t	last_queue;
	int32		last_window = 0;
	bool		last_encrypted = false;
	bool		have_queue = false;
	QueenLockResult result = QUEEN_LOCK_ALL;
	int			i;

	/* what the statement would refuse before it locked anything */
	PreventCommandIfReadOnly("queen.push");
	PreventCommandIfParallelMode("queen.push");

	queen_partition_attnums(part_relid, cols);
	queen_table_attnums(queue_relid, "queues", queen_queue_columns, 3, queue_cols);

	/* the statement's privilege checks: FOR UPDATE needs UPDATE on some column */
	rtes[0] = queen_rows_rte(part_relid, ACL_SELECT | ACL_UPDATE);
	for (i = PART_ID; i <= PART_CREATED_AT; i++)
		rtes[0]->selectedCols = bms_add_member(rtes[0]->selectedCols,
											   cols[i] - FirstLowInvalidHeapAttributeNumber);
	rtes[1] = queen_rows_rte(queue_relid, ACL_SELECT);
	for (i = 0; i < 3; i++)
		rtes[1]->selectedCols = bms_add_member(rtes[1]->selectedCols,
											   queue_cols[i] - FirstLowInvalidHeapAttributeNumber);
	ExecCheckRTPerms(list_make2(rtes[0], rtes[1]), true);

	queen_keyed_open(&parts, part_relid, RowShareLock, cols[PART_ID], "log_partitions");
	queen_keyed_open(&queues, queue_relid, AccessShareLock, queue_cols[0], "queues");
	if (queen_rows_rls_applies(parts.rel) || queen_rows_rls_applies(queues.rel))
	{
		queen_keyed_close(&queues);
		queen_keyed_close(&parts);
		return QUEEN_LOCK_STATEMENT;
	}

	/* the snapshot SPI would run the statement with, seeing our own writes */
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();
	snapshot = GetActiveSnapshot();

	/* every row there before any is locked */
	tids = palloc(sizeof(ItemPointerData) * n);
	for (i = 0; i < n && result == QUEEN_LOCK_ALL; i++)
	{
		if (queen_keyed_fetch(&parts, &targets[i]->pid, snapshot))
			ItemPointerCopy(&parts.slot->tts_tid, &tids[i]);
		else
			result = QUEEN_LOCK_NONE;
	}

	for (i = 0; i < n && result == QUEEN_LOCK_ALL; i++)
	{
		QueenTarget *t = targets[i];
		pg_uuid_t	qid;

		if (!queen_lock_row(&parts, &tids[i], snapshot, &t->pid, cols[PART_ID]))
		{
			result = i > 0 ? QUEEN_LOCK_SOME : QUEEN_LOCK_NONE;
			break;
		}
		t->tid = parts.slot->tts_tid;
		t->tid_valid = true;
		t->last_offset = DatumGetInt64(queen_slot_required(parts.slot, cols[PART_LAST_OFFSET]));
		t->txns_start = DatumGetInt64(queen_slot_required(parts.slot, cols[PART_TXNS_START]));
		t->generation = DatumGetTimestampTz(queen_slot_required(parts.slot, cols[PART_CREATED_AT]));
		qid = *DatumGetUUIDP(queen_slot_required(parts.slot, cols[PART_QUEUE_ID]));

		/* a bundle's partitions mostly share a queue: read it once */
		if (!have_queue || memcmp(qid.data, last_queue.data, UUID_LEN) != 0)
		{
			if (!queen_keyed_fetch(&queues, &qid, snapshot))
			{
				/* deleted with its partitions, which we would have seen gone */
				result = QUEEN_LOCK_SOME;
				break;
			}
			last_window = DatumGetInt32(queen_slot_required(queues.slot, queue_cols[1]));
			last_encrypted = DatumGetBool(queen_slot_required(queues.slot, queue_cols[2]));
			last_queue = qid;
			have_queue = true;
		}
		t->queue_window = last_window;
		t->queue_encrypted = last_encrypted;
		t->window = t->seg->window_set ? t->seg->window_in : last_window;
	}

	/* the scans go before the snapshot they were begun with */
	queen_keyed_close(&queues);
	queen_keyed_close(&parts);
	PopActiveSnapshot();
	pfree(tids);
	return result;
}

/* The pre-lock's ctid column: where the row it locked lies. */
static void
queen_get_tid(HeapTuple tuple, TupleDesc desc, int col, QueenTarget *t)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	t->tid_valid = !isnull;
	if (!isnull)
		ItemPointerCopy((ItemPointer) DatumGetPointer(d), &t->tid);
}

/* What a pre-lock statement's row (its columns 3 to 8) says of t's partition. */
void
queen_target_from_row(QueenTarget *t, HeapTuple tuple, TupleDesc desc)
{
	t->queue_window = queen_get_int32(tuple, desc, 3);
	t->window = t->seg->window_set ? t->seg->window_in : t->queue_window;
	t->last_offset = queen_get_int64(tuple, desc, 4);
	t->txns_start = queen_get_int64(tuple, desc, 5);
	t->generation = queen_get_timestamptz(tuple, desc, 6);
	queen_get_tid(tuple, desc, 7, t);
	t->queue_encrypted = queen_get_bool(tuple, desc, 8);
}
