/*-------------------------------------------------------------------------
 *
 * handle_txn.c
 *	  POST /api/v1/transaction: pushes and acks that happen together or
 *	  not at all.  The listener parses and checks the request, mints the
 *	  pushed items' ids and packs their frames, and hands the whole of it to
 *	  one shard, which runs it in one transaction (shard/shard_txn.c).
 *
 * The body is Queen's: {"operations": [...], "requiredLeases": [...]}, an
 * operation {"type": "push", "items": [{queue, partition?, payload,
 * transactionId?}, ...]} (or one item's keys beside "type") or {"type":
 * "ack", transactionId, partitionId, status?, consumerGroup?, leaseId?,
 * error?}.  A push's items go through the push body's own parser
 * (push_body.c), an ack's keys through the ack's (consume_body.c), so each
 * is refused for what a push or an ack is refused for, and what this door
 * stores every reader can return.  Anything malformed is a 400 for the
 * whole request, before anything is sent: a transaction is all or nothing
 * from its first check on.
 *
 * The shard that runs it is the one that owns the first pushed partition
 * (its bundles there wait for nothing of ours), else the first acked
 * partition's, as an ack's; the others' partitions it locks like any
 * writer, in the global order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "listener.h"
#include "codec.h"
#include "maintenance/spool.h"
#include "consume_body.h"
#include "json_walk.h"
#include "ops.h"
#include "push_body.h"
#include "routes.h"
#include "validate.h"
#include "worker.h"

#include "common/hashfn.h"

/* An operation's keys: an ack's first (QueenAckKey), then a push's. */
enum
{
	QUEEN_TXN_KEY_TYPE = QUEEN_ACK_NKEYS,
	QUEEN_TXN_KEY_ITEMS,
	QUEEN_TXN_NKEYS
};

static const char *const queen_txn_op_keys[QUEEN_TXN_NKEYS] = {
	"transactionId", "partitionId", "status", "leaseId", "error", "consumerGroup",
	"type", "items"
};

static const char *const queen_txn_top_keys[] = {"operations", "requiredLeases"};

#define QUEEN_TXN_TOP_OPS		0
#define QUEEN_TXN_TOP_LEASES	1

/* One operation as parsed: a pushed item, or an ack. */
typedef struct QueenTxnOp
{
	uint8		kind;			/* QUEEN_TXN_PUSH or QUEEN_TXN_ACK */
	QueenHttpItem push;
	QueenAckInput ack;
	char	   *group;			/* an ack's consumerGroup, or NULL */
	Size		group_len;
} QueenTxnOp;

typedef struct QueenTxnParse
{
	char	   *error;			/* the first problem: 400, or 413 with too_many */
	bool		too_many;
	const QueenJsonShape *shape;
	QueenJsonValue v[QUEEN_TXN_NKEYS];	/* the current operation's */
	QueenTxnOp *ops;
	int			nops;
	int			maxops;
	int			npush;
	int			nack;
	char	  **leases;
	int			nleases;
	int			maxleases;
} QueenTxnParse;

static void
queen_txn_fail(QueenTxnParse *st, char *message)
{
	if (st->error == NULL)
		st->error = message;
}

static QueenTxnOp *
queen_txn_add(QueenTxnParse *st, uint8 kind)
{
	QueenTxnOp *op;

	if (st->nops == st->maxops)
	{
		st->maxops = st->maxops == 0 ? 16 : st->maxops * 2;
		st->ops = st->ops == NULL ? palloc(sizeof(QueenTxnOp) * st->maxops) :
			repalloc(st->ops, sizeof(QueenTxnOp) * st->maxops);
	}
	op = &st->ops[st->nops++];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	return op;
}

/*
 * A push operation's items, through the push body's parser: its "items"
 * array, or the operation itself as the one item.  Its messages name the
 * operation.
 */
