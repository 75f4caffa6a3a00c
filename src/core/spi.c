/*-------------------------------------------------------------------------
 *
 * spi.c
 *	  Statements prepared once per process, and the small helpers around
 *	  SPI, the catalog and process-lived hash tables that the log, queue
 *	  configuration and queen.read share.
 *
 * Statements are prepared once per process and kept (SPI_keepplan); the
 * plan cache replans them by itself if the tables are recreated or their
 * statistics change, and this file replans them when the tables outgrow
 * what the plans were made for (queen_plans_follow_growth).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "spi.h"

#include "access/relation.h"
#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/rel.h"

/*
 * The tables Queen's statements read and write, watched for growth.  The
 * planner takes a table's size from its file when it plans, and an empty
 * or never-analyzed table as ten pages.
 */
static const char *const queen_watched_tables[] =
{
	"queues", "log_partitions", "log_segments", "log_txns", "log_consumers",
	"consumer_groups_metadata", "consumer_watermarks", "log_dlq", "spool_drained",
	"log_dedup"
};

#define QUEEN_NWATCHED				((int) lengthof(queen_watched_tables))
#define QUEEN_PLANNED_MIN_BLOCKS	10

/* each table's size the plans assume (blocks, at least ten); 0: not read yet */
static BlockNumber queen_planned_blocks[QUEEN_NWATCHED];
static TimestampTz queen_sizes_checked_at = 0;

/*
 * Prepare a statement for the life of the process.  Must be called between
 * SPI_connect and SPI_finish.
 *
 * Plans are generic: planned once, not again for every call with new
 * arguments (which dominated the CPU of a small push), and replanned by the
 * plan cache when the tables' statistics change.  A statement read through
 * a cursor that usually stops early is planned for its first rows, so it
 * walks the primary key in order instead of sorting everything up front.
 */
SPIPlanPtr
queen_keep_plan(const char *sql, int nargs, Oid *argtypes, bool first_rows)
{
	int			options = CURSOR_OPT_GENERIC_PLAN;
	SPIPlanPtr	plan;

	if (first_rows)
		options |= CURSOR_OPT_FAST_PLAN;
	plan = SPI_prepare_cursor(sql, nargs, argtypes, options);

	if (plan == NULL)
		elog(ERROR, "queen: could not prepare statement: %s",
			 SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "queen: could not keep a prepared statement");
	return plan;
}

/*
 * A statement kept for the life of the process but planned for each call
 * with its arguments' values, for one whose best plan depends on them (a
 * time bound that leaves a few rows of a big table, or all of them).
 */
SPIPlanPtr
queen_keep_custom_plan(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, argtypes, CURSOR_OPT_CUSTOM_PLAN);

	if (plan == NULL || SPI_keepplan(plan) != 0)
		elog(ERROR, "queen: could not prepare statement: %s",
			 SPI_result_code_string(SPI_result));
	return plan;
}

/*
 * The plan kept in *plan, prepared on first use.  Must be called between
 * SPI_connect and SPI_finish.
 */
SPIPlanPtr
queen_plan_once(SPIPlanPtr *plan, const char *sql, int nargs, Oid *argtypes,
				bool first_rows)
{
	if (*plan == NULL)
		*plan = queen_keep_plan(sql, nargs, argtypes, first_rows);
	return *plan;
}

/*
 * Run a statement of a table, prepared at its first run; raises when the
 * result is not expected (an SPI_OK_* code).  Returns how many rows it
 * processed.
 */
int
queen_stmt_run(QueenStmt *stmt, Datum *values, const char *nulls, bool read_only,
			   int expected, const char *what)
{
	int			rc;

	if (stmt->plan == NULL)
		stmt->plan = queen_keep_plan(stmt->sql, stmt->nargs, stmt->types, false);
	rc = SPI_execute_plan(stmt->plan, values, nulls, read_only, 0);
	if (rc != expected)
		elog(ERROR, "queen: %s failed: %s", what, SPI_result_code_string(rc));
	return (int) SPI_processed;
}

/*
 * Replan when the tables have outgrown the plans.  The plans are generic and
 * kept for the life of the process, and PostgreSQL replans them only when a
 * table's statistics change (ANALYZE, VACUUM).  A process whose first push
 * or pop met a new, nearly empty log (a fresh install, a TRUNCATE) would
 * otherwise keep plans made for ten pages (a hash join over a sequential
 * scan of log_partitions for the allocator, the pre-lock probing each name
 * among all of a queue's partitions) until autovacuum's first ANALYZE, a
 * minute or more of pushes costing milliseconds each at a few thousand
 * partitions.  So, at most once a second, a process reads the size of each
 * table, and when one has doubled since it last planned, it marks every
 * plan it caches for replanning (ResetPlanCache, what DISCARD PLANS and a
 * lost invalidation do), which happens at each plan's next use.  A table
 * growing from ten pages to a million is log2 of that, 17 replans.  A table
 * held locked by someone else (a TRUNCATE, a VACUUM FULL) is passed over.
 */
