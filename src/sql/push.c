/*-------------------------------------------------------------------------
 *
 * push.c
 *	  queen.push: the SQL door, with the same contract as the HTTP push,
 *	  inside the caller's own transaction.
 *
 * A call is handled as the broker handles a request, minus the fusion:
 * mint a UUIDv7 per item, default the transactionId to the id's text,
 * layer-1 dedup on (queue, partition, transactionId) inside the call, group
 * by (tenant, queue, partition), and hand the groups to the bundle engine
 * (bundle.c), which does layer 2, the allocator rounds and the originals'
 * ids exactly as it does for the broker's shards.
 *
 * Payloads arrive as jsonb, so what is stored is jsonb's canonical text of
 * the value, byte for byte what queen.read and the HTTP pop give back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "bundle.h"
#include "validate.h"
#include "codec.h"
#include "wait.h"

#include "fmgr.h"
#include "funcapi.h"
#include "access/htup_details.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(queen_push_one);
PG_FUNCTION_INFO_V1(queen_push_items);

/* One item of a push call. */
typedef struct QueenPushItem
{
	/* input; strings NUL-terminated */
	const char *queue;
	const char *partition;
	const char *txn;			/* NULL or empty: minted */
	const char *payload;
	size_t		payload_len;

	/* decided here */
	pg_uuid_t	message_id;		/* minted; a duplicate's becomes the original's */
	uint8		hash[QUEEN_HASH_LEN];
	int			leader;			/* item whose verdict this one copies, or -1 */
	QueenSegmentStatus status;	/* the verdict of the frame it became */
	int64		log_offset;		/* -1: unknown */
	TimestampTz created_at;
	bool		created_known;
} QueenPushItem;

/*
 * Check one name of an item.  The label naming the item is only built for
 * an error, not for every item of every push.
 */
static void
queen_check_item_name(const char *what, const char *name, size_t max_len,
					  int i, bool from_array)
{
	size_t		len = strlen(name);

	if (queen_name_problem(name, len, max_len) == NULL)
		return;
	queen_check_name(from_array ? psprintf("items[%d]: %s", i, what) : what,
					 name, len, max_len);
}

/*
 * Check one item; errors name the item (items[i]) when the call had an
 * items array, so a bad item in a thousand can be found.
 */
static void
queen_validate_item(const QueenPushItem *item, int i, bool from_array)
{
	if (item->queue == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%squeue is required", from_array ? psprintf("items[%d]: ", i) : "")));
	if (item->payload == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%spayload is required", from_array ? psprintf("items[%d]: ", i) : ""),
				 errhint("A JSON null payload is written as 'null'::jsonb.")));
	queen_check_item_name("queue name", item->queue, QUEEN_MAX_NAME_BYTES, i, from_array);
	queen_check_item_name("partition name", item->partition, QUEEN_MAX_NAME_BYTES, i, from_array);
	if (item->txn != NULL && item->txn[0] != '\0')
		queen_check_item_name("transactionId", item->txn, QUEEN_MAX_TXN_BYTES, i, from_array);
}

/*
 * Encode a group's leaders as frames, end to end in one buffer (so the
 * bundle engine compresses them where they are), and describe each to the
 * engine with the hash and id the item already has.
 */
static void
queen_push_sql_group(QueenBundleGroup *g, const QueenPushItem *items,
						const int *members, int nmembers, const pg_uuid_t *tenant)
{
	StringInfoData packed;
	Size		pos = 0;
	int			k;

	initStringInfo(&packed);
	g->frames = palloc(sizeof(QueenBundleFrame) * nmembers);
	for (k = 0; k < nmembers; k++)
	{
		const QueenPushItem *item = &items[members[k]];
		QueenFrame	frame;

		memset(&frame, 0, sizeof(frame));
		frame.message_id = item->message_id;
		frame.txn = item->txn;
		frame.txn_len = (uint16) strlen(item->txn);
		frame.payload = item->payload;
		frame.payload_len = (uint32) item->payload_len;
		queen_frame_append(&packed, &frame);
		g->frames[k].packed_len = (uint32) queen_frame_size(&frame);
	}
	/* pointers into packed only once it has stopped growing */
	for (k = 0; k < nmembers; k++)
	{
		const QueenPushItem *item = &items[members[k]];
		QueenBundleFrame *f = &g->frames[k];

		f->packed = packed.data + pos;
		pos += f->packed_len;
		memcpy(f->hash, item->hash, QUEEN_HASH_LEN);
		f->message_id = item->message_id;
	}
	g->queue = items[members[0]].queue;
	g->partition = items[members[0]].partition;
	g->tenant = *tenant;
	g->nframes = nmembers;
}

