/*-------------------------------------------------------------------------
 *
 * configure.c
 *	  Queue configuration and deletion, for the broker's configure and
 *	  delete-queue operations and, through configure_sql.c, as
 *	  queen.configure_queue_v1 and queen.delete_queue_v1.
 *
 * This file owns every write to queen.queues other than the implicit
 * creation by a push (log_write.c), and the removal of a queue with
 * everything under it.  Both cores run inside a transaction their caller
 * started and return what the client got wrong (QueenCfgError) instead of
 * raising it, so the broker can answer without unwinding; they raise only
 * when the database fails.  What they return is C: each door renders it.
 * The body is parsed
 * and validated first (configure_parse.c), so a refused body writes
 * nothing.
 *
 * Configure follows Queen 1.6's merge rule (012_configure.sql): an option
 * the body does not mention keeps its stored value, an explicit null resets
 * it to the configure default, and "mode": "replace" (or "replace": true in
 * the options) resets every option not given.
 *
 * Locks: configure touches one queues row, locked FOR NO KEY UPDATE (the
 * lock its own UPDATE takes anyway), which serializes concurrent configures
 * of a queue but not the KEY SHARE a push takes to provision a partition
 * under it.  Writing the row does make such a push wait for our commit
 * (its INSERT ... ON CONFLICT waits on the row's updater), so a row the
 * request does not change is not written.  Delete follows the project's
 * one global order: the queues row, then its partition rows in ascending
 * id, then the leaves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "admin.h"
#include "configure_parse.h"
#include "dedup_cache.h"
#include "dedup_runs.h"
#include "log_write.h"
#include "spi.h"
#include "streams.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

/* ----------------------------------------------------------------
 *		Statements
 * ----------------------------------------------------------------
 */
typedef enum QueenCfgPlanId
{
	QUEEN_CFG_LOCK,
	QUEEN_CFG_UPDATE,
	QUEEN_CFG_INSERT,
	QUEEN_CFG_DEL_LOCK_QUEUE,
	QUEEN_CFG_DEL_LOCK_PARTITIONS,
	QUEEN_CFG_DEL_TXNS,
	QUEEN_CFG_DEL_RUNS,
	QUEEN_CFG_DEL_DLQ,
	QUEEN_CFG_DEL_QUEUE,
	QUEEN_CFG_NPLANS
} QueenCfgPlanId;

static SPIPlanPtr queen_cfg_plans[QUEEN_CFG_NPLANS];

/*
 * log_txns has no foreign key (the purge must not pay for triggers), so
 * the cascade from queues cannot reach it: it is cleared while the
 * partition rows that name its rows still exist.  log_segments goes with
 * the cascade.
 */
static const char *const queen_sql_del_lock_queue =
"SELECT id FROM queen.queues WHERE tenant_id = $1 AND name = $2 FOR UPDATE";

/* LockRows sits above the Sort: rows are locked in ascending id. */
static const char *const queen_sql_del_lock_partitions =
"SELECT id FROM queen.log_partitions WHERE queue_id = $1 ORDER BY id FOR UPDATE";

static const char *const queen_sql_del_txns =
"DELETE FROM queen.log_txns"
" WHERE partition_id IN (SELECT id FROM queen.log_partitions WHERE queue_id = $1)";

/* dead letters have no foreign key either: retention must never reach them */
static const char *const queen_sql_del_dlq =
"DELETE FROM queen.log_dlq"
" WHERE partition_id IN (SELECT id FROM queen.log_partitions WHERE queue_id = $1)";

static const char *const queen_sql_del_runs =
"DELETE FROM queen.log_dedup"
" WHERE partition_id IN (SELECT id FROM queen.log_partitions WHERE queue_id = $1)";

static const char *const queen_sql_del_queue =
"DELETE FROM queen.queues WHERE id = $1";

static Oid
queen_option_typoid(const QueenOptionDef *def)
{
	switch (def->type)
	{
		case QUEEN_OPT_INT:
			return INT4OID;
		case QUEEN_OPT_BOOL:
			return BOOLOID;
		case QUEEN_OPT_TEXT:
			return TEXTOID;
	}
	return InvalidOid;
}

