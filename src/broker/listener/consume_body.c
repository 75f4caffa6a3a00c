/*-------------------------------------------------------------------------
 *
 * consume_body.c
 *	  What the listener reads of a consumption request: the query string of
 *	  a pop or a dead-letter listing, the bodies of POST /api/v1/ack and
 *	  /api/v1/ack/batch, and the lease extension's {"seconds": N}.
 *
 * Bodies are read as push bodies are (push_body.c): PostgreSQL's JSON
 * lexer with semantic actions and no tree, after queen_body_problem has
 * kept away what would make it raise.  Only a body that is not JSON, or
 * not of the shape a route takes, is refused whole (400); an item that
 * cannot be applied (no transactionId, a partitionId that is not a UUID)
 * is answered per item with success false and why, as reference 5.1 says
 * ("no 404/409 - all per item").  As in jsonb, the last of duplicate keys
 * wins.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "consume_body.h"
#include "push_body.h"
#include "routes.h"

#include "common/jsonapi.h"

/* ----------------------------------------------------------------
 *		Query strings
 * ----------------------------------------------------------------
 */

/* "a, b or c": the parameters a route takes, for its 400. */
static char *
queen_query_names(const char *const *allowed)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; allowed[i] != NULL; i++)
		appendStringInfo(&buf, "%s%s", i == 0 ? "" : allowed[i + 1] == NULL ? " or " : ", ",
						 allowed[i]);
	return buf.data;
}

/*
 * Split and decode a query string (NULL: none); a message for a 400 if it
 * is malformed or says what the route does not read: more than
 * QUEEN_QUERY_MAX parameters, or a name not in allowed (NULL-terminated).
 * Nothing a client sends is dropped unread: a misspelt consumerGroup would
 * otherwise pop in queue mode, and a 33rd parameter would be ignored.  A
 * name given twice takes its last value, as URLSearchParams.get does not
 * but Queen's server does.
 */
const char *
queen_query_parse(const char *query, const char *const *allowed, QueenQuery *q)
{
	const char *p = query;

	q->n = 0;
	while (p != NULL && *p != '\0')
	{
		const char *amp = strchr(p, '&');
		const char *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', end - p);
		Size		nlen;
		Size		vlen = 0;
		char	   *name;
		char	   *value;
		const char *problem;
		int			k;

		if (end > p)
		{
			if (q->n == QUEEN_QUERY_MAX)
				return psprintf("too many query parameters: at most %d", QUEEN_QUERY_MAX);
			/* URLSearchParams writes a space as '+' */
			name = queen_percent_decode(p, (eq ? eq : end) - p, true, &nlen);
			value = eq ? queen_percent_decode(eq + 1, end - eq - 1, true, &vlen) : pstrdup("");
			if (name == NULL || value == NULL)
				return "the query string is not valid percent-encoding";
			if ((problem = queen_name_problem(name, nlen, QUEEN_MAX_NAME_BYTES)) != NULL)
				return psprintf("a query parameter's name %s", problem);
			for (k = 0; allowed[k] != NULL && strcmp(allowed[k], name) != 0; k++)
				;
			if (allowed[k] == NULL)
				return psprintf("unknown query parameter \"%s\": this route reads %s", name,
								allowed[0] ? queen_query_names(allowed) : "no query parameters");
			q->name[q->n] = name;
			q->value[q->n] = value;
			q->len[q->n] = vlen;
			q->n++;
		}
		p = amp ? amp + 1 : end;
	}
	return NULL;
}

/* A parameter's value (the last one given), or NULL. */
const char *
queen_query_get(const QueenQuery *q, const char *name, Size *len)
{
	int			i;

	for (i = q->n - 1; i >= 0; i--)
	{
		if (strcmp(q->name[i], name) == 0)
		{
			if (len)
				*len = q->len[i];
			return q->value[i];
		}
	}
	return NULL;
}

/*
 * An integer parameter within [min, max]; absent or empty is dflt.  Only
 * digits, after an optional minus: strtoll alone also takes "+1" and " 1"
 * (a %20 in the URL).
 */
const char *
queen_query_int(const QueenQuery *q, const char *name, int64 dflt, int64 min, int64 max,
				int64 *out)
{
	const char *v = queen_query_get(q, name, NULL);
	char	   *end;
	long long	n;

	*out = dflt;
	if (v == NULL || *v == '\0')
		return NULL;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (!(isdigit((unsigned char) v[0]) || (v[0] == '-' && isdigit((unsigned char) v[1]))) ||
		errno != 0 || *end != '\0' || n < min || n > max)
		return psprintf("%s must be an integer from " INT64_FORMAT " to " INT64_FORMAT,
						name, min, max);
	*out = (int64) n;
	return NULL;
}

