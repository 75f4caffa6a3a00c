/*-------------------------------------------------------------------------
 *
 * handle_consume.c
 *	  The listener's consumption routes: pop (one partition, a queue's
 *	  partitions, or the queues of a namespace/task), ack and ack/batch,
 *	  lease extension, the dead-letter listing and consumer-group deletion.
 *
 * Each handler reads the request (query string, body: consume_body.c),
 * refuses what is malformed with a 400 before anything is sent, and hands
 * the rest to a shard as a control request (wire.c encodes it); the shard
 * runs it through the consumption core and renders the body
 * (shard_consume.c).  Where a request goes: a pop of one partition to the
 * shard that owns it (as pushes do); a pop of a queue's partitions to the
 * shards in turn, so a busy queue's pops run in every process at once
 * (they claim with SKIP LOCKED, so they never wait for each other); a
 * discovery pop by its namespace and task; an ack to the shard of its
 * first item's partition id; the rest in turn.  A pop that delivers
 * nothing may park (longpoll.c).
 *
 * What a handler builds lives in the listener's memory of the loop's turn,
 * never in the request's context (answering frees that): a pop's argument
 * is copied into its request's context to be sent again, any other
 * request's into its ring message.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "listener.h"
#include "validate.h"
#include "codec.h"
#include "consume.h"
#include "consume_body.h"
#include "routes.h"
#include "ops.h"
#include "worker.h"
#include "maintenance/spool.h"

#include "common/hashfn.h"
#include "utils/memutils.h"

/* Longest timeout a pop may wait, in ms (an hour). */
#define QUEEN_POP_MAX_TIMEOUT_MS	3600000
#define QUEEN_POP_DEFAULT_TIMEOUT_MS	30000
#define QUEEN_DLQ_DEFAULT_LIMIT		100
#define QUEEN_DLQ_MAX_LIMIT			10000

/* A name given in the path or the query; false (and a 400) if it is not one. */
static bool
queen_check_param(QueenHttpRequest *req, const char *what, const char *value, Size len)
{
	const char *problem;

	if (value == NULL)
		return true;
	problem = queen_name_problem(value, len, QUEEN_MAX_NAME_BYTES);
	if (problem == NULL)
		return true;
	queen_respond_error(req, 400, psprintf("%s %s", what, problem));
	return false;
}

/*
 * A name from the query string (q) or else the path, empty or not given
 * being absent (length 0 on the wire); false, and a 400 that says which,
 * if it is not a name.
 */
bool
queen_take_name(QueenHttpRequest *req, const QueenQuery *q, const QueenRouteParams *params,
				const char *key, const char *what, QueenWireText *out)
{
	Size		len = 0;
	const char *value = q != NULL ? queen_query_get(q, key, &len) :
		queen_route_param(params, key, &len);

	*out = queen_wire_text(len > 0 ? value : NULL, len);
	return queen_check_param(req, what, out->data, out->len);
}

/* What each route reads of its query string; anything else is a 400. */
static const char *const queen_pop_params[] = {
	"batch", "wait", "timeout", "consumerGroup", "namespace", "task", "autoAck",
	"subscriptionMode", "subscriptionFrom", "partitions", "leaseSeconds", NULL
};
static const char *const queen_dlq_params[] = {
	"queue", "consumerGroup", "partition", "from", "to", "limit", "offset", NULL
};
static const char *const queen_group_delete_params[] = {"deleteMetadata", NULL};
static const char *const queen_no_params[] = {NULL};

/* The query string, or a 400. */
bool
queen_read_query(QueenHttpRequest *req, const char *const *allowed, QueenQuery *q)
{
	const char *problem = queen_query_parse(req->query, allowed, q);

	if (problem != NULL)
		queen_respond_error(req, 400, problem);
	return problem == NULL;
}

/*
 * subscriptionMode and subscriptionFrom as the shard will read them, or a
 * 400: a from that is not a moment registers nothing, instead of a group
 * that takes the whole backlog.
 */
static bool
queen_check_subscription(QueenHttpRequest *req, const char *mode, const char *from)
{
	QueenSubMode sub_mode;
	TimestampTz sub_from;
	const char *problem = queen_sub_mode_parse(mode, from, "subscriptionMode", "subscriptionFrom",
											   &sub_mode, &sub_from);

	if (problem != NULL)
		queen_respond_error(req, 400, problem);
	return problem == NULL;
}

