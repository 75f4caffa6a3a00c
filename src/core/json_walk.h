/*-------------------------------------------------------------------------
 *
 * json_walk.h
 *	  One walker over PostgreSQL's JSON lexer for the request bodies the
 *	  doors read (json_walk.c): the keys of the root object, of one nested
 *	  object, and of each object of one array, captured by name, with no
 *	  tree built.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_JSON_WALK_H
#define QUEEN_JSON_WALK_H

#include "common/jsonapi.h"

/*
 * A value as the body spelt it: absent (JSON_TOKEN_INVALID, the zero), a
 * scalar with its token (a string de-escaped), or a container, kept as its
 * kind (JSON_TOKEN_OBJECT_START or JSON_TOKEN_ARRAY_START) and the span of
 * the body it takes, for a caller that reads it further.  The
 * last of duplicate keys wins, as in jsonb.
 */
typedef struct QueenJsonValue
{
	JsonTokenType type;
	char	   *str;
	size_t		len;
	const char *span;			/* a container: its text in the body (not a copy) */
	size_t		span_len;
} QueenJsonValue;

/* The keys captured at one level, and their values once walked. */
typedef struct QueenJsonKeys
{
	const char *const *names;
	int			nnames;
	QueenJsonValue *values;		/* nnames slots */
} QueenJsonKeys;

typedef struct QueenJsonShape
{
	QueenJsonKeys top;			/* the root object's keys */
	int			nested;			/* a top key whose object's keys go to inner; -1 */
	QueenJsonKeys inner;		/* a later such object replaces an earlier whole */
	int			array;			/* a top key whose array holds elements; -1 */
	QueenJsonKeys element;		/* an element object's keys, cleared for each */
	void		(*array_begin) (void *arg); /* such an array opens */

	/*
	 * After each element of that array (object false: it is not an object).
	 * True keeps what was captured (the callback took the pointers); false
	 * frees it, so a body whose items are refused costs no memory.
	 */
	bool		(*element_end) (void *arg, int index, bool object);
	void	   *arg;
	const char *element_span;	/* in element_end: the element's text */
	size_t		element_span_len;
	bool		root_object;	/* out: the root is an object */
} QueenJsonShape;

extern char *queen_json_walk(const char *text, size_t len, JsonSemAction *sem);
extern bool queen_json_opens_object(void);
extern void queen_json_sem(JsonSemAction *sem, void *state, json_struct_action open,
						   json_struct_action close, json_ofield_action field_start,
						   json_ofield_action field_end, json_aelem_action element_start,
						   json_scalar_action scalar);
extern char *queen_json_shape(const char *text, size_t len, QueenJsonShape *shape);
extern void queen_json_shape_keys(QueenJsonShape *shape, const char *const *names, int n,
								  QueenJsonValue *values);
extern void queen_json_shape_array(QueenJsonShape *shape, int array, const char *const *names,
								   int n, QueenJsonValue *values, void (*begin) (void *arg),
								   bool (*end) (void *arg, int index, bool object), void *arg);
extern char *queen_json_key(const char *text, size_t len, const char *name,
						   QueenJsonValue *value);
extern const char *queen_json_kind(JsonTokenType type);

/* What queen_json_strings hands each string: NULL to go on, or why not. */
typedef char *(*QueenJsonTake) (void *arg, int index, char *str, size_t len);
extern char *queen_json_strings(const char *text, size_t len, QueenJsonTake take, void *arg);

#endif							/* QUEEN_JSON_WALK_H */