/* A boolean parameter: true/1 or false/0; absent or empty is dflt. */
const char *
queen_query_bool(const QueenQuery *q, const char *name, bool dflt, bool *out)
{
	const char *v = queen_query_get(q, name, NULL);

	*out = dflt;
	if (v == NULL || *v == '\0')
		return NULL;
	if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
		*out = true;
	else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
		*out = false;
	else
		return psprintf("%s must be true or false", name);
	return NULL;
}

/* ----------------------------------------------------------------
 *		Ack bodies
 * ----------------------------------------------------------------
 */

/* The keys of an acknowledgement (and of the batch's top object). */
typedef enum QueenAckKey
{
	QUEEN_ACK_KEY_NONE = -1,
	QUEEN_ACK_KEY_TXN = 0,
	QUEEN_ACK_KEY_PARTITION,
	QUEEN_ACK_KEY_STATUS,
	QUEEN_ACK_KEY_LEASE,
	QUEEN_ACK_KEY_ERROR,
	QUEEN_ACK_KEY_GROUP,
	QUEEN_ACK_KEY_ACKS,
	QUEEN_ACK_NKEYS
} QueenAckKey;

static const char *const queen_ack_key_names[QUEEN_ACK_NKEYS] = {
	"transactionId", "partitionId", "status", "leaseId", "error", "consumerGroup",
	"acknowledgments"
};

/* The last value given for a key: absent (INVALID), a scalar, or a container (OBJECT_START). */
typedef struct QueenAckValue
{
	JsonTokenType type;
	char	   *str;			/* a string's de-escaped text */
	Size		len;
} QueenAckValue;

typedef struct QueenAckState
{
	bool		batch;
	int			depth;			/* containers open around the parser */
	int			item_depth;		/* where an item's keys are: 1, or 3 in a batch */
	bool		top_object;
	bool		in_acks;		/* inside the top-level acknowledgments array */
	bool		saw_acks;
	char	   *error;			/* the body's shape is wrong: 400 */
	bool		too_many;		/* more items than max_items: 413 */
	int			max_items;
	QueenAckKey key;			/* the key whose value comes next */
	int			key_depth;
	int			nelements;
	QueenAckValue v[QUEEN_ACK_NKEYS];	/* the current item's (and the top's) */
	QueenAckValue group;
	QueenAckInput *items;
	int			nitems;
	int			maxitems;
} QueenAckState;

static void
queen_ack_fail(QueenAckState *st, char *message)
{
	if (st->error == NULL)
		st->error = message;
}

/* A value that is a string (or null when nullable); otherwise why not. */
static char *
queen_ack_string(const QueenAckValue *v, const char *name, bool nullable)
{
	if (v->type == JSON_TOKEN_STRING || v->type == JSON_TOKEN_INVALID ||
		(nullable && v->type == JSON_TOKEN_NULL))
		return NULL;
	return psprintf("%s must be a string", name);
}

