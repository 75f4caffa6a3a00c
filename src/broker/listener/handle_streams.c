/*-------------------------------------------------------------------------
 *
 * handle_streams.c
 *	  The stream-processing routes of Queen's streaming SDK: POST
 *	  /streams/v1/queries (register a query), POST /streams/v1/state/get
 *	  (a partition's state) and POST /streams/v1/cycle (state changes,
 *	  sink pushes and the source ack, all or nothing).
 *
 * Bodies are Queen's, with its snake_case keys.  Each is checked here;
 * anything malformed is a 400 before anything is sent.  Registration and
 * reads run in any shard (shard/shard_streams.c).  A cycle is a
 * transaction with state changes (shard/shard_txn.c): its pushes go
 * through the push body's parser and its ack through the ack's, so they
 * are refused for what a push or an ack is refused for; it runs in the
 * shard that owns its first pushed partition, else its source
 * partition's, as a transaction does.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "listener.h"
#include "codec.h"
#include "consume_body.h"
#include "json_walk.h"
#include "maintenance/spool.h"
#include "ops.h"
#include "push_body.h"
#include "routes.h"
#include "streams.h"
#include "validate.h"
#include "worker.h"

#include "common/hashfn.h"


/* The most keys one state read may name. */
#define QUEEN_STREAM_MAX_KEYS	10000

/* ----------------------------------------------------------------
 *		POST /streams/v1/queries
 * ----------------------------------------------------------------
 */
enum
{
	QUEEN_REG_NAME,
	QUEEN_REG_SOURCE,
	QUEEN_REG_SINK,
	QUEEN_REG_HASH,
	QUEEN_REG_RESET,
	QUEEN_REG_NKEYS
};

static const char *const queen_reg_keys[QUEEN_REG_NKEYS] = {
	"name", "source_queue", "sink_queue", "config_hash", "reset"
};

/* A body's keys walked by names (no nested object, no array of elements). */
static const char *
queen_stream_walk(QueenHttpRequest *req, const char *const *names, int n, QueenJsonValue *v)
{
	QueenJsonShape shape;

	queen_json_shape_keys(&shape, names, n, v);
	return queen_body_walk(req->body, req->body_len, &shape);
}

/* A required name: present, a string, not empty, a valid name. */
static const char *
queen_stream_required(const QueenJsonValue *v, const char *key, char **out)
{
	if (v->type == JSON_TOKEN_INVALID || v->type == JSON_TOKEN_NULL ||
		(v->type == JSON_TOKEN_STRING && v->len == 0))
		return psprintf("%s is required", key);
	return queen_body_name(v, key, QUEEN_MAX_NAME_BYTES, out);
}

/* An optional boolean; NULL, or why not. */
static const char *
queen_stream_bool(const QueenJsonValue *v, const char *key, bool dflt, bool *out)
{
	*out = dflt;
	if (v->type == JSON_TOKEN_INVALID || v->type == JSON_TOKEN_NULL)
		return NULL;
	if (v->type != JSON_TOKEN_TRUE && v->type != JSON_TOKEN_FALSE)
		return psprintf("%s must be true or false", key);
	*out = v->type == JSON_TOKEN_TRUE;
	return NULL;
}

void
queen_handle_stream_register(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenJsonValue v[QUEEN_REG_NKEYS];
	QueenArgsStreamRegister a;
	char	   *name = NULL;
	char	   *source = NULL;
	char	   *sink = NULL;
	char	   *hash = NULL;
	bool		reset = false;
	const char *problem;

	(void) params;
	problem = queen_stream_walk(req, queen_reg_keys, QUEEN_REG_NKEYS, v);
	if (problem == NULL &&
		(problem = queen_stream_required(&v[QUEEN_REG_NAME], "name", &name)) == NULL &&
		(problem = queen_stream_required(&v[QUEEN_REG_SOURCE], "source_queue", &source)) == NULL &&
		((v[QUEEN_REG_SINK].type == JSON_TOKEN_STRING && v[QUEEN_REG_SINK].len == 0) ||
		 (problem = queen_body_name(&v[QUEEN_REG_SINK], "sink_queue", QUEEN_MAX_NAME_BYTES,
									&sink)) == NULL) &&
		(problem = queen_stream_required(&v[QUEEN_REG_HASH], "config_hash", &hash)) == NULL)
		problem = queen_stream_bool(&v[QUEEN_REG_RESET], "reset", false, &reset);
	if (problem != NULL)
	{
		queen_respond_error(req, 400, problem);
		return;
	}
	memset(&a, 0, sizeof(a));
	a.name = queen_wire_text(name, strlen(name));
	a.source_queue = queen_wire_text(source, strlen(source));
	/* "" is no sink, as Queen's NULLIF has it */
	a.sink_queue = queen_wire_text(sink, sink != NULL ? strlen(sink) : 0);
	a.config_hash = queen_wire_text(hash, strlen(hash));
	a.reset = reset;
	queen_control_call(req, QUEEN_CONTROL_STREAM_REGISTER, -1, &a);
}

