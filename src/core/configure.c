/*-------------------------------------------------------------------------
 *
 * configure.c
 *	  Queue configuration: POST /api/v1/configure and
 *	  DELETE /api/v1/resources/queues/:queue, for the broker and as the SQL
 *	  functions queen.configure_queue_v1 and queen.delete_queue_v1.
 *
 * This file owns every write to queen.queues other than the implicit
 * creation by a push (alloc.c), and the removal of a queue with everything
 * under it.  Both cores run inside a transaction their caller started and
 * answer with an HTTP status and a JSON body instead of raising for what
 * the client got wrong, so the broker can reply without unwinding; they
 * raise only when the database fails.
 *
 * Configure follows Queen 1.6's merge rule (012_configure.sql): an option
 * the body does not mention keeps its stored value, an explicit null resets
 * it to the configure default, and "mode": "replace" (or "replace": true in
 * the options) resets every option not given.  Every value is validated
 * before the first statement, so a refused body writes nothing.  The body
 * is walked once with PostgreSQL's JSON parser and its own callbacks: no
 * jsonb is built, and no number ever reaches numeric input (whose range
 * errors would be raised, not answered).
 *
 * Locks: configure touches one queues row, locked FOR NO KEY UPDATE (the
 * lock its own UPDATE takes anyway), which serializes concurrent configures
 * of a queue but not the KEY SHARE a push takes to provision a partition
 * under it.  Writing the row does make such a push wait for our commit
 * (its INSERT ... ON CONFLICT waits on the row's updater), so a row the
 * request does not change is not written.  Delete follows the project's
 * one global order: the queues row, then its partition rows in ascending
 * id, then the leaves.
 *
 *-------------------------------------------------------------------------
 */
#include "queen.h"
#include "dedup_cache.h"
#include "log_write.h"
#include "spi.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "common/jsonapi.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(queen_configure_queue_v1);
PG_FUNCTION_INFO_V1(queen_delete_queue_v1);

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
typedef enum QueenOptionType
{
	QUEEN_OPT_INT,
	QUEEN_OPT_BOOL,
	QUEEN_OPT_TEXT
} QueenOptionType;

typedef struct QueenOptionDef
{
	const char *json;			/* key in the body and in the echo */
	const char *column;			/* queen.queues column */
	QueenOptionType type;
	int32		def;			/* configure default (bool: 0/1) */
	int32		min;			/* ints: accepted range */
	int32		max;
	bool		clamp;			/* ints: clamp to [lo, hi] instead of refusing */
	int32		lo;
	int32		hi;
} QueenOptionDef;

/*
 * Queen's echo order (012_configure.sql).  Defaults are the configure
 * defaults of reference 7.6, which differ from the column defaults a push
 * creates a queue with only in leaseTime (300 against 60).  The ranges
 * refuse what cannot mean anything (a negative count, a lease of 0 s);
 * minPopWaitTime is clamped as Queen clamps it; the sink-hold bound is
 * refused out of range as Queen refuses it, because it governs deletion.
 */