/* The item object ended: what it asks, or why it cannot be applied. */
static void
queen_ack_item_end(QueenAckState *st)
{
	QueenAckValue *v = st->v;
	QueenAckInput *it;
	char	   *problem = NULL;
	pg_uuid_t	lease;
	int			k;

	/* a body refused whole keeps nothing, so a huge one costs no memory */
	if (st->error != NULL)
		return;
	if (st->nitems == st->max_items)
	{
		st->too_many = true;
		queen_ack_fail(st, psprintf("acknowledgments has more than %d items (queen.max_ack_items); send them in several requests",
									st->max_items));
		return;
	}
	if (st->nitems == st->maxitems)
	{
		st->maxitems = st->maxitems == 0 ? 16 : st->maxitems * 2;
		st->items = st->items == NULL ? palloc(sizeof(QueenAckInput) * st->maxitems) :
			repalloc(st->items, sizeof(QueenAckInput) * st->maxitems);
	}
	it = &st->items[st->nitems++];
	memset(it, 0, sizeof(*it));
	if (v[QUEEN_ACK_KEY_TXN].type == JSON_TOKEN_STRING)
	{
		it->txn = v[QUEEN_ACK_KEY_TXN].str;
		it->txn_len = v[QUEEN_ACK_KEY_TXN].len;
	}

	if (v[QUEEN_ACK_KEY_TXN].type == JSON_TOKEN_INVALID || v[QUEEN_ACK_KEY_TXN].type == JSON_TOKEN_NULL ||
		(it->txn != NULL && it->txn_len == 0))
		problem = pstrdup("transactionId is required");
	else if (it->txn == NULL)
		problem = pstrdup("transactionId must be a string");
	else if ((problem = (char *) queen_name_problem(it->txn, it->txn_len, QUEEN_MAX_TXN_BYTES)) != NULL)
		problem = psprintf("transactionId %s", problem);
	else if (v[QUEEN_ACK_KEY_PARTITION].type == JSON_TOKEN_INVALID ||
			 v[QUEEN_ACK_KEY_PARTITION].type == JSON_TOKEN_NULL)
		problem = pstrdup("partitionId is required");
	else if (v[QUEEN_ACK_KEY_PARTITION].type != JSON_TOKEN_STRING ||
			 !queen_uuid_parse(v[QUEEN_ACK_KEY_PARTITION].str, &it->partition_id))
		problem = pstrdup("partitionId must be a UUID");
	else
	{
		for (k = QUEEN_ACK_KEY_STATUS; problem == NULL && k <= QUEEN_ACK_KEY_ERROR; k++)
			problem = queen_ack_string(&v[k], queen_ack_key_names[k], true);
	}
	if (problem == NULL && v[QUEEN_ACK_KEY_LEASE].type == JSON_TOKEN_STRING &&
		v[QUEEN_ACK_KEY_LEASE].len > 0 && !queen_uuid_parse(v[QUEEN_ACK_KEY_LEASE].str, &lease))
		problem = pstrdup("leaseId must be a UUID (the leaseId a pop answered)");
	it->problem = problem;
	if (v[QUEEN_ACK_KEY_STATUS].type == JSON_TOKEN_STRING)
	{
		it->status = v[QUEEN_ACK_KEY_STATUS].str;
		it->status_len = v[QUEEN_ACK_KEY_STATUS].len;
	}
	if (v[QUEEN_ACK_KEY_LEASE].type == JSON_TOKEN_STRING && v[QUEEN_ACK_KEY_LEASE].len > 0)
	{
		it->lease = v[QUEEN_ACK_KEY_LEASE].str;
		it->lease_len = v[QUEEN_ACK_KEY_LEASE].len;
	}
	if (v[QUEEN_ACK_KEY_ERROR].type == JSON_TOKEN_STRING)
	{
		it->error = v[QUEEN_ACK_KEY_ERROR].str;
		it->error_len = v[QUEEN_ACK_KEY_ERROR].len;
	}
	/* a single ack names its group beside the item */
	if (!st->batch)
		st->group = v[QUEEN_ACK_KEY_GROUP];
}

/* A key or value of the top object, or of an item. */
static bool
queen_ack_at_keys(QueenAckState *st)
{
	return st->depth == 1 || (st->in_acks && st->depth == st->item_depth);
}

/* Where the value of the current key goes: a batch's group is the top's. */
static QueenAckValue *
queen_ack_slot(QueenAckState *st)
{
	if (st->key == QUEEN_ACK_KEY_NONE || st->depth != st->key_depth)
		return NULL;
	if (st->key == QUEEN_ACK_KEY_ACKS)
	{
		queen_ack_fail(st, pstrdup("acknowledgments must be an array"));
		return NULL;
	}
	return st->batch && st->key == QUEEN_ACK_KEY_GROUP ? &st->group : &st->v[st->key];
}

/* A container opens where a value of a known key was due: not a scalar. */
static void
queen_ack_container(QueenAckState *st)
{
	QueenAckValue *v = queen_ack_slot(st);

	if (v != NULL)
	{
		v->type = JSON_TOKEN_OBJECT_START;
		v->str = NULL;
	}
}

static void
queen_ack_object_start(void *state)
{
	QueenAckState *st = (QueenAckState *) state;

	if (st->depth == 0)
		st->top_object = true;
	else if (st->batch && st->in_acks && st->depth == 2)
	{
		memset(st->v, 0, sizeof(st->v));
		st->nelements++;
	}
	else
		queen_ack_container(st);
	st->depth++;
}

static void
queen_ack_object_end(void *state)
{
	QueenAckState *st = (QueenAckState *) state;

	st->depth--;
	if ((st->batch && st->in_acks && st->depth == 2) || (!st->batch && st->depth == 0))
		queen_ack_item_end(st);
}