/*
 * The three configure statements name every option column; they are
 * generated from queen_options so a new option is one line in the table.
 * Must be called between SPI_connect and SPI_finish.
 */
static SPIPlanPtr
queen_cfg_plan(QueenCfgPlanId id)
{
	StringInfoData sql;
	Oid			argtypes[QUEEN_NOPTIONS + 4];
	int			nargs = 0;
	int			i;

	if (queen_cfg_plans[id] != NULL)
		return queen_cfg_plans[id];

	initStringInfo(&sql);
	switch (id)
	{
		case QUEEN_CFG_LOCK:
			appendStringInfoString(&sql, "SELECT id, namespace, task");
			for (i = 0; i < QUEEN_NOPTIONS; i++)
				appendStringInfo(&sql, ", %s", queen_options[i].column);
			appendStringInfoString(&sql,
								   " FROM queen.queues WHERE tenant_id = $1 AND name = $2"
								   " FOR NO KEY UPDATE");
			argtypes[nargs++] = UUIDOID;
			argtypes[nargs++] = TEXTOID;
			break;

		case QUEEN_CFG_UPDATE:
			appendStringInfoString(&sql,
								   "UPDATE queen.queues SET namespace = $2, task = $3");
			argtypes[nargs++] = UUIDOID;
			argtypes[nargs++] = TEXTOID;
			argtypes[nargs++] = TEXTOID;
			for (i = 0; i < QUEEN_NOPTIONS; i++)
			{
				appendStringInfo(&sql, ", %s = $%d", queen_options[i].column, nargs + 1);
				argtypes[nargs++] = queen_option_typoid(&queen_options[i]);
			}
			appendStringInfoString(&sql, " WHERE id = $1");
			break;

		case QUEEN_CFG_INSERT:

			/*
			 * An absent namespace or task ($3, $4 NULL) is derived from the
			 * dotted name exactly as log_write.c provisions a pushed queue, so
			 * both doors name a queue alike.  DO NOTHING, not DO UPDATE: a
			 * queue created concurrently is merged onto by the caller's retry
			 * instead of being overwritten with defaults.
			 */
			appendStringInfoString(&sql,
								   "INSERT INTO queen.queues (tenant_id, name, namespace, task");
			for (i = 0; i < QUEEN_NOPTIONS; i++)
				appendStringInfo(&sql, ", %s", queen_options[i].column);
			appendStringInfoString(&sql,
								   ") VALUES ($1, $2, COALESCE($3, split_part($2, '.', 1)),"
								   " COALESCE($4, split_part($2, '.', 2))");
			argtypes[nargs++] = UUIDOID;
			argtypes[nargs++] = TEXTOID;
			argtypes[nargs++] = TEXTOID;
			argtypes[nargs++] = TEXTOID;
			for (i = 0; i < QUEEN_NOPTIONS; i++)
			{
				appendStringInfo(&sql, ", $%d", nargs + 1);
				argtypes[nargs++] = queen_option_typoid(&queen_options[i]);
			}
			appendStringInfoString(&sql,
								   ") ON CONFLICT (tenant_id, name) DO NOTHING"
								   " RETURNING id, namespace, task");
			break;

		case QUEEN_CFG_DEL_LOCK_QUEUE:
			appendStringInfoString(&sql, queen_sql_del_lock_queue);
			argtypes[nargs++] = UUIDOID;
			argtypes[nargs++] = TEXTOID;
			break;

		case QUEEN_CFG_DEL_LOCK_PARTITIONS:
		case QUEEN_CFG_DEL_TXNS:
		case QUEEN_CFG_DEL_RUNS:
		case QUEEN_CFG_DEL_DLQ:
		case QUEEN_CFG_DEL_QUEUE:
			appendStringInfoString(&sql,
								   id == QUEEN_CFG_DEL_LOCK_PARTITIONS ? queen_sql_del_lock_partitions :
								   id == QUEEN_CFG_DEL_TXNS ? queen_sql_del_txns :
								   id == QUEEN_CFG_DEL_RUNS ? queen_sql_del_runs :
								   id == QUEEN_CFG_DEL_DLQ ? queen_sql_del_dlq :
								   queen_sql_del_queue);
			argtypes[nargs++] = UUIDOID;
			break;

		case QUEEN_CFG_NPLANS:
			elog(ERROR, "queen: no such configure statement");
	}

	queen_cfg_plans[id] = queen_keep_plan(sql.data, nargs, argtypes, false);
	pfree(sql.data);
	return queen_cfg_plans[id];
}

