/*-------------------------------------------------------------------------
 *
 * configure.h
 *	  Queue configuration and deletion (configure.c): what the broker's
 *	  control requests and the SQL functions (configure_sql.c) call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEEN_CONFIGURE_H
#define QUEEN_CONFIGURE_H

#include "queen.h"

/*
 * POST /api/v1/configure and DELETE /api/v1/resources/queues/:queue, in the
 * caller's transaction.  Each returns an HTTP status and appends the JSON
 * body to out: configure answers 200 with the effective configuration or
 * 400 with {"error", "invalid"} having written nothing; delete answers 200
 * whether or not the queue existed (400 only for a name that is not UTF-8).
 * They raise only when the database fails.  Both connect to SPI and finish
 * it themselves.
 */
extern int	queen_configure_queue(const pg_uuid_t *tenant, const char *body,
								  size_t len, StringInfo out);
extern int	queen_delete_queue(const pg_uuid_t *tenant, const char *queue,
							   StringInfo out);

/* Why a body was refused: the message, and the key at fault (or NULL). */
typedef struct QueenCfgError
{
	char	   *message;
	const char *invalid;
} QueenCfgError;

/*
 * Configure without the extension check and the error body: 200 and the
 * echo in out, or 400 with err filled in and nothing written.  For the SQL
 * function, which raises err instead of answering it.
 */
extern int	queen_configure_body(const pg_uuid_t *tenant, const char *body,
								 size_t len, StringInfo out, QueenCfgError *err);

#endif							/* QUEEN_CONFIGURE_H */
