/*-------------------------------------------------------------------------
 *
 * configure_parse.c
 *	  The queue options, and a configure body parsed and validated against
 *	  them before anything is written (configure.c writes).
 *
 * Every value is validated before the first statement, so a refused body
 * writes nothing.  The body is walked once by the shape walker over
 * PostgreSQL's JSON lexer (json_walk.c): no jsonb is built, and no number ever reaches
 * numeric input (whose range errors would be raised, not answered).  What
 * the client got wrong comes back as a message and the key at fault, never
 * as an ERROR, so the broker can reply without unwinding.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "configure_parse.h"
#include "validate.h"
#include "codec.h"
#include "json_walk.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"

/*
 * A configure body is two levels deep; anything much deeper is refused
 * before the recursive parser could exhaust the stack (an ERROR the broker
 * would have to turn into a 500).
 */
#define QUEEN_CFG_MAX_DEPTH		64

/* namespace and task are varchar(255): characters, not bytes. */
#define QUEEN_CFG_MAX_LABEL_CHARS	255

/* ----------------------------------------------------------------
 *		The options
 * ----------------------------------------------------------------
 */

/*
 * Queen's echo order (012_configure.sql).  Defaults are the configure
 * defaults of Queen's configure route, which differ from the column defaults a push
 * creates a queue with only in leaseTime (300 against 60).  The ranges
 * refuse what cannot mean anything (a negative count, a lease of 0 s);
 * minPopWaitTime is clamped as Queen clamps it; the sink-hold bound is
 * refused out of range as Queen refuses it, because it governs deletion.
 */
const QueenOptionDef queen_options[] = {
	{"priority", "priority", QUEEN_OPT_INT, 0, PG_INT32_MIN, PG_INT32_MAX, false, 0, 0},
	{"leaseTime", "lease_time", QUEEN_OPT_INT, 300, 1, PG_INT32_MAX, false, 0, 0},
	{"retryLimit", "retry_limit", QUEEN_OPT_INT, 3, 0, PG_INT32_MAX, false, 0, 0},
	{"retryDelay", "retry_delay", QUEEN_OPT_INT, 1000, 0, PG_INT32_MAX, false, 0, 0},
	{"maxSize", "max_queue_size", QUEEN_OPT_INT, 0, 0, PG_INT32_MAX, false, 0, 0},
	{"ttl", "ttl", QUEEN_OPT_INT, 3600, 0, PG_INT32_MAX, false, 0, 0},
	{"deadLetterQueue", "dead_letter_queue", QUEEN_OPT_BOOL, 1, 0, 0, false, 0, 0},
	{"dlqAfterMaxRetries", "dlq_after_max_retries", QUEEN_OPT_BOOL, 1, 0, 0, false, 0, 0},
	{"delayedProcessing", "delayed_processing", QUEEN_OPT_INT, 0, 0, PG_INT32_MAX, false, 0, 0},
	{"windowBuffer", "window_buffer", QUEEN_OPT_INT, 0, 0, PG_INT32_MAX, false, 0, 0},
	{"retentionSeconds", "retention_seconds", QUEEN_OPT_INT, 0, 0, PG_INT32_MAX, false, 0, 0},
	{"completedRetentionSeconds", "completed_retention_seconds", QUEEN_OPT_INT, 0, 0, PG_INT32_MAX, false, 0, 0},
	{"retentionEnabled", "retention_enabled", QUEEN_OPT_BOOL, 0, 0, 0, false, 0, 0},
	{"encryptionEnabled", "encryption_enabled", QUEEN_OPT_BOOL, 0, 0, 0, false, 0, 0},
	{"maxWaitTimeSeconds", "max_wait_time_seconds", QUEEN_OPT_INT, 0, 0, PG_INT32_MAX, false, 0, 0},
	{"minPopWaitTime", "min_pop_wait_time", QUEEN_OPT_INT, 0, PG_INT32_MIN, PG_INT32_MAX, true, 0, 60000},
	{"dedupWindowSeconds", "dedup_window_seconds", QUEEN_OPT_INT, 3600, 0, PG_INT32_MAX, false, 0, 0},
	{"retentionSinkHold", "retention_sink_hold", QUEEN_OPT_TEXT, 0, 0, 0, false, 0, 0},
	{"retentionSinkHoldMaxSeconds", "retention_sink_max_seconds", QUEEN_OPT_INT, 604800, 60, 31536000, false, 0, 0},
};

StaticAssertDecl(lengthof(queen_options) == QUEEN_NOPTIONS,
				 "QUEEN_NOPTIONS must count queen_options");

/* Keys of an options bag: the options, then the three that are not options. */
#define QUEEN_KEY_NAMESPACE	(QUEEN_NOPTIONS)
#define QUEEN_KEY_TASK		(QUEEN_NOPTIONS + 1)
#define QUEEN_KEY_REPLACE	(QUEEN_NOPTIONS + 2)
#define QUEEN_NKEYS			(QUEEN_NOPTIONS + 3)

