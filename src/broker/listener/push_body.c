/*-------------------------------------------------------------------------
 *
 * push_body.c
 *	  Splitting an HTTP push body ({"items": [...]}) into items, and the
 *	  SQL hook queen._parse_push_body that lets the tests reach it.
 *
 * The broker sees every push body once, on the hot path, and only needs
 * three short strings per item plus the payload exactly as the client sent
 * it.  Building a jsonb tree would copy and re-serialize every payload, so
 * this runs PostgreSQL's own parser (pg_parse_json) with semantic actions
 * that only look at the three levels that matter: the top object, the items
 * array and each item object.  A payload is never copied: the item points
 * at its span inside the body.
 *
 * Everything here is answered with a message instead of an ERROR, because
 * the caller turns it into a 400: bad input never raises (only running out
 * of memory does).  Two things in pg_parse_json could raise on input, and
 * both are kept away from it: check_stack_depth() on deep nesting (bodies
 * are refused above QUEEN_PUSH_MAX_DEPTH levels before parsing) and the
 * conversion of \u escapes to the server encoding (refused unless it is
 * UTF8, which Queen requires).
 *
 * Duplicate keys behave as in jsonb, so the HTTP door and queen.push(jsonb)
 * agree: the last "items" of the body wins, and so does the last "queue",
 * "partition", "transactionId" or "payload" of an item.  That is why items
 * are checked when their object ends, not key by key.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "push_body.h"
#include "json_walk.h"
#include "validate.h"
#include "codec.h"

#include "common/jsonapi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(queen_parse_push_body_sql);

/*
 * Deepest nesting of arrays and objects accepted in a body (the envelope
 * takes 3 levels).  pg_parse_json recurses once per level and calls
 * check_stack_depth(), which raises.  A level costs about 150 bytes of
 * stack, so this fits even the smallest max_stack_depth (100kB) from a
 * shallow caller (tested); the default is 2MB.  queen.push(jsonb) is
 * bounded by the stack alone, so it takes deeper payloads than this door.
 */
#define QUEEN_PUSH_MAX_DEPTH		512

/* Longest excerpt of the parser's own detail kept in a message, in bytes. */
#define QUEEN_PUSH_MAX_DETAIL		200

/* Which key of an item object the parser is inside. */
typedef enum QueenPushKey
{
	QUEEN_PUSH_KEY_OTHER,
	QUEEN_PUSH_KEY_QUEUE,
	QUEEN_PUSH_KEY_PARTITION,
	QUEEN_PUSH_KEY_TXN,
	QUEEN_PUSH_KEY_PAYLOAD
} QueenPushKey;

/* The last value seen for one string key of the current item. */
typedef struct QueenPushString
{
	JsonTokenType type;			/* JSON_TOKEN_INVALID when the key is absent */
	char	   *str;			/* de-escaped copy; NULL unless a string
								 * within the length limit */
	size_t		len;			/* de-escaped length when a string */
} QueenPushString;

typedef struct QueenPushState
{
	JsonLexContext *lex;
	char	   *error;			/* first problem; later ones are not looked for */
	bool		top_is_object;
	bool		saw_items;
	bool		in_items;		/* inside the value of a top-level "items" array */
	int			nelements;		/* elements of that array seen so far */
	QueenPushKey key;			/* item key whose value is being parsed */

	/* the current item */
	QueenPushString queue;
	QueenPushString partition;
	QueenPushString txn;
	bool		have_payload;
	const char *payload_start;
	const char *payload;
	size_t		payload_len;

	/* the result */
	QueenHttpItem *items;
	int			nitems;
	int			maxitems;
	int			limit;			/* most items accepted; 0 = no limit */
	bool		too_many;		/* the body has more than limit */
	char	   *default_partition;	/* shared by every item without one */
} QueenPushState;

/* Keep the first problem only: it is the one the client should fix first. */
static void
queen_push_fail(QueenPushState *st, char *message)
{
	if (st->error == NULL)
		st->error = message;
	else
		pfree(message);
}

static void
queen_push_forget(QueenPushString *s)
{
	if (s->str != NULL)
		pfree(s->str);
	s->str = NULL;
	s->type = JSON_TOKEN_INVALID;
	s->len = 0;
}

/*
 * Remember the value the lexer has just read for a string key.  At
 * object_field_start the parser has already lexed the value's first token,
 * so for a string lex->strval holds it de-escaped.  Values over the limit
 * are not copied: only their length goes into the message.
 */