static void
queen_plans_follow_growth(void)
{
	TimestampTz now = GetCurrentTimestamp();
	BlockNumber blocks[QUEEN_NWATCHED];
	bool		grown = false;
	Oid			nsp;
	int			i;

	if (now - queen_sizes_checked_at < USECS_PER_SEC)
		return;
	queen_sizes_checked_at = now;
	nsp = get_namespace_oid("queen", true);
	if (!OidIsValid(nsp))
		return;
	for (i = 0; i < QUEEN_NWATCHED; i++)
	{
		Oid			relid = get_relname_relid(queen_watched_tables[i], nsp);
		Relation	rel;

		blocks[i] = InvalidBlockNumber;
		if (!OidIsValid(relid) || !ConditionalLockRelationOid(relid, AccessShareLock))
			continue;
		rel = try_relation_open(relid, NoLock);
		if (rel == NULL)
		{
			UnlockRelationOid(relid, AccessShareLock);
			continue;
		}
		blocks[i] = Max(RelationGetNumberOfBlocks(rel), QUEEN_PLANNED_MIN_BLOCKS);
		relation_close(rel, AccessShareLock);
		if (queen_planned_blocks[i] != 0 && blocks[i] / 2 >= queen_planned_blocks[i])
			grown = true;
	}
	if (grown)
	{
		elog(DEBUG1, "queen: a table grew to twice the size its plans were made for; replanning");
		ResetPlanCache();
	}
	for (i = 0; i < QUEEN_NWATCHED; i++)
	{
		if (blocks[i] == InvalidBlockNumber)
			continue;
		/* a table that shrank was replanned by its VACUUM or TRUNCATE */
		if (grown || queen_planned_blocks[i] == 0 || blocks[i] < queen_planned_blocks[i])
			queen_planned_blocks[i] = blocks[i];
	}
}

void
queen_spi_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "queen: SPI_connect failed");
	queen_plans_follow_growth();
}

/* Run a kept plan (a fresh snapshot) and insist on the result it gives. */
void
queen_exec(SPIPlanPtr plan, Datum *values, int expected, const char *what)
{
	int			rc = SPI_execute_plan(plan, values, NULL, false, 0);

	if (rc != expected)
		elog(ERROR, "queen: %s failed: %s", what, SPI_result_code_string(rc));
}

/* A table of schema queen, for code that opens it directly rather than by a statement. */
Oid
queen_table_oid(const char *name)
{
	Oid			relid = get_relname_relid(name, get_namespace_oid("queen", false));

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"queen.%s\" does not exist", name)));
	return relid;
}

/* queen.<table> is not as this version's queen--1.2.sql creates it. */
void
queen_table_changed(const char *table)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("table \"queen.%s\" does not have the columns this version of queen uses",
					table),
			 errhint("Drop and create the extension again.")));
}

/* The attribute numbers of columns of queen.<table> (relid), which must all exist. */
void
queen_table_attnums(Oid relid, const char *table, const char *const *columns, int n,
					AttrNumber *attnums)
{
	int			i;

	for (i = 0; i < n; i++)
	{
		attnums[i] = get_attnum(relid, columns[i]);
		if (attnums[i] == InvalidAttrNumber)
			queen_table_changed(table);
	}
}

/*
 * A hash table that lives for the process in a memory context of its own
 * (*cxt, under TopMemoryContext): made there at the first call, and at any
 * later call emptied together with everything else in that context, which
 * is how the caches built on it give their memory back when full.  name
 * names both and must be a constant string.
 */
HTAB *
queen_process_hash(const char *name, Size keysize, Size entrysize, long nelem,
				   MemoryContext *cxt)
{
	/* the macro wants a literal it can see; every caller passes one */
	if (*cxt == NULL)
		*cxt = AllocSetContextCreateInternal(TopMemoryContext, name, ALLOCSET_DEFAULT_SIZES);
	else
		MemoryContextReset(*cxt);
	return queen_hash_create(name, keysize, entrysize, nelem, *cxt);
}

/* A hash table in cxt whose keys are compared as bytes. */
HTAB *
queen_hash_create(const char *name, Size keysize, Size entrysize, long nelem,
				  MemoryContext cxt)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = keysize;
	ctl.entrysize = entrysize;
	ctl.hcxt = cxt;
	return hash_create(name, nelem, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

Datum
queen_array_datum(Datum *elems, int n, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(elems, n, elemtype,
										   typlen, typbyval, typalign));
}

/* A column Queen's statements never return NULL in. */
static Datum
queen_get_datum(HeapTuple tuple, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);

	if (isnull)
		elog(ERROR, "queen: unexpected NULL in column %d", col);
	return d;
}

int64
queen_get_int64(HeapTuple tuple, TupleDesc desc, int col)
{
	return DatumGetInt64(queen_get_datum(tuple, desc, col));
}