static void
queen_txn_push(QueenTxnParse *st, int index)
{
	const QueenJsonValue *items = &st->v[QUEEN_TXN_KEY_ITEMS];
	StringInfoData body;
	QueenHttpItem *parsed;
	int			n;
	bool		too_many;
	const char *problem;
	int			i;

	initStringInfo(&body);
	if (items->type == JSON_TOKEN_ARRAY_START)
	{
		appendStringInfoString(&body, "{\"items\":");
		appendBinaryStringInfo(&body, items->span, (int) items->span_len);
	}
	else if (items->type != JSON_TOKEN_INVALID)
	{
		queen_txn_fail(st, psprintf("operations[%d]: items must be an array", index));
		return;
	}
	else
	{
		appendStringInfoString(&body, "{\"items\":[");
		appendBinaryStringInfo(&body, st->shape->element_span, (int) st->shape->element_span_len);
		appendStringInfoChar(&body, ']');
	}
	appendStringInfoChar(&body, '}');
	problem = queen_parse_push_body(body.data, body.len, 0, &parsed, &n, &too_many);
	if (problem != NULL)
	{
		/* the one item of a flat operation is the operation */
		if (items->type == JSON_TOKEN_INVALID && strncmp(problem, "items[0]: ", 10) == 0)
			queen_txn_fail(st, psprintf("operations[%d]: %s", index, problem + 10));
		else
			queen_txn_fail(st, psprintf("operations[%d].%s", index, problem));
		return;
	}
	if (st->npush + n > queen_max_push_items)
	{
		st->too_many = true;
		queen_txn_fail(st, psprintf("more than %d pushed items in one transaction (queen.max_push_items)",
									queen_max_push_items));
		return;
	}
	st->npush += n;
	for (i = 0; i < n; i++)
		queen_txn_add(st, QUEEN_TXN_PUSH)->push = parsed[i];
}

/* An ack operation: checked as an ack body's item is. */
static bool
queen_txn_ack(QueenTxnParse *st, int index)
{
	const QueenJsonValue *g = &st->v[QUEEN_ACK_KEY_GROUP];
	QueenTxnOp *op;
	const char *problem;

	if (++st->nack > queen_max_ack_items)
	{
		st->too_many = true;
		queen_txn_fail(st, psprintf("more than %d acks in one transaction (queen.max_ack_items)",
									queen_max_ack_items));
		return false;
	}
	op = queen_txn_add(st, QUEEN_TXN_ACK);
	queen_ack_input(st->v, &op->ack);
	if (op->ack.problem != NULL)
	{
		queen_txn_fail(st, psprintf("operations[%d]: %s", index, op->ack.problem));
		return false;
	}
	if (g->type == JSON_TOKEN_STRING && g->len > 0)
	{
		problem = queen_name_problem(g->str, g->len, QUEEN_MAX_NAME_BYTES);
		if (problem != NULL)
		{
			queen_txn_fail(st, psprintf("operations[%d]: consumerGroup %s", index, problem));
			return false;
		}
		op->group = g->str;
		op->group_len = g->len;
	}
	else if (g->type != JSON_TOKEN_INVALID && g->type != JSON_TOKEN_NULL &&
			 g->type != JSON_TOKEN_STRING)
	{
		queen_txn_fail(st, psprintf("operations[%d]: consumerGroup must be a string", index));
		return false;
	}
	return true;
}

/* An operation's keys were read; true keeps its strings (an ack's). */
static bool
queen_txn_element_end(void *arg, int index, bool object)
{
	QueenTxnParse *st = (QueenTxnParse *) arg;
	const QueenJsonValue *type = &st->v[QUEEN_TXN_KEY_TYPE];

	if (st->error != NULL)
		return false;
	if (!object)
		queen_txn_fail(st, psprintf("operations[%d] must be an object", index));
	else if (type->type == JSON_TOKEN_INVALID || type->type == JSON_TOKEN_NULL)
		queen_txn_fail(st, psprintf("operations[%d]: type is required (push or ack)", index));
	else if (type->type != JSON_TOKEN_STRING)
		queen_txn_fail(st, psprintf("operations[%d]: type must be a string (push or ack)", index));
	else if (strcmp(type->str, "push") == 0)
		queen_txn_push(st, index);
	else if (strcmp(type->str, "ack") == 0)
		return queen_txn_ack(st, index);
	else
		queen_txn_fail(st, psprintf("operations[%d]: unknown operation type \"%s\" (push or ack)",
									index, type->str));
	return false;
}