static void
queen_push_capture(QueenPushState *st, QueenPushString *s, size_t max_len)
{
	JsonLexContext *lex = st->lex;

	queen_push_forget(s);
	s->type = lex->token_type;
	if (s->type != JSON_TOKEN_STRING)
		return;
	s->len = (size_t) lex->strval->len;
	if (s->len > max_len)
		return;
	/* strval is NUL-terminated, and \u0000 was refused, so len is exact */
	s->str = palloc(s->len + 1);
	memcpy(s->str, lex->strval->data, s->len + 1);
}

/* Check one name of the item; false (and the problem recorded) if bad. */
static bool
queen_push_name_ok(QueenPushState *st, const char *what,
				   const QueenPushString *s, size_t max_len)
{
	const char *problem;
	int			index = st->nelements - 1;

	if (s->len > max_len)
	{
		queen_push_fail(st, psprintf("items[%d]: %s is too long (%zu bytes, the limit is %zu)",
									 index, what, s->len, max_len));
		return false;
	}
	problem = queen_name_problem(s->str, s->len, max_len);
	if (problem != NULL)
	{
		queen_push_fail(st, psprintf("items[%d]: %s %s", index, what, problem));
		return false;
	}
	return true;
}

/*
 * The item object ended: check it as a whole (so the last of duplicate keys
 * is the one checked, and the order of checks does not depend on the order
 * of keys) and append it.  The order follows queen.push: types, then
 * required keys, then names.
 */
static void
queen_push_item_end(QueenPushState *st)
{
	int			index = st->nelements - 1;
	QueenHttpItem *item;

	if (st->queue.type != JSON_TOKEN_INVALID &&
		st->queue.type != JSON_TOKEN_STRING)
	{
		queen_push_fail(st, psprintf("items[%d]: queue must be a string", index));
		return;
	}
	if (st->partition.type != JSON_TOKEN_INVALID &&
		st->partition.type != JSON_TOKEN_NULL &&
		st->partition.type != JSON_TOKEN_STRING)
	{
		queen_push_fail(st, psprintf("items[%d]: partition must be a string", index));
		return;
	}
	if (st->txn.type != JSON_TOKEN_INVALID &&
		st->txn.type != JSON_TOKEN_NULL &&
		st->txn.type != JSON_TOKEN_STRING)
	{
		queen_push_fail(st, psprintf("items[%d]: transactionId must be a string", index));
		return;
	}
	if (st->queue.type == JSON_TOKEN_INVALID)
	{
		queen_push_fail(st, psprintf("items[%d]: missing queue", index));
		return;
	}
	if (!st->have_payload)
	{
		queen_push_fail(st, psprintf("items[%d]: missing payload", index));
		return;
	}
	if (!queen_push_name_ok(st, "queue name", &st->queue, QUEEN_MAX_NAME_BYTES))
		return;
	if (st->partition.type == JSON_TOKEN_STRING &&
		!queen_push_name_ok(st, "partition name", &st->partition, QUEEN_MAX_NAME_BYTES))
		return;
	/* an empty transactionId means "mint one", as in queen.push */
	if (st->txn.type == JSON_TOKEN_STRING && st->txn.len > 0 &&
		!queen_push_name_ok(st, "transactionId", &st->txn, QUEEN_MAX_TXN_BYTES))
		return;

	if (st->limit > 0 && st->nitems == st->limit)
	{
		st->too_many = true;
		queen_push_fail(st, psprintf("more than %d items in one request; send them in several",
									 st->limit));
		return;
	}
	if (st->nitems == st->maxitems)
	{
		/* doubling keeps appends O(1) amortized; never ask palloc for more than it gives */
		if ((Size) st->maxitems >= MaxAllocSize / sizeof(QueenHttpItem) / 2)
		{
			queen_push_fail(st, psprintf("too many items (more than %d)", st->maxitems));
			return;
		}
		st->maxitems = st->maxitems == 0 ? 16 : st->maxitems * 2;
		if (st->items == NULL)
			st->items = palloc(sizeof(QueenHttpItem) * st->maxitems);
		else
			st->items = repalloc(st->items, sizeof(QueenHttpItem) * st->maxitems);
	}
	item = &st->items[st->nitems++];

	/* the strings move into the item */
	item->queue = st->queue.str;
	item->queue_len = st->queue.len;
	st->queue.str = NULL;
	if (st->partition.type == JSON_TOKEN_STRING)
	{
		item->partition = st->partition.str;
		item->partition_len = st->partition.len;
		st->partition.str = NULL;
	}
	else
	{
		if (st->default_partition == NULL)
			st->default_partition = pstrdup("Default");
		item->partition = st->default_partition;
		item->partition_len = strlen("Default");
	}
	if (st->txn.type == JSON_TOKEN_STRING && st->txn.len > 0)
	{
		item->txn = st->txn.str;
		item->txn_len = st->txn.len;
		st->txn.str = NULL;
	}
	else
	{
		item->txn = NULL;
		item->txn_len = 0;
	}
	item->payload = st->payload;
	item->payload_len = st->payload_len;
}

