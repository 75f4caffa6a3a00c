/*-------------------------------------------------------------------------
 *
 * streams_sql.c
 *	  Stream processing's SQL door: queen.stream_register,
 *	  queen.stream_state and queen.stream_cycle, over the same core
 *	  (streams.c, ack.c) as the broker's /streams/v1 routes.
 *
 * A cycle from SQL is the caller's transaction: it pushes its sink's
 * messages with queen.push, then calls queen.stream_cycle, which
 * acknowledges the source (the consumer row after the pushes' partition
 * rows, as the global lock order has it) and applies the state changes.
 * An ack that is not carried out or an unknown query raises, so nothing
 * of the cycle can commit without the rest: all or nothing, as over HTTP.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "consume.h"
#include "spi.h"
#include "streams.h"
#include "validate.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(queen_stream_register_sql);
PG_FUNCTION_INFO_V1(queen_stream_state_sql);
PG_FUNCTION_INFO_V1(queen_stream_cycle_sql);

/* A required text argument, checked as a name of what it is. */
static char *
queen_stream_name_arg(FunctionCallInfo fcinfo, int arg, const char *what)
{
	char	   *s;

	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
	s = text_to_cstring(PG_GETARG_TEXT_PP(arg));
	queen_check_name(what, s, strlen(s), QUEEN_MAX_NAME_BYTES);
	return s;
}

static pg_uuid_t *
queen_stream_uuid_arg(FunctionCallInfo fcinfo, int arg, const char *what)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
	return PG_GETARG_UUID_P(arg);
}

/*
 * queen.stream_register(name, source_queue, config_hash, sink_queue, reset):
 * the query's id, whether it was registered just now, whether its state
 * was reset.  A changed config_hash without reset raises 42710.
 */
Datum
queen_stream_register_sql(PG_FUNCTION_ARGS)
{
	char	   *name = queen_stream_name_arg(fcinfo, 0, "name");
	char	   *source = queen_stream_name_arg(fcinfo, 1, "source_queue");
	char	   *hash = queen_stream_name_arg(fcinfo, 2, "config_hash");
	/* "" is no sink, as over HTTP */
	char	   *sink = PG_ARGISNULL(3) || VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(3)) == 0 ? NULL :
		queen_stream_name_arg(fcinfo, 3, "sink_queue");
	bool		reset = !PG_ARGISNULL(4) && PG_GETARG_BOOL(4);
	pg_uuid_t	tenant;
	QueenStreamQuery q;
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "queen: stream_register must return a row");
	queen_session_tenant(&tenant);
	queen_stream_register(&tenant, name, source, sink, hash, reset, &q);
	if (q.conflict)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("stream query \"%s\" is registered with another config_hash", name),
				 errdetail("Its operators changed since it was registered; its state was kept for the old ones."),
				 errhint("Pass reset => true to remove its state and register the new operators, or use a new name.")));
	values[0] = UUIDPGetDatum(&q.id);
	values[1] = BoolGetDatum(q.fresh);
	values[2] = BoolGetDatum(q.reset);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* A text[] argument without NULL elements, as C strings. */
static int
queen_stream_texts(ArrayType *arr, const char *what, char ***out)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	*out = palloc(sizeof(char *) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not hold NULL", what)));
		(*out)[i] = TextDatumGetCString(elems[i]);
	}
	return n;
}

/*
 * queen.stream_state(query_id, partition_id, keys, key_prefix): the state
 * rows of a query's partition, all of them or those keys, in key order.
 */
