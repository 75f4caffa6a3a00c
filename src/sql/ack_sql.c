/*-------------------------------------------------------------------------
 *
 * ack_sql.c
 *	  The ack's SQL door: queen.ack (one message or many), queen.nack,
 *	  queen.reject, queen.renew and queen.delete_consumer_group, thin
 *	  functions over the consumption core (consume.h).
 *
 * Everything runs in the caller's transaction, so a pop, the caller's own
 * writes and the ack commit or roll back together.  Arguments are checked
 * before anything is read or written: a NULL where a value is required
 * raises 22004, anything else malformed 22023 (or the name checks' codes),
 * and nothing has been written when they do; so does a status that is not
 * one of 5.1's words (a typo must not spend a retry).  Verdicts a consumer
 * may legitimately meet (a stale or unknown transactionId, an expired
 * lease) are rows, unless the call is strict (its strict argument, else
 * queen.strict_acks): then anything not applied raises, so the caller's
 * transaction cannot commit past an ack that did nothing.
 *
 * A partition id may come as uuid or as text (the overloads of
 * queen--1.2.sql), so pasted ids and psql variables need no cast.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "validate.h"
#include "codec.h"
#include "consume.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(queen_ack_sql);
PG_FUNCTION_INFO_V1(queen_ack_ok_sql);
PG_FUNCTION_INFO_V1(queen_nack_sql);
PG_FUNCTION_INFO_V1(queen_reject_sql);
PG_FUNCTION_INFO_V1(queen_ack_batch_sql);
PG_FUNCTION_INFO_V1(queen_renew_sql);
PG_FUNCTION_INFO_V1(queen_delete_consumer_group_sql);
PG_FUNCTION_INFO_V1(queen_dlq_list_sql);

static void
queen_require(FunctionCallInfo fcinfo, int arg, const char *name)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name)));
}

/* An optional text argument: NULL when absent. */
static const char *
queen_text_arg(FunctionCallInfo fcinfo, int arg)
{
	return PG_ARGISNULL(arg) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(arg));
}

static const char *
queen_group_arg(FunctionCallInfo fcinfo, int arg)
{
	const char *group;

	queen_require(fcinfo, arg, "consumer_group");
	group = text_to_cstring(PG_GETARG_TEXT_PP(arg));
	queen_check_name("consumer group", group, strlen(group), QUEEN_MAX_NAME_BYTES);
	return group;
}

static void
queen_item_txn(QueenAckItem *item, const char *txn)
{
	item->transaction_id = txn;
	item->txn_len = strlen(txn);
	queen_check_transaction_id(txn, item->txn_len);
}

/* A status argument: one of 5.1's words, or 22023. */
static QueenAckStatus
queen_status_arg(const char *status)
{
	size_t		len = status ? strlen(status) : 0;

	if (!queen_ack_status_known(status, len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown ack status \"%s\"", status),
				 errhint("A status is completed (or success, acked, ok), failed, retry or dlq, in lower case.")));
	return queen_ack_status(status, len);
}

/* A partition id given as uuid, or as text in a uuid's form. */
static pg_uuid_t
queen_uuid_value(Oid type, Datum d)
{
	if (type == UUIDOID)
		return *DatumGetUUIDP(d);
	if (type != TEXTOID)
		elog(ERROR, "queen: partition_id must be uuid or text, not type %u", type);
	return *DatumGetUUIDP(DirectFunctionCall1(uuid_in,
											  CStringGetDatum(TextDatumGetCString(d))));
}

/* The strict argument at arg, else queen.strict_acks. */
static bool
queen_strict_arg(FunctionCallInfo fcinfo, int arg)
{
	if (PG_NARGS() <= arg || PG_ARGISNULL(arg))
		return queen_strict_acks;
	return PG_GETARG_BOOL(arg);
}

/* What a strict noop under a lease that is not the live one is told. */
#define QUEEN_NOT_OURS \
	"already acknowledged, but this lease is no longer live (it expired or was released), " \
	"so perhaps by the consumer the message went to next"

/*
 * Was the item carried out for this caller?  A noop under a lease that is
 * not the live one was acknowledged, but maybe by the consumer that took
 * the message over when this caller's lease ran out: its work must not
 * commit a second time, so it does not count.
 */
static bool
queen_item_ok(const QueenAckItem *item)
{
	return item->success && item->lease_problem == NULL;
}

/*
 * In strict mode, an item not carried out raises: 22023 when its
 * transactionId names nothing the ack can reach, 55000 for every other
 * reason (the lease, the cursor, a batch's earlier signal).  The core's
 * reasons are stable strings, so the prefix tells them apart.
 */