/* The integer and boolean parameters of a pop, or a 400. */
static bool
queen_pop_numbers(QueenHttpRequest *req, const QueenQuery *q, QueenArgsPop *m, bool *wait,
				  int *timeout_ms)
{
	int64		batch,
				partitions,
				lease,
				timeout;
	bool		auto_ack;
	const char *problem;

	/*
	 * batch is bounded by what one ack may acknowledge, so that what a pop
	 * delivers can be acknowledged in one request; partitions 0 is no limit,
	 * leaseSeconds 0 the queue's leaseTime.
	 */
	if ((problem = queen_query_int(q, "batch", QUEEN_POP_DEFAULT_BATCH, 1,
								   Max(queen_max_ack_items, 1), &batch)) ||
		(problem = queen_query_int(q, "partitions", 1, 0, PG_INT32_MAX, &partitions)) ||
		(problem = queen_query_int(q, "leaseSeconds", 0, 0, queen_max_lease_seconds, &lease)) ||
		(problem = queen_query_int(q, "timeout", QUEEN_POP_DEFAULT_TIMEOUT_MS, 0,
								   QUEEN_POP_MAX_TIMEOUT_MS, &timeout)) ||
		(problem = queen_query_bool(q, "wait", false, wait)) ||
		(problem = queen_query_bool(q, "autoAck", false, &auto_ack)))
	{
		queen_respond_error(req, 400, problem);
		return false;
	}
	m->batch = (int32) batch;
	m->max_partitions = (int32) partitions;
	m->lease_seconds = lease > 0 ? (int32) lease : 0;
	m->auto_ack = auto_ack ? 1 : 0;
	*timeout_ms = (int) timeout;
	return true;
}

/*
 * GET /api/v1/pop/queue/:queue[/partition/:partition], and
 * GET /api/v1/pop?namespace=&task= (no queue: any of theirs): the queue
 * and partition from the path, the rest from the query string.
 */
void
queen_handle_pop(QueenHttpRequest *req, const QueenRouteParams *params)
{
	Size		qlen = 0,
				plen = 0;
	const char *queue = queen_route_param(params, "queue", &qlen);
	const char *partition = queen_route_param(params, "partition", &plen);
	QueenQuery q;
	QueenArgsPop m;
	Size		modelen = 0,
				fromlen = 0;
	const char *mode;
	const char *from;
	bool		wait;
	int			timeout_ms;
	int			shard;
	int			slot;
	StringInfoData arg;

	queen_count(QUEEN_COUNT_POP_REQUESTS, 1);
	memset(&m, 0, sizeof(m));
	if (!queen_read_query(req, queen_pop_params, &q) ||
		!queen_pop_numbers(req, &q, &m, &wait, &timeout_ms))
		return;
	/* pop maintenance mode: consumers pause, whatever they asked */
	if (queen_pop_maintenance_on())
	{
		queen_count(QUEEN_COUNT_POP_EMPTY, 1);
		queen_http_respond(req, 204, NULL, "", 0, NULL);
		return;
	}
	/* a queue's routes ignore namespace and task; the discovery route needs one */
	if (queue == NULL)
	{
		if (!queen_take_name(req, &q, NULL, "namespace", "namespace", &m.namespace_name) ||
			!queen_take_name(req, &q, NULL, "task", "task", &m.task))
			return;
		if (m.namespace_name.len == 0 && m.task.len == 0)
		{
			queen_respond_json(req, 400,
							   "{\"success\":false,\"error\":\"namespace or task is required\",\"messages\":[]}");
			return;
		}
	}
	mode = queen_query_get(&q, "subscriptionMode", &modelen);
	from = queen_query_get(&q, "subscriptionFrom", &fromlen);
	if (!queen_take_name(req, &q, NULL, "consumerGroup", "consumerGroup", &m.group) ||
		!queen_check_param(req, "queue name", queue, qlen) ||
		!queen_check_param(req, "partition name", partition, plen) ||
		!queen_check_subscription(req, mode, from))
		return;

	m.queue = queen_wire_text(queue, qlen);
	m.partition = queen_wire_text(partition, plen);
	m.sub_mode = queen_wire_text(mode, modelen);
	m.sub_from = queen_wire_text(from, fromlen);
	/* an empty answer before then is parked and sent again (longpoll.c) */
	m.retry_until = wait ? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms) : 0;
	initStringInfo(&arg);
	queen_control_put_args(&arg, QUEEN_CONTROL_POP, &m);

	if (queue != NULL)
	{
		/* one partition: its owner; a queue's partitions: any shard, in turn (-1) */
		shard = partition != NULL ?
			queen_shard_of(queen_req_tenant(req), queue, qlen, partition, plen,
						   queen_broker->nshards) : -1;
		slot = queen_wake_slot(queen_req_tenant(req), queue, qlen);
	}
	else
	{
		shard = queen_shard_of(queen_req_tenant(req), m.namespace_name.len ? m.namespace_name.data : "",
							   m.namespace_name.len, m.task.len ? m.task.data : "", m.task.len,
							   queen_broker->nshards);
		slot = -1;
	}
	queen_pop_submit(queen_pop_wait_new(req, arg.data, arg.len, shard, slot, wait, timeout_ms));
}