/* ----------------------------------------------------------------
 *		Walking the body
 * ----------------------------------------------------------------
 */

/* The root's keys: an options bag's, then the three only the root has. */
#define QUEEN_TOP_QUEUE		(QUEEN_NKEYS)
#define QUEEN_TOP_MODE		(QUEEN_NKEYS + 1)
#define QUEEN_TOP_OPTIONS	(QUEEN_NKEYS + 2)
#define QUEEN_NTOP			(QUEEN_NKEYS + 3)

typedef struct QueenCfgParse
{
	QueenJsonShape shape;
	QueenJsonValue top[QUEEN_NTOP];	/* root keys */
	QueenJsonValue opt[QUEEN_NKEYS];	/* keys of the options object */
} QueenCfgParse;

/* The keys a configure body may have, in the order of the slots above. */
static const char *const *
queen_cfg_key_names(void)
{
	static const char *names[QUEEN_NTOP];
	int			i;

	if (names[0] == NULL)
	{
		for (i = 0; i < QUEEN_NOPTIONS; i++)
			names[i] = queen_options[i].json;
		names[QUEEN_KEY_NAMESPACE] = "namespace";
		names[QUEEN_KEY_TASK] = "task";
		names[QUEEN_KEY_REPLACE] = "replace";
		names[QUEEN_TOP_QUEUE] = "queue";
		names[QUEEN_TOP_MODE] = "mode";
		names[QUEEN_TOP_OPTIONS] = "options";
	}
	return names;
}

/*
 * Deepest nesting of containers in a JSON text, counted outside strings.
 * Stops counting once limit is passed.
 */