/*
 * Semantic actions.  lex_level says where the parser is: the top object's
 * keys are at level 1, the elements of its items array at level 2 and the
 * keys of an item at level 3; anything deeper is inside a payload or an
 * ignored key and only passes through.  The callbacks cannot stop the
 * parse (raising is the only way), so after the first problem they keep
 * only the bookkeeping that tells the levels apart.
 */
static void
queen_push_object_start(void *state)
{
	QueenPushState *st = (QueenPushState *) state;
	int			level = st->lex->lex_level;

	if (level == 0)
		st->top_is_object = true;
	else if (level == 2 && st->in_items)
	{
		queen_push_forget(&st->queue);
		queen_push_forget(&st->partition);
		queen_push_forget(&st->txn);
		st->have_payload = false;
	}
}

static void
queen_push_object_end(void *state)
{
	QueenPushState *st = (QueenPushState *) state;

	if (st->lex->lex_level == 2 && st->in_items && st->error == NULL)
		queen_push_item_end(st);
}

static void
queen_push_element_start(void *state, bool isnull)
{
	QueenPushState *st = (QueenPushState *) state;

	(void) isnull;
	if (st->lex->lex_level != 2 || !st->in_items)
		return;
	st->nelements++;
	/* the parser has already read the element's first token */
	if (st->error == NULL && st->lex->token_type != JSON_TOKEN_OBJECT_START)
		queen_push_fail(st, psprintf("items[%d] must be an object", st->nelements - 1));
}

static void
queen_push_field_start(void *state, char *fname, bool isnull)
{
	QueenPushState *st = (QueenPushState *) state;
	JsonLexContext *lex = st->lex;
	int			level = lex->lex_level;

	(void) isnull;
	if (level == 1)
	{
		if (strcmp(fname, "items") != 0)
			return;
		/* last one wins: forget what an earlier "items" produced */
		st->saw_items = true;
		if (st->error != NULL)
			pfree(st->error);
		st->error = NULL;
		st->nitems = 0;
		st->nelements = 0;
		if (lex->token_type == JSON_TOKEN_ARRAY_START)
			st->in_items = true;
		else
			queen_push_fail(st, pstrdup("items must be an array"));
		return;
	}
	if (level != 3 || !st->in_items)
		return;

	if (strcmp(fname, "queue") == 0)
		st->key = QUEEN_PUSH_KEY_QUEUE;
	else if (strcmp(fname, "partition") == 0)
		st->key = QUEEN_PUSH_KEY_PARTITION;
	else if (strcmp(fname, "transactionId") == 0)
		st->key = QUEEN_PUSH_KEY_TXN;
	else if (strcmp(fname, "payload") == 0)
		st->key = QUEEN_PUSH_KEY_PAYLOAD;
	else
		st->key = QUEEN_PUSH_KEY_OTHER;
	if (st->error != NULL)
		return;

	switch (st->key)
	{
		case QUEEN_PUSH_KEY_QUEUE:
			queen_push_capture(st, &st->queue, QUEEN_MAX_NAME_BYTES);
			break;
		case QUEEN_PUSH_KEY_PARTITION:
			queen_push_capture(st, &st->partition, QUEEN_MAX_NAME_BYTES);
			break;
		case QUEEN_PUSH_KEY_TXN:
			queen_push_capture(st, &st->txn, QUEEN_MAX_TXN_BYTES);
			break;
		case QUEEN_PUSH_KEY_PAYLOAD:
			/* the value's first token is already lexed: this is its start */
			st->payload_start = lex->token_start;
			break;
		case QUEEN_PUSH_KEY_OTHER:
			break;
	}
}

static void
queen_push_field_end(void *state, char *fname, bool isnull)
{
	QueenPushState *st = (QueenPushState *) state;
	int			level = st->lex->lex_level;

	(void) isnull;
	if (level == 1)
		st->in_items = false;
	else if (level == 3 && st->in_items && st->key == QUEEN_PUSH_KEY_PAYLOAD &&
			 st->error == NULL)
	{
		/*
		 * The token after the value (',' or '}') has been lexed, so the
		 * previous terminator ends the value: the span jsonfuncs.c uses
		 * for json_object_field.
		 */
		st->payload = st->payload_start;
		st->payload_len = st->lex->prev_token_terminator - st->payload_start;
		st->have_payload = true;

		/*
		 * jsonb has size limits JSON text does not (QUEEN_JSONB_SAFE_TEXT);
		 * only a payload long enough to reach them is lexed again to check.
		 */
		if (st->payload_len > QUEEN_JSONB_SAFE_TEXT)
		{
			char	   *problem = queen_json_problem(st->payload, st->payload_len);

			if (problem != NULL)
				queen_push_fail(st, psprintf("items[%d]: the payload cannot be stored: %s",
											 st->nelements - 1, problem));
		}
	}

	/* the parser is done with the key; payload keys would pile up otherwise */
	if (fname != NULL)
		pfree(fname);
}