static void
queen_ack_array_start(void *state)
{
	QueenAckState *st = (QueenAckState *) state;

	if (st->batch && st->depth == 1 && st->key == QUEEN_ACK_KEY_ACKS)
	{
		/* the last acknowledgments wins */
		st->in_acks = true;
		st->saw_acks = true;
		st->nitems = 0;
		st->nelements = 0;
	}
	else if (st->batch && st->in_acks && st->depth == 2)
	{
		if (st->error == NULL)
			queen_ack_fail(st, psprintf("acknowledgments[%d] must be an object", st->nelements));
		st->nelements++;
	}
	else
		queen_ack_container(st);
	st->depth++;
}

static void
queen_ack_array_end(void *state)
{
	QueenAckState *st = (QueenAckState *) state;

	st->depth--;
	if (st->batch && st->depth == 1)
		st->in_acks = false;
}

static void
queen_ack_field_start(void *state, char *fname, bool isnull)
{
	QueenAckState *st = (QueenAckState *) state;
	int			k;

	(void) isnull;
	st->key = QUEEN_ACK_KEY_NONE;
	if (queen_ack_at_keys(st))
	{
		for (k = 0; k < QUEEN_ACK_NKEYS; k++)
			if (strcmp(fname, queen_ack_key_names[k]) == 0)
				st->key = (QueenAckKey) k;
		/* a batch's group and array are the top's; its items' keys are theirs */
		if (st->batch && st->depth == 1 && st->key != QUEEN_ACK_KEY_GROUP &&
			st->key != QUEEN_ACK_KEY_ACKS)
			st->key = QUEEN_ACK_KEY_NONE;
		if ((st->batch && st->depth == 3 && st->key >= QUEEN_ACK_KEY_GROUP) ||
			(!st->batch && st->key == QUEEN_ACK_KEY_ACKS))
			st->key = QUEEN_ACK_KEY_NONE;
		st->key_depth = st->depth;
		if (st->batch && st->key == QUEEN_ACK_KEY_ACKS)
			st->saw_acks = true;
	}
	/* fname is freed by queen_ack_field_end, which gets it too */
}

static void
queen_ack_field_end(void *state, char *fname, bool isnull)
{
	QueenAckState *st = (QueenAckState *) state;

	(void) isnull;
	if (st->depth == st->key_depth)
		st->key = QUEEN_ACK_KEY_NONE;
	if (fname != NULL)
		pfree(fname);
}

static void
queen_ack_scalar(void *state, char *token, JsonTokenType type)
{
	QueenAckState *st = (QueenAckState *) state;

	if (st->batch && st->in_acks && st->depth == 2)
	{
		if (st->error == NULL)
			queen_ack_fail(st, psprintf("acknowledgments[%d] must be an object", st->nelements));
		st->nelements++;
	}
	else
	{
		QueenAckValue *v = queen_ack_slot(st);

		if (v != NULL)
		{
			v->type = type;
			v->str = type == JSON_TOKEN_STRING ? token : NULL;
			v->len = type == JSON_TOKEN_STRING ? strlen(token) : 0;
			return;
		}
	}
	if (token != NULL)
		pfree(token);
}

/*
 * Parse POST /api/v1/ack ({transactionId, partitionId, status?,
 * consumerGroup?, leaseId?, error?}) or, with batch, /api/v1/ack/batch
 * ({consumerGroup?, acknowledgments: [...]}).  Returns NULL and the items
 * in body order (each with its problem, if it cannot be applied) and the
 * group (NULL: queue mode), or a message for a 400.
 */