/* POST /api/v1/ack and /api/v1/ack/batch */
static void
queen_handle_ack_common(QueenHttpRequest *req, bool batch)
{
	char	   *group;
	Size		glen;
	QueenAckInput *items;
	int			nitems;
	const char *problem;
	int			status;
	StringInfoData arg;
	QueenArgsAck head;
	QueenQuery	q;
	int			shard = -1;
	int			i;

	queen_count(QUEEN_COUNT_ACK_REQUESTS, 1);
	if (!queen_read_query(req, queen_no_params, &q))
		return;
	problem = queen_parse_ack_body(req->body, req->body_len, batch, queen_max_ack_items, &status,
								   &group, &glen, &items, &nitems);
	if (problem != NULL)
	{
		queen_respond_error(req, status, problem);
		return;
	}
	queen_count(QUEEN_COUNT_ACK_ITEMS, nitems);
	if (nitems == 0)
	{
		queen_respond_json(req, 200, "[]");
		return;
	}

	initStringInfo(&arg);
	head.group = queen_wire_text(group, glen);
	head.nitems = nitems;
	queen_control_put_args(&arg, QUEEN_CONTROL_ACK, &head);
	for (i = 0; i < nitems; i++)
	{
		QueenAckInput *in = &items[i];

		queen_put_ack_item(&arg, in);
		/* the first partition's shard, so one partition's acks meet in one process */
		if (shard < 0 && in->problem == NULL)
			shard = (int) (hash_bytes(in->partition_id.data, UUID_LEN) %
						   (uint32) queen_broker->nshards);
	}
	(void) queen_control_submit(req, QUEEN_PENDING_CONTROL, QUEEN_CONTROL_ACK, shard,
								arg.data, arg.len);
}

/* One acknowledgement as it travels: an ack's item, or a transaction's ack. */
void
queen_put_ack_item(StringInfo arg, const QueenAckInput *in)
{
	QueenArgsAckItem w;

	memset(&w, 0, sizeof(w));
	w.flags = (in->problem ? 0 : QUEEN_ACK_ITEM_VALID) |
		(in->status ? QUEEN_ACK_ITEM_STATUS : 0) | (in->error ? QUEEN_ACK_ITEM_ERROR : 0);
	w.partition_id = (const char *) in->partition_id.data;
	w.txn = queen_wire_text(in->txn, in->txn_len);
	w.status = queen_wire_text(in->status, in->status_len);
	w.lease = queen_wire_text(in->lease, in->lease_len);
	w.error = queen_wire_text(in->error, in->error_len);
	w.problem = queen_wire_text(in->problem, in->problem ? strlen(in->problem) : 0);
	queen_wire_put_fields(arg, &queen_args_ack_item, &w);
}

void
queen_handle_ack(QueenHttpRequest *req, const QueenRouteParams *params)
{
	(void) params;
	queen_handle_ack_common(req, false);
}

void
queen_handle_ack_batch(QueenHttpRequest *req, const QueenRouteParams *params)
{
	(void) params;
	queen_handle_ack_common(req, true);
}

