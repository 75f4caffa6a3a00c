/*-------------------------------------------------------------------------
 *
 * log_rows.c
 *	  The rows of a write, written from C: the allocator's update of the
 *	  pre-locked partition rows, and the segment and hash rows.
 *
 * The segment and hash rows are inserted the way COPY FROM inserts them:
 * table_tuple_insert and the table's index entries, without a statement,
 * a plan or the executor's per-row machinery, which was a third of a
 * shard's CPU per segment.  The table's constraints are checked only when
 * it has one the write path does not ensure by itself.
 *
 * Row triggers are not fired.  The only one these tables have is the
 * foreign key check of log_segments.partition_id, and it has nothing to
 * check: every row written here belongs to a partition row this
 * transaction holds locked for update (the pre-lock, or the allocator UPDATE
 * just before), so the partition exists and cannot be deleted before we
 * commit.
 * Its ON DELETE CASCADE is unaffected.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "log_write_int.h"
#include "spi.h"

#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

typedef struct QueenRowTable
{
	Relation	rel;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	bool		checks;			/* a constraint the write path does not ensure */
} QueenRowTable;

/* log_segments's columns, as queen--1.2.sql creates them, in its order */
#define SEGMENT_NCOLUMNS 6
static const char *const queen_segment_columns[SEGMENT_NCOLUMNS] =
{"partition_id", "base_offset", "end_offset", "created_at", "blob", "hashes"};

/* the CHECK constraints queen--1.2.sql makes, which the write path ensures */
static const char *const queen_segment_checks[2] =
{"log_segments_range_check", "log_segments_stride_check"};
static const char *const queen_partition_check = "log_partitions_name_check";

/* A trigger someone created on rel (the foreign keys' own are internal); NULL if none. */
static const char *
queen_rows_user_trigger(Relation rel)
{
	TriggerDesc *trigdesc = rel->trigdesc;
	int			i;

	for (i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
		if (!trigdesc->triggers[i].tgisinternal)
			return trigdesc->triggers[i].tgname;
	return NULL;
}

/* Whether row-level security on rel applies to the current user. */
bool
queen_rows_rls_applies(Relation rel)
{
	return rel->rd_rel->relrowsecurity &&
		check_enable_rls(RelationGetRelid(rel), InvalidOid, false) == RLS_ENABLED;
}

/*
 * The rows are inserted the way COPY does, but without firing triggers or
 * applying row-level security, which a statement would.  Rather than
 * silently bypass either, a push refuses to write when the table has one
 * that would apply.
 */
static void
queen_rows_refuse_bypass(Relation rel)
{
	const char *trigger = queen_rows_user_trigger(rel);

	if (trigger != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"queen.%s\" has trigger \"%s\", which pushes would not fire",
						RelationGetRelationName(rel), trigger),
				 errdetail("Queen writes its log tables directly; a trigger on them would be silently skipped, so no push is written while one exists."),
				 errhint("Drop the trigger; consume the queue instead of reacting to inserts.")));
	if (queen_rows_rls_applies(rel))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("row-level security on table \"queen.%s\" applies to role \"%s\", and pushes cannot apply it",
						RelationGetRelationName(rel), GetUserNameFromId(GetUserId(), false)),
				 errdetail("Queen writes its log tables directly, so policies would be bypassed; no push is written while they apply."),
				 errhint("Control who may push with GRANT and REVOKE on the queen functions and tables, and disable row-level security on queen's tables.")));
}

/*
 * Whether a write to rel must check the table's constraints: only when it
 * has a CHECK constraint other than queen--1.2.sql's own (own, n of them).  The
 * write path ensures that one by construction (a segment's range from its
 * validated msg_count, the hash blob's stride validated against it, a
 * partition's name untouched by the allocator), and no column is written
 * NULL; checking it would only cost, since its expression is read and
 * prepared again for every push (a tenth of a one-message push's inserts).
 */