static void
queen_cfg_exec(QueenCfgPlanId id, Datum *values, const char *nulls, int expected)
{
	int			rc = SPI_execute_plan(queen_cfg_plan(id), values, nulls, false, 0);

	if (rc != expected)
		elog(ERROR, "queen: configure statement %d failed: %s", (int) id,
			 SPI_result_code_string(rc));
}

/* A column of the first result row; NULL when SQL NULL. */
static bool
queen_cfg_column(int col, Datum *out)
{
	bool		isnull;

	*out = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	return !isnull;
}

/* A text column of the first result row, copied into cxt; NULL stays NULL. */
static char *
queen_cfg_text_column(int col, MemoryContext cxt)
{
	Datum		d;
	MemoryContext old;
	char	   *s;

	if (!queen_cfg_column(col, &d))
		return NULL;
	old = MemoryContextSwitchTo(cxt);
	s = TextDatumGetCString(d);
	MemoryContextSwitchTo(old);
	return s;
}

/* ----------------------------------------------------------------
 *		Configure
 * ----------------------------------------------------------------
 */


static void
queen_cfg_default(int i, QueenCfgResult *res)
{
	res->ival[i] = queen_options[i].def;
	res->sval[i] = queen_options[i].type == QUEEN_OPT_TEXT ? "" : NULL;
}

static Datum
queen_cfg_option_datum(int i, const QueenCfgResult *res)
{
	switch (queen_options[i].type)
	{
		case QUEEN_OPT_INT:
			return Int32GetDatum(res->ival[i]);
		case QUEEN_OPT_BOOL:
			return BoolGetDatum(res->ival[i] != 0);
		case QUEEN_OPT_TEXT:
			return CStringGetTextDatum(res->sval[i]);
	}
	return (Datum) 0;
}

/*
 * The locked row is SPI's first result row: merge the request onto it into
 * res.  Returns whether anything differs from what the row holds.
 */
static bool
queen_cfg_merge(const QueenCfgRequest *req, QueenCfgResult *res,
				MemoryContext out_cxt)
{
	bool		changed = false;
	Datum		d;
	int			i;

	if (!queen_cfg_column(1, &d))
		elog(ERROR, "queen: queue without an id");
	memcpy(&res->id, DatumGetUUIDP(d), sizeof(pg_uuid_t));

	for (i = 0; i < 2; i++)
	{
		char	   *stored = queen_cfg_text_column(2 + i, out_cxt);

		if (req->label[i].kind == QUEEN_SPEC_VALUE)
			res->label[i] = req->label[i].sval;
		else if (req->label[i].kind == QUEEN_SPEC_DEFAULT)
			res->label[i] = "";
		else
			/* kept; a NULL from before derivation existed becomes '' */
			res->label[i] = stored != NULL ? stored : "";
		if (stored == NULL || strcmp(stored, res->label[i]) != 0)
			changed = true;
	}

	for (i = 0; i < QUEEN_NOPTIONS; i++)
	{
		const QueenOptionSpec *spec = &req->opt[i];
		int32		ival = 0;
		char	   *sval = NULL;

		if (!queen_cfg_column(4 + i, &d))
			elog(ERROR, "queen: queue column %s is NULL", queen_options[i].column);
		if (queen_options[i].type == QUEEN_OPT_TEXT)
			sval = queen_cfg_text_column(4 + i, out_cxt);
		else if (queen_options[i].type == QUEEN_OPT_BOOL)
			ival = DatumGetBool(d) ? 1 : 0;
		else
			ival = DatumGetInt32(d);

		if (spec->kind == QUEEN_SPEC_VALUE)
		{
			res->ival[i] = spec->ival;
			res->sval[i] = spec->sval;
		}
		else if (spec->kind == QUEEN_SPEC_DEFAULT || req->replace)
			queen_cfg_default(i, res);
		else
		{
			res->ival[i] = ival;
			res->sval[i] = sval;
		}

		if (queen_options[i].type == QUEEN_OPT_TEXT ?
			strcmp(sval, res->sval[i]) != 0 : ival != res->ival[i])
			changed = true;
	}
	return changed;
}

