/*-------------------------------------------------------------------------
 *
 * admin_sql.c
 *	  The SQL door's administration writes, for the session's tenant: a
 *	  group's seek and subscription, dead letters purged, replayed and
 *	  forgotten; and the message lookup the message answers use.  The
 *	  core's admin_write.c does the work, as it does for the broker.
 *
 * Unlike the broker, which answers 404, these raise when what they name
 * does not exist (42704), so a DBA's script stops at the mistake.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "admin.h"
#include "codec.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/uuid.h"

PG_FUNCTION_INFO_V1(queen_seek_sql);
PG_FUNCTION_INFO_V1(queen_set_subscription_sql);
PG_FUNCTION_INFO_V1(queen_dlq_purge_sql);
PG_FUNCTION_INFO_V1(queen_dlq_replay_sql);
PG_FUNCTION_INFO_V1(queen_dlq_forget_sql);
PG_FUNCTION_INFO_V1(queen_message_offset_sql);

static char *
queen_arg_text(FunctionCallInfo fcinfo, int n, const char *what)
{
	if (PG_ARGISNULL(n))
	{
		if (what == NULL)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
	}
	return text_to_cstring(PG_GETARG_TEXT_PP(n));
}

/* queen.seek(queue, consumer_group, to_end, at, partition) -> partitions moved */
Datum
queen_seek_sql(PG_FUNCTION_ARGS)
{
	char	   *queue = queen_arg_text(fcinfo, 0, "queue");
	char	   *group = queen_arg_text(fcinfo, 1, "consumer_group");
	bool		to_end = !PG_ARGISNULL(2) && PG_GETARG_BOOL(2);
	char	   *partition = queen_arg_text(fcinfo, 4, NULL);
	pg_uuid_t	tenant;
	bool		found;
	int64		n;

	if (!to_end && PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seek needs to_end => true or a moment (at)")));
	queen_session_tenant(&tenant);
	n = queen_seek(&tenant, queue, partition, group, to_end,
				   to_end ? 0 : PG_GETARG_TIMESTAMPTZ(3), &found);
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 partition != NULL ?
				 errmsg("queue \"%s\" has no partition \"%s\"", queue, partition) :
				 errmsg("queue \"%s\" does not exist", queue)));
	PG_RETURN_INT64(n);
}

/* queen.set_subscription(consumer_group, at) -> subscriptions changed */
Datum
queen_set_subscription_sql(PG_FUNCTION_ARGS)
{
	char	   *group = queen_arg_text(fcinfo, 0, "consumer_group");
	pg_uuid_t	tenant;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("at must not be NULL")));
	queen_session_tenant(&tenant);
	PG_RETURN_INT64(queen_group_subscription(&tenant, group, PG_GETARG_TIMESTAMPTZ(1)));
}

/* queen.dlq_purge(queue, consumer_group) -> dead letters removed */
Datum
queen_dlq_purge_sql(PG_FUNCTION_ARGS)
{
	char	   *queue = queen_arg_text(fcinfo, 0, "queue");
	char	   *group = queen_arg_text(fcinfo, 1, NULL);
	pg_uuid_t	tenant;
	bool		found;
	int64		n;

	queen_session_tenant(&tenant);
	n = queen_dlq_purge(&tenant, queue, group, &found);
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue \"%s\" does not exist", queue)));
	PG_RETURN_INT64(n);
}

/*
 * queen.dlq_replay(id) -> (result, message_id, transaction_id, partition_id,
 * queue, partition, log_offset)
 */
Datum
queen_dlq_replay_sql(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[7];
	bool		nulls[7] = {false, false, false, false, false, false, false};
	pg_uuid_t	tenant;
	pg_uuid_t	id;
	pg_uuid_t  *mid = palloc(sizeof(pg_uuid_t));
	pg_uuid_t  *pid = palloc(sizeof(pg_uuid_t));
	QueenReplay r;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("id must not be NULL")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "queen.dlq_replay must return a row");
	memcpy(id.data, PG_GETARG_UUID_P(0)->data, UUID_LEN);
	queen_session_tenant(&tenant);
	queen_dlq_replay(&tenant, &id, &r);
	if (!r.found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dead letter %s does not exist",
						DatumGetCString(DirectFunctionCall1(uuid_out, PG_GETARG_DATUM(0)))),
				 errhint("It may have been replayed or removed already.")));
	*mid = r.message_id;
	*pid = r.partition_id;
	values[0] = CStringGetTextDatum(r.duplicate ? "duplicate" : "moved");
	values[1] = UUIDPGetDatum(mid);
	values[2] = CStringGetTextDatum(r.transaction_id);
	values[3] = UUIDPGetDatum(pid);
	values[4] = CStringGetTextDatum(r.queue);
	values[5] = CStringGetTextDatum(r.partition);
	values[6] = Int64GetDatum(r.offset);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

/* queen.dlq_forget(partition_id, transaction_id) -> dead letters removed */
Datum
queen_dlq_forget_sql(PG_FUNCTION_ARGS)
{
	char	   *txn = queen_arg_text(fcinfo, 1, "transaction_id");
	pg_uuid_t	tenant;
	pg_uuid_t	pid;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("partition_id must not be NULL")));
	memcpy(pid.data, PG_GETARG_UUID_P(0)->data, UUID_LEN);
	queen_session_tenant(&tenant);
	PG_RETURN_INT64(queen_dlq_forget(&tenant, &pid, txn));
}

/*
 * queen._message_offset(partition_id, transaction_id, lo, hi): the offset
 * of the message in [lo, hi] whose transactionId this is, newest first,
 * through the hashes kept; NULL when none.
 */
Datum
queen_message_offset_sql(PG_FUNCTION_ARGS)
{
	pg_uuid_t	pid;
	int64		off;
	char	   *txn = text_to_cstring(PG_GETARG_TEXT_PP(1));

	memcpy(pid.data, PG_GETARG_UUID_P(0)->data, UUID_LEN);
	off = queen_message_offset(&pid, PG_GETARG_INT64(2), PG_GETARG_INT64(3), txn);
	if (off < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(off);
}