static bool
queen_rows_need_checks(Relation rel, const char *const *own, int n)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	int			i;
	int			j;

	for (i = 0; constr != NULL && i < constr->num_check; i++)
	{
		for (j = 0; j < n; j++)
			if (strcmp(constr->check[i].ccname, own[j]) == 0)
				break;
		if (j == n)
			return true;
	}
	return false;
}

static void
queen_rows_open(QueenRowTable *t, Oid relid, Index rti)
{
	TupleDesc	desc;
	int			i;

	t->rel = table_open(relid, RowExclusiveLock);
	desc = RelationGetDescr(t->rel);
	for (i = 0; i < SEGMENT_NCOLUMNS; i++)
	{
		if (desc->natts != SEGMENT_NCOLUMNS || TupleDescAttr(desc, i)->attisdropped ||
			strcmp(NameStr(TupleDescAttr(desc, i)->attname), queen_segment_columns[i]) != 0)
			queen_table_changed(RelationGetRelationName(t->rel));
	}
	queen_rows_refuse_bypass(t->rel);
	t->checks = queen_rows_need_checks(t->rel, queen_segment_checks,
									   lengthof(queen_segment_checks));
	t->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(t->rri, t->rel, rti, NULL, 0);
	ExecOpenIndices(t->rri, false);
	t->slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
}

static void
queen_rows_put(QueenRowTable *t, EState *estate, CommandId cid, const pg_uuid_t *pid,
			   const QueenSegment *seg)
{
	TupleTableSlot *slot = t->slot;

	ExecClearTuple(slot);
	slot->tts_values[0] = UUIDPGetDatum(pid);
	slot->tts_values[1] = Int64GetDatum(seg->base_offset);
	slot->tts_values[2] = Int64GetDatum(seg->base_offset + seg->msg_count - 1);
	slot->tts_values[3] = TimestampTzGetDatum(seg->created_at);
	slot->tts_values[4] = PointerGetDatum(seg->blob);
	slot->tts_values[5] = PointerGetDatum(seg->hashes);
	memset(slot->tts_isnull, false, sizeof(bool) * SEGMENT_NCOLUMNS);
	ExecStoreVirtualTuple(slot);

	if (t->checks)
		ExecConstraints(t->rri, slot, estate);
	table_tuple_insert(t->rel, slot, cid, 0, NULL);
	ExecInsertIndexTuples(t->rri, slot, estate, false, false, NULL, NIL);
	ResetPerTupleExprContext(estate);
}

static void
queen_rows_close(QueenRowTable *t)
{
	ExecDropSingleTupleTableSlot(t->slot);
	ExecCloseIndices(t->rri);
	table_close(t->rel, NoLock);
}

static const char *const queen_partition_columns[PART_NCOLUMNS] =
{"id", "queue_id", "last_offset", "txns_start", "created_at",
"oldest_live_at", "oldest_txn_at", "last_write_at"};

/* What the row update writes: last_offset and the three times. */
static const QueenPartitionColumn queen_partition_written[] =
{PART_LAST_OFFSET, PART_OLDEST_LIVE, PART_OLDEST_TXN, PART_LAST_WRITE};

/* Every column of QueenPartitionColumn's, of log_partitions (relid). */
void
queen_partition_attnums(Oid relid, AttrNumber *attnums)
{
	queen_table_attnums(relid, "log_partitions", queen_partition_columns, PART_NCOLUMNS, attnums);
}

/*
 * A range table entry for a direct write to relid, as a statement's would
 * be, for its privilege check (ExecCheckRTPerms).
 */
RangeTblEntry *
queen_rows_rte(Oid relid, AclMode perms)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);

	rte->rtekind = RTE_RELATION;
	rte->relid = relid;
	rte->relkind = RELKIND_RELATION;
	rte->rellockmode = RowExclusiveLock;
	rte->requiredPerms = perms;
	return rte;
}

/*
 * The partition row a push leaves: last_offset advanced by the segment's
 * messages, the first-write times set if unset, last_write_at moved if it
 * is a quantum old.  Stored in newslot; the row's old last_offset, or -1
 * when oldslot is not the target's row.
 */
