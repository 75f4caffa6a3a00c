/*-------------------------------------------------------------------------
 *
 * json_walk.c
 *	  PostgreSQL's JSON lexer, as every parser here runs it
 *	  (queen_json_walk), and the one walker the request bodies share
 *	  (queen_json_shape): the keys of the root object, of one object nested
 *	  under it and of each object of one array under it, captured by name.
 *
 * The bodies the doors read are shallow records: a configure body (root
 * keys, and an "options" object), an ack (root keys) or an ack batch (a
 * group, and an array of items), a lease extension ({"seconds": N}).  A
 * parser says which keys it wants at which level and gets their values,
 * as the body spelt them, with no tree built and nothing kept of the
 * keys it did not ask for.  Callers keep away first what would make the
 * lexer raise (bad UTF-8, nesting deep enough to exhaust the stack).
 *
 * A payload's check (validate.c) and its jsonb (read.c) look at every
 * value, not at named keys: they give queen_json_walk callbacks of their
 * own, set by queen_json_sem, one for a container's opening whatever its
 * kind (queen_json_opens_object tells).  The push body (push_body.c) runs
 * the lexer itself, since it keeps each payload as a raw span of the body.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "queen.h"
#include "json_walk.h"

#include "mb/pg_wchar.h"

/*
 * The lexer of the walk in progress, for queen_json_opens_object.  After an
 * error unwound a walk it points at a freed lexer, which is harmless: it is
 * read only inside a walk, and every walk sets it first.
 */
static JsonLexContext *queen_json_lexer = NULL;

/*
 * Run PostgreSQL's JSON parser over UTF-8 text with sem's callbacks,
 * escapes on (so \u0000, which jsonb cannot store, is an error).  Returns
 * NULL, or the parser's description of the first error.  Callers check the
 * encoding first: the lexer does not.
 */
char *
queen_json_walk(const char *text, size_t len, JsonSemAction *sem)
{
	JsonLexContext *lex = makeJsonLexContextCstringLen(unconstify(char *, text), (int) len,
													   PG_UTF8, true);
	JsonLexContext *outer = queen_json_lexer;
	JsonParseErrorType result;
	char	   *detail = NULL;

	queen_json_lexer = lex;
	result = pg_parse_json(lex, sem);
	queen_json_lexer = outer;
	if (result != JSON_SUCCESS)
		detail = json_errdetail(result, lex);

	/*
	 * Given back at once (PostgreSQL 15 has no call for it): a push
	 * validates every payload in one memory context, and lexers left there
	 * grew it by a kilobyte a message into blocks malloc maps afresh for
	 * every call, a fifth of a 160-message push's CPU in page faults.
	 */
	pfree(lex->strval->data);
	pfree(lex->strval);
	pfree(lex);
	return detail;
}

/*
 * In a container's opening callback of queen_json_walk: is it an object?
 * The parser calls it before it consumes the opening token, so one
 * callback serves objects and arrays.
 */
bool
queen_json_opens_object(void)
{
	return queen_json_lexer->token_type == JSON_TOKEN_OBJECT_START;
}

/*
 * The callbacks of a walk: open and close for every container, both kinds
 * (queen_json_opens_object tells them apart), and any of the others.
 */
void
queen_json_sem(JsonSemAction *sem, void *state, json_struct_action open,
			   json_struct_action close, json_ofield_action field_start,
			   json_ofield_action field_end, json_aelem_action element_start,
			   json_scalar_action scalar)
{
	memset(sem, 0, sizeof(*sem));
	sem->semstate = state;
	sem->object_start = sem->array_start = open;
	sem->object_end = sem->array_end = close;
	sem->object_field_start = field_start;
	sem->object_field_end = field_end;
	sem->array_element_start = element_start;
	sem->scalar = scalar;
}

/* What a token is, for a message: "a string", "an object". */
const char *
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

/* ----------------------------------------------------------------
 *		The shape walker
 * ----------------------------------------------------------------
 */

typedef struct QueenShapeWalk
{
	QueenJsonShape *shape;
	int			depth;			/* containers open around the parser */
	bool		in_nested;		/* inside the nested object (depth 2) */
	bool		in_array;		/* inside the array (depth 2) */
	bool		in_element;		/* inside one of its objects (depth 3) */
	int			nelements;
	QueenJsonValue *pending;	/* where the next value goes, or NULL */
	int			pending_key;	/* its index, at the root */
	int			pending_depth;
	QueenJsonValue *spanning[4];	/* a captured container open at each depth */
} QueenShapeWalk;