/*
 * Write the request: merged onto the locked row when the queue exists,
 * inserted otherwise.  Fills res with what the row holds afterwards.
 */
static void
queen_cfg_apply(const pg_uuid_t *tenant, const QueenCfgRequest *req,
				QueenCfgResult *res, MemoryContext out_cxt)
{
	Datum		values[QUEEN_NOPTIONS + 4];
	char		nulls[QUEEN_NOPTIONS + 4];
	int			attempt;
	int			i;

	queen_spi_connect();

	/*
	 * A queue that appears between our lookup and our insert (a push or
	 * another configure created it) makes the insert do nothing; the next
	 * round finds it, locks it and merges onto it.  Under REPEATABLE READ
	 * the insert raises a serialization failure instead.  Losing three
	 * rounds means the queue is being created and deleted in a loop.
	 */
	for (attempt = 0; attempt < 3; attempt++)
	{
		memset(nulls, ' ', sizeof(nulls));
		values[0] = UUIDPGetDatum(tenant);
		values[1] = CStringGetTextDatum(req->queue);
		queen_cfg_exec(QUEEN_CFG_LOCK, values, NULL, SPI_OK_SELECT);

		if (SPI_processed == 1)
		{
			bool		changed = queen_cfg_merge(req, res, out_cxt);

			SPI_freetuptable(SPI_tuptable);

			/*
			 * An unchanged row is not written: a configure that restates the
			 * configuration (SDKs configure at every start) then leaves no
			 * dead tuple and does not make pushes provisioning a partition
			 * of this queue wait for our commit, as a row being updated
			 * would (their INSERT ... ON CONFLICT waits on its updater).
			 */
			if (changed)
			{
				/* pushes later in this transaction must see the new window */
				queen_dedup_own_forget_windows();
				values[0] = UUIDPGetDatum(&res->id);
				values[1] = CStringGetTextDatum(res->label[0]);
				values[2] = CStringGetTextDatum(res->label[1]);
				for (i = 0; i < QUEEN_NOPTIONS; i++)
					values[3 + i] = queen_cfg_option_datum(i, res);
				queen_cfg_exec(QUEEN_CFG_UPDATE, values, nulls, SPI_OK_UPDATE);
				if (SPI_processed != 1)
					elog(ERROR, "queen: the locked queue row was not updated");
			}
			break;
		}
		SPI_freetuptable(SPI_tuptable);

		/* a new queue: everything not given is a configure default */
		for (i = 0; i < 2; i++)
		{
			if (req->label[i].kind == QUEEN_SPEC_VALUE)
				values[2 + i] = CStringGetTextDatum(req->label[i].sval);
			else if (req->label[i].kind == QUEEN_SPEC_DEFAULT)
				values[2 + i] = CStringGetTextDatum("");
			else
				nulls[2 + i] = 'n';
		}
		for (i = 0; i < QUEEN_NOPTIONS; i++)
		{
			if (req->opt[i].kind == QUEEN_SPEC_VALUE)
			{
				res->ival[i] = req->opt[i].ival;
				res->sval[i] = req->opt[i].sval;
			}
			else
				queen_cfg_default(i, res);
			values[4 + i] = queen_cfg_option_datum(i, res);
		}
		queen_cfg_exec(QUEEN_CFG_INSERT, values, nulls, SPI_OK_INSERT_RETURNING);
		if (SPI_processed == 1)
		{
			Datum		d;

			if (!queen_cfg_column(1, &d))
				elog(ERROR, "queen: queue without an id");
			memcpy(&res->id, DatumGetUUIDP(d), sizeof(pg_uuid_t));
			for (i = 0; i < 2; i++)
			{
				res->label[i] = queen_cfg_text_column(2 + i, out_cxt);
				if (res->label[i] == NULL)
					res->label[i] = "";
			}
			SPI_freetuptable(SPI_tuptable);
			break;
		}
		SPI_freetuptable(SPI_tuptable);
	}
	if (attempt == 3)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("queue \"%s\" kept changing while it was being configured",
						req->queue),
				 errdetail("It was created and deleted concurrently three times.")));

	SPI_finish();
}