Datum
queen_stream_state_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	pg_uuid_t  *query = queen_stream_uuid_arg(fcinfo, 0, "query_id");
	pg_uuid_t  *partition = queen_stream_uuid_arg(fcinfo, 1, "partition_id");
	QueenStateFilter filter;
	QueenStateRow *rows;
	pg_uuid_t	tenant;
	char	  **keys = NULL;
	int			n;
	int			i;

	InitMaterializedSRF(fcinfo, 0);
	memset(&filter, 0, sizeof(filter));
	if (!PG_ARGISNULL(2))
	{
		filter.nkeys = queen_stream_texts(PG_GETARG_ARRAYTYPE_P(2), "keys", &keys);
		filter.keys = (const char *const *) keys;
		/* an empty array selects nothing, as its = ANY does */
		if (filter.nkeys == 0)
			return (Datum) 0;
	}
	if (!PG_ARGISNULL(3))
		filter.key_prefix = text_to_cstring(PG_GETARG_TEXT_PP(3));
	queen_session_tenant(&tenant);
	n = queen_stream_state_get(&tenant, query, partition, &filter, &rows);
	for (i = 0; i < n; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(rows[i].key);
		values[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(rows[i].value));
		values[2] = TimestampTzGetDatum(rows[i].updated_at);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* The changes of a cycle: upserts (a jsonb object, key to value), then deletes. */
static int
queen_stream_ops(FunctionCallInfo fcinfo, QueenStateOp **ops)
{
	MemoryContext cxt = CurrentMemoryContext;
	char	  **deletes = NULL;
	int			ndeletes = 0;
	int			nupserts = 0;
	int			n = 0;
	int			i;

	if (!PG_ARGISNULL(3))
		ndeletes = queen_stream_texts(PG_GETARG_ARRAYTYPE_P(3), "deletes", &deletes);
	if (!PG_ARGISNULL(2))
	{
		Jsonb	   *upserts = PG_GETARG_JSONB_P(2);
		Datum		arg = JsonbPGetDatum(upserts);

		if (!JB_ROOT_IS_OBJECT(upserts))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("upserts must be a jsonb object of keys and their values")));
		nupserts = JB_ROOT_COUNT(upserts);
		*ops = palloc(sizeof(QueenStateOp) * (ndeletes + nupserts + 1));
		queen_spi_connect();
		if (SPI_execute_with_args("SELECT key, value::text FROM jsonb_each($1)", 1,
								  (Oid[]) {JSONBOID}, &arg, NULL, true, 0) != SPI_OK_SELECT)
			elog(ERROR, "queen: reading upserts failed");
		/* deletes first: an upsert of the same key wins */
		for (i = 0; i < ndeletes; i++)
			(*ops)[n++] = (QueenStateOp) {deletes[i], NULL};
		for (i = 0; i < (int) SPI_processed; i++)
		{
			HeapTuple	t = SPI_tuptable->vals[i];

			(*ops)[n].key = MemoryContextStrdup(cxt, SPI_getvalue(t, SPI_tuptable->tupdesc, 1));
			(*ops)[n++].value = MemoryContextStrdup(cxt, SPI_getvalue(t, SPI_tuptable->tupdesc, 2));
		}
		SPI_finish();
	}
	else
	{
		*ops = palloc(sizeof(QueenStateOp) * (ndeletes + 1));
		for (i = 0; i < ndeletes; i++)
			(*ops)[n++] = (QueenStateOp) {deletes[i], NULL};
	}
	for (i = 0; i < n; i++)
	{
		const char *problem = queen_stream_key_problem(strlen((*ops)[i].key));

		if (problem != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("state key %s", problem)));
	}
	return n;
}

/*
 * queen.stream_cycle(query_id, partition_id, upserts, deletes,
 * transaction_id, lease_id, consumer_group, release_lease, status): the
 * ack of the source up to transaction_id (when given), then the state
 * changes.  Raises, so the caller's transaction and its pushes cannot
 * commit, when the ack was not carried out or the query is unknown.
 */
Datum
queen_stream_cycle_sql(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *query = queen_stream_uuid_arg(fcinfo, 0, "query_id");
	pg_uuid_t  *partition = queen_stream_uuid_arg(fcinfo, 1, "partition_id");
	const char *group = queen_stream_name_arg(fcinfo, 6, "consumer_group");
	QueenStateOp *ops = NULL;
	int			nops;
	QueenAckItem item;
	pg_uuid_t	tenant;
	TupleDesc	desc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "queen: stream_cycle must return a row");
	nops = queen_stream_ops(fcinfo, &ops);
	memset(&item, 0, sizeof(item));
	if (!PG_ARGISNULL(4))
	{
		const char *status = PG_ARGISNULL(8) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(8));

		if (!queen_ack_status_known(status, status ? strlen(status) : 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown ack status \"%s\"", status),
					 errhint("A status is completed (or success, acked, ok), failed, retry or dlq, in lower case.")));
		item.transaction_id = text_to_cstring(PG_GETARG_TEXT_PP(4));
		item.txn_len = strlen(item.transaction_id);
		queen_check_transaction_id(item.transaction_id, item.txn_len);
		item.partition_id = *partition;
		item.lease_id = PG_ARGISNULL(5) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(5));
		item.status = queen_ack_status(status, status ? strlen(status) : 0);
		item.release_lease = PG_ARGISNULL(7) || PG_GETARG_BOOL(7);
		item.offset = -1;
		(void) queen_ack(group, &item, 1);
		if (!item.success || item.noop)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the cycle's ack of transactionId \"%s\" was not applied: %s",
							item.transaction_id,
							item.noop ? "it was already acknowledged" :
							item.problem != NULL ? item.problem : "not carried out"),
					 errdetail("Nothing of the cycle may commit without its ack.")));
	}
	queen_session_tenant(&tenant);
	if (!queen_stream_state_apply(&tenant, query, partition, ops, nops))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no stream query with id %s",
						DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(query))))));
	values[0] = Int32GetDatum(nops);
	values[1] = BoolGetDatum(item.lease_released);
	values[2] = BoolGetDatum(item.dlq);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}