static const QueenOptionDef queen_options[] = {
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

#define QUEEN_NOPTIONS	((int) lengthof(queen_options))

/* Keys of an options bag: the options, then the three that are not options. */
#define QUEEN_KEY_NAMESPACE	(QUEEN_NOPTIONS)
#define QUEEN_KEY_TASK		(QUEEN_NOPTIONS + 1)
#define QUEEN_KEY_REPLACE	(QUEEN_NOPTIONS + 2)
#define QUEEN_NKEYS			(QUEEN_NOPTIONS + 3)

/* ----------------------------------------------------------------
 *		Walking the body
 * ----------------------------------------------------------------
 */

/* A value as the body spelt it; containers are kept only as their kind. */
typedef struct QueenJsonValue
{
	bool		present;
	JsonTokenType type;			/* a scalar's type, or OBJECT_START / ARRAY_START */
	char	   *str;			/* scalars: the token, strings de-escaped */
} QueenJsonValue;

typedef struct QueenCfgParse
{
	int			depth;			/* containers currently open */
	bool		root_object;
	bool		in_options;		/* inside the "options" object */
	QueenJsonValue *pending;	/* slot the next value goes to, or NULL */
	QueenJsonValue queue;
	QueenJsonValue mode;
	QueenJsonValue options;
	QueenJsonValue top[QUEEN_NKEYS];	/* root keys */
	QueenJsonValue opt[QUEEN_NKEYS];	/* keys of the options object */
} QueenCfgParse;

static int
queen_cfg_key(const char *name)
{
	int			i;

	for (i = 0; i < QUEEN_NOPTIONS; i++)
		if (strcmp(name, queen_options[i].json) == 0)
			return i;
	if (strcmp(name, "namespace") == 0)
		return QUEEN_KEY_NAMESPACE;
	if (strcmp(name, "task") == 0)
		return QUEEN_KEY_TASK;
	if (strcmp(name, "replace") == 0)
		return QUEEN_KEY_REPLACE;
	return -1;
}

static void
queen_cfg_record(QueenCfgParse *p, JsonTokenType type, char *str)
{
	/* a key given twice: the last one wins, as in jsonb */
	p->pending->present = true;
	p->pending->type = type;
	p->pending->str = str;
	p->pending = NULL;
}

/*
 * Only the root's keys and the options object's keys are captured; what is
 * nested deeper belongs to an unknown key's value and is walked past.
 */
static void
queen_cfg_field_start(void *state, char *fname, bool isnull)
{
	QueenCfgParse *p = (QueenCfgParse *) state;
	int			key;

	(void) isnull;
	p->pending = NULL;
	if (p->depth == 1)
	{
		if (strcmp(fname, "queue") == 0)
			p->pending = &p->queue;
		else if (strcmp(fname, "mode") == 0)
			p->pending = &p->mode;
		else if (strcmp(fname, "options") == 0)
			p->pending = &p->options;
		else if ((key = queen_cfg_key(fname)) >= 0)
			p->pending = &p->top[key];
	}
	else if (p->depth == 2 && p->in_options)
	{
		if ((key = queen_cfg_key(fname)) >= 0)
			p->pending = &p->opt[key];
	}
}

static void
queen_cfg_object_start(void *state)
{
	QueenCfgParse *p = (QueenCfgParse *) state;

	if (p->depth == 0)
		p->root_object = true;
	else if (p->pending != NULL)
	{
		if (p->pending == &p->options && p->depth == 1)
		{
			/* a later "options" object replaces an earlier one whole */
			memset(p->opt, 0, sizeof(p->opt));
			p->in_options = true;
		}
		queen_cfg_record(p, JSON_TOKEN_OBJECT_START, NULL);
	}
	p->depth++;
}

static void
queen_cfg_object_end(void *state)
{
	QueenCfgParse *p = (QueenCfgParse *) state;

	p->depth--;
	if (p->depth == 1)
		p->in_options = false;
}

static void
queen_cfg_array_start(void *state)
{
	QueenCfgParse *p = (QueenCfgParse *) state;

	if (p->pending != NULL)
		queen_cfg_record(p, JSON_TOKEN_ARRAY_START, NULL);
	p->depth++;
}

static void
queen_cfg_array_end(void *state)
{
	QueenCfgParse *p = (QueenCfgParse *) state;

	p->depth--;
}

static void
queen_cfg_scalar(void *state, char *token, JsonTokenType tokentype)
{
	QueenCfgParse *p = (QueenCfgParse *) state;

	if (p->pending != NULL)
		queen_cfg_record(p, tokentype, token);
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
typedef enum QueenSpecKind
{
	QUEEN_SPEC_ABSENT = 0,		/* keep the stored value (default when new) */
	QUEEN_SPEC_DEFAULT,			/* explicit null: the configure default */
	QUEEN_SPEC_VALUE
} QueenSpecKind;

typedef struct QueenOptionSpec
{
	QueenSpecKind kind;
	int32		ival;			/* ints and bools */
	char	   *sval;			/* text */
} QueenOptionSpec;

/* What a valid body asks for. */
typedef struct QueenCfgRequest
{
	char	   *queue;
	bool		replace;
	QueenOptionSpec label[2];	/* namespace, task */
	QueenOptionSpec opt[QUEEN_NOPTIONS];
} QueenCfgRequest;

/* Why a body was refused: the message, and the key at fault (or NULL). */
typedef struct QueenCfgError
{
	char	   *message;
	const char *invalid;
} QueenCfgError;

static bool
queen_cfg_fail(QueenCfgError *err, const char *invalid, char *message)
{
	err->message = message;
	err->invalid = invalid;
	return false;
}

static const char *
queen_json_kind(JsonTokenType type)
{
	switch (type)
	{
		case JSON_TOKEN_STRING:
			return "a string";
		case JSON_TOKEN_NUMBER:
			return "a number";
		case JSON_TOKEN_TRUE:
		case JSON_TOKEN_FALSE:
			return "a boolean";
		case JSON_TOKEN_NULL:
			return "null";
		case JSON_TOKEN_OBJECT_START:
			return "an object";
		case JSON_TOKEN_ARRAY_START:
			return "an array";
		default:
			return "an unexpected value";
	}
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

static bool
queen_cfg_option(const QueenOptionDef *def, const QueenJsonValue *v,
				 QueenOptionSpec *spec, QueenCfgError *err)
{
	int64		n;

	if (!v->present)
	{
		spec->kind = QUEEN_SPEC_ABSENT;
		return true;
	}
	if (v->type == JSON_TOKEN_NULL)
	{
		spec->kind = QUEEN_SPEC_DEFAULT;
		return true;
	}
	spec->kind = QUEEN_SPEC_VALUE;

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
	if (!v->present)
	{
		spec->kind = QUEEN_SPEC_ABSENT;
		return true;
	}
	if (v->type == JSON_TOKEN_NULL)
	{
		spec->kind = QUEEN_SPEC_DEFAULT;
		return true;
	}
	if (v->type != JSON_TOKEN_STRING)
		return queen_cfg_fail(err, key,
							  psprintf("%s must be a string, got %s",
									   key, queen_json_kind(v->type)));
	if (pg_mbstrlen_with_len(v->str, strlen(v->str)) > QUEEN_CFG_MAX_LABEL_CHARS)
		return queen_cfg_fail(err, key,
							  psprintf("%s is longer than %d characters",
									   key, QUEEN_CFG_MAX_LABEL_CHARS));
	spec->kind = QUEEN_SPEC_VALUE;
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
 * Parse and validate a configure body.  Never raises for what the body
 * contains (only for running out of memory and the like).
 */
static bool
queen_cfg_parse(const char *body, size_t len, QueenCfgRequest *req,
				QueenCfgError *err)
{
	QueenCfgParse *p;
	JsonSemAction sem;
	JsonLexContext *lex;
	JsonParseErrorType rc;
	QueenJsonValue *bag;
	const char *problem;
	size_t		qlen;
	int			i;

	memset(req, 0, sizeof(*req));
	if (len > (size_t) PG_INT32_MAX)
		return queen_cfg_fail(err, NULL, pstrdup("bad body: too large"));
	if (!pg_verifymbstr(body, (int) len, true))
		return queen_cfg_fail(err, NULL, pstrdup("bad body: invalid UTF-8"));
	if (queen_cfg_depth(body, len, QUEEN_CFG_MAX_DEPTH) > QUEEN_CFG_MAX_DEPTH)
		return queen_cfg_fail(err, NULL,
							  psprintf("bad body: nested deeper than %d levels",
									   QUEEN_CFG_MAX_DEPTH));

	p = palloc0(sizeof(QueenCfgParse));
	memset(&sem, 0, sizeof(sem));
	sem.semstate = p;
	sem.object_start = queen_cfg_object_start;
	sem.object_end = queen_cfg_object_end;
	sem.array_start = queen_cfg_array_start;
	sem.array_end = queen_cfg_array_end;
	sem.object_field_start = queen_cfg_field_start;
	sem.scalar = queen_cfg_scalar;

	lex = makeJsonLexContextCstringLen(unconstify(char *, body), (int) len,
									   PG_UTF8, true);
	rc = pg_parse_json(lex, &sem);
	if (rc != JSON_SUCCESS)
		return queen_cfg_fail(err, NULL,
							  psprintf("bad body: %s", json_errdetail(rc, lex)));
	if (!p->root_object)
		return queen_cfg_fail(err, NULL, pstrdup("bad body: expected a JSON object"));

	/* the queue */
	if (!p->queue.present || p->queue.type != JSON_TOKEN_STRING)
		return queen_cfg_fail(err, "queue", pstrdup("queue is required"));
	qlen = strlen(p->queue.str);
	problem = queen_name_problem(p->queue.str, qlen, QUEEN_MAX_NAME_BYTES);
	if (problem != NULL)
	{
		if (qlen > QUEEN_MAX_NAME_BYTES)
			return queen_cfg_fail(err, "queue",
								  psprintf("queue name is %zu bytes long, the limit is %d bytes",
										   qlen, QUEEN_MAX_NAME_BYTES));
		return queen_cfg_fail(err, "queue", psprintf("queue name %s", problem));
	}
	req->queue = p->queue.str;

	/* the options bag: the options object, or the root when there is none */
	if (p->options.present && p->options.type != JSON_TOKEN_NULL &&
		p->options.type != JSON_TOKEN_OBJECT_START)
		return queen_cfg_fail(err, "options",
							  psprintf("options must be an object, got %s",
									   queen_json_kind(p->options.type)));
	bag = (p->options.present && p->options.type == JSON_TOKEN_OBJECT_START) ?
		p->opt : p->top;

	/*
	 * Merge or replace.  mode is the wire's spelling and wins; "replace": true
	 * among the options is what Queen's SQL reads, honoured when mode is
	 * absent.  Decided before any option is read, so a refused mode cannot
	 * configure the queue in the other meaning.
	 */
	if (p->mode.present && p->mode.type != JSON_TOKEN_NULL)
	{
		if (p->mode.type == JSON_TOKEN_STRING && strcmp(p->mode.str, "merge") == 0)
			req->replace = false;
		else if (p->mode.type == JSON_TOKEN_STRING && strcmp(p->mode.str, "replace") == 0)
			req->replace = true;
		else
			return queen_cfg_fail(err, "mode",
								  psprintf("mode must be \"merge\" or \"replace\", got %s",
										   queen_cfg_mode_text(&p->mode)));
	}
	else if (bag[QUEEN_KEY_REPLACE].present &&
			 bag[QUEEN_KEY_REPLACE].type != JSON_TOKEN_NULL)
	{
		JsonTokenType t = bag[QUEEN_KEY_REPLACE].type;

		if (t != JSON_TOKEN_TRUE && t != JSON_TOKEN_FALSE)
			return queen_cfg_fail(err, "replace",
								  psprintf("replace must be true or false, got %s",
										   queen_json_kind(t)));
		req->replace = t == JSON_TOKEN_TRUE;
	}

	/*
	 * namespace and task: from the bag; else from the root, when the bag is
	 * the options object and the root spells a non-empty string (Queen folds
	 * them in so, letting the bag spell "" or null).
	 */
	for (i = 0; i < 2; i++)
	{
		int			key = i == 0 ? QUEEN_KEY_NAMESPACE : QUEEN_KEY_TASK;
		const char *name = i == 0 ? "namespace" : "task";
		const QueenJsonValue *v = &bag[key];

		if (!v->present && bag != p->top && p->top[key].present)
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

	for (i = 0; i < QUEEN_NOPTIONS; i++)
		if (!queen_cfg_option(&queen_options[i], &bag[i], &req->opt[i], err))
			return false;

	return true;
}

/* ----------------------------------------------------------------
 *		Statements
 * ----------------------------------------------------------------
 */
typedef enum QueenCfgPlanId
{
	QUEEN_CFG_LOCK,
	QUEEN_CFG_UPDATE,
	QUEEN_CFG_INSERT,
	QUEEN_CFG_DEL_LOCK_QUEUE,
	QUEEN_CFG_DEL_LOCK_PARTITIONS,
	QUEEN_CFG_DEL_TXNS,
	QUEEN_CFG_DEL_QUEUE,
	QUEEN_CFG_NPLANS
} QueenCfgPlanId;

static SPIPlanPtr queen_cfg_plans[QUEEN_CFG_NPLANS];

/*
 * log_txns has no foreign key (the purge must not pay for triggers), so
 * the cascade from queues cannot reach it: it is cleared while the
 * partition rows that name its rows still exist.  log_segments goes with
 * the cascade.
 */
static const char *const queen_sql_del_lock_queue =
"SELECT id FROM queen.queues WHERE tenant_id = $1 AND name = $2 FOR UPDATE";

/* LockRows sits above the Sort: rows are locked in ascending id. */
static const char *const queen_sql_del_lock_partitions =
"SELECT id FROM queen.log_partitions WHERE queue_id = $1 ORDER BY id FOR UPDATE";

static const char *const queen_sql_del_txns =
"DELETE FROM queen.log_txns"
" WHERE partition_id IN (SELECT id FROM queen.log_partitions WHERE queue_id = $1)";

static const char *const queen_sql_del_queue =
"DELETE FROM queen.queues WHERE id = $1";

static Oid
queen_option_typoid(const QueenOptionDef *def)
{
	switch (def->type)
	{
		case QUEEN_OPT_INT:
			return INT4OID;
		case QUEEN_OPT_BOOL:
			return BOOLOID;
		case QUEEN_OPT_TEXT:
			return TEXTOID;
	}
	return InvalidOid;
}

/*
 * The three configure statements name every option column; they are
 * generated from queen_options so a new option is one line in the table.
 * Must be called between SPI_connect and SPI_finish.
 */
static SPIPlanPtr
queen_cfg_plan(QueenCfgPlanId id)
{
	StringInfoData sql;
	Oid			argtypes[QUEEN_NOPTIONS + 4];
	int			nargs = 0;
	int			i;

	if (queen_cfg_plans[id] != NULL)
		return queen_cfg_plans[id];

	initStringInfo(&sql);
	switch (id)
	{
		case QUEEN_CFG_LOCK:
			appendStringInfoString(&sql, "SELECT id, namespace, task");
			for (i = 0; i < QUEEN_NOPTIONS; i++)
				appendStringInfo(&sql, ", %s", queen_options[i].column);
			appendStringInfoString(&sql,
								   " FROM queen.queues WHERE tenant_id = $1 AND name = $2"
								   " FOR NO KEY UPDATE");
			argtypes[nargs++] = UUIDOID;
			argtypes[nargs++] = TEXTOID;
			break;

		case QUEEN_CFG_UPDATE:
			appendStringInfoString(&sql,
								   "UPDATE queen.queues SET namespace = $2, task = $3");
			argtypes[nargs++] = UUIDOID;
			argtypes[nargs++] = TEXTOID;
			argtypes[nargs++] = TEXTOID;
			for (i = 0; i < QUEEN_NOPTIONS; i++)
			{
				appendStringInfo(&sql, ", %s = $%d", queen_options[i].column, nargs + 1);
				argtypes[nargs++] = queen_option_typoid(&queen_options[i]);
			}
			appendStringInfoString(&sql, " WHERE id = $1");
			break;

		case QUEEN_CFG_INSERT:

			/*
			 * An absent namespace or task ($3, $4 NULL) is derived from the
			 * dotted name exactly as alloc.c provisions a pushed queue, so
			 * both doors name a queue alike.  DO NOTHING, not DO UPDATE: a
			 * queue created concurrently is merged onto by the caller's retry
			 * instead of being overwritten with defaults.
			 */
			appendStringInfoString(&sql,
								   "INSERT INTO queen.queues (tenant_id, name, namespace, task");
			for (i = 0; i < QUEEN_NOPTIONS; i++)
				appendStringInfo(&sql, ", %s", queen_options[i].column);
			appendStringInfoString(&sql,
								   ") VALUES ($1, $2, COALESCE($3, split_part($2, '.', 1)),"
								   " COALESCE($4, split_part($2, '.', 2))");
			argtypes[nargs++] = UUIDOID;
			argtypes[nargs++] = TEXTOID;
			argtypes[nargs++] = TEXTOID;
			argtypes[nargs++] = TEXTOID;
			for (i = 0; i < QUEEN_NOPTIONS; i++)
			{
				appendStringInfo(&sql, ", $%d", nargs + 1);
				argtypes[nargs++] = queen_option_typoid(&queen_options[i]);
			}
			appendStringInfoString(&sql,
								   ") ON CONFLICT (tenant_id, name) DO NOTHING"
								   " RETURNING id, namespace, task");
			break;

		case QUEEN_CFG_DEL_LOCK_QUEUE:
			appendStringInfoString(&sql, queen_sql_del_lock_queue);
			argtypes[nargs++] = UUIDOID;
			argtypes[nargs++] = TEXTOID;
			break;

		case QUEEN_CFG_DEL_LOCK_PARTITIONS:
		case QUEEN_CFG_DEL_TXNS:
		case QUEEN_CFG_DEL_QUEUE:
			appendStringInfoString(&sql,
								   id == QUEEN_CFG_DEL_LOCK_PARTITIONS ? queen_sql_del_lock_partitions :
								   id == QUEEN_CFG_DEL_TXNS ? queen_sql_del_txns :
								   queen_sql_del_queue);
			argtypes[nargs++] = UUIDOID;
			break;

		case QUEEN_CFG_NPLANS:
			elog(ERROR, "queen: no such configure statement");
	}

	queen_cfg_plans[id] = queen_keep_plan(sql.data, nargs, argtypes, false);
	pfree(sql.data);
	return queen_cfg_plans[id];
}

static void
queen_cfg_exec(QueenCfgPlanId id, Datum *values, const char *nulls, int expected)
{
	int			rc = SPI_execute_plan(queen_cfg_plan(id), values, nulls, false, 0);

	if (rc != expected)
		elog(ERROR, "queen: configure statement %d failed: %s", (int) id,
			 SPI_result_code_string(rc));
}

/* A column of the first result row; NULL when SQL NULL. */
static bool
queen_cfg_column(int col, Datum *out)
{
	bool		isnull;

	*out = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	return !isnull;
}

/* A text column of the first result row, copied into cxt; NULL stays NULL. */
static char *
queen_cfg_text_column(int col, MemoryContext cxt)
{
	Datum		d;
	MemoryContext old;
	char	   *s;

	if (!queen_cfg_column(col, &d))
		return NULL;
	old = MemoryContextSwitchTo(cxt);
	s = TextDatumGetCString(d);
	MemoryContextSwitchTo(old);
	return s;
}

/* ----------------------------------------------------------------
 *		Configure
 * ----------------------------------------------------------------
 */

/* The effective configuration of the queue after the call. */
typedef struct QueenCfgResult
{
	pg_uuid_t	id;
	char	   *label[2];		/* namespace, task */
	int32		ival[QUEEN_NOPTIONS];
	char	   *sval[QUEEN_NOPTIONS];
} QueenCfgResult;

static void
queen_cfg_default(int i, QueenCfgResult *res)
{
	res->ival[i] = queen_options[i].def;
	res->sval[i] = queen_options[i].type == QUEEN_OPT_TEXT ? "" : NULL;
}

static Datum
queen_cfg_option_datum(int i, const QueenCfgResult *res)
{
	switch (queen_options[i].type)
	{
		case QUEEN_OPT_INT:
			return Int32GetDatum(res->ival[i]);
		case QUEEN_OPT_BOOL:
			return BoolGetDatum(res->ival[i] != 0);
		case QUEEN_OPT_TEXT:
			return CStringGetTextDatum(res->sval[i]);
	}
	return (Datum) 0;
}

/*
 * The locked row is SPI's first result row: merge the request onto it into
 * res.  Returns whether anything differs from what the row holds.
 */
static bool
queen_cfg_merge(const QueenCfgRequest *req, QueenCfgResult *res,
				MemoryContext out_cxt)
{
	bool		changed = false;
	Datum		d;
	int			i;

	if (!queen_cfg_column(1, &d))
		elog(ERROR, "queen: queue without an id");
	memcpy(&res->id, DatumGetUUIDP(d), sizeof(pg_uuid_t));

	for (i = 0; i < 2; i++)
	{
		char	   *stored = queen_cfg_text_column(2 + i, out_cxt);

		if (req->label[i].kind == QUEEN_SPEC_VALUE)
			res->label[i] = req->label[i].sval;
		else if (req->label[i].kind == QUEEN_SPEC_DEFAULT)
			res->label[i] = "";
		else
			/* kept; a NULL from before derivation existed becomes '' */
			res->label[i] = stored != NULL ? stored : "";
		if (stored == NULL || strcmp(stored, res->label[i]) != 0)
			changed = true;
	}

	for (i = 0; i < QUEEN_NOPTIONS; i++)
	{
		const QueenOptionSpec *spec = &req->opt[i];
		int32		ival = 0;
		char	   *sval = NULL;

		if (!queen_cfg_column(4 + i, &d))
			elog(ERROR, "queen: queue column %s is NULL", queen_options[i].column);
		if (queen_options[i].type == QUEEN_OPT_TEXT)
			sval = queen_cfg_text_column(4 + i, out_cxt);
		else if (queen_options[i].type == QUEEN_OPT_BOOL)
			ival = DatumGetBool(d) ? 1 : 0;
		else
			ival = DatumGetInt32(d);

		if (spec->kind == QUEEN_SPEC_VALUE)
		{
			res->ival[i] = spec->ival;
			res->sval[i] = spec->sval;
		}
		else if (spec->kind == QUEEN_SPEC_DEFAULT || req->replace)
			queen_cfg_default(i, res);
		else
		{
			res->ival[i] = ival;
			res->sval[i] = sval;
		}

		if (queen_options[i].type == QUEEN_OPT_TEXT ?
			strcmp(sval, res->sval[i]) != 0 : ival != res->ival[i])
			changed = true;
	}
	return changed;
}

/*
 * Write the request: merged onto the locked row when the queue exists,
 * inserted otherwise.  Fills res with what the row holds afterwards.
 */
static void
queen_cfg_apply(const pg_uuid_t *tenant, const QueenCfgRequest *req,
				QueenCfgResult *res, MemoryContext out_cxt)
{
	Datum		values[QUEEN_NOPTIONS + 4];
	char		nulls[QUEEN_NOPTIONS + 4];
	int			attempt;
	int			i;

	queen_spi_connect();

	/*
	 * A queue that appears between our lookup and our insert (a push or
	 * another configure created it) makes the insert do nothing; the next
	 * round finds it, locks it and merges onto it.  Under REPEATABLE READ
	 * the insert raises a serialization failure instead.  Losing three
	 * rounds means the queue is being created and deleted in a loop.
	 */
	for (attempt = 0; attempt < 3; attempt++)
	{
		memset(nulls, ' ', sizeof(nulls));
		values[0] = UUIDPGetDatum(tenant);
		values[1] = CStringGetTextDatum(req->queue);
		queen_cfg_exec(QUEEN_CFG_LOCK, values, NULL, SPI_OK_SELECT);

		if (SPI_processed == 1)
		{
			bool		changed = queen_cfg_merge(req, res, out_cxt);

			SPI_freetuptable(SPI_tuptable);

			/*
			 * An unchanged row is not written: a configure that restates the
			 * configuration (SDKs configure at every start) then leaves no
			 * dead tuple and does not make pushes provisioning a partition
			 * of this queue wait for our commit, as a row being updated
			 * would (their INSERT ... ON CONFLICT waits on its updater).
			 */
			if (changed)
			{
				/* pushes later in this transaction must see the new window */
				queen_dedup_own_forget_windows();
				values[0] = UUIDPGetDatum(&res->id);
				values[1] = CStringGetTextDatum(res->label[0]);
				values[2] = CStringGetTextDatum(res->label[1]);
				for (i = 0; i < QUEEN_NOPTIONS; i++)
					values[3 + i] = queen_cfg_option_datum(i, res);
				queen_cfg_exec(QUEEN_CFG_UPDATE, values, nulls, SPI_OK_UPDATE);
				if (SPI_processed != 1)
					elog(ERROR, "queen: the locked queue row was not updated");
			}
			break;
		}
		SPI_freetuptable(SPI_tuptable);

		/* a new queue: everything not given is a configure default */
		for (i = 0; i < 2; i++)
		{
			if (req->label[i].kind == QUEEN_SPEC_VALUE)
				values[2 + i] = CStringGetTextDatum(req->label[i].sval);
			else if (req->label[i].kind == QUEEN_SPEC_DEFAULT)
				values[2 + i] = CStringGetTextDatum("");
			else
				nulls[2 + i] = 'n';
		}
		for (i = 0; i < QUEEN_NOPTIONS; i++)
		{
			if (req->opt[i].kind == QUEEN_SPEC_VALUE)
			{
				res->ival[i] = req->opt[i].ival;
				res->sval[i] = req->opt[i].sval;
			}
			else
				queen_cfg_default(i, res);
			values[4 + i] = queen_cfg_option_datum(i, res);
		}
		queen_cfg_exec(QUEEN_CFG_INSERT, values, nulls, SPI_OK_INSERT_RETURNING);
		if (SPI_processed == 1)
		{
			Datum		d;

			if (!queen_cfg_column(1, &d))
				elog(ERROR, "queen: queue without an id");
			memcpy(&res->id, DatumGetUUIDP(d), sizeof(pg_uuid_t));
			for (i = 0; i < 2; i++)
			{
				res->label[i] = queen_cfg_text_column(2 + i, out_cxt);
				if (res->label[i] == NULL)
					res->label[i] = "";
			}
			SPI_freetuptable(SPI_tuptable);
			break;
		}
		SPI_freetuptable(SPI_tuptable);
	}
	if (attempt == 3)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("queue \"%s\" kept changing while it was being configured",
						req->queue),
				 errdetail("It was created and deleted concurrently three times.")));

	SPI_finish();
}

/* Queen's echo: the effective row, every option under its JSON name. */
static void
queen_cfg_echo(StringInfo out, const char *queue, const QueenCfgResult *res)
{
	char		id[UUID_LEN * 2 + 5];
	int			i;

	queen_uuid_format(&res->id, id);
	appendStringInfo(out, "{\"configured\":true,\"queueId\":\"%s\",\"partitionId\":null,\"queue\":", id);
	escape_json(out, queue);
	appendStringInfoString(out, ",\"namespace\":");
	escape_json(out, res->label[0]);
	appendStringInfoString(out, ",\"task\":");
	escape_json(out, res->label[1]);
	/* a literal Queen keeps on the wire since it has one storage engine */
	appendStringInfoString(out, ",\"storage\":\"segments\",\"options\":{");
	for (i = 0; i < QUEEN_NOPTIONS; i++)
	{
		if (i > 0)
			appendStringInfoChar(out, ',');
		escape_json(out, queen_options[i].json);
		appendStringInfoChar(out, ':');
		switch (queen_options[i].type)
		{
			case QUEEN_OPT_INT:
				appendStringInfo(out, "%d", res->ival[i]);
				break;
			case QUEEN_OPT_BOOL:
				appendStringInfoString(out, res->ival[i] ? "true" : "false");
				break;
			case QUEEN_OPT_TEXT:
				escape_json(out, res->sval[i]);
				break;
		}
	}
	appendStringInfoString(out, "}}");
}

/*
 * The broker's shards keep serving while the extension is dropped and
 * created again, so a control request can find its tables gone: that is
 * 503, as for a push, not the 500 of the statement that would fail.
 */
static bool
queen_cfg_extension_missing(StringInfo out)
{
	if (OidIsValid(get_extension_oid("queen", true)))
		return false;
	appendStringInfoString(out, "{\"error\":\"extension queen is not installed in the broker's database\"}");
	return true;
}

static void
queen_cfg_error_body(StringInfo out, const QueenCfgError *err)
{
	appendStringInfoString(out, "{\"error\":");
	escape_json(out, err->message);
	if (err->invalid != NULL)
	{
		appendStringInfoString(out, ",\"invalid\":");
		escape_json(out, err->invalid);
	}
	appendStringInfoChar(out, '}');
}

/* Both doors: 200 and the echo, or 400 and err filled in (nothing written). */
static int
queen_configure_internal(const pg_uuid_t *tenant, const char *body, size_t len,
						 StringInfo out, QueenCfgError *err)
{
	QueenCfgRequest req;
	QueenCfgResult res;

	if (!queen_cfg_parse(body, len, &req, err))
		return 400;
	memset(&res, 0, sizeof(res));
	queen_cfg_apply(tenant, &req, &res, CurrentMemoryContext);
	queen_cfg_echo(out, req.queue, &res);
	return 200;
}

/*
 * POST /api/v1/configure, in the caller's transaction.  body need not be
 * NUL-terminated.  Returns 200 with Queen's echo appended to out, or 400
 * with {"error": ..., "invalid": <key>} and nothing written.  Raises only
 * when the database fails; SPI is connected and finished here, and an
 * ERROR leaves the connection to the (sub)transaction abort, as in the
 * allocator.
 */
int
queen_configure_queue(const pg_uuid_t *tenant, const char *body, size_t len,
					  StringInfo out)
{
	QueenCfgError err;
	int			status;

	if (queen_cfg_extension_missing(out))
		return 503;
	status = queen_configure_internal(tenant, body, len, out, &err);
	if (status != 200)
		queen_cfg_error_body(out, &err);
	return status;
}

/* ----------------------------------------------------------------
 *		Delete
 * ----------------------------------------------------------------
 */

/*
 * DELETE /api/v1/resources/queues/:queue, in the caller's transaction:
 * the queue row, its partitions, segments and log_txns rows.  A queue that
 * does not exist succeeds too, "deleted": true with "existed": false, as
 * Queen answers (its clients delete before they create, and check
 * "deleted").  400 only for a name that is not UTF-8, which no JSON reply
 * could carry; 503 when the extension is not installed (the broker runs
 * on).  Raises only when the database fails.
 */
int
queen_delete_queue(const pg_uuid_t *tenant, const char *queue, StringInfo out)
{
	Datum		values[2];
	pg_uuid_t	qid;
	bool		existed = false;

	if (!pg_verifymbstr(queue, strlen(queue), true))
	{
		QueenCfgError err = {"queue name is not valid UTF-8", "queue"};

		queen_cfg_error_body(out, &err);
		return 400;
	}
	if (queen_cfg_extension_missing(out))
		return 503;

	/* offsets this transaction deferred reach their rows before the rows go */
	queen_alloc_flush();
	queen_spi_connect();

	/*
	 * The queue row first: FOR UPDATE conflicts with the KEY SHARE a push
	 * takes to provision a partition, so no partition can appear after the
	 * ones locked below.  Then the partitions in ascending id, the order
	 * every push locks them in, which waits out pushes in flight.
	 */
	values[0] = UUIDPGetDatum(tenant);
	values[1] = CStringGetTextDatum(queue);
	queen_cfg_exec(QUEEN_CFG_DEL_LOCK_QUEUE, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		Datum		d;

		if (!queen_cfg_column(1, &d))
			elog(ERROR, "queen: queue without an id");
		memcpy(&qid, DatumGetUUIDP(d), sizeof(pg_uuid_t));
		existed = true;
	}
	SPI_freetuptable(SPI_tuptable);

	if (existed)
	{
		values[0] = UUIDPGetDatum(&qid);
		queen_cfg_exec(QUEEN_CFG_DEL_LOCK_PARTITIONS, values, NULL, SPI_OK_SELECT);
		SPI_freetuptable(SPI_tuptable);
		queen_cfg_exec(QUEEN_CFG_DEL_TXNS, values, NULL, SPI_OK_DELETE);
		queen_cfg_exec(QUEEN_CFG_DEL_QUEUE, values, NULL, SPI_OK_DELETE);
		/* later pushes in this transaction must not trust the rows they held */
		queen_dedup_own_unlock_all();
	}

	SPI_finish();

	appendStringInfoString(out, "{\"deleted\":true,\"queue\":");
	escape_json(out, queue);
	appendStringInfo(out, ",\"existed\":%s}", existed ? "true" : "false");
	return 200;
}

/* ----------------------------------------------------------------
 *		SQL functions
 * ----------------------------------------------------------------
 */

static const pg_uuid_t *
queen_cfg_tenant_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("tenant must not be NULL")));
	return PG_GETARG_UUID_P(argno);
}

