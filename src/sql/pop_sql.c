/*-------------------------------------------------------------------------
 *
 * pop_sql.c
 *	  queen.pop and queen.pop_discover: the claim (src/core/claim.c) from
 *	  SQL, in the caller's transaction, one row per delivered message.
 *
 * This file checks what a caller passed, builds the request the broker
 * builds from a query string, and turns the result into rows; everything
 * else is the core's.  Being in the caller's transaction is the point:
 * BEGIN; pop; write business rows; ack; COMMIT processes a message exactly
 * once, and a rollback leaves cursor and lease as they were.
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"
#include "consume.h"
#include "payload.h"

#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(queen_pop_sql);
PG_FUNCTION_INFO_V1(queen_pop_discover_sql);

#define QUEEN_POP_COLUMNS	12

/* Arguments 2 to 8 are the same for both functions. */
enum
{
	POP_ARG_GROUP = 2,
	POP_ARG_BATCH,
	POP_ARG_LEASE,
	POP_ARG_AUTO_ACK,
	POP_ARG_MAX_PARTITIONS,
	POP_ARG_SUB_MODE,
	POP_ARG_SUB_FROM
};

static char *
queen_pop_text_arg(FunctionCallInfo fcinfo, int n)
{
	return PG_ARGISNULL(n) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(n));
}

/* subscription_mode and subscription_from, read as the HTTP door reads them. */
static void
queen_pop_subscription(FunctionCallInfo fcinfo, QueenPopRequest *req)
{
	const char *problem = queen_sub_mode_parse(queen_pop_text_arg(fcinfo, POP_ARG_SUB_MODE),
											   queen_pop_text_arg(fcinfo, POP_ARG_SUB_FROM),
											   "subscription_mode", "subscription_from",
											   &req->sub_mode, &req->sub_from);

	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", problem)));
}

/* Everything but what names the queues; a NULL takes the default. */
static void
queen_pop_options(FunctionCallInfo fcinfo, QueenPopRequest *req)
{
	memset(req, 0, sizeof(*req));
	queen_session_tenant(&req->tenant);
	req->group = PG_ARGISNULL(POP_ARG_GROUP) ? QUEEN_QUEUE_MODE :
		queen_pop_text_arg(fcinfo, POP_ARG_GROUP);
	queen_check_name("consumer group", req->group, strlen(req->group),
					 QUEEN_MAX_NAME_BYTES);
	req->batch = PG_ARGISNULL(POP_ARG_BATCH) ? 1 : PG_GETARG_INT32(POP_ARG_BATCH);
	if (req->batch < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must be at least 1")));
	req->lease_seconds = PG_ARGISNULL(POP_ARG_LEASE) ? 0 : PG_GETARG_INT32(POP_ARG_LEASE);
	if (!PG_ARGISNULL(POP_ARG_LEASE) && req->lease_seconds < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease_seconds must be at least 1"),
				 errhint("Pass NULL for the queue's leaseTime.")));
	if (req->lease_seconds > queen_max_lease_seconds)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease_seconds must be at most %d (queen.max_lease_seconds)",
						queen_max_lease_seconds)));
	req->auto_ack = PG_ARGISNULL(POP_ARG_AUTO_ACK) ? false : PG_GETARG_BOOL(POP_ARG_AUTO_ACK);
	req->max_partitions = PG_ARGISNULL(POP_ARG_MAX_PARTITIONS) ? 1 :
		PG_GETARG_INT32(POP_ARG_MAX_PARTITIONS);
	queen_pop_subscription(fcinfo, req);
}