int32
queen_get_int32(HeapTuple tuple, TupleDesc desc, int col)
{
	return DatumGetInt32(queen_get_datum(tuple, desc, col));
}

bool
queen_get_bool(HeapTuple tuple, TupleDesc desc, int col)
{
	return DatumGetBool(queen_get_datum(tuple, desc, col));
}

TimestampTz
queen_get_timestamptz(HeapTuple tuple, TupleDesc desc, int col)
{
	return (TimestampTz) queen_get_int64(tuple, desc, col);	/* same representation */
}

void
queen_get_uuid(HeapTuple tuple, TupleDesc desc, int col, pg_uuid_t *out)
{
	memcpy(out, DatumGetUUIDP(queen_get_datum(tuple, desc, col)), sizeof(pg_uuid_t));
}

/*
 * An int64 column of a row read in place (an index scan's slot) of table
 * queen.<table>, where NULL never belongs.
 */
int64
queen_slot_int64(TupleTableSlot *slot, int att, const char *table)
{
	bool		isnull;
	Datum		d = slot_getattr(slot, att, &isnull);

	if (isnull)
		elog(ERROR, "queen: unexpected NULL in queen.%s column %d", table, att);
	return DatumGetInt64(d);
}

/*
 * A listing: its total (count's one bigint) and, when there is one and
 * limit > 0, its page, run into SPI_tuptable for the caller to copy (true).
 * Between queen_spi_connect and SPI_finish.
 */
bool
queen_spi_listing(SPIPlanPtr count, SPIPlanPtr page, Datum *values, const char *nulls,
				  int limit, int64 *total)
{
	if (SPI_execute_plan(count, values, nulls, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "queen: a listing's count failed");
	*total = queen_get_int64(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (*total == 0 || limit <= 0)
		return false;
	if (SPI_execute_plan(page, values, nulls, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "queen: a listing's page failed");
	return true;
}

/* One column into its member, by the column's type. */
static void
queen_spi_copy_column(HeapTuple tuple, TupleDesc desc, int col, char *member,
					  MemoryContext cxt)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, col, &isnull);
	Oid			type = SPI_gettypeid(desc, col);

	switch (type)
	{
		case TEXTOID:
		case VARCHAROID:
			*(char **) member = isnull ? NULL : MemoryContextStrdup(cxt, TextDatumGetCString(d));
			break;
		case UUIDOID:
			if (!isnull)
				memcpy(member, DatumGetUUIDP(d), sizeof(pg_uuid_t));
			break;
		case INT4OID:
			*(int32 *) member = isnull ? 0 : DatumGetInt32(d);
			break;
		case INT8OID:
		case TIMESTAMPTZOID:
			*(int64 *) member = isnull ? 0 : DatumGetInt64(d);
			break;
		case TEXTARRAYOID:
			{
				QueenTexts *t = (QueenTexts *) member;
				Datum	   *elems;
				int			i;

				t->n = 0;
				t->items = NULL;
				if (isnull)
					break;
				deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
								  &elems, NULL, &t->n);
				t->items = MemoryContextAlloc(cxt, sizeof(char *) * Max(t->n, 1));
				for (i = 0; i < t->n; i++)
					t->items[i] = MemoryContextStrdup(cxt, TextDatumGetCString(elems[i]));
				break;
			}
		default:
			elog(ERROR, "queen: a listing's column %d has a type it cannot copy (%u)", col, type);
	}
}

/*
 * Every row SPI returned, as structs of size bytes in cxt (zeroed, so a
 * NULL uuid is zeros): column i into the member at offsets[i], by the
 * column's type (text, varchar: char *, uuid: pg_uuid_t, integer: int32, bigint
 * and timestamptz: int64, text[]: QueenTexts).  The SELECT list and the
 * offsets are one description of the result.
 */
void *
queen_spi_copy_rows(const uint16 *offsets, int ncols, Size size, MemoryContext cxt, int *n)
{
	char	   *rows = MemoryContextAllocZero(cxt, size * Max(SPI_processed, 1));
	uint64		r;
	int			c;

	for (r = 0; r < SPI_processed; r++)
		for (c = 0; c < ncols; c++)
			queen_spi_copy_column(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, c + 1,
								  rows + size * r + offsets[c], cxt);
	*n = (int) SPI_processed;
	return rows;
}

/*
 * One bounded batch of an expiry: stmt deletes at most $2 rows older than
 * $1 (dead letters, traces); how many went.  In its own SPI connection.
 */
int64
queen_stmt_expire(QueenStmt *stmt, TimestampTz before, int limit, const char *what)
{
	Datum		values[2];
	int64		removed;

	queen_spi_connect();
	values[0] = TimestampTzGetDatum(before);
	values[1] = Int64GetDatum((int64) limit);
	removed = queen_stmt_run(stmt, values, NULL, false, SPI_OK_DELETE, what);
	SPI_finish();
	return removed;
}