static void
queen_strict_check(const QueenAckItem *item, int index)
{
	const char *problem;

	if (queen_item_ok(item))
		return;
	problem = item->success ? QUEEN_NOT_OURS :
		(item->problem ? item->problem : "no reason given");
	ereport(ERROR,
			(errcode(!item->success && strncmp(problem, "unresolvable", 12) == 0 ?
					 ERRCODE_INVALID_PARAMETER_VALUE : ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("ack of transaction \"%s\" was not applied: %s",
					item->transaction_id, problem),
			 index >= 0 ? errdetail("It is item %d of the batch; nothing of the batch was applied.",
									index) : 0,
			 errhint("The call is strict (its strict argument, or queen.strict_acks), so the transaction cannot commit past it.")));
}

/*
 * success, error, lease_released, dlq, noop: the verdict's columns, as the
 * HTTP door answers them (a noop is applied, whoever applied it: strict
 * and ack_ok are the stricter judges).
 */
static void
queen_verdict_values(const QueenAckItem *item, Datum *values, bool *nulls)
{
	values[0] = BoolGetDatum(item->success);
	values[1] = item->problem ? CStringGetTextDatum(item->problem) : (Datum) 0;
	nulls[1] = item->problem == NULL;
	values[2] = BoolGetDatum(item->lease_released);
	values[3] = BoolGetDatum(item->dlq);
	values[4] = BoolGetDatum(item->noop);
}

/*
 * One acknowledgement from arguments (txn, partition id, lease id) at the
 * given positions, with a status and an error; its verdict as one row.
 */
static void
queen_ack_run_one(FunctionCallInfo fcinfo, QueenAckItem *item, QueenAckStatus status,
				  const char *error, const char *group)
{
	memset(item, 0, sizeof(*item));
	queen_require(fcinfo, 0, "transaction_id");
	queen_require(fcinfo, 1, "partition_id");
	queen_item_txn(item, text_to_cstring(PG_GETARG_TEXT_PP(0)));
	item->partition_id = queen_uuid_value(get_fn_expr_argtype(fcinfo->flinfo, 1),
										  PG_GETARG_DATUM(1));
	item->lease_id = queen_text_arg(fcinfo, 2);
	item->status = status;
	item->error = error;

	queen_ack(group, item, 1);
}

static Datum
queen_ack_one(FunctionCallInfo fcinfo, QueenAckStatus status, const char *error,
			  const char *group, bool strict)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueenAckItem item;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	InitMaterializedSRF(fcinfo, 0);
	queen_ack_run_one(fcinfo, &item, status, error, group);
	if (strict)
		queen_strict_check(&item, -1);

	queen_verdict_values(&item, values, nulls);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}

/*
 * queen.ack(transaction_id, partition_id, lease_id, status, consumer_group,
 *			 error, strict) -> (success, error, lease_released, dlq, noop)
 */
Datum
queen_ack_sql(PG_FUNCTION_ARGS)
{
	QueenAckStatus status = queen_status_arg(queen_text_arg(fcinfo, 3));
	const char *group = queen_group_arg(fcinfo, 4);

	return queen_ack_one(fcinfo, status, queen_text_arg(fcinfo, 5), group,
						 queen_strict_arg(fcinfo, 6));
}

/*
 * queen.ack_ok(transaction_id, partition_id, lease_id, status,
 *				consumer_group, error) -> boolean: whether the ack was carried
 * out for this caller (as strict judges it), for IF NOT queen.ack_ok(...)
 * THEN ... code.
 */
Datum
queen_ack_ok_sql(PG_FUNCTION_ARGS)
{
	QueenAckStatus status = queen_status_arg(queen_text_arg(fcinfo, 3));
	const char *group = queen_group_arg(fcinfo, 4);
	QueenAckItem item;

	queen_ack_run_one(fcinfo, &item, status, queen_text_arg(fcinfo, 5), group);
	PG_RETURN_BOOL(queen_item_ok(&item));
}

/*
 * queen.nack(transaction_id, partition_id, lease_id, error, consumer_group,
 *			  strict): status failed, a retry spent.
 */
Datum
queen_nack_sql(PG_FUNCTION_ARGS)
{
	const char *group = queen_group_arg(fcinfo, 4);

	return queen_ack_one(fcinfo, QUEEN_ACK_FAILED, queen_text_arg(fcinfo, 3), group,
						 queen_strict_arg(fcinfo, 5));
}