/*
 * Every number in the body, payloads included, must be one jsonb can hold:
 * what this door accepts, queen.read must be able to return.  Only set when
 * queen_json_numbers_need_check says a body may hold such a number: asking
 * the parser for scalars costs a copy of each one.
 */
static void
queen_push_scalar(void *state, char *token, JsonTokenType type)
{
	QueenPushState *st = (QueenPushState *) state;

	if (type == JSON_TOKEN_NUMBER && st->error == NULL)
	{
		const char *problem = queen_json_number_problem(token, strlen(token));

		if (problem != NULL)
			queen_push_fail(st, psprintf("items[%d]: the number %.40s%s cannot be stored: %s",
										 Max(st->nelements - 1, 0), token,
										 strlen(token) > 40 ? "..." : "", problem));
	}
	pfree(token);
}

/*
 * Refuse nesting deeper than QUEEN_PUSH_MAX_DEPTH before pg_parse_json
 * recurses into it.  Up to the parser's first syntax error its depth is
 * exactly this count (brackets outside strings), and it recurses no
 * further after an error, so this bounds its recursion on any input.
 */
static bool
queen_push_too_deep(const char *body, size_t len)
{
	const char *p = body;
	const char *end = body + len;
	int			depth = 0;

	while (p < end)
	{
		char		c = *p++;

		if (c == '"')
		{
			/*
			 * Payload strings are most of a body: jump quote to quote with
			 * memchr.  A quote ends the string unless an odd run of
			 * backslashes precedes it; each run is counted once, so this
			 * stays linear.
			 */
			for (;;)
			{
				const char *q = memchr(p, '"', end - p);
				const char *b;

				if (q == NULL)
					return false;	/* unterminated: the parser reports it */
				for (b = q; b > p && b[-1] == '\\'; b--)
					;
				p = q + 1;
				if ((q - b) % 2 == 0)
					break;
			}
		}
		else if (c == '{' || c == '[')
		{
			if (++depth > QUEEN_PUSH_MAX_DEPTH)
				return true;
		}
		else if (c == '}' || c == ']')
			depth--;
	}
	return false;
}

/*
 * What keeps a body away from pg_parse_json's two ways of raising (see the
 * header comment), and what every body of this door must be: NULL, or why
 * the body cannot be parsed.  Every JSON body the listener reads passes
 * here first (push_body.c, consume_body.c).
 */
char *
queen_body_problem(const char *body, size_t len)
{
	/* the lexer counts in int; palloc'd buffers never exceed this anyway */
	if (len > MaxAllocSize)
		return psprintf("body is too large (%zu bytes, the limit is %zu)",
						len, (size_t) MaxAllocSize);
	/* before the UTF-8 check, which refuses NUL too, for a clearer message */
	if (len > 0 && memchr(body, '\0', len) != NULL)
		return pstrdup("body contains a NUL byte");
	if (!pg_verify_mbstr(PG_UTF8, body, (int) len, true))
		return pstrdup("body is not valid UTF-8");
	/* the lexer converts \u escapes to the server encoding, raising if it cannot */
	if (GetDatabaseEncoding() != PG_UTF8)
		return pstrdup("the database encoding is not UTF8");
	if (queen_push_too_deep(body, len))
		return psprintf("body is nested too deeply (more than %d levels)",
						QUEEN_PUSH_MAX_DEPTH);
	return NULL;
}

/* The parser's detail, cut at a character boundary if it quotes a lot. */
static char *
queen_push_json_error(JsonParseErrorType result, JsonLexContext *lex)
{
	const char *detail = json_errdetail(result, lex);
	size_t		len = strlen(detail);

	if (len <= QUEEN_PUSH_MAX_DETAIL)
		return psprintf("invalid JSON: %s", detail);
	len = QUEEN_PUSH_MAX_DETAIL;
	/* the body is valid UTF-8; back off continuation bytes */
	while (len > 0 && ((unsigned char) detail[len] & 0xC0) == 0x80)
		len--;
	return psprintf("invalid JSON: %.*s...", (int) len, detail);
}

