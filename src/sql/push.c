/*-------------------------------------------------------------------------
 *
 * push.c
 *	  queen.push: the SQL door, with the same contract as the HTTP push,
 *	  inside the caller's own transaction.
 *
 * The items go through the core's push_items.c, which handles a call as
 * the broker handles a request, minus the fusion; this file turns jsonb
 * arguments into items and verdicts into rows.
 *
 * Payloads arrive as jsonb, so what is stored is jsonb's canonical text of
 * the value, byte for byte what queen.read and the HTTP pop give back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "codec.h"
#include "push_items.h"

#include "fmgr.h"
#include "funcapi.h"
#include "access/htup_details.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(queen_push_one);
PG_FUNCTION_INFO_V1(queen_push_items);

/* ----------------------------------------------------------------
 *		SQL functions
 * ----------------------------------------------------------------
 */

static HeapTuple
queen_result_tuple(TupleDesc desc, const QueenPushItem *item, int index)
{
	Datum		values[8];
	bool		nulls[8];
	pg_uuid_t  *mid = palloc(sizeof(pg_uuid_t));

	memset(nulls, 0, sizeof(nulls));
	*mid = item->message_id;
	values[0] = Int32GetDatum(index);
	values[1] = UUIDPGetDatum(mid);
	values[2] = CStringGetTextDatum(item->txn);
	values[3] = CStringGetTextDatum(item->queue);
	values[4] = CStringGetTextDatum(item->partition);
	values[5] = CStringGetTextDatum(item->status == QUEEN_SEGMENT_QUEUED ? "queued" : "duplicate");
	values[6] = Int64GetDatum(item->log_offset);
	nulls[6] = item->log_offset < 0;
	values[7] = TimestampTzGetDatum(item->created_at);
	nulls[7] = !item->created_known;
	return heap_form_tuple(desc, values, nulls);
}

/* jsonb's canonical text of a value; scalars are wrapped to be printed. */
static char *
queen_jsonb_value_text(JsonbValue *v, size_t *len)
{
	char	   *text;

	if (v->type == jbvBinary)
		text = JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
	else
	{
		Jsonb	   *wrapped = JsonbValueToJsonb(v);

		text = JsonbToCString(NULL, &wrapped->root, VARSIZE(wrapped));
	}
	*len = strlen(text);
	return text;
}

/* An optional string field of an item object; NULL when absent or null. */
static const char *
queen_item_string(JsonbContainer *obj, const char *key, int i)
{
	JsonbValue	v;

	if (getKeyJsonValueFromContainer(obj, key, strlen(key), &v) == NULL ||
		v.type == jbvNull)
		return NULL;
	if (v.type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("items[%d]: %s must be a string", i, key)));
	return pnstrdup(v.val.string.val, v.val.string.len);
}

/*
 * queen.push(queue, payload, partition, transaction_id) -> queen.push_result
 */
Datum
queen_push_one(PG_FUNCTION_ARGS)
{
	QueenPushItem item;
	TupleDesc	desc;
	pg_uuid_t	tenant;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "queen.push must return a composite type");
	desc = BlessTupleDesc(desc);

	memset(&item, 0, sizeof(item));
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue must not be NULL")));
	item.queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("payload must not be NULL"),
				 errhint("A JSON null payload is written as 'null'::jsonb.")));
	{
		Jsonb	   *payload = PG_GETARG_JSONB_P(1);

		item.payload = JsonbToCString(NULL, &payload->root, VARSIZE(payload));
		item.payload_len = strlen(item.payload);
	}
	item.partition = PG_ARGISNULL(2) ? "Default" : text_to_cstring(PG_GETARG_TEXT_PP(2));
	item.txn = PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3));

	queen_session_tenant(&tenant);
	queen_push_items_run(&item, 1, &tenant, false);

	PG_RETURN_DATUM(HeapTupleGetDatum(queen_result_tuple(desc, &item, 0)));
}

/*
 * queen.push(items jsonb) -> setof queen.push_result
 *
 * items is the HTTP body's array, or the whole body {"items": [...]}.
 */
Datum
queen_push_items(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Jsonb	   *body;
	JsonbContainer *array;
	QueenPushItem *items;
	pg_uuid_t	tenant;
	int			n,
				i;

	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("items must not be NULL")));
	body = PG_GETARG_JSONB_P(0);

	if (JB_ROOT_IS_ARRAY(body) && !JB_ROOT_IS_SCALAR(body))
		array = &body->root;
	else if (JB_ROOT_IS_OBJECT(body))
	{
		JsonbValue	v;

		if (getKeyJsonValueFromContainer(&body->root, "items", 5, &v) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("push body has no \"items\" array")));
		if (v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"items\" must be an array")));
		array = v.val.binary.data;
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("push body must be an array of items or an object with an \"items\" array")));

	n = JsonContainerSize(array);
	items = palloc0(sizeof(QueenPushItem) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(array, i);
		JsonbContainer *obj;
		JsonbValue	payload;

		if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("items[%d] must be an object", i)));
		obj = v->val.binary.data;
		items[i].queue = queen_item_string(obj, "queue", i);
		items[i].partition = queen_item_string(obj, "partition", i);
		if (items[i].partition == NULL)
			items[i].partition = "Default";
		items[i].txn = queen_item_string(obj, "transactionId", i);
		if (getKeyJsonValueFromContainer(obj, "payload", 7, &payload) != NULL)
			items[i].payload = queen_jsonb_value_text(&payload, &items[i].payload_len);
	}

	queen_session_tenant(&tenant);
	queen_push_items_run(items, n, &tenant, true);

	for (i = 0; i < n; i++)
		tuplestore_puttuple(rsinfo->setResult,
							queen_result_tuple(rsinfo->setDesc, &items[i], i));
	return (Datum) 0;
}