static int64
queen_partition_advanced(TupleTableSlot *oldslot, TupleTableSlot *newslot,
						 const AttrNumber *attnums, const QueenTarget *t, TimestampTz now)
{
	Datum	   *values = newslot->tts_values;
	bool	   *isnull = newslot->tts_isnull;
	int			natts = oldslot->tts_tupleDescriptor->natts;
	int64		last;

	slot_getallattrs(oldslot);
	if (oldslot->tts_isnull[attnums[PART_ID] - 1] ||
		oldslot->tts_isnull[attnums[PART_LAST_OFFSET] - 1] ||
		oldslot->tts_isnull[attnums[PART_LAST_WRITE] - 1] ||
		memcmp(DatumGetUUIDP(oldslot->tts_values[attnums[PART_ID] - 1]), &t->pid,
			   sizeof(pg_uuid_t)) != 0)
		return -1;

	ExecClearTuple(newslot);
	memcpy(values, oldslot->tts_values, sizeof(Datum) * natts);
	memcpy(isnull, oldslot->tts_isnull, sizeof(bool) * natts);
	last = DatumGetInt64(values[attnums[PART_LAST_OFFSET] - 1]);
	values[attnums[PART_LAST_OFFSET] - 1] = Int64GetDatum(last + t->seg->msg_count);
	if (isnull[attnums[PART_OLDEST_LIVE] - 1])
	{
		values[attnums[PART_OLDEST_LIVE] - 1] = TimestampTzGetDatum(now);
		isnull[attnums[PART_OLDEST_LIVE] - 1] = false;
	}
	if (isnull[attnums[PART_OLDEST_TXN] - 1])
	{
		values[attnums[PART_OLDEST_TXN] - 1] = TimestampTzGetDatum(now);
		isnull[attnums[PART_OLDEST_TXN] - 1] = false;
	}
	if (now - DatumGetTimestampTz(values[attnums[PART_LAST_WRITE] - 1]) >
		QUEEN_LAST_WRITE_QUANTUM_SECS * USECS_PER_SEC)
		values[attnums[PART_LAST_WRITE] - 1] = TimestampTzGetDatum(now);
	ExecStoreVirtualTuple(newslot);
	return last;
}

/*
 * The allocator's update of pre-locked partition rows, from C: what the
 * UPDATE statement of log_write.c (sql_write) does to each row, last_offset
 * moved past the segment, the oldest_* stamped on the empty -> non-empty
 * transition, last_write_at rewritten when over 10 seconds old, without a
 * plan.  That statement's plan was the part of a push most at the mercy of
 * the planner (a hash join over a sequential scan of log_partitions at a
 * few thousand partitions), and its executor a tenth of a shard's CPU.
 *
 * Each row is updated where the pre-lock found it (its ctid): this
 * transaction holds it locked, so no one else can have moved it.  Should
 * it not be there after all (the update reports anything but success), the
 * target is left PENDING, and the caller runs the statement for it.  So is
 * every target when the table has a user trigger or row-level security,
 * which a statement honours.  The update is checked against the UPDATE
 * privilege as the statement would be, its index entries are made as the
 * executor makes them (none for a HOT update), and the table's CHECK
 * constraints are checked when one could fail (queen_rows_need_checks).
 * Foreign-key triggers are not fired: the update changes no key.
 */