/* ----------------------------------------------------------------
 *		POST /streams/v1/state/get
 * ----------------------------------------------------------------
 */
enum
{
	QUEEN_GET_QUERY,
	QUEEN_GET_PARTITION,
	QUEEN_GET_KEYS,
	QUEEN_GET_PREFIX,
	QUEEN_GET_RIPE,
	QUEEN_GET_NKEYS
};

static const char *const queen_get_keys[QUEEN_GET_NKEYS] = {
	"query_id", "partition_id", "keys", "key_prefix", "ripe_at_or_before"
};

/* Each key of "keys" on the wire after the arguments. */
typedef struct QueenStateKeys
{
	StringInfoData wire;
	int			n;
} QueenStateKeys;

static char *
queen_state_take_key(void *arg, int index, char *str, size_t len)
{
	QueenStateKeys *keys = (QueenStateKeys *) arg;
	const char *problem = queen_stream_key_problem(len);
	QueenArgsText t;

	if (problem != NULL)
		return psprintf("keys[%d] %s", index, problem);
	if (index >= QUEEN_STREAM_MAX_KEYS)
		return psprintf("keys has more than %d keys", QUEEN_STREAM_MAX_KEYS);
	t.text = queen_wire_text(str, len);
	queen_control_put_item(&keys->wire, QUEEN_CONTROL_STREAM_STATE, &t);
	keys->n++;
	return NULL;
}

/* ripe_at_or_before: epoch milliseconds, any JSON number, compared exactly. */
static const char *
queen_state_ripe(const QueenJsonValue *v, QueenArgsStreamState *a)
{
	if (v->type == JSON_TOKEN_INVALID || v->type == JSON_TOKEN_NULL)
		return NULL;
	if (v->type != JSON_TOKEN_NUMBER)
		return "ripe_at_or_before must be a number (epoch milliseconds)";
	/* the bound is compared as numeric: what numeric cannot hold is refused here */
	if (queen_json_number_problem(v->str, v->len) != NULL)
		return "ripe_at_or_before is out of range";
	a->ripe = queen_wire_text(v->str, v->len);
	return NULL;
}