/* One delivered message as a row. */
static void
queen_pop_row(ReturnSetInfo *rsinfo, const QueenPopResult *res,
			  const QueenPopPartition *part, const QueenPopMessage *m)
{
	Datum		values[QUEEN_POP_COLUMNS];
	bool		nulls[QUEEN_POP_COLUMNS];
	const QueenFrame *f = &m->frame;
	char	   *problem = NULL;

	memset(nulls, 0, sizeof(nulls));
	values[0] = CStringGetTextDatum(part->queue);
	values[1] = CStringGetTextDatum(part->partition);
	values[2] = UUIDPGetDatum(&part->partition_id);
	values[3] = Int64GetDatum(m->offset);
	values[4] = UUIDPGetDatum(&f->message_id);
	if (!pg_verifymbstr(f->txn, f->txn_len, true))
		problem = "transactionId is not valid UTF-8";
	values[5] = PointerGetDatum(cstring_to_text_with_len(f->txn, f->txn_len));
	values[6] = UUIDPGetDatum(&f->trace_id);
	nulls[6] = (f->flags & QUEEN_FRAME_TRACE) == 0;
	if (f->payload_len == 0)
		nulls[7] = true;
	else if (problem == NULL)
		values[7] = queen_payload_jsonb(f->payload, f->payload_len, &problem);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("message at offset " INT64_FORMAT " of queue \"%s\" partition \"%s\" cannot be delivered: %s",
						m->offset, part->queue, part->partition, problem)));
	values[8] = TimestampTzGetDatum(m->created_at);
	values[9] = CStringGetTextDatum(res->lease_id);
	nulls[9] = res->lease_id[0] == '\0';
	values[10] = Int32GetDatum(part->delivery_attempt);
	values[11] = TimestampTzGetDatum(part->lease_expires_at);
	nulls[11] = part->lease_expires_at == 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* Run the pop and return its messages: partitions in claim order. */
static Datum
queen_pop_rows(FunctionCallInfo fcinfo, QueenPopRequest *req)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueenPopResult res;
	MemoryContext row_cxt;
	MemoryContext old;
	int			i;
	int			j;

	queen_pop(req, &res);

	/* a row's jsonb and text live until it is in the tuplestore */
	row_cxt = AllocSetContextCreate(CurrentMemoryContext, "queen.pop row",
									ALLOCSET_DEFAULT_SIZES);
	for (i = 0; i < res.npartitions; i++)
	{
		for (j = 0; j < res.partitions[i].nmessages; j++)
		{
			old = MemoryContextSwitchTo(row_cxt);
			queen_pop_row(rsinfo, &res, &res.partitions[i], &res.partitions[i].messages[j]);
			MemoryContextSwitchTo(old);
			MemoryContextReset(row_cxt);
		}
	}
	MemoryContextDelete(row_cxt);
	return (Datum) 0;
}

/*
 * queen.pop(queue, partition, consumer_group, batch, lease_seconds, auto_ack,
 *			 max_partitions, subscription_mode, subscription_from)
 */
Datum
queen_pop_sql(PG_FUNCTION_ARGS)
{
	QueenPopRequest req;
	char	   *queue;
	char	   *partition;

	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue must not be NULL")));
	queue = queen_pop_text_arg(fcinfo, 0);
	queen_check_queue_name(queue, strlen(queue));
	partition = queen_pop_text_arg(fcinfo, 1);
	if (partition != NULL)
		queen_check_partition_name(partition, strlen(partition));
	queen_pop_options(fcinfo, &req);
	req.queue = queue;
	req.partition = partition;
	return queen_pop_rows(fcinfo, &req);
}

/*
 * queen.pop_discover(namespace, task, consumer_group, batch, lease_seconds,
 *					  auto_ack, max_partitions, subscription_mode,
 *					  subscription_from)
 */
Datum
queen_pop_discover_sql(PG_FUNCTION_ARGS)
{
	QueenPopRequest req;
	char	   *namespace_name;
	char	   *task;

	InitMaterializedSRF(fcinfo, 0);
	namespace_name = queen_pop_text_arg(fcinfo, 0);
	task = queen_pop_text_arg(fcinfo, 1);
	if (namespace_name == NULL && task == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("namespace or task is required")));
	queen_pop_options(fcinfo, &req);
	req.namespace_name = namespace_name;
	req.task = task;
	return queen_pop_rows(fcinfo, &req);
}