/*
 * Push items as one bundle in the current transaction and fill in every
 * item's verdict.
 */
static void
queen_push_items_core(QueenPushItem *items, int n, const pg_uuid_t *tenant,
					  bool from_array)
{
	QueenItemKey *keys;
	int		   *leader;
	QueenBundleGroup *groups;
	int		  **group_items;
	int		   *nmembers;
	int			ngroups;
	int			i;

	if (n == 0)
		return;

	for (i = 0; i < n; i++)
	{
		QueenPushItem *item = &items[i];

		queen_validate_item(item, i, from_array);
		queen_uuid_v7(&item->message_id);
		if (item->txn == NULL || item->txn[0] == '\0')
		{
			char	   *minted = palloc(UUID_LEN * 2 + 5);

			queen_uuid_format(&item->message_id, minted);
			item->txn = minted;
		}
		queen_txn_hash(item->txn, strlen(item->txn), item->hash);
		item->leader = -1;
		item->status = QUEEN_SEGMENT_PENDING;
		item->log_offset = -1;
		item->created_known = false;
	}

	/*
	 * Layer 1 and groups (bundle.c): the first occurrence of (queue,
	 * partition, txn) leads; each group's leaders become its frames, in
	 * item order.  Layer 2, the rounds and the originals' ids are the
	 * bundle engine's.
	 */
	keys = palloc(sizeof(QueenItemKey) * n);
	leader = palloc(sizeof(int) * n);
	for (i = 0; i < n; i++)
	{
		keys[i].queue = items[i].queue;
		keys[i].partition = items[i].partition;
		keys[i].txn = items[i].txn;
	}
	ngroups = queen_group_items(keys, n, leader, &group_items, &nmembers);
	for (i = 0; i < n; i++)
		items[i].leader = leader[i];

	groups = palloc0(sizeof(QueenBundleGroup) * ngroups);
	for (i = 0; i < ngroups; i++)
		queen_push_sql_group(&groups[i], items, group_items[i], nmembers[i], tenant);

	queen_bundle_push(groups, ngroups);
	/* waiting pops (and, with queen.notify, listeners) learn of it at COMMIT */
	for (i = 0; i < ngroups; i++)
		queen_wait_mark(tenant, groups[i].queue, strlen(groups[i].queue));

	for (i = 0; i < ngroups; i++)
	{
		QueenBundleGroup *g = &groups[i];
		int			k;

		for (k = 0; k < g->nframes; k++)
		{
			QueenPushItem *item = &items[group_items[i][k]];
			QueenBundleFrame *f = &g->frames[k];

			item->status = f->status;
			item->message_id = f->message_id;
			item->log_offset = f->offset;
			item->created_at = f->created_at;
			item->created_known = f->created_known;
		}
	}

	/* Layer-1 followers inherit their leader's final verdict, as duplicates. */
	for (i = 0; i < n; i++)
	{
		QueenPushItem *item = &items[i];
		QueenPushItem *leader;

		if (item->leader < 0)
			continue;
		leader = &items[item->leader];
		item->status = QUEEN_SEGMENT_DUPLICATE;
		item->message_id = leader->message_id;
		item->log_offset = leader->log_offset;
		item->created_at = leader->created_at;
		item->created_known = leader->created_known;
	}
}

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
	queen_push_items_core(&item, 1, &tenant, false);

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
	queen_push_items_core(items, n, &tenant, true);

	for (i = 0; i < n; i++)
		tuplestore_puttuple(rsinfo->setResult,
							queen_result_tuple(rsinfo->setDesc, &items[i], i));
	return (Datum) 0;
}