/* queen.reject(...): as queen.nack, status dlq (dead-lettered at once). */
Datum
queen_reject_sql(PG_FUNCTION_ARGS)
{
	const char *group = queen_group_arg(fcinfo, 4);

	return queen_ack_one(fcinfo, QUEEN_ACK_DLQ, queen_text_arg(fcinfo, 3), group,
						 queen_strict_arg(fcinfo, 5));
}

/* ----------------------------------------------------------------
 *		The batch form
 * ----------------------------------------------------------------
 */

/*
 * The elements of a one-dimensional array argument (NULL when absent), and
 * how many; with expected >= 0 there must be that many.
 */
static int
queen_array_arg(FunctionCallInfo fcinfo, int arg, const char *name, Oid elemtype,
				int expected, Datum **elems, bool **nulls)
{
	ArrayType  *a;
	int			n;

	*elems = NULL;
	*nulls = NULL;
	if (PG_ARGISNULL(arg))
		return 0;
	a = PG_GETARG_ARRAYTYPE_P(arg);
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array", name)));
	if (elemtype == UUIDOID && ARR_ELEMTYPE(a) == UUIDOID)
		deconstruct_array(a, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, elems, nulls, &n);
	else
		deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, elems, nulls, &n);
	if (expected >= 0 && n != expected)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s has %d elements, transaction_ids has %d", name, n, expected),
				 errdetail("Every array of a batch ack has one element per acknowledgement.")));
	return n;
}

/* Element i of an optional text array as a C string; NULL when absent. */
static const char *
queen_elem_text(const Datum *elems, const bool *nulls, int i)
{
	if (elems == NULL || nulls[i])
		return NULL;
	return TextDatumGetCString(elems[i]);
}

/* The items of a batch ack from its arrays, every one checked. */
static QueenAckItem *
queen_batch_items(FunctionCallInfo fcinfo, int *nitems)
{
	Datum	   *txns,
			   *pids,
			   *leases,
			   *statuses,
			   *errors;
	bool	   *txn_nulls,
			   *pid_nulls,
			   *lease_nulls,
			   *status_nulls,
			   *error_nulls;
	QueenAckItem *items;
	Oid			pid_type;
	int			n,
				i;

	queen_require(fcinfo, 0, "transaction_ids");
	queen_require(fcinfo, 1, "partition_ids");
	/* the array says what it holds, whichever overload was called */
	pid_type = ARR_ELEMTYPE(PG_GETARG_ARRAYTYPE_P(1)) == TEXTOID ? TEXTOID : UUIDOID;
	n = queen_array_arg(fcinfo, 0, "transaction_ids", TEXTOID, -1, &txns, &txn_nulls);
	queen_array_arg(fcinfo, 1, "partition_ids", pid_type, n, &pids, &pid_nulls);
	queen_array_arg(fcinfo, 2, "lease_ids", TEXTOID, n, &leases, &lease_nulls);
	queen_array_arg(fcinfo, 3, "statuses", TEXTOID, n, &statuses, &status_nulls);
	queen_array_arg(fcinfo, 5, "errors", TEXTOID, n, &errors, &error_nulls);

	items = palloc0(sizeof(QueenAckItem) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		QueenAckStatus status = queen_status_arg(queen_elem_text(statuses, status_nulls, i));

		if (txn_nulls[i] || pid_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s[%d] must not be NULL",
							txn_nulls[i] ? "transaction_ids" : "partition_ids", i + 1)));
		queen_item_txn(&items[i], TextDatumGetCString(txns[i]));
		items[i].partition_id = queen_uuid_value(pid_type, pids[i]);
		items[i].lease_id = queen_elem_text(leases, lease_nulls, i);
		items[i].status = status;
		items[i].error = queen_elem_text(errors, error_nulls, i);
	}
	*nitems = n;
	return items;
}

/*
 * queen.ack(transaction_ids[], partition_ids[], lease_ids[], statuses[],
 *			 consumer_group, errors[], strict)
 *	  -> (index, transaction_id, success, error, lease_released, dlq, noop)
 */