/* POST /api/v1/lease/:leaseId/extend {"seconds": N} */
void
queen_handle_lease_extend(QueenHttpRequest *req, const QueenRouteParams *params)
{
	Size		len = 0;
	const char *lease = queen_route_param(params, "leaseId", &len);
	QueenArgsRenew m;
	int32		seconds;
	const char *problem;
	pg_uuid_t	id;
	QueenQuery	q;

	if (!queen_read_query(req, queen_no_params, &q))
		return;
	problem = queen_parse_seconds_body(req->body, req->body_len, &seconds);
	if (problem == NULL && (seconds < 1 || seconds > queen_max_lease_seconds))
		problem = psprintf("seconds must be from 1 to %d (queen.max_lease_seconds)",
						   queen_max_lease_seconds);
	/*
	 * Lease ids are UUIDs, compared in their canonical lower-case form; the
	 * length check also refuses a decoded %00 that would end the string early.
	 */
	if (problem == NULL && ((len != QUEEN_LEASE_ID_LEN && len != UUID_LEN * 2) ||
							!queen_uuid_parse(pnstrdup(lease, len), &id)))
		problem = "leaseId must be a UUID (the leaseId a pop answered)";
	if (problem != NULL)
	{
		queen_respond_error(req, 400, problem);
		return;
	}
	lease = queen_lease_id_normal(pnstrdup(lease, len));
	len = strlen(lease);
	m.lease = queen_wire_text(lease, len);
	m.seconds = seconds;
	queen_control_call(req, QUEEN_CONTROL_RENEW, -1, &m);
}

/* A from or to bound of the listing: "now" or ISO-8601; why not, or NULL. */
const char *
queen_bound_problem(const char *name, const char *value)
{
	TimestampTz t;

	if (value == NULL || value[0] == '\0' || strcmp(value, "now") == 0 ||
		queen_parse_iso8601(value, &t))
		return NULL;
	return psprintf("%s must be \"now\" or an ISO-8601 timestamp such as 2026-01-31T08:00:00Z",
					name);
}

/* GET /api/v1/dlq?queue=&consumerGroup=&partition=&from=&to=&limit=&offset= */
void
queen_handle_dlq(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenQuery q;
	QueenArgsDlq m;
	Size		qlen = 0,
				fromlen = 0,
				tolen = 0;
	const char *from;
	const char *to;
	int64		limit,
				offset;
	const char *problem = NULL;

	(void) params;
	memset(&m, 0, sizeof(m));
	if (!queen_read_query(req, queen_dlq_params, &q))
		return;
	from = queen_query_get(&q, "from", &fromlen);
	to = queen_query_get(&q, "to", &tolen);
	if (queen_query_get(&q, "queue", &qlen) == NULL || qlen == 0)
		problem = "queue is required";
	else if ((problem = queen_query_int(&q, "limit", QUEEN_DLQ_DEFAULT_LIMIT, 1,
										QUEEN_DLQ_MAX_LIMIT, &limit)) == NULL &&
			 (problem = queen_query_int(&q, "offset", 0, 0, PG_INT64_MAX, &offset)) == NULL &&
			 (problem = queen_bound_problem("from", from)) == NULL)
		problem = queen_bound_problem("to", to);
	if (problem != NULL)
	{
		queen_respond_error(req, 400, problem);
		return;
	}
	if (!queen_take_name(req, &q, NULL, "queue", "queue name", &m.queue) ||
		!queen_take_name(req, &q, NULL, "consumerGroup", "consumerGroup", &m.group) ||
		!queen_take_name(req, &q, NULL, "partition", "partition name", &m.partition))
		return;
	m.from = queen_wire_text(from, fromlen);
	m.to = queen_wire_text(to, tolen);
	m.limit = (int32) limit;
	m.offset = offset;
	queen_control_call(req, QUEEN_CONTROL_DLQ, -1, &m);
}

/* DELETE /api/v1/consumer-groups/:group[/queues/:queue]?deleteMetadata= */
void
queen_handle_delete_group(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenQuery q;
	QueenArgsGroupDelete m;
	bool		metadata;
	const char *problem;

	if (!queen_read_query(req, queen_group_delete_params, &q))
		return;
	problem = queen_query_bool(&q, "deleteMetadata", true, &metadata);
	if (problem != NULL)
	{
		queen_respond_error(req, 400, problem);
		return;
	}
	if (!queen_take_name(req, NULL, params, "group", "consumerGroup", &m.group) ||
		!queen_take_name(req, NULL, params, "queue", "queue name", &m.queue))
		return;
	m.delete_metadata = metadata ? 1 : 0;
	queen_control_call(req, QUEEN_CONTROL_DELETE_GROUP, -1, &m);
}