void
queen_handle_stream_state(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenJsonValue v[QUEEN_GET_NKEYS];
	QueenArgsStreamState a;
	QueenStateKeys keys;
	pg_uuid_t	query;
	pg_uuid_t	partition;
	char	   *prefix = NULL;
	const char *problem;
	StringInfoData arg;

	(void) params;
	memset(&a, 0, sizeof(a));
	memset(&keys, 0, sizeof(keys));
	initStringInfo(&keys.wire);
	problem = queen_stream_walk(req, queen_get_keys, QUEEN_GET_NKEYS, v);
	if (problem == NULL &&
		(problem = queen_body_uuid(&v[QUEEN_GET_QUERY], "query_id", &query)) == NULL &&
		(problem = queen_body_uuid(&v[QUEEN_GET_PARTITION], "partition_id", &partition)) == NULL)
	{
		const QueenJsonValue *k = &v[QUEEN_GET_KEYS];
		const QueenJsonValue *p = &v[QUEEN_GET_PREFIX];

		if (k->type == JSON_TOKEN_ARRAY_START)
			problem = queen_json_strings(k->span, k->span_len, queen_state_take_key, &keys);
		else if (k->type != JSON_TOKEN_INVALID && k->type != JSON_TOKEN_NULL)
			problem = "keys must be an array of strings";
		if (problem != NULL && strncmp(problem, "element ", 8) == 0)
			problem = psprintf("keys: %s", problem);
		if (problem == NULL && p->type == JSON_TOKEN_STRING)
			prefix = p->str;
		else if (problem == NULL && p->type != JSON_TOKEN_INVALID && p->type != JSON_TOKEN_NULL)
			problem = "key_prefix must be a string";
		if (problem == NULL)
			problem = queen_state_ripe(&v[QUEEN_GET_RIPE], &a);
	}
	if (problem != NULL)
	{
		queen_respond_error(req, keys.n >= QUEEN_STREAM_MAX_KEYS ? 413 : 400, problem);
		return;
	}
	a.query_id = (const char *) query.data;
	a.partition_id = (const char *) partition.data;
	a.key_prefix = queen_wire_text(prefix, prefix != NULL ? strlen(prefix) : 0);
	a.nkeys = keys.n;
	initStringInfo(&arg);
	queen_control_put_args(&arg, QUEEN_CONTROL_STREAM_STATE, &a);
	appendBinaryStringInfo(&arg, keys.wire.data, keys.wire.len);
	(void) queen_control_submit(req, QUEEN_PENDING_CONTROL, QUEEN_CONTROL_STREAM_STATE, -1,
								arg.data, arg.len);
}

/* ----------------------------------------------------------------
 *		POST /streams/v1/cycle
 * ----------------------------------------------------------------
 */
enum
{
	QUEEN_CYCLE_QUERY,
	QUEEN_CYCLE_PARTITION,
	QUEEN_CYCLE_GROUP,
	QUEEN_CYCLE_STATE_OPS,
	QUEEN_CYCLE_PUSH_ITEMS,
	QUEEN_CYCLE_ACK,
	QUEEN_CYCLE_RELEASE,
	QUEEN_CYCLE_NKEYS
};

static const char *const queen_cycle_keys[QUEEN_CYCLE_NKEYS] = {
	"query_id", "partition_id", "consumer_group", "state_ops", "push_items", "ack",
	"release_lease"
};

enum
{
	QUEEN_OP_KEY_TYPE,
	QUEEN_OP_KEY_KEY,
	QUEEN_OP_KEY_VALUE,
	QUEEN_OP_NKEYS
};

static const char *const queen_state_op_keys[QUEEN_OP_NKEYS] = {"type", "key", "value"};

typedef struct QueenCycleParse
{
	char	   *error;
	bool		too_many;
	QueenJsonValue op[QUEEN_OP_NKEYS];
	StringInfoData states;		/* the state changes on the wire */
	int			nstates;
} QueenCycleParse;

/* A later "state_ops" replaces an earlier one whole, as jsonb keeps the last key. */
static void
queen_cycle_state_begin(void *arg)
{
	QueenCycleParse *st = (QueenCycleParse *) arg;

	st->error = NULL;
	st->too_many = false;
	resetStringInfo(&st->states);
	st->nstates = 0;
}

/* One state op: {"type": "upsert", "key", "value"} or {"type": "delete", "key"}. */
static bool
queen_cycle_state_op(void *arg, int index, bool object)
{
	QueenCycleParse *st = (QueenCycleParse *) arg;
	const QueenJsonValue *type = &st->op[QUEEN_OP_KEY_TYPE];
	const QueenJsonValue *key = &st->op[QUEEN_OP_KEY_KEY];
	const QueenJsonValue *value = &st->op[QUEEN_OP_KEY_VALUE];
	QueenArgsTxnItem w;
	bool		upsert;
	const char *problem;
	char	   *text = NULL;

	if (st->error != NULL)
		return false;
	if (!object)
		problem = "must be an object";
	else if (type->type != JSON_TOKEN_STRING ||
			 (strcmp(type->str, "upsert") != 0 && strcmp(type->str, "delete") != 0))
		problem = "type must be \"upsert\" or \"delete\"";
	else if (key->type != JSON_TOKEN_STRING)
		problem = "key is required (a string)";
	else if ((problem = queen_stream_key_problem(key->len)) != NULL)
		problem = psprintf("key %s", problem);
	if (problem == NULL && (upsert = strcmp(type->str, "upsert") == 0))
	{
		/* without a value Queen stores {} */
		text = value->type == JSON_TOKEN_INVALID ? pstrdup("{}") : queen_body_json(value);
		if (value->type != JSON_TOKEN_STRING && value->type != JSON_TOKEN_INVALID &&
			(problem = queen_json_problem(text, strlen(text))) != NULL)
			problem = psprintf("value: %s", problem);
	}
	if (problem != NULL)
	{
		st->error = psprintf("state_ops[%d]: %s", index, problem);
		return false;
	}
	if (++st->nstates > queen_max_push_items)
	{
		st->too_many = true;
		st->error = psprintf("more than %d state_ops in one cycle (queen.max_push_items)",
							 queen_max_push_items);
		return false;
	}
	memset(&w, 0, sizeof(w));
	w.kind = QUEEN_TXN_STATE;
	w.key = queen_wire_text(key->str, key->len);
	w.value = queen_wire_text(text, text != NULL ? strlen(text) : 0);
	queen_control_put_item(&st->states, QUEEN_CONTROL_TXN, &w);
	return false;
}