/*
 * Parse and validate a push body.  Returns NULL and sets *items (palloc'd,
 * at least one element long) and *nitems, or returns a message for a 400
 * and sets nothing.  Strings in the items are read-only: items without a
 * partition share one "Default", and payloads point into body, which must
 * outlive them.  With max_items > 0, a body with more items is refused
 * with *too_many set (a 413): the list stops growing at max_items, so what
 * a request costs its caller per item is bounded however small its items.
 */
const char *
queen_parse_push_body(const char *body, size_t len, int max_items,
					  QueenHttpItem **items, int *nitems, bool *too_many)
{
	QueenPushState st;
	JsonSemAction sem;
	JsonLexContext *lex;
	JsonParseErrorType result;
	char	   *error = NULL;

	*too_many = false;
	error = queen_body_problem(body, len);
	if (error != NULL)
		return error;

	memset(&st, 0, sizeof(st));
	memset(&sem, 0, sizeof(sem));
	st.limit = max_items;
	/* need_escapes: names arrive de-escaped, and \u0000 is refused */
	lex = makeJsonLexContextCstringLen(unconstify(char *, body), (int) len,
									   PG_UTF8, true);
	st.lex = lex;
	sem.semstate = &st;
	sem.object_start = queen_push_object_start;
	sem.object_end = queen_push_object_end;
	sem.array_element_start = queen_push_element_start;
	sem.object_field_start = queen_push_field_start;
	sem.object_field_end = queen_push_field_end;
	if (queen_json_numbers_need_check(body, len))
		sem.scalar = queen_push_scalar;

	result = pg_parse_json(lex, &sem);

	/* a syntax error anywhere outranks what the items said before it */
	if (result != JSON_SUCCESS)
		error = queen_push_json_error(result, lex);
	else if (!st.top_is_object)
		error = pstrdup("body must be a JSON object");
	else if (st.error != NULL)
	{
		error = st.error;
		*too_many = st.too_many;
	}
	else if (!st.saw_items)
		error = pstrdup("missing items");

	queen_push_forget(&st.queue);
	queen_push_forget(&st.partition);
	queen_push_forget(&st.txn);
	pfree(lex->strval->data);
	pfree(lex->strval);
	pfree(lex);

	if (error != NULL)
		return error;
	if (st.items == NULL)
		st.items = palloc(sizeof(QueenHttpItem));
	*items = st.items;
	*nitems = st.nitems;
	return NULL;
}

/*
 * The body of POST /api/v1/system/maintenance: a JSON object whose
 * "enabled" is a boolean.  Returns false for anything else, with the
 * same guards against raising as push bodies.
 */
bool
queen_parse_enabled_body(const char *body, size_t len, bool *enabled)
{
	QueenJsonValue value;

	if (len > 65536 || queen_body_problem(body, len) != NULL ||
		queen_json_key(body, len, "enabled", &value) != NULL ||
		(value.type != JSON_TOKEN_TRUE && value.type != JSON_TOKEN_FALSE))
		return false;
	*enabled = value.type == JSON_TOKEN_TRUE;
	return true;
}

/*
 * queen._parse_push_body(body text) -> text
 *
 * For the regression tests: "error: <message>", or one line per item,
 * "queue|partition|transactionId or NULL|payload as sent".
 */
Datum
queen_parse_push_body_sql(PG_FUNCTION_ARGS)
{
	text	   *body = PG_GETARG_TEXT_PP(0);
	QueenHttpItem *items;
	int			nitems;
	bool		too_many;
	const char *error;
	StringInfoData out;
	int			i;

	error = queen_parse_push_body(VARDATA_ANY(body), VARSIZE_ANY_EXHDR(body),
								  0, &items, &nitems, &too_many);
	initStringInfo(&out);
	if (error != NULL)
		appendStringInfo(&out, "error: %s", error);
	for (i = 0; error == NULL && i < nitems; i++)
	{
		if (i > 0)
			appendStringInfoChar(&out, '\n');
		appendBinaryStringInfo(&out, items[i].queue, items[i].queue_len);
		appendStringInfoChar(&out, '|');
		appendBinaryStringInfo(&out, items[i].partition, items[i].partition_len);
		appendStringInfoChar(&out, '|');
		if (items[i].txn != NULL)
			appendBinaryStringInfo(&out, items[i].txn, items[i].txn_len);
		else
			appendStringInfoString(&out, "NULL");
		appendStringInfoChar(&out, '|');
		appendBinaryStringInfo(&out, items[i].payload, items[i].payload_len);
	}
	PG_RETURN_TEXT_P(cstring_to_text_with_len(out.data, out.len));
}
