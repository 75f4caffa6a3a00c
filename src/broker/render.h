/*-------------------------------------------------------------------------
 *
 * render.h
 *	  The JSON bodies the broker builds from the core's results (render.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_RENDER_H
#define QUEEN_RENDER_H

#include "configure_parse.h"
#include "consume.h"

#include "lib/stringinfo.h"

/*
 * An answer's object as data: each key, the kind of its value and where
 * the value sits in the core's result struct (answers.c states them).
 */
typedef enum QueenRenderKind
{
	QUEEN_RENDER_TEXT,			/* char *, NULL: null */
	QUEEN_RENDER_JSON,			/* char * holding JSON text, NULL: null */
	QUEEN_RENDER_UUID,			/* pg_uuid_t */
	QUEEN_RENDER_TIME,			/* TimestampTz */
	QUEEN_RENDER_I32,			/* int32 */
	QUEEN_RENDER_I64,			/* int64 */
	QUEEN_RENDER_TEXTS,			/* QueenTexts: an array of strings */
	QUEEN_RENDER_NULL			/* always null (a key kept for Queen's clients) */
} QueenRenderKind;

typedef struct QueenRenderField
{
	const char *key;
	uint8		kind;			/* QueenRenderKind */
	uint16		offset;
} QueenRenderField;

typedef struct QueenRenderShape
{
	const QueenRenderField *fields;
	int			nfields;
} QueenRenderShape;

#define QUEEN_RENDER_FIELD(type, member, key, kind) {(key), (kind), offsetof(type, member)}
#define QUEEN_RENDER_SHAPE(fields) {(fields), lengthof(fields)}

extern void queen_render_object(StringInfo out, const QueenRenderShape *shape, const void *obj);
extern void queen_render_objects(StringInfo out, const QueenRenderShape *shape, const void *objs,
								 Size size, int n);

/* The shapes of the listings' elements (answers.c). */
extern const QueenRenderShape queen_answer_dlq_entry;
extern const QueenRenderShape queen_answer_trace;
extern const QueenRenderShape queen_answer_trace_by_name;
extern const QueenRenderShape queen_answer_trace_name;
extern const QueenRenderShape queen_answer_state_row;

extern void queen_render_timestamp(StringInfo out, TimestampTz ts);
extern void queen_render_uuid(StringInfo out, const pg_uuid_t *id);
extern void queen_render_text(StringInfo out, const char *s);
extern void queen_render_pop(StringInfo out, const QueenPopRequest *req,
							 const QueenPopResult *res);
extern void queen_render_error(StringInfo out, const char *message, const char *invalid);
extern void queen_render_configured(StringInfo out, const QueenCfgResult *res);

#endif							/* QUEEN_RENDER_H */
