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

extern void queen_render_timestamp(StringInfo out, TimestampTz ts);
extern void queen_render_uuid(StringInfo out, const pg_uuid_t *id);
extern void queen_render_text(StringInfo out, const char *s);
extern void queen_render_pop(StringInfo out, const QueenPopRequest *req,
							 const QueenPopResult *res);
extern void queen_render_error(StringInfo out, const char *message, const char *invalid);
extern void queen_render_configured(StringInfo out, const QueenCfgResult *res);

#endif							/* QUEEN_RENDER_H */