static int
queen_cfg_depth(const char *s, size_t len, int limit)
{
	bool		in_string = false;
	int			depth = 0;
	int			deepest = 0;
	size_t		i;

	for (i = 0; i < len && deepest <= limit; i++)
	{
		char		c = s[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if (c == '{' || c == '[')
		{
			depth++;
			deepest = Max(deepest, depth);
		}
		else if (c == '}' || c == ']')
			depth--;
	}
	return deepest;
}

/* ----------------------------------------------------------------
 *		Validation
 * ----------------------------------------------------------------
 */

static bool
queen_cfg_fail(QueenCfgError *err, const char *invalid, char *message)
{
	err->message = message;
	err->invalid = invalid;
	return false;
}

/*
 * A JSON number token as an integer.  False when it has a fraction or an
 * exponent.  Magnitudes beyond int32 saturate just outside its range, which
 * is all the range checks need.
 */
static bool
queen_cfg_integer(const char *s, int64 *out)
{
	const char *p = s;
	bool		negative = false;
	int64		v = 0;

	if (*p == '-')
	{
		negative = true;
		p++;
	}
	if (*p == '\0')
		return false;
	for (; *p != '\0'; p++)
	{
		if (*p < '0' || *p > '9')
			return false;
		if (v <= (int64) PG_INT32_MAX + 1)
			v = v * 10 + (*p - '0');
	}
	if (v > (int64) PG_INT32_MAX + 1)
		v = (int64) PG_INT32_MAX + 2;
	*out = negative ? -v : v;
	return true;
}

/* Sink names are spliced into KV keys (Queen's 012_configure.sql). */
static bool
queen_cfg_sink_name_ok(const char *s)
{
	size_t		len = strlen(s);
	size_t		i;

	if (len > 64)
		return false;
	for (i = 0; i < len; i++)
	{
		char		c = s[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/*
 * The merge rule for one key: absent keeps the stored value, null resets
 * it to the configure default.  True when v holds a value to check.
 */
static bool
queen_cfg_given(const QueenJsonValue *v, QueenOptionSpec *spec)
{
	if (v->type == JSON_TOKEN_INVALID)
		spec->kind = QUEEN_SPEC_ABSENT;
	else if (v->type == JSON_TOKEN_NULL)
		spec->kind = QUEEN_SPEC_DEFAULT;
	else
	{
		spec->kind = QUEEN_SPEC_VALUE;
		return true;
	}
	return false;
}

static bool
queen_cfg_option(const QueenOptionDef *def, const QueenJsonValue *v,
				 QueenOptionSpec *spec, QueenCfgError *err)
{
	int64		n;

	if (!queen_cfg_given(v, spec))
		return true;

	switch (def->type)
	{
		case QUEEN_OPT_BOOL:
			if (v->type != JSON_TOKEN_TRUE && v->type != JSON_TOKEN_FALSE)
				return queen_cfg_fail(err, def->json,
									  psprintf("%s must be true or false, got %s",
											   def->json, queen_json_kind(v->type)));
			spec->ival = v->type == JSON_TOKEN_TRUE ? 1 : 0;
			return true;

		case QUEEN_OPT_TEXT:
			if (v->type != JSON_TOKEN_STRING)
				return queen_cfg_fail(err, def->json,
									  psprintf("%s must be a string, got %s",
											   def->json, queen_json_kind(v->type)));
			if (!queen_cfg_sink_name_ok(v->str))
				return queen_cfg_fail(err, def->json,
									  psprintf("%s must match [A-Za-z0-9._-]{0,64}, got %s",
											   def->json, quote_literal_cstr(v->str)));
			spec->sval = v->str;
			return true;

		case QUEEN_OPT_INT:
			if (v->type != JSON_TOKEN_NUMBER)
				return queen_cfg_fail(err, def->json,
									  psprintf("%s must be an integer, got %s",
											   def->json, queen_json_kind(v->type)));
			if (!queen_cfg_integer(v->str, &n))
				return queen_cfg_fail(err, def->json,
									  psprintf("%s must be an integer, got %s",
											   def->json, v->str));
			if (def->clamp && (n < def->min || n > def->max))
				return queen_cfg_fail(err, def->json,
									  psprintf("%s is out of range, got %s",
											   def->json, v->str));
			if (n < def->min || n > def->max)
				return queen_cfg_fail(err, def->json,
									  psprintf("%s must be between %d and %d, got %s",
											   def->json, def->min, def->max, v->str));
			if (def->clamp)
				n = Min(Max(n, def->lo), def->hi);
			spec->ival = (int32) n;
			return true;
	}
	return true;
}

/* namespace or task: a string (at most 255 characters), or null for ''. */
static bool
queen_cfg_label(const char *key, const QueenJsonValue *v, QueenOptionSpec *spec,
				QueenCfgError *err)
{
	if (!queen_cfg_given(v, spec))
		return true;
	if (v->type != JSON_TOKEN_STRING)
		return queen_cfg_fail(err, key,
							  psprintf("%s must be a string, got %s",
									   key, queen_json_kind(v->type)));
	if (pg_mbstrlen_with_len(v->str, strlen(v->str)) > QUEEN_CFG_MAX_LABEL_CHARS)
		return queen_cfg_fail(err, key,
							  psprintf("%s is longer than %d characters",
									   key, QUEEN_CFG_MAX_LABEL_CHARS));
	spec->sval = v->str;
	return true;
}

/* The text of a mode that is neither "merge" nor "replace", for the message. */
static char *
queen_cfg_mode_text(const QueenJsonValue *v)
{
	StringInfoData buf;

	if (v->type == JSON_TOKEN_STRING)
	{
		initStringInfo(&buf);
		escape_json(&buf, v->str);
		return buf.data;
	}
	if (v->type == JSON_TOKEN_OBJECT_START || v->type == JSON_TOKEN_ARRAY_START)
		return pstrdup(queen_json_kind(v->type));
	return v->str;
}

/*
 * Walk the body once, capturing the root's keys and the options object's.
 * NULL, or what makes it no JSON object (as "bad body: ..." wants it).
 */
static char *
queen_cfg_walk(const char *body, size_t len, QueenCfgParse *p)
{
	char	   *problem;

	if (len > (size_t) PG_INT32_MAX)
		return pstrdup("too large");
	if (!pg_verifymbstr(body, (int) len, true))
		return pstrdup("invalid UTF-8");
	if (queen_cfg_depth(body, len, QUEEN_CFG_MAX_DEPTH) > QUEEN_CFG_MAX_DEPTH)
		return psprintf("nested deeper than %d levels", QUEEN_CFG_MAX_DEPTH);

	p->shape.top.names = queen_cfg_key_names();
	p->shape.top.nnames = QUEEN_NTOP;
	p->shape.top.values = p->top;
	p->shape.nested = QUEEN_TOP_OPTIONS;
	p->shape.inner.names = queen_cfg_key_names();
	p->shape.inner.nnames = QUEEN_NKEYS;
	p->shape.inner.values = p->opt;
	p->shape.array = -1;
	problem = queen_json_shape(body, len, &p->shape);
	if (problem != NULL)
		return problem;
	if (!p->shape.root_object)
		return pstrdup("expected a JSON object");
	return NULL;
}

/* The queue: required, and a name a push would accept. */
static bool
queen_cfg_queue(const QueenJsonValue *v, QueenCfgRequest *req, QueenCfgError *err)
{
	const char *problem;
	size_t		qlen;

	if (v->type != JSON_TOKEN_STRING)
		return queen_cfg_fail(err, "queue", pstrdup("queue is required"));
	qlen = strlen(v->str);
	problem = queen_name_problem(v->str, qlen, QUEEN_MAX_NAME_BYTES);
	if (problem != NULL)
	{
		if (qlen > QUEEN_MAX_NAME_BYTES)
			return queen_cfg_fail(err, "queue",
								  psprintf("queue name is %zu bytes long, the limit is %d bytes",
										   qlen, QUEEN_MAX_NAME_BYTES));
		return queen_cfg_fail(err, "queue", psprintf("queue name %s", problem));
	}
	req->queue = v->str;
	return true;
}

/*
 * Merge or replace.  mode is the wire's spelling and wins; "replace": true
 * among the options is what Queen's SQL reads, honoured when mode is
 * absent.  Decided before any option is read, so a refused mode cannot
 * configure the queue in the other meaning.
 */
static bool
queen_cfg_mode(const QueenJsonValue *mode, const QueenJsonValue *bag,
			   QueenCfgRequest *req, QueenCfgError *err)
{
	if (mode->type != JSON_TOKEN_INVALID && mode->type != JSON_TOKEN_NULL)
	{
		if (mode->type == JSON_TOKEN_STRING && strcmp(mode->str, "merge") == 0)
			req->replace = false;
		else if (mode->type == JSON_TOKEN_STRING && strcmp(mode->str, "replace") == 0)
			req->replace = true;
		else
			return queen_cfg_fail(err, "mode",
								  psprintf("mode must be \"merge\" or \"replace\", got %s",
										   queen_cfg_mode_text(mode)));
	}
	else if (bag[QUEEN_KEY_REPLACE].type != JSON_TOKEN_INVALID &&
			 bag[QUEEN_KEY_REPLACE].type != JSON_TOKEN_NULL)
	{
		JsonTokenType t = bag[QUEEN_KEY_REPLACE].type;

		if (t != JSON_TOKEN_TRUE && t != JSON_TOKEN_FALSE)
			return queen_cfg_fail(err, "replace",
								  psprintf("replace must be true or false, got %s",
										   queen_json_kind(t)));
		req->replace = t == JSON_TOKEN_TRUE;
	}
	return true;
}

/*
 * namespace and task: from the bag; else from the root, when the bag is
 * the options object and the root spells a non-empty string (Queen folds
 * them in so, letting the bag spell "" or null).
 */
static bool
queen_cfg_labels(const QueenCfgParse *p, const QueenJsonValue *bag,
				 QueenCfgRequest *req, QueenCfgError *err)
{
	int			i;

	for (i = 0; i < 2; i++)
	{
		int			key = i == 0 ? QUEEN_KEY_NAMESPACE : QUEEN_KEY_TASK;
		const char *name = i == 0 ? "namespace" : "task";
		const QueenJsonValue *v = &bag[key];

		if (v->type == JSON_TOKEN_INVALID && bag != p->top &&
			p->top[key].type != JSON_TOKEN_INVALID)
		{
			const QueenJsonValue *t = &p->top[key];

			if (t->type != JSON_TOKEN_NULL && t->type != JSON_TOKEN_STRING)
				return queen_cfg_fail(err, name,
									  psprintf("%s must be a string, got %s",
											   name, queen_json_kind(t->type)));
			if (t->type == JSON_TOKEN_STRING && t->str[0] != '\0')
				v = t;
		}
		if (!queen_cfg_label(name, v, &req->label[i], err))
			return false;
	}
	return true;
}

/*
 * Parse and validate a configure body.  Never raises for what the body
 * contains (only for running out of memory and the like).
 */
bool
queen_cfg_parse(const char *body, size_t len, QueenCfgRequest *req,
				QueenCfgError *err)
{
	QueenCfgParse *p = palloc0(sizeof(QueenCfgParse));
	const QueenJsonValue *options;
	const QueenJsonValue *bag;
	char	   *problem;
	int			i;

	memset(req, 0, sizeof(*req));
	problem = queen_cfg_walk(body, len, p);
	if (problem != NULL)
		return queen_cfg_fail(err, NULL, psprintf("bad body: %s", problem));
	if (!queen_cfg_queue(&p->top[QUEEN_TOP_QUEUE], req, err))
		return false;

	/* the options bag: the options object, or the root when there is none */
	options = &p->top[QUEEN_TOP_OPTIONS];
	if (options->type != JSON_TOKEN_INVALID && options->type != JSON_TOKEN_NULL &&
		options->type != JSON_TOKEN_OBJECT_START)
		return queen_cfg_fail(err, "options",
							  psprintf("options must be an object, got %s",
									   queen_json_kind(options->type)));
	bag = options->type == JSON_TOKEN_OBJECT_START ? p->opt : p->top;

	if (!queen_cfg_mode(&p->top[QUEEN_TOP_MODE], bag, req, err) ||
		!queen_cfg_labels(p, bag, req, err))
		return false;
	for (i = 0; i < QUEEN_NOPTIONS; i++)
		if (!queen_cfg_option(&queen_options[i], &bag[i], &req->opt[i], err))
			return false;
	return true;
}
