/*-------------------------------------------------------------------------
 *
 * consume_body.c
 *	  What the listener reads of a consumption request: the query string of
 *	  a pop or a dead-letter listing, the bodies of POST /api/v1/ack and
 *	  /api/v1/ack/batch, and the lease extension's {"seconds": N}.
 *
 * Bodies are read by the shape walker over PostgreSQL's JSON lexer
 * (json_walk.c), with no tree, after queen_body_problem has kept away
 * what would make the lexer raise.  Only a body that is not JSON, or
 * not of the shape a route takes, is refused whole (400); an item that
 * cannot be applied (no transactionId, a partitionId that is not a UUID)
 * is answered per item with success false and why, as Queen answers it
 * ("no 404/409 - all per item").  As in jsonb, the last of duplicate keys
 * wins.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "consume_body.h"
#include "validate.h"
#include "codec.h"
#include "push_body.h"
#include "routes.h"

#include "json_walk.h"
#include "utils/json.h"

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

const char *const queen_ack_key_names[QUEEN_ACK_NKEYS] = {
	"transactionId", "partitionId", "status", "leaseId", "error", "consumerGroup"
};

/* A batch's own keys. */
static const char *const queen_batch_key_names[] = {"consumerGroup", "acknowledgments"};

#define QUEEN_BATCH_KEY_GROUP	0
#define QUEEN_BATCH_KEY_ACKS	1