/* The ack object: an ack body's keys (and Queen's count), for the source partition. */
static const char *
queen_cycle_ack(const QueenJsonValue *ackv, const QueenJsonValue *partition, QueenAckInput *in)
{
	QueenJsonValue v[QUEEN_ACK_NKEYS];
	QueenJsonShape shape;
	char	   *problem;

	queen_json_shape_keys(&shape, queen_ack_key_names, QUEEN_ACK_NKEYS, v);
	if ((problem = queen_json_shape(ackv->span, ackv->span_len, &shape)) != NULL)
		return psprintf("ack: %s", problem);
	v[QUEEN_ACK_KEY_PARTITION] = *partition;
	queen_ack_input(v, in);
	if (in->txn == NULL)
		return "ack.transactionId is required";
	return in->problem != NULL ? psprintf("ack: %s", in->problem) : NULL;
}

/* push_items through the push body's parser. */
static const char *
queen_cycle_pushes(const QueenJsonValue *v, QueenHttpItem **items, int *n, bool *too_many)
{
	StringInfoData body;
	const char *problem;

	*n = 0;
	if (v->type == JSON_TOKEN_INVALID || v->type == JSON_TOKEN_NULL)
		return NULL;
	if (v->type != JSON_TOKEN_ARRAY_START)
		return "push_items must be an array";
	initStringInfo(&body);
	appendStringInfoString(&body, "{\"items\":");
	appendBinaryStringInfo(&body, v->span, (int) v->span_len);
	appendStringInfoChar(&body, '}');
	problem = queen_parse_push_body(body.data, body.len, 0, items, n, too_many);
	/* an empty array is no push, not a refusal */
	if (problem != NULL && strspn(v->span + 1, " \t\r\n") == v->span_len - 2)
	{
		*n = 0;
		return NULL;
	}
	if (problem == NULL && *n > queen_max_push_items)
	{
		*too_many = true;
		return psprintf("more than %d push_items in one cycle (queen.max_push_items)",
						queen_max_push_items);
	}
	return problem != NULL ? psprintf("push_%s", problem) : NULL;
}

