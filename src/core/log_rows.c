/*-------------------------------------------------------------------------
 *
 * log_rows.c
 *	  The segment and hash rows of a write, inserted from C.
 *
 * The segment and hash rows are inserted the way COPY FROM inserts them:
 * table_tuple_insert, the table's CHECK and NOT NULL constraints, and its
 * index entries, without a statement, a plan or the executor's per-row
 * machinery.  That was a third of a shard's CPU per segment.
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
#include "queen.h"
#include "log_write_int.h"
#include "spi.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"

typedef struct QueenRowTable
{
	Relation	rel;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
} QueenRowTable;

/* the first four columns of both tables; the fifth is the table's data */
static const char *const queen_row_columns[4] =
{"partition_id", "base_offset", "end_offset", "created_at"};

/*
 * The rows are inserted the way COPY does, but without firing triggers or
 * applying row-level security, which a statement would.  Rather than
 * silently bypass either, a push refuses to write when the table has one
 * that would apply: a trigger someone created (the foreign key's own are
 * internal), or row-level security that applies to the current user.
 */
static void
queen_rows_refuse_bypass(Relation rel)
{
	TriggerDesc *trigdesc = rel->trigdesc;
	int			i;

	for (i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		if (trigdesc->triggers[i].tgisinternal)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"queen.%s\" has trigger \"%s\", which pushes would not fire",
						RelationGetRelationName(rel), trigdesc->triggers[i].tgname),
				 errdetail("Queen writes its log tables directly; a trigger on them would be silently skipped, so no push is written while one exists."),
				 errhint("Drop the trigger; consume the queue instead of reacting to inserts.")));
	}
	if (rel->rd_rel->relrowsecurity &&
		check_enable_rls(RelationGetRelid(rel), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("row-level security on table \"queen.%s\" applies to role \"%s\", and pushes cannot apply it",
						RelationGetRelationName(rel), GetUserNameFromId(GetUserId(), false)),
				 errdetail("Queen writes its log tables directly, so policies would be bypassed; no push is written while they apply."),
				 errhint("Control who may push with GRANT and REVOKE on the queen functions and tables, and disable row-level security on queen's tables.")));
}

static void
queen_rows_open(QueenRowTable *t, Oid relid, Index rti, const char *last_column)
{
	TupleDesc	desc;
	int			i;

	t->rel = table_open(relid, RowExclusiveLock);
	desc = RelationGetDescr(t->rel);
	/* the columns as queen--1.0.sql creates them, in its order */
	for (i = 0; i < 5; i++)
	{
		const char *want = i < 4 ? queen_row_columns[i] : last_column;

		if (desc->natts != 5 || TupleDescAttr(desc, i)->attisdropped ||
			strcmp(NameStr(TupleDescAttr(desc, i)->attname), want) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"queen.%s\" does not have the columns this version of queen writes",
							RelationGetRelationName(t->rel)),
					 errhint("Drop and create the extension again.")));
	}
	queen_rows_refuse_bypass(t->rel);
	t->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(t->rri, t->rel, rti, NULL, 0);
	ExecOpenIndices(t->rri, false);
	t->slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
}

static void
queen_rows_put(QueenRowTable *t, EState *estate, CommandId cid, const pg_uuid_t *pid,
			   int64 base, int64 last, TimestampTz stamp, bytea *data)
{
	TupleTableSlot *slot = t->slot;

	ExecClearTuple(slot);
	slot->tts_values[0] = UUIDPGetDatum(pid);
	slot->tts_values[1] = Int64GetDatum(base);
	slot->tts_values[2] = Int64GetDatum(last);
	slot->tts_values[3] = TimestampTzGetDatum(stamp);
	slot->tts_values[4] = PointerGetDatum(data);
	memset(slot->tts_isnull, false, sizeof(bool) * 5);
	ExecStoreVirtualTuple(slot);

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

/* Insert the segment and hash rows of targets, which the allocator placed. */
void
queen_insert_rows(QueenTarget **targets, int n)
{
	EState	   *estate;
	Oid			relids[2] = {queen_table_oid("log_segments"), queen_table_oid("log_txns")};
	List	   *rtable = NIL;
	QueenRowTable segments;
	QueenRowTable txns;
	CommandId	cid;
	int			i;

	/* what a statement checks first: these are writes */
	PreventCommandIfReadOnly("queen.push");
	PreventCommandIfParallelMode("queen.push");
	estate = CreateExecutorState();
	cid = GetCurrentCommandId(true);

	/* the same INSERT privilege check a statement makes */
	for (i = 0; i < 2; i++)
	{
		RangeTblEntry *rte = makeNode(RangeTblEntry);

		rte->rtekind = RTE_RELATION;
		rte->relid = relids[i];
		rte->relkind = RELKIND_RELATION;
		rte->rellockmode = RowExclusiveLock;
		rte->requiredPerms = ACL_INSERT;
		rtable = lappend(rtable, rte);
	}
	ExecCheckRTPerms(rtable, true);
	ExecInitRangeTable(estate, rtable);

	queen_rows_open(&segments, relids[0], 1, "blob");
	queen_rows_open(&txns, relids[1], 2, "hashes");
	for (i = 0; i < n; i++)
	{
		QueenSegment *seg = targets[i]->seg;
		int64		last = seg->base_offset + seg->msg_count - 1;

		queen_rows_put(&segments, estate, cid, &targets[i]->pid, seg->base_offset, last,
					   seg->created_at, seg->blob);
		queen_rows_put(&txns, estate, cid, &targets[i]->pid, seg->base_offset, last,
					   seg->created_at, seg->hashes);
	}
	queen_rows_close(&segments);
	queen_rows_close(&txns);
	FreeExecutorState(estate);

	/* what comes next in this transaction (a probe, a resolve) sees the rows */
	CommandCounterIncrement();
}