static QueenJsonValue *
queen_shape_slot(const QueenJsonKeys *keys, const char *name)
{
	int			i;

	for (i = 0; i < keys->nnames; i++)
		if (strcmp(name, keys->names[i]) == 0)
			return &keys->values[i];
	return NULL;
}

static void
queen_shape_record(QueenShapeWalk *w, JsonTokenType type, char *str)
{
	w->pending->type = type;
	w->pending->str = str;
	w->pending->len = str != NULL ? strlen(str) : 0;
	w->pending->span = NULL;
	w->pending->span_len = 0;
	w->pending = NULL;
}

static void
queen_shape_clear(QueenJsonKeys *keys, bool free_strings)
{
	int			i;

	for (i = 0; i < keys->nnames; i++)
	{
		if (free_strings && keys->values[i].str != NULL)
			pfree(keys->values[i].str);
		memset(&keys->values[i], 0, sizeof(QueenJsonValue));
	}
}

/* An element of the array ended (or, not being an object, was all there was). */
static void
queen_shape_element_end(QueenShapeWalk *w, bool object)
{
	QueenJsonShape *s = w->shape;
	bool		keep = s->element_end(s->arg, w->nelements++, object);

	queen_shape_clear(&s->element, !keep);
}

static void
queen_shape_field_start(void *state, char *fname, bool isnull)
{
	QueenShapeWalk *w = (QueenShapeWalk *) state;
	QueenJsonShape *s = w->shape;

	(void) isnull;
	w->pending = NULL;
	w->pending_key = -1;
	if (w->depth == 1)
	{
		w->pending = queen_shape_slot(&s->top, fname);
		if (w->pending != NULL)
			w->pending_key = (int) (w->pending - s->top.values);
	}
	else if (w->depth == 2 && w->in_nested)
		w->pending = queen_shape_slot(&s->inner, fname);
	else if (w->depth == 3 && w->in_element)
		w->pending = queen_shape_slot(&s->element, fname);
	w->pending_depth = w->depth;
}

static void
queen_shape_field_end(void *state, char *fname, bool isnull)
{
	QueenShapeWalk *w = (QueenShapeWalk *) state;

	(void) isnull;
	if (w->depth == w->pending_depth)
		w->pending = NULL;
	pfree(fname);
}

/* A container opens: the root, a captured key's value, or an element. */
static void
queen_shape_open(void *state)
{
	QueenShapeWalk *w = (QueenShapeWalk *) state;
	QueenJsonShape *s = w->shape;
	JsonTokenType kind = queen_json_opens_object() ? JSON_TOKEN_OBJECT_START : JSON_TOKEN_ARRAY_START;

	if (w->depth == 0)
		s->root_object = kind == JSON_TOKEN_OBJECT_START;
	else if (w->depth == 2 && w->in_array)
	{
		if (kind == JSON_TOKEN_OBJECT_START)
		{
			w->in_element = true;
			s->element_span = queen_json_lexer->token_start;
		}
		else
			queen_shape_element_end(w, false);
	}
	else if (w->pending != NULL && w->depth == w->pending_depth)
	{
		if (w->depth == 1 && w->pending_key == s->nested && kind == JSON_TOKEN_OBJECT_START)
		{
			queen_shape_clear(&s->inner, false);
			w->in_nested = true;
		}
		else if (w->depth == 1 && w->pending_key == s->array && kind == JSON_TOKEN_ARRAY_START)
		{
			w->in_array = true;
			w->nelements = 0;
			if (s->array_begin != NULL)
				s->array_begin(s->arg);
		}
		/* where its text starts: the parser has not consumed the bracket yet */
		w->spanning[w->depth] = w->pending;
		queen_shape_record(w, kind, NULL);
		w->spanning[w->depth]->span = queen_json_lexer->token_start;
	}
	w->depth++;
}

static void
queen_shape_close(void *state)
{
	QueenShapeWalk *w = (QueenShapeWalk *) state;

	w->depth--;
	if (w->depth < (int) lengthof(w->spanning) && w->spanning[w->depth] != NULL)
	{
		QueenJsonValue *v = w->spanning[w->depth];

		/* the closing bracket is consumed: the previous token ends the value */
		v->span_len = queen_json_lexer->prev_token_terminator - v->span;
		w->spanning[w->depth] = NULL;
	}
	if (w->depth == 2 && w->in_element)
	{
		w->in_element = false;
		w->shape->element_span_len = queen_json_lexer->prev_token_terminator -
			w->shape->element_span;
		queen_shape_element_end(w, true);
	}
	else if (w->depth == 1)
		w->in_nested = w->in_array = false;
}