void
queen_handle_stream_cycle(QueenHttpRequest *req, const QueenRouteParams *params)
{
	QueenJsonValue v[QUEEN_CYCLE_NKEYS];
	QueenJsonShape shape;
	QueenCycleParse st;
	QueenArgsTxn head;
	QueenArgsTxnItem w;
	QueenAckInput ack;
	QueenHttpItem *pushes = NULL;
	pg_uuid_t	query;
	pg_uuid_t	partition;
	char	   *group = NULL;
	bool		release = true;
	bool		has_ack = false;
	bool		too_many = false;
	int			npush = 0;
	int			shard = -1;
	int			i;
	const char *problem;
	StringInfoData arg;

	(void) params;
	memset(&st, 0, sizeof(st));
	initStringInfo(&st.states);
	queen_json_shape_keys(&shape, queen_cycle_keys, QUEEN_CYCLE_NKEYS, v);
	queen_json_shape_array(&shape, QUEEN_CYCLE_STATE_OPS, queen_state_op_keys, QUEEN_OP_NKEYS,
						   st.op, queen_cycle_state_begin, queen_cycle_state_op, &st);

	problem = queen_body_walk(req->body, req->body_len, &shape);
	/* the last "state_ops" was not an array: no earlier one counts */
	if (v[QUEEN_CYCLE_STATE_OPS].type != JSON_TOKEN_ARRAY_START)
		queen_cycle_state_begin(&st);
	if (problem == NULL)
		problem = st.error;
	if (problem == NULL &&
		v[QUEEN_CYCLE_STATE_OPS].type != JSON_TOKEN_INVALID &&
		v[QUEEN_CYCLE_STATE_OPS].type != JSON_TOKEN_NULL &&
		v[QUEEN_CYCLE_STATE_OPS].type != JSON_TOKEN_ARRAY_START)
		problem = "state_ops must be an array";
	if (problem == NULL &&
		(problem = queen_body_uuid(&v[QUEEN_CYCLE_QUERY], "query_id", &query)) == NULL &&
		(problem = queen_body_uuid(&v[QUEEN_CYCLE_PARTITION], "partition_id", &partition)) == NULL &&
		/* "" is queue mode, as Queen's NULLIF has it */
		((v[QUEEN_CYCLE_GROUP].type == JSON_TOKEN_STRING && v[QUEEN_CYCLE_GROUP].len == 0) ||
		 (problem = queen_body_name(&v[QUEEN_CYCLE_GROUP], "consumer_group", QUEEN_MAX_NAME_BYTES,
									&group)) == NULL) &&
		(problem = queen_stream_bool(&v[QUEEN_CYCLE_RELEASE], "release_lease", true,
									 &release)) == NULL &&
		(problem = queen_cycle_pushes(&v[QUEEN_CYCLE_PUSH_ITEMS], &pushes, &npush,
									  &too_many)) == NULL)
	{
		const QueenJsonValue *a = &v[QUEEN_CYCLE_ACK];

		if (a->type == JSON_TOKEN_OBJECT_START)
		{
			has_ack = true;
			problem = queen_cycle_ack(a, &v[QUEEN_CYCLE_PARTITION], &ack);
		}
		else if (a->type != JSON_TOKEN_INVALID && a->type != JSON_TOKEN_NULL)
			problem = "ack must be an object or null";
	}
	if (problem != NULL)
	{
		queen_respond_error(req, st.too_many || too_many ? 413 : 400, problem);
		return;
	}
	if (npush > 0 && queen_maintenance_on())
	{
		queen_respond_error(req, 503,
							"the broker is in maintenance mode: pushes wait in the spool, and a cycle's pushes, which must commit with its ack and state, cannot; nothing was done, try again when maintenance mode is off");
		return;
	}

	memset(&head, 0, sizeof(head));
	head.nitems = npush + (has_ack ? 1 : 0) + st.nstates;
	head.cycle = 1;
	head.release_lease = release;
	head.query_id = (const char *) query.data;
	head.partition_id = (const char *) partition.data;
	initStringInfo(&arg);
	queen_control_put_args(&arg, QUEEN_CONTROL_TXN, &head);
	for (i = 0; i < npush; i++)
	{
		queen_txn_put_push(&arg, &pushes[i], req->subject);
		if (shard < 0)
			shard = queen_shard_of(queen_req_tenant(req), pushes[i].queue, pushes[i].queue_len,
								   pushes[i].partition, pushes[i].partition_len,
								   queen_broker->nshards);
	}
	if (has_ack)
	{
		memset(&w, 0, sizeof(w));
		w.kind = QUEEN_TXN_ACK;
		w.group = queen_wire_text(group, group != NULL ? strlen(group) : 0);
		queen_control_put_item(&arg, QUEEN_CONTROL_TXN, &w);
		queen_put_ack_item(&arg, &ack);
	}
	appendBinaryStringInfo(&arg, st.states.data, st.states.len);
	/* no push: the source partition's shard, as an ack's */
	if (shard < 0)
		shard = (int) (hash_bytes(partition.data, UUID_LEN) % (uint32) queen_broker->nshards);
	(void) queen_control_submit(req, QUEEN_PENDING_CONTROL, QUEEN_CONTROL_TXN, shard,
								arg.data, arg.len);
}
