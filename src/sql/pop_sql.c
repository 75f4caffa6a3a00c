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
#include "postgres.h"

#include "queen.h"
#include "validate.h"
#include "codec.h"
#include "consume.h"
#include "payload.h"
#include "spi.h"
#include "wait.h"

#include "catalog/pg_type.h"
#include "common/int.h"
#include "commands/async.h"
#include "datatype/timestamp.h"
#include "utils/timestamp.h"

#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(queen_pop_sql);
PG_FUNCTION_INFO_V1(queen_pop_discover_sql);
PG_FUNCTION_INFO_V1(queen_channel_sql);
PG_FUNCTION_INFO_V1(queen_listen_sql);

#define QUEEN_POP_COLUMNS	13

#define QUEEN_POP_MAX_WAIT_USECS	(3600 * USECS_PER_SEC)

/* Arguments 2 to 8 are the same for both functions. */
enum
{
	POP_ARG_GROUP = 2,
	POP_ARG_BATCH,
	POP_ARG_LEASE,
	POP_ARG_AUTO_ACK,
	POP_ARG_MAX_PARTITIONS,
	POP_ARG_SUB_MODE,
	POP_ARG_SUB_FROM,
	POP_ARG_WAIT
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
	values[12] = Int64GetDatum(m->offset);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* The wait argument in microseconds; 0 when absent (no wait). */
static int64
queen_pop_wait_arg(FunctionCallInfo fcinfo)
{
	Interval   *span;
	int64		usecs;

	if (PG_ARGISNULL(POP_ARG_WAIT))
		return 0;
	span = PG_GETARG_INTERVAL_P(POP_ARG_WAIT);
	/* months and days as 30 and 24 hours; an overflow is out of range too */
	if (pg_mul_s64_overflow((int64) span->month * DAYS_PER_MONTH + span->day, USECS_PER_DAY,
							&usecs) ||
		pg_add_s64_overflow(usecs, span->time, &usecs) ||
		usecs < 0 || usecs > QUEEN_POP_MAX_WAIT_USECS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait must be from 0 to 1 hour"),
				 errdetail("A waiting pop holds its statement's snapshot; a consumer that waits longer calls again.")));
	return usecs;
}

/*
 * A pop of one named partition the queue does not have, in queue mode: if
 * a consumer group of that name consumes the queue, the caller almost
 * surely passed the group where the partition goes (the second argument).
 * Returning nothing there would hide it for ever.
 */
static SPIPlanPtr queen_group_named_plan = NULL;

static void
queen_pop_check_partition(const QueenPopRequest *req)
{
	Oid			types[3] = {UUIDOID, TEXTOID, TEXTOID};
	Datum		values[3];
	bool		group_named = false;
	bool		isnull;

	if (req->partition == NULL || strcmp(req->group, QUEEN_QUEUE_MODE) != 0)
		return;
	queen_spi_connect();
	values[0] = UUIDPGetDatum(&req->tenant);
	values[1] = CStringGetTextDatum(req->queue);
	values[2] = CStringGetTextDatum(req->partition);
	queen_exec(queen_plan_once(&queen_group_named_plan,
							   "SELECT NOT EXISTS (SELECT 1 FROM queen.log_partitions p"
							   "                    WHERE p.queue_id = q.id AND p.name = $3)"
							   "   AND (EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m"
							   "                 WHERE m.queue_id = q.id AND m.consumer_group = $3)"
							   "        OR EXISTS (SELECT 1 FROM queen.log_consumers c"
							   "                     JOIN queen.log_partitions p ON p.id = c.partition_id"
							   "                    WHERE p.queue_id = q.id AND c.consumer_group = $3))"
							   "  FROM queen.queues q WHERE q.tenant_id = $1 AND q.name = $2",
							   3, types, false),
			   values, SPI_OK_SELECT, "checking a partition named like a consumer group");
	if (SPI_processed == 1)
		group_named = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												 1, &isnull)) && !isnull;
	SPI_finish();
	if (group_named)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("queue \"%s\" has no partition \"%s\", but a consumer group of that name consumes it",
						req->queue, req->partition),
				 errhint("The second argument of queen.pop is the partition; for the group write queen.pop('%s', consumer_group => '%s').",
						 req->queue, req->partition)));
}

/* Run the pop and return its messages: partitions in claim order. */
static Datum
queen_pop_rows(FunctionCallInfo fcinfo, QueenPopRequest *req)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueenPopResult res;
	MemoryContext row_cxt;
	MemoryContext old;
	int64		wait_usecs = queen_pop_wait_arg(fcinfo);
	int			i;
	int			j;

	if (wait_usecs > 0)
	{
		/* before, not after an hour's wait for a partition that is a group */
		if (req->queue != NULL)
			queen_pop_check_partition(req);
		queen_pop_wait(req, &res, wait_usecs);
	}
	else
	{
		queen_pop(req, &res);
		if (res.no_partition)
			queen_pop_check_partition(req);
	}

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
 * Both entry points take two names first (queue and partition, or
 * namespace and task) and the same options after them.
 */
static Datum
queen_pop_entry(FunctionCallInfo fcinfo, bool discover)
{
	QueenPopRequest req;
	char	   *first;
	char	   *second;

	InitMaterializedSRF(fcinfo, 0);
	if (!discover && PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue must not be NULL")));
	first = queen_pop_text_arg(fcinfo, 0);
	second = queen_pop_text_arg(fcinfo, 1);
	if (discover && first == NULL && second == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("namespace or task is required")));
	if (!discover)
		queen_check_queue_name(first, strlen(first));
	if (!discover && second != NULL)
		queen_check_partition_name(second, strlen(second));
	queen_pop_options(fcinfo, &req);
	req.queue = discover ? NULL : first;
	req.partition = discover ? NULL : second;
	req.namespace_name = discover ? first : NULL;
	req.task = discover ? second : NULL;
	return queen_pop_rows(fcinfo, &req);
}

/*
 * queen.pop(queue, partition, consumer_group, batch, lease_seconds, auto_ack,
 *			 max_partitions, subscription_mode, subscription_from, wait)
 */
Datum
queen_pop_sql(PG_FUNCTION_ARGS)
{
	return queen_pop_entry(fcinfo, false);
}

/*
 * queen.pop_discover(namespace, task, consumer_group, batch, lease_seconds,
 *					  auto_ack, max_partitions, subscription_mode,
 *					  subscription_from, wait)
 */
Datum
queen_pop_discover_sql(PG_FUNCTION_ARGS)
{
	return queen_pop_entry(fcinfo, true);
}

/*
 * queen.channel(queue) -> text: the NOTIFY channel a commit that made the
 * queue pending notifies when queen.notify is on (wait.c).
 */
Datum
queen_channel_sql(PG_FUNCTION_ARGS)
{
	char	   *queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	pg_uuid_t	tenant;

	queen_check_queue_name(queue, strlen(queue));
	queen_session_tenant(&tenant);
	PG_RETURN_TEXT_P(cstring_to_text(queen_wait_channel(&tenant, queue, strlen(queue))));
}

/*
 * queen.listen(queue) -> text: LISTEN on the queue's channel (from the
 * caller's COMMIT on, as LISTEN itself), returning the channel's name.
 */
Datum
queen_listen_sql(PG_FUNCTION_ARGS)
{
	char	   *queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	pg_uuid_t	tenant;
	char	   *channel;

	queen_check_queue_name(queue, strlen(queue));
	queen_session_tenant(&tenant);
	channel = queen_wait_channel(&tenant, queue, strlen(queue));
	Async_Listen(channel);
	PG_RETURN_TEXT_P(cstring_to_text(channel));
}