/* A later "operations" replaces an earlier one whole, as jsonb keeps the last key. */
static void
queen_txn_ops_begin(void *arg)
{
	QueenTxnParse *st = (QueenTxnParse *) arg;

	st->error = NULL;
	st->too_many = false;
	st->nops = st->npush = st->nack = 0;
}

/* requiredLeases: lease ids a pop answered, each a string holding a UUID. */
static char *
queen_txn_take_lease(void *arg, int index, char *str, size_t len)
{
	QueenTxnParse *st = (QueenTxnParse *) arg;
	pg_uuid_t	lease;

	(void) len;
	if (!queen_uuid_parse(str, &lease))
		return psprintf("requiredLeases[%d] must be a UUID (a leaseId a pop answered)", index);
	if (st->nleases == queen_max_ack_items)
	{
		st->too_many = true;
		return psprintf("requiredLeases has more than %d leases (queen.max_ack_items)",
						queen_max_ack_items);
	}
	if (st->nleases == st->maxleases)
	{
		st->maxleases = st->maxleases == 0 ? 8 : st->maxleases * 2;
		st->leases = st->leases == NULL ? palloc(sizeof(char *) * st->maxleases) :
			repalloc(st->leases, sizeof(char *) * st->maxleases);
	}
	st->leases[st->nleases++] = str;
	return NULL;
}

static void
queen_txn_leases(QueenTxnParse *st, const QueenJsonValue *v)
{
	char	   *problem;

	if (v->type == JSON_TOKEN_INVALID || v->type == JSON_TOKEN_NULL)
		return;
	if (v->type != JSON_TOKEN_ARRAY_START)
	{
		queen_txn_fail(st, pstrdup("requiredLeases must be an array"));
		return;
	}
	problem = queen_json_strings(v->span, v->span_len, queen_txn_take_lease, st);
	if (problem != NULL && strncmp(problem, "element ", 8) == 0)
		problem = psprintf("requiredLeases: %s", problem);
	if (problem != NULL)
		queen_txn_fail(st, problem);
}

/* The body's operations and leases; NULL, or why not (*status 400 or 413). */
static const char *
queen_parse_txn_body(const char *body, size_t len, QueenTxnParse *st, int *status)
{
	QueenJsonShape shape;
	QueenJsonValue top[lengthof(queen_txn_top_keys)];
	char	   *problem = queen_body_problem(body, len);

	*status = 400;
	if (problem != NULL)
		return problem;
	memset(st, 0, sizeof(*st));
	queen_json_shape_keys(&shape, queen_txn_top_keys, lengthof(queen_txn_top_keys), top);
	queen_json_shape_array(&shape, QUEEN_TXN_TOP_OPS, queen_txn_op_keys, QUEEN_TXN_NKEYS, st->v,
						   queen_txn_ops_begin, queen_txn_element_end, st);
	st->shape = &shape;

	problem = queen_json_shape(body, len, &shape);
	if (problem != NULL)
		return psprintf("invalid JSON: %s", problem);
	if (!shape.root_object)
		return "body must be a JSON object";
	if (top[QUEEN_TXN_TOP_OPS].type == JSON_TOKEN_INVALID)
		return "operations array required";
	if (top[QUEEN_TXN_TOP_OPS].type != JSON_TOKEN_ARRAY_START)
		return "operations must be an array";
	if (st->error == NULL)
		queen_txn_leases(st, &top[QUEEN_TXN_TOP_LEASES]);
	if (st->error != NULL)
	{
		*status = st->too_many ? 413 : 400;
		return st->error;
	}
	if (st->nops == 0)
		return "operations array cannot be empty";
	return NULL;
}