typedef struct QueenAckState
{
	char	   *error;			/* the body's shape is wrong: 400 */
	bool		too_many;		/* more items than max_items: 413 */
	int			max_items;
	QueenJsonValue v[QUEEN_ACK_NKEYS];	/* the current item's (a single ack's: the root's) */
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
queen_ack_string(const QueenJsonValue *v, const char *name, bool nullable)
{
	if (v->type == JSON_TOKEN_STRING || v->type == JSON_TOKEN_INVALID ||
		(nullable && v->type == JSON_TOKEN_NULL))
		return NULL;
	return psprintf("%s must be a string", name);
}

/* Why an item cannot be applied, or NULL; it->partition_id is parsed on the way. */
static char *
queen_ack_problem(const QueenJsonValue *v, QueenAckInput *it)
{
	char	   *problem = NULL;
	pg_uuid_t	lease;
	int			k;

	if (v[QUEEN_ACK_KEY_TXN].type == JSON_TOKEN_INVALID || v[QUEEN_ACK_KEY_TXN].type == JSON_TOKEN_NULL ||
		(it->txn != NULL && it->txn_len == 0))
		return pstrdup("transactionId is required");
	if (it->txn == NULL)
		return pstrdup("transactionId must be a string");
	if ((problem = (char *) queen_name_problem(it->txn, it->txn_len, QUEEN_MAX_TXN_BYTES)) != NULL)
		return psprintf("transactionId %s", problem);
	if (v[QUEEN_ACK_KEY_PARTITION].type == JSON_TOKEN_INVALID ||
		v[QUEEN_ACK_KEY_PARTITION].type == JSON_TOKEN_NULL)
		return pstrdup("partitionId is required");
	if (v[QUEEN_ACK_KEY_PARTITION].type != JSON_TOKEN_STRING ||
		!queen_uuid_parse(v[QUEEN_ACK_KEY_PARTITION].str, &it->partition_id))
		return pstrdup("partitionId must be a UUID");
	for (k = QUEEN_ACK_KEY_STATUS; problem == NULL && k <= QUEEN_ACK_KEY_ERROR; k++)
		problem = queen_ack_string(&v[k], queen_ack_key_names[k], true);
	if (problem == NULL && v[QUEEN_ACK_KEY_LEASE].type == JSON_TOKEN_STRING &&
		v[QUEEN_ACK_KEY_LEASE].len > 0 && !queen_uuid_parse(v[QUEEN_ACK_KEY_LEASE].str, &lease))
		problem = pstrdup("leaseId must be a UUID (the leaseId a pop answered)");
	return problem;
}

/* An item's keys were read: what it asks, or why it cannot be applied. */
static bool
queen_ack_item(QueenAckState *st, const QueenJsonValue *v)
{
	/* a body refused whole keeps nothing, so a huge one costs no memory */
	if (st->error != NULL)
		return false;
	if (st->nitems == st->max_items)
	{
		st->too_many = true;
		queen_ack_fail(st, psprintf("acknowledgments has more than %d items (queen.max_ack_items); send them in several requests",
									st->max_items));
		return false;
	}
	if (st->nitems == st->maxitems)
	{
		st->maxitems = st->maxitems == 0 ? 16 : st->maxitems * 2;
		st->items = st->items == NULL ? palloc(sizeof(QueenAckInput) * st->maxitems) :
			repalloc(st->items, sizeof(QueenAckInput) * st->maxitems);
	}
	queen_ack_input(v, &st->items[st->nitems++]);
	return true;
}

/*
 * One acknowledgement from its keys' values (QUEEN_ACK_KEY_* order), its
 * problem set if it cannot be applied.  Its strings stay the values'.
 */
void
queen_ack_input(const QueenJsonValue *v, QueenAckInput *it)
{
	memset(it, 0, sizeof(*it));
	if (v[QUEEN_ACK_KEY_TXN].type == JSON_TOKEN_STRING)
	{
		it->txn = v[QUEEN_ACK_KEY_TXN].str;
		it->txn_len = v[QUEEN_ACK_KEY_TXN].len;
	}
	it->problem = queen_ack_problem(v, it);
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
}

/* The last acknowledgments array wins. */
static void
queen_ack_array_begin(void *arg)
{
	((QueenAckState *) arg)->nitems = 0;
}

static bool
queen_ack_element_end(void *arg, int index, bool object)
{
	QueenAckState *st = (QueenAckState *) arg;

	if (!object)
	{
		queen_ack_fail(st, psprintf("acknowledgments[%d] must be an object", index));
		return false;
	}
	return queen_ack_item(st, st->v);
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
	QueenJsonShape shape;
	QueenJsonValue top[2];
	QueenJsonValue *g;
	char	   *problem = queen_body_problem(body, len);
	const char *gp;

	*status = 400;
	if (problem != NULL)
		return problem;
	memset(&st, 0, sizeof(st));
	st.max_items = max_items;
	if (batch)
	{
		queen_json_shape_keys(&shape, queen_batch_key_names, lengthof(queen_batch_key_names), top);
		/* a batch's items name no group: theirs is the batch's */
		queen_json_shape_array(&shape, QUEEN_BATCH_KEY_ACKS, queen_ack_key_names,
							   QUEEN_ACK_KEY_GROUP, st.v, queen_ack_array_begin,
							   queen_ack_element_end, &st);
	}
	else
		queen_json_shape_keys(&shape, queen_ack_key_names, QUEEN_ACK_NKEYS, st.v);

	problem = queen_json_shape(body, len, &shape);
	if (problem != NULL)
		return psprintf("invalid JSON: %s", problem);
	if (!shape.root_object)
		return "body must be a JSON object";
	if (!batch)
		(void) queen_ack_item(&st, st.v);
	else if (top[QUEEN_BATCH_KEY_ACKS].type == JSON_TOKEN_INVALID)
		return "missing acknowledgments";
	else if (top[QUEEN_BATCH_KEY_ACKS].type != JSON_TOKEN_ARRAY_START)
		return "acknowledgments must be an array";
	if (st.error != NULL)
	{
		*status = st.too_many ? 413 : 400;
		return st.error;
	}
	g = batch ? &top[QUEEN_BATCH_KEY_GROUP] : &st.v[QUEEN_ACK_KEY_GROUP];

	*group = NULL;
	*group_len = 0;
	if (g->type == JSON_TOKEN_STRING && g->len > 0)
	{
		gp = queen_name_problem(g->str, g->len, QUEEN_MAX_NAME_BYTES);
		if (gp != NULL)
			return psprintf("consumerGroup %s", gp);
		*group = g->str;
		*group_len = g->len;
	}
	else if (g->type != JSON_TOKEN_INVALID && g->type != JSON_TOKEN_NULL &&
			 g->type != JSON_TOKEN_STRING)
		return "consumerGroup must be a string";
	*items = st.items;
	*nitems = st.nitems;
	return NULL;
}

/* ----------------------------------------------------------------
 *		The lease extension's body
 * ----------------------------------------------------------------
 */

/*
 * {"seconds": N} of POST /api/v1/lease/:leaseId/extend; an empty body, a
 * missing or null "seconds" mean 60, as in Queen.  NULL, or a message
 * for a 400.
 */
const char *
queen_parse_seconds_body(const char *body, size_t len, int32 *seconds)
{
	QueenJsonValue value;
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
	problem = queen_json_key(body, len, "seconds", &value);
	if (problem != NULL)
		return problem;
	if (value.type == JSON_TOKEN_INVALID || value.type == JSON_TOKEN_NULL)
		return NULL;
	if (value.type != JSON_TOKEN_NUMBER)
		return "seconds must be a number";
	errno = 0;
	n = strtol(value.str, &end, 10);
	if (errno != 0 || *end != '\0' || n > PG_INT32_MAX || n < PG_INT32_MIN)
		return "seconds must be a whole number of seconds";
	*seconds = (int32) n;
	return NULL;
}

/* A string value that must be a name (absent or null: NULL); or why not. */
const char *
queen_body_name(const QueenJsonValue *v, const char *key, Size max, char **out)
{
	const char *problem;

	*out = NULL;
	if (v->type == JSON_TOKEN_INVALID || v->type == JSON_TOKEN_NULL)
		return NULL;
	if (v->type != JSON_TOKEN_STRING)
		return psprintf("%s must be a string", key);
	if ((problem = queen_name_problem(v->str, v->len, max)) != NULL)
		return psprintf("%s %s", key, problem);
	*out = v->str;
	return NULL;
}

/* The value's JSON text as the body spelt it (a string re-escaped). */
char *
queen_body_json(const QueenJsonValue *v)
{
	StringInfoData buf;

	if (v->type == JSON_TOKEN_OBJECT_START || v->type == JSON_TOKEN_ARRAY_START)
		return pnstrdup(v->span, v->span_len);
	if (v->type == JSON_TOKEN_STRING)
	{
		initStringInfo(&buf);
		escape_json(&buf, v->str);
		return buf.data;
	}
	return pstrdup(v->str);
}

/* The request's body walked by shape: NULL, or why not (a 400's message). */
const char *
queen_body_walk(const char *body, size_t len, QueenJsonShape *shape)
{
	const char *problem = queen_body_problem(body, len);

	if (problem == NULL && (problem = queen_json_shape(body, len, shape)) != NULL)
		return psprintf("invalid JSON: %s", problem);
	if (problem == NULL && !shape->root_object)
		return "body must be a JSON object";
	return problem;
}

/* A body's required UUID string; NULL, or why not. */
const char *
queen_body_uuid(const QueenJsonValue *v, const char *key, pg_uuid_t *out)
{
	if (v->type == JSON_TOKEN_INVALID || v->type == JSON_TOKEN_NULL)
		return psprintf("%s is required", key);
	if (v->type != JSON_TOKEN_STRING || !queen_uuid_parse(v->str, out))
		return psprintf("%s must be a UUID", key);
	return NULL;
}