/*
 * The broker's shards keep serving while the extension is dropped and
 * created again, so a control request can find its tables gone: the
 * broker asks first and refuses as for a push, not with the error of the
 * statement that would fail.
 */
bool
queen_extension_installed(void)
{
	return OidIsValid(get_extension_oid("queen", true));
}

/*
 * Configure a queue from a body (need not be NUL-terminated), in the
 * caller's transaction: true and the effective configuration in res, or
 * false with err filled in and nothing written.  Raises only when the
 * database fails; SPI is connected and finished here, and an ERROR leaves
 * the connection to the (sub)transaction abort, as in the allocator.
 */
bool
queen_configure(const pg_uuid_t *tenant, const char *body, size_t len,
				QueenCfgResult *res, QueenCfgError *err)
{
	QueenCfgRequest req;

	memset(res, 0, sizeof(*res));
	if (!queen_cfg_parse(body, len, &req, err))
		return false;
	queen_cfg_apply(tenant, &req, res, CurrentMemoryContext);
	res->queue = req.queue;
	return true;
}

/* ----------------------------------------------------------------
 *		Delete
 * ----------------------------------------------------------------
 */

/*
 * Delete a queue in the caller's transaction: the queue row, its
 * partitions, segments and log_txns rows.  A queue that does not exist
 * succeeds too (*existed false), as Queen answers: its clients delete
 * before they create.  False only for a name that is not UTF-8, with err
 * filled in.  Raises only when the database fails.
 */
bool
queen_delete_queue(const pg_uuid_t *tenant, const char *queue, bool *existed,
				   QueenCfgError *err)
{
	Datum		values[2];
	pg_uuid_t	qid;

	*existed = false;
	if (!pg_verifymbstr(queue, strlen(queue), true))
	{
		err->message = "queue name is not valid UTF-8";
		err->invalid = "queue";
		return false;
	}

	/* offsets this transaction deferred reach their rows before the rows go */
	queen_alloc_flush();
	queen_spi_connect();

	/*
	 * The queue row first: FOR UPDATE conflicts with the KEY SHARE a push
	 * takes to provision a partition, so no partition can appear after the
	 * ones locked below.  Then the partitions in ascending id, the order
	 * every push locks them in, which waits out pushes in flight.
	 */
	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(queue);
	queen_cfg_exec(QUEEN_CFG_DEL_LOCK_QUEUE, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		Datum		d;

		if (!queen_cfg_column(1, &d))
			elog(ERROR, "queen: queue without an id");
		memcpy(&qid, DatumGetUUIDP(d), sizeof(pg_uuid_t));
		*existed = true;
	}
	SPI_freetuptable(SPI_tuptable);

	if (*existed)
	{
		values[0] = UUIDPGetDatum(&qid);
		queen_cfg_exec(QUEEN_CFG_DEL_LOCK_PARTITIONS, values, NULL, SPI_OK_SELECT);
		SPI_freetuptable(SPI_tuptable);
		queen_cfg_exec(QUEEN_CFG_DEL_TXNS, values, NULL, SPI_OK_DELETE);
		/* after a queen.dedup_index that may be writing runs of these partitions */
		(void) DirectFunctionCall1(pg_advisory_xact_lock_int8,
								   Int64GetDatum(QUEEN_DEDUP_INDEX_LOCK));
		queen_cfg_exec(QUEEN_CFG_DEL_RUNS, values, NULL, SPI_OK_DELETE);
		queen_cfg_exec(QUEEN_CFG_DEL_DLQ, values, NULL, SPI_OK_DELETE);
		queen_cfg_exec(QUEEN_CFG_DEL_QUEUE, values, NULL, SPI_OK_DELETE);
		/* its figures' rows go at the next refresh */
		queen_stats_mark(&qid, NULL);
		/* later pushes in this transaction must not trust the rows they held */
		queen_dedup_own_unlock_all();
	}

	SPI_finish();
	/*
	 * Last: a cycle in flight holds its query row after the rows above.  A
	 * query may read a queue that was never created (its first push will):
	 * deleting the name forgets it too.
	 */
	queen_stream_forget_source(tenant, queue);
	return true;
}
