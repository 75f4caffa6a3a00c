/*-------------------------------------------------------------------------
 *
 * render.h
 *	  The JSON bodies of the consumption routes (render.c): the pop body of
 *	  reference 4.5, and the timestamps every consumption answer shows.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_RENDER_H
#define QUEEN_RENDER_H

#include "consume.h"

#include "lib/stringinfo.h"

extern void queen_render_timestamp(StringInfo out, TimestampTz ts);
extern void queen_render_uuid(StringInfo out, const pg_uuid_t *id);
extern void queen_render_text(StringInfo out, const char *s);
extern void queen_render_pop(StringInfo out, const QueenPopRequest *req,
							 const QueenPopResult *res);

#endif							/* QUEEN_RENDER_H */