void
queen_update_partitions(QueenTarget **targets, int n, TimestampTz now)
{
	Oid			relid = queen_table_oid("log_partitions");
	RangeTblEntry *rte;
	EState	   *estate;
	Relation	rel;
	ResultRelInfo *rri;
	TupleDesc	desc;
	TupleTableSlot *oldslot;
	TupleTableSlot *newslot;
	AttrNumber	attnums[PART_NCOLUMNS];
	CommandId	cid;
	bool		checks;
	bool		indexes_open = false;
	int			i;

	for (i = 0; i < n; i++)
		if (!targets[i]->tid_valid)
			return;

	PreventCommandIfReadOnly("queen.push");
	PreventCommandIfParallelMode("queen.push");
	estate = CreateExecutorState();
	rte = queen_rows_rte(relid, ACL_SELECT | ACL_UPDATE);
	queen_partition_attnums(relid, attnums);
	rte->selectedCols = bms_add_member(rte->selectedCols,
									   attnums[PART_ID] - FirstLowInvalidHeapAttributeNumber);
	for (i = 0; i < (int) lengthof(queen_partition_written); i++)
	{
		int			col = attnums[queen_partition_written[i]] - FirstLowInvalidHeapAttributeNumber;

		rte->selectedCols = bms_add_member(rte->selectedCols, col);
		rte->updatedCols = bms_add_member(rte->updatedCols, col);
	}
	ExecCheckRTPerms(list_make1(rte), true);
	ExecInitRangeTable(estate, list_make1(rte));

	rel = table_open(relid, RowExclusiveLock);
	/* what a statement would honour and this would not: leave it the statement */
	if (queen_rows_user_trigger(rel) != NULL || queen_rows_rls_applies(rel))
	{
		table_close(rel, NoLock);
		FreeExecutorState(estate);
		return;
	}
	desc = RelationGetDescr(rel);
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 1, NULL, 0);
	checks = queen_rows_need_checks(rel, &queen_partition_check, 1);
	oldslot = table_slot_create(rel, NULL);
	newslot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	cid = GetCurrentCommandId(true);

	for (i = 0; i < n; i++)
	{
		QueenTarget *t = targets[i];
		TM_FailureData tmfd;
		LockTupleMode lockmode;
		bool		update_indexes;
		int64		last;

		if (!table_tuple_fetch_row_version(rel, &t->tid, SnapshotAny, oldslot))
			continue;
		last = queen_partition_advanced(oldslot, newslot, attnums, t, now);
		if (last < 0)
			continue;

		if (checks)
			ExecConstraints(rri, newslot, estate);
		if (table_tuple_update(rel, &t->tid, newslot, cid, InvalidSnapshot, InvalidSnapshot,
							   true, &tmfd, &lockmode, &update_indexes) != TM_Ok)
			continue;
		/* a HOT update, most of them, needs no index entry, nor its indexes opened */
		if (update_indexes)
		{
			if (!indexes_open)
				ExecOpenIndices(rri, false);
			indexes_open = true;
			ExecInsertIndexTuples(rri, newslot, estate, true, false, NULL, NIL);
		}
		ResetPerTupleExprContext(estate);

		t->seg->base_offset = last + 1;
		t->seg->created_at = now;
		t->seg->status = QUEEN_SEGMENT_QUEUED;
	}

	ExecDropSingleTupleTableSlot(oldslot);
	ExecDropSingleTupleTableSlot(newslot);
	if (indexes_open)
		ExecCloseIndices(rri);
	table_close(rel, NoLock);
	FreeExecutorState(estate);

	/* a statement that follows (the rest, a probe, the next push) sees the rows */
	CommandCounterIncrement();
}

/*
 * Insert the segment rows of targets, which the allocator placed: one row
 * each, its frames and their transactionId hashes (1.0 wrote the hashes to
 * a second table, log_txns: a heap and a B-tree insert more per push).
 */
void
queen_insert_rows(QueenTarget **targets, int n)
{
	EState	   *estate;
	Oid			relid = queen_table_oid("log_segments");
	List	   *rtable;
	QueenRowTable segments;
	CommandId	cid;
	int			i;

	/* what a statement checks first: these are writes */
	PreventCommandIfReadOnly("queen.push");
	PreventCommandIfParallelMode("queen.push");
	estate = CreateExecutorState();
	cid = GetCurrentCommandId(true);

	/* the same INSERT privilege check a statement makes */
	rtable = list_make1(queen_rows_rte(relid, ACL_INSERT));
	ExecCheckRTPerms(rtable, true);
	ExecInitRangeTable(estate, rtable);

	queen_rows_open(&segments, relid, 1);
	for (i = 0; i < n; i++)
		queen_rows_put(&segments, estate, cid, &targets[i]->pid, targets[i]->seg);
	queen_rows_close(&segments);
	FreeExecutorState(estate);

	/* what comes next in this transaction (a probe, a resolve) sees the rows */
	CommandCounterIncrement();
}