/* One pushed item on the wire: its id minted, its frame packed as stored. */
void
queen_txn_put_push(StringInfo arg, const QueenHttpItem *item, const char *subject)
{
	QueenArgsTxnItem w;
	QueenFrame	frame;
	StringInfoData packed;
	char	   *txn = item->txn;

	memset(&frame, 0, sizeof(frame));
	queen_uuid_v7(&frame.message_id);
	if (txn == NULL)
	{
		txn = palloc(UUID_LEN * 2 + 5);
		queen_uuid_format(&frame.message_id, txn);
	}
	frame.txn = txn;
	frame.txn_len = (uint16) strlen(txn);
	queen_frame_set_producer(&frame, subject);
	frame.payload = item->payload;
	frame.payload_len = (uint32) item->payload_len;
	initStringInfo(&packed);
	queen_frame_append(&packed, &frame);

	memset(&w, 0, sizeof(w));
	w.kind = QUEEN_TXN_PUSH;
	w.queue = queen_wire_text(item->queue, item->queue_len);
	w.partition = queen_wire_text(item->partition, item->partition_len);
	w.txn = queen_wire_text(txn, frame.txn_len);
	w.frame = queen_wire_text(packed.data, packed.len);
	queen_control_put_item(arg, QUEEN_CONTROL_TXN, &w);
}

/* An ack on the wire: its group, then the ack's own item. */
static void
queen_txn_put_ack(StringInfo arg, const QueenTxnOp *op)
{
	QueenArgsTxnItem w;

	memset(&w, 0, sizeof(w));
	w.kind = QUEEN_TXN_ACK;
	w.group = queen_wire_text(op->group, op->group_len);
	queen_control_put_item(arg, QUEEN_CONTROL_TXN, &w);
	queen_put_ack_item(arg, &op->ack);
}

/*
 * POST /api/v1/transaction: a 400 or 413 for what is malformed, else the
 * whole request to one shard (a 503 when none can take it).
 */
void
queen_handle_transaction(QueenHttpRequest *req, const QueenRouteParams *params)
{
	int			shard = -1;
	int			status;
	int			i;
	const char *problem;
	QueenTxnParse st;
	QueenArgsTxn head;
	StringInfoData arg;

	(void) params;
	problem = queen_parse_txn_body(req->body, req->body_len, &st, &status);
	if (problem != NULL)
	{
		queen_respond_error(req, status, problem);
		return;
	}
	/*
	 * In maintenance mode pushes wait in the spool, and a transaction's
	 * pushes cannot: stored now, they would overtake what waits there.
	 */
	if (st.npush > 0 && queen_maintenance_on())
	{
		queen_respond_error(req, 503,
							"the broker is in maintenance mode: pushes wait in the spool, and a transaction's pushes, which must commit with its acks, cannot; nothing was done, try again when maintenance mode is off");
		return;
	}

	initStringInfo(&arg);
	memset(&head, 0, sizeof(head));
	head.nitems = st.nops + st.nleases;
	queen_control_put_args(&arg, QUEEN_CONTROL_TXN, &head);
	for (i = 0; i < st.nops; i++)
	{
		const QueenTxnOp *op = &st.ops[i];

		if (op->kind == QUEEN_TXN_PUSH)
		{
			queen_txn_put_push(&arg, &op->push, req->subject);
			if (shard < 0)
				shard = queen_shard_of(queen_req_tenant(req), op->push.queue, op->push.queue_len,
									   op->push.partition, op->push.partition_len,
									   queen_broker->nshards);
		}
		else
			queen_txn_put_ack(&arg, op);
	}
	for (i = 0; i < st.nleases; i++)
	{
		QueenArgsTxnItem w;

		memset(&w, 0, sizeof(w));
		w.kind = QUEEN_TXN_LEASE;
		w.lease = queen_wire_text(st.leases[i], strlen(st.leases[i]));
		queen_control_put_item(&arg, QUEEN_CONTROL_TXN, &w);
	}
	/* no push: the first ack's partition's shard, as an ack's */
	for (i = 0; shard < 0 && i < st.nops; i++)
		if (st.ops[i].kind == QUEEN_TXN_ACK)
			shard = (int) (hash_bytes(st.ops[i].ack.partition_id.data, UUID_LEN) %
						   (uint32) queen_broker->nshards);
	(void) queen_control_submit(req, QUEEN_PENDING_CONTROL, QUEEN_CONTROL_TXN, shard,
								arg.data, arg.len);
}