const char *
queen_parse_ack_body(const char *body, size_t len, bool batch, int max_items, int *status,
					 char **group, Size *group_len, QueenAckInput **items, int *nitems)
{
	QueenAckState st;
	JsonSemAction sem;
	char	   *problem = queen_body_problem(body, len);
	const char *gp;

	*status = 400;
	if (problem != NULL)
		return problem;
	memset(&st, 0, sizeof(st));
	memset(&sem, 0, sizeof(sem));
	st.max_items = max_items;
	st.batch = batch;
	st.item_depth = batch ? 3 : 1;
	st.in_acks = !batch;		/* a single ack's keys are the top's */
	st.key = QUEEN_ACK_KEY_NONE;
	sem.semstate = &st;
	sem.object_start = queen_ack_object_start;
	sem.object_end = queen_ack_object_end;
	sem.array_start = queen_ack_array_start;
	sem.array_end = queen_ack_array_end;
	sem.object_field_start = queen_ack_field_start;
	sem.object_field_end = queen_ack_field_end;
	sem.scalar = queen_ack_scalar;

	problem = queen_json_walk(body, len, &sem);
	if (problem != NULL)
		return psprintf("invalid JSON: %s", problem);
	if (!st.top_object)
		return "body must be a JSON object";
	if (st.error != NULL)
	{
		*status = st.too_many ? 413 : 400;
		return st.error;
	}
	if (batch && !st.saw_acks)
		return "missing acknowledgments";

	*group = NULL;
	*group_len = 0;
	if (st.group.type == JSON_TOKEN_STRING && st.group.len > 0)
	{
		gp = queen_name_problem(st.group.str, st.group.len, QUEEN_MAX_NAME_BYTES);
		if (gp != NULL)
			return psprintf("consumerGroup %s", gp);
		*group = st.group.str;
		*group_len = st.group.len;
	}
	else if (st.group.type != JSON_TOKEN_INVALID && st.group.type != JSON_TOKEN_NULL &&
			 st.group.type != JSON_TOKEN_STRING)
		return "consumerGroup must be a string";
	*items = st.items;
	*nitems = st.nitems;
	return NULL;
}

/* ----------------------------------------------------------------
 *		The lease extension's body
 * ----------------------------------------------------------------
 */

typedef struct QueenSecondsState
{
	int			depth;
	bool		top_object;
	bool		in_seconds;
	JsonTokenType type;			/* of the last "seconds"; INVALID when absent */
	char	   *token;
} QueenSecondsState;

static void
queen_seconds_open(void *state)
{
	QueenSecondsState *st = (QueenSecondsState *) state;

	if (st->depth == 0)
		st->top_object = true;
	else if (st->in_seconds && st->depth == 1)
		st->type = JSON_TOKEN_OBJECT_START;
	st->depth++;
}

static void
queen_seconds_array_open(void *state)
{
	QueenSecondsState *st = (QueenSecondsState *) state;

	if (st->in_seconds && st->depth == 1)
		st->type = JSON_TOKEN_ARRAY_START;
	st->depth++;
}

static void
queen_seconds_close(void *state)
{
	((QueenSecondsState *) state)->depth--;
}

static void
queen_seconds_field(void *state, char *fname, bool isnull)
{
	QueenSecondsState *st = (QueenSecondsState *) state;

	(void) isnull;
	st->in_seconds = st->depth == 1 && strcmp(fname, "seconds") == 0;
	pfree(fname);
}

static void
queen_seconds_scalar(void *state, char *token, JsonTokenType type)
{
	QueenSecondsState *st = (QueenSecondsState *) state;

	if (st->in_seconds && st->depth == 1)
	{
		st->type = type;
		st->token = token;
		st->in_seconds = false;
	}
}

/*
 * {"seconds": N} of POST /api/v1/lease/:leaseId/extend; an empty body, a
 * missing or null "seconds" mean 60 (reference 5.5).  NULL, or a message
 * for a 400.
 */
const char *
queen_parse_seconds_body(const char *body, size_t len, int32 *seconds)
{
	QueenSecondsState st;
	JsonSemAction sem;
	char	   *problem;
	size_t		i;
	char	   *end;
	long		n;

	*seconds = QUEEN_DEFAULT_LEASE_EXTENSION;
	for (i = 0; i < len && isspace((unsigned char) body[i]); i++)
		;
	if (i == len)
		return NULL;
	problem = queen_body_problem(body, len);
	if (problem != NULL)
		return problem;
	memset(&st, 0, sizeof(st));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &st;
	sem.object_start = queen_seconds_open;
	sem.object_end = queen_seconds_close;
	sem.array_start = queen_seconds_array_open;
	sem.array_end = queen_seconds_close;
	sem.object_field_start = queen_seconds_field;
	sem.scalar = queen_seconds_scalar;
	problem = queen_json_walk(body, len, &sem);
	if (problem != NULL)
		return psprintf("invalid JSON: %s", problem);
	if (!st.top_object)
		return "body must be a JSON object";
	if (st.type == JSON_TOKEN_INVALID || st.type == JSON_TOKEN_NULL)
		return NULL;
	if (st.type != JSON_TOKEN_NUMBER)
		return "seconds must be a number";
	errno = 0;
	n = strtol(st.token, &end, 10);
	if (errno != 0 || *end != '\0' || n > PG_INT32_MAX || n < PG_INT32_MIN)
		return "seconds must be a whole number of seconds";
	*seconds = (int32) n;
	return NULL;
}