static void
queen_shape_scalar(void *state, char *token, JsonTokenType type)
{
	QueenShapeWalk *w = (QueenShapeWalk *) state;

	if (w->depth == 2 && w->in_array)
	{
		queen_shape_element_end(w, false);
		if (token != NULL)
			pfree(token);
	}
	else if (w->pending != NULL && w->depth == w->pending_depth)
		queen_shape_record(w, type, token);
	else if (token != NULL)
		pfree(token);
}

/*
 * Walk text (UTF-8, shallow enough for the lexer: the caller checked) and
 * fill the shape's values.  NULL, or the lexer's description of the first
 * error; shape->root_object says whether the root was an object.
 */
char *
queen_json_shape(const char *text, size_t len, QueenJsonShape *shape)
{
	QueenShapeWalk w;
	JsonSemAction sem;

	memset(&w, 0, sizeof(w));
	w.shape = shape;
	shape->root_object = false;
	queen_shape_clear(&shape->top, false);
	if (shape->inner.nnames > 0)
		queen_shape_clear(&shape->inner, false);
	if (shape->element.nnames > 0)
		queen_shape_clear(&shape->element, false);
	queen_json_sem(&sem, &w, queen_shape_open, queen_shape_close, queen_shape_field_start,
				   queen_shape_field_end, NULL, queen_shape_scalar);
	return queen_json_walk(text, len, &sem);
}

/*
 * A shape that reads the root object's keys (names, n of them) into values
 * (cleared here), and no nested object or array of elements.
 */
void
queen_json_shape_keys(QueenJsonShape *shape, const char *const *names, int n,
					  QueenJsonValue *values)
{
	memset(shape, 0, sizeof(*shape));
	memset(values, 0, sizeof(QueenJsonValue) * n);
	shape->top.names = names;
	shape->top.nnames = n;
	shape->top.values = values;
	shape->nested = shape->array = -1;
}

/* ... and the objects of the top key array's array, their keys into values. */
void
queen_json_shape_array(QueenJsonShape *shape, int array, const char *const *names, int n,
					   QueenJsonValue *values, void (*begin) (void *arg),
					   bool (*end) (void *arg, int index, bool object), void *arg)
{
	shape->array = array;
	shape->element.names = names;
	shape->element.nnames = n;
	shape->element.values = values;
	shape->array_begin = begin;
	shape->element_end = end;
	shape->arg = arg;
}

/*
 * The one key a body is read for ({"seconds": N}, {"enabled": true}):
 * NULL and its value (absent: JSON_TOKEN_INVALID), or why the body is not
 * a JSON object.
 */
char *
queen_json_key(const char *text, size_t len, const char *name, QueenJsonValue *value)
{
	QueenJsonShape shape;
	char	   *problem;

	queen_json_shape_keys(&shape, &name, 1, value);
	problem = queen_json_shape(text, len, &shape);
	if (problem != NULL)
		return psprintf("invalid JSON: %s", problem);
	if (!shape.root_object)
		return pstrdup("body must be a JSON object");
	return NULL;
}

/* ----------------------------------------------------------------
 *		An array of strings
 * ----------------------------------------------------------------
 */

typedef struct QueenStringArray
{
	QueenJsonTake take;
	void	   *arg;
	int			depth;
	int			index;
	char	   *problem;
} QueenStringArray;

static void
queen_strings_open(void *state)
{
	QueenStringArray *a = (QueenStringArray *) state;

	if (a->depth++ == 1 && a->problem == NULL)
		a->problem = psprintf("element %d is not a string", a->index);
}

static void
queen_strings_close(void *state)
{
	((QueenStringArray *) state)->depth--;
}

static void
queen_strings_scalar(void *state, char *token, JsonTokenType type)
{
	QueenStringArray *a = (QueenStringArray *) state;

	if (a->depth != 1)
		return;
	if (a->problem == NULL)
		a->problem = type != JSON_TOKEN_STRING ?
			psprintf("element %d is not a string", a->index) :
			a->take(a->arg, a->index, token, strlen(token));
	a->index++;
}

/*
 * The strings of a JSON array (text is the array, checked as a body is):
 * each handed to take in order, de-escaped and its own.  NULL, or why not:
 * the lexer's error, an element that is not a string, or the first thing
 * take refused.
 */
char *
queen_json_strings(const char *text, size_t len, QueenJsonTake take, void *arg)
{
	QueenStringArray a = {take, arg, 0, 0, NULL};
	JsonSemAction sem;
	char	   *problem;

	if (len == 0 || text[0] != '[')
		return pstrdup("not an array");
	queen_json_sem(&sem, &a, queen_strings_open, queen_strings_close, NULL, NULL, NULL,
				   queen_strings_scalar);
	problem = queen_json_walk(text, len, &sem);
	return problem != NULL ? problem : a.problem;
}
