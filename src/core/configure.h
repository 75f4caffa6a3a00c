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

/* Why a body was refused: the message, and the key at fault (or NULL). */
typedef struct QueenCfgError
{
	char	   *message;
	const char *invalid;
} QueenCfgError;

/* The effective configuration of a queue (its options: configure_parse.h). */
typedef struct QueenCfgResult QueenCfgResult;

/*
 * Configure and delete a queue, in the caller's transaction: what the
 * broker's control operations and the SQL functions (configure_sql.c)
 * call.  Each answers in C; the doors render it (the broker as Queen's
 * JSON, the SQL door as jsonb).  Both connect to SPI and finish it
 * themselves, and raise only when the database fails.
 */
extern bool queen_configure(const pg_uuid_t *tenant, const char *body, size_t len,
							QueenCfgResult *res, QueenCfgError *err);
extern bool queen_delete_queue(const pg_uuid_t *tenant, const char *queue,
							   bool *existed, QueenCfgError *err);
extern bool queen_extension_installed(void);

#endif							/* QUEEN_CONFIGURE_H */