Datum
queen_ack_batch_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *group;
	QueenAckItem *items;
	int			n,
				i;

	InitMaterializedSRF(fcinfo, 0);
	group = queen_group_arg(fcinfo, 4);
	items = queen_batch_items(fcinfo, &n);

	queen_ack(group, items, n);
	if (queen_strict_arg(fcinfo, 6))
		for (i = 0; i < n; i++)
			queen_strict_check(&items[i], i);

	for (i = 0; i < n; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {false, false, false, false, false, false, false};

		values[0] = Int32GetDatum(i);
		values[1] = CStringGetTextDatum(items[i].transaction_id);
		queen_verdict_values(&items[i], values + 2, nulls + 2);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/* ----------------------------------------------------------------
 *		Leases and groups
 * ----------------------------------------------------------------
 */

/*
 * queen.renew(lease_id, seconds, strict) -> (renewed, expires_at); strict,
 * a lease that renewed nothing raises 55000.
 */
Datum
queen_renew_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz earliest;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int			renewed;

	InitMaterializedSRF(fcinfo, 0);
	queen_require(fcinfo, 0, "lease_id");
	queen_require(fcinfo, 1, "seconds");
	if (PG_GETARG_INT32(1) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seconds must be at least 1"),
				 errdetail("A renewal starts the lease again for this many seconds from now.")));
	if (PG_GETARG_INT32(1) > queen_max_lease_seconds)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("seconds must be at most %d (queen.max_lease_seconds)",
						queen_max_lease_seconds)));

	renewed = queen_renew_lease(text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_INT32(1),
								&earliest);
	if (renewed == 0 && queen_strict_arg(fcinfo, 2))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lease \"%s\" was not renewed: it holds no partition now",
						text_to_cstring(PG_GETARG_TEXT_PP(0))),
				 errdetail("It expired, or an ack, nack or retry released it."),
				 errhint("The call is strict (its strict argument, or queen.strict_acks), so the transaction cannot commit past it.")));

	values[0] = Int32GetDatum(renewed);
	values[1] = TimestampTzGetDatum(earliest);
	nulls[1] = renewed == 0;
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}

/* queen.delete_consumer_group(consumer_group, queue, delete_metadata) -> bigint */
Datum
queen_delete_consumer_group_sql(PG_FUNCTION_ARGS)
{
	const char *group = queen_group_arg(fcinfo, 0);
	const char *queue = queen_text_arg(fcinfo, 1);
	pg_uuid_t	tenant;

	queen_require(fcinfo, 2, "delete_metadata");
	queen_session_tenant(&tenant);
	PG_RETURN_INT64(queen_delete_consumer_group(&tenant, group, queue, PG_GETARG_BOOL(2)));
}

/*
 * queen._dlq_list(queue, consumer_group, partition, from, to, limit, offset)
 *	  -> (total, offset, transaction_id, ...): GET /api/v1/dlq's listing,
 *	  exposed for the regression tests.
 */
Datum
queen_dlq_list_sql(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	QueenDlqFilter filter;
	QueenDlqEntry *entries;
	int			nentries,
				i;
	int64		total;

	InitMaterializedSRF(fcinfo, 0);
	queen_require(fcinfo, 0, "queue");
	memset(&filter, 0, sizeof(filter));
	queen_session_tenant(&filter.tenant);
	filter.queue = queen_text_arg(fcinfo, 0);
	filter.group = queen_text_arg(fcinfo, 1);
	filter.partition = queen_text_arg(fcinfo, 2);
	filter.from = PG_ARGISNULL(3) ? DT_NOBEGIN : PG_GETARG_TIMESTAMPTZ(3);
	filter.to = PG_ARGISNULL(4) ? DT_NOEND : PG_GETARG_TIMESTAMPTZ(4);
	filter.limit = PG_ARGISNULL(5) ? 100 : PG_GETARG_INT32(5);
	filter.offset = PG_ARGISNULL(6) ? 0 : PG_GETARG_INT64(6);

	total = queen_dlq_list(&filter, &entries, &nentries);

	for (i = 0; i < nentries; i++)
	{
		QueenDlqEntry *e = &entries[i];
		Datum		values[8];
		bool		nulls[8] = {false, false, false, false, false, false, false, false};

		values[0] = Int64GetDatum(total);
		values[1] = e->partition ? CStringGetTextDatum(e->partition) : (Datum) 0;
		nulls[1] = e->partition == NULL;
		values[2] = CStringGetTextDatum(e->consumer_group);
		values[3] = Int64GetDatum(e->offset);
		values[4] = CStringGetTextDatum(e->transaction_id);
		values[5] = e->error ? CStringGetTextDatum(e->error) : (Datum) 0;
		nulls[5] = e->error == NULL;
		values[6] = e->payload ? CStringGetTextDatum(e->payload) : (Datum) 0;
		nulls[6] = e->payload == NULL;
		values[7] = Int32GetDatum(e->retry_count);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