/*
 * queen.configure_queue_v1(p_body jsonb, p_tenant uuid): the HTTP contract
 * from SQL.  A refused body raises 22023 with the response's error as the
 * message and its invalid key in the detail; otherwise the echo as jsonb.
 */
Datum
queen_configure_queue_v1(PG_FUNCTION_ARGS)
{
	Jsonb	   *body;
	const pg_uuid_t *tenant;
	StringInfoData text;
	StringInfoData out;
	QueenCfgError err;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("configure body must not be NULL")));
	body = PG_GETARG_JSONB_P(0);
	tenant = queen_cfg_tenant_arg(fcinfo, 1);

	initStringInfo(&text);
	JsonbToCString(&text, &body->root, VARSIZE(body));
	initStringInfo(&out);
	if (queen_configure_internal(tenant, text.data, text.len, &out, &err) != 200)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s", err.message),
				 err.invalid != NULL ? errdetail("invalid: %s", err.invalid) : 0));
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(out.data)));
}

/* queen.delete_queue_v1(p_queue text, p_tenant uuid) */
Datum
queen_delete_queue_v1(PG_FUNCTION_ARGS)
{
	const pg_uuid_t *tenant;
	char	   *queue;
	StringInfoData out;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue name must not be NULL")));
	queue = text_to_cstring(PG_GETARG_TEXT_PP(0));
	/* the names a push accepts, and the same errors (22023) for the others */
	queen_check_queue_name(queue, strlen(queue));
	tenant = queen_cfg_tenant_arg(fcinfo, 1);

	initStringInfo(&out);
	(void) queen_delete_queue(tenant, queue, &out);
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(out.data)));
}
